//! GGUF importer (v2/v3, single or split `-00001-of-0000N.gguf` files).
//!
//! - Tensors: `blk.N.*` names become the canonical Hugging Face names
//!   (families.md); supported GGML types are copied byte for byte (then `--quant`
//!   applies, see [`super::requant`]); shapes are GGUF's `ne` reversed (row-major).
//!   Fused tensors (`attn_qkv`, phi3's gate+up `ffn_up`) are split by rows.
//! - RoPE: llama-architecture files (llama, granite) keep llama.cpp's permuted Q/K
//!   rows and get `rope_style = "normal"`; every other architecture is `neox`.
//! - Hyper-parameters become `config`; the embedded tokenizer becomes `vocab` and
//!   `config.tokenizer`; `tokenizer.chat_template` becomes the `chat` section.
//!
//! Anything the importer cannot represent (a type, an architecture, a tensor name)
//! is an error naming it, never a silent skip.

pub mod reader;

use super::{requant, ImportOptions};
use crate::dtype::DType;
use crate::error::ImportError;
use crate::loader::config::{Architecture, ChatSection, Config, TokenizerConfig};
use crate::loader::vocab::{token_type, Vocab};
use crate::loader::writer::{ModelWriter, PendingTensor};
use memmap2::Mmap;
use reader::{Header, TensorInfo, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The tokenizer of a GGUF file, as the importer writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufVocab {
    /// The `vocab` section.
    pub vocab: Vocab,
    /// `config.tokenizer`.
    pub tokenizer: TokenizerConfig,
    /// `tokenizer.chat_template`, if present.
    pub chat_template: Option<String>,
}

/// One mapped GGUF file of a (possibly split) model.
struct Part {
    path: PathBuf,
    map: Mmap,
    header: Header,
}

fn format_err(path: &Path, reason: impl Into<String>) -> ImportError {
    ImportError::Format {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn open(path: &Path) -> Result<Part, ImportError> {
    let io = |source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: read-only mapping of a source file that is not modified during the import.
    let map = unsafe { Mmap::map(&file) }.map_err(io)?;
    let header = reader::parse(&map).map_err(|r| format_err(path, r))?;
    Ok(Part {
        path: path.to_path_buf(),
        map,
        header,
    })
}

/// `(prefix, count)` when `path` is named like `NAME-00001-of-00003.gguf`.
fn split_pattern(path: &Path) -> Option<(String, usize)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(count) || !digits(no) {
        return None;
    }
    Some((prefix.to_string(), count.parse().ok()?))
}

/// The files of the model `source` names: itself, or when it is named like one
/// part of a split model (`NAME-00001-of-00003.gguf`), every part in order
/// (present or not).
pub fn part_paths(source: &Path) -> Vec<PathBuf> {
    let Some((prefix, count)) = split_pattern(source) else {
        return vec![source.to_path_buf()];
    };
    let dir = source.parent().unwrap_or(Path::new(""));
    (1..=count)
        .map(|i| dir.join(format!("{prefix}-{i:05}-of-{count:05}.gguf")))
        .collect()
}

/// Opens `source` and, when it is one part of a split model, every part in order.
fn open_all(source: &Path) -> Result<Vec<Part>, ImportError> {
    let paths = part_paths(source);
    if paths.is_empty() {
        return Err(format_err(source, "split count 00000 in the file name"));
    }
    if paths.len() == 1 && split_pattern(source).is_none() {
        return Ok(vec![open(source)?]);
    }
    let count = paths.len();
    let mut parts = Vec::with_capacity(count);
    for (i, p) in paths.into_iter().enumerate() {
        let i = i + 1;
        if !p.is_file() {
            return Err(format_err(
                source,
                format!("split part {} is missing ({i} of {count})", p.display()),
            ));
        }
        let part = open(&p)?;
        if let Some(n) = part.header.kv.get("split.count").and_then(Value::as_u64) {
            if n != count as u64 {
                return Err(format_err(
                    &p,
                    format!("split.count = {n}, but the file name says {count}"),
                ));
            }
        }
        parts.push(part);
    }
    Ok(parts)
}

/// Typed access to the metadata of the first part.
struct Meta<'a> {
    path: &'a Path,
    kv: &'a BTreeMap<String, Value>,
}

impl Meta<'_> {
    fn missing(&self, key: &str, hint: &str) -> ImportError {
        ImportError::MissingKey {
            path: self.path.to_path_buf(),
            key: key.into(),
            hint: hint.into(),
        }
    }

    fn bad(&self, key: &str, v: &Value, want: &str) -> ImportError {
        let shown = match v {
            Value::Array(a) => format!("an array of {}", a.len()),
            Value::Str(s) => format!("{s:?}"),
            other => format!("{other:?}"),
        };
        format_err(self.path, format!("`{key}` is {shown}; expected {want}"))
    }

    fn u64_opt(&self, key: &str) -> Result<Option<u64>, ImportError> {
        self.kv
            .get(key)
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| self.bad(key, v, "a non-negative integer"))
            })
            .transpose()
    }

    fn usize_opt(&self, key: &str) -> Result<Option<usize>, ImportError> {
        self.u64_opt(key)?
            .map(|v| {
                usize::try_from(v)
                    .map_err(|_| format_err(self.path, format!("`{key}` = {v} is too large")))
            })
            .transpose()
    }

    fn usize_req(&self, key: &str) -> Result<usize, ImportError> {
        self.usize_opt(key)?.ok_or_else(|| self.missing(key, ""))
    }

    fn u32_opt(&self, key: &str) -> Result<Option<u32>, ImportError> {
        self.u64_opt(key)?
            .map(|v| {
                u32::try_from(v)
                    .map_err(|_| format_err(self.path, format!("`{key}` = {v} is not a token id")))
            })
            .transpose()
    }

    fn f64_opt(&self, key: &str) -> Result<Option<f64>, ImportError> {
        self.kv
            .get(key)
            .map(|v| v.as_f64().ok_or_else(|| self.bad(key, v, "a number")))
            .transpose()
    }

    fn bool_opt(&self, key: &str) -> Result<Option<bool>, ImportError> {
        match self.kv.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.bad(key, v, "a bool")),
        }
    }

    fn str_opt(&self, key: &str) -> Result<Option<&str>, ImportError> {
        match self.kv.get(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s)),
            Some(v) => Err(self.bad(key, v, "a string")),
        }
    }

    fn array_opt(&self, key: &str) -> Result<Option<&[Value]>, ImportError> {
        match self.kv.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.bad(key, v, "an array")),
        }
    }
}

