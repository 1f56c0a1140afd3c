//! Security shared by the broker, the nameserver and the clients: RocketMQ 4.9's
//! "ACL 1.0" (`plain_acl.yml` accounts, HmacSHA1-signed requests).
//!
//! - [`sign`]: the request signature (client side: [`sign::sign_request`]; server side:
//!   [`sign::verify`]) and [`sign::Credentials`], whose secret never prints.
//! - [`acl`]: the account file, address patterns, permissions and the decision
//!   ([`acl::AclTable::check`]); [`acl::AclStore`] keeps the live table, reloads the
//!   file when it changes (keeping the last good one when it does not parse) and applies
//!   the admin edits of request codes 50–53.
//!
//! - [`admin_secret`]: the shared `adminSecret` that signs role changes and broker
//!   registrations when no ACL is on (a list, so it rotates without downtime);
//!   [`freshness`]: the timestamp and nonce those signatures carry, so a captured one
//!   cannot be replayed.
//!
//! - [`tls`]: rustls on the remoting ports in 4.9's disabled / permissive / enforcing
//!   modes, optional mTLS, certificates reloaded on change; [`tls::MaybeTls`] is the
//!   stream servers and clients use either way; [`http_stream::HttpStream`] is the
//!   metrics port's (`tls.metrics.enable`).
//!
//! - [`conn_gate`]: what every listener applies to its peers: connection caps, a
//!   per-source share with exemptions, slots reserved for new sources, the deadline for
//!   a connection's first request, socket options and the HTTP idle timeout.
//!
//! What each server asks for per request code lives with the server's dispatch table
//! (`broker/src/acl.rs`, `nameserver/src/acl.rs`); this crate only decides.

pub mod acl;
pub mod admin_secret;
pub mod conn_gate;
mod file_watch;
pub mod freshness;
pub mod http_stream;
pub mod sign;
pub mod tls;
