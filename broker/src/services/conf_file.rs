//! Keeping UPDATE_BROKER_CONFIG changes in the broker.conf the broker started with (`-c`),
//! as 4.9 does (`BrokerController` registers its config with `Configuration`, whose
//! `update` ends in `persist`, rewriting the file through `MixAll.string2File`).
//!
//! Unlike 4.9, which rewrites the whole file from its in-memory properties (comments,
//! ordering and keys it does not know are lost), the file is edited: each changed key's
//! line is replaced where it stands (continuation lines included), a key the file lacks is
//! appended, and every other byte stays. The rewrite runs on the file's own
//! [`ConfigWriter`] thread (temp file + fsync + rename + directory fsync, as for the
//! other config files), and the change reaches the live settings only once it is on disk:
//! the admin is answered when the change is durable, and a failed write changes nothing.
//!
//! A file that cannot be rewritten (no write permission bits, a read-only file system such
//! as a Kubernetes ConfigMap mount, a directory that refuses the temp file) or no file at
//! all (started without `-c`) does not refuse the change: it applies until the process
//! stops, and the answer's remark says so and where to make it last.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use store::config_files::{ConfigFile, ConfigFileError, ConfigState, ConfigWriter, WriteError};
use store::fs::StoreFs;

use crate::config::properties;
use crate::services::live_config::{LiveConfig, Update};

/// Where accepted updates are kept.
pub struct ConfFile {
    target: Target,
}

enum Target {
    /// Rewritten by this writer thread before the change applies.
    Writable {
        writer: ConfigWriter<ConfText>,
        path: PathBuf,
    },
    /// Not kept: the change lasts until the process stops, for this reason.
    Transient(Transient),
}

#[derive(Debug, Clone)]
enum Transient {
    /// Started without `-c`.
    NoFile,
    ReadOnly {
        path: PathBuf,
        reason: String,
    },
}

/// How an accepted update was applied.
#[derive(Debug)]
pub struct Outcome {
    /// True when the change is in the config file too.
    pub kept: bool,
    /// What the admin is told (the answer's remark).
    pub remark: String,
}