/// Reads the embedded tokenizer of a GGUF file; works on vocab-only files
/// (llama.cpp's `ggml-vocab-*.gguf`), which have no tensors to import.
pub fn read_vocab(path: &Path) -> Result<GgufVocab, ImportError> {
    let part = open(path)?;
    let meta = Meta {
        path,
        kv: &part.header.kv,
    };
    tokenizer_of(&meta)
}

fn tokenizer_of(meta: &Meta) -> Result<GgufVocab, ImportError> {
    let model = meta.str_opt("tokenizer.ggml.model")?.ok_or_else(|| {
        meta.missing(
            "tokenizer.ggml.model",
            " (the GGUF has no embedded tokenizer)",
        )
    })?;
    let kind = match model {
        "gpt2" => "bpe",
        "llama" => "spm",
        "bert" => "wordpiece",
        other => {
            return Err(ImportError::Unsupported {
                path: meta.path.to_path_buf(),
                reason: format!("tokenizer.ggml.model = {other:?} (supported: gpt2, llama, bert)"),
            })
        }
    };
    let key = "tokenizer.ggml.tokens";
    let raw_tokens = meta.array_opt(key)?.ok_or_else(|| meta.missing(key, ""))?;
    let mut tokens = Vec::with_capacity(raw_tokens.len());
    for (i, t) in raw_tokens.iter().enumerate() {
        match t {
            Value::Str(s) => tokens.push(s.clone()),
            v => return Err(meta.bad(&format!("{key}[{i}]"), v, "a string")),
        }
    }
    if tokens.is_empty() {
        return Err(format_err(meta.path, format!("`{key}` is empty")));
    }
    let n = tokens.len();
    let mut merges = Vec::new();
    if let Some(raw) = meta.array_opt("tokenizer.ggml.merges")? {
        merges.reserve(raw.len());
        for (i, m) in raw.iter().enumerate() {
            let pair = match m {
                Value::Str(s) => s.split_once(' '),
                _ => None,
            };
            let (a, b) = pair.ok_or_else(|| {
                meta.bad(&format!("tokenizer.ggml.merges[{i}]"), m, "\"left right\"")
            })?;
            merges.push((a.to_string(), b.to_string()));
        }
    }
    if kind == "bpe" && merges.is_empty() {
        return Err(meta.missing("tokenizer.ggml.merges", " (gpt2 tokenizers need merges)"));
    }
    let per_token = |key: &str| -> Result<Option<&[Value]>, ImportError> {
        let a = meta.array_opt(key)?;
        match a {
            Some(a) if a.len() != n => Err(format_err(
                meta.path,
                format!("`{key}` has {} entries but there are {n} tokens", a.len()),
            )),
            _ => Ok(a),
        }
    };
    let scores = per_token("tokenizer.ggml.scores")?
        .map(|a| {
            a.iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::Float(f) => Ok(*f as f32),
                    v => Err(meta.bad(&format!("tokenizer.ggml.scores[{i}]"), v, "a float")),
                })
                .collect::<Result<Vec<f32>, _>>()
        })
        .transpose()?;
    let types = per_token("tokenizer.ggml.token_type")?
        .map(|a| {
            a.iter()
                .enumerate()
                .map(|(i, v)| match v.as_u64() {
                    // 0 is llama.cpp's "undefined": treated as a normal piece.
                    Some(0) => Ok(token_type::NORMAL),
                    Some(t @ 1..=6) => Ok(t as u8),
                    _ => Err(meta.bad(
                        &format!("tokenizer.ggml.token_type[{i}]"),
                        v,
                        "a type 0..=6",
                    )),
                })
                .collect::<Result<Vec<u8>, _>>()
        })
        .transpose()?;
    let id = |key: &str| -> Result<Option<u32>, ImportError> {
        let v = meta.u32_opt(key)?;
        match v {
            Some(id) if id as usize >= n => Err(format_err(
                meta.path,
                format!("`{key}` = {id} is outside the vocabulary ({n} tokens)"),
            )),
            _ => Ok(v),
        }
    };
    let mut pre = meta.str_opt("tokenizer.ggml.pre")?.map(str::to_string);
    if kind == "bpe" {
        // llama.cpp falls back to its `default` regexes when the file names none.
        let p = pre.get_or_insert_with(|| "default".into());
        if crate::tokenizer::build::bpe_preset(p).is_none() {
            return Err(ImportError::Unsupported {
                path: meta.path.to_path_buf(),
                reason: format!(
                    "tokenizer.ggml.pre = {p:?} has no pre-tokenizer preset (see tokenizer.md)"
                ),
            });
        }
    }
    let bos = id("tokenizer.ggml.bos_token_id")?;
    let mut eos_ids = Vec::new();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    ] {
        if let Some(e) = id(key)? {
            if !eos_ids.contains(&e) {
                eos_ids.push(e);
            }
        }
    }
    // llama.cpp's defaults when the file does not say.
    let default_bos = match kind {
        "spm" | "wordpiece" => true,
        _ => matches!(pre.as_deref(), Some("llama3" | "llama-v3" | "llama-bpe")),
    };
    let add_bos = meta
        .bool_opt("tokenizer.ggml.add_bos_token")?
        .unwrap_or(default_bos);
    let add_eos = meta
        .bool_opt("tokenizer.ggml.add_eos_token")?
        .unwrap_or(false);
    let mut extra = toml::Table::new();
    let add_space_prefix = meta
        .bool_opt("tokenizer.ggml.add_space_prefix")?
        .unwrap_or(kind == "spm");
    extra.insert(
        "add_space_prefix".into(),
        toml::Value::Boolean(add_space_prefix),
    );
    for (key, name) in [
        ("tokenizer.ggml.seperator_token_id", "sep_token_id"),
        ("tokenizer.ggml.cls_token_id", "cls_token_id"),
        ("tokenizer.ggml.mask_token_id", "mask_token_id"),
    ] {
        if let Some(v) = id(key)? {
            extra.insert(name.into(), toml::Value::Integer(v as i64));
        }
    }
    if let Some(sep) = meta.bool_opt("tokenizer.ggml.add_sep_token")? {
        extra.insert("add_sep".into(), toml::Value::Boolean(sep));
    }
    // llama.cpp's normalizer defaults for WPM: lowercase, and strip accents when lowercasing.
    let lowercase = meta
        .bool_opt("tokenizer.ggml.normalizer.lowercase")?
        .unwrap_or(true);
    if kind == "wordpiece" {
        let strip = meta
            .bool_opt("tokenizer.ggml.normalizer.strip_accents")?
            .unwrap_or(lowercase);
        extra.insert("strip_accents".into(), toml::Value::Boolean(strip));
        to_hf_wordpiece(&mut tokens, types.as_deref());
    }
    // llama.cpp gives every special token of phi-3 vocabularies the rstrip attribute.
    let name = meta.str_opt("general.name")?.unwrap_or("").to_lowercase();
    if name.contains("phi-3") || name.contains("phi3") {
        extra.insert("rstrip_special_tokens".into(), toml::Value::Boolean(true));
    }
    let tokenizer = TokenizerConfig {
        kind: kind.into(),
        pre,
        bos_token_id: bos,
        eos_token_ids: eos_ids,
        pad_token_id: id("tokenizer.ggml.padding_token_id")?,
        unk_token_id: id("tokenizer.ggml.unknown_token_id")?,
        add_bos: Some(add_bos),
        add_eos: Some(add_eos),
        lowercase: (kind == "wordpiece").then_some(lowercase),
        extra,
    };
    Ok(GgufVocab {
        vocab: Vocab {
            tokens,
            merges,
            scores,
            types,
        },
        tokenizer,
        chat_template: meta.str_opt("tokenizer.chat_template")?.map(str::to_string),
    })
}

