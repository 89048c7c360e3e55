//! The MODEL argument of every command that loads a model: one call,
//! [`resolve_model_source`], turns it into the `.model` file to load.

use cyb_llm::import::source;
use cyb_llm::ImportError;
use std::path::{Path, PathBuf};

/// The `.model` file to load for the MODEL argument `path`: `path` itself when
/// it is a `.model` file; for a GGUF file, a Hugging Face folder or a
/// CTranslate2 folder its import in the cache (made the first time, with a
/// one-line notice on stderr). Anything else is an error that says what the
/// file looks like and what to give instead.
pub fn resolve_model_source(path: &Path) -> Result<PathBuf, ImportError> {
    source::resolve_model_source(path, &mut |n| eprintln!("import: {n}"))
}
