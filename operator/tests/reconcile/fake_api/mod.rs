//! An in-memory Kubernetes API server behind a `kube::Client`, after controller-runtime's
//! fake client: the operator's real HTTP requests (server-side apply with per-manager field
//! ownership and list-map merges, merge and JSON patches, status subresource,
//! label-selected lists, watches, deletes with finalizers and owner cascades, optimistic
//! concurrency) are served from a map of JSON objects.
//!
//! It is strict where the real API server is and operators get it wrong: StatefulSet
//! fields other than replicas/template/updateStrategy/... are immutable (422), PVCs only
//! grow and only when their StorageClass allows expansion, `resourceVersion` preconditions
//! conflict (409), a server-side apply that sets a field another manager applied
//! differently conflicts (409) unless forced, `dryRun` stores nothing, a
//! CustomResourceDefinition becomes `Established` as the apiextensions controller would
//! make it, and errors can be injected for any request. Watches stream
//! `ADDED`/`MODIFIED`/`DELETED` events, so the real `kube::runtime` controller wiring runs
//! against it.
//!
//! (`kube-fake-client` 0.3 was considered: it targets kube 4 / k8s-openapi 0.28 (we are on
//! kube 5), its watch streams end after the initial list and it enforces no immutable
//! fields, so it cannot exercise the wiring or the StatefulSet bugs this fake exists for.)
//!
//! This module holds what tests call ([`FakeApi`]) and the request entry point; `routing`
//! parses requests and shapes responses, `store` keeps objects, history and watches,
//! `write` serves patches and server-side apply (`ssa`: field ownership), and
//! `validation` is the API server's update validation.

mod routing;
mod ssa;
mod store;
mod validation;
mod write;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use routing::{json_response, object_path, parse_target, query_flag, query_value, status_error};
use store::{Injected, State, init_metadata};
use write::merge_patch;

type Body = UnsyncBoxBody<Bytes, Infallible>;

#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

