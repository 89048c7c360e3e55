//! Importers: write `.model` files from the formats small real models ship in.
//! Each source format is one module; [`import`] picks it from the source path.

pub mod ct2;
pub mod gguf;
pub mod hf;
pub mod requant;

use crate::error::ImportError;
use std::path::{Path, PathBuf};

/// Encoding choice of `import --quant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuantChoice {
    /// Keep supported source encodings as they are (BF16 becomes f32).
    #[default]
    Keep,
    F16,
    Q8_0,
    Q4_0,
    Q4K,
    Q6K,
}

impl QuantChoice {
    /// Parses `keep|f16|q8_0|q4_0|q4_k|q6_k`.
    pub fn parse(s: &str) -> Option<QuantChoice> {
        Some(match s {
            "keep" => QuantChoice::Keep,
            "f16" => QuantChoice::F16,
            "q8_0" => QuantChoice::Q8_0,
            "q4_0" => QuantChoice::Q4_0,
            "q4_k" => QuantChoice::Q4K,
            "q6_k" => QuantChoice::Q6K,
            _ => return None,
        })
    }
}

/// Options shared by every importer.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    pub quant: QuantChoice,
    /// `[cyb] name`; default: the source's file or folder name.
    pub name: Option<String>,
    /// Skip writing the `graph` section (`--no-graph`).
    pub no_graph: bool,
}

/// The kind of source at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Gguf,
    HuggingFace,
    /// A CTranslate2 model folder (`model.bin` + `config.json`; Whisper).
    Ct2,
}

/// Detects the source format of `source`.
pub fn detect(source: &Path) -> Result<SourceKind, ImportError> {
    if source.is_dir() {
        if ct2::is_ct2_folder(source) {
            return Ok(SourceKind::Ct2);
        }
        if source.join("config.json").is_file() {
            return Ok(SourceKind::HuggingFace);
        }
        return Err(ImportError::Unsupported {
            path: source.to_path_buf(),
            reason: "a folder needs config.json (Hugging Face) to be imported".into(),
        });
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(source)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .map_err(|e| ImportError::Io {
            path: source.to_path_buf(),
            source: e,
        });
    match read {
        Ok(()) if &magic == b"GGUF" => Ok(SourceKind::Gguf),
        Ok(()) => Err(ImportError::Unsupported {
            path: source.to_path_buf(),
            reason: "not a GGUF file (no `GGUF` magic) and not a Hugging Face folder".into(),
        }),
        Err(e) => Err(e),
    }
}

/// Default output path: the source's stem with `.model`, in the current folder.
pub fn default_output(source: &Path) -> PathBuf {
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    PathBuf::from(format!("{stem}.model"))
}

/// Imports `source` into a `.model` file at `out`.
pub fn import(source: &Path, out: &Path, opts: &ImportOptions) -> Result<(), ImportError> {
    match detect(source)? {
        SourceKind::Gguf => gguf::import(source, out, opts),
        SourceKind::HuggingFace => hf::import(source, out, opts),
        SourceKind::Ct2 => ct2::import(source, out, opts),
    }
}
