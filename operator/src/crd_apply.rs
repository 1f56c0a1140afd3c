//! `rmq-operator crd apply`: brings the cluster's CustomResourceDefinitions to the ones
//! this binary generates. Helm installs a chart's `crds/` once and never upgrades them,
//! so the chart runs this as a pre-install/pre-upgrade hook: the new schemas are in place
//! before the new operator starts writing fields an old schema would prune.

use std::fmt;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionCondition,
};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

/// Field manager of every apply. Fixed across releases, so each run owns exactly the
/// fields the previous one set and drops those a new schema no longer has.
pub const FIELD_MANAGER: &str = "rmq-operator-crds";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Server-side dry run: the API server validates and admits every CRD but stores
    /// nothing, so there is nothing to wait for.
    pub dry_run: bool,
    /// How long all CRDs together may take to become `Established`.
    pub timeout: Duration,
    /// Pause between two reads of a CRD that is not `Established` yet. Polling rather
    /// than watching keeps the hook's RBAC to get/create/patch.
    pub poll_interval: Duration,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            dry_run: false,
            timeout: Duration::from_secs(60),
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// What an apply did to one CRD, in kubectl's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Configured,
    Unchanged,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Created => "created",
            Self::Configured => "configured",
            Self::Unchanged => "unchanged",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub name: String,
    pub change: Change,
}

#[derive(Debug, thiserror::Error)]
pub enum CrdApplyError {
    #[error("a generated CustomResourceDefinition has no metadata.name")]
    Unnamed,
    #[error("reading CustomResourceDefinition {name}: {source}")]
    Read {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("applying CustomResourceDefinition {name} (field manager {FIELD_MANAGER}): {source}")]
    Apply {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("CustomResourceDefinition {name} is not Established after {waited:?}: {detail}")]
    NotEstablished {
        name: String,
        waited: Duration,
        detail: String,
    },
}

/// Server-side applies every CRD in `crds` with [`FIELD_MANAGER`] and force (whoever
/// created them before, `helm install` or a `kubectl apply`, gives up the fields this
/// release sets), then waits until each is `Established`, i.e. served.
pub async fn apply_all(
    client: &Client,
    crds: &[CustomResourceDefinition],
    opts: &ApplyOptions,
) -> Result<Vec<Applied>, CrdApplyError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    if opts.dry_run {
        params = params.dry_run();
    }
    let mut applied = Vec::with_capacity(crds.len());
    for crd in crds {
        let name = crd.metadata.name.clone().ok_or(CrdApplyError::Unnamed)?;
        let before = api
            .get_opt(&name)
            .await
            .map_err(|source| CrdApplyError::Read {
                name: name.clone(),
                source,
            })?;
        let after = api
            .patch(&name, &params, &Patch::Apply(crd))
            .await
            .map_err(|source| CrdApplyError::Apply {
                name: name.clone(),
                source,
            })?;
        // Compared by content, not resourceVersion: a dry run answers with the stored
        // version even when it would change the object.
        let change = match before {
            None => Change::Created,
            Some(b) if b.spec == after.spec && same_labels(&b, &after) => Change::Unchanged,
            Some(_) => Change::Configured,
        };
        applied.push(Applied { name, change });
    }
    if !opts.dry_run {
        let deadline = tokio::time::Instant::now() + opts.timeout;
        for a in &applied {
            wait_established(&api, &a.name, deadline, opts).await?;
        }
    }
    Ok(applied)
}

fn same_labels(a: &CustomResourceDefinition, b: &CustomResourceDefinition) -> bool {
    a.metadata.labels == b.metadata.labels && a.metadata.annotations == b.metadata.annotations
}

async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    deadline: tokio::time::Instant,
    opts: &ApplyOptions,
) -> Result<(), CrdApplyError> {
    loop {
        let crd = api
            .get_opt(name)
            .await
            .map_err(|source| CrdApplyError::Read {
                name: name.to_owned(),
                source,
            })?;
        let conditions = crd
            .as_ref()
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
        {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CrdApplyError::NotEstablished {
                name: name.to_owned(),
                waited: opts.timeout,
                detail: match crd {
                    None => "it no longer exists".to_owned(),
                    Some(_) => why_not_established(conditions),
                },
            });
        }
        tokio::time::sleep(opts.poll_interval).await;
    }
}

/// The conditions that explain a CRD not being served (a `NamesAccepted=False` name
/// conflict is the usual one), or that the API server has not reported on it yet.
fn why_not_established(conditions: &[CustomResourceDefinitionCondition]) -> String {
    let failing: Vec<String> = conditions
        .iter()
        .filter(|c| c.status != "True")
        .map(|c| {
            format!(
                "{}={} ({}): {}",
                c.type_,
                c.status,
                c.reason.as_deref().unwrap_or("no reason"),
                c.message.as_deref().unwrap_or("no message")
            )
        })
        .collect();
    if failing.is_empty() {
        "the API server has not reported it Established yet".to_owned()
    } else {
        failing.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_conflict_is_named_in_the_failure() {
        let conditions = [
            CustomResourceDefinitionCondition {
                type_: "NamesAccepted".to_owned(),
                status: "False".to_owned(),
                reason: Some("NameConflict".to_owned()),
                message: Some("\"rmqns\" is already in use".to_owned()),
                ..CustomResourceDefinitionCondition::default()
            },
            CustomResourceDefinitionCondition {
                type_: "Terminating".to_owned(),
                status: "True".to_owned(),
                ..CustomResourceDefinitionCondition::default()
            },
        ];
        assert_eq!(
            why_not_established(&conditions),
            "NamesAccepted=False (NameConflict): \"rmqns\" is already in use"
        );
        assert!(why_not_established(&[]).contains("not reported"));
    }
}
