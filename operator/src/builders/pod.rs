//! Pod-spec pieces shared by nameserver and broker pods: the "restricted" Pod Security
//! Standard, probes, environment, scheduling overrides and default anti-affinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, Probe,
    SeccompProfile, SecretKeySelector, SecurityContext, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::crd::PodOverrides;

/// Non-root UID/GID of every container (the distroless `nonroot` user).
pub const RUN_AS_USER: i64 = 65532;

/// Pod-level context satisfying the restricted profile; `fsGroup` makes the volumes
/// writable for the non-root user.
pub fn pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(RUN_AS_USER),
        run_as_group: Some(RUN_AS_USER),
        fs_group: Some(RUN_AS_USER),
        fs_group_change_policy: Some("OnRootMismatch".to_owned()),
        seccomp_profile: Some(runtime_default_seccomp()),
        ..PodSecurityContext::default()
    }
}

/// Container-level context: no privilege escalation, no capabilities, read-only root.
pub fn container_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        run_as_user: Some(RUN_AS_USER),
        run_as_group: Some(RUN_AS_USER),
        seccomp_profile: Some(runtime_default_seccomp()),
        ..SecurityContext::default()
    }
}

fn runtime_default_seccomp() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        localhost_profile: None,
    }
}

/// Probe on the container's named `http` port.
pub fn http_probe(path: &str, period: i32, failure_threshold: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String("http".to_owned()),
            scheme: Some("HTTP".to_owned()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failure_threshold),
        timeout_seconds: Some(3),
        ..Probe::default()
    }
}

pub fn tcp_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: port,
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    }
}

/// `POD_NAME` and `POD_NAMESPACE` from the downward API.
pub fn downward_env() -> Vec<EnvVar> {
    [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ]
    .into_iter()
    .map(|(name, path)| EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
        value: None,
    })
    .collect()
}

/// Prefer spreading pods matching `selector` over nodes; a user affinity replaces it.
pub fn affinity(overrides: &PodOverrides, selector: &BTreeMap<String, String>) -> Affinity {
    if let Some(a) = &overrides.affinity {
        return a.clone();
    }
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector.clone()),
                            match_expressions: None,
                        }),
                        topology_key: "kubernetes.io/hostname".to_owned(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            required_during_scheduling_ignored_during_execution: None,
        }),
        ..Affinity::default()
    }
}

/// Pod labels: the user's extra labels overlaid by the operator's own.
pub fn pod_labels(
    overrides: &PodOverrides,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = overrides.labels.clone();
    labels.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels
}

pub fn non_empty<K: Ord, V>(map: BTreeMap<K, V>) -> Option<BTreeMap<K, V>> {
    (!map.is_empty()).then_some(map)
}

pub fn non_empty_vec<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

/// Requests and a memory limit for containers whose resource sets none, so the scheduler
/// places them knowingly and a runaway process is OOM-killed instead of starving its
/// node. No CPU limit: throttling a broker's flush or replication thread costs more than
/// it protects.
pub fn default_resources(
    cpu: &str,
    memory: &str,
    memory_limit: &str,
) -> k8s_openapi::api::core::v1::ResourceRequirements {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    k8s_openapi::api::core::v1::ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_owned(),
            Quantity(memory_limit.to_owned()),
        )])),
        ..k8s_openapi::api::core::v1::ResourceRequirements::default()
    }
}

/// `var` from key `key` of Secret `secret` (not optional: the pod waits for it).
pub fn secret_env(var: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: var.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }
}
