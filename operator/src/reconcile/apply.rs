//! Thin Kubernetes writes: server-side apply of owned objects, status patches, deletes.

use std::fmt::Debug;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Error;
use crate::names::MANAGER;

fn apply_params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Server-side applies `obj` (which carries its namespace and name) and returns the
/// object as stored.
pub async fn apply<K>(client: &Client, obj: &K) -> Result<K, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + Debug,
{
    let meta = obj.meta();
    let name = meta
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let ns = meta
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    Ok(api.patch(name, &apply_params(), &Patch::Apply(obj)).await?)
}

pub async fn apply_dynamic(
    client: &Client,
    resource: &kube::api::ApiResource,
    obj: &DynamicObject,
) -> Result<DynamicObject, Error> {
    let name = obj
        .metadata
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let ns = obj
        .metadata
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    Ok(api.patch(name, &apply_params(), &Patch::Apply(obj)).await?)
}

/// Deletes a dynamic object (ServiceMonitor, PrometheusRule) if it exists.
pub async fn delete_dynamic_if_exists(
    client: &Client,
    resource: &kube::api::ApiResource,
    ns: &str,
    name: &str,
) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes `name` if it exists; a missing object is success.
pub async fn delete_if_exists<K>(client: &Client, ns: &str, name: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Merge-patches `status` of `name`.
pub async fn patch_status<K, S>(
    client: &Client,
    ns: &str,
    name: &str,
    status: &S,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + Debug,
    S: Serialize,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Merge-patches `metadata` of `name` (labels, finalizers). Include `resourceVersion` in
/// `metadata` to make the write conditional on nobody having changed the object since.
pub async fn patch_metadata<K>(
    client: &Client,
    ns: &str,
    name: &str,
    metadata: serde_json::Value,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({ "metadata": metadata });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
