//! Volume growth for the StatefulSets the reconcilers own (a Broker group's store
//! volumes, a NameServer's KV config volumes). A StatefulSet's `volumeClaimTemplates`
//! are immutable, so a larger size is applied the way Strimzi and CloudNativePG do it:
//! each existing PVC is patched (the StorageClass must allow expansion, else nothing
//! changes and the resource reports why), then the StatefulSet is deleted with
//! `propagationPolicy: Orphan` (its pods keep running) and re-created from the new
//! template, adopting the pods.
//!
//! Until the volumes can grow, the StatefulSet keeps its current template, so every other
//! part of the reconcile (restarts, failover bookkeeping, status) keeps working.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PropagationPolicy};
use serde_json::json;

use super::{Context, Error};
use crate::names::MANAGER;

/// What happened to one StatefulSet's volumes in this reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageStep {
    /// The volumes already have the wanted size (or the group is new).
    UpToDate,
    /// PVCs patched and the StatefulSet deleted (orphaning its pods) to be re-created.
    Expanded { from: String, to: String },
    /// The size cannot change; the StatefulSet keeps `current` in its template.
    Refused { current: String, reason: String },
}

/// Bytes of a Kubernetes quantity with a binary or decimal suffix; `None` for anything
/// else (the CRD's pattern only admits these).
pub fn quantity_bytes(q: &str) -> Option<u128> {
    let q = q.trim();
    let split = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
    let (n, suffix) = q.split_at(split);
    let n: u128 = n.parse().ok()?;
    let factor: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        _ => return None,
    };
    n.checked_mul(factor)
}

fn template_size(sts: &StatefulSet, template: &str) -> Option<String> {
    sts.spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(template))?
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .map(|q| q.0.clone())
}

fn set_template_size(sts: &mut StatefulSet, template: &str, size: &str) {
    let claim = sts
        .spec
        .as_mut()
        .and_then(|s| s.volume_claim_templates.as_mut())
        .and_then(|ts| {
            ts.iter_mut()
                .find(|t| t.metadata.name.as_deref() == Some(template))
        })
        .and_then(|t| t.spec.as_mut())
        .and_then(|s| s.resources.as_mut())
        .and_then(|r| r.requests.as_mut());
    if let Some(requests) = claim {
        requests.insert("storage".to_owned(), Quantity(size.to_owned()));
    }
}

/// Brings the volumes of StatefulSet `sts_name`, whose claims come from the template
/// `template` and are named by `claim_name(ordinal)`, to the size in `desired` (the
/// StatefulSet about to be applied), or rewrites `desired` to the current size when they
/// cannot grow. A template the existing StatefulSet lacks altogether (an emptyDir moving
/// to a claim) also re-creates it with orphaned pods; its rolling update then gives each
/// pod its claim.
pub async fn prepare_claims(
    ctx: &Context,
    namespace: &str,
    sts_name: &str,
    template: &str,
    claim_name: &(dyn Fn(i32) -> String + Sync),
    desired: &mut StatefulSet,
) -> Result<StorageStep, Error> {
    let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), namespace);
    let name = sts_name.to_owned();
    let Some(existing) = api.get_opt(&name).await? else {
        return Ok(StorageStep::UpToDate);
    };
    let Some(wanted) = template_size(desired, template) else {
        return Ok(StorageStep::UpToDate);
    };
    let Some(current) = template_size(&existing, template) else {
        orphan_delete(&api, &name).await?;
        return Ok(StorageStep::Expanded {
            from: "no claim".to_owned(),
            to: wanted,
        });
    };
    let (Some(current_bytes), Some(wanted_bytes)) =
        (quantity_bytes(&current), quantity_bytes(&wanted))
    else {
        return Ok(StorageStep::UpToDate);
    };
    if current_bytes == wanted_bytes {
        // Same size, maybe spelled differently: keep the stored spelling.
        set_template_size(desired, template, &current);
        return Ok(StorageStep::UpToDate);
    }
    if wanted_bytes < current_bytes {
        set_template_size(desired, template, &current);
        return Ok(StorageStep::Refused {
            reason: format!(
                "volumes cannot shrink: {name} has {current}, the spec asks for {wanted}"
            ),
            current,
        });
    }
    let replicas = existing.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
    let mut claims = Vec::new();
    for o in 0..replicas {
        if let Some(pvc) = pvcs.get_opt(&claim_name(o)).await? {
            claims.push(pvc);
        }
    }
    // The class that provisioned the claims decides (the default class when unnamed).
    let class_name = claims
        .iter()
        .find_map(|c| c.spec.as_ref()?.storage_class_name.clone());
    if let Some(reason) = expansion_refused(ctx, class_name.as_deref()).await? {
        set_template_size(desired, template, &current);
        return Ok(StorageStep::Refused {
            reason: format!("{name} stays at {current} (spec.storage.size {wanted}): {reason}"),
            current,
        });
    }
    let patch = json!({ "spec": { "resources": { "requests": { "storage": wanted } } } });
    for claim in &claims {
        let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
        let has = claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .and_then(|q| quantity_bytes(&q.0));
        if has.is_some_and(|b| b >= wanted_bytes) {
            continue;
        }
        pvcs.patch(
            claim_name,
            &PatchParams {
                field_manager: Some(MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await?;
    }
    orphan_delete(&api, &name).await?;
    Ok(StorageStep::Expanded {
        from: current,
        to: wanted,
    })
}

/// Deletes the StatefulSet so it can be re-created from a new template; Orphan keeps the
/// pods running (the new StatefulSet adopts them by its selector).
async fn orphan_delete(api: &Api<StatefulSet>, name: &str) -> Result<(), Error> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Why PVCs of `class` cannot be resized, if they cannot.
async fn expansion_refused(ctx: &Context, class: Option<&str>) -> Result<Option<String>, Error> {
    let api: Api<StorageClass> = Api::all(ctx.client.clone());
    let class = match class {
        Some(c) => api.get_opt(c).await?,
        None => api
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .find(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("storageclass.kubernetes.io/is-default-class"))
                    .is_some_and(|v| v == "true")
            }),
    };
    Ok(match class {
        None => Some("its StorageClass does not exist".to_owned()),
        Some(c) if c.allow_volume_expansion != Some(true) => Some(format!(
            "StorageClass {} does not allow volume expansion (allowVolumeExpansion is not true)",
            c.metadata.name.unwrap_or_default()
        )),
        Some(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(quantity_bytes("10Gi"), Some(10 << 30));
        assert_eq!(quantity_bytes("512Mi"), Some(512 << 20));
        assert_eq!(quantity_bytes("1G"), Some(1_000_000_000));
        assert_eq!(quantity_bytes("100"), Some(100));
        assert_eq!(quantity_bytes("1.5Gi"), None);
        assert_eq!(quantity_bytes("10Xi"), None);
    }
}
