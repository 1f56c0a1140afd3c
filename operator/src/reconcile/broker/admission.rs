//! The phases that can end a Broker reconcile before anything is touched: the pause
//! annotation, the admin credentials every call to the pods is signed with, and the
//! referenced NameServer whose stable DNS names make up `namesrvAddr`.

use std::ops::ControlFlow;
use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;

use super::Reconciliation;
use crate::admin::Admin;
use crate::conditions::{self, Desired};
use crate::crd::{Broker, BrokerStatus, NameServer};
use crate::names::{ANNOTATION_PAUSE, NameServerNames, annotation_is};
use crate::reconcile::admin_credentials::{self, admin_for};
use crate::reconcile::apply::patch_status;
use crate::reconcile::{Context, Error, PROGRESS_POLL, RESYNC};

/// Pause phase: with `rmq-rs.dev/pause-reconciliation: "true"` only the condition
/// `ReconciliationPaused=True` is written and nothing else is touched.
pub async fn pause(
    ctx: &Context,
    broker: &Broker,
    rec: &Reconciliation,
) -> Result<ControlFlow<Action>, Error> {
    if !annotation_is(
        broker.metadata.annotations.as_ref(),
        ANNOTATION_PAUSE,
        "true",
    ) {
        return Ok(ControlFlow::Continue(()));
    }
    let status = paused_status(&rec.stored, rec.generation, rec.now);
    if status != rec.stored {
        patch_status::<Broker, _>(&ctx.client, &rec.namespace, &rec.name, &status).await?;
    }
    Ok(ControlFlow::Break(Action::requeue(RESYNC)))
}

/// The stored status with `ReconciliationPaused=True` set (its other conditions kept as
/// they were: a paused object reports what it last saw).
fn paused_status(
    stored: &BrokerStatus,
    generation: Option<i64>,
    now: k8s_openapi::jiff::Timestamp,
) -> BrokerStatus {
    BrokerStatus {
        conditions: conditions::paused(&stored.conditions, generation, now),
        ..stored.clone()
    }
}

/// Admin credentials phase: the client every admin call to this Broker's pods goes
/// through, signed with `spec.security.adminCredentials` when set. When they cannot be
/// read, `Ready=False` names why and no admin request is sent.
pub async fn admin_client(
    ctx: &Context,
    broker: &Broker,
    rec: &Reconciliation,
) -> Result<Arc<dyn Admin>, Error> {
    match admin_for(ctx, broker).await {
        Ok(admin) => Ok(admin),
        Err(Error::Credentials(problem)) => {
            Err(admin_credentials::report(ctx, broker, &rec.stored, problem).await)
        }
        Err(e) => Err(e),
    }
}

/// Nameserver list phase: `namesrvAddr` from the referenced NameServer's stable DNS
/// names. Without the NameServer the reconcile stops at `Ready=False`
/// `NameServerNotFound` and polls.
pub async fn nameserver_list(
    ctx: &Context,
    broker: &Broker,
    rec: &Reconciliation,
) -> Result<ControlFlow<Action, String>, Error> {
    let ns_api: Api<NameServer> = Api::namespaced(ctx.client.clone(), &rec.namespace);
    let ns_name = &broker.spec.name_server_ref.name;
    let Some(nameserver) = ns_api.get_opt(ns_name).await? else {
        let status = nameserver_missing(
            &rec.stored,
            ns_name,
            &rec.namespace,
            rec.generation,
            rec.now,
        );
        if status != rec.stored {
            patch_status::<Broker, _>(&ctx.client, &rec.namespace, &rec.name, &status).await?;
            rec.event(
                ctx,
                true,
                "NameServerNotFound",
                "Reconcile",
                format!("waiting for NameServer {ns_name}"),
            )
            .await;
        }
        return Ok(ControlFlow::Break(Action::requeue(PROGRESS_POLL)));
    };
    if let Some(problem) = tls_mismatch(broker, &nameserver) {
        let status = not_ready(&rec.stored, TLS_PEER_MISMATCH, &problem, rec);
        if status != rec.stored {
            patch_status::<Broker, _>(&ctx.client, &rec.namespace, &rec.name, &status).await?;
            rec.event(ctx, true, TLS_PEER_MISMATCH, "Reconcile", problem)
                .await;
        }
        return Ok(ControlFlow::Break(Action::requeue(PROGRESS_POLL)));
    }
    Ok(ControlFlow::Continue(
        NameServerNames::of(&nameserver)
            .addresses(nameserver.spec.replicas, &ctx.settings.cluster_domain)
            .join(";"),
    ))
}

