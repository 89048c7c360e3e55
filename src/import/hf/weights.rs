//! The safetensors files of a Hugging Face folder: mapped read-only (memmap2), parsed with
//! the `safetensors` crate, and planned into canonical `.model` tensors.

use super::config::{Arch, Kind};
use super::json::Json;
use crate::dtype::DType;
use crate::error::ImportError;
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const INDEX: &str = "model.safetensors.index.json";

/// The mapped safetensors files of a folder, with the shard index when there is one.
pub struct Shards {
    files: Vec<(PathBuf, Mmap)>,
    /// `weight_map` of the index: tensor name → shard file name.
    index: Option<(PathBuf, BTreeMap<String, String>)>,
}

/// One tensor of a source file, borrowing its bytes from the mapping.
#[derive(Debug, Clone)]
pub struct SourceTensor<'a> {
    /// Name in the source file.
    pub name: String,
    /// The shard holding it.
    pub file: &'a Path,
    /// Encoding.
    pub dtype: DType,
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// Raw little-endian bytes.
    pub data: &'a [u8],
}

fn format(path: &Path, reason: String) -> ImportError {
    ImportError::Format {
        path: path.to_path_buf(),
        reason,
    }
}

fn map_file(path: &Path) -> Result<Mmap, ImportError> {
    let io = |source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: read-only mapping of a source file that the importer does not modify; like
    // every mmap-based reader it assumes no other process truncates the file meanwhile.
    unsafe { Mmap::map(&file) }.map_err(io)
}

impl Shards {
    /// Maps `model.safetensors.index.json`'s shards, else `model.safetensors`, else every
    /// `*.safetensors` of `dir`.
    pub fn open(dir: &Path) -> Result<Shards, ImportError> {
        let index_path = dir.join(INDEX);
        let (names, index) = match Json::read_opt(&index_path)? {
            Some(idx) => {
                let map = idx
                    .get("weight_map")
                    .and_then(|m| m.as_object())
                    .ok_or_else(|| {
                        idx.missing("weight_map", " (an object: tensor name -> shard file)")
                    })?;
                let mut weight_map = BTreeMap::new();
                for (tensor, file) in map {
                    let file = file
                        .as_str()
                        .filter(|f| !f.is_empty() && !f.contains(['/', '\\']) && *f != "..")
                        .ok_or_else(|| {
                            format(
                                &index_path,
                                format!(
                                    "weight_map: tensor `{tensor}` has no plain shard file name"
                                ),
                            )
                        })?;
                    weight_map.insert(tensor.clone(), file.to_string());
                }
                let files: BTreeSet<String> = weight_map.values().cloned().collect();
                for f in &files {
                    if !dir.join(f).is_file() {
                        let tensor = weight_map
                            .iter()
                            .find(|(_, v)| *v == f)
                            .map(|(k, _)| k.as_str());
                        return Err(format(
                            &dir.join(f),
                            format!(
                                "shard is missing: {INDEX} puts tensor `{}` in it (re-download the model)",
                                tensor.unwrap_or("?")
                            ),
                        ));
                    }
                }
                (
                    files.into_iter().collect::<Vec<_>>(),
                    Some((index_path, weight_map)),
                )
            }
            None => {
                let io = |source| ImportError::Io {
                    path: dir.to_path_buf(),
                    source,
                };
                let mut names = Vec::new();
                for entry in std::fs::read_dir(dir).map_err(io)? {
                    let name = entry
                        .map_err(io)?
                        .file_name()
                        .to_string_lossy()
                        .into_owned();
                    if name.ends_with(".safetensors") {
                        names.push(name);
                    }
                }
                names.sort();
                // Repositories that also ship other weight files (Mistral's
                // `consolidated.safetensors`) name the transformers one `model.safetensors`.
                if names.iter().any(|n| n == "model.safetensors") {
                    names.retain(|n| n == "model.safetensors");
                }
                if names.is_empty() {
                    return Err(format(dir, "no *.safetensors weights in the folder".into()));
                }
                (names, None)
            }
        };
        let files = names
            .into_iter()
            .map(|n| {
                let p = dir.join(n);
                map_file(&p).map(|m| (p, m))
            })
            .collect::<Result<_, _>>()?;
        Ok(Shards { files, index })
    }

