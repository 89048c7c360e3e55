//! Loading a `.model` file: mmap, parse every text section, validate the tensor
//! index and the family's requirements, and choose the execution path
//! (format.md; the contract's load phase).
//!
//! ```no_run
//! let model = cyb_llm::load("smollm2.model")?;
//! let emb = model.tensor("model.embed_tokens.weight").unwrap();
//! println!("{} {:?} {}", emb.entry.name, emb.entry.shape, emb.entry.dtype);
//! # Ok::<(), cyb_llm::LoadError>(())
//! ```

pub mod bert_names;
pub mod config;
pub mod container;
pub mod digest;
pub mod family;
pub mod llama_names;
pub mod sniff;
pub mod tensors;
mod toml_text;
pub mod vocab;
pub mod whisper_names;
pub mod writer;

pub use config::{ChatSection, Config, EvalSection};
pub use family::{Family, Task, FAMILIES};
pub use tensors::{TensorEntry, TensorIndex};
pub use vocab::Vocab;

use crate::error::LoadError;
use crate::quant::{self, QuantError};
use container::Section;
use memmap2::Mmap;
use std::path::{Path, PathBuf};

/// Which code runs the model (the contract's load phase, step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecPath {
    /// Hand-written family code.
    Curated(Family),
    /// The graph executor over the `graph` section.
    Graph,
}

/// A loaded, validated `.model` file. Weights stay in the read-only mapping, or in the
/// read-only huge-page copy of [`WeightPages::HugePages`].
pub struct Model {
    path: PathBuf,
    mmap: Mmap,
    weights_start: usize,
    /// `name` of the `[cyb]` frontmatter.
    pub name: String,
    /// Text sections in file order, then `weights`.
    pub sections: Vec<Section>,
    /// The frontmatter's `[[files]]` entries (sizes and digests).
    pub files: Vec<container::FileEntry>,
    pub config: Config,
    pub tensors: TensorIndex,
    pub vocab: Option<Vocab>,
    pub chat: Option<ChatSection>,
    pub eval: Option<EvalSection>,
    /// The family claiming `config.model_type`, if any.
    pub family: Option<Family>,
    pub exec_path: ExecPath,
    /// The validated `graph` section, if the file has one.
    pub graph: Option<crate::ir::Graph>,
}

impl Model {
    /// What this model does: its family's task, else the task its sections
    /// declare (a voice, a denoiser), else `eval` for a bare graph; `None`
    /// for a model nothing here runs.
    pub fn task(&self) -> Option<Task> {
        match self.family {
            Some(f) => Some(f.task()),
            None if self.config.tts.is_some() => Some(Task::Speak),
            None if self.config.diffusion.is_some() => Some(Task::Diffuse),
            None if self.graph.is_some() => Some(Task::Eval),
            None => None,
        }
    }

    /// The `cyb-llm` commands that run this model, as advice for an error
    /// that says a command was given the wrong kind of model.
    pub fn commands(&self) -> String {
        match self.task() {
            Some(t) => t.commands().into(),
            None => "use `cyb-llm inspect` to see what it is".into(),
        }
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("path", &self.path)
            .field("name", &self.name)
            .field("model_type", &self.config.model_type)
            .field("tensors", &self.tensors.len())
            .field("exec_path", &self.exec_path)
            .finish()
    }
}

/// A tensor's index entry and its bytes inside the mapping (no copy; may be unaligned).
#[derive(Debug, Clone, Copy)]
pub struct TensorRef<'a> {
    pub entry: &'a TensorEntry,
    pub bytes: &'a [u8],
}

impl TensorRef<'_> {
    /// Decodes every value to f32 (exactly as gguf-py does).
    pub fn dequantize(&self) -> Result<Vec<f32>, QuantError> {
        quant::dequantize(self.entry.dtype, self.bytes, self.entry.scale)
    }
}

