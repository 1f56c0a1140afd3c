//! NameServer → ConfigMap, headless Service, client Service, StatefulSet, PDB.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PodSpec, PodTemplateSpec, Service, ServicePort, ServiceSpec, Volume,
    VolumeResourceRequirements,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use super::Settings;
use super::config_file::{
    CONFIG_DIR, DATA_DIR, LOG_DIR, NAMESERVER_CONF, config_hash, nameserver_conf,
};
use super::pod::{
    affinity, container_security_context, downward_env, http_probe, non_empty, non_empty_vec,
    pod_labels, pod_security_context, secret_env, tcp_port,
};
use super::secrets::MountedSecrets;
use super::volumes::{empty_dir, mount};
use crate::crd::NameServer;
use crate::names::{
    ANNOTATION_CONFIG_HASH, ANNOTATION_RESTART, NAMESERVER_PORT, NameServerNames,
    headless_selector, object_labels,
};

/// The nameserver pods' claim template (mounted at the data directory, where
/// `kvConfigPath` points); claims are `data-<statefulset>-<ordinal>`.
pub const KV_CLAIM: &str = "data";

/// Everything one NameServer owns.
#[derive(Debug, Clone, PartialEq)]
pub struct NameServerObjects {
    pub config_map: ConfigMap,
    pub headless_service: Service,
    pub client_service: Service,
    pub statefulset: StatefulSet,
    pub pdb: Option<PodDisruptionBudget>,
}

/// `enforce_admin_secret`: the pods get `RMQ_ADMIN_SECRET` from the generated Secret and
/// so refuse unsigned registrations; the reconcile turns it on once every Broker naming
/// this NameServer runs pods that sign (see `crate::reconcile::nameserver`).
pub fn build(
    ns: &NameServer,
    settings: &Settings,
    enforce_admin_secret: bool,
) -> NameServerObjects {
    let names = NameServerNames::of(ns);
    let selector = names.selector();
    let labels = object_labels(&selector);
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(names.namespace.clone()),
        labels: Some(labels.clone()),
        owner_references: ns.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    };

    let conf = nameserver_conf(ns);
    let config_map = ConfigMap {
        metadata: meta(&names.config_map),
        data: Some(BTreeMap::from([(NAMESERVER_CONF.to_owned(), conf.clone())])),
        ..ConfigMap::default()
    };

    let port = ServicePort {
        name: Some("remoting".to_owned()),
        port: NAMESERVER_PORT,
        target_port: Some(IntOrString::String("remoting".to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    };
    let metrics_port = ServicePort {
        name: Some("http".to_owned()),
        port: ns.spec.metrics.port,
        target_port: Some(IntOrString::String("http".to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    };
    // Brokers resolve every replica's name while pods start, so unready pods are
    // published too (their own readiness gates client traffic through the client Service).
    let headless_service = Service {
        metadata: ObjectMeta {
            labels: Some(object_labels(&headless_selector(selector.clone()))),
            ..meta(&names.headless_service)
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector.clone()),
            ports: Some(vec![port.clone(), metrics_port.clone()]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let client_service = Service {
        metadata: meta(&names.client_service),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(selector.clone()),
            ports: Some(vec![port, metrics_port]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };

    let mut template_annotations = ns.spec.pod.annotations.clone();
    let image = ns
        .spec
        .image
        .image
        .clone()
        .unwrap_or_else(|| settings.nameserver_image.clone());
    template_annotations.insert(
        ANNOTATION_CONFIG_HASH.to_owned(),
        config_hash([conf.as_str(), image.as_str()]),
    );
    if let Some(restart) = ns
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_RESTART))
    {
        template_annotations.insert(ANNOTATION_RESTART.to_owned(), restart.clone());
    }

    let http_port = ns.spec.metrics.port;
    let secrets = MountedSecrets::of_nameserver(ns);
    let container = Container {
        name: "nameserver".to_owned(),
        image: Some(image),
        image_pull_policy: ns.spec.image.pull_policy.map(|p| p.as_str().to_owned()),
        args: Some(vec![
            "-c".to_owned(),
            format!("{CONFIG_DIR}/{NAMESERVER_CONF}"),
        ]),
        env: Some({
            let mut env = downward_env();
            if enforce_admin_secret {
                env.push(secret_env(
                    "RMQ_ADMIN_SECRET",
                    &names.admin_secret(),
                    crate::crd::ADMIN_SECRET_KEY,
                ));
            }
            env
        }),
        ports: Some(vec![
            tcp_port("remoting", NAMESERVER_PORT),
            tcp_port("http", http_port),
        ]),
        readiness_probe: Some(http_probe("/readyz", 5, 3)),
        liveness_probe: Some(http_probe("/healthz", 10, 6)),
        resources: Some(
            ns.spec
                .resources
                .clone()
                .unwrap_or_else(|| super::pod::default_resources("100m", "256Mi", "512Mi")),
        ),
        security_context: Some(container_security_context()),
        volume_mounts: Some(
            [
                mount("config", CONFIG_DIR, true),
                mount("data", DATA_DIR, false),
                mount("logs", LOG_DIR, false),
                mount("tmp", "/tmp", false),
            ]
            .into_iter()
            .chain(secrets.mounts())
            .collect(),
        ),
        ..Container::default()
    };

    let pod = &ns.spec.pod;
    let statefulset = StatefulSet {
        metadata: meta(&names.statefulset),
        spec: Some(StatefulSetSpec {
            replicas: Some(ns.spec.replicas),
            service_name: Some(names.headless_service.clone()),
            pod_management_policy: Some("Parallel".to_owned()),
            // Nameservers hold no state worth ordering restarts for.
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".to_owned()),
                rolling_update: None,
            }),
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
                    termination_grace_period_seconds: pod.termination_grace_period_seconds,
                    image_pull_secrets: non_empty_vec(ns.spec.image.pull_secrets.clone()),
                    containers: vec![container],
                    volumes: Some(
                        [
                            Volume {
                                name: "config".to_owned(),
                                config_map: Some(ConfigMapVolumeSource {
                                    name: names.config_map.clone(),
                                    ..ConfigMapVolumeSource::default()
                                }),
                                ..Volume::default()
                            },
                            empty_dir("logs"),
                            empty_dir("tmp"),
                        ]
                        .into_iter()
                        .chain(secrets.volumes())
                        .collect(),
                    ),
                    ..PodSpec::default()
                }),
            },
            // The KV config lives on a claim (it was an emptyDir: lost on every restart).
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(KV_CLAIM.to_owned()),
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                    storage_class_name: ns.spec.storage.storage_class_name.clone(),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_owned(),
                            Quantity(ns.spec.storage.size.clone()),
                        )])),
                        limits: None,
                    }),
                    ..PersistentVolumeClaimSpec::default()
                }),
                ..PersistentVolumeClaim::default()
            }]),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    };

    let pdb = ns.spec.pdb.enabled.then(|| PodDisruptionBudget {
        metadata: meta(&names.statefulset),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(ns.spec.pdb.max_unavailable)),
            selector: Some(LabelSelector {
                match_labels: Some(selector.clone()),
                match_expressions: None,
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    });

    NameServerObjects {
        config_map,
        headless_service,
        client_service,
        statefulset,
        pdb,
    }
}
