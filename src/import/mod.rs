//! Importers: write `.model` files from the formats small real models ship in.
//! Each source format is one module; [`import`] picks it from the source path.

pub mod cache;
pub mod ct2;
pub mod gguf;
pub mod hf;
pub mod onnx;
pub mod requant;
pub mod source;

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
    /// `[diffusion]` keys for an ONNX denoiser (`--sampler ...`, `--config FILE`);
    /// the inputs' roles left out are found from the graph.
    pub diffusion: Option<toml::Table>,
}

/// The kind of source at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A GGUF file (or the first part of a split one).
    Gguf,
    /// A Hugging Face model folder (`config.json`, `*.safetensors`, tokenizer files).
    HuggingFace,
    /// A CTranslate2 model folder (`model.bin` + `config.json`; Whisper).
    Ct2,
    /// An ONNX model file (`*.onnx`, weights inside or beside it).
    Onnx,
}

/// Detects the source format of `source`: a CTranslate2 or Hugging Face folder,
/// or a file with the GGUF magic. Anything else is an error saying what it
/// looks like ([`source::classify`]).
pub fn detect(source: &Path) -> Result<SourceKind, ImportError> {
    source::classify(source)?.ok_or_else(|| ImportError::Unsupported {
        path: source.to_path_buf(),
        reason: "this is already a .model file; load it as it is".into(),
    })
}

/// The kind of an importable folder, `None` when it is neither kind.
pub fn detect_folder(dir: &Path) -> Option<SourceKind> {
    if ct2::is_ct2_folder(dir) {
        Some(SourceKind::Ct2)
    } else if dir.join("config.json").is_file() {
        Some(SourceKind::HuggingFace)
    } else {
        None
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
    import_as(detect(source)?, source, out, opts)
}

/// Imports `source`, already known to be of kind `kind`, into `out`.
pub fn import_as(
    kind: SourceKind,
    source: &Path,
    out: &Path,
    opts: &ImportOptions,
) -> Result<(), ImportError> {
    if opts.diffusion.is_some() && kind != SourceKind::Onnx {
        return Err(ImportError::Unsupported {
            path: source.to_path_buf(),
            reason: "diffusion samplers (--sampler, --config) apply to ONNX denoisers only".into(),
        });
    }
    let imported = match kind {
        SourceKind::Gguf => gguf::import(source, out, opts),
        SourceKind::HuggingFace => hf::import(source, out, opts),
        SourceKind::Ct2 => ct2::import(source, out, opts),
        SourceKind::Onnx => onnx::import(source, out, opts),
    };
    // The written file's check names a temporary file; the fault is the source's.
    imported.map_err(|e| match e {
        ImportError::Verify(err) => ImportError::Format {
            path: source.to_path_buf(),
            reason: format!(
                "its metadata contradicts its tensors, so the imported model does not load: {err}"
            ),
        },
        e => e,
    })
}
