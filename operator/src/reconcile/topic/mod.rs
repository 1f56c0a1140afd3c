//! Topic reconciler: one-way sync of a Topic object to every master of its cluster through
//! the admin protocol, with a finalizer that deletes the topic but never blocks namespace
//! deletion forever.
//!
//! [`reconcile`] chains named phases like the Broker reconciler: each is a function of
//! explicit inputs, pure where it can be, with the API or admin calls around it. Every
//! phase that refuses writes `Ready=False` with its reason and ends the reconcile.
//!
//! | Phase | Module | Produces | Condition |
//! |---|---|---|---|
//! | deletion | `finalizer` | the topic deleted from the brokers and nameservers, the finalizer released | — (Events `TopicDeleted`, `DeletionAbandoned`) |
//! | unmanaged | `admission` | stop | `Ready=False` `Unmanaged` |
//! | pause | `admission` | stop | `ReconciliationPaused=True` |
//! | finalizer | `finalizer` | the finalizer on the object | — |
//! | ownership | `admission` | stop when another Topic owns the name | `Ready=False` `ResourceConflict` |
//! | queue shrink guard | `admission` | stop when queues would shrink | `Ready=False` `QueueShrinkRefused` |
//! | cluster access | `cluster` | admin clients, the cluster's masters | `Ready=False` `BrokerNotFound`, `AdminCredentialsUnavailable`, `AdminTlsUnavailable`, `NameServerUnreachable`, `NoMasters` |
//! | sync | `sync` | placements, repaired drift | `Ready=False` `BrokerUnreachable`, `ApplyFailed` |
//! | status | `report` | the written status | `Ready=True` `Applied`, `ReconciliationPaused=False` |

mod admission;
mod cluster;
mod finalizer;
mod report;
mod sync;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;

use super::{Context, Error, RESYNC};
use crate::crd::{Topic, TopicStatus};
use crate::names::{ANNOTATION_MANAGED, ANNOTATION_PAUSE, annotation_is};

pub const KIND: &str = "Topic";

/// After this long in deletion, a topic whose brokers cannot be reached is released
/// anyway (with a Warning Event) so namespace deletion is never blocked forever.
pub const FINALIZER_GRACE: Duration = Duration::from_secs(120);

pub async fn reconcile(topic: Arc<Topic>, ctx: Arc<Context>) -> Result<Action, Error> {
    let rec = Reconciliation::of(&topic)?;
    if topic.metadata.deletion_timestamp.is_some() {
        return finalizer::finalize(&topic, &ctx, rec.managed && !rec.paused).await;
    }
    if let ControlFlow::Break(action) = admission::unmanaged(&ctx, &topic, &rec).await? {
        return Ok(action);
    }
    if let ControlFlow::Break(action) = admission::pause(&ctx, &rec).await? {
        return Ok(action);
    }
    finalizer::ensure(&topic, &ctx).await?;
    if let ControlFlow::Break(action) = admission::ownership(&ctx, &topic, &rec).await? {
        return Ok(action);
    }
    if let ControlFlow::Break(action) = admission::queue_shrink(&ctx, &topic, &rec).await? {
        return Ok(action);
    }
    let reached = match cluster::reach(&ctx, &topic, &rec).await? {
        ControlFlow::Continue(reached) => reached,
        ControlFlow::Break(action) => return Ok(action),
    };
    let synced = sync::apply_to_masters(&ctx, &topic, &rec, &reached).await?;
    report::applied(&ctx, &topic, &rec, synced).await?;
    // Checked periodically (a topic deleted or changed behind the operator's back, a new
    // group); written only where it drifted.
    Ok(Action::requeue(RESYNC))
}

/// Which Topic one reconcile is about, and the status its phases start from.
struct Reconciliation {
    name: String,
    namespace: String,
    /// Not annotated `rmq-rs.dev/managed: "false"`.
    managed: bool,
    /// Annotated `rmq-rs.dev/pause-reconciliation: "true"`.
    paused: bool,
    previous: TopicStatus,
    generation: Option<i64>,
    now: Timestamp,
    /// The RocketMQ topic: `spec.topicName`, else the object's name.
    topic_name: String,
}

impl Reconciliation {
    fn of(topic: &Topic) -> Result<Self, Error> {
        let name = topic
            .metadata
            .name
            .clone()
            .ok_or(Error::MissingField("metadata.name"))?;
        let namespace = topic
            .metadata
            .namespace
            .clone()
            .ok_or(Error::MissingField("metadata.namespace"))?;
        let annotations = topic.metadata.annotations.as_ref();
        Ok(Self {
            name,
            namespace,
            managed: !annotation_is(annotations, ANNOTATION_MANAGED, "false"),
            paused: annotation_is(annotations, ANNOTATION_PAUSE, "true"),
            previous: topic.status.clone().unwrap_or_default(),
            generation: topic.metadata.generation,
            now: Timestamp::now(),
            topic_name: topic.topic_name().to_owned(),
        })
    }
}
