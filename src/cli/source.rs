//! The MODEL argument of every command that loads a model: one call,
//! [`resolve_model_source`], turns it into the `.model` file to load, and
//! [`VerifyArg`] (`--verify`, one definition flattened into each such
//! command) checks that file's weights against their digest first.

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

/// `--verify` of the commands that load a model.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct VerifyArg {
    /// Check the weights against the digest recorded at import before running (as `validate --deep` does); a mismatch stops with the damaged section named.
    #[arg(long)]
    pub verify: bool,
}

impl VerifyArg {
    /// [`resolve_model_source`], then with `--verify` the resolved file's
    /// weights checked against their digest: a mismatch is the loader's
    /// `DigestMismatch` error (section, both digests, "re-import the model");
    /// a file that records no weights digest gets a one-line warning and runs.
    pub fn resolve(&self, path: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
        let file = resolve_model_source(path)?;
        if self.verify && !cyb_llm::load(&file)?.verify_weights()? {
            eprintln!(
                "warning: {}: no weights digest recorded, --verify checked nothing; re-import the model to add one",
                file.display()
            );
        }
        Ok(file)
    }
}
