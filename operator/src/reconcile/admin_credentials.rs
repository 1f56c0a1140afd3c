//! How the operator reaches a resource's pods with its admin requests: the account it
//! signs with (a Broker's `spec.security.adminCredentials` for its pods when it has an
//! `acl`, else the Broker's generated admin secret, `<name>-admin-secret`, which its
//! brokers require on role changes and config pushes; a NameServer's `adminCredentials`
//! for the nameservers) and TLS when the pods serve it (`spec.security.tls`: the Secret's
//! `ca.crt`, plus `tls.crt`/`tls.key` for mTLS). Read from the Secrets with a GET at
//! every reconcile of the Broker or of a Topic on it, so a rotated Secret takes effect on
//! the next one; never cached, and the values only ever reach the request signer and the
//! TLS client: errors and Events name the Secret and the key, never what is in it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use security::sign::Credentials;
use security::tls::TlsClient;

use super::apply::patch_status;
use super::{Context, Error};
use crate::admin::{Admin, PeerAccess};
use crate::conditions::{self, Desired};
use crate::crd::{
    ADMIN_SECRET_KEY, Broker, BrokerStatus, CA_KEY, NameServer, SecretRef, TLS_CERT_KEY,
    TLS_KEY_KEY, TlsSpec,
};
use crate::names::{BrokerNames, NameServerNames};

/// Keys of the Secret, as for `brokerCredentials`.
pub use crate::crd::{ACCESS_KEY_KEY as ACCESS_KEY, SECRET_KEY_KEY as SECRET_KEY};
/// Reason of the Broker's `Ready=False` condition and of its Warning Event.
pub const REASON: &str = "AdminCredentialsUnavailable";
/// The same, when what is missing is the TLS side (`spec.security.tls`).
pub const TLS_REASON: &str = "AdminTlsUnavailable";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error(
        "Secret {secret} ({kind} spec.security.adminCredentials) does not exist in {namespace}"
    )]
    SecretNotFound {
        kind: &'static str,
        namespace: String,
        secret: String,
    },
    #[error("Secret {secret} ({kind} spec.security.adminCredentials) has no non-empty key {key}")]
    MissingKey {
        kind: &'static str,
        secret: String,
        key: &'static str,
    },
    #[error(
        "key {key} of Secret {secret} ({kind} spec.security.adminCredentials) is not UTF-8 text"
    )]
    NotText {
        kind: &'static str,
        secret: String,
        key: &'static str,
    },
    /// A generated admin secret (a Broker's or a NameServer's) cannot be used (missing, empty, not a valid
    /// `adminSecret` list); the reason never quotes the value.
    #[error("Secret {secret} (the generated admin secret, key {ADMIN_SECRET_KEY}): {reason}")]
    AdminSecret { secret: String, reason: String },
    /// The pods serve TLS and the operator cannot set up its side: the reason names the
    /// Secret and the key, never their content.
    #[error("{kind} spec.security.tls: {reason}")]
    Tls { kind: &'static str, reason: String },
}

impl CredentialsError {
    /// The `Ready=False` condition's and the Warning Event's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Tls { .. } => TLS_REASON,
            _ => REASON,
        }
    }
}

/// The admin client for `broker`'s pods, over TLS when its pods serve TLS
/// (`spec.security.tls`). Signed with its `adminCredentials` when it has an `acl` (the
/// ACL decides there; unsigned without them), else with its generated admin secret: with
/// the ACL off the brokers check that secret on role changes and config pushes, and an
/// ACL account would not pass.
pub async fn admin_for(ctx: &Context, broker: &Broker) -> Result<Arc<dyn Admin>, Error> {
    let security = &broker.spec.security;
    let signer = match (&security.acl, &security.admin_credentials) {
        (Some(_), Some(account)) => Signer::Account(account),
        (Some(_), None) => Signer::Unsigned,
        (None, _) => Signer::AdminSecret(BrokerNames::of(broker).admin_secret()),
    };
    scoped(
        ctx,
        "Broker",
        broker.metadata.namespace.as_deref(),
        signer,
        security.tls.as_ref(),
    )
    .await
}

