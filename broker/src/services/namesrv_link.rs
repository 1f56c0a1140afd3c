//! One nameserver as the broker reaches it to register: a kept connection per way the
//! broker can sign, and which one that nameserver accepted last.
//!
//! A broker may hold several credentials: the nameservers' admin secret
//! (`namesrvAdminSecret`), its ACL account (`accessKey`/`secretKey`) and its own
//! `adminSecret`. Which one a nameserver checks depends on that nameserver: with the ACL
//! on, the account; with the ACL off and `adminSecret` set, the secret; in open mode,
//! none. The broker tries them in that order and, on NO_PERMISSION, the next one, then
//! keeps to the one accepted. 4.9 signs with the one account it has.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use protocol::RemotingCommand;
use protocol::code::response;
use security::sign::Credentials;

use crate::remoting_client::{ClientError, RemotingClient};

pub struct NamesrvLink {
    /// One client per signer, in the order tried.
    signers: Vec<RemotingClient>,
    /// The signer the nameserver accepted last.
    accepted: AtomicUsize,
}

impl NamesrvLink {
    /// `make` builds the client for one signer (`None`: unsigned).
    pub fn new(
        signers: &[Option<Arc<Credentials>>],
        make: impl Fn(Option<Arc<Credentials>>) -> RemotingClient,
    ) -> Self {
        let mut clients: Vec<RemotingClient> = signers.iter().cloned().map(&make).collect();
        if clients.is_empty() {
            clients.push(make(None));
        }
        Self {
            signers: clients,
            accepted: AtomicUsize::new(0),
        }
    }

    pub fn addr(&self) -> &str {
        self.signers[0].addr()
    }

    /// Sends `request` signed as last accepted; when the nameserver answers
    /// NO_PERMISSION, once with each other signer. Every attempt is signed afresh (its
    /// own timestamp and nonce).
    pub async fn invoke(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let n = self.signers.len();
        let first = self.accepted.load(Ordering::Relaxed) % n;
        let mut step = 0;
        loop {
            let i = (first + step) % n;
            let r = self.signers[i].invoke(request.clone(), timeout).await;
            let refused = matches!(&r, Ok(a) if a.code == response::NO_PERMISSION);
            step += 1;
            if refused && step < n {
                tracing::debug!(
                    namesrv = self.addr(),
                    signer = i,
                    "nameserver refused this signer; trying the next"
                );
                continue;
            }
            if r.is_ok() && !refused {
                self.accepted.store(i, Ordering::Relaxed);
            }
            return r;
        }
    }
}
