//! Sync phase: the Topic written to every master of its cluster. Read before writing:
//! UPDATE_AND_CREATE_TOPIC rewrites the broker's topics.json and forces a
//! re-registration, so it goes out only where the broker's config (GET_ALL_TOPIC_CONFIG)
//! differs. A difference on a master the topic was already placed on is drift, repaired
//! and reported; a master that cannot be read or written sets `Ready=False`.

use super::Reconciliation;
use super::cluster::Reached;
use crate::admin::TopicConfig;
use crate::crd::{Placement, Topic};
use crate::reconcile::{Context, Error};

/// What the sync did.
pub struct Synced {
    /// What every master now holds.
    pub config: TopicConfig,
    /// The masters' broker names, in the order they were written.
    pub masters: Vec<String>,
    pub placements: Vec<Placement>,
    /// What had changed behind the operator's back, per broker name.
    pub drift: Vec<String>,
}

pub async fn apply_to_masters(
    ctx: &Context,
    topic: &Topic,
    rec: &Reconciliation,
    reached: &Reached,
) -> Result<Synced, Error> {
    let config = desired_config(topic, &rec.topic_name);
    let admin = &reached.access.admin;
    let mut placements = Vec::with_capacity(reached.masters.len());
    let mut drift = Vec::new();
    for (broker_name, addr) in &reached.masters {
        let held = match admin.topic_configs(addr).await {
            Ok(mut all) => all.remove(&rec.topic_name),
            Err(e) => {
                rec.refuse(ctx, "BrokerUnreachable", format!("{broker_name}: {e}"))
                    .await?;
                return Err(e.into());
            }
        };
        if let Some(difference) = differences(held.as_ref(), &config) {
            if let Err(e) = admin.create_topic(addr, &config).await {
                rec.refuse(ctx, "ApplyFailed", format!("{broker_name}: {e}"))
                    .await?;
                return Err(e.into());
            }
            ctx.metrics.topic_writes.inc();
            // A topic we never placed there is a creation, not a drift.
            if rec
                .previous
                .placements
                .iter()
                .any(|p| &p.broker_name == broker_name)
            {
                drift.push(format!("{broker_name}: {difference}"));
            }
        }
        placements.push(placement(broker_name, &config));
    }
    Ok(Synced {
        config,
        masters: reached.masters.iter().map(|(n, _)| n.clone()).collect(),
        placements,
        drift,
    })
}

/// What UPDATE_AND_CREATE_TOPIC sends for the spec.
fn desired_config(topic: &Topic, topic_name: &str) -> TopicConfig {
    TopicConfig {
        topic: topic_name.to_owned(),
        read_queues: topic.spec.read_queues,
        write_queues: topic.spec.write_queues,
        perm: topic.spec.perm.bits(),
        order: topic.spec.order,
    }
}

fn placement(broker_name: &str, config: &TopicConfig) -> Placement {
    Placement {
        broker_name: broker_name.to_owned(),
        read_queues: config.read_queues,
        write_queues: config.write_queues,
        perm: config.perm,
    }
}

/// How the broker's config of a topic differs from the wanted one; `None` when equal.
fn differences(held: Option<&TopicConfig>, want: &TopicConfig) -> Option<String> {
    let Some(held) = held else {
        return Some("missing".to_owned());
    };
    let mut out = Vec::new();
    if held.read_queues != want.read_queues {
        out.push(format!(
            "readQueues {}, want {}",
            held.read_queues, want.read_queues
        ));
    }
    if held.write_queues != want.write_queues {
        out.push(format!(
            "writeQueues {}, want {}",
            held.write_queues, want.write_queues
        ));
    }
    if held.perm != want.perm {
        out.push(format!("perm {}, want {}", held.perm, want.perm));
    }
    if held.order != want.order {
        out.push(format!("order {}, want {}", held.order, want.order));
    }
    (!out.is_empty()).then(|| out.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{TopicPerm, TopicSpec};

    fn want() -> TopicConfig {
        TopicConfig {
            topic: "Orders".to_owned(),
            read_queues: 8,
            write_queues: 8,
            perm: 6,
            order: false,
        }
    }

    #[test]
    fn only_what_differs_is_reported() {
        assert_eq!(differences(Some(&want()), &want()), None);
        assert_eq!(differences(None, &want()).as_deref(), Some("missing"));
        let held = TopicConfig {
            write_queues: 4,
            perm: 4,
            order: true,
            ..want()
        };
        assert_eq!(
            differences(Some(&held), &want()).as_deref(),
            Some("writeQueues 4, want 8, perm 4, want 6, order true, want false")
        );
    }

    #[test]
    fn the_config_comes_from_the_spec() {
        let topic = Topic::new(
            "orders",
            TopicSpec {
                read_queues: 16,
                write_queues: 12,
                perm: TopicPerm::ReadOnly,
                order: true,
                ..TopicSpec::default()
            },
        );
        let config = desired_config(&topic, "Orders");
        assert_eq!(
            config,
            TopicConfig {
                topic: "Orders".to_owned(),
                read_queues: 16,
                write_queues: 12,
                perm: 4,
                order: true,
            }
        );
        let p = placement("c-0", &config);
        assert_eq!((p.read_queues, p.write_queues, p.perm), (16, 12, 4));
    }
}