/// What the operator signs a resource's admin requests with.
enum Signer<'a> {
    Unsigned,
    /// An ACL account: a Secret with `accessKey` and `secretKey`.
    Account(&'a SecretRef),
    /// The first secret of the `adminSecret` list in this Secret, as `rmq-admin`.
    AdminSecret(String),
}

/// The admin client for `nameserver`'s pods, signed with its own `adminCredentials` when
/// it has an `acl` (the nameserver's ACL file is its own, so a Broker's account need not
/// be in it), else with its generated admin secret; over TLS with its own certificate's
/// CA.
pub async fn namesrv_admin_for(
    ctx: &Context,
    nameserver: &NameServer,
) -> Result<Arc<dyn Admin>, Error> {
    scoped(
        ctx,
        "NameServer",
        nameserver.metadata.namespace.as_deref(),
        match (
            &nameserver.spec.security.acl,
            &nameserver.spec.security.admin_credentials,
        ) {
            (Some(_), Some(account)) => Signer::Account(account),
            (Some(_), None) => Signer::Unsigned,
            // With the ACL off the nameservers check their generated admin secret.
            (None, _) => Signer::AdminSecret(NameServerNames::of(nameserver).admin_secret()),
        },
        nameserver.spec.security.tls.as_ref(),
    )
    .await
}

/// `kind` names the resource whose `spec.security` this is, in errors.
async fn scoped(
    ctx: &Context,
    kind: &'static str,
    namespace: Option<&str>,
    signer: Signer<'_>,
    tls: Option<&TlsSpec>,
) -> Result<Arc<dyn Admin>, Error> {
    if matches!(signer, Signer::Unsigned) && tls.is_none() {
        return Ok(ctx.admin.clone());
    }
    let namespace = namespace.ok_or(Error::MissingField("metadata.namespace"))?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let credentials = match signer {
        Signer::Unsigned => None,
        Signer::Account(secret_ref) => {
            Some(account(&api, kind, namespace, &secret_ref.secret_name).await?)
        }
        Signer::AdminSecret(name) => admin_secret(&api, &name).await?,
    };
    let tls = match tls {
        Some(spec) => Some(tls_client(&api, kind, namespace, spec).await?),
        None => None,
    };
    Ok(ctx.admin.scoped(PeerAccess { credentials, tls }))
}

async fn account(
    api: &Api<Secret>,
    kind: &'static str,
    namespace: &str,
    name: &str,
) -> Result<Credentials, Error> {
    let secret = api
        .get_opt(name)
        .await?
        .ok_or_else(|| CredentialsError::SecretNotFound {
            kind,
            namespace: namespace.to_owned(),
            secret: name.to_owned(),
        })?;
    let access_key = value(&secret, kind, name, ACCESS_KEY)?;
    let secret_key = value(&secret, kind, name, SECRET_KEY)?;
    Ok(Credentials::new(access_key, secret_key))
}

/// Credentials signing with the first secret of the `adminSecret` list in Secret `name`;
/// `None` while the Secret does not exist: the Broker's reconcile creates it before any
/// pod, and pods cannot start without it (`secretKeyRef`, not optional), so no broker
/// of this Broker checks a secret yet (pods from before the operator generated one run
/// in open mode until they restart).
async fn admin_secret(api: &Api<Secret>, name: &str) -> Result<Option<Credentials>, Error> {
    let problem = |reason: &str| CredentialsError::AdminSecret {
        secret: name.to_owned(),
        reason: reason.to_owned(),
    };
    let Some(secret) = api.get_opt(name).await? else {
        return Ok(None);
    };
    let text = non_empty(&secret, ADMIN_SECRET_KEY)
        .and_then(|b| std::str::from_utf8(b).ok())
        .ok_or_else(|| problem("missing, empty or not UTF-8 text"))?;
    match security::admin_secret::signer(text) {
        Ok(Some(credentials)) => Ok(Some(credentials)),
        Ok(None) => Err(problem("holds no secret").into()),
        Err(e) => Err(problem(&e.to_string()).into()),
    }
}

