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

use kube::Resource;

use super::Reconciliation;
use crate::crd::{ADMIN_SECRET_KEY, Broker, HA_SECRET_KEY};
use crate::names::{BrokerNames, object_labels};
use crate::reconcile::generated_secret::{self, Generated};
use crate::reconcile::{Context, Error};

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

/// Generates Secret `name` (key `key`) owned by the Broker unless it exists. Returns
/// whether this call created it.
async fn create(
    ctx: &Context,
    broker: &Broker,
    names: &BrokerNames,
    name: &str,
    key: &str,
    immutable: bool,
) -> Result<bool, Error> {
    generated_secret::ensure(
        ctx,
        Generated {
            namespace: &names.namespace,
            name,
            key,
            labels: object_labels(&names.selector()),
            owner: broker.controller_owner_ref(&()),
            immutable,
        },
    )
    .await
}
