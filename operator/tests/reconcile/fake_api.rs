//! An in-memory Kubernetes API server behind a `kube::Client`, after controller-runtime's
//! fake client: the operator's real HTTP requests (server-side apply, merge patches,
//! status subresource, label-selected lists, deletes with finalizers, optimistic
//! concurrency) are served from a map of JSON objects. Watches are not emulated; tests call
//! reconcile functions directly.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    log: Vec<String>,
    resource_version: u64,
    mutations: usize,
    clock: i64,
}

#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

/// Where a request points.
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
        init_metadata(&mut value, rv, clock);
        st.objects.insert(path, value);
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
        st.resource_version += 1;
        let rv = st.resource_version;
        let obj = st
            .objects
            .get_mut(&object_path::<K>(ns, name))
            .expect("object exists");
        obj["status"] = status;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
    }

    /// Changes stored fields (a user's `kubectl edit`): `patch` is merged into the object.
    pub fn edit<K>(&self, ns: &str, name: &str, patch: Value)
    where
        K: Resource<DynamicType = ()>,
    {
        let mut st = self.state.lock().unwrap();
        st.resource_version += 1;
        let rv = st.resource_version;
        let obj = st
            .objects
            .get_mut(&object_path::<K>(ns, name))
            .expect("object exists");
        let spec_before = obj.get("spec").cloned();
        merge_patch(obj, &patch);
        if obj.get("spec").cloned() != spec_before {
            let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            obj["metadata"]["generation"] = json!(generation);
        }
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
    }

    /// Removes an object outright (a pod the StatefulSet controller has not recreated yet).
    pub fn remove<K: Resource<DynamicType = ()>>(&self, ns: &str, name: &str) {
        self.state
            .lock()
            .unwrap()
            .objects
            .remove(&object_path::<K>(ns, name));
    }

    /// Writes that changed a stored object since the last call.
    pub fn take_mutations(&self) -> usize {
        std::mem::take(&mut self.state.lock().unwrap().mutations)
    }

    /// `METHOD path` of every request since the last call.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.state.lock().unwrap().log)
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

    async fn handle(&self, req: Request<kube::client::Body>) -> Response<Full<Bytes>> {
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
        let (code, value) = st.serve(&method, &target, &query, &content_type, body);
        Response::builder()
            .status(code)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(&value).unwrap())))
            .unwrap()
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
            Method::PATCH => self.patch(&path, &name, status_sub, content_type, body),
            Method::PUT => self.replace(&path, &name, body),
            Method::DELETE => self.delete(&path, &name),
            _ => status_error(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "object"),
        }
    }

    fn list(&self, target: &Target, query: &str) -> (StatusCode, Value) {
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(k, _)| match &target.all_namespaces_plural {
                None => {
                    k.starts_with(&format!("{}/", target.collection))
                        && !k[target.collection.len() + 1..].contains('/')
                }
                Some((prefix, plural)) => {
                    k.starts_with(prefix.as_str())
                        && k[prefix.len()..].split('/').nth(1) == Some(plural.as_str())
                }
            })
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
        self.objects.insert(path, body.clone());
        self.mutations += 1;
        (StatusCode::CREATED, body)
    }

    fn patch(
        &mut self,
        path: &str,
        name: &str,
        status_sub: bool,
        content_type: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let apply = content_type.starts_with("application/apply-patch");
        let Some(existing) = self.objects.get(path).cloned() else {
            if apply && !status_sub {
                let mut obj = body;
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove("managedFields");
                }
                let rv = self.next_rv();
                self.clock += 1;
                init_metadata(&mut obj, rv, self.clock);
                self.objects.insert(path.to_owned(), obj.clone());
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
        if status_sub {
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
                ] {
                    m.remove(k);
                }
            }
            merge_patch(&mut updated, &patch);
            if updated.get("spec") != existing.get("spec") {
                let generation = existing["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
                updated["metadata"]["generation"] = json!(generation);
            }
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
            self.objects.remove(path);
        } else {
            self.objects.insert(path.to_owned(), updated.clone());
        }
        (StatusCode::OK, updated)
    }

    fn delete(&mut self, path: &str, name: &str) -> (StatusCode, Value) {
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
            self.objects.insert(path.to_owned(), updated.clone());
            return (StatusCode::OK, updated);
        }
        self.objects.remove(path);
        (StatusCode::OK, existing)
    }
}
