//! The NameServer's admin-secret phase: the generated `<name>-nameserver-admin-secret`
//! (key `adminSecret`), and when its pods start enforcing it.
//!
//! With the ACL off, a nameserver with `adminSecret` refuses unsigned registrations. The
//! brokers of every Broker naming this NameServer sign with it (`RMQ_NAMESRV_ADMIN_SECRET`)
//! once their pods have restarted with it. Enforcing before that would leave those
//! brokers out of the routes of every restarted nameserver (an outage on an operator
//! upgrade), so the nameservers enforce only once every such Broker's StatefulSets run
//! pods that sign — and, once they do, keep enforcing (a later, unrelated broker rollout
//! must not turn the check off again). A broker that also has an ACL account
//! (`brokerCredentials`) tries the admin secret first and keeps what each nameserver
//! accepts (`broker/src/services/namesrv_link.rs`), so it is counted like any other.

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::Resource;
use kube::api::{Api, ListParams};

use crate::crd::{ADMIN_SECRET_KEY, Broker, NameServer};
use crate::names::{BrokerNames, NameServerNames, object_labels, selector_string};
use crate::reconcile::generated_secret::{self, Generated};
use crate::reconcile::{Context, Error};

/// The variable brokers sign registrations from (`namesrvAdminSecret`).
pub const BROKER_ENV: &str = "RMQ_NAMESRV_ADMIN_SECRET";
/// The variable nameservers check registrations with (`adminSecret`).
pub const NAMESERVER_ENV: &str = "RMQ_ADMIN_SECRET";

/// Makes sure the Secret exists (an `AdminSecretGenerated` Event when this call made
/// it) and answers whether the nameservers' pods are to enforce it.
pub async fn ensure(
    ctx: &Context,
    ns: &NameServer,
    names: &NameServerNames,
) -> Result<bool, Error> {
    let secret = names.admin_secret();
    let created = generated_secret::ensure(
        ctx,
        Generated {
            namespace: &names.namespace,
            name: &secret,
            key: ADMIN_SECRET_KEY,
            labels: object_labels(&names.selector()),
            owner: ns.controller_owner_ref(&()),
            immutable: false,
        },
    )
    .await?;
    if created {
        ctx.events
            .publish(
                super::nameserver::KIND,
                &ns.object_ref(&()),
                false,
                "AdminSecretGenerated",
                "Reconcile",
                format!("generated the nameservers' admin secret into Secret {secret}"),
            )
            .await;
    }
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &names.namespace);
    if let Some(own) = sets.get_opt(&names.statefulset).await?
        && has_env(&own, NAMESERVER_ENV)
    {
        return Ok(true);
    }
    brokers_sign(ctx, names).await
}

/// Whether every Broker naming this NameServer has rolled out pods that sign.
async fn brokers_sign(ctx: &Context, names: &NameServerNames) -> Result<bool, Error> {
    let brokers: Api<Broker> = Api::namespaced(ctx.client.clone(), &names.namespace);
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &names.namespace);
    for broker in brokers.list(&ListParams::default()).await? {
        if broker.spec.name_server_ref.name != names.instance {
            continue;
        }
        let selector = selector_string(&BrokerNames::of(&broker).selector());
        for sts in sets.list(&ListParams::default().labels(&selector)).await? {
            if !has_env(&sts, BROKER_ENV) || !rolled_out(&sts) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

fn has_env(sts: &StatefulSet, var: &str) -> bool {
    sts.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .is_some_and(|pod| {
            pod.containers
                .iter()
                .flat_map(|c| c.env.iter().flatten())
                .any(|e| e.name == var)
        })
}

/// Every pod runs the current template.
fn rolled_out(sts: &StatefulSet) -> bool {
    let Some(status) = &sts.status else {
        return false;
    };
    let want = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    status.observed_generation >= sts.metadata.generation
        && status.updated_replicas.unwrap_or(0) >= want
        && status.current_revision.is_some()
        && status.current_revision == status.update_revision
}
