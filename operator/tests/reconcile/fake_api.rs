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

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::fake_ssa;

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// One stored change, replayed to watches that start from an older resourceVersion.
struct Change {
    rv: u64,
    path: String,
    kind: &'static str,
    object: Value,
}

/// An open watch: the collection it covers, its label selector, where events go.
struct Watch {
    target: Target,
    query: String,
    tx: mpsc::UnboundedSender<Bytes>,
}

/// An injected failure: the next `count` requests with `method` whose path contains
/// `path` fail with `code`.
struct Injected {
    method: Method,
    path: String,
    /// Only requests whose Content-Type starts with this (all when empty).
    content_type: String,
    /// Matching requests to let through before failing.
    skip: usize,
    code: u16,
    count: usize,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    log: Vec<String>,
    resource_version: u64,
    mutations: usize,
    clock: i64,
    changes: Vec<Change>,
    watches: Vec<Watch>,
    injected: Vec<Injected>,
    /// Server-side apply: what each field manager last applied, by object path.
    applied: BTreeMap<(String, String), Value>,
    /// CustomResourceDefinitions stay unestablished (the apiextensions controller is
    /// stuck or refuses their names).
    hold_crds: bool,
}

#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

/// Where a request points.
#[derive(Clone)]
struct Target {
    /// `/api/v1/namespaces/ns/pods` (or the all-namespaces collection).
    collection: String,
    name: Option<String>,
    subresource: Option<String>,
    /// Set for an all-namespaces list: `pods` under any namespace.
    all_namespaces_plural: Option<(String, String)>,
}

fn parse_target(path: &str) -> Target {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    if let Some(i) = segs.iter().position(|s| *s == "namespaces")
        && segs.len() > i + 2
    {
        let collection = format!("/{}", segs[..i + 3].join("/"));
        return Target {
            collection,
            name: segs.get(i + 3).map(|s| (*s).to_owned()),
            subresource: segs.get(i + 4).map(|s| (*s).to_owned()),
            all_namespaces_plural: None,
        };
    }
    // Cluster-scoped: /api/v1/<plural>[/<name>] or /apis/<group>/<version>/<plural>[/<name>].
    let base = if segs.first() == Some(&"api") { 3 } else { 4 };
    if segs.len() > base {
        return Target {
            collection: format!("/{}", segs[..base].join("/")),
            name: segs.get(base).map(|s| (*s).to_owned()),
            subresource: segs.get(base + 1).map(|s| (*s).to_owned()),
            all_namespaces_plural: None,
        };
    }
    let prefix = segs[..segs.len() - 1].join("/");
    Target {
        collection: format!("/{}", segs.join("/")),
        name: None,
        subresource: None,
        all_namespaces_plural: Some((
            format!("/{prefix}/namespaces/"),
            segs[segs.len() - 1].to_owned(),
        )),
    }
}

fn object_path<K: Resource<DynamicType = ()>>(ns: &str, name: &str) -> String {
    format!("{}/{name}", K::url_path(&(), Some(ns)))
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

fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(value).unwrap())).boxed_unsync())
        .unwrap()
}

fn query_flag(query: &str, key: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv == format!("{key}=true") || kv == format!("{key}=1"))
}

fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Whether the object stored at `key` belongs to the collection `target` lists.
fn in_collection(target: &Target, key: &str) -> bool {
    match &target.all_namespaces_plural {
        None => {
            key.starts_with(&format!("{}/", target.collection))
                && !key[target.collection.len() + 1..].contains('/')
        }
        Some((prefix, plural)) => {
            let namespaced = key.starts_with(prefix.as_str())
                && key[prefix.len()..].split('/').nth(1) == Some(plural.as_str())
                && key[prefix.len()..].split('/').count() == 3;
            let cluster_scoped = key.starts_with(&format!("{}/", target.collection))
                && !key[target.collection.len() + 1..].contains('/');
            namespaced || cluster_scoped
        }
    }
}

fn status_error(code: StatusCode, reason: &str, message: &str) -> (StatusCode, Value) {
    (
        code,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code.as_u16()
        }),
    )
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap();
    line.push(b'\n');
    Bytes::from(line)
}