impl Model {
    /// The file this model was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tensor named `name`, if present.
    pub fn tensor(&self, name: &str) -> Option<TensorRef<'_>> {
        let entry = self.tensors.get(name)?;
        Some(self.tensor_of(entry))
    }

    /// The bytes of an entry of this model's index.
    pub fn tensor_of<'a>(&'a self, entry: &'a TensorEntry) -> TensorRef<'a> {
        let start = self.weights_start + entry.offset as usize;
        TensorRef {
            entry,
            bytes: &self.mmap[start..start + entry.size as usize],
        }
    }

    /// The body text of a text section (`None` for absent sections and `weights`).
    pub fn section_text(&self, name: &str) -> Option<&str> {
        let s = self
            .sections
            .iter()
            .find(|s| s.name == name && s.name != "weights")?;
        std::str::from_utf8(&self.mmap[s.body.clone()]).ok()
    }

    /// The recorded digest of section `name` (`None`: absent, or a file written before digests).
    pub fn digest(&self, name: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.digest.as_deref())
    }

    /// Checks the weights against their recorded digest (the text sections
    /// were checked at load). `Ok(false)`: the file records none to check.
    pub fn verify_weights(&self) -> Result<bool, LoadError> {
        let Some(d) = self.digest("weights") else {
            return Ok(false);
        };
        digest::verify(&self.path, "weights", d, &self.mmap[self.weights_start..])?;
        Ok(true)
    }

    /// The whole file's bytes (for hashing).
    pub fn file_bytes(&self) -> &[u8] {
        &self.mmap
    }

    /// SHA-256 of the whole file, hex: the model's identity. Computed on demand.
    pub fn sha256_hex(&self) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(&self.mmap[..]);
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// `bytes` copied into anonymous memory advised for transparent huge pages, or `None` where
/// the system has none to give (not Linux, huge pages set to `never`, nothing to copy), where
/// the copy would take more than half of the memory available now (a model larger than
/// memory stays mapped and paged, as does a hostile file before validation), or where the
/// kernel refuses the memory or the advice.
fn huge_page_copy(bytes: &[u8]) -> Option<Mmap> {
    #[cfg(target_os = "linux")]
    {
        let setting = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        if bytes.is_empty() || setting.map_or(true, |s| s.contains("[never]")) {
            return None;
        }
        if bytes.len() as u64 > crate::host_memory::available_bytes()? / 2 {
            return None;
        }
        let mut anon = memmap2::MmapOptions::new()
            .len(bytes.len())
            .map_anon()
            .ok()?;
        anon.advise(memmap2::Advice::HugePage).ok()?;
        anon.copy_from_slice(bytes);
        anon.make_read_only().ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = bytes;
        None
    }
}

/// Turns a `toml` error inside section `section` into a [`LoadError::Toml`] with the file line.
pub(crate) fn toml_error(
    path: &Path,
    section: &str,
    body: &str,
    first_line: usize,
    e: &toml::de::Error,
) -> LoadError {
    let line = e
        .span()
        .map(|s| container::line_of(body.as_bytes(), s.start))
        .unwrap_or(1);
    LoadError::Toml {
        path: path.to_path_buf(),
        section: section.into(),
        line: first_line + line - 1,
        message: e.message().trim().to_string(),
    }
}

/// Parses and validates the body of the `graph` section of the model at
/// `path` (first body line `first_line`) against its tensor index.
fn graph_section(
    path: &Path,
    body: &str,
    first_line: usize,
    tensors: &TensorIndex,
) -> Result<crate::ir::Graph, LoadError> {
    let doc = crate::ir::GraphDoc::from_toml(body)
        .map_err(|e| toml_error(path, "graph", body, first_line, &e))?;
    let weight = |name: &str| {
        tensors.get(name).map(|e| {
            crate::backend::TensorInfo::new(&e.shape, crate::ir::bound_dtype(&e.shape, e.dtype))
        })
    };
    crate::ir::Graph::build(&doc, &weight).map_err(|e| e.into_load_error(path))
}

fn parse_toml<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    section: &Section,
) -> Result<T, LoadError> {
    let body = &text[section.body.clone()];
    toml::from_str(body)
        .map_err(|e| toml_error(path, &section.name, body, section.header_line + 1, &e))
}

/// Where a loaded model's bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightPages {
    /// The file mapped read-only: nothing copied at load, the pages shared with the page cache
    /// and with other processes mapping the same file.
    #[default]
    Mapped,
    /// The file copied into anonymous memory advised for transparent huge pages (Linux, with
    /// huge pages not disabled): one TLB entry per 2 MiB instead of per 4 KiB while a decode
    /// step streams every weight, for a copy at load and memory private to the process.
    /// Where huge pages are unavailable, or the file would take more than half of the memory
    /// available, the model stays [`Mapped`](WeightPages::Mapped) (a copy into 4 KiB pages
    /// measured slower than the mapping).
    HugePages,
}

/// Maps, parses and validates the `.model` file at `path` (the bytes stay in the mapping).
pub fn load(path: impl AsRef<Path>) -> Result<Model, LoadError> {
    load_with(path, WeightPages::Mapped)
}