impl FakeApi {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn client(&self) -> Client {
        let api = self.clone();
        let service = tower::service_fn(move |req: Request<kube::client::Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.handle(req).await) }
        });
        Client::new(service, "default")
    }

    /// Stores `obj` as if created through the API.
    pub fn insert<K>(&self, obj: &K)
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Serialize,
    {
        let meta = obj.meta();
        let path = object_path::<K>(
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or_default(),
        );
        let mut value = serde_json::to_value(obj).unwrap();
        let mut st = self.state.lock().unwrap();
        st.resource_version += 1;
        st.clock += 1;
        let rv = st.resource_version;
        let clock = st.clock;
        let kind = if st.objects.contains_key(&path) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        init_metadata(&mut value, rv, clock);
        st.put(&path, value, kind);
    }

    /// Stores a cluster-scoped object (a StorageClass).
    pub fn insert_cluster<K>(&self, obj: &K)
    where
        K: Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope> + Serialize,
    {
        let path = format!(
            "{}/{}",
            K::url_path(&(), None),
            obj.meta().name.as_deref().unwrap_or_default()
        );
        let mut value = serde_json::to_value(obj).unwrap();
        let mut st = self.state.lock().unwrap();
        let rv = st.next_rv();
        st.clock += 1;
        let clock = st.clock;
        init_metadata(&mut value, rv, clock);
        st.put(&path, value, "ADDED");
    }

    pub fn get_cluster<K>(&self, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope> + DeserializeOwned,
    {
        let st = self.state.lock().unwrap();
        st.objects
            .get(&format!("{}/{name}", K::url_path(&(), None)))
            .map(|v| serde_json::from_value(v.clone()).unwrap())
    }

    /// Replaces `status` of a stored cluster-scoped object.
    pub fn set_status_cluster<K>(&self, name: &str, status: Value)
    where
        K: Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>,
    {
        let mut st = self.state.lock().unwrap();
        let rv = st.next_rv();
        let path = format!("{}/{name}", K::url_path(&(), None));
        let mut obj = st.objects.get(&path).cloned().expect("object exists");
        obj["status"] = status;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        st.put(&path, obj, "MODIFIED");
    }

    /// From now on CustomResourceDefinitions are never marked `Established`.
    pub fn hold_crds_unestablished(&self) {
        self.state.lock().unwrap().hold_crds = true;
    }

    pub fn get<K>(&self, ns: &str, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let st = self.state.lock().unwrap();
        st.objects
            .get(&object_path::<K>(ns, name))
            .map(|v| serde_json::from_value(v.clone()).unwrap())
    }

    pub fn list<K>(&self, ns: &str) -> Vec<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let prefix = format!("{}/", K::url_path(&(), Some(ns)));
        let st = self.state.lock().unwrap();
        st.objects
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
            .map(|(_, v)| serde_json::from_value(v.clone()).unwrap())
            .collect()
    }

    /// Replaces `status` of a stored object (what kubelet or the StatefulSet controller
    /// would write).
    pub fn set_status<K>(&self, ns: &str, name: &str, status: Value)
    where
        K: Resource<DynamicType = ()>,
    {
        let mut st = self.state.lock().unwrap();
        let rv = st.next_rv();
        let path = object_path::<K>(ns, name);
        let mut obj = st.objects.get(&path).cloned().expect("object exists");
        obj["status"] = status;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        st.put(&path, obj, "MODIFIED");
    }

    /// Changes stored fields (a user's `kubectl edit`): `patch` is merged into the object.
    pub fn edit<K>(&self, ns: &str, name: &str, patch: Value)
    where
        K: Resource<DynamicType = ()>,
    {
        let mut st = self.state.lock().unwrap();
        let rv = st.next_rv();
        let path = object_path::<K>(ns, name);
        let mut obj = st.objects.get(&path).cloned().expect("object exists");
        let spec_before = obj.get("spec").cloned();
        merge_patch(&mut obj, &patch);
        if obj.get("spec").cloned() != spec_before {
            let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            obj["metadata"]["generation"] = json!(generation);
        }
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        st.put(&path, obj, "MODIFIED");
    }

    /// Removes an object outright (a pod the StatefulSet controller has not recreated yet).
    pub fn remove<K: Resource<DynamicType = ()>>(&self, ns: &str, name: &str) {
        self.state.lock().unwrap().take(&object_path::<K>(ns, name));
    }

    /// Writes that changed a stored object since the last call.
    pub fn take_mutations(&self) -> usize {
        std::mem::take(&mut self.state.lock().unwrap().mutations)
    }

    /// `METHOD path` of every request since the last call.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.state.lock().unwrap().log)
    }

    /// Every stored object but the Secrets, as JSON text (to look for leaked values).
    pub fn dump_except_secrets(&self) -> String {
        let st = self.state.lock().unwrap();
        st.objects
            .iter()
            .filter(|(k, _)| !(k.starts_with("/api/v1/namespaces/") && k.contains("/secrets/")))
            .map(|(k, v)| format!("{k} {v}\n"))
            .collect()
    }

    /// `(type, reason, note)` of every Event created.
    pub fn events(&self) -> Vec<(String, String, String)> {
        let st = self.state.lock().unwrap();
        st.objects
            .iter()
            .filter(|(k, _)| k.starts_with("/apis/events.k8s.io/"))
            .map(|(_, v)| {
                (
                    v["type"].as_str().unwrap_or_default().to_owned(),
                    v["reason"].as_str().unwrap_or_default().to_owned(),
                    v["note"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Makes the next `count` requests `method path…` (path containing `path`) fail with
    /// HTTP `code`, as a crashed process, a lost connection or a conflicting writer would.
    pub fn inject_error(&self, method: Method, path: &str, code: u16, count: usize) {
        self.inject_error_for(method, path, "", code, count);
    }

    /// [`Self::inject_error`] for requests of one Content-Type only (a merge patch, not a
    /// JSON patch of the same path).
    pub fn inject_error_for(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        code: u16,
        count: usize,
    ) {
        self.inject_error_after(method, path, content_type, 0, code, count);
    }

    /// [`Self::inject_error_for`] after letting `skip` matching requests through.
    pub fn inject_error_after(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        skip: usize,
        code: u16,
        count: usize,
    ) {
        self.state.lock().unwrap().injected.push(Injected {
            method,
            path: path.to_owned(),
            content_type: content_type.to_owned(),
            skip,
            code,
            count,
        });
    }

    /// Drops every injected failure not yet used.
    pub fn clear_injected(&self) {
        self.state.lock().unwrap().injected.clear();
    }

    async fn handle(&self, req: Request<kube::client::Body>) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or_default().to_owned();
        let content_type = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body: Value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).unwrap_or(Value::Null)
        };
        let mut st = self.state.lock().unwrap();
        st.log.push(format!("{method} {path}"));
        let target = parse_target(&path);
        if let Some(i) = st.injected.iter().position(|f| {
            f.method == method
                && path.contains(&f.path)
                && content_type.starts_with(&f.content_type)
                && f.count > 0
        }) {
            if st.injected[i].skip > 0 {
                st.injected[i].skip -= 1;
            } else {
                st.injected[i].count -= 1;
                let code = StatusCode::from_u16(st.injected[i].code).unwrap();
                let (code, value) = status_error(code, "Injected", "injected failure");
                return json_response(code, &value);
            }
        }
        if method == Method::GET && target.name.is_none() && query_flag(&query, "watch") {
            return st.watch(target, &query);
        }
        // A dry run is served in full and then forgotten: nothing stored, nobody told.
        let dry_run = query_value(&query, "dryRun").is_some();
        let saved = dry_run.then(|| {
            (
                st.objects.clone(),
                st.applied.clone(),
                st.resource_version,
                st.mutations,
                st.clock,
                st.changes.len(),
                std::mem::take(&mut st.watches),
            )
        });
        let (code, value) = st.serve(&method, &target, &query, &content_type, body);
        if let Some((objects, applied, rv, mutations, clock, changes, watches)) = saved {
            st.objects = objects;
            st.applied = applied;
            st.resource_version = rv;
            st.mutations = mutations;
            st.clock = clock;
            st.changes.truncate(changes);
            st.watches = watches;
        } else if code.is_success()
            && target.subresource.is_none()
            && target.collection.ends_with("/customresourcedefinitions")
            && let Some(name) = &target.name
        {
            st.establish_crd(&format!("{}/{name}", target.collection));
        }
        json_response(code, &value)
    }
}
