//! Writes to stored objects: merge patches, JSON patches, server-side apply (per-manager
//! field ownership, conflicts unless forced, list-maps merged item by item), replaces,
//! and the API server's update validation on the way in.

use http::StatusCode;
use serde_json::{Map, Value, json};

use super::routing::{query_flag, query_value, status_error};
use super::ssa;
use super::store::{State, init_metadata};
use super::validation::validate_update;

impl State {
    pub(super) fn patch(
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
                    .map(|((_, m), theirs)| (m.clone(), ssa::conflicts(&patch, theirs)))
                    .filter(|(_, fields)| !fields.is_empty())
                    .collect();
                if !contested.is_empty() && !query_flag(query, "force") {
                    let listed: Vec<String> = contested
                        .iter()
                        .flat_map(|(m, fields)| {
                            fields.iter().map(move |f| {
                                format!("conflict with \"{m}\": {}", ssa::field_path(f))
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
                            ssa::disown(theirs, f);
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

    pub(super) fn replace(
        &mut self,
        path: &str,
        name: &str,
        mut body: Value,
    ) -> (StatusCode, Value) {
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
}

/// RFC 7386 JSON merge patch.
pub(super) fn merge_patch(target: &mut Value, patch: &Value) {
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
