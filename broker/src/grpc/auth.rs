//! Authentication and authorization of 5.x calls against the broker's `plain_acl.yml`
//! accounts (the same [`security::acl::AclTable`] the remoting port checks).
//!
//! The 5.x clients sign each call with
//! `authorization: MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>`,
//! the signature being HMAC-SHA1 of the `x-mq-date-time` header value under the account's
//! secret key, in hex (upper or lower case, as clients differ). With the ACL off no
//! header is needed. Permissions are those of 4.x requests: PUB on the topic for sends
//! and transaction ends, SUB on topic and group for consumption.

use security::acl::{Denial, Perm, Requirement, Resource};
use tonic::metadata::MetadataMap;

use super::metadata::{AUTHORIZATION, DATE_TIME};
use crate::services::Broker;

const ALGORITHM: &str = "MQv2-HMAC-SHA1";

/// The parts of an `authorization` header.
#[derive(Debug, PartialEq, Eq)]
pub struct Authorization<'a> {
    pub access_key: &'a str,
    pub signature: Vec<u8>,
}

/// Parses `MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=HEX`.
/// A credential scoped like `ak/region/service` counts by its access key.
pub fn parse(header: &str) -> Option<Authorization<'_>> {
    let rest = header.trim().strip_prefix(ALGORITHM)?;
    let (mut ak, mut sig) = (None, None);
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        match k.trim() {
            "Credential" => ak = v.trim().split('/').next(),
            "Signature" => sig = hex_decode(v.trim()),
            _ => {}
        }
    }
    Some(Authorization {
        access_key: ak.filter(|a| !a.is_empty())?,
        signature: sig?,
    })
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Who a call is, once authenticated: `None` when the ACL is off or the peer is
/// globally whitelisted (nothing more is checked then).
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub access_key: Option<String>,
}

/// Checks the call's signature and that it holds `needs`; the gRPC status to answer
/// otherwise (PERMISSION_DENIED or UNAUTHENTICATED, naming what is missing).
// tonic's Status is what every MessagingService method answers with.
#[allow(clippy::result_large_err)]
pub fn check(
    broker: &Broker,
    md: &MetadataMap,
    peer: std::net::IpAddr,
    needs: &[(Resource<'_>, Perm)],
) -> Result<Caller, tonic::Status> {
    let Some(acl) = broker.acl.as_ref() else {
        return Ok(Caller::default());
    };
    let table = acl.table();
    let need = Requirement::Resources(needs.to_vec());
    if table.permits(Some(peer), None, &need) {
        return Ok(Caller::default());
    }
    let refuse = |denial: Denial| {
        broker.metrics.acl_refused(denial.reason());
        tracing::info!(%peer, reason = denial.reason(), "gRPC call refused by ACL");
        match denial {
            Denial::NoPermission { .. } => tonic::Status::permission_denied(denial.remark()),
            _ => tonic::Status::unauthenticated(denial.remark()),
        }
    };
    let header = md.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    let Some(auth) = header.and_then(parse) else {
        return Err(refuse(Denial::MissingAccessKey));
    };
    let Some(account) = table.account(auth.access_key) else {
        return Err(refuse(Denial::UnknownAccessKey));
    };
    let date = md
        .get(DATE_TIME)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let whitelisted = account.white.matches(peer);
    if !whitelisted
        && !account
            .signing_key
            .verify_bytes(date.as_bytes(), &auth.signature)
    {
        return Err(refuse(Denial::BadSignature));
    }
    if !table.permits(None, Some(auth.access_key), &need) {
        let (resource, perm) = needs
            .first()
            .copied()
            .unwrap_or((Resource::Topic(""), Perm::PUB));
        let (group, name) = match resource {
            Resource::Topic(t) => (false, t),
            Resource::Group(g) => (true, g),
        };
        // Name the first resource the account lacks.
        let missing = needs
            .iter()
            .find(|(r, p)| {
                !table.permits(
                    None,
                    Some(auth.access_key),
                    &Requirement::Resources(vec![(*r, *p)]),
                )
            })
            .copied();
        let (group, name, perm) = match missing {
            Some((Resource::Topic(t), p)) => (false, t, p),
            Some((Resource::Group(g), p)) => (true, g, p),
            None => (group, name, perm),
        };
        return Err(refuse(Denial::NoPermission {
            group,
            name: name.to_owned(),
            perm,
        }));
    }
    Ok(Caller {
        access_key: Some(auth.access_key.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use security::sign::SigningKey;

    #[test]
    fn parses_the_header_5x_clients_send() {
        let a = parse(
            "MQv2-HMAC-SHA1 Credential=rocketmq2, SignedHeaders=x-mq-date-time, Signature=0A1b",
        )
        .unwrap();
        assert_eq!(a.access_key, "rocketmq2");
        assert_eq!(a.signature, vec![0x0a, 0x1b]);
        let scoped =
            parse("MQv2-HMAC-SHA1 Credential=ak/r/s, SignedHeaders=x-mq-date-time, Signature=00")
                .unwrap();
        assert_eq!(scoped.access_key, "ak");
        for bad in [
            "",
            "Basic abc",
            "MQv2-HMAC-SHA1 Credential=ak, Signature=zz",
            "MQv2-HMAC-SHA1 Signature=00",
            "MQv2-HMAC-SHA1 Credential=, Signature=00",
            "MQv2-HMAC-SHA1 Credential=ak, Signature=0",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn signature_vector_upper_and_lower_hex() {
        // HMAC-SHA1("12345678", "20230101T000000Z"), computed independently with
        // Python's hmac module.
        let key = SigningKey::new("12345678");
        let date = b"20230101T000000Z";
        let expected = "8ff6b384882a2adf2464d2506f467b7699a8ed24";
        let lower_text = format!(
            "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature={expected}"
        );
        let upper_text = lower_text.replace(expected, &expected.to_ascii_uppercase());
        let lower = parse(&lower_text).unwrap();
        let upper = parse(&upper_text).unwrap();
        assert_eq!(lower.signature, upper.signature);
        assert!(key.verify_bytes(date, &lower.signature));
        assert!(!key.verify_bytes(b"20230101T000001Z", &lower.signature));
    }
}