    /// Every tensor of every shard, checked against the index.
    pub fn tensors(&self) -> Result<Vec<SourceTensor<'_>>, ImportError> {
        let mut out: Vec<SourceTensor<'_>> = Vec::new();
        let mut seen = BTreeMap::new();
        for (path, mmap) in &self.files {
            let st = SafeTensors::deserialize(mmap)
                .map_err(|e| format(path, format!("invalid safetensors file: {e:?}")))?;
            let mut names: Vec<(String, safetensors::tensor::TensorView<'_>)> = st.tensors();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, view) in names {
                if let Some(other) = seen.insert(name.clone(), path.clone()) {
                    return Err(format(
                        path,
                        format!(
                            "tensor `{name}` appears in both {} and this file",
                            other.display()
                        ),
                    ));
                }
                let dtype = match view.dtype() {
                    Dtype::F32 => DType::F32,
                    Dtype::F16 => DType::F16,
                    Dtype::BF16 => DType::BF16,
                    Dtype::I32 => DType::I32,
                    Dtype::I8 => DType::I8,
                    Dtype::U8 => DType::U8,
                    other if is_buffer(&name) => {
                        tracing::debug!("{}: skipping buffer `{name}` ({other:?})", path.display());
                        continue;
                    }
                    other => {
                        return Err(ImportError::Unsupported {
                            path: path.clone(),
                            reason: format!("safetensors dtype {other:?} of tensor `{name}` (supported: F32, F16, BF16, I32, I8, U8)"),
                        })
                    }
                };
                out.push(SourceTensor {
                    name,
                    file: path,
                    dtype,
                    shape: view.shape().to_vec(),
                    data: view.data(),
                });
            }
        }
        if let Some((index_path, map)) = &self.index {
            for (tensor, file) in map {
                if seen
                    .get(tensor)
                    .and_then(|p| p.file_name())
                    .map(|f| f.to_string_lossy())
                    != Some(file.into())
                {
                    return Err(format(
                        index_path,
                        format!("weight_map puts tensor `{tensor}` in {file}, but that shard does not hold it"),
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// Checks the counts of `config.json` (`config_json`) that size work before the
/// written file is validated: the layer count against the number of tensors
/// (each layer has several; the graph section is written per layer) and the
/// token embedding's rows against `arch.vocab_size` (the tokenizer's tables).
/// A config that claims more than the weights hold is an error naming both.
pub fn check_counts(plan: &Plan<'_>, arch: &Arch, config_json: &Path) -> Result<(), ImportError> {
    let layers = arch.architecture.num_hidden_layers.unwrap_or(0);
    if layers > plan.tensors.len() {
        return Err(format(
            config_json,
            format!(
                "num_hidden_layers is {layers}, but the weights hold only {} tensors (fix num_hidden_layers or re-download the weights)",
                plan.tensors.len()
            ),
        ));
    }
    let name = match arch.family {
        Kind::Llama => "model.embed_tokens.weight",
        Kind::Bert => "embeddings.word_embeddings.weight",
    };
    let rows = plan
        .tensors
        .iter()
        .find(|t| t.name == name)
        .map(|t| (t.file, t.shape.first().copied()));
    match rows {
        Some((_, Some(r))) if r == arch.vocab_size => Ok(()),
        Some((file, r)) => Err(format(
            config_json,
            format!(
                "vocab_size is {}, but the token embedding `{name}` in {} has {} rows (fix vocab_size or re-download the weights)",
                arch.vocab_size,
                file.display(),
                r.map_or("no".to_string(), |r| r.to_string())
            ),
        )),
        None => Err(format(
            config_json,
            format!("the weights hold no token embedding `{name}` (vocab_size {}): re-download the model", arch.vocab_size),
        )),
    }
}

/// Non-parameter buffers that PyTorch checkpoints sometimes carry.
fn is_buffer(name: &str) -> bool {
    name.ends_with(".position_ids") || name.ends_with("rotary_emb.inv_freq")
}

/// One tensor to write, before `--quant`.
#[derive(Debug)]
pub struct Planned<'a> {
    /// Canonical name.
    pub name: String,
    /// Source file (for messages).
    pub file: &'a Path,
    /// Shape.
    pub shape: Vec<usize>,
    /// Encoding of `data`.
    pub dtype: DType,
    /// Bytes: borrowed from the mapping unless converted.
    pub data: Cow<'a, [u8]>,
}

/// The canonical tensors of a model, and whether the output embedding is tied.
#[derive(Debug)]
pub struct Plan<'a> {
    /// In a deterministic (natural name) order.
    pub tensors: Vec<Planned<'a>>,
    /// `tie_word_embeddings` of the written file.
    pub tied: bool,
}

/// Canonical name of a source tensor of a LlamaStyle checkpoint; `None` skips it.
fn llama_name(name: &str) -> Option<String> {
    const RENAMES: [(&str, &str); 3] = [
        ("language_model.model.", "model."),
        ("model.language_model.", "model."),
        ("language_model.lm_head.", "lm_head."),
    ];
    for (from, to) in RENAMES {
        if let Some(rest) = name.strip_prefix(from) {
            return Some(format!("{to}{rest}"));
        }
    }
    let vision = [
        "vision_tower.",
        "multi_modal_projector.",
        "model.vision_tower.",
        "model.multi_modal_projector.",
    ];
    if vision.iter().any(|p| name.starts_with(p)) {
        tracing::warn!("skipping vision-tower tensor `{name}` (only the text model is imported)");
        return None;
    }
    Some(name.to_string())
}

/// Splits tensor `t` (renamed to `name`) along its rows into `parts` (suffix, rows).
fn split<'a>(
    t: &SourceTensor<'a>,
    name: &str,
    fused: &str,
    parts: &[(&str, usize)],
) -> Result<Vec<Planned<'a>>, ImportError> {
    let total = parts.iter().try_fold(0usize, |a, p| a.checked_add(p.1));
    let fits = |n: usize| n > 0 && t.shape.first() == Some(&n) && !t.dtype.is_quantized();
    let Some(total) = total.filter(|&n| fits(n)) else {
        return Err(format(
            t.file,
            format!(
                "fused tensor `{}` has shape {:?}; the config implies {} rows",
                t.name,
                t.shape,
                total.map_or("too many".to_string(), |n| n.to_string())
            ),
        ));
    };
    let row_bytes = t.data.len() / total;
    let mut at = 0;
    let mut out = Vec::new();
    for (part, rows) in parts {
        let mut shape = t.shape.clone();
        shape[0] = *rows;
        out.push(Planned {
            name: name.replacen(fused, part, 1),
            file: t.file,
            shape,
            dtype: t.dtype,
            data: Cow::Borrowed(&t.data[at * row_bytes..(at + rows) * row_bytes]),
        });
        at += rows;
    }
    Ok(out)
}

/// `1 + w` in f32, for HF Gemma norm weights.
fn one_plus<'a>(t: &SourceTensor<'a>, name: String) -> Result<Planned<'a>, ImportError> {
    let w = crate::quant::dequantize(t.dtype, t.data, None)
        .map_err(|e| format(t.file, format!("tensor `{}`: {e}", t.name)))?;
    let data = w.iter().flat_map(|&x| (1.0f32 + x).to_le_bytes()).collect();
    Ok(Planned {
        name,
        file: t.file,
        shape: t.shape.clone(),
        dtype: DType::F32,
        data: Cow::Owned(data),
    })
}

