//! Where a request points and how the fake answers it: request paths parsed into
//! collections and objects, query parameters, label selectors, JSON responses and
//! `Status` errors.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use kube::Resource;
use serde_json::{Value, json};

use super::Body;

/// Where a request points.
#[derive(Clone)]
pub(super) struct Target {
    /// `/api/v1/namespaces/ns/pods` (or the all-namespaces collection).
    pub(super) collection: String,
    pub(super) name: Option<String>,
    pub(super) subresource: Option<String>,
    /// Set for an all-namespaces list: `pods` under any namespace.
    pub(super) all_namespaces_plural: Option<(String, String)>,
}

pub(super) fn parse_target(path: &str) -> Target {
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

pub(super) fn object_path<K: Resource<DynamicType = ()>>(ns: &str, name: &str) -> String {
    format!("{}/{name}", K::url_path(&(), Some(ns)))
}

pub(super) fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(value).unwrap())).boxed_unsync())
        .unwrap()
}

pub(super) fn query_flag(query: &str, key: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv == format!("{key}=true") || kv == format!("{key}=1"))
}

pub(super) fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Whether the object stored at `key` belongs to the collection `target` lists.
pub(super) fn in_collection(target: &Target, key: &str) -> bool {
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

pub(super) fn status_error(code: StatusCode, reason: &str, message: &str) -> (StatusCode, Value) {
    (
        code,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code.as_u16()
        }),
    )
}

pub(super) fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap();
    line.push(b'\n');
    Bytes::from(line)
}

pub(super) fn matches_selector(obj: &Value, query: &str) -> bool {
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
