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
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
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
        tokio::spawn(async move {
            // Fail after two consecutive missed renewals: by then another replica may
            // have taken over, and two active operators must never overlap.
            let mut misses = 0;
            loop {
                tokio::time::sleep(elector.renew_every()).await;
                match elector.try_lead().await {
                    Ok(true) => misses = 0,
                    Ok(false) => break,
                    Err(e) => {
                        misses += 1;
                        tracing::warn!(error = %e, misses, "lease renewal failed");
                        if misses >= 2 {
                            break;
                        }
                    }
                }
            }
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

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

async fn run_controllers(client: Client, namespace: Option<String>, ctx: Arc<Context>) {
    let ns = namespace.as_deref();
    let owned = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGER}"));

    let nameservers = Controller::new(api::<NameServer>(&client, ns), watcher::Config::default())
        .owns(api::<StatefulSet>(&client, ns), owned.clone())
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

    let broker_controller = Controller::new(api::<Broker>(&client, ns), watcher::Config::default());
    let brokers_store = broker_controller.store();
    let brokers = broker_controller
        .owns(api::<StatefulSet>(&client, ns), owned.clone())
        .owns(api::<ConfigMap>(&client, ns), owned.clone())
        // Pod readiness drives rolling restarts and status; pods belong to StatefulSets,
        // so they are mapped back to their Broker by the instance label.
        .watches(
            api::<Pod>(&client, ns),
            watcher::Config::default().labels(&format!("{LABEL_COMPONENT}={COMPONENT_BROKER}")),
            |pod| {
                let instance = pod.labels().get(LABEL_INSTANCE)?.clone();
                Some(ObjectRef::<Broker>::new(&instance).within(&pod.namespace()?))
            },
        )
        // A resized NameServer changes namesrvAddr of the Brokers that reference it.
        .watches(
            api::<NameServer>(&client, ns),
            watcher::Config::default(),
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

    let topic_controller = Controller::new(api::<Topic>(&client, ns), watcher::Config::default());
    let topics_store = topic_controller.store();
    let topics = topic_controller
        // A Broker becoming ready (masters registered) should not wait for the resync.
        .watches(
            api::<Broker>(&client, ns),
            watcher::Config::default(),
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

    futures::join!(nameservers, brokers, topics);
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