/// Orders names with numeric parts compared as numbers (`layers.2` before `layers.10`).
fn natural_key(name: &str) -> Vec<(u64, String)> {
    name.split('.')
        .map(|p| match p.parse::<u64>() {
            Ok(n) => (n, String::new()),
            Err(_) => (u64::MAX, p.to_string()),
        })
        .collect()
}

/// Maps source tensors to the canonical ones of `arch`'s family.
pub fn plan<'a>(tensors: &[SourceTensor<'a>], arch: &Arch) -> Result<Plan<'a>, ImportError> {
    let mut out: Vec<Planned<'a>> = Vec::new();
    for t in tensors {
        let name = match arch.family {
            Kind::Bert => Some(
                ["bert.", "roberta.", "distilbert."]
                    .iter()
                    .find_map(|p| t.name.strip_prefix(p))
                    .unwrap_or(&t.name)
                    .to_string(),
            ),
            Kind::Llama => llama_name(&t.name),
        };
        let Some(name) = name else { continue };
        let (q, kv, ffn) = (arch.q_rows, arch.kv_rows, arch.ffn_rows);
        if name.contains(".self_attn.qkv_proj.") {
            out.extend(split(
                t,
                &name,
                "qkv_proj",
                &[("q_proj", q), ("k_proj", kv), ("v_proj", kv)],
            )?);
        } else if name.contains(".mlp.gate_up_proj.") {
            out.extend(split(
                t,
                &name,
                "gate_up_proj",
                &[("gate_proj", ffn), ("up_proj", ffn)],
            )?);
        } else if arch.gemma_norms && name.ends_with("norm.weight") {
            out.push(one_plus(t, name)?);
        } else {
            out.push(Planned {
                name,
                file: t.file,
                shape: t.shape.clone(),
                dtype: t.dtype,
                data: Cow::Borrowed(t.data),
            });
        }
    }
    out.sort_by_cached_key(|t| natural_key(&t.name));
    if let Some(w) = out.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(format(
            w[1].file,
            format!(
                "two source tensors map to `{}` (fused and unfused copies?)",
                w[1].name
            ),
        ));
    }
    let mut tied = false;
    if arch.family == Kind::Llama {
        let find = |n: &str| out.iter().position(|t| t.name == n);
        let embed = find("model.embed_tokens.weight");
        match (find("lm_head.weight"), arch.tie_declared) {
            (Some(lm), true) => {
                let same = embed.is_some_and(|e| {
                    let (a, b) = (&out[e], &out[lm]);
                    a.dtype == b.dtype && a.shape == b.shape && a.data == b.data
                });
                if same {
                    out.remove(lm);
                    tied = true;
                } else {
                    tracing::warn!("tie_word_embeddings is true but lm_head.weight differs from the embedding: keeping it untied");
                }
            }
            (None, false) => {
                let file = tensors.first().map(|t| t.file).unwrap_or(Path::new("."));
                return Err(format(
                    file,
                    "lm_head.weight is missing and config.json says tie_word_embeddings = false"
                        .into(),
                ));
            }
            (None, true) => tied = true,
            (Some(_), false) => {}
        }
    }
    Ok(Plan { tensors: out, tied })
}
