//! Secrets phase: generated once into Secrets the Broker owns before any pod exists,
//! - the HA handshake secret of a Broker that names none (replicating brokers refuse to
//!   start without it), immutable;
//! - the admin secret (`<name>-admin-secret`, key `adminSecret`) of every Broker: its
//!   brokers refuse unsigned role changes and config pushes with it, and the operator
//!   signs those with it (`crate::reconcile::admin_credentials`). Mutable, so that it can
//!   be rotated by editing it (`old,new`, then `new,old`, then `new`).
//!
//! Created with POST only, so an existing Secret is never replaced or rotated by a
//! reconcile; the value is never logged and never leaves the Secret (pods take it via
//! `secretKeyRef`).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, PostParams};
use ring::rand::{SecureRandom, SystemRandom};

use super::Reconciliation;
use crate::crd::{ADMIN_SECRET_KEY, Broker, HA_SECRET_KEY};
use crate::names::{BrokerNames, object_labels};
use crate::reconcile::{Context, Error};

/// Random bytes in a generated HA secret (hex-encoded into the Secret: 64 characters).
pub const HA_SECRET_BYTES: usize = 32;

/// Makes sure the generated Secrets exist, and says so with a `HaSecretGenerated` or
/// `AdminSecretGenerated` Event when this reconcile created one.
pub async fn ensure(ctx: &Context, broker: &Broker, rec: &Reconciliation) -> Result<(), Error> {
    let admin = rec.names.admin_secret();
    if create(ctx, broker, &rec.names, &admin, ADMIN_SECRET_KEY, false).await? {
        rec.event(
            ctx,
            false,
            "AdminSecretGenerated",
            "Reconcile",
            format!("generated the brokers' admin secret into Secret {admin}"),
        )
        .await;
    }
    if ensure_ha_secret(ctx, broker, &rec.names).await? {
        rec.event(
            ctx,
            false,
            "HaSecretGenerated",
            "Reconcile",
            format!(
                "generated the HA handshake secret into Secret {}",
                rec.names.ha_secret()
            ),
        )
        .await;
    }
    Ok(())
}

/// Makes sure the generated HA Secret exists when the spec names none. Returns whether
/// this call created it.
async fn ensure_ha_secret(
    ctx: &Context,
    broker: &Broker,
    names: &BrokerNames,
) -> Result<bool, Error> {
    if broker.spec.security.ha_secret.is_some() {
        return Ok(false);
    }
    // Immutable: nobody rotates it by accident; replacing it means deleting it (the
    // operator then generates a new one and every pod must restart to pick it up).
    create(ctx, broker, names, &names.ha_secret(), HA_SECRET_KEY, true).await
}

/// POSTs Secret `name` with a generated value under `key` unless it exists. Returns
/// whether this call created it.
async fn create(
    ctx: &Context,
    broker: &Broker,
    names: &BrokerNames,
    name: &str,
    key: &str,
    immutable: bool,
) -> Result<bool, Error> {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(names.namespace.clone()),
            labels: Some(object_labels(&names.selector())),
            owner_references: broker.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        immutable: immutable.then_some(true),
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            key.to_owned(),
            ByteString(generate()?.into_bytes()),
        )])),
        ..Secret::default()
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &names.namespace);
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(true),
        // Already there (created by an earlier reconcile): left exactly as it is.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// 32 bytes from the OS generator, hex-encoded (the broker takes the secret as text; 64
/// characters, above `adminSecret`'s minimum).
fn generate() -> Result<String, Error> {
    let mut bytes = [0u8; HA_SECRET_BYTES];
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
        assert_eq!(a.len(), 2 * HA_SECRET_BYTES);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
