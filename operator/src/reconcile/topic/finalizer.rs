//! Deletion and finalizer phases: a managed Topic carries a finalizer, and its deletion
//! removes the topic from every master and nameserver of its cluster first. Brokers that
//! cannot be reached hold the deletion for at most [`FINALIZER_GRACE`]; then the
//! finalizer is released anyway with a `DeletionAbandoned` Warning Event, so namespace
//! deletion is never blocked forever.

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::admission::conflicting_owner;
use super::cluster::cluster_access;
use super::report::{ready_labels, warn};
use super::{FINALIZER_GRACE, KIND};
use crate::crd::Topic;
use crate::names::TOPIC_FINALIZER;
use crate::reconcile::apply::patch_metadata;
use crate::reconcile::{Context, Error};

/// Deletion phase: deletes the topic from the brokers and nameservers (unless it is
/// unmanaged, paused, or another Topic still manages it), then releases the finalizer.
pub async fn finalize(
    topic: &Topic,
    ctx: &Context,
    delete_on_brokers: bool,
) -> Result<Action, Error> {
    ctx.metrics.topic_ready.remove(&ready_labels(
        topic.metadata.namespace.as_deref().unwrap_or_default(),
        topic.metadata.name.as_deref().unwrap_or_default(),
    ));
    if !has_finalizer(topic) {
        return Ok(Action::await_change());
    }
    let namespace = topic.namespace().unwrap_or_default();
    let topic_name = topic.topic_name().to_owned();
    let cluster = &topic.spec.broker_ref.name;
    let other_owner = conflicting_owner(topic, ctx).await?;
    if delete_on_brokers && other_owner.is_none() {
        // Unreadable admin credentials hold the deletion as unreachable brokers do.
        let deleted = match cluster_access(ctx, &namespace, cluster).await {
            // The cluster is gone (or going): nothing left to clean up.
            Ok(None) => None,
            Ok(Some(access)) => Some(
                access
                    .delete_everywhere(cluster, &topic_name)
                    .await
                    .map_err(Error::from),
            ),
            Err(e @ Error::Credentials(_)) => Some(Err(e)),
            Err(e) => return Err(e),
        };
        if let Some(Err(e)) = deleted {
            let deleted_at = topic.metadata.deletion_timestamp.as_ref().map(|t| t.0);
            if !grace_expired(deleted_at, Timestamp::now()) {
                return Err(e);
            }
            warn(
                ctx,
                topic,
                "DeletionAbandoned",
                format!("could not delete {topic_name} from cluster {cluster} within {FINALIZER_GRACE:?}: {e}"),
            )
            .await;
            remove_finalizer(topic, ctx).await?;
            return Ok(Action::await_change());
        }
        if deleted.is_some() {
            ctx.events
                .publish(
                    KIND,
                    &topic.object_ref(&()),
                    false,
                    "TopicDeleted",
                    "DeleteTopic",
                    format!("deleted {topic_name} from cluster {cluster}"),
                )
                .await;
        }
    }
    remove_finalizer(topic, ctx).await?;
    Ok(Action::await_change())
}

/// Whether a deletion that began at `deleted_at` has waited [`FINALIZER_GRACE`] for the
/// brokers.
fn grace_expired(deleted_at: Option<Timestamp>, now: Timestamp) -> bool {
    deleted_at
        .map(|t| now.duration_since(t))
        .is_some_and(|d| d.as_secs() >= FINALIZER_GRACE.as_secs() as i64)
}

/// Finalizer phase: a managed Topic carries the finalizer before anything is written to
/// the brokers, so its deletion always reaches the deletion phase.
pub async fn ensure(topic: &Topic, ctx: &Context) -> Result<(), Error> {
    if !has_finalizer(topic) {
        add_finalizer(topic, ctx).await?;
    }
    Ok(())
}

pub fn has_finalizer(topic: &Topic) -> bool {
    topic.finalizers().iter().any(|f| f == TOPIC_FINALIZER)
}

async fn add_finalizer(topic: &Topic, ctx: &Context) -> Result<(), Error> {
    let mut finalizers = topic.finalizers().to_vec();
    finalizers.push(TOPIC_FINALIZER.to_owned());
    set_finalizers(topic, ctx, finalizers).await
}

pub async fn remove_finalizer(topic: &Topic, ctx: &Context) -> Result<(), Error> {
    let finalizers = topic
        .finalizers()
        .iter()
        .filter(|f| *f != TOPIC_FINALIZER)
        .cloned()
        .collect();
    set_finalizers(topic, ctx, finalizers).await
}

/// Writes the whole finalizer list, conditional on the resourceVersion we read.
async fn set_finalizers(
    topic: &Topic,
    ctx: &Context,
    finalizers: Vec<String>,
) -> Result<(), Error> {
    patch_metadata::<Topic>(
        &ctx.client,
        &topic.namespace().unwrap_or_default(),
        &topic.name_any(),
        json!({ "finalizers": finalizers, "resourceVersion": topic.resource_version() }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_brokers_hold_a_deletion_for_the_grace_only() {
        let deleted_at = Timestamp::from_second(1_000).unwrap();
        let after = |s: i64| Timestamp::from_second(1_000 + s).unwrap();
        assert!(!grace_expired(Some(deleted_at), after(0)));
        assert!(!grace_expired(Some(deleted_at), after(119)));
        assert!(grace_expired(Some(deleted_at), after(120)));
        assert!(!grace_expired(None, after(10_000)));
    }
}
