//! The phases that decide whether a Topic is synced at all: the `managed` and pause
//! annotations, another Topic owning the same RocketMQ topic, and queue counts that
//! would shrink.

use std::ops::ControlFlow;

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;

use super::Reconciliation;
use super::finalizer::{has_finalizer, remove_finalizer};
use super::report::{ready_labels, warn, write_status};
use crate::conditions::{self, Desired};
use crate::crd::{Placement, Topic, TopicSpec, TopicStatus};
use crate::names::{ANNOTATION_MANAGED, annotation_is};
use crate::reconcile::{Context, Error, RESYNC};

/// Unmanaged phase: with `rmq-rs.dev/managed: "false"` the topic is left as it is on
/// the brokers, the finalizer is released and `Ready=False` `Unmanaged` says so. Not
/// Ready by choice, so the Ready gauge is removed: there is nothing to alert on.
pub async fn unmanaged(
    ctx: &Context,
    topic: &Topic,
    rec: &Reconciliation,
) -> Result<ControlFlow<Action>, Error> {
    if rec.managed {
        return Ok(ControlFlow::Continue(()));
    }
    if has_finalizer(topic) {
        remove_finalizer(topic, ctx).await?;
    }
    write_status(ctx, rec, &unmanaged_status(rec)).await?;
    ctx.metrics
        .topic_ready
        .remove(&ready_labels(&rec.namespace, &rec.name));
    Ok(ControlFlow::Break(Action::await_change()))
}

fn unmanaged_status(rec: &Reconciliation) -> TopicStatus {
    TopicStatus {
        observed_generation: rec.generation,
        conditions: conditions::merge(
            &rec.previous.conditions,
            &[Desired::new(
                conditions::READY,
                false,
                "Unmanaged",
                format!("{ANNOTATION_MANAGED}=false: the topic is left as it is on the brokers"),
            )],
            rec.generation,
            rec.now,
        ),
        ..rec.previous.clone()
    }
}

/// Pause phase: `ReconciliationPaused=True` and nothing else.
pub async fn pause(ctx: &Context, rec: &Reconciliation) -> Result<ControlFlow<Action>, Error> {
    if !rec.paused {
        return Ok(ControlFlow::Continue(()));
    }
    let mut status = rec.previous.clone();
    status.conditions = conditions::paused(&rec.previous.conditions, rec.generation, rec.now);
    write_status(ctx, rec, &status).await?;
    Ok(ControlFlow::Break(Action::requeue(RESYNC)))
}

/// Ownership phase: when another live Topic claims the same topic on the same cluster
/// and came first, this one is `Ready=False` `ResourceConflict` and writes nothing.
pub async fn ownership(
    ctx: &Context,
    topic: &Topic,
    rec: &Reconciliation,
) -> Result<ControlFlow<Action>, Error> {
    let Some(owner) = conflicting_owner(topic, ctx).await? else {
        return Ok(ControlFlow::Continue(()));
    };
    let message = format!(
        "topic {} is already managed by Topic {owner}",
        rec.topic_name
    );
    if rec.refuse(ctx, "ResourceConflict", message).await? {
        warn(
            ctx,
            topic,
            "ResourceConflict",
            format!("Topic {owner} already manages {}", rec.topic_name),
        )
        .await;
    }
    Ok(ControlFlow::Break(Action::requeue(RESYNC)))
}

/// Queue shrink guard phase: fewer queues than a master already has would strand the
/// messages in the removed queues, so the spec is refused (`QueueShrinkRefused`).
pub async fn queue_shrink(
    ctx: &Context,
    topic: &Topic,
    rec: &Reconciliation,
) -> Result<ControlFlow<Action>, Error> {
    let Some(message) = shrink_refusal(&rec.previous.placements, &topic.spec) else {
        return Ok(ControlFlow::Continue(()));
    };
    if rec.refuse(ctx, "QueueShrinkRefused", message).await? {
        warn(
            ctx,
            topic,
            "QueueShrinkRefused",
            format!("queues of {} cannot shrink", rec.topic_name),
        )
        .await;
    }
    Ok(ControlFlow::Break(Action::requeue(RESYNC)))
}

