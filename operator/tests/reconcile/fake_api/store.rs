//! The fake API server's store: objects by path, resourceVersions, the change history
//! watches replay, open watches, injected failures; serving reads, creates, deletes (with
//! finalizers and owner cascades) and watches, and the apiextensions controller's part.

use std::collections::BTreeMap;
use std::convert::Infallible;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Body;
use super::routing::{
    Target, event_line, in_collection, matches_selector, query_value, status_error,
};

/// One stored change, replayed to watches that start from an older resourceVersion.
pub(super) struct Change {
    rv: u64,
    path: String,
    kind: &'static str,
    object: Value,
}

/// An open watch: the collection it covers, its label selector, where events go.
pub(super) struct Watch {
    target: Target,
    query: String,
    tx: mpsc::UnboundedSender<Bytes>,
}

/// An injected failure: the next `count` requests with `method` whose path contains
/// `path` fail with `code`.
pub(super) struct Injected {
    pub(super) method: Method,
    pub(super) path: String,
    /// Only requests whose Content-Type starts with this (all when empty).
    pub(super) content_type: String,
    /// Matching requests to let through before failing.
    pub(super) skip: usize,
    pub(super) code: u16,
    pub(super) count: usize,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) objects: BTreeMap<String, Value>,
    pub(super) log: Vec<String>,
    pub(super) resource_version: u64,
    pub(super) mutations: usize,
    pub(super) clock: i64,
    pub(super) changes: Vec<Change>,
    pub(super) watches: Vec<Watch>,
    pub(super) injected: Vec<Injected>,
    /// Server-side apply: what each field manager last applied, by object path.
    pub(super) applied: BTreeMap<(String, String), Value>,
    /// CustomResourceDefinitions stay unestablished (the apiextensions controller is
    /// stuck or refuses their names).
    pub(super) hold_crds: bool,
}

pub(super) fn init_metadata(obj: &mut Value, rv: u64, clock: i64) {
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

impl State {
    pub(super) fn next_rv(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// The apiextensions controller: a CRD's names are accepted and it is served.
    pub(super) fn establish_crd(&mut self, path: &str) {
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

    pub(super) fn serve(
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
    pub(super) fn put(&mut self, path: &str, value: Value, kind: &'static str) {
        self.objects.insert(path.to_owned(), value.clone());
        self.notify(path, kind, value);
    }

    pub(super) fn take(&mut self, path: &str) -> Option<Value> {
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
    pub(super) fn watch(&mut self, target: Target, query: &str) -> Response<Body> {
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
