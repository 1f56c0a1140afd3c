//! Secrets the operator generates (HA handshake and admin secrets): created once with
//! POST, owned by the resource they serve, never replaced or rotated by a reconcile, and
//! their values never logged (pods take them via `secretKeyRef`).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};
use ring::rand::{SecureRandom, SystemRandom};

use crate::reconcile::{Context, Error};

/// Random bytes in a generated secret (hex-encoded into the Secret: 64 characters, above
/// `adminSecret`'s minimum).
pub const SECRET_BYTES: usize = 32;

/// What a generated Secret is made of, apart from its value.
pub struct Generated<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub key: &'a str,
    pub labels: BTreeMap<String, String>,
    pub owner: Option<OwnerReference>,
    /// Immutable Secrets cannot be edited, only deleted (then generated anew).
    pub immutable: bool,
}

/// POSTs the Secret with a generated value unless it exists. Returns whether this call
/// created it.
pub async fn ensure(ctx: &Context, g: Generated<'_>) -> Result<bool, Error> {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(g.name.to_owned()),
            namespace: Some(g.namespace.to_owned()),
            labels: Some(g.labels),
            owner_references: g.owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        immutable: g.immutable.then_some(true),
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            g.key.to_owned(),
            ByteString(generate()?.into_bytes()),
        )])),
        ..Secret::default()
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), g.namespace);
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(true),
        // Already there (created by an earlier reconcile): left exactly as it is.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// [`SECRET_BYTES`] from the OS generator, hex-encoded.
fn generate() -> Result<String, Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_secrets_are_long_and_distinct() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_eq!(a.len(), 2 * SECRET_BYTES);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
