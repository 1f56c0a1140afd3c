//! Broker reconciler: owned objects per group, role labels on pods, one-pod-at-a-time
//! rolling restarts, live nameserver-list updates, and status from pods and the brokers'
//! runtime info.
//!
//! `reconcile` chains named phases, the way Strimzi's `KafkaReconciler` composes its
//! steps: each phase is a function with explicit inputs and outputs, and where it can, a
//! pure function of them (tested on its own) with a thin apply around it. The order is
//! the contract: failover runs before the objects are rendered (they follow where it
//! leaves each group), the listener's addresses before the ConfigMaps that advertise
//! them, and status last, from what every phase produced. The first three phases can end
//! the reconcile and write their condition themselves; the later ones hand an outcome on,
//! and the status phase turns the outcomes into conditions.
//!
//! | Phase | Module | Produces | Condition |
//! |---|---|---|---|
//! | pause | `admission` | stop | `ReconciliationPaused=True` |
//! | secrets | `secret` | the generated HA and admin Secrets | (Events `HaSecretGenerated`, `AdminSecretGenerated`) |
//! | admin credentials | `admission` | the admin client | `Ready=False` `AdminCredentialsUnavailable` / `AdminTlsUnavailable` |
//! | nameserver list | `admission` | `namesrvAddr` | `Ready=False` `NameServerNotFound` |
//! | scale-down guard | `scale` | the effective Broker | `Progressing=False` `ScaleDownBlocked` |
//! | switchover request | `switchover` | the accepted target | (Event `SwitchoverRejected`) |
//! | group starts | `recovery` | each group's failover state | `Progressing=False` `StatusLost` |
//! | failover | `failover` | a `GroupRun` per group | `FailoverInProgress`, `Degraded` |
//! | external listener | `listener` | advertised addresses | `Ready=False` `AwaitingExternalAddress` |
//! | owned objects | `objects` | applied StatefulSets | `StorageResized` |
//! | roles and monitoring | `pods`, `monitoring` | role labels, ServiceMonitor, PrometheusRule | — |
//! | rolling restart | `rollout` | a `Rollout` | `Progressing`, `Ready=False` `Rolling` |
//! | nameserver push | `runtime` | `status.namesrvAddr` | — |
//! | status | `report` | the written status, the requeue | `Ready`, `Progressing`, `Degraded`, `FailoverInProgress`, `ReconciliationPaused=False`, `StorageResized` |

mod admission;
mod drain;
mod driver;
mod failover;
mod kube_group;
mod listener;
pub(crate) mod live;
mod monitoring;
mod objects;
mod pods;
mod recovery;
mod report;
mod rollout;
mod runtime;
mod scale;
mod secret;
pub mod status;
mod switchover;

use std::ops::ControlFlow;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Action;

use super::{Context, Error};
use crate::crd::{Broker, BrokerStatus};
use crate::names::BrokerNames;

pub use crate::crd::BROKER_KIND as KIND;

pub async fn reconcile(broker: Arc<Broker>, ctx: Arc<Context>) -> Result<Action, Error> {
    let rec = Reconciliation::of(&broker, &ctx)?;
    if let ControlFlow::Break(action) = admission::pause(&ctx, &broker, &rec).await? {
        return Ok(action);
    }
    // The generated Secrets first: the admin client below signs with the admin secret.
    secret::ensure(&ctx, &broker, &rec).await?;
    // Every admin call to this Broker's pods below goes through this client.
    let admin = admission::admin_client(&ctx, &broker, &rec).await?;
    let admin = admin.as_ref();
    let namesrv_addr = match admission::nameserver_list(&ctx, &broker, &rec).await? {
        ControlFlow::Continue(addr) => addr,
        ControlFlow::Break(action) => return Ok(action),
    };

    let scale = scale::guard(&ctx, broker, &rec).await;
    let broker = scale.broker;
    let switchover = switchover::take_request(&ctx, &broker, &rec).await?;
    let starts = recovery::group_starts(&ctx, admin, &broker, &rec).await?;
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &rec.namespace);
    let mut runs = failover::run(
        &ctx,
        admin,
        &broker,
        &rec,
        &namesrv_addr,
        &pod_api,
        starts.states,
        switchover.as_ref(),
    )
    .await?;
    // Listed after the failover pass, which may have deleted pods.
    let observed = pods::list_pods(&pod_api, &rec.names).await?;

    let listener = listener::reconcile_listener(&ctx, &broker, &rec.names).await?;
    let applied = objects::apply(
        &ctx,
        &broker,
        &rec,
        &namesrv_addr,
        &runs,
        &listener,
        &observed,
    )
    .await?;
    monitoring::apply_monitoring(&broker, &rec.names, &ctx).await?;
    pods::label_roles(&ctx, &rec.namespace, &observed, &runs).await?;
    ctx.metrics.retain_members(
        &rec.namespace,
        &rec.name,
        &observed.iter().map(|p| p.name.clone()).collect(),
    );

    let rollout = rollout::roll(
        &ctx,
        admin,
        &broker,
        &rec.names,
        &namesrv_addr,
        &pod_api,
        &applied.statefulsets,
        &observed,
        &mut runs,
        &rec.previous.groups,
    )
    .await?;
    let recorded_namesrv_addr =
        runtime::namesrv_push(&ctx, admin, &broker, &rec, &observed, &namesrv_addr).await?;

    report::finish(
        &ctx,
        admin,
        &broker,
        &rec,
        report::Outcome {
            observed,
            runs,
            rollout,
            shrink_blocked: scale.blocked,
            recovering: starts.recovering,
            listener,
            storage_refused: applied.storage_refused,
            namesrv_addr: recorded_namesrv_addr,
        },
    )
    .await
}

/// Which Broker one reconcile is about, and the status its phases start from.
struct Reconciliation {
    names: BrokerNames,
    name: String,
    namespace: String,
    /// Status as read with the object.
    stored: BrokerStatus,
    /// `stored` with the freshest live figures this process computed: live figures are
    /// written to status at a bounded rate, and these stand in for them (the failover's
    /// "last known master offset").
    previous: BrokerStatus,
    generation: Option<i64>,
    now: Timestamp,
    object: ObjectReference,
    /// `namespace/name`, the key of [`live::LiveStatus`].
    key: String,
}

impl Reconciliation {
    fn of(broker: &Broker, ctx: &Context) -> Result<Self, Error> {
        let name = broker
            .metadata
            .name
            .clone()
            .ok_or(Error::MissingField("metadata.name"))?;
        let namespace = broker
            .metadata
            .namespace
            .clone()
            .ok_or(Error::MissingField("metadata.namespace"))?;
        let stored = broker.status.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        Ok(Self {
            names: BrokerNames::of(broker),
            previous: ctx.live.overlay(&key, stored.clone()),
            stored,
            generation: broker.metadata.generation,
            now: Timestamp::now(),
            object: broker.object_ref(&()),
            key,
            name,
            namespace,
        })
    }

    /// Publishes an Event about this Broker.
    async fn event(&self, ctx: &Context, warning: bool, reason: &str, action: &str, note: String) {
        ctx.events
            .publish(KIND, &self.object, warning, reason, action, note)
            .await;
    }
}
