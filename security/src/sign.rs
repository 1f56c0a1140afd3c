//! The request signature of RocketMQ 4.9's ACL 1.0 (`AclClientRPCHook`,
//! `AclUtils.combineRequestContent`, `AclSigner`).
//!
//! Content = the values (no keys, no separators) of every extField except `Signature`,
//! in ascending key order, then the raw body. Signature = Base64(HmacSHA1(secretKey,
//! content)). Request code, opaque, flag, version and remark are not covered (a 4.9
//! property: a captured request can be replayed; TLS is the answer to that).
//!
//! Key order: [`ExtFields`] keeps its entries sorted by key bytes, which for ASCII keys
//! (all RocketMQ header keys) is Java's `String.compareTo` order.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{KeyInit as _, Mac as _};
use protocol::{ExtFields, RemotingCommand};

type HmacSha1 = hmac::Hmac<sha1::Sha1>;

pub const ACCESS_KEY: &str = "AccessKey";
pub const SIGNATURE: &str = "Signature";
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// Added outside the header by QUERY_MESSAGE (`MixAll.UNIQUE_MSG_QUERY_FLAG`). 4.9
/// brokers leave it out of the content while 4.9.4+ clients sign it (issues #5310,
/// #5636): [`verify`] accepts either.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

/// A secret that never appears in `Debug`/`Display` output.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The secret itself: only for computing a signature or writing the ACL file.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// What a client signs with.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub access_key: String,
    secret_key: Secret,
    /// Sent and signed as `SecurityToken` when set (4.9's STS tokens; the broker does
    /// not check it beyond the signature). A credential: it never prints either.
    pub security_token: Option<Secret>,
    /// `secret_key` keyed once: a client signs every request it sends.
    key: SigningKey,
    /// Whether each signed request gets a fresh timestamp and nonce
    /// ([`crate::freshness::stamp`]): what admin-secret signatures carry.
    stamped: bool,
}

impl PartialEq for Credentials {
    fn eq(&self, other: &Self) -> bool {
        (&self.access_key, &self.secret_key, &self.security_token)
            == (&other.access_key, &other.secret_key, &other.security_token)
    }
}

impl Eq for Credentials {}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialsError {
    #[error("{0}: cannot read the credentials file ({1})")]
    Read(String, String),
    #[error(
        "{0}: no {1} in the credentials file (expected `accessKey: ...` and `secretKey: ...` lines)"
    )]
    Missing(String, &'static str),
    #[error("an access key needs a secret key and the other way round")]
    Half,
}

impl Credentials {
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        let secret_key = Secret::new(secret_key);
        Self {
            access_key: access_key.into(),
            key: SigningKey::new(secret_key.expose()),
            secret_key,
            security_token: None,
            stamped: false,
        }
    }

    /// These credentials, stamping every request they sign with a timestamp and a nonce
    /// inside the signed fields, so that a server keeping a [`crate::freshness::ReplayGuard`]
    /// refuses a replay.
    pub fn stamped(mut self) -> Self {
        self.stamped = true;
        self
    }

    /// The secret (fixed at construction: the signing key is derived from it).
    pub fn secret_key(&self) -> &Secret {
        &self.secret_key
    }

    /// Both parts or neither: a lone access key or secret is a configuration error.
    pub fn from_parts(
        access_key: Option<String>,
        secret_key: Option<String>,
    ) -> Result<Option<Self>, CredentialsError> {
        let blank = |s: &Option<String>| s.as_deref().is_none_or(|s| s.trim().is_empty());
        match (blank(&access_key), blank(&secret_key)) {
            (true, true) => Ok(None),
            (false, false) => Ok(Some(Self::new(
                access_key.unwrap_or_default().trim(),
                secret_key.unwrap_or_default().trim(),
            ))),
            _ => Err(CredentialsError::Half),
        }
    }

    /// Reads `accessKey` / `secretKey` (and optionally `securityToken`) from a file of
    /// `key: value` or `key=value` lines: mqadmin's `conf/tools.yml` format, or a
    /// properties file (what a mounted Kubernetes Secret rendered as a file looks like).
    pub fn from_file(path: &std::path::Path) -> Result<Self, CredentialsError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| CredentialsError::Read(name.clone(), e.kind().to_string()))?;
        let mut ak = None;
        let mut sk = None;
        let mut token = None;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let Some((key, value)) = line.split_once([':', '=']) else {
                continue;
            };
            let value = value.trim().trim_matches(['"', '\'']).to_owned();
            match key.trim() {
                "accessKey" => ak = Some(value),
                "secretKey" => sk = Some(value),
                "securityToken" => token = Some(value),
                _ => {}
            }
        }
        let ak = ak
            .filter(|s| !s.is_empty())
            .ok_or(CredentialsError::Missing(name.clone(), "accessKey"))?;
        let sk = sk
            .filter(|s| !s.is_empty())
            .ok_or(CredentialsError::Missing(name, "secretKey"))?;
        let mut creds = Self::new(ak, sk);
        creds.security_token = token.filter(|t| !t.is_empty()).map(Secret::new);
        Ok(creds)
    }
}