fn init_metadata(obj: &mut Value, rv: u64, clock: i64) {
    let meta = obj["metadata"]
        .as_object_mut()
        .expect("object has metadata");
    meta.entry("uid")
        .or_insert_with(|| json!(format!("uid-{rv}")));
    meta.entry("generation").or_insert(json!(1));
    meta.entry("creationTimestamp").or_insert_with(|| {
        json!(format!(
            "2026-01-01T00:{:02}:{:02}Z",
            clock / 60 % 60,
            clock % 60
        ))
    });
    meta.insert("resourceVersion".to_owned(), json!(rv.to_string()));
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn matches_selector(obj: &Value, query: &str) -> bool {
    let Some(selector) = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("labelSelector="))
    else {
        return true;
    };
    let selector = urlencoding_decode(selector);
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (k, v) = term.split_once('=').unwrap_or((term, ""));
        obj["metadata"]["labels"][k].as_str() == Some(v)
    })
}

fn urlencoding_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else if bytes[i] == b'+' {
            out.push(b' ');
            i += 1;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

impl State {
    fn next_rv(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// The apiextensions controller: a CRD's names are accepted and it is served.
    fn establish_crd(&mut self, path: &str) {
        let Some(mut crd) = self.objects.get(path).cloned() else {
            return;
        };
        let established = crd["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
        if self.hold_crds || established {
            return;
        }
        let stored: Vec<Value> = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["storage"] == true)
            .map(|v| v["name"].clone())
            .collect();
        crd["status"] = json!({
            "acceptedNames": crd["spec"]["names"].clone(),
            "storedVersions": stored,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted"},
            ],
        });
        let rv = self.next_rv();
        crd["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.put(path, crd, "MODIFIED");
    }

    fn serve(
        &mut self,
        method: &Method,
        target: &Target,
        query: &str,
        content_type: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let Some(name) = target.name.clone() else {
            return match *method {
                Method::GET => self.list(target, query),
                Method::POST => self.create(target, body),
                _ => status_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    "collection",
                ),
            };
        };
        let path = format!("{}/{name}", target.collection);
        let status_sub = target.subresource.as_deref() == Some("status");
        match *method {
            Method::GET => match self.objects.get(&path) {
                Some(v) => (StatusCode::OK, v.clone()),
                None => status_error(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("{name} not found"),
                ),
            },
            Method::PATCH => self.patch(&path, &name, status_sub, query, content_type, body),
            Method::PUT => self.replace(&path, &name, body),
            Method::DELETE => self.delete(&path, &name, &body),
            _ => status_error(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "object"),
        }
    }

    /// Stores `value` at `path` and tells the watches.
    fn put(&mut self, path: &str, value: Value, kind: &'static str) {
        self.objects.insert(path.to_owned(), value.clone());
        self.notify(path, kind, value);
    }

    fn take(&mut self, path: &str) -> Option<Value> {
        let old = self.objects.remove(path)?;
        // A deletion is a change too: it gets its own resourceVersion.
        let rv = self.next_rv();
        let mut gone = old.clone();
        gone["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.notify(path, "DELETED", gone);
        self.applied.retain(|(p, _), _| p != path);
        Some(old)
    }

    fn notify(&mut self, path: &str, kind: &'static str, object: Value) {
        let rv = object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.resource_version);
        let line = event_line(kind, &object);
        self.watches.retain(|w| {
            if !in_collection(&w.target, path) || !matches_selector(&object, &w.query) {
                return !w.tx.is_closed();
            }
            w.tx.send(line.clone()).is_ok()
        });
        self.changes.push(Change {
            rv,
            path: path.to_owned(),
            kind,
            object,
        });
    }

    /// A watch from `resourceVersion` (the whole history when absent or 0): past changes
    /// first, then live ones, as newline-separated `WatchEvent`s.
    fn watch(&mut self, target: Target, query: &str) -> Response<Body> {
        let since: u64 = query_value(query, "resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
        for c in self.changes.iter().filter(|c| c.rv > since) {
            if in_collection(&target, &c.path) && matches_selector(&c.object, query) {
                let _ = tx.send(event_line(c.kind, &c.object));
            }
        }
        self.watches.push(Watch {
            target,
            query: query.to_owned(),
            tx,
        });
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            let line = rx.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(line)), rx))
        });
        Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(StreamBody::new(stream).boxed_unsync())
            .unwrap()
    }

    fn list(&self, target: &Target, query: &str) -> (StatusCode, Value) {
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(k, _)| in_collection(target, k))
            .map(|(_, v)| v.clone())
            .filter(|v| matches_selector(v, query))
            .collect();
        (
            StatusCode::OK,
            json!({ "apiVersion": "v1", "kind": "List",
                    "metadata": { "resourceVersion": self.resource_version.to_string() },
                    "items": items }),
        )
    }

    fn create(&mut self, target: &Target, mut body: Value) -> (StatusCode, Value) {
        if body["metadata"]["name"].is_null() {
            let generated = format!(
                "{}{}",
                body["metadata"]["generateName"].as_str().unwrap_or("obj-"),
                self.resource_version + 1
            );
            body["metadata"]["name"] = json!(generated);
        }
        let name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let path = format!("{}/{name}", target.collection);
        if self.objects.contains_key(&path) {
            return status_error(
                StatusCode::CONFLICT,
                "AlreadyExists",
                &format!("{name} exists"),
            );
        }
        let rv = self.next_rv();
        self.clock += 1;
        init_metadata(&mut body, rv, self.clock);
        self.put(&path, body.clone(), "ADDED");
        self.mutations += 1;
        (StatusCode::CREATED, body)
    }

    fn patch(
        &mut self,
        path: &str,
        name: &str,
        status_sub: bool,
        query: &str,
        content_type: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let apply = content_type.starts_with("application/apply-patch");
        let manager = query_value(query, "fieldManager").unwrap_or("").to_owned();
        let Some(existing) = self.objects.get(path).cloned() else {
            if apply && !status_sub {
                let mut obj = body.clone();
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove("managedFields");
                }
                if let Some(p) = obj.as_object_mut() {
                    p.remove("status");
                }
                let rv = self.next_rv();
                self.clock += 1;
                init_metadata(&mut obj, rv, self.clock);
                self.applied.insert((path.to_owned(), manager), body);
                self.put(path, obj.clone(), "ADDED");
                self.mutations += 1;
                return (StatusCode::CREATED, obj);
            }
            return status_error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("{name} not found"),
            );
        };
        if let Some(want) = body["metadata"]["resourceVersion"].as_str()
            && existing["metadata"]["resourceVersion"].as_str() != Some(want)
        {
            return status_error(StatusCode::CONFLICT, "Conflict", "resourceVersion mismatch");
        }
        let mut updated = existing.clone();
        if content_type.starts_with("application/json-patch") {
            let ops: json_patch::Patch = match serde_json::from_value(body) {
                Ok(p) => p,
                Err(e) => {
                    return status_error(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string());
                }
            };
            if status_sub
                && ops
                    .0
                    .iter()
                    .any(|op| !op.path().to_string().starts_with("/status"))
            {
                return status_error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    "the status subresource only changes status",
                );
            }
            // A failed `test` op is the API server's 422 (the patch is all or nothing).
            if let Err(e) = json_patch::patch(&mut updated, &ops) {
                return status_error(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", &e.to_string());
            }
            if !status_sub {
                updated["status"] = existing["status"].clone();
            }
        } else if status_sub {
            merge_patch(&mut updated["status"], &body["status"]);
        } else {
            // Applied or patched fields win; status is only written through /status and
            // server-owned metadata is never taken from a request.
            let mut patch = body;
            if let Some(p) = patch.as_object_mut() {
                p.remove("status");
            }
            if let Some(m) = patch["metadata"].as_object_mut() {
                for k in [
                    "resourceVersion",
                    "uid",
                    "generation",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "managedFields",
                ] {
                    m.remove(k);
                }
            }
            if apply {
                let contested: Vec<(String, Vec<Vec<String>>)> = self
                    .applied
                    .iter()
                    .filter(|((p, m), _)| p == path && *m != manager)
                    .map(|((_, m), theirs)| (m.clone(), fake_ssa::conflicts(&patch, theirs)))
                    .filter(|(_, fields)| !fields.is_empty())
                    .collect();
                if !contested.is_empty() && !query_flag(query, "force") {
                    let listed: Vec<String> = contested
                        .iter()
                        .flat_map(|(m, fields)| {
                            fields.iter().map(move |f| {
                                format!("conflict with \"{m}\": {}", fake_ssa::field_path(f))
                            })
                        })
                        .collect();
                    return status_error(
                        StatusCode::CONFLICT,
                        "Conflict",
                        &format!(
                            "Apply failed with {} conflict(s): {}",
                            listed.len(),
                            listed.join(", ")
                        ),
                    );
                }
                // Forced: the contested fields change hands.
                for (m, fields) in contested {
                    if let Some(theirs) = self.applied.get_mut(&(path.to_owned(), m)) {
                        for f in &fields {
                            fake_ssa::disown(theirs, f);
                        }
                    }
                }
                // Server-side apply: fields this manager applied before and leaves out
                // now are removed; lists with a map key merge item by item, so other
                // managers' items survive.
                let key = (path.to_owned(), manager);
                if let Some(before) = self.applied.get(&key) {
                    remove_dropped(&mut updated, before, &patch);
                }
                apply_merge(&mut updated, &patch);
                self.applied.insert(key, patch);
            } else {
                merge_patch(&mut updated, &patch);
            }
        }
        if updated.get("spec") != existing.get("spec") {
            if let Err(e) = validate_update(path, &existing, &updated, &self.objects) {
                return e;
            }
            let generation = existing["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            updated["metadata"]["generation"] = json!(generation);
        }
        self.store_if_changed(path, existing, updated)
    }

    fn replace(&mut self, path: &str, name: &str, mut body: Value) -> (StatusCode, Value) {
        let Some(existing) = self.objects.get(path).cloned() else {
            return status_error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("{name} not found"),
            );
        };
        if body["metadata"]["resourceVersion"] != existing["metadata"]["resourceVersion"] {
            return status_error(StatusCode::CONFLICT, "Conflict", "resourceVersion mismatch");
        }
        for k in ["uid", "generation", "creationTimestamp"] {
            body["metadata"][k] = existing["metadata"][k].clone();
        }
        if body.get("spec") != existing.get("spec")
            && let Err(e) = validate_update(path, &existing, &body, &self.objects)
        {
            return e;
        }
        self.store_if_changed(path, existing, body)
    }

    fn store_if_changed(
        &mut self,
        path: &str,
        existing: Value,
        mut updated: Value,
    ) -> (StatusCode, Value) {
        let mut without_rv = updated.clone();
        without_rv["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"].clone();
        if without_rv == existing {
            return (StatusCode::OK, existing);
        }
        let rv = self.next_rv();
        updated["metadata"]["resourceVersion"] = json!(rv.to_string());
        // Clearing the last finalizer of an object being deleted removes it.
        let deleting = !updated["metadata"]["deletionTimestamp"].is_null();
        let finalizers_empty = updated["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty);
        self.mutations += 1;
        if deleting && finalizers_empty {
            self.take(path);
        } else {
            self.put(path, updated.clone(), "MODIFIED");
        }
        (StatusCode::OK, updated)
    }

    fn delete(&mut self, path: &str, name: &str, body: &Value) -> (StatusCode, Value) {
        let Some(existing) = self.objects.get(path).cloned() else {
            return status_error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("{name} not found"),
            );
        };
        let has_finalizers = existing["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        self.mutations += 1;
        if has_finalizers {
            let mut updated = existing;
            if updated["metadata"]["deletionTimestamp"].is_null() {
                updated["metadata"]["deletionTimestamp"] = json!("2026-01-01T01:00:00Z");
            }
            let rv = self.next_rv();
            updated["metadata"]["resourceVersion"] = json!(rv.to_string());
            self.put(path, updated.clone(), "MODIFIED");
            return (StatusCode::OK, updated);
        }
        self.take(path);
        // The garbage collector: dependents go too unless the delete orphans them.
        if body["propagationPolicy"].as_str() != Some("Orphan")
            && let Some(uid) = existing["metadata"]["uid"].as_str()
        {
            let dependents: Vec<String> = self
                .objects
                .iter()
                .filter(|(_, v)| {
                    v["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"].as_str() == Some(uid)))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for d in dependents {
                self.take(&d);
            }
        } else if let Some(uid) = existing["metadata"]["uid"].as_str() {
            // Orphaned dependents lose the owner reference.
            let orphans: Vec<String> = self
                .objects
                .iter()
                .filter(|(_, v)| {
                    v["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"].as_str() == Some(uid)))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for o in orphans {
                let mut v = self.objects[&o].clone();
                if let Some(refs) = v["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"].as_str() != Some(uid));
                }
                let rv = self.next_rv();
                v["metadata"]["resourceVersion"] = json!(rv.to_string());
                self.put(&o, v, "MODIFIED");
            }
        }
        (StatusCode::OK, existing)
    }
}

