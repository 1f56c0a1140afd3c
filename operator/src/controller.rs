//! Wires the three controllers, the metrics endpoint and leader election together.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Predicate, PredicateConfig, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::admin::RemotingAdmin;
use crate::builders::Settings;
use crate::crd::{Broker, NameServer, Topic};
use crate::leader::LeaderElector;
use crate::metrics::{Metrics, router};
use crate::names::{COMPONENT_BROKER, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGER};
use crate::reconcile::{self, Context, Error, backoff};

#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Watch only this namespace; all namespaces when `None`.
    pub namespace: Option<String>,
    pub metrics_addr: SocketAddr,
    pub leader_election: bool,
    pub lease_namespace: String,
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    /// Step down when no renewal succeeded for this long (shorter than the lease).
    pub renew_deadline: Duration,
    pub admin_timeout: Duration,
    pub settings: Settings,
}

#[derive(Debug, Error)]
pub enum RunError {
    #[error("Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    #[error("metrics endpoint on {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("lost the leader lease")]
    LostLeadership,
}

pub async fn run(config: RunConfig) -> Result<(), RunError> {
    let client = Client::try_default().await?;
    let metrics = Arc::new(Metrics::default());

    let listener = tokio::net::TcpListener::bind(config.metrics_addr)
        .await
        .map_err(|source| RunError::Metrics {
            addr: config.metrics_addr,
            source,
        })?;
    let app = router(metrics.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics endpoint stopped");
        }
    });
    // Ready means "serving"; a standby replica is ready too, or rollouts would stall.
    metrics.set_ready(true);

    let lost_lease = if config.leader_election {
        let elector = LeaderElector::new(
            client.clone(),
            &config.lease_namespace,
            &config.lease_name,
            &config.identity,
            config.lease_duration,
        );
        tracing::info!(identity = %config.identity, "waiting for the leader lease");
        loop {
            match elector.try_lead().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "lease check failed"),
            }
            tokio::time::sleep(elector.renew_every()).await;
        }
        tracing::info!("leading");
        metrics.leader.set(1);
        let m = metrics.clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let deadline = config.renew_deadline;
        tokio::spawn(async move {
            hold_lease(&elector, deadline).await;
            m.leader.set(0);
            let _ = tx.send(());
        });
        Some(rx)
    } else {
        metrics.leader.set(1);
        None
    };

    let monitoring_available = client
        .list_api_group_resources("monitoring.coreos.com/v1")
        .await
        .is_ok_and(|r| r.resources.iter().any(|r| r.kind == "ServiceMonitor"));
    // Unsigned: nameservers enforce no ACL; a Broker with adminCredentials gets a signing
    // client derived from this one at each reconcile (reconcile::admin_credentials).
    let admin = Arc::new(RemotingAdmin::new(config.admin_timeout));
    let ctx = Arc::new(Context::new(
        client.clone(),
        config.settings.clone(),
        admin,
        metrics,
        monitoring_available,
    ));

    let controllers = run_controllers(client, config.namespace.clone(), ctx);
    match lost_lease {
        None => {
            controllers.await;
            Ok(())
        }
        Some(lost) => tokio::select! {
            () = controllers => Ok(()),
            _ = lost => Err(RunError::LostLeadership),
        },
    }
}

/// Renews the lease until it is lost or no renewal succeeded within `renew_deadline`
/// (each attempt is itself bounded by what is left of it), then returns: the caller
/// stops every controller at once. With `renew_deadline` < the lease duration, a leader
/// that cannot reach the API server has stopped before any other replica may acquire.
pub async fn hold_lease(elector: &LeaderElector, renew_deadline: Duration) {
    let mut renewed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(elector.retry_period(renew_deadline)).await;
        let left = renew_deadline.saturating_sub(renewed.elapsed());
        if left.is_zero() {
            tracing::warn!(
                ?renew_deadline,
                "no lease renewal within the deadline; stepping down"
            );
            return;
        }
        match tokio::time::timeout(left, elector.try_lead()).await {
            Ok(Ok(true)) => renewed = tokio::time::Instant::now(),
            Ok(Ok(false)) => {
                tracing::warn!("another replica holds the lease; stepping down");
                return;
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "lease renewal failed"),
            Err(_) => tracing::warn!("lease renewal timed out"),
        }
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Hash of the parts of an object that should trigger a reconcile.
fn hash_of<T: std::hash::Hash>(value: &T) -> Option<u64> {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut h);
    Some(h.finish())
}