/// Reason of the `Ready=False` condition when the Broker's and its NameServer's TLS modes
/// would leave the brokers unable to register.
pub const TLS_PEER_MISMATCH: &str = "TlsPeerMismatch";

/// Why `broker`'s pods could not reach `nameserver` with these TLS specs, if they could
/// not: an enforcing NameServer refuses the plaintext registrations of a Broker that does
/// not enforce (`tls.enable` is only set by `enforcing`), and an enforcing Broker dials
/// TLS, which a NameServer without `tls` does not speak.
pub fn tls_mismatch(broker: &Broker, nameserver: &NameServer) -> Option<String> {
    let ns_name = nameserver.metadata.name.as_deref().unwrap_or_default();
    let broker_tls = broker.spec.security.tls.as_ref();
    let ns_tls = nameserver.spec.security.tls.as_ref();
    let broker_enforces = broker_tls.is_some_and(|t| t.enforcing());
    let ns_enforces = ns_tls.is_some_and(|t| t.enforcing());
    if ns_enforces && !broker_enforces {
        return Some(format!(
            "NameServer {ns_name} has spec.security.tls.mode=enforcing, so it refuses              plaintext registrations; set spec.security.tls with mode: enforcing on this              Broker so its brokers register over TLS"
        ));
    }
    if broker_enforces && ns_tls.is_none() {
        return Some(format!(
            "spec.security.tls.mode=enforcing makes the brokers register over TLS, but              NameServer {ns_name} serves no TLS; give it spec.security.tls (a certificate              from the same CA)"
        ));
    }
    None
}

/// The stored status with `Ready=False` and `reason` as its condition.
fn not_ready(
    stored: &BrokerStatus,
    reason: &str,
    message: &str,
    rec: &Reconciliation,
) -> BrokerStatus {
    BrokerStatus {
        observed_generation: rec.generation,
        conditions: conditions::merge(
            &stored.conditions,
            &[Desired::new(
                conditions::READY,
                false,
                reason,
                message.to_owned(),
            )],
            rec.generation,
            rec.now,
        ),
        ..stored.clone()
    }
}

/// The stored status with `Ready=False` `NameServerNotFound` as its only condition.
fn nameserver_missing(
    stored: &BrokerStatus,
    ns_name: &str,
    namespace: &str,
    generation: Option<i64>,
    now: k8s_openapi::jiff::Timestamp,
) -> BrokerStatus {
    BrokerStatus {
        observed_generation: generation,
        conditions: conditions::merge(
            &stored.conditions,
            &[Desired::new(
                conditions::READY,
                false,
                "NameServerNotFound",
                format!("NameServer {ns_name} does not exist in {namespace}"),
            )],
            generation,
            now,
        ),
        ..stored.clone()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::crd::GroupStatus;

    fn stored() -> BrokerStatus {
        BrokerStatus {
            observed_generation: Some(1),
            namesrv_addr: Some("ns-0:9876".to_owned()),
            groups: vec![GroupStatus {
                broker_name: "c-0".to_owned(),
                ..GroupStatus::default()
            }],
            ..BrokerStatus::default()
        }
    }

    #[test]
    fn a_missing_nameserver_only_changes_ready_and_the_generation() {
        let now = Timestamp::UNIX_EPOCH;
        let status = nameserver_missing(&stored(), "ns", "team-a", Some(3), now);
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.groups, stored().groups);
        assert_eq!(status.namesrv_addr, stored().namesrv_addr);
        let ready = conditions::find(&status.conditions, conditions::READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "NameServerNotFound")
        );
        assert!(ready.message.contains("ns") && ready.message.contains("team-a"));
        // A second reconcile computes the same status: nothing is written again.
        assert_eq!(
            nameserver_missing(&status, "ns", "team-a", Some(3), now),
            status
        );
    }

    #[test]
    fn pausing_keeps_everything_but_the_conditions() {
        let status = paused_status(&stored(), Some(2), Timestamp::UNIX_EPOCH);
        assert_eq!(status.observed_generation, Some(1));
        assert_eq!(status.groups, stored().groups);
        assert!(conditions::is_true(
            &status.conditions,
            conditions::RECONCILIATION_PAUSED
        ));
    }
}