/// Feeds the signed content to `mac`: the extField values (all but `Signature` and the
/// `skip`ped keys) in key order, then the body; streamed, never concatenated. Base64 of
/// the resulting HmacSHA1 tag is the signature (`AclSigner.calSignature`).
fn update(mac: &mut HmacSha1, fields: &ExtFields, body: &[u8], skip: &[&str]) {
    for (key, value) in fields.iter() {
        if key == SIGNATURE || skip.contains(&key) {
            continue;
        }
        mac.update(value.as_bytes());
    }
    mac.update(body);
}

/// Adds `AccessKey` (and `SecurityToken`) and the `Signature` over the command as it
/// will be sent. Call it after the header and body are final; the opaque may still
/// change (it is not signed).
pub fn sign_request(cmd: &mut RemotingCommand, creds: &Credentials) {
    // `insert` keeps short values inline (no allocation per request).
    cmd.ext_fields.insert(ACCESS_KEY, creds.access_key.as_str());
    if let Some(token) = &creds.security_token {
        cmd.ext_fields.insert(SECURITY_TOKEN, token.expose());
    }
    if creds.stamped {
        crate::freshness::stamp(cmd);
    }
    let mut mac = creds.key.0.clone();
    update(&mut mac, &cmd.ext_fields, &cmd.body, &[]);
    let tag = mac.finalize();
    cmd.ext_fields
        .insert_static(SIGNATURE, STANDARD.encode(tag.into_bytes()));
}

/// Whether `cmd` carries a `Signature` made with `secret`.
pub fn verify(cmd: &RemotingCommand, secret: &str) -> bool {
    SigningKey::new(secret).verify(cmd)
}

/// A secret's HMAC key with its inner and outer pads already hashed: what an ACL account
/// keeps, so that checking a request hashes only its content.
#[derive(Clone)]
pub struct SigningKey(HmacSha1);

impl SigningKey {
    pub fn new(secret: &str) -> Self {
        // HMAC takes keys of any length (longer ones are hashed first): this cannot fail.
        Self(HmacSha1::new_from_slice(secret.as_bytes()).expect("HMAC accepts any key"))
    }

    /// Whether `cmd` carries a `Signature` made with this key. The tags are compared in
    /// constant time (4.9 compares strings with `equals`).
    pub fn verify(&self, cmd: &RemotingCommand) -> bool {
        let Some(presented) = cmd.ext_fields.get(SIGNATURE) else {
            return false;
        };
        // A SHA-1 tag is 20 bytes; anything that decodes longer is not one.
        let mut tag = [0u8; 32];
        let Ok(len) = STANDARD.decode_slice(presented.trim(), &mut tag) else {
            return false;
        };
        let signed = |skip: &[&str]| {
            let mut mac = self.0.clone();
            update(&mut mac, &cmd.ext_fields, &cmd.body, skip);
            mac.verify_slice(&tag[..len]).is_ok()
        };
        signed(&[])
            || (cmd.ext_fields.contains_key(UNIQUE_KEY_QUERY) && signed(&[UNIQUE_KEY_QUERY]))
    }
}