/// Primary objects: spec (generation), annotations (pause, switchover, rolling
/// restarts), finalizers and deletion. Status writes — the operator's own — do not
/// trigger: that was a reconcile loop under any write traffic.
fn primary_changed<K: Resource>(obj: &K) -> Option<u64> {
    let meta = obj.meta();
    hash_of(&(
        meta.generation,
        &meta.annotations,
        &meta.finalizers,
        meta.deletion_timestamp.is_some(),
    ))
}

/// Owned StatefulSets: spec and the rollout progress the restarts wait for.
fn statefulset_changed(sts: &StatefulSet) -> Option<u64> {
    let status = sts.status.as_ref();
    hash_of(&(
        sts.metadata.generation,
        status.map(|s| (s.ready_replicas, s.replicas, s.available_replicas)),
        status.and_then(|s| s.update_revision.clone()),
        status.and_then(|s| s.current_revision.clone()),
        sts.metadata.deletion_timestamp.is_some(),
    ))
}

/// Broker pods: readiness, revision and role labels, IP and deletion; not the kubelet's
/// other status updates.
fn pod_changed(pod: &Pod) -> Option<u64> {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    hash_of(&(
        ready,
        &pod.metadata.labels,
        status.and_then(|s| s.pod_ip.clone()),
        pod.metadata.deletion_timestamp.is_some(),
        &pod.metadata.uid,
    ))
}

/// What a Topic needs from its Broker: the spec and whether the cluster is Ready.
fn broker_for_topics(broker: &Broker) -> Option<u64> {
    let ready = broker
        .status
        .as_ref()
        .map(|s| crate::conditions::is_true(&s.conditions, crate::conditions::READY));
    hash_of(&(broker.metadata.generation, ready))
}

fn primary<K>(
    api: Api<K>,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>>,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(primary_changed::<K>, PredicateConfig::default());
    (reader, stream)
}

fn filtered<K, P>(
    api: Api<K>,
    config: watcher::Config,
    predicate: P,
) -> impl futures::Stream<Item = Result<K, watcher::Error>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    P: Predicate<K> + 'static,
{
    watcher(api, config)
        .default_backoff()
        .applied_objects()
        .predicate_filter(predicate, PredicateConfig::default())
}

/// The three controllers on `client`; returns when they all stop (shutdown signal).
/// Each reconciles on changes of its objects' spec/annotations, of what it owns, and on
/// the steady requeue timer (`RESYNC`, or faster while something is in progress).
pub async fn run_controllers(client: Client, namespace: Option<String>, ctx: Arc<Context>) {
    let ns = namespace.as_deref();
    let owned = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGER}"));

    let (ns_reader, ns_stream) = primary(api::<NameServer>(&client, ns));
    let nameservers = Controller::for_stream(ns_stream, ns_reader)
        .owns_stream(filtered(
            api::<StatefulSet>(&client, ns),
            owned.clone(),
            statefulset_changed,
        ))
        .owns(api::<Service>(&client, ns), owned.clone())
        .owns(api::<ConfigMap>(&client, ns), owned.clone())
        .shutdown_on_signal()
        .run(
            |o, c| {
                instrumented(
                    reconcile::nameserver::KIND,
                    o,
                    c,
                    reconcile::nameserver::reconcile,
                )
            },
            error_policy(reconcile::nameserver::KIND),
            ctx.clone(),
        )
        .for_each(log_result);

    let (broker_reader, broker_stream) = primary(api::<Broker>(&client, ns));
    let brokers_store = broker_reader.clone();
    let janitor = forget_deleted_brokers(broker_reader.clone(), ctx.clone());
    let brokers = Controller::for_stream(broker_stream, broker_reader)
        .owns_stream(filtered(
            api::<StatefulSet>(&client, ns),
            owned.clone(),
            statefulset_changed,
        ))
        .owns(api::<ConfigMap>(&client, ns), owned.clone())
        // The per-pod Services of an external listener: load balancer addresses, node ports.
        .owns(api::<Service>(&client, ns), owned.clone())
        // Pod readiness drives rolling restarts and status; pods belong to StatefulSets,
        // so they are mapped back to their Broker by the instance label.
        .watches_stream(
            filtered(
                api::<Pod>(&client, ns),
                watcher::Config::default().labels(&format!("{LABEL_COMPONENT}={COMPONENT_BROKER}")),
                pod_changed,
            ),
            |pod| {
                let instance = pod.labels().get(LABEL_INSTANCE)?.clone();
                Some(ObjectRef::<Broker>::new(&instance).within(&pod.namespace()?))
            },
        )
        // A resized NameServer changes namesrvAddr of the Brokers that reference it.
        .watches_stream(
            filtered(
                api::<NameServer>(&client, ns),
                watcher::Config::default(),
                predicates::generation,
            ),
            move |nameserver| {
                let namespace = nameserver.namespace();
                let name = nameserver.name_any();
                brokers_store
                    .state()
                    .into_iter()
                    .filter(|b| b.namespace() == namespace && b.spec.name_server_ref.name == name)
                    .map(|b| ObjectRef::from_obj(&*b))
                    .collect::<Vec<_>>()
            },
        )
        .shutdown_on_signal()
        .run(
            |o, c| instrumented(reconcile::broker::KIND, o, c, reconcile::broker::reconcile),
            error_policy(reconcile::broker::KIND),
            ctx.clone(),
        )
        .for_each(log_result);

    let (topic_reader, topic_stream) = primary(api::<Topic>(&client, ns));
    let topics_store = topic_reader.clone();
    let topics = Controller::for_stream(topic_stream, topic_reader)
        // A Broker becoming ready (masters registered) should not wait for the resync;
        // its status churn (offsets, lag) must not requeue every Topic.
        .watches_stream(
            filtered(
                api::<Broker>(&client, ns),
                watcher::Config::default(),
                broker_for_topics,
            ),
            move |broker| {
                let namespace = broker.namespace();
                let name = broker.name_any();
                topics_store
                    .state()
                    .into_iter()
                    .filter(|t| t.namespace() == namespace && t.spec.broker_ref.name == name)
                    .map(|t| ObjectRef::from_obj(&*t))
                    .collect::<Vec<_>>()
            },
        )
        .shutdown_on_signal()
        .run(
            |o, c| instrumented(reconcile::topic::KIND, o, c, reconcile::topic::reconcile),
            error_policy(reconcile::topic::KIND),
            ctx,
        )
        .for_each(log_result);

    tokio::select! {
        _ = async { futures::join!(nameservers, brokers, topics) } => {}
        () = janitor => {}
    }
}

