//! Crash-safe JSON config files under `<storeRoot>/config/` (`topics.json`,
//! `subscriptionGroup.json`, `consumerOffset.json`), the way RocketMQ's
//! `ConfigManager.persist` / `load` treat them: write a temp file, keep the previous
//! content as `.bak`, rename over; on load fall back to `.bak` when the main file is
//! missing or unparsable.
//!
//! The store crate has the same facility (`store::config_files`), not yet exported when
//! this was written; the broker should switch to it once it is (see README).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} and its .bak copy are unreadable: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

impl ConfigFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The parsed document, `None` when neither the file nor its backup exists.
    pub fn load<T>(
        &self,
        decode: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigFileError> {
        let mut reason = String::new();
        for candidate in [self.path.clone(), with_suffix(&self.path, ".bak")] {
            match fs::read(&candidate) {
                Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => {}
                Ok(bytes) => match decode(&bytes) {
                    Ok(doc) => return Ok(Some(doc)),
                    Err(e) => {
                        tracing::warn!(file = %candidate.display(), error = %e, "unparsable config file");
                        reason = e;
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ConfigFileError::Io {
                        path: candidate,
                        source,
                    });
                }
            }
        }
        if reason.is_empty() {
            Ok(None)
        } else {
            Err(ConfigFileError::Corrupt {
                path: self.path.clone(),
                reason,
            })
        }
    }

    /// Atomically replaces the file with `content`, keeping the old content as `.bak`.
    pub fn persist(&self, content: &[u8]) -> Result<(), ConfigFileError> {
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ConfigFileError::Io { path, source }
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(err(dir))?;
        let tmp = with_suffix(&self.path, ".tmp");
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(err(&tmp))?;
            f.write_all(content).map_err(err(&tmp))?;
            f.sync_all().map_err(err(&tmp))?;
        }
        if self.path.exists() {
            let bak = with_suffix(&self.path, ".bak");
            fs::copy(&self.path, &bak).map_err(err(&bak))?;
        }
        fs::rename(&tmp, &self.path).map_err(err(&self.path))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf8(b: &[u8]) -> Result<String, String> {
        let s = std::str::from_utf8(b).map_err(|e| e.to_string())?;
        if s.starts_with('{') {
            Ok(s.to_owned())
        } else {
            Err("not an object".into())
        }
    }

    #[test]
    fn persist_load_and_backup_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let f = ConfigFile::new(dir.path().join("config/x.json"));
        assert_eq!(f.load(utf8).unwrap(), None);
        f.persist(b"{1}").unwrap();
        f.persist(b"{2}").unwrap();
        assert_eq!(f.load(utf8).unwrap().as_deref(), Some("{2}"));
        std::fs::write(f.path(), b"garbage").unwrap();
        assert_eq!(f.load(utf8).unwrap().as_deref(), Some("{1}"));
        std::fs::write(with_suffix(f.path(), ".bak"), b"junk").unwrap();
        assert!(matches!(f.load(utf8), Err(ConfigFileError::Corrupt { .. })));
    }
}
