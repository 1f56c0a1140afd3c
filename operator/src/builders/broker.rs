//! Broker → a headless Service for the cluster and, per group, a ConfigMap with each
//! member's broker.conf, a StatefulSet (`OnDelete`: the operator restarts pods itself), a
//! Service selecting the group's current master, and a PodDisruptionBudget.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EnvVar, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec, Probe, Service, ServicePort, ServiceSpec,
    Volume, VolumeResourceRequirements,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use super::Settings;
use super::config_file::{
    BROKER_TERMINATION_GRACE_SECS, CONFIG_DIR, DATA_DIR, LOG_DIR, broker_conf, broker_conf_key,
    config_hash, fenced_identities, member_identities, restart_relevant,
};
use super::listener::{Advertised, startable_replicas};
use super::pod::{
    affinity, container_security_context, downward_env, http_probe, non_empty, non_empty_vec,
    pod_labels, pod_security_context, secret_env, tcp_port,
};
use super::secrets::MountedSecrets;
use super::volumes::{empty_dir, mount};
use crate::crd::{Broker, HA_SECRET_KEY};
use crate::names::{
    ANNOTATION_CONFIG_HASH, ANNOTATION_RESTART, BROKER_HA_PORT, BROKER_PORT, BrokerNames,
    LABEL_ROLE, headless_selector, object_labels,
};

pub const ROLE_MASTER: &str = "master";
pub const ROLE_SLAVE: &str = "slave";

/// What the builder needs beyond the spec: the nameserver list and, per group, which pod
/// ordinal is master (from `status.groups[].masterPod`, 0 for a new group).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerInputs {
    pub namesrv_addr: String,
    pub master_ordinals: Vec<i32>,
    /// Groups whose master is fenced mid-failover: every member is configured as a slave
    /// (see [`fenced_identities`]). Missing entries mean not fenced.
    pub fenced: Vec<bool>,
    /// With an external listener: what each pod advertises, by pod, once known.
    pub external: BTreeMap<String, Advertised>,
    /// Broker pods that exist, so an external listener never stops a running pod while
    /// it waits for addresses (see [`startable_replicas`]).
    pub running: BTreeSet<String>,
}

impl BrokerInputs {
    pub fn master_ordinal(&self, group: i32) -> i32 {
        usize::try_from(group)
            .ok()
            .and_then(|g| self.master_ordinals.get(g))
            .copied()
            .unwrap_or(0)
    }

