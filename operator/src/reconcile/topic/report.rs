//! Topic status: what each phase's refusal writes, the status after a successful sync
//! (pure functions of the phases' outcomes), and the write that keeps the Ready gauge in
//! step with it.

use kube::Resource;

use super::sync::Synced;
use super::{KIND, Reconciliation};
use crate::conditions::{self, Desired};
use crate::crd::{Topic, TopicDrift, TopicStatus};
use crate::metrics::TopicLabels;
use crate::reconcile::apply::patch_status;
use crate::reconcile::{Context, Error};

impl Reconciliation {
    /// The status of a refusal: `Ready=False` with `reason`; the placements and the last
    /// drift stay as they were (nothing was applied).
    pub(super) fn failed(&self, reason: &str, message: String) -> TopicStatus {
        TopicStatus {
            observed_generation: self.generation,
            conditions: conditions::merge(
                &self.previous.conditions,
                &[Desired::new(conditions::READY, false, reason, message)],
                self.generation,
                self.now,
            ),
            topic_name: Some(self.topic_name.clone()),
            placements: self.previous.placements.clone(),
            last_drift: self.previous.last_drift.clone(),
        }
    }

    /// Writes [`Self::failed`]; returns whether status changed.
    pub(super) async fn refuse(
        &self,
        ctx: &Context,
        reason: &str,
        message: String,
    ) -> Result<bool, Error> {
        write_status(ctx, self, &self.failed(reason, message)).await
    }
}

/// Status phase: records where the topic was applied and any drift repaired, with a
/// `DriftRepaired` Warning Event for a repair and a `TopicApplied` Event when the
/// placements changed.
pub async fn applied(
    ctx: &Context,
    topic: &Topic,
    rec: &Reconciliation,
    synced: Synced,
) -> Result<(), Error> {
    let status = applied_status(rec, &synced);
    if !synced.drift.is_empty() {
        ctx.events
            .publish(
                KIND,
                &topic.object_ref(&()),
                true,
                "DriftRepaired",
                "UpdateAndCreateTopic",
                format!(
                    "{} had changed on the brokers: {}",
                    rec.topic_name,
                    synced.drift.join("; ")
                ),
            )
            .await;
    }
    if status.placements != rec.previous.placements {
        ctx.events
            .publish(
                KIND,
                &topic.object_ref(&()),
                false,
                "TopicApplied",
                "UpdateAndCreateTopic",
                format!(
                    "{}: {} read / {} write queues on {}",
                    rec.topic_name,
                    synced.config.read_queues,
                    synced.config.write_queues,
                    synced.masters.join(", ")
                ),
            )
            .await;
    }
    write_status(ctx, rec, &status).await?;
    Ok(())
}

/// `Ready=True` on every master; a repaired drift replaces `lastDrift`, which otherwise
/// keeps the last one found.
fn applied_status(rec: &Reconciliation, synced: &Synced) -> TopicStatus {
    let last_drift = if synced.drift.is_empty() {
        rec.previous.last_drift.clone()
    } else {
        Some(TopicDrift {
            repaired_at: rec.now.to_string(),
            details: synced.drift.clone(),
        })
    };
    TopicStatus {
        observed_generation: rec.generation,
        conditions: conditions::merge(
            &rec.previous.conditions,
            &[
                Desired::new(
                    conditions::READY,
                    true,
                    "Applied",
                    format!("applied to {} master(s)", synced.placements.len()),
                ),
                Desired::new(
                    conditions::RECONCILIATION_PAUSED,
                    false,
                    "Reconciling",
                    "the operator manages this object",
                ),
            ],
            rec.generation,
            rec.now,
        ),
        topic_name: Some(rec.topic_name.clone()),
        placements: synced.placements.clone(),
        last_drift,
    }
}

pub fn ready_labels(namespace: &str, name: &str) -> TopicLabels {
    TopicLabels {
        resource_namespace: namespace.to_owned(),
        topic: name.to_owned(),
    }
}

