//! Reconcile flows against an in-memory API server, builder snapshots, CEL rules and CRD
//! drift, in one test binary (one link instead of several).
#![allow(clippy::unwrap_used)]

mod admin_credentials_flow;
mod admin_secret_flow;
mod alerts;
mod broker_flow;
mod cel;
mod controller_flow;
mod crd_apply_flow;
mod crds;
mod drain_flow;
mod failover_flow;
mod fake_admin;
mod fake_api;
mod leader_flow;
mod listener_flow;
mod master_ready_flow;
mod monitoring_flow;
mod nameserver_admin_secret_flow;
mod nameserver_flow;
mod recovery_flow;
mod replay_flow;
mod scale_flow;
mod secret_flow;
mod snapshots;
mod storage_flow;
mod tls_mode_flow;
mod topic_flow;
mod topic_ready_metric;

use std::sync::Arc;

use fake_admin::FakeAdmin;
use fake_api::FakeApi;
use kube::Resource;
use operator::builders::Settings;
use operator::metrics::Metrics;
use operator::reconcile::Context;
use serde::de::DeserializeOwned;

pub const NS: &str = "team-a";

pub fn context(api: &FakeApi, admin: &FakeAdmin) -> Arc<Context> {
    Arc::new(Context::new(
        api.client(),
        Settings::default(),
        Arc::new(admin.clone()),
        Arc::new(Metrics::default()),
        true,
    ))
}

/// The document of `kind` named `name` from a manifests/examples file, placed in [`NS`].
pub fn example<K: Resource + DeserializeOwned>(file: &str, kind: &str, name: &str) -> K {
    let path = format!(
        "{}/../manifests/examples/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: serde_yaml::Value = serde::Deserialize::deserialize(doc).unwrap();
        if value["kind"].as_str() == Some(kind) && value["metadata"]["name"].as_str() == Some(name)
        {
            let mut obj: K = serde_yaml::from_value(value).unwrap();
            obj.meta_mut().namespace = Some(NS.to_owned());
            return obj;
        }
    }
    panic!("{kind} {name} not in {file}");
}

/// Stores `obj` in the fake API and returns it as stored (uid, generation, timestamps).
pub fn seed<K>(api: &FakeApi, obj: &K) -> Arc<K>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + serde::Serialize
        + DeserializeOwned,
{
    api.insert(obj);
    refetch(api, obj)
}

pub fn refetch<K>(api: &FakeApi, obj: &K) -> Arc<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let meta = obj.meta();
    Arc::new(
        api.get::<K>(
            meta.namespace.as_deref().unwrap(),
            meta.name.as_deref().unwrap(),
        )
        .unwrap(),
    )
}
