//! The import cache: a source given where a `.model` file is expected is
//! imported once into `$XDG_CACHE_HOME/cyb-llm/` (else `$HOME/.cache/cyb-llm/`).
//!
//! A cached file is named `STEM-WHERE-STATE.model`. `WHERE` hashes the source's
//! canonical path; `STATE` hashes cyb-llm's version and, for every file of the
//! source (each part of a split GGUF, each file of a folder, walked to a depth
//! of 4 and skipping hidden names), its relative name, byte length and
//! modification time in nanoseconds. Touching or replacing a source file thus
//! gives a new `STATE` and a new import, after which the older entries of the
//! same `WHERE` are removed. Contents are not hashed: that would read every
//! byte of a multi-gigabyte source on every run. Entries are written by
//! [`crate::loader::writer`], through a temporary file that is validated and
//! then renamed, so a name of this shape is only ever a complete file; the
//! temporary file of a killed import is removed by a later import once it is
//! a day old.

use super::{gguf, SourceKind};
use crate::error::ImportError;
use crate::loader::writer::TEMP_PREFIX;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Deepest folder level whose files count towards a folder source's identity.
const MAX_DEPTH: usize = 4;

/// The cache folder: `$XDG_CACHE_HOME/cyb-llm` (when set and absolute, as the
/// XDG spec asks), else `$HOME/.cache/cyb-llm`. `None` when neither is set.
pub fn cache_dir() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").and_then(absolute) {
        return Some(d.join("cyb-llm"));
    }
    std::env::var_os("HOME")
        .and_then(absolute)
        .map(|h| h.join(".cache").join("cyb-llm"))
}

/// Where the import of one source state lives in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// The cached `.model` file (it may not exist yet).
    pub path: PathBuf,
    /// `STEM-WHERE-`: the name prefix every entry of this source shares.
    prefix: String,
}

impl CacheEntry {
    /// The entry of `source` (of kind `kind`) in the cache folder `dir`.
    pub fn new(dir: &Path, source: &Path, kind: SourceKind) -> Result<CacheEntry, ImportError> {
        let io = |e| ImportError::Io {
            path: source.to_path_buf(),
            source: e,
        };
        let canonical = source.canonicalize().map_err(io)?;
        let stem = stem(&canonical, kind);
        let at = hex8(&Sha256::digest(canonical.as_os_str().as_encoded_bytes()));
        let mut state = Sha256::new();
        state.update(concat!("cyb-llm ", env!("CARGO_PKG_VERSION"), "\n"));
        for (name, len, mtime_ns) in source_files(&canonical, kind).map_err(io)? {
            state.update(format!("{name}\0{len}\0{mtime_ns}\n"));
        }
        let prefix = format!("{stem}-{at}-");
        let path = dir.join(format!("{prefix}{}.model", hex8(&state.finalize())));
        Ok(CacheEntry { path, prefix })
    }

    /// Removes the other entries of the same source (older states of it), and
    /// temporary files of imports killed more than [`STALE_TEMP`] ago.
    /// Failures are ignored: a leftover file is only disk space.
    pub fn tidy(&self) {
        let (Some(dir), Some(me)) = (self.path.parent(), self.path.file_name()) else {
            return;
        };
        let Ok(list) = std::fs::read_dir(dir) else {
            return;
        };
        for e in list.flatten() {
            let name = e.file_name();
            let n = name.to_string_lossy();
            let older_entry = name != me && n.starts_with(&self.prefix) && n.ends_with(".model");
            if older_entry || (n.starts_with(TEMP_PREFIX) && is_stale(&e)) {
                if let Err(err) = std::fs::remove_file(e.path()) {
                    tracing::debug!("cache: cannot remove {}: {err}", e.path().display());
                }
            }
        }
    }
}

/// Age after which a temporary file is taken for a killed import's leftover
/// (an import still running is never this old).
pub const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

fn is_stale(e: &std::fs::DirEntry) -> bool {
    e.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > STALE_TEMP)
}