    pub fn master_fenced(&self, group: i32) -> bool {
        usize::try_from(group)
            .ok()
            .and_then(|g| self.fenced.get(g))
            .copied()
            .unwrap_or(false)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupObjects {
    pub broker_name: String,
    pub config_map: ConfigMap,
    pub statefulset: StatefulSet,
    pub master_service: Service,
    /// The slaves' budget (the whole group's with a single replica).
    pub pdb: Option<PodDisruptionBudget>,
    /// The master's budget (no disruption allowed) when the group has replicas.
    pub master_pdb: Option<PodDisruptionBudget>,
    /// Who may reach the group's ports (`None` when the spec turns it off).
    pub network_policy: Option<NetworkPolicy>,
    /// The `rmq-rs.dev/config-hash` the group's pods should run with.
    pub config_hash: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BrokerObjects {
    pub headless_service: Service,
    pub groups: Vec<GroupObjects>,
}

pub fn build(broker: &Broker, inputs: &BrokerInputs, settings: &Settings) -> BrokerObjects {
    let names = BrokerNames::of(broker);
    let headless_service = Service {
        metadata: meta(
            broker,
            &names.headless_service,
            &object_labels(&headless_selector(names.selector())),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            selector: Some(names.selector()),
            ports: Some(
                [
                    service_port("remoting", BROKER_PORT),
                    service_port("ha", BROKER_HA_PORT),
                    service_port("http", broker.spec.metrics.port),
                ]
                .into_iter()
                .chain(broker.spec.grpc.enabled_port().map(grpc_service_port))
                .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let groups = (0..broker.spec.groups.max(0))
        .map(|g| build_group(broker, &names, g, inputs, settings))
        .collect();
    BrokerObjects {
        headless_service,
        groups,
    }
}

/// One group's objects (the failover executor rewrites a single group's ConfigMap).
pub fn build_group(
    broker: &Broker,
    names: &BrokerNames,
    group: i32,
    inputs: &BrokerInputs,
    settings: &Settings,
) -> GroupObjects {
    let spec = &broker.spec;
    let broker_name = names.broker_name(group);
    let selector = names.group_selector(group);
    let labels = object_labels(&selector);
    let image = spec
        .image
        .image
        .clone()
        .unwrap_or_else(|| settings.broker_image.clone());

    let members = if inputs.master_fenced(group) {
        fenced_identities(spec.replicas_per_group, inputs.master_ordinal(group))
    } else {
        member_identities(spec.replicas_per_group, inputs.master_ordinal(group))
    };
    let confs: BTreeMap<String, String> = members
        .iter()
        .map(|m| {
            let pod = names.pod(group, m.ordinal);
            let conf = broker_conf(
                broker,
                group,
                *m,
                &inputs.namesrv_addr,
                &settings.cluster_domain,
                inputs.external.get(&pod),
            );
            (broker_conf_key(&names.pod(group, m.ordinal)), conf)
        })
        .collect();
    let hash_input: Vec<String> = confs
        .iter()
        .flat_map(|(k, v)| [k.clone(), restart_relevant(v)])
        .chain([image.clone()])
        .collect();
    let hash = config_hash(hash_input.iter().map(String::as_str));

    let config_map = ConfigMap {
        metadata: meta(broker, &names.config_map(group), &labels),
        data: Some(confs),
        ..ConfigMap::default()
    };

    let mut master_selector = selector.clone();
    master_selector.insert(LABEL_ROLE.to_owned(), ROLE_MASTER.to_owned());
    let master_service = Service {
        metadata: meta(broker, &broker_name, &labels),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(master_selector),
            ports: Some(
                std::iter::once(service_port("remoting", BROKER_PORT))
                    .chain(spec.grpc.enabled_port().map(grpc_service_port))
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };

    let mut template_annotations = spec.pod.annotations.clone();
    template_annotations.insert(ANNOTATION_CONFIG_HASH.to_owned(), hash.clone());
    if let Some(restart) = broker
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_RESTART))
    {
        template_annotations.insert(ANNOTATION_RESTART.to_owned(), restart.clone());
    }

    let container = Container {
        name: "broker".to_owned(),
        image: Some(image),
        image_pull_policy: spec.image.pull_policy.map(|p| p.as_str().to_owned()),
        // Kubernetes expands $(POD_NAME) from the env below: each member reads its own file.
        args: Some(vec![
            "-c".to_owned(),
            format!("{CONFIG_DIR}/$(POD_NAME).conf"),
        ]),
        env: Some(broker_env(broker, names)),
        ports: Some(
            [
                tcp_port("remoting", BROKER_PORT),
                tcp_port("ha", BROKER_HA_PORT),
                tcp_port("http", spec.metrics.port),
            ]
            .into_iter()
            .chain(spec.grpc.enabled_port().map(|p| tcp_port("grpc", p)))
            .collect(),
        ),
        // Recovery of a large commit log can take minutes; liveness waits for startup.
        startup_probe: Some(Probe {
            initial_delay_seconds: Some(5),
            ..http_probe("/healthz", 5, 120)
        }),
        readiness_probe: Some(http_probe("/readyz", 5, 3)),
        liveness_probe: Some(http_probe("/healthz", 10, 6)),
        resources: Some(
            spec.resources
                .clone()
                .unwrap_or_else(|| super::pod::default_resources("500m", "1Gi", "2Gi")),
        ),
        security_context: Some(container_security_context()),
        volume_mounts: Some(
            [
                mount("config", CONFIG_DIR, true),
                mount("store", DATA_DIR, false),
                mount("logs", LOG_DIR, false),
                mount("tmp", "/tmp", false),
            ]
            .into_iter()
            .chain(MountedSecrets::of_broker(broker).mounts())
            .collect(),
        ),
        ..Container::default()
    };

    let pod = &spec.pod;
    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("store".to_owned()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            storage_class_name: spec.storage.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(spec.storage.size.clone()),
                )])),
                limits: None,
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    };
    let retention = if spec.storage.delete_claim {
        "Delete"
    } else {
        "Retain"
    };

    let statefulset = StatefulSet {
        metadata: meta(broker, &broker_name, &labels),
        spec: Some(StatefulSetSpec {
            replicas: Some(if spec.listener.external() {
                startable_replicas(
                    names,
                    group,
                    spec.replicas_per_group,
                    &inputs.external,
                    &inputs.running,
                )
            } else {
                spec.replicas_per_group
            }),
            service_name: Some(names.headless_service.clone()),
            pod_management_policy: Some("Parallel".to_owned()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".to_owned()),
                rolling_update: None,
            }),
            persistent_volume_claim_retention_policy: Some(
                StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: Some(retention.to_owned()),
                    when_scaled: Some("Retain".to_owned()),
                },
            ),
            selector: LabelSelector {
                match_labels: Some(selector.clone()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels(pod, &labels)),
                    annotations: Some(template_annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    automount_service_account_token: Some(false),
                    enable_service_links: Some(false),
                    security_context: Some(pod_security_context()),
                    affinity: Some(affinity(pod, &selector)),
                    tolerations: non_empty_vec(pod.tolerations.clone()),
                    node_selector: non_empty(pod.node_selector.clone()),
                    topology_spread_constraints: non_empty_vec(
                        pod.topology_spread_constraints.clone(),
                    ),
                    priority_class_name: pod.priority_class_name.clone(),
                    // No preStop hook: the image is `scratch`, with nothing to exec. The
                    // broker does it on SIGTERM (unregister, keep serving, then close);
                    // the grace period covers that wait plus the flush.
                    termination_grace_period_seconds: pod
                        .termination_grace_period_seconds
                        .or(Some(BROKER_TERMINATION_GRACE_SECS)),
                    image_pull_secrets: non_empty_vec(spec.image.pull_secrets.clone()),
                    containers: vec![container],
                    volumes: Some(
                        vec![
                            Volume {
                                name: "config".to_owned(),
                                config_map: Some(ConfigMapVolumeSource {
                                    name: names.config_map(group),
                                    ..ConfigMapVolumeSource::default()
                                }),
                                ..Volume::default()
                            },
                            empty_dir("logs"),
                            empty_dir("tmp"),
                        ]
                        .into_iter()
                        .chain(MountedSecrets::of_broker(broker).volumes())
                        .collect(),
                    ),
                    ..PodSpec::default()
                }),
            },
            volume_claim_templates: Some(vec![claim]),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    };