/// Why `spec` cannot be applied over `placements`, if a placement has more read or
/// write queues than it asks for.
fn shrink_refusal(placements: &[Placement], spec: &TopicSpec) -> Option<String> {
    let p = placements
        .iter()
        .find(|p| p.read_queues > spec.read_queues || p.write_queues > spec.write_queues)?;
    Some(format!(
        "{} has {} read / {} write queues; shrinking would strand messages in the removed queues",
        p.broker_name, p.read_queues, p.write_queues
    ))
}

/// The name of another live Topic that claims the same topic on the same cluster and was
/// created first (ties broken by name); that one owns the topic.
pub async fn conflicting_owner(topic: &Topic, ctx: &Context) -> Result<Option<String>, Error> {
    let api: Api<Topic> =
        Api::namespaced(ctx.client.clone(), &topic.namespace().unwrap_or_default());
    let all = api.list(&ListParams::default()).await?;
    Ok(owner_among(topic, &all.items))
}

/// [`conflicting_owner`] among `all`, the Topics of the namespace. A Topic being deleted
/// yields to any other live claimant, so its finalizer never deletes a topic another
/// Topic still manages.
fn owner_among(topic: &Topic, all: &[Topic]) -> Option<String> {
    let key = |t: &Topic| {
        (
            t.metadata.creation_timestamp.clone().map(|c| c.0),
            t.name_any(),
        )
    };
    let me = key(topic);
    all.iter()
        .filter(|t| t.name_any() != topic.name_any())
        .filter(|t| t.metadata.deletion_timestamp.is_none())
        .filter(|t| !annotation_is(t.metadata.annotations.as_ref(), ANNOTATION_MANAGED, "false"))
        .filter(|t| {
            t.spec.broker_ref == topic.spec.broker_ref && t.topic_name() == topic.topic_name()
        })
        .filter(|t| key(t) < me || topic.metadata.deletion_timestamp.is_some())
        .map(ResourceExt::name_any)
        .min()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::crd::LocalRef;

    fn topic(name: &str, created_s: i64, cluster: &str, topic_name: Option<&str>) -> Topic {
        let mut t = Topic::new(
            name,
            TopicSpec {
                topic_name: topic_name.map(str::to_owned),
                broker_ref: LocalRef {
                    name: cluster.to_owned(),
                },
                read_queues: 8,
                write_queues: 8,
                ..TopicSpec::default()
            },
        );
        t.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created_s).unwrap()));
        t
    }

    #[test]
    fn the_first_topic_created_owns_the_name() {
        let first = topic("a", 10, "c", Some("orders"));
        let second = topic("orders", 20, "c", None);
        let elsewhere = topic("b", 5, "other", Some("orders"));
        let all = [first.clone(), second.clone(), elsewhere];
        assert_eq!(owner_among(&second, &all), Some("a".to_owned()));
        assert_eq!(owner_among(&first, &all), None);
    }

    #[test]
    fn unmanaged_and_deleted_topics_own_nothing_and_a_deleted_one_yields() {
        let mut first = topic("a", 10, "c", Some("orders"));
        let second = topic("orders", 20, "c", None);
        first.metadata.annotations = Some(
            [(ANNOTATION_MANAGED.to_owned(), "false".to_owned())]
                .into_iter()
                .collect(),
        );
        assert_eq!(owner_among(&second, &[first.clone(), second.clone()]), None);

        let first = topic("a", 10, "c", Some("orders"));
        let mut deleting = first.clone();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(30).unwrap()));
        // The older Topic is going: its claim no longer counts, and it defers to the
        // live one when its finalizer runs.
        assert_eq!(
            owner_among(&second, &[deleting.clone(), second.clone()]),
            None
        );
        assert_eq!(
            owner_among(&deleting, &[deleting.clone(), second.clone()]),
            Some("orders".to_owned())
        );
    }

    #[test]
    fn fewer_queues_than_placed_are_refused() {
        let spec = topic("t", 0, "c", None).spec;
        let placed = |r, w| Placement {
            broker_name: "c-0".to_owned(),
            read_queues: r,
            write_queues: w,
            perm: 6,
        };
        assert_eq!(shrink_refusal(&[placed(8, 8), placed(4, 4)], &spec), None);
        let refused = shrink_refusal(&[placed(8, 16)], &spec).unwrap();
        assert!(
            refused.starts_with("c-0 has 8 read / 16 write queues"),
            "{refused}"
        );
        assert!(shrink_refusal(&[placed(9, 8)], &spec).is_some());
    }
}