/// GGUF stores WordPiece vocabularies with a `▁` word-start prefix and bare
/// continuations; the `.model` vocab uses Hugging Face's form (bare word starts,
/// `##` continuations). Only normal pieces change.
fn to_hf_wordpiece(tokens: &mut [String], types: Option<&[u8]>) {
    for (id, t) in tokens.iter_mut().enumerate() {
        let normal = types.is_none_or(|ty| ty.get(id) == Some(&token_type::NORMAL));
        if !normal || t == "\u{2581}" {
            continue;
        }
        *t = match t.strip_prefix('\u{2581}') {
            Some(rest) => rest.to_string(),
            None => format!("##{t}"),
        };
    }
}

/// `(model_type, rope_style)` of a GGUF `general.architecture`.
fn architecture(arch: &str) -> Option<(&'static str, &'static str)> {
    Some(match arch {
        "llama" => ("llama", "normal"),
        "granite" => ("granite", "normal"),
        "qwen2" => ("qwen2", "neox"),
        "qwen3" => ("qwen3", "neox"),
        "gemma" => ("gemma", "neox"),
        "gemma2" => ("gemma2", "neox"),
        "gemma3" => ("gemma3", "neox"),
        "phi3" => ("phi3", "neox"),
        "olmo2" => ("olmo2", "neox"),
        _ => return None,
    })
}