/// Patches status when it changed; returns whether it did. The Ready gauge follows the
/// status every reconcile settles on (`RocketMQTopicNotReady` alerts on it).
pub async fn write_status(
    ctx: &Context,
    rec: &Reconciliation,
    status: &TopicStatus,
) -> Result<bool, Error> {
    ctx.metrics
        .topic_ready
        .get_or_create(&ready_labels(&rec.namespace, &rec.name))
        .set(i64::from(conditions::is_true(
            &status.conditions,
            conditions::READY,
        )));
    if *status == rec.previous {
        return Ok(false);
    }
    patch_status::<Topic, _>(&ctx.client, &rec.namespace, &rec.name, status).await?;
    Ok(true)
}

pub async fn warn(ctx: &Context, topic: &Topic, reason: &str, note: String) {
    ctx.events
        .publish(
            KIND,
            &topic.object_ref(&()),
            true,
            reason,
            "Reconcile",
            note,
        )
        .await;
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::admin::TopicConfig;
    use crate::crd::Placement;

    fn rec(previous: TopicStatus) -> Reconciliation {
        Reconciliation {
            name: "orders".to_owned(),
            namespace: "team-a".to_owned(),
            managed: true,
            paused: false,
            previous,
            generation: Some(2),
            now: Timestamp::UNIX_EPOCH,
            topic_name: "Orders".to_owned(),
        }
    }

    fn placement(broker: &str, queues: i32) -> Placement {
        Placement {
            broker_name: broker.to_owned(),
            read_queues: queues,
            write_queues: queues,
            perm: 6,
        }
    }

    fn synced(drift: Vec<String>) -> Synced {
        Synced {
            config: TopicConfig {
                topic: "Orders".to_owned(),
                read_queues: 8,
                write_queues: 8,
                perm: 6,
                order: false,
            },
            masters: vec!["c-0".to_owned(), "c-1".to_owned()],
            placements: vec![placement("c-0", 8), placement("c-1", 8)],
            drift,
        }
    }

    fn earlier_drift() -> TopicStatus {
        TopicStatus {
            placements: vec![placement("c-0", 4)],
            last_drift: Some(TopicDrift {
                repaired_at: "2026-01-01T00:00:00Z".to_owned(),
                details: vec!["c-0: missing".to_owned()],
            }),
            ..TopicStatus::default()
        }
    }

    #[test]
    fn a_refusal_keeps_what_was_applied() {
        let r = rec(earlier_drift());
        let status = r.failed(
            "NoMasters",
            "no master of cluster c is registered".to_owned(),
        );
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(status.topic_name.as_deref(), Some("Orders"));
        assert_eq!(status.placements, r.previous.placements);
        assert_eq!(status.last_drift, r.previous.last_drift);
        let ready = conditions::find(&status.conditions, conditions::READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "NoMasters")
        );
    }

    #[test]
    fn a_sync_records_placements_and_only_new_drift() {
        let r = rec(earlier_drift());
        let status = applied_status(&r, &synced(Vec::new()));
        assert_eq!(status.placements, synced(Vec::new()).placements);
        // No drift this time: the last one found stays on record.
        assert_eq!(status.last_drift, r.previous.last_drift);
        let ready = conditions::find(&status.conditions, conditions::READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "Applied")
        );
        assert_eq!(ready.message, "applied to 2 master(s)");
        assert!(!conditions::is_true(
            &status.conditions,
            conditions::RECONCILIATION_PAUSED
        ));

        let repaired = applied_status(&r, &synced(vec!["c-0: writeQueues 4, want 8".to_owned()]));
        let drift = repaired.last_drift.unwrap();
        assert_eq!(drift.details, ["c-0: writeQueues 4, want 8"]);
        assert_eq!(drift.repaired_at, Timestamp::UNIX_EPOCH.to_string());
    }
}
