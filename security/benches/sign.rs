//! ACL 1.0 signatures on the produce path: signing and verifying a 1 KiB
//! SEND_MESSAGE_V2, against the previous implementation (the content concatenated, then
//! ring's HMAC-SHA1) as the baseline measured in the same run. Run with
//! `cargo bench -p rmq-security --bench sign`.

use std::hint::black_box;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use criterion::{Criterion, criterion_group, criterion_main};
use protocol::RemotingCommand;
use protocol::code::request;
use security::sign::{Credentials, SIGNATURE, sign_request};

/// A SEND_MESSAGE_V2 as `rmq-bench producer -s 1024` sends it, unsigned.
fn send_v2() -> RemotingCommand {
    let mut cmd = RemotingCommand::bare_request(request::SEND_MESSAGE_V2);
    for (k, v) in [
        ("a", "BenchProducerGroup"),
        ("b", "BenchSec"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "3"),
        ("f", "0"),
        ("g", "1764650000000"),
        ("h", "0"),
        (
            "i",
            "UNIQ_KEY\u{1}7F000001A1B2C3D4E5F60000000000000001\u{2}WAIT\u{1}true\u{2}",
        ),
        ("j", "0"),
        ("k", "false"),
        ("m", "false"),
    ] {
        cmd.ext_fields.insert(k, v);
    }
    cmd.with_body(vec![b'x'; 1024])
}

/// The implementation this crate had before: the signed content built as one buffer,
/// then ring's HMAC-SHA1 (its SHA-1 is portable Rust, with no SHA-NI path).
fn ring_sign(cmd: &mut RemotingCommand, creds: &Credentials) {
    use ring::hmac;
    cmd.ext_fields
        .insert_static(security::sign::ACCESS_KEY, creds.access_key.clone());
    let mut content = Vec::with_capacity(cmd.body.len() + 16 * cmd.ext_fields.len());
    for (key, value) in cmd.ext_fields.iter() {
        if key != SIGNATURE {
            content.extend_from_slice(value.as_bytes());
        }
    }
    content.extend_from_slice(&cmd.body);
    let key = hmac::Key::new(
        hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        creds.secret_key().expose().as_bytes(),
    );
    let tag = hmac::sign(&key, &content);
    cmd.ext_fields
        .insert_static(SIGNATURE, STANDARD.encode(tag.as_ref()));
}

fn bench_sign(c: &mut Criterion) {
    let creds = Credentials::new("benchAdmin", "benchAdminSecret");
    let unsigned = send_v2();

    // Same bytes either way, or the comparison means nothing.
    let (mut a, mut b) = (unsigned.clone(), unsigned.clone());
    sign_request(&mut a, &creds);
    ring_sign(&mut b, &creds);
    assert_eq!(a.ext_fields.get(SIGNATURE), b.ext_fields.get(SIGNATURE));

    let mut group = c.benchmark_group("sign_send_v2_1KiB");
    group.bench_function("ring_baseline", |bench| {
        bench.iter(|| {
            let mut cmd = unsigned.clone();
            ring_sign(&mut cmd, black_box(&creds));
            black_box(cmd)
        })
    });
    group.bench_function("sign_request", |bench| {
        bench.iter(|| {
            let mut cmd = unsigned.clone();
            sign_request(&mut cmd, black_box(&creds));
            black_box(cmd)
        })
    });
    // The floor any implementation pays: the MAC over the content, already contiguous
    // and keyed, with no header walk, Base64 or comparison.
    group.bench_function("hmac_sha1_content_only", |bench| {
        use hmac::{Mac as _, digest::KeyInit as _};
        let mut content = Vec::new();
        for (key, value) in a.ext_fields.iter() {
            if key != SIGNATURE {
                content.extend_from_slice(value.as_bytes());
            }
        }
        content.extend_from_slice(&a.body);
        let keyed = hmac::Hmac::<sha1::Sha1>::new_from_slice(b"benchAdminSecret").expect("any key");
        bench.iter(|| {
            let mut mac = keyed.clone();
            mac.update(black_box(&content));
            black_box(mac.finalize().into_bytes())
        })
    });
    group.bench_function("verify", |bench| {
        let key = security::sign::SigningKey::new("benchAdminSecret");
        bench.iter(|| assert!(key.verify(black_box(&a))))
    });
    group.finish();
}

criterion_group!(benches, bench_sign);
criterion_main!(benches);
