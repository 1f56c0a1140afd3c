//! The accounts the operator signs its admin requests with: a Broker's
//! `spec.security.adminCredentials` for its pods, a NameServer's for the nameservers.
//! Read from the Secret with a GET at every reconcile of the Broker or of a Topic on it,
//! so a rotated Secret takes effect on the next one;
//! never cached, and the value only ever reaches the request signer: errors and Events
//! name the Secret and the key, never what is in it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use security::sign::Credentials;

use super::apply::patch_status;
use super::{Context, Error};
use crate::admin::Admin;
use crate::conditions::{self, Desired};
use crate::crd::{Broker, BrokerStatus, NameServer, SecretRef};

/// Keys of the Secret, as for `brokerCredentials`.
pub use crate::crd::{ACCESS_KEY_KEY as ACCESS_KEY, SECRET_KEY_KEY as SECRET_KEY};
/// Reason of the Broker's `Ready=False` condition and of its Warning Event.
pub const REASON: &str = "AdminCredentialsUnavailable";

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
}

/// The admin client for `broker`'s pods: signed with its `adminCredentials` when it names
/// a Secret, the operator's unsigned one otherwise.
pub async fn admin_for(ctx: &Context, broker: &Broker) -> Result<Arc<dyn Admin>, Error> {
    signed_with(
        ctx,
        "Broker",
        broker.metadata.namespace.as_deref(),
        broker.spec.security.admin_credentials.as_ref(),
    )
    .await
}

/// The admin client for `nameserver`'s pods, signed with its own `adminCredentials`
/// (the nameserver's ACL file is its own, so a Broker's account need not be in it).
pub async fn namesrv_admin_for(
    ctx: &Context,
    nameserver: &NameServer,
) -> Result<Arc<dyn Admin>, Error> {
    signed_with(
        ctx,
        "NameServer",
        nameserver.metadata.namespace.as_deref(),
        nameserver.spec.security.admin_credentials.as_ref(),
    )
    .await
}

/// `kind` names the resource whose `spec.security.adminCredentials` this is, in errors.
async fn signed_with(
    ctx: &Context,
    kind: &'static str,
    namespace: Option<&str>,
    secret_ref: Option<&SecretRef>,
) -> Result<Arc<dyn Admin>, Error> {
    let Some(secret_ref) = secret_ref else {
        return Ok(ctx.admin.clone());
    };
    let namespace = namespace.ok_or(Error::MissingField("metadata.namespace"))?;
    let name = secret_ref.secret_name.as_str();
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
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
    Ok(ctx
        .admin
        .signed(Some(Credentials::new(access_key, secret_key))))
}

fn value(
    secret: &Secret,
    kind: &'static str,
    name: &str,
    key: &'static str,
) -> Result<String, CredentialsError> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .filter(|b| !b.0.is_empty())
        .ok_or_else(|| CredentialsError::MissingKey {
            kind,
            secret: name.to_owned(),
            key,
        })?;
    String::from_utf8(bytes.0.clone()).map_err(|_| CredentialsError::NotText {
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
    let generation = broker.metadata.generation;
    let mut status = stored.clone();
    status.conditions = conditions::merge(
        &stored.conditions,
        &[Desired::new(
            conditions::READY,
            false,
            REASON,
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
    if !conditions::has_reason(&stored.conditions, conditions::READY, REASON) {
        ctx.events
            .publish(
                super::broker::KIND,
                &broker.object_ref(&()),
                true,
                REASON,
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
