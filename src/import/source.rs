//! The MODEL argument of every command that loads a model: a `.model` file is
//! used as it is; a GGUF file, a Hugging Face folder or a CTranslate2 folder is
//! imported once into the cache ([`super::cache`]) and the cached file is used.
//! Anything else is an error that says what the file looks like.

use super::{cache, detect_folder, ImportOptions, SourceKind};
use crate::error::ImportError;
use crate::loader::sniff::{self, Looks};
use std::path::{Path, PathBuf};

/// Told to the caller before a source is imported (it is not, on a cache hit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportNotice {
    /// The source as given.
    pub source: PathBuf,
    /// What it is.
    pub kind: SourceKind,
    /// The cached `.model` file being written.
    pub cached: PathBuf,
}

impl std::fmt::Display for ImportNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}; importing it once into {} (later runs reuse it)",
            self.source.display(),
            self.kind.describe(),
            self.cached.display()
        )
    }
}

impl SourceKind {
    /// "a GGUF file", "a Hugging Face folder", "a CTranslate2 folder".
    pub fn describe(self) -> &'static str {
        match self {
            SourceKind::Gguf => "a GGUF file",
            SourceKind::HuggingFace => "a Hugging Face folder",
            SourceKind::Ct2 => "a CTranslate2 folder",
            SourceKind::Onnx => "an ONNX model",
        }
    }
}

/// What `path` is: `None` for a `.model` file, else the source kind; an error
/// naming what it looks like when it is neither.
pub fn classify(path: &Path) -> Result<Option<SourceKind>, ImportError> {
    let io = |e| ImportError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let not_a_source = |looks: &str| ImportError::NotASource {
        path: path.to_path_buf(),
        looks: looks.to_string(),
    };
    if std::fs::metadata(path).map_err(io)?.is_dir() {
        return detect_folder(path)
            .map(Some)
            .ok_or_else(|| not_a_source("a folder without config.json"));
    }
    let head = sniff::read_head(path).map_err(io)?;
    match sniff::looks_like(path, &head) {
        Looks::Model => Ok(None),
        Looks::Gguf => Ok(Some(SourceKind::Gguf)),
        Looks::Onnx => Ok(Some(SourceKind::Onnx)),
        Looks::Other(what) => Err(not_a_source(what)),
    }
}

/// The `.model` file to load for the MODEL argument `path`: `path` itself when
/// it is a `.model` file; for an importable source its cached import, made
/// first when missing (calling `notice` once before it starts). The cache
/// folder is created when missing.
pub fn resolve_model_source(
    path: &Path,
    notice: &mut dyn FnMut(&ImportNotice),
) -> Result<PathBuf, ImportError> {
    let Some(kind) = classify(path)? else {
        return Ok(path.to_path_buf());
    };
    let dir = cache::cache_dir().ok_or_else(|| ImportError::Unsupported {
        path: path.to_path_buf(),
        reason: format!(
            "{} needs a cache folder to be imported into: set XDG_CACHE_HOME or HOME, \
             or convert it with `cyb-llm import SOURCE -o FILE.model`",
            kind.describe()
        ),
    })?;
    let entry = cache::CacheEntry::new(&dir, path, kind)?;
    if entry.path.is_file() {
        tracing::debug!("{}: cached import {}", path.display(), entry.path.display());
        return Ok(entry.path);
    }
    notice(&ImportNotice {
        source: path.to_path_buf(),
        kind,
        cached: entry.path.clone(),
    });
    std::fs::create_dir_all(&dir).map_err(|e| ImportError::Io {
        path: dir.clone(),
        source: e,
    })?;
    super::import_as(kind, path, &entry.path, &ImportOptions::default())?;
    entry.tidy();
    Ok(entry.path)
}