/// [`load`], with the model's bytes where `pages` says.
pub fn load_with(path: impl AsRef<Path>, pages: WeightPages) -> Result<Model, LoadError> {
    let path = path.as_ref();
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the mapping is read-only; the file must not be truncated by another process
    // while mapped, as with every mmap-based model runtime.
    let mmap = unsafe { Mmap::map(&file) }.map_err(io)?;
    let mmap = match pages {
        WeightPages::Mapped => mmap,
        WeightPages::HugePages => huge_page_copy(&mmap).unwrap_or(mmap),
    };
    let c = container::parse(path, &mmap)?;
    let text =
        std::str::from_utf8(&mmap[..c.weights_start]).map_err(|e| LoadError::InvalidUtf8 {
            path: path.to_path_buf(),
            offset: e.valid_up_to(),
        })?;
    let section = |name: &str| c.sections.iter().find(|s| s.name == name);
    let required = |name: &str| {
        section(name).ok_or_else(|| LoadError::MissingSection {
            path: path.to_path_buf(),
            section: name.into(),
            hint: String::new(),
        })
    };
    for s in &c.sections {
        let known = [
            "card", "config", "tensors", "vocab", "chat", "graph", "eval", "program", "weights",
        ];
        if !known.contains(&s.name.as_str()) {
            tracing::warn!("{}: unknown section `{}` ignored", path.display(), s.name);
        }
    }
    let config: Config = parse_toml(path, text, required("config")?)?;
    if config.model_type.is_empty() {
        return Err(LoadError::InvalidConfig {
            path: path.to_path_buf(),
            field: "model_type".into(),
            reason: "must not be empty".into(),
        });
    }
    let ts = required("tensors")?;
    let tensors = tensors::parse(
        path,
        &text[ts.body.clone()],
        ts.header_line + 1,
        c.weights_size,
    )?;
    let family = Family::for_model_type(&config.model_type);
    let vocab = match (section("vocab"), family) {
        (Some(s), _) => Some(vocab::parse(
            path,
            &text[s.body.clone()],
            s.header_line + 1,
        )?),
        (None, Some(f)) => {
            return Err(LoadError::MissingSection {
                path: path.to_path_buf(),
                section: "vocab".into(),
                hint: format!(" (required: {} models take text)", f.name()),
            })
        }
        (None, None) => None,
    };
    let chat = section("chat")
        .map(|s| parse_toml(path, text, s))
        .transpose()?;
    let eval = section("eval")
        .map(|s| parse_toml(path, text, s))
        .transpose()?;
    let exec_path = match (family, section("graph")) {
        (Some(f), _) => ExecPath::Curated(f),
        (None, Some(_)) => ExecPath::Graph,
        (None, None) => {
            return Err(LoadError::InvalidConfig {
                path: path.to_path_buf(),
                field: "model_type".into(),
                reason: format!(
                    "no curated family for '{}' and no graph section",
                    config.model_type
                ),
            })
        }
    };
    if let Some(f) = family {
        check_family(path, f, &config, &tensors)?;
    }
    let graph = section("graph")
        .map(|s| graph_section(path, &text[s.body.clone()], s.header_line + 1, &tensors))
        .transpose()?;
    Ok(Model {
        path: path.to_path_buf(),
        weights_start: c.weights_start,
        name: c.header.name,
        sections: c.sections,
        files: c.files,
        config,
        tensors,
        vocab,
        chat,
        eval,
        family,
        exec_path,
        graph,
        mmap,
    })
}

fn check_family(
    path: &Path,
    f: Family,
    config: &Config,
    tensors: &TensorIndex,
) -> Result<(), LoadError> {
    let required = family::required_tensors(f, config, tensors).map_err(|(field, reason)| {
        LoadError::InvalidConfig {
            path: path.to_path_buf(),
            field,
            reason,
        }
    })?;
    for r in required {
        match tensors.get(&r.name) {
            None if r.mandatory => {
                return Err(LoadError::MissingTensor {
                    path: path.to_path_buf(),
                    name: r.name,
                    required_by: format!("{} ({})", f.name(), config.model_type),
                })
            }
            Some(e) if e.shape != r.shape => {
                return Err(LoadError::ShapeMismatch {
                    path: path.to_path_buf(),
                    tensor: r.name,
                    expected: r.shape,
                    got: e.shape.clone(),
                })
            }
            _ => {}
        }
    }
    Ok(())
}