/// TLS to pods serving the certificate of `spec`'s Secret: trusting its `ca.crt`, and
/// presenting its `tls.crt` / `tls.key` when they require client certificates. The pods
/// are dialled by their DNS names (`<pod>.<headless service>.<namespace>.svc.<domain>`),
/// which the certificate must cover.
async fn tls_client(
    api: &Api<Secret>,
    kind: &'static str,
    namespace: &str,
    spec: &TlsSpec,
) -> Result<TlsClient, Error> {
    let name = spec.secret_name.as_str();
    let problem = |reason: String| CredentialsError::Tls { kind, reason };
    let secret = api
        .get_opt(name)
        .await?
        .ok_or_else(|| problem(format!("Secret {name} does not exist in {namespace}")))?;
    let bytes = |key: &str| {
        non_empty(&secret, key)
            .ok_or_else(|| problem(format!("Secret {name} has no non-empty key {key}")))
    };
    let identity = if spec.require_client_certificates {
        Some((bytes(TLS_CERT_KEY)?, bytes(TLS_KEY_KEY)?))
    } else {
        None
    };
    TlsClient::from_pem(bytes(CA_KEY)?, identity, &format!("Secret {name}"))
        .map_err(|e| problem(e.to_string()).into())
}

/// The value of `key` in `secret`, unless absent or empty.
fn non_empty<'s>(secret: &'s Secret, key: &str) -> Option<&'s [u8]> {
    let bytes = secret.data.as_ref()?.get(key)?.0.as_slice();
    (!bytes.is_empty()).then_some(bytes)
}

fn value(
    secret: &Secret,
    kind: &'static str,
    name: &str,
    key: &'static str,
) -> Result<String, CredentialsError> {
    let bytes = non_empty(secret, key).ok_or_else(|| CredentialsError::MissingKey {
        kind,
        secret: name.to_owned(),
        key,
    })?;
    String::from_utf8(bytes.to_vec()).map_err(|_| CredentialsError::NotText {
        kind,
        secret: name.to_owned(),
        key,
    })
}

/// Records on the Broker why it is not reconciled (a condition, and a Warning Event the
/// first time), and returns the error that fails the reconcile so it retries with backoff.
pub async fn report(
    ctx: &Context,
    broker: &Broker,
    stored: &BrokerStatus,
    problem: CredentialsError,
) -> Error {
    let message = problem.to_string();
    let reason = problem.reason();
    let generation = broker.metadata.generation;
    let mut status = stored.clone();
    status.conditions = conditions::merge(
        &stored.conditions,
        &[Desired::new(
            conditions::READY,
            false,
            reason,
            message.clone(),
        )],
        generation,
        Timestamp::now(),
    );
    if status != *stored {
        let written = patch_status::<Broker, _>(
            &ctx.client,
            &broker.namespace().unwrap_or_default(),
            &broker.name_any(),
            &status,
        )
        .await;
        if let Err(e) = written {
            return e;
        }
    }
    if !conditions::has_reason(&stored.conditions, conditions::READY, reason) {
        ctx.events
            .publish(
                crate::crd::BROKER_KIND,
                &broker.object_ref(&()),
                true,
                reason,
                "Reconcile",
                format!("{message}; no admin request is sent to the brokers until it is fixed"),
            )
            .await;
    }
    problem.into()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(pairs: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn keys_are_read_as_text_and_problems_name_only_the_key() {
        let s = secret(&[(ACCESS_KEY, b"ak"), (SECRET_KEY, b"")]);
        assert_eq!(
            value(&s, "Broker", "creds", ACCESS_KEY),
            Ok("ak".to_owned())
        );
        let empty = value(&s, "NameServer", "creds", SECRET_KEY).unwrap_err();
        assert_eq!(
            empty.to_string(),
            "Secret creds (NameServer spec.security.adminCredentials) has no non-empty key \
             secretKey"
        );
        let binary = secret(&[(SECRET_KEY, &[0xff, 0xfe, b's', b'3'])]);
        let err = value(&binary, "Broker", "creds", SECRET_KEY).unwrap_err();
        assert_eq!(
            err,
            CredentialsError::NotText {
                kind: "Broker",
                secret: "creds".to_owned(),
                key: SECRET_KEY
            }
        );
        assert!(value(&Secret::default(), "Broker", "creds", ACCESS_KEY).is_err());
    }
}