/// Keys that make a list a map in server-side apply (`x-kubernetes-list-map-keys` /
/// `patchMergeKey` of the types the operator applies).
const LIST_MAP_KEYS: [&str; 4] = ["name", "type", "containerPort", "mountPath"];

fn list_key(item: &Value) -> Option<(String, String)> {
    LIST_MAP_KEYS
        .iter()
        .find_map(|k| Some(((*k).to_owned(), item.get(*k)?.to_string())))
}

fn is_list_map(items: &[Value]) -> bool {
    !items.is_empty() && items.iter().all(|i| i.is_object() && list_key(i).is_some())
}

/// Removes from `target` what `before` (a manager's previous apply) set and `now` (its
/// new apply) leaves out.
fn remove_dropped(target: &mut Value, before: &Value, now: &Value) {
    match (before, target) {
        (Value::Object(b), Value::Object(t)) => {
            for (k, bv) in b {
                match now.get(k) {
                    None => {
                        t.remove(k);
                    }
                    Some(nv) => {
                        if let Some(tv) = t.get_mut(k) {
                            remove_dropped(tv, bv, nv);
                        }
                    }
                }
            }
        }
        (Value::Array(b), Value::Array(t)) if is_list_map(b) => {
            let now_items = now.as_array().cloned().unwrap_or_default();
            for bi in b {
                let key = list_key(bi);
                let still = now_items.iter().find(|n| list_key(n) == key);
                match still {
                    None => t.retain(|ti| list_key(ti) != key),
                    Some(ni) => {
                        if let Some(ti) = t.iter_mut().find(|ti| list_key(ti) == key) {
                            remove_dropped(ti, bi, ni);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// Server-side apply's merge: objects merge field by field, list-maps item by item (by
/// their key), atomic lists and scalars are replaced.
fn apply_merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    apply_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        Value::Array(items)
            if is_list_map(items) && target.as_array().is_some_and(|t| is_list_map(t)) =>
        {
            let t = target.as_array_mut().unwrap();
            for item in items {
                let key = list_key(item);
                match t.iter_mut().find(|ti| list_key(ti) == key) {
                    Some(existing) => apply_merge(existing, item),
                    None => t.push(item.clone()),
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn without(spec: &Value, allowed: &[&str]) -> Value {
    let mut s = spec.clone();
    if let Some(m) = s.as_object_mut() {
        for k in allowed {
            m.remove(*k);
        }
    }
    s
}

/// The API server's update validation where operators trip over it.
fn validate_update(
    path: &str,
    existing: &Value,
    updated: &Value,
    objects: &BTreeMap<String, Value>,
) -> Result<(), (StatusCode, Value)> {
    let name = existing["metadata"]["name"].as_str().unwrap_or_default();
    if path.contains("/statefulsets/") {
        // apps/v1 ValidateStatefulSetUpdate: only these spec fields may change.
        let allowed = [
            "replicas",
            "ordinals",
            "template",
            "updateStrategy",
            "persistentVolumeClaimRetentionPolicy",
            "minReadySeconds",
        ];
        if without(&existing["spec"], &allowed) != without(&updated["spec"], &allowed) {
            return Err(status_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                &format!(
                    "StatefulSet.apps \"{name}\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
                ),
            ));
        }
    }
    if path.contains("/persistentvolumeclaims/") {
        let storage = |v: &Value| {
            v["spec"]["resources"]["requests"]["storage"]
                .as_str()
                .and_then(quantity_bytes)
        };
        let mut a = existing["spec"].clone();
        let mut b = updated["spec"].clone();
        a["resources"]["requests"]["storage"] = Value::Null;
        b["resources"]["requests"]["storage"] = Value::Null;
        if a != b {
            return Err(status_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                &format!(
                    "PersistentVolumeClaim \"{name}\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
                ),
            ));
        }
        let (old, new) = (storage(existing), storage(updated));
        if new < old {
            return Err(status_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                &format!(
                    "PersistentVolumeClaim \"{name}\" is invalid: spec.resources.requests.storage: Forbidden: field can not be less than previous value"
                ),
            ));
        }
        if new > old {
            let class = existing["spec"]["storageClassName"]
                .as_str()
                .unwrap_or_default();
            let expandable = objects
                .get(&format!("/apis/storage.k8s.io/v1/storageclasses/{class}"))
                .is_some_and(|sc| sc["allowVolumeExpansion"].as_bool() == Some(true));
            if !expandable {
                return Err(status_error(
                    StatusCode::FORBIDDEN,
                    "Forbidden",
                    &format!(
                        "persistentvolumeclaims \"{name}\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Bytes of a binary-suffixed quantity (`10Gi`, `512Mi`, `100`).
pub fn quantity_bytes(q: &str) -> Option<u128> {
    let units = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50)];
    for (suffix, shift) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u128>().ok().map(|n| n << shift);
        }
    }
    q.parse().ok()
}