/// The canonical name of a non-fused GGUF tensor. `sandwich`: the file has
/// `post_attention_norm` tensors (gemma2/3), so `ffn_norm` is the pre-FFN norm.
fn canonical_name(name: &str, sandwich: bool) -> Option<String> {
    let top = match name {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(t) = top {
        return Some(t.to_string());
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    if layer.is_empty()
        || !layer.bytes().all(|b| b.is_ascii_digit())
        || (layer.len() > 1 && layer.starts_with('0'))
    {
        return None;
    }
    let (base, suffix) = rest.rsplit_once('.')?;
    if suffix != "weight" && suffix != "bias" {
        return None;
    }
    let mapped = match base {
        "attn_norm" => "input_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        "ffn_norm" if sandwich => "pre_feedforward_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "post_attention_norm" => "post_attention_layernorm",
        "post_ffw_norm" => "post_feedforward_layernorm",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{mapped}.{suffix}"))
}

/// A tensor to write: canonical name, shape, encoding and the byte range of the source.
struct Planned<'a> {
    name: String,
    shape: Vec<usize>,
    dtype: DType,
    data: &'a [u8],
}

/// Splits the rows of `t` (2-D, or 1-D for biases) into parts of `rows` each.
fn split_rows<'a>(
    path: &Path,
    t: &TensorInfo,
    dtype: DType,
    data: &'a [u8],
    parts: &[(String, usize)],
) -> Result<Vec<Planned<'a>>, ImportError> {
    let total = parts.iter().try_fold(0usize, |a, p| a.checked_add(p.1));
    let outer = t.shape[0];
    if total != Some(outer) {
        return Err(format_err(
            path,
            format!(
                "fused tensor `{}` has {outer} rows, expected {} to split it",
                t.name,
                total.map_or("more than addressable".to_string(), |n| n.to_string())
            ),
        ));
    }
    let inner: Vec<usize> = t.shape[1..].to_vec();
    let row_bytes = dtype
        .byte_size(&inner)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| format_err(path, format!("tensor `{}`: bad row size", t.name)))?;
    let mut at = 0;
    let mut out = Vec::with_capacity(parts.len());
    for (name, rows) in parts {
        let len = rows
            .checked_mul(row_bytes)
            .filter(|&l| at + l <= data.len())
            .ok_or_else(|| format_err(path, format!("tensor `{}`: bad row size", t.name)))?;
        let mut shape = vec![*rows];
        shape.extend(&inner);
        out.push(Planned {
            name: name.clone(),
            shape,
            dtype,
            data: &data[at..at + len],
        });
        at += len;
    }
    Ok(out)
}

