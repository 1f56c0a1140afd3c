//! Topic reconciler: one-way sync of a Topic object to every master of its cluster through
//! the admin protocol, with a finalizer that deletes the topic but never blocks namespace
//! deletion forever.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::admin_credentials::{admin_for, namesrv_admin_for};
use super::apply::{patch_metadata, patch_status};
use super::{Context, Error, PROGRESS_POLL, RESYNC};
use crate::admin::{Admin, AdminError, ClusterInfo, TopicConfig};
use crate::conditions::{self, Desired};
use crate::crd::{Broker, NameServer, Placement, Topic, TopicDrift, TopicStatus};
use crate::metrics::TopicLabels;
use crate::names::{
    ANNOTATION_MANAGED, ANNOTATION_PAUSE, NameServerNames, TOPIC_FINALIZER, annotation_is,
};

pub const KIND: &str = "Topic";

/// After this long in deletion, a topic whose brokers cannot be reached is released
/// anyway (with a Warning Event) so namespace deletion is never blocked forever.
pub const FINALIZER_GRACE: Duration = Duration::from_secs(120);

pub async fn reconcile(topic: Arc<Topic>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = topic
        .metadata
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let namespace = topic
        .metadata
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let annotations = topic.metadata.annotations.as_ref();
    let managed = !annotation_is(annotations, ANNOTATION_MANAGED, "false");
    let paused = annotation_is(annotations, ANNOTATION_PAUSE, "true");

    if topic.metadata.deletion_timestamp.is_some() {
        return finalize(&topic, &ctx, managed && !paused).await;
    }

    let previous = topic.status.clone().unwrap_or_default();
    let generation = topic.metadata.generation;
    let now = Timestamp::now();

    if !managed {
        if has_finalizer(&topic) {
            remove_finalizer(&topic, &ctx).await?;
        }
        let status = TopicStatus {
            observed_generation: generation,
            conditions: conditions::merge(
                &previous.conditions,
                &[Desired::new(
                    conditions::READY,
                    false,
                    "Unmanaged",
                    format!(
                        "{ANNOTATION_MANAGED}=false: the topic is left as it is on the brokers"
                    ),
                )],
                generation,
                now,
            ),
            ..previous.clone()
        };
        write_status(&ctx, namespace, name, &previous, &status).await?;
        // Not Ready by choice: nothing to alert on.
        ctx.metrics
            .topic_ready
            .remove(&ready_labels(namespace, name));
        return Ok(Action::await_change());
    }
    if paused {
        let mut status = previous.clone();
        status.conditions = conditions::paused(&previous.conditions, generation, now);
        write_status(&ctx, namespace, name, &previous, &status).await?;
        return Ok(Action::requeue(RESYNC));
    }
    if !has_finalizer(&topic) {
        add_finalizer(&topic, &ctx).await?;
    }

    let topic_name = topic.topic_name().to_owned();
    let fail = |reason: &str, message: String| TopicStatus {
        observed_generation: generation,
        conditions: conditions::merge(
            &previous.conditions,
            &[Desired::new(conditions::READY, false, reason, message)],
            generation,
            now,
        ),
        topic_name: Some(topic_name.clone()),
        placements: previous.placements.clone(),
        last_drift: previous.last_drift.clone(),
    };

    if let Some(owner) = conflicting_owner(&topic, &ctx).await? {
        let status = fail(
            "ResourceConflict",
            format!("topic {topic_name} is already managed by Topic {owner}"),
        );
        if write_status(&ctx, namespace, name, &previous, &status).await? {
            warn(
                &ctx,
                &topic,
                "ResourceConflict",
                format!("Topic {owner} already manages {topic_name}"),
            )
            .await;
        }
        return Ok(Action::requeue(RESYNC));
    }

    if let Some(p) = previous.placements.iter().find(|p| {
        p.read_queues > topic.spec.read_queues || p.write_queues > topic.spec.write_queues
    }) {
        let status = fail(
            "QueueShrinkRefused",
            format!(
                "{} has {} read / {} write queues; shrinking would strand messages in the removed queues",
                p.broker_name, p.read_queues, p.write_queues
            ),
        );
        if write_status(&ctx, namespace, name, &previous, &status).await? {
            warn(
                &ctx,
                &topic,
                "QueueShrinkRefused",
                format!("queues of {topic_name} cannot shrink"),
            )
            .await;
        }
        return Ok(Action::requeue(RESYNC));
    }

    let cluster = &topic.spec.broker_ref.name;
    let access = match cluster_access(&ctx, namespace, cluster).await {
        Ok(Some(access)) => access,
        Ok(None) => {
            let status = fail(
                "BrokerNotFound",
                format!("Broker {cluster} does not exist in {namespace}"),
            );
            write_status(&ctx, namespace, name, &previous, &status).await?;
            return Ok(Action::requeue(PROGRESS_POLL));
        }
        Err(Error::Credentials(problem)) => {
            let status = fail(problem.reason(), problem.to_string());
            write_status(&ctx, namespace, name, &previous, &status).await?;
            return Err(problem.into());
        }
        Err(e) => return Err(e),
    };
    let info = match access.cluster_info().await {
        Ok(info) => info,
        Err(e) => {
            let status = fail("NameServerUnreachable", e.to_string());
            write_status(&ctx, namespace, name, &previous, &status).await?;
            return Err(e.into());
        }
    };
    let masters = info.masters(cluster);
    if masters.is_empty() {
        let status = fail(
            "NoMasters",
            format!("no master of cluster {cluster} is registered"),
        );
        write_status(&ctx, namespace, name, &previous, &status).await?;
        return Ok(Action::requeue(PROGRESS_POLL));
    }

    let config = TopicConfig {
        topic: topic_name.clone(),
        read_queues: topic.spec.read_queues,
        write_queues: topic.spec.write_queues,
        perm: topic.spec.perm.bits(),
        order: topic.spec.order,
    };
    // Read before writing: UPDATE_AND_CREATE_TOPIC rewrites the broker's topics.json and
    // forces a re-registration, so it goes out only where the broker's config differs.
    let mut placements = Vec::with_capacity(masters.len());
    let mut drift = Vec::new();
    for (broker_name, addr) in &masters {
        let held = match access.admin.topic_configs(addr).await {
            Ok(mut all) => all.remove(&topic_name),
            Err(e) => {
                let status = fail("BrokerUnreachable", format!("{broker_name}: {e}"));
                write_status(&ctx, namespace, name, &previous, &status).await?;
                return Err(e.into());
            }
        };
        if let Some(difference) = differences(held.as_ref(), &config) {
            if let Err(e) = access.admin.create_topic(addr, &config).await {
                let status = fail("ApplyFailed", format!("{broker_name}: {e}"));
                write_status(&ctx, namespace, name, &previous, &status).await?;
                return Err(e.into());
            }
            ctx.metrics.topic_writes.inc();
            // A topic we never placed there is a creation, not a drift.
            if previous
                .placements
                .iter()
                .any(|p| &p.broker_name == broker_name)
            {
                drift.push(format!("{broker_name}: {difference}"));
            }
        }
        placements.push(Placement {
            broker_name: broker_name.clone(),
            read_queues: config.read_queues,
            write_queues: config.write_queues,
            perm: config.perm,
        });
    }
    let last_drift = if drift.is_empty() {
        previous.last_drift.clone()
    } else {
        ctx.events
            .publish(
                KIND,
                &topic.object_ref(&()),
                true,
                "DriftRepaired",
                "UpdateAndCreateTopic",
                format!(
                    "{topic_name} had changed on the brokers: {}",
                    drift.join("; ")
                ),
            )
            .await;
        Some(TopicDrift {
            repaired_at: now.to_string(),
            details: drift,
        })
    };
    let status = TopicStatus {
        observed_generation: generation,
        conditions: conditions::merge(
            &previous.conditions,
            &[
                Desired::new(
                    conditions::READY,
                    true,
                    "Applied",
                    format!("applied to {} master(s)", placements.len()),
                ),
                Desired::new(
                    conditions::RECONCILIATION_PAUSED,
                    false,
                    "Reconciling",
                    "the operator manages this object",
                ),
            ],
            generation,
            now,
        ),
        topic_name: Some(topic_name.clone()),
        placements,
        last_drift,
    };
    if status.placements != previous.placements {
        ctx.events
            .publish(
                KIND,
                &topic.object_ref(&()),
                false,
                "TopicApplied",
                "UpdateAndCreateTopic",
                format!(
                    "{topic_name}: {} read / {} write queues on {}",
                    config.read_queues,
                    config.write_queues,
                    masters
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .await;
    }
    write_status(&ctx, namespace, name, &previous, &status).await?;
    // Checked periodically (a topic deleted or changed behind the operator's back, a new
    // group); written only where it drifted.
    Ok(Action::requeue(RESYNC))
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

async fn finalize(topic: &Topic, ctx: &Context, delete_on_brokers: bool) -> Result<Action, Error> {
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
        match deleted {
            None => {}
            Some(deleted) => {
                if let Err(e) = deleted {
                    let since = topic
                        .metadata
                        .deletion_timestamp
                        .as_ref()
                        .map(|t| Timestamp::now().duration_since(t.0));
                    let expired =
                        since.is_some_and(|d| d.as_secs() >= FINALIZER_GRACE.as_secs() as i64);
                    if !expired {
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
    }
    remove_finalizer(topic, ctx).await?;
    Ok(Action::await_change())
}

/// How the Topic reconcile reaches a cluster: its nameservers and the admin clients for
/// them and for its masters.
struct ClusterAccess {
    namesrvs: Vec<String>,
    /// Signed with the NameServer's `adminCredentials` (its ACL file is its own).
    namesrv_admin: Arc<dyn Admin>,
    /// Signed with the Broker's `adminCredentials`. The masters a nameserver lists for
    /// cluster `c` are all pods of the Broker `c` in this namespace (the Broker's name is
    /// its `brokerClusterName`, and its NameServer is in its namespace), so one Broker's
    /// credentials cover every master the reconcile writes to.
    admin: Arc<dyn Admin>,
}

impl ClusterAccess {
    /// Cluster info from the first nameserver that answers.
    async fn cluster_info(&self) -> Result<ClusterInfo, AdminError> {
        let mut last = None;
        for addr in &self.namesrvs {
            match self.namesrv_admin.cluster_info(addr).await {
                Ok(info) => return Ok(info),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(AdminError::Closed {
            addr: "no nameserver address".to_owned(),
        }))
    }

    /// Deletes `topic` from every master of `cluster`, then from every nameserver's routes.
    async fn delete_everywhere(&self, cluster: &str, topic: &str) -> Result<(), AdminError> {
        let info = self.cluster_info().await?;
        for (_, addr) in info.masters(cluster) {
            self.admin.delete_topic_in_broker(&addr, topic).await?;
        }
        for ns in &self.namesrvs {
            self.namesrv_admin
                .delete_topic_in_namesrv(ns, topic, cluster)
                .await?;
        }
        Ok(())
    }
}

/// Nameserver addresses and admin client of the Broker `cluster`, or `None` when the
/// Broker (or its NameServer) does not exist or is being deleted.
async fn cluster_access(
    ctx: &Context,
    namespace: &str,
    cluster: &str,
) -> Result<Option<ClusterAccess>, Error> {
    let brokers: Api<Broker> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(broker) = brokers.get_opt(cluster).await? else {
        return Ok(None);
    };
    if broker.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let nameservers: Api<NameServer> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(ns) = nameservers
        .get_opt(&broker.spec.name_server_ref.name)
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(ClusterAccess {
        namesrvs: NameServerNames::of(&ns)
            .addresses(ns.spec.replicas, &ctx.settings.cluster_domain),
        namesrv_admin: namesrv_admin_for(ctx, &ns).await?,
        admin: admin_for(ctx, &broker).await?,
    }))
}

/// The name of another live Topic that claims the same topic on the same cluster and was
/// created first (ties broken by name); that one owns the topic.
async fn conflicting_owner(topic: &Topic, ctx: &Context) -> Result<Option<String>, Error> {
    let api: Api<Topic> =
        Api::namespaced(ctx.client.clone(), &topic.namespace().unwrap_or_default());
    let all = api.list(&ListParams::default()).await?;
    let key = |t: &Topic| {
        (
            t.metadata.creation_timestamp.clone().map(|c| c.0),
            t.name_any(),
        )
    };
    let me = key(topic);
    Ok(all
        .items
        .iter()
        .filter(|t| t.name_any() != topic.name_any())
        .filter(|t| t.metadata.deletion_timestamp.is_none())
        .filter(|t| !annotation_is(t.metadata.annotations.as_ref(), ANNOTATION_MANAGED, "false"))
        .filter(|t| {
            t.spec.broker_ref == topic.spec.broker_ref && t.topic_name() == topic.topic_name()
        })
        .filter(|t| key(t) < me || topic.metadata.deletion_timestamp.is_some())
        .map(ResourceExt::name_any)
        .min())
}

fn has_finalizer(topic: &Topic) -> bool {
    topic.finalizers().iter().any(|f| f == TOPIC_FINALIZER)
}

async fn add_finalizer(topic: &Topic, ctx: &Context) -> Result<(), Error> {
    let mut finalizers = topic.finalizers().to_vec();
    finalizers.push(TOPIC_FINALIZER.to_owned());
    set_finalizers(topic, ctx, finalizers).await
}

async fn remove_finalizer(topic: &Topic, ctx: &Context) -> Result<(), Error> {
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

fn ready_labels(namespace: &str, name: &str) -> TopicLabels {
    TopicLabels {
        resource_namespace: namespace.to_owned(),
        topic: name.to_owned(),
    }
}

/// Patches status when it changed; returns whether it did. The Ready gauge follows the
/// status every reconcile settles on (`RocketMQTopicNotReady` alerts on it).
async fn write_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    previous: &TopicStatus,
    status: &TopicStatus,
) -> Result<bool, Error> {
    ctx.metrics
        .topic_ready
        .get_or_create(&ready_labels(namespace, name))
        .set(i64::from(conditions::is_true(
            &status.conditions,
            conditions::READY,
        )));
    if status == previous {
        return Ok(false);
    }
    patch_status::<Topic, _>(&ctx.client, namespace, name, status).await?;
    Ok(true)
}

async fn warn(ctx: &Context, topic: &Topic, reason: &str, note: String) {
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