/// The first 8 bytes of a digest in hex.
fn hex8(digest: &[u8]) -> String {
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A readable file-name stem: the source's name (without `.gguf`), limited to
/// `[A-Za-z0-9._-]` and 64 characters.
fn stem(source: &Path, kind: SourceKind) -> String {
    let name = match kind {
        SourceKind::Gguf | SourceKind::Onnx => source.file_stem(),
        SourceKind::HuggingFace | SourceKind::Ct2 => source.file_name(),
    };
    let s: String = name
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() {
        "model".into()
    } else {
        s
    }
}

/// `(relative name, length, mtime in ns)` of every file of the source, sorted.
fn source_files(source: &Path, kind: SourceKind) -> std::io::Result<Vec<(String, u64, u128)>> {
    let mut out = Vec::new();
    match kind {
        SourceKind::Gguf => {
            for p in gguf::part_paths(source) {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                // A missing part is the importer's error to report; it still counts here.
                let (len, mtime) = std::fs::metadata(&p).map_or((0, 0), |m| stat(&m));
                out.push((name.unwrap_or_default(), len, mtime));
            }
        }
        SourceKind::Onnx => {
            // The model file and the files beside it named after it (external
            // data `NAME.onnx.data`, a Piper voice's `NAME.onnx.json`).
            let dir = source.parent().filter(|d| !d.as_os_str().is_empty());
            let stem = source.file_stem().map(|s| s.to_string_lossy().into_owned());
            for e in std::fs::read_dir(dir.unwrap_or(Path::new(".")))? {
                let e = e?;
                let name = e.file_name().to_string_lossy().into_owned();
                if stem.as_deref().is_some_and(|s| name.starts_with(s)) {
                    if let Ok(meta) = std::fs::metadata(e.path()) {
                        let (len, mtime) = stat(&meta);
                        out.push((name, len, mtime));
                    }
                }
            }
        }
        SourceKind::HuggingFace | SourceKind::Ct2 => walk(source, "", 0, &mut out)?,
    }
    out.sort();
    Ok(out)
}

fn walk(
    dir: &Path,
    rel: &str,
    depth: usize,
    out: &mut Vec<(String, u64, u128)>,
) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let rel = format!("{rel}{name}");
        // Follows symbolic links (Hugging Face hub snapshots link to blobs).
        let Ok(meta) = std::fs::metadata(e.path()) else {
            continue;
        };
        if meta.is_dir() {
            if depth + 1 < MAX_DEPTH {
                walk(&e.path(), &format!("{rel}/"), depth + 1, out)?;
            }
        } else {
            let (len, mtime) = stat(&meta);
            out.push((rel, len, mtime));
        }
    }
    Ok(())
}

fn stat(m: &std::fs::Metadata) -> (u64, u128) {
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    (m.len(), mtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_changes_the_entry_and_keeps_the_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("My Model");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("config.json"), "{}").unwrap();
        let a = CacheEntry::new(dir.path(), &src, SourceKind::HuggingFace).unwrap();
        assert_eq!(
            a,
            CacheEntry::new(dir.path(), &src, SourceKind::HuggingFace).unwrap()
        );
        assert!(a.prefix.starts_with("My_Model-"), "{}", a.prefix);
        std::fs::write(src.join("config.json"), "{ }").unwrap();
        let b = CacheEntry::new(dir.path(), &src, SourceKind::HuggingFace).unwrap();
        assert_ne!(a.path, b.path);
        assert_eq!(a.prefix, b.prefix);
        std::fs::write(&a.path, "old").unwrap();
        std::fs::write(&b.path, "new").unwrap();
        let (stale, fresh) = (
            dir.path().join(".cyb-import-1"),
            dir.path().join(".cyb-import-2"),
        );
        std::fs::write(&stale, "killed long ago").unwrap();
        std::fs::write(&fresh, "still being written").unwrap();
        let long_ago = std::time::SystemTime::now() - STALE_TEMP * 2;
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        b.tidy();
        assert!(!a.path.exists() && b.path.exists());
        assert!(!stale.exists() && fresh.exists());
    }
}
