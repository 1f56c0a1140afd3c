//! Signatures made by an independent implementation (`sign_vectors.py`, Python's
//! `hmac`/`hashlib`/`base64`) are accepted by [`security::sign::verify`], and copies
//! with the body, one extField or the key changed are refused.

use std::process::Command;

use protocol::RemotingCommand;
use security::sign::{self, SIGNATURE};

struct Vector {
    cmd: RemotingCommand,
    secret: String,
}

fn vectors() -> Vec<Vector> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sign_vectors.py");
    let out = Command::new("python3")
        .arg(script)
        .output()
        .expect("python3 must be installed to run the signature vectors");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON vectors");
    doc.as_array()
        .expect("a list")
        .iter()
        .map(|v| {
            let code = v["code"].as_i64().expect("code") as i32;
            let body = hex(v["body"].as_str().expect("body"));
            let mut cmd = RemotingCommand::bare_request(code).with_body(body);
            for (k, val) in v["fields"].as_object().expect("fields") {
                cmd.ext_fields
                    .insert(k.as_str(), val.as_str().expect("string value"));
            }
            cmd.ext_fields
                .insert(SIGNATURE, v["signature"].as_str().expect("signature"));
            Vector {
                cmd,
                secret: v["secret"].as_str().expect("secret").to_owned(),
            }
        })
        .collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn python_signatures_are_accepted_and_tampering_refused() {
    let all = vectors();
    assert!(all.len() > 40);
    assert_eq!(
        all[0].cmd.ext_fields.get(SIGNATURE),
        Some("MZMl/tnB5TWtKGZZnoH2OYQjwd4="),
        "the Python signer reproduces the reference example"
    );
    for (i, v) in all.iter().enumerate() {
        assert!(sign::verify(&v.cmd, &v.secret), "vector {i} refused");

        // Our own signer agrees byte for byte.
        let mut ours = v.cmd.clone();
        ours.ext_fields.remove(SIGNATURE);
        let ak = ours
            .ext_fields
            .get(sign::ACCESS_KEY)
            .unwrap_or("")
            .to_owned();
        let token = ours.ext_fields.get(sign::SECURITY_TOKEN).map(str::to_owned);
        let mut creds = sign::Credentials::new(ak, v.secret.clone());
        creds.security_token = token.map(sign::Secret::new);
        sign::sign_request(&mut ours, &creds);
        assert_eq!(
            ours.ext_fields.get(SIGNATURE),
            v.cmd.ext_fields.get(SIGNATURE),
            "vector {i}"
        );

        // Body changed (one byte flipped, or one appended to an empty body).
        let mut body = v.cmd.body.to_vec();
        match body.first_mut() {
            Some(b) => *b ^= 1,
            None => body.push(b'x'),
        }
        let tampered = v.cmd.clone().with_body(body);
        assert!(!sign::verify(&tampered, &v.secret), "vector {i}: body");

        // One extField changed.
        let (key, value) = v
            .cmd
            .ext_fields
            .iter()
            .find(|(k, _)| *k != SIGNATURE && *k != sign::ACCESS_KEY)
            .map(|(k, val)| (k.to_owned(), val.to_owned()))
            .expect("a field to change");
        let mut tampered = v.cmd.clone();
        tampered.ext_fields.insert(key, format!("{value}!"));
        assert!(!sign::verify(&tampered, &v.secret), "vector {i}: extField");

        // Wrong key.
        assert!(
            !sign::verify(&v.cmd, &format!("{}x", v.secret)),
            "vector {i}: key"
        );
    }
}