/// Imports the GGUF model at `source` (any part of a split model) into `out`.
pub fn import(source: &Path, out: &Path, opts: &ImportOptions) -> Result<(), ImportError> {
    let parts = open_all(source)?;
    let first = &parts[0];
    let meta = Meta {
        path: &first.path,
        kv: &first.header.kv,
    };
    let arch = meta
        .str_opt("general.architecture")?
        .ok_or_else(|| meta.missing("general.architecture", ""))?;
    let (model_type, rope_style) = architecture(arch).ok_or_else(|| ImportError::Unsupported {
        path: first.path.clone(),
        reason: format!(
            "general.architecture = {arch:?} (supported: llama, granite, qwen2, qwen3, gemma, gemma2, gemma3, phi3, olmo2)"
        ),
    })?;
    let all: Vec<(&Part, &TensorInfo)> = parts
        .iter()
        .flat_map(|p| p.header.tensors.iter().map(move |t| (p, t)))
        .collect();
    if all.is_empty() {
        return Err(format_err(
            source,
            "the GGUF has no tensors (a vocab-only file?)",
        ));
    }
    for (part, t) in &all {
        if reader::dtype_of_ggml(t.ggml_type).is_none() {
            return Err(unsupported_type(part, t));
        }
    }
    let find = |name: &str| all.iter().find(|(_, t)| t.name == name).map(|(_, t)| *t);
    let sandwich = all
        .iter()
        .any(|(_, t)| t.name.contains(".post_attention_norm."));

    let key = |k: &str| format!("{arch}.{k}");
    let hidden = meta.usize_req(&key("embedding_length"))?;
    let layers = meta.usize_req(&key("block_count"))?;
    if layers > all.len() {
        return Err(format_err(
            &first.path,
            format!(
                "`{}` = {layers}, but the file holds only {} tensors (each layer needs several)",
                key("block_count"),
                all.len()
            ),
        ));
    }
    let heads = meta.usize_req(&key("attention.head_count"))?;
    let kv_heads = meta
        .usize_opt(&key("attention.head_count_kv"))?
        .unwrap_or(heads);
    if heads == 0 || kv_heads == 0 {
        return Err(format_err(&first.path, "attention head counts must be > 0"));
    }
    let head_dim = meta
        .usize_opt(&key("attention.key_length"))?
        .unwrap_or(hidden / heads);
    let embd = find("token_embd.weight")
        .ok_or_else(|| format_err(&first.path, "tensor `token_embd.weight` is missing"))?;
    let vocab_size = embd.shape[0];
    if embd.shape.get(1) != Some(&hidden) {
        return Err(format_err(
            &first.path,
            format!(
                "`{}` = {hidden}, but token_embd.weight has shape {:?} (damaged metadata?)",
                key("embedding_length"),
                embd.shape
            ),
        ));
    }

    let mut tensors: Vec<Planned> = Vec::with_capacity(all.len());
    for (part, t) in &all {
        let dtype = reader::dtype_of_ggml(t.ggml_type).ok_or_else(|| unsupported_type(part, t))?;
        let data = &part.map[t.start..t.start + t.len];
        let layer_base = t
            .name
            .strip_suffix(".weight")
            .or_else(|| t.name.strip_suffix(".bias"));
        let suffix = if t.name.ends_with(".bias") {
            "bias"
        } else {
            "weight"
        };
        if let Some(prefix) = layer_base.and_then(|b| b.strip_suffix(".attn_qkv")) {
            let canon = |p: &str| {
                format!(
                    "{}.self_attn.{p}_proj.{suffix}",
                    prefix.replacen("blk.", "model.layers.", 1)
                )
            };
            let rows = |n: usize| {
                n.checked_mul(head_dim).ok_or_else(|| {
                    format_err(
                        &part.path,
                        format!("`{}` = {head_dim} overflows", key("attention.key_length")),
                    )
                })
            };
            let (q, kv) = (rows(heads)?, rows(kv_heads)?);
            let split = [(canon("q"), q), (canon("k"), kv), (canon("v"), kv)];
            tensors.extend(split_rows(&part.path, t, dtype, data, &split)?);
            continue;
        }
        if arch == "phi3" {
            if let Some(prefix) = layer_base.and_then(|b| b.strip_suffix(".ffn_up")) {
                if find(&format!("{prefix}.ffn_gate.{suffix}")).is_none() {
                    let half = t.shape[0] / 2;
                    let canon = |p: &str| {
                        format!(
                            "{}.mlp.{p}_proj.{suffix}",
                            prefix.replacen("blk.", "model.layers.", 1)
                        )
                    };
                    let split = [(canon("gate"), half), (canon("up"), half)];
                    tensors.extend(split_rows(&part.path, t, dtype, data, &split)?);
                    continue;
                }
            }
        }
        let name = canonical_name(&t.name, sandwich).ok_or_else(|| ImportError::Unsupported {
            path: part.path.clone(),
            reason: format!("GGUF tensor `{}` has no canonical name for {arch}", t.name),
        })?;
        tensors.push(Planned {
            name,
            shape: t.shape.clone(),
            dtype,
            data,
        });
    }

    let intermediate = match meta.usize_opt(&key("feed_forward_length"))? {
        Some(v) => v,
        None => tensors
            .iter()
            .find(|t| t.name == "model.layers.0.mlp.up_proj.weight")
            .map(|t| t.shape[0])
            .ok_or_else(|| meta.missing(&key("feed_forward_length"), ""))?,
    };
    let gemma = arch.starts_with("gemma");
    let mut extra = toml::Table::new();
    if let Some(v) = meta
        .f64_opt(&key("final_logit_softcapping"))?
        .filter(|v| *v > 0.0)
    {
        extra.insert("final_logit_softcapping".into(), toml::Value::Float(v));
    }
    if let Some(v) = meta
        .f64_opt(&key("attn_logit_softcapping"))?
        .filter(|v| *v > 0.0)
    {
        extra.insert("attn_logit_softcapping".into(), toml::Value::Float(v));
    }
    if let Some(rot) = meta.usize_opt(&key("rope.dimension_count"))? {
        if rot != head_dim && head_dim > 0 {
            extra.insert(
                "partial_rotary_factor".into(),
                toml::Value::Float(rot as f64 / head_dim as f64),
            );
        }
    }
    if arch == "gemma3" || arch == "gemma2" {
        // llama.cpp (models/gemma3.cpp): scale 1/sqrt(head_dim), except 27B (62 layers): hidden/heads.
        let scalar = if layers == 62 {
            hidden / heads
        } else {
            head_dim
        };
        extra.insert(
            "query_pre_attn_scalar".into(),
            toml::Value::Integer(scalar as i64),
        );
    }
    if let Some(window) = meta
        .usize_opt(&key("attention.sliding_window"))?
        .filter(|w| *w > 0)
    {
        extra.insert("sliding_window".into(), toml::Value::Integer(window as i64));
        if arch == "gemma3" {
            let pattern_key = key("attention.sliding_window_pattern");
            let sliding: Vec<bool> = match meta.kv.get(&pattern_key) {
                Some(Value::Array(a)) if a.len() == layers => a
                    .iter()
                    .map(|v| match v {
                        Value::Bool(b) => Ok(*b),
                        v => Err(meta.bad(&pattern_key, v, "bools")),
                    })
                    .collect::<Result<_, _>>()?,
                Some(v @ Value::Array(_)) => {
                    return Err(meta.bad(&pattern_key, v, "one bool per layer"))
                }
                _ => {
                    let n = meta.usize_opt(&pattern_key)?.unwrap_or(6);
                    extra.insert(
                        "sliding_window_pattern".into(),
                        toml::Value::Integer(n as i64),
                    );
                    (0..layers).map(|i| n > 0 && i % n < n - 1).collect()
                }
            };
            let types = sliding
                .iter()
                .map(|&s| {
                    toml::Value::String(
                        if s {
                            "sliding_attention"
                        } else {
                            "full_attention"
                        }
                        .into(),
                    )
                })
                .collect();
            extra.insert("layer_types".into(), toml::Value::Array(types));
            // llama.cpp's default theta of the sliding layers.
            let local = meta.f64_opt(&key("rope.freq_base_swa"))?.unwrap_or(10000.0);
            extra.insert("rope_local_base_freq".into(), toml::Value::Float(local));
        }
    }
    if let Some(kind) = meta
        .str_opt(&key("rope.scaling.type"))?
        .filter(|k| *k != "none")
    {
        let mut t = toml::Table::new();
        t.insert("type".into(), toml::Value::String(kind.into()));
        if let Some(f) = meta.f64_opt(&key("rope.scaling.factor"))? {
            t.insert("factor".into(), toml::Value::Float(f));
        }
        if let Some(n) = meta.usize_opt(&key("rope.scaling.original_context_length"))? {
            t.insert(
                "original_max_position_embeddings".into(),
                toml::Value::Integer(n as i64),
            );
        }
        extra.insert("rope_scaling".into(), toml::Value::Table(t));
    }
    let tied = !tensors.iter().any(|t| t.name == "lm_head.weight");
    let architecture = Architecture {
        hidden_size: Some(hidden),
        num_attention_heads: Some(heads),
        num_key_value_heads: Some(kv_heads),
        head_dim: Some(head_dim),
        num_hidden_layers: Some(layers),
        intermediate_size: Some(intermediate),
        vocab_size: Some(vocab_size),
        max_position_embeddings: meta.usize_opt(&key("context_length"))?,
        rope_theta: Some(meta.f64_opt(&key("rope.freq_base"))?.unwrap_or(10000.0)),
        rope_style: Some(rope_style.into()),
        rms_norm_eps: meta.f64_opt(&key("attention.layer_norm_rms_epsilon"))?,
        layer_norm_eps: meta.f64_opt(&key("attention.layer_norm_epsilon"))?,
        tie_word_embeddings: Some(tied),
        hidden_act: Some(if gemma { "gelu_pytorch_tanh" } else { "silu" }.into()),
        extra,
    };
    let tok = tokenizer_of(&meta)?;

    let mut parameters: u64 = 0;
    let mut writer = ModelWriter::new(opts.name.clone().unwrap_or_else(|| default_name(source)));
    for t in tensors {
        let (dtype, data) = requant::apply(
            source,
            &t.name,
            &t.shape,
            t.dtype,
            Cow::Borrowed(t.data),
            opts.quant,
        )?;
        parameters += t.shape.iter().map(|&d| d as u64).product::<u64>();
        writer.add_tensor(PendingTensor {
            name: t.name,
            shape: t.shape,
            dtype,
            scale: None,
            data,
        })?;
    }
    let config = Config {
        model_type: model_type.into(),
        parameters: Some(parameters),
        license: meta.str_opt("general.license")?.map(str::to_string),
        architecture,
        tokenizer: Some(tok.tokenizer),
        sampling: None,
        ..Default::default()
    };
    writer.set_config(&config)?;
    writer.set_section("vocab", tok.vocab.to_toml());
    if let Some(template) = tok.chat_template {
        let chat = ChatSection {
            template: Some(template),
            ..Default::default()
        };
        let body = toml::to_string(&chat)
            .map_err(|e| format_err(source, format!("cannot write the chat section: {e}")))?;
        writer.set_section("chat", body);
    }
    let general_name = meta.str_opt("general.name")?.unwrap_or("(unnamed)");
    writer.set_section(
        "card",
        format!(
            "# {general_name}\n\nImported from GGUF v{} `{}` ({} file{}, architecture `{arch}`).\n",
            first.header.version,
            first
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            parts.len(),
            if parts.len() == 1 { "" } else { "s" },
        ),
    );
    if !opts.no_graph {
        crate::graph::write_graph_section(&mut writer, &config);
    }
    writer.write(out)
}