impl ConfFile {
    /// The broker.conf at `path` (`None`: started without one). `live` is what a written
    /// change is applied to; `fs` writes the file (fault injection in tests).
    pub fn open(
        path: Option<&Path>,
        live: Arc<LiveConfig>,
        fs: Arc<dyn StoreFs>,
    ) -> Result<Self, ConfigFileError> {
        let Some(path) = path else {
            return Ok(Self {
                target: Target::Transient(Transient::NoFile),
            });
        };
        // A symlinked file (a ConfigMap's `..data` link) is edited where it lives: renaming
        // over the link would replace it with a copy.
        let path = std::fs::canonicalize(path).map_err(|source| ConfigFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if let Some(reason) = unwritable(&path) {
            tracing::info!(
                path = %path.display(),
                %reason,
                "broker.conf is not writable: runtime config changes last until restart"
            );
            return Ok(Self {
                target: Target::Transient(Transient::ReadOnly { path, reason }),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigFileError::Io {
            path: path.clone(),
            source,
        })?;
        let state = Arc::new(ConfText {
            path: path.clone(),
            live,
            last: Mutex::new(text),
        });
        let writer = ConfigWriter::spawn(ConfigFile::with_fs(&path, fs), state)?;
        Ok(Self {
            target: Target::Writable { writer, path },
        })
    }

    /// Applies `update`: written to the file first when it is writable (an error then
    /// means nothing changed), else applied to `live` at once.
    pub async fn apply(&self, live: &LiveConfig, update: Update) -> Result<Outcome, WriteError> {
        let changes = update
            .lines()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        match &self.target {
            Target::Writable { writer, path } => {
                writer.commit(update).await?;
                Ok(Outcome {
                    kept: true,
                    remark: format!("{changes} applied and written to {}", path.display()),
                })
            }
            Target::Transient(why) => {
                let fields = cr_fields(&update);
                live.apply(update);
                let remark = match why {
                    Transient::NoFile => format!(
                        "{changes} applied until the broker restarts: it was started without \
                         a config file (-c), so the change is not kept"
                    ),
                    Transient::ReadOnly { path, reason } => format!(
                        "{changes} applied until the broker restarts: {} is not writable \
                         ({reason}), so the change is not kept. On Kubernetes the Broker \
                         resource is the source of truth: set {fields} there",
                        path.display()
                    ),
                };
                Ok(Outcome {
                    kept: false,
                    remark,
                })
            }
        }
    }
}

/// The Broker resource fields that hold the update's keys (the operator renders
/// `spec.config` into broker.conf and derives `namesrvAddr` from the NameServer).
fn cr_fields(update: &Update) -> String {
    update
        .lines()
        .iter()
        .map(|(key, _)| match *key {
            "namesrvAddr" => "spec.nameServerRef (namesrvAddr is derived from it)".to_owned(),
            key => format!("spec.config.{key}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `path` cannot be rewritten in place (temp file beside it, then rename), if so. A
/// file without any write permission bit counts as read-only even for root: its owner
/// asked for it not to change.
fn unwritable(path: &Path) -> Option<String> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => return Some(e.to_string()),
    };
    if meta.permissions().mode() & 0o222 == 0 {
        return Some("its permissions allow no writing".to_owned());
    }
    if let Err(e) = access_writable(path) {
        return Some(e.to_string());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    if let Err(e) = access_writable(dir) {
        return Some(format!(
            "its directory {} takes no new file: {e}",
            dir.display()
        ));
    }
    None
}

/// access(2) with W_OK: permission bits, ACLs and a read-only mount (EROFS, even for root).
fn access_writable(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; access(2) only reads it.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// broker.conf as its writer thread sees it.
struct ConfText {
    path: PathBuf,
    live: Arc<LiveConfig>,
    /// The file as last read: what a rewrite edits should the file be unreadable then.
    last: Mutex<String>,
}

impl ConfigState for ConfText {
    type Change = Update;

    /// The file as it is now (edits made since start-up kept) with the staged keys set.
    fn render(&self, staged: &[Update]) -> Vec<u8> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => {
                *self.last.lock() = text.clone();
                text
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e,
                    "cannot re-read broker.conf; editing its content as last read");
                self.last.lock().clone()
            }
        };
        let lines: Vec<(&str, String)> = staged.iter().flat_map(Update::lines).collect();
        set_keys(&text, &lines).into_bytes()
    }

    fn apply(&self, written: Vec<Update>) {
        for update in written {
            self.live.apply(update);
        }
    }
}

/// `text` with each key of `pairs` set: every logical line holding the key (with its
/// continuation lines) becomes `key=value`, keeping its line ending; keys the text lacks
/// are appended in order. A later pair for the same key wins. Everything else is kept
/// byte for byte.
pub fn set_keys(text: &str, pairs: &[(&str, String)]) -> String {
    let mut wanted: Vec<(&str, &str, bool)> = Vec::new();
    for (key, value) in pairs {
        match wanted.iter_mut().find(|(k, _, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => wanted.push((key, value, false)),
        }
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut lines = text.split_inclusive('\n');
    while let Some(first) = lines.next() {
        let body = first.trim_start();
        if body.trim().is_empty() || body.starts_with('#') || body.starts_with('!') {
            out.push_str(first);
            continue;
        }
        let mut logical = vec![first];
        let mut last = first;
        while continues(last) {
            match lines.next() {
                Some(next) => {
                    logical.push(next);
                    last = next;
                }
                None => break,
            }
        }
        let joined = logical.concat();
        let key = properties::parse(&joined)
            .into_iter()
            .next()
            .map(|(k, _)| k);
        match wanted
            .iter_mut()
            .find(|(k, _, _)| key.as_deref() == Some(*k))
        {
            Some((k, v, found)) => {
                *found = true;
                let eol = &last[last.trim_end_matches(['\r', '\n']).len()..];
                out.push_str(&format!("{k}={v}{eol}"));
            }
            None => out.push_str(&joined),
        }
    }
    let missing: Vec<_> = wanted.iter().filter(|(_, _, found)| !found).collect();
    if !missing.is_empty() && !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for (k, v, _) in missing {
        out.push_str(&format!("{k}={v}\n"));
    }
    out
}

/// An odd number of trailing backslashes continues a properties line.
fn continues(line: &str) -> bool {
    let body = line.trim_end_matches(['\r', '\n']);
    body.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use store::fs::{Fault, FaultFs, FaultOp, OsFs};

    use super::*;
    use crate::config::BrokerConfig;

    fn update(key: &str, value: &str) -> Update {
        LiveConfig::validate(&[(key.to_owned(), value.to_owned())]).unwrap()
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn polling(live: &LiveConfig) -> u64 {
        live.short_polling_time_mills.load(Ordering::Relaxed)
    }

    #[test]
    fn a_failed_rewrite_changes_neither_the_file_nor_the_live_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(&path, "# mine\nbrokerName=a\n").unwrap();
        let live = Arc::new(LiveConfig::new(&BrokerConfig::default()));
        let fault = Arc::new(FaultFs::new());
        let file = ConfFile::open(Some(&path), Arc::clone(&live), fault.clone()).unwrap();
        fault.inject(FaultOp::WriteFile, dir.path(), Fault::Io);

        let err = block_on(file.apply(&live, update("shortPollingTimeMills", "1500")));
        assert!(matches!(err, Err(WriteError::Failed(_))), "{err:?}");
        assert_eq!(polling(&live), 1000);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# mine\nbrokerName=a\n"
        );

        fault.heal();
        let done = block_on(file.apply(&live, update("shortPollingTimeMills", "1500"))).unwrap();
        assert!(done.kept && done.remark.contains("written to"), "{done:?}");
        assert_eq!(polling(&live), 1500);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# mine\nbrokerName=a\nshortPollingTimeMills=1500\n"
        );
    }

    #[test]
    fn without_a_writable_file_the_change_applies_at_once_and_says_so() {
        let live = Arc::new(LiveConfig::new(&BrokerConfig::default()));
        let none = ConfFile::open(None, Arc::clone(&live), Arc::new(OsFs)).unwrap();
        let done = block_on(none.apply(&live, update("shortPollingTimeMills", "1200"))).unwrap();
        assert!(!done.kept && done.remark.contains("without a config file (-c)"));
        assert_eq!(polling(&live), 1200);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(&path, "brokerName=a\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let ro = ConfFile::open(Some(&path), Arc::clone(&live), Arc::new(OsFs)).unwrap();
        let done = block_on(ro.apply(&live, update("namesrvAddr", "ns:9876"))).unwrap();
        assert!(!done.kept, "{done:?}");
        assert!(
            done.remark.contains("until the broker restarts")
                && done.remark.contains("spec.nameServerRef"),
            "{}",
            done.remark
        );
        assert_eq!(live.namesrv_addrs(), vec!["ns:9876"]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "brokerName=a\n");
    }

    fn set(text: &str, pairs: &[(&'static str, &str)]) -> String {
        let pairs: Vec<(&str, String)> = pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        set_keys(text, &pairs)
    }

    #[test]
    fn existing_key_is_replaced_in_place_and_everything_else_kept() {
        let text = "# broker of site A\nbrokerName=a\n\n! old style comment\nshortPollingTimeMills = 1000\nmyOwnKey=x\n";
        assert_eq!(
            set(text, &[("shortPollingTimeMills", "1500")]),
            "# broker of site A\nbrokerName=a\n\n! old style comment\nshortPollingTimeMills=1500\nmyOwnKey=x\n"
        );
    }

    #[test]
    fn missing_keys_are_appended_after_a_final_newline() {
        assert_eq!(
            set(
                "brokerName=a",
                &[("longPollingEnable", "false"), ("brokerPermission", "4")]
            ),
            "brokerName=a\nlongPollingEnable=false\nbrokerPermission=4\n"
        );
        assert_eq!(
            set("", &[("brokerPermission", "4")]),
            "brokerPermission=4\n"
        );
    }

    #[test]
    fn continuations_crlf_duplicates_and_separators() {
        let text = "namesrvAddr=a:9876;\\\r\n   b:9876\r\nkeep=1\r\nbrokerPermission:6\r\nbrokerPermission 2\r\n";
        assert_eq!(
            set(
                text,
                &[
                    ("namesrvAddr", "c:9876"),
                    ("brokerPermission", "4"),
                    ("brokerPermission", "2")
                ]
            ),
            "namesrvAddr=c:9876\r\nkeep=1\r\nbrokerPermission=2\r\nbrokerPermission=2\r\n"
        );
        // A comment that mentions the key, or a key it is a prefix of, is not the key.
        let text = "#brokerPermission=6\nbrokerPermissionX=1\n";
        assert_eq!(
            set(text, &[("brokerPermission", "4")]),
            "#brokerPermission=6\nbrokerPermissionX=1\nbrokerPermission=4\n"
        );
    }
}
