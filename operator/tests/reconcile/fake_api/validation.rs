//! The API server's update validation where operators trip over it: immutable
//! StatefulSet fields, PersistentVolumeClaims that only grow, and only through a
//! StorageClass that allows expansion.

use std::collections::BTreeMap;

use http::StatusCode;
use serde_json::Value;

use super::routing::status_error;

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
pub(super) fn validate_update(
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
fn quantity_bytes(q: &str) -> Option<u128> {
    let units = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50)];
    for (suffix, shift) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u128>().ok().map(|n| n << shift);
        }
    }
    q.parse().ok()
}