fn unsupported_type(part: &Part, t: &TensorInfo) -> ImportError {
    ImportError::Unsupported {
        path: part.path.clone(),
        reason: format!(
            "unsupported GGUF tensor type {} ({}) for {}",
            t.ggml_type,
            reader::ggml_type_name(t.ggml_type),
            t.name
        ),
    }
}

/// The model name from the source file name (split suffix removed).
fn default_name(source: &Path) -> String {
    if let Some((prefix, _)) = split_pattern(source) {
        return prefix;
    }
    source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_hugging_face() {
        assert_eq!(
            canonical_name("blk.3.attn_q.weight", false).unwrap(),
            "model.layers.3.self_attn.q_proj.weight"
        );
        assert_eq!(
            canonical_name("blk.0.attn_k.bias", false).unwrap(),
            "model.layers.0.self_attn.k_proj.bias"
        );
        assert_eq!(
            canonical_name("blk.1.ffn_norm.weight", false).unwrap(),
            "model.layers.1.post_attention_layernorm.weight"
        );
        assert_eq!(
            canonical_name("blk.1.ffn_norm.weight", true).unwrap(),
            "model.layers.1.pre_feedforward_layernorm.weight"
        );
        assert_eq!(
            canonical_name("blk.1.post_ffw_norm.weight", true).unwrap(),
            "model.layers.1.post_feedforward_layernorm.weight"
        );
        assert_eq!(
            canonical_name("output.weight", false).unwrap(),
            "lm_head.weight"
        );
        assert_eq!(canonical_name("blk.01.attn_q.weight", false), None);
        assert_eq!(canonical_name("blk.1.attn_q.scale", false), None);
        assert_eq!(canonical_name("rope_freqs.weight", false), None);
    }

    #[test]
    fn split_names_are_recognised() {
        let p = Path::new("/x/model-q4-00002-of-00003.gguf");
        assert_eq!(split_pattern(p), Some(("model-q4".into(), 3)));
        assert_eq!(split_pattern(Path::new("model.gguf")), None);
        assert_eq!(default_name(p), "model-q4");
    }
}