/// Drops the gauges and cached figures of Brokers that no longer exist (deletions do
/// not reach the Broker reconciler: it has no finalizer).
async fn forget_deleted_brokers(store: Store<Broker>, ctx: Arc<Context>) {
    loop {
        tokio::time::sleep(Duration::from_secs(60)).await;
        if store.state().is_empty() && ctx.metrics.brokers().is_empty() {
            continue;
        }
        for (namespace, name) in ctx.metrics.brokers() {
            let key = ObjectRef::<Broker>::new(&name).within(&namespace);
            if store.get(&key).is_none() {
                ctx.metrics.forget_broker(&namespace, &name);
                ctx.live.forget(&format!("{namespace}/{name}"));
            }
        }
    }
}

/// Runs `reconcile` with metrics and resets the object's failure count on success.
async fn instrumented<K, F, Fut>(
    kind: &'static str,
    obj: Arc<K>,
    ctx: Arc<Context>,
    reconcile: F,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()>,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    let key = failure_key(kind, &*obj);
    let started = Instant::now();
    ctx.metrics.reconcile_started(kind);
    let result = reconcile(obj, ctx.clone()).await;
    ctx.metrics.reconcile_finished(kind, started.elapsed());
    if result.is_ok() {
        ctx.note_success(&key);
    }
    result
}

fn failure_key<K: Resource<DynamicType = ()>>(kind: &str, obj: &K) -> String {
    let meta = obj.meta();
    format!(
        "{kind}/{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn error_policy<K: Resource<DynamicType = ()>>(
    kind: &'static str,
) -> impl Fn(Arc<K>, &Error, Arc<Context>) -> Action {
    move |obj, error, ctx| {
        let failures = ctx.note_failure(&failure_key(kind, &*obj));
        ctx.metrics.reconcile_failed(kind, error.metric_label());
        let delay = backoff(failures.saturating_sub(1));
        tracing::warn!(kind, object = %failure_key(kind, &*obj), %error, ?delay, "reconcile failed");
        Action::requeue(delay)
    }
}

async fn log_result<T: std::fmt::Debug, E: std::fmt::Display>(result: Result<T, E>) {
    match result {
        Ok(o) => tracing::debug!(object = ?o, "reconciled"),
        Err(e) => tracing::debug!(error = %e, "controller event"),
    }
}
