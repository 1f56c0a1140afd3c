//! The security options shared by `rmqctl` and `rmq-bench`.
//!
//! [`AuthArgs`]: `--access-key` /
//! `--secret-key` (or env `ROCKETMQ_ACCESS_KEY` / `ROCKETMQ_SECRET_KEY`), or
//! `--credentials-file` (mqadmin's `tools.yml` format: `accessKey: ...`, `secretKey:
//! ...`), or `--admin-secret` (env `RMQ_ADMIN_SECRET`): the servers' shared
//! `adminSecret`, signing as the fixed access key `rmq-admin` (what role changes and
//! config pushes need on a broker or nameserver with `adminSecret` set and the ACL off;
//! a comma-separated list signs with its first entry). Values are never printed: `--help` hides the environment values, and the
//! secret is only kept inside [`Credentials`], whose `Debug` redacts it.

use std::path::PathBuf;

use clap::Args;
use security::sign::Credentials;
use security::tls::{ClientTlsSettings, TlsClient, TlsError};

/// Why the given credentials cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Credentials(#[from] security::sign::CredentialsError),
    #[error(transparent)]
    AdminSecret(#[from] security::admin_secret::AdminSecretError),
}

#[derive(Clone, Args)]
pub struct AuthArgs {
    /// ACL access key; requests are signed (RocketMQ ACL 1.0) when given.
    #[arg(
        long,
        env = "ROCKETMQ_ACCESS_KEY",
        hide_env_values = true,
        global = true,
        help_heading = "ACL options"
    )]
    pub access_key: Option<String>,
    /// ACL secret key (prefer the env var or --credentials-file: flags show in `ps`).
    #[arg(
        long,
        env = "ROCKETMQ_SECRET_KEY",
        hide_env_values = true,
        global = true,
        help_heading = "ACL options"
    )]
    pub secret_key: Option<String>,
    /// File with `accessKey: ...` and `secretKey: ...` lines (mqadmin's tools.yml).
    #[arg(
        long,
        env = "ROCKETMQ_CREDENTIALS_FILE",
        conflicts_with_all = ["access_key", "secret_key"],
        global = true,
        help_heading = "ACL options"
    )]
    pub credentials_file: Option<PathBuf>,
    /// The servers' `adminSecret` (signs as access key `rmq-admin`; prefer the env var).
    #[arg(
        long,
        env = "RMQ_ADMIN_SECRET",
        hide_env_values = true,
        conflicts_with_all = ["access_key", "secret_key", "credentials_file"],
        global = true,
        help_heading = "ACL options"
    )]
    pub admin_secret: Option<String>,
}

impl std::fmt::Debug for AuthArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthArgs")
            .field("access_key", &self.access_key)
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "<redacted>"),
            )
            .field("credentials_file", &self.credentials_file)
            .field(
                "admin_secret",
                &self.admin_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl AuthArgs {
    /// The credentials to sign with, if any were given.
    pub fn credentials(&self) -> Result<Option<Credentials>, AuthError> {
        if let Some(secrets) = self.admin_secret.as_deref() {
            return Ok(security::admin_secret::signer(secrets)?);
        }
        Ok(match &self.credentials_file {
            Some(path) => Credentials::from_file(path).map(Some),
            None => Credentials::from_parts(self.access_key.clone(), self.secret_key.clone()),
        }?)
    }
}

/// [`TlsArgs`]: TLS to nameservers and brokers (their `tls.server.mode` must be
/// permissive or enforcing).
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// Connect with TLS.
    #[arg(
        long,
        env = "ROCKETMQ_TLS",
        global = true,
        help_heading = "TLS options"
    )]
    pub tls: bool,
    /// CA bundle (PEM) the servers' certificates must chain to.
    #[arg(
        long,
        env = "ROCKETMQ_TLS_CA",
        global = true,
        help_heading = "TLS options"
    )]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for servers that require one (mTLS).
    #[arg(
        long,
        env = "ROCKETMQ_TLS_CERT",
        global = true,
        help_heading = "TLS options",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// Key (PEM) of --tls-cert.
    #[arg(
        long,
        env = "ROCKETMQ_TLS_KEY",
        global = true,
        help_heading = "TLS options",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Name to check the servers' certificates against (default: the host dialled).
    #[arg(long, global = true, help_heading = "TLS options")]
    pub tls_server_name: Option<String>,
}

impl TlsArgs {
    pub fn client(&self) -> Result<Option<TlsClient>, TlsError> {
        TlsClient::new(&ClientTlsSettings {
            enable: self.tls,
            trust_cert_path: self.tls_ca.clone(),
            cert_path: self.tls_cert.clone(),
            key_path: self.tls_key.clone(),
            server_name: self.tls_server_name.clone(),
        })
    }
}