impl SigningKey {
    /// Whether `tag` is this key's HMAC-SHA1 of `data` (the 5.x gRPC clients sign their
    /// `x-mq-date-time` value this way), compared in constant time.
    pub fn verify_bytes(&self, data: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.0.clone();
        mac.update(data);
        mac.verify_slice(tag).is_ok()
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset_update() -> RemotingCommand {
        let mut cmd = RemotingCommand::bare_request(15);
        for (k, v) in [
            ("consumerGroup", "groupB"),
            ("topic", "topicB"),
            ("queueId", "0"),
            ("commitOffset", "100"),
        ] {
            cmd.ext_fields.insert(k, v);
        }
        cmd
    }

    /// The worked example of the reference notes (computed there with Python's `hmac`).
    #[test]
    fn reference_vector() {
        let mut cmd = offset_update();
        sign_request(&mut cmd, &Credentials::new("RocketMQ", "12345678"));
        assert_eq!(
            cmd.ext_fields.get(SIGNATURE),
            Some("MZMl/tnB5TWtKGZZnoH2OYQjwd4=")
        );
        assert!(verify(&cmd, "12345678"));
        let mut with_body = offset_update().with_body(&b"{\"x\":1}"[..]);
        sign_request(&mut with_body, &Credentials::new("RocketMQ", "12345678"));
        assert_eq!(
            with_body.ext_fields.get(SIGNATURE),
            Some("6EeKWQJm0vaa93oIAtLG2VRtUEU=")
        );
    }

    #[test]
    fn tampering_is_detected() {
        let mut cmd = offset_update().with_body(&b"abc"[..]);
        sign_request(&mut cmd, &Credentials::new("RocketMQ", "12345678"));
        assert!(verify(&cmd, "12345678"));
        assert!(!verify(&cmd, "12345679"));
        let mut body = cmd.clone().with_body(&b"abd"[..]);
        assert!(!verify(&body, "12345678"));
        body.body = cmd.body.clone();
        body.ext_fields.insert("queueId", "1");
        assert!(!verify(&body, "12345678"));
        let mut garbage = cmd.clone();
        garbage.ext_fields.insert(SIGNATURE, "not base64 !");
        assert!(!verify(&garbage, "12345678"));
        // A prefix of the right tag, an empty one, and one too long for the buffer.
        let good = STANDARD
            .decode(cmd.ext_fields.get(SIGNATURE).unwrap())
            .unwrap();
        for forged in [
            STANDARD.encode(&good[..10]),
            String::new(),
            STANDARD.encode([good.as_slice(), &[0; 40]].concat()),
        ] {
            garbage.ext_fields.insert(SIGNATURE, forged.clone());
            assert!(!verify(&garbage, "12345678"), "{forged:?}");
        }
        let mut unsigned = cmd;
        unsigned.ext_fields.remove(SIGNATURE);
        assert!(!verify(&unsigned, "12345678"));
    }

    #[test]
    fn unique_key_query_signed_or_not() {
        let creds = Credentials::new("RocketMQ", "12345678");
        // 4.9.4+ client: signs the flag.
        let mut new_client = RemotingCommand::bare_request(12);
        new_client.ext_fields.insert("topic", "t");
        new_client.ext_fields.insert(UNIQUE_KEY_QUERY, "true");
        sign_request(&mut new_client, &creds);
        assert!(verify(&new_client, "12345678"));
        // Older client: adds the flag after signing.
        let mut old_client = RemotingCommand::bare_request(12);
        old_client.ext_fields.insert("topic", "t");
        sign_request(&mut old_client, &creds);
        old_client.ext_fields.insert(UNIQUE_KEY_QUERY, "true");
        assert!(verify(&old_client, "12345678"));
    }

    #[test]
    fn secrets_do_not_print_and_files_parse() {
        let mut c = Credentials::new("ak_admin", "s3cr3t-value");
        c.security_token = Some(Secret::new("t0ken-value"));
        let printed = format!("{c:?}");
        assert!(
            !printed.contains("s3cr3t") && !printed.contains("t0ken"),
            "{printed}"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tools.yml");
        std::fs::write(
            &p,
            "# mqadmin\naccessKey: rocketmq2\nsecretKey: \"12345678\"\n",
        )
        .unwrap();
        let c = Credentials::from_file(&p).unwrap();
        assert_eq!(c.access_key, "rocketmq2");
        assert_eq!(c.secret_key.expose(), "12345678");
        std::fs::write(&p, "accessKey=a\n").unwrap();
        assert!(matches!(
            Credentials::from_file(&p),
            Err(CredentialsError::Missing(_, "secretKey"))
        ));
        assert_eq!(
            Credentials::from_parts(Some("a".into()), None),
            Err(CredentialsError::Half)
        );
        assert_eq!(Credentials::from_parts(None, Some(" ".into())), Ok(None));
    }
}
