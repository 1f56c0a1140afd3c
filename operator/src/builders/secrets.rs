//! The ACL and TLS Secrets a Broker or NameServer names, shared by both builders: each is
//! mounted read-only and the server's config file names only the mounted paths. Mounted,
//! never copied: the kubelet updates the files when the Secret changes, both servers
//! hot-reload them, and no value passes through the operator, a ConfigMap or a status.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{KeyToPath, SecretVolumeSource, Volume, VolumeMount};

use super::volumes::mount;
use crate::crd::{
    ACL_SECRET_KEY, Broker, CA_KEY, NameServer, SecretKeyRef, TLS_CERT_KEY, TLS_KEY_KEY, TlsSpec,
};

/// Where the ACL and TLS Secrets are mounted in broker and nameserver pods.
pub const ACL_DIR: &str = "/etc/rocketmq-acl";
pub const TLS_DIR: &str = "/etc/rocketmq-tls";
/// The keys of a cert-manager (`kubernetes.io/tls`) Secret.
const TLS_KEYS: [&str; 3] = [TLS_CERT_KEY, TLS_KEY_KEY, CA_KEY];

/// The Secrets one server pod mounts.
#[derive(Debug, Clone, Copy, Default)]
pub struct MountedSecrets<'a> {
    pub acl: Option<&'a SecretKeyRef>,
    pub tls: Option<&'a TlsSpec>,
}

impl<'a> MountedSecrets<'a> {
    pub fn of_broker(broker: &'a Broker) -> Self {
        let security = &broker.spec.security;
        Self {
            acl: security.acl.as_ref(),
            tls: security.tls.as_ref(),
        }
    }

    pub fn of_nameserver(ns: &'a NameServer) -> Self {
        let security = &ns.spec.security;
        Self {
            acl: security.acl.as_ref(),
            tls: security.tls.as_ref(),
        }
    }

    /// The pod's secret volumes.
    pub fn volumes(&self) -> Vec<Volume> {
        self.entries().into_iter().map(|(v, _)| v).collect()
    }

    /// The container's read-only mounts of [`Self::volumes`].
    pub fn mounts(&self) -> Vec<VolumeMount> {
        self.entries()
            .into_iter()
            .map(|(v, dir)| mount(&v.name, dir, true))
            .collect()
    }

    /// Server-side keys, the same in broker.conf and namesrv.conf: `aclEnable`/`aclFile`
    /// and `tls.server.*`. They override `spec.config`, so the file always points at what
    /// is mounted.
    pub fn insert_server_props(&self, props: &mut BTreeMap<String, String>) {
        if let Some(acl) = self.acl {
            props.insert("aclEnable".to_owned(), "true".to_owned());
            props.insert(
                "aclFile".to_owned(),
                format!("{ACL_DIR}/{}", acl.key_or(ACL_SECRET_KEY)),
            );
        }
        if let Some(tls) = self.tls {
            // `permissive` unless the spec enforces: brokers also dial nameservers and
            // masters, and `enforcing` needs every one of those peers on TLS first (the
            // Broker reconcile checks its NameServer, see `TlsSpec`).
            for (k, v) in [
                ("tls.server.mode", tls.mode.as_str().to_owned()),
                ("tls.server.certPath", format!("{TLS_DIR}/tls.crt")),
                ("tls.server.keyPath", format!("{TLS_DIR}/tls.key")),
                ("tls.server.trustCertPath", format!("{TLS_DIR}/ca.crt")),
                (
                    "tls.server.need.client.auth",
                    if tls.require_client_certificates {
                        "require"
                    } else {
                        "none"
                    }
                    .to_owned(),
                ),
            ] {
                props.insert(k.to_owned(), v);
            }
        }
    }

    fn entries(&self) -> Vec<(Volume, &'static str)> {
        let mut out = Vec::new();
        if let Some(acl) = self.acl {
            out.push((
                secret_volume("acl", &acl.name, &[acl.key_or(ACL_SECRET_KEY)]),
                ACL_DIR,
            ));
        }
        if let Some(tls) = self.tls {
            out.push((secret_volume("tls", &tls.secret_name, &TLS_KEYS), TLS_DIR));
        }
        out
    }
}

/// A volume of the listed keys of `secret`; a missing Secret or key keeps the pod from
/// starting (`optional: false`) rather than starting a server without its ACL or
/// certificate.
fn secret_volume(name: &str, secret: &str, keys: &[&str]) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_owned()),
            items: Some(
                keys.iter()
                    .map(|k| KeyToPath {
                        key: (*k).to_owned(),
                        path: (*k).to_owned(),
                        mode: None,
                    })
                    .collect(),
            ),
            // Owner read, group read (the pods' fsGroup), nobody else.
            default_mode: Some(0o440),
            optional: Some(false),
        }),
        ..Volume::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_acl_key_is_mounted_and_named_under_its_own_file_name() {
        let acl = SecretKeyRef {
            name: "team-acl".to_owned(),
            key: Some("acl.yaml".to_owned()),
        };
        let secrets = MountedSecrets {
            acl: Some(&acl),
            tls: None,
        };
        let mut props = BTreeMap::new();
        secrets.insert_server_props(&mut props);
        assert_eq!(props["aclFile"], "/etc/rocketmq-acl/acl.yaml");
        let items = secrets.volumes()[0]
            .secret
            .as_ref()
            .and_then(|s| s.items.clone())
            .unwrap_or_default();
        assert_eq!(items[0].key, "acl.yaml");
        assert_eq!(secrets.mounts()[0].read_only, Some(true));
    }

    #[test]
    fn nothing_named_mounts_nothing_and_sets_no_key() {
        let secrets = MountedSecrets::default();
        let mut props = BTreeMap::new();
        secrets.insert_server_props(&mut props);
        assert!(props.is_empty());
        assert!(secrets.volumes().is_empty() && secrets.mounts().is_empty());
    }
}
