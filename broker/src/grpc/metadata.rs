//! What a 5.x client says about itself in the request headers (`x-mq-client-id`,
//! `x-mq-language`, `x-mq-client-version`, `x-mq-protocol`, `x-mq-request-id`,
//! `x-mq-namespace`). Read leniently, as clients differ: a missing client id is derived
//! from the peer address, an unknown language is OTHER, nothing here refuses a call.

use std::net::SocketAddr;
use std::sync::Arc;

use protocol::language::LanguageCode;
use tonic::metadata::MetadataMap;

use crate::in_flight::InFlightLimit;

/// The connection a call came on: set on every accepted connection by the listener
/// ([`super::server`]) as tonic's connect info.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The bytes its requests may hold (`maxInFlightBytesPerConnection`,
    /// [`super::request_budget`]).
    pub bytes: Arc<InFlightLimit>,
}

/// Header names.
pub const CLIENT_ID: &str = "x-mq-client-id";
pub const LANGUAGE: &str = "x-mq-language";
pub const CLIENT_VERSION: &str = "x-mq-client-version";
pub const AUTHORIZATION: &str = "authorization";
pub const DATE_TIME: &str = "x-mq-date-time";

/// Longest client id kept (longer ones are cut: the id names a registry entry).
const MAX_CLIENT_ID: usize = 256;

#[derive(Debug, Clone)]
pub struct CallMeta {
    pub peer: SocketAddr,
    pub client_id: String,
    pub language: LanguageCode,
    pub version: String,
}

impl CallMeta {
    pub fn read<T>(request: &tonic::Request<T>) -> Self {
        let peer = request
            .extensions()
            .get::<Peer>()
            .map(|p| p.addr)
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        Self::from_parts(request.metadata(), peer)
    }

    pub fn from_parts(md: &MetadataMap, peer: SocketAddr) -> Self {
        let text = |name: &str| {
            md.get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let client_id = match text(CLIENT_ID) {
            Some(id) => id.chars().take(MAX_CLIENT_ID).collect(),
            None => format!("grpc@{peer}"),
        };
        let language = text(LANGUAGE)
            .map(|l| match l.to_ascii_uppercase().as_str() {
                "GOLANG" => LanguageCode::Go,
                "CSHARP" | "DOTNET" => LanguageCode::Dotnet,
                "NODE_JS" | "NODEJS" => LanguageCode::Other,
                other => LanguageCode::from_name(other),
            })
            .unwrap_or(LanguageCode::Other);
        Self {
            peer,
            client_id,
            language,
            version: text(CLIENT_VERSION).unwrap_or("").to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(pairs: &[(&'static str, &str)]) -> MetadataMap {
        let mut m = MetadataMap::new();
        for (k, v) in pairs {
            m.insert(*k, v.parse().unwrap());
        }
        m
    }

    #[test]
    fn headers_are_read_leniently() {
        let peer: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let m = CallMeta::from_parts(
            &md(&[
                ("x-mq-client-id", " host@1@abc "),
                ("x-mq-language", "python"),
                ("x-mq-client-version", "5.0.6"),
            ]),
            peer,
        );
        assert_eq!(m.client_id, "host@1@abc");
        assert_eq!(m.language, LanguageCode::Python);
        assert_eq!(m.version, "5.0.6");
        let bare = CallMeta::from_parts(&md(&[("x-mq-language", "GOLANG")]), peer);
        assert_eq!(bare.client_id, "grpc@10.0.0.1:5000");
        assert_eq!(bare.language, LanguageCode::Go);
        let odd = CallMeta::from_parts(&md(&[("x-mq-language", "KLINGON")]), peer);
        assert_eq!(odd.language, LanguageCode::from_name("KLINGON"));
        let long = "x".repeat(1000);
        let cut = CallMeta::from_parts(&md(&[("x-mq-client-id", &long)]), peer);
        assert_eq!(cut.client_id.len(), MAX_CLIENT_ID);
    }
}