    // With replicas, a master is never evicted: its PDB allows no disruption, so
    // `kubectl drain` waits until the operator has handed mastership over (the pod then
    // carries role=slave and falls under the slaves' budget). See `drain.rs`.
    let replicated = spec.replicas_per_group > 1;
    let with_role = |role: &str| {
        let mut s = selector.clone();
        s.insert(LABEL_ROLE.to_owned(), role.to_owned());
        s
    };
    let budget = |name: String, selector: BTreeMap<String, String>, max_unavailable: i32| {
        PodDisruptionBudget {
            metadata: meta(broker, &name, &labels),
            spec: Some(PodDisruptionBudgetSpec {
                max_unavailable: Some(IntOrString::Int(max_unavailable)),
                selector: Some(LabelSelector {
                    match_labels: Some(selector),
                    match_expressions: None,
                }),
                ..PodDisruptionBudgetSpec::default()
            }),
            ..PodDisruptionBudget::default()
        }
    };
    let pdb = spec.pdb.enabled.then(|| {
        let slaves = if replicated {
            with_role(ROLE_SLAVE)
        } else {
            selector.clone()
        };
        budget(names.pdb(group), slaves, spec.pdb.max_unavailable)
    });
    let master_pdb = (spec.pdb.enabled && replicated)
        .then(|| budget(names.master_pdb(group), with_role(ROLE_MASTER), 0));

    GroupObjects {
        broker_name,
        config_map,
        statefulset,
        master_service,
        pdb,
        master_pdb,
        network_policy: super::network_policy::build(
            broker,
            names,
            group,
            &members
                .iter()
                .filter_map(|m| inputs.external.get(&names.pod(group, m.ordinal)))
                .flat_map(|a| [Some(a.port), a.grpc_port])
                .flatten()
                .filter(|p| *p != BROKER_PORT && Some(*p) != spec.grpc.enabled_port())
                .collect::<Vec<_>>(),
        ),
        config_hash: hash,
    }
}

/// The downward-API variables plus the secrets the broker reads from its environment:
/// `RMQ_HA_SECRET` (the group's HA handshake secret; the broker refuses to start a
/// replicating role without it), `RMQ_ADMIN_SECRET` (what role changes and config pushes
/// must be signed with while the ACL is off), `RMQ_NAMESRV_ADMIN_SECRET` (what its
/// registrations are signed with) and the broker's own account. Each comes from a
/// `secretKeyRef`, so no value ever passes through the operator or a ConfigMap.
fn broker_env(broker: &Broker, names: &BrokerNames) -> Vec<EnvVar> {
    let security = &broker.spec.security;
    let mut env = downward_env();
    let (ha_name, ha_key) = match &security.ha_secret {
        Some(r) => (r.name.clone(), r.key_or(HA_SECRET_KEY).to_owned()),
        None => (names.ha_secret(), HA_SECRET_KEY.to_owned()),
    };
    env.push(secret_env("RMQ_HA_SECRET", &ha_name, &ha_key));
    env.push(secret_env(
        "RMQ_ADMIN_SECRET",
        &names.admin_secret(),
        crate::crd::ADMIN_SECRET_KEY,
    ));
    // The NameServer's generated admin secret: what registrations are signed with (the
    // NameServer's reconcile creates it; the pod waits for it, as for its own).
    let namesrv = crate::names::NameServerNames::new(
        &broker.spec.name_server_ref.name,
        broker.metadata.namespace.as_deref().unwrap_or_default(),
    );
    env.push(secret_env(
        "RMQ_NAMESRV_ADMIN_SECRET",
        &namesrv.admin_secret(),
        crate::crd::ADMIN_SECRET_KEY,
    ));
    if let Some(creds) = &security.broker_credentials {
        env.push(secret_env(
            "ROCKETMQ_BROKER_ACCESS_KEY",
            &creds.secret_name,
            crate::crd::ACCESS_KEY_KEY,
        ));
        env.push(secret_env(
            "ROCKETMQ_BROKER_SECRET_KEY",
            &creds.secret_name,
            crate::crd::SECRET_KEY_KEY,
        ));
    }
    env
}

fn meta(broker: &Broker, name: &str, labels: &BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: broker.metadata.namespace.clone(),
        labels: Some(labels.clone()),
        owner_references: broker.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}

/// The gRPC endpoint's port (5.x clients); named like the container port it targets.
fn grpc_service_port(port: i32) -> ServicePort {
    service_port("grpc", port)
}

fn service_port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        port,
        target_port: Some(IntOrString::String(name.to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }
}
