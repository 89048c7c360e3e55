//! The CTranslate2 importer (Whisper): a folder with `model.bin` (CTranslate2's
//! binary format, [`reader`]), `config.json` (suppress lists, language ids),
//! `vocabulary.txt` or `vocabulary.json`, and/or `tokenizer.json` ([`vocab`]).
//!
//! Variables map to the Hugging Face Whisper names (`model.encoder.*`,
//! `model.decoder.*`). The documented splits, by rows of the `[out, in]` weight
//! and of the bias:
//!
//! - `{encoder,decoder}/layer_i/self_attention/linear_0` (fused `[3d, d]`) →
//!   `self_attn.q_proj` rows `0..d`, `k_proj` rows `d..2d`, `v_proj` rows `2d..3d`
//!   (the fused bias's `k` third is CTranslate2's zero filler and is kept as
//!   `k_proj.bias`);
//! - `decoder/layer_i/attention/linear_1` (fused `[2d, d]`) → `encoder_attn.k_proj`
//!   rows `0..d`, `encoder_attn.v_proj` rows `d..2d`.
//!
//! `decoder/projection/weight` aliased to the token embedding means tied output
//! weights (no `proj_out.weight`). The mel filter bank `model.mel_filters`
//! (f32 `[n_mels, 201]`) is computed with [`crate::audio::mel::slaney_filters`].

pub mod reader;
pub mod vocab;

use super::{requant, ImportOptions};
use crate::audio::mel::{slaney_filters, N_FFT};
use crate::dtype::DType;
use crate::error::ImportError;
use crate::loader::config::{Architecture, Config, TokenizerConfig};
use crate::loader::writer::{ModelWriter, PendingTensor};
use reader::{Ct2Model, Ct2Type, Variable};
use serde_json::Value;
use std::borrow::Cow;
use std::path::Path;

/// True when `dir` looks like a CTranslate2 model folder (`model.bin` + `config.json`).
pub fn is_ct2_folder(dir: &Path) -> bool {
    dir.join("model.bin").is_file() && dir.join("config.json").is_file()
}

/// One output tensor: its canonical name and the rows of a CTranslate2 variable.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// Canonical (Hugging Face Whisper) name.
    pub name: String,
    /// Source variable name.
    pub source: String,
    /// Output shape.
    pub shape: Vec<usize>,
    /// Byte range inside `model.bin`.
    pub data: std::ops::Range<usize>,
    /// Element type.
    pub dtype: Ct2Type,
}

fn format_err(path: &Path, reason: impl Into<String>) -> ImportError {
    ImportError::Format {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn unsupported(path: &Path, reason: impl Into<String>) -> ImportError {
    ImportError::Unsupported {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Canonical names of a CTranslate2 Whisper variable, with the number of equal row
/// parts it splits into (1 = no split). `None` for unknown names.
fn canonical(name: &str) -> Option<Vec<String>> {
    let (base, param) = name.rsplit_once('/')?;
    let hf_param = match param {
        "weight" | "gamma" => "weight",
        "bias" | "beta" => "bias",
        "encodings" => "weight",
        _ => return None,
    };
    let one = |s: &str| Some(vec![format!("{s}.{hf_param}")]);
    match base {
        "encoder/conv1" => return one("model.encoder.conv1"),
        "encoder/conv2" => return one("model.encoder.conv2"),
        "encoder/position_encodings" => return one("model.encoder.embed_positions"),
        "encoder/layer_norm" => return one("model.encoder.layer_norm"),
        "decoder/embeddings" => return one("model.decoder.embed_tokens"),
        "decoder/position_encodings" => return one("model.decoder.embed_positions"),
        "decoder/layer_norm" => return one("model.decoder.layer_norm"),
        "decoder/projection" => return one("proj_out"),
        _ => {}
    }
    let (tower, rest) = base.split_once('/')?;
    if tower != "encoder" && tower != "decoder" {
        return None;
    }
    let rest = rest.strip_prefix("layer_")?;
    let (idx, part) = rest.split_once('/')?;
    let idx: usize = idx.parse().ok()?;
    let l = format!("model.{tower}.layers.{idx}");
    let names = |parts: &[&str]| {
        Some(
            parts
                .iter()
                .map(|p| format!("{l}.{p}.{hf_param}"))
                .collect(),
        )
    };
    match (tower, part) {
        (_, "self_attention/layer_norm") => names(&["self_attn_layer_norm"]),
        (_, "self_attention/linear_0") => {
            names(&["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"])
        }
        (_, "self_attention/linear_1") => names(&["self_attn.out_proj"]),
        (_, "ffn/layer_norm") => names(&["final_layer_norm"]),
        (_, "ffn/linear_0") => names(&["fc1"]),
        (_, "ffn/linear_1") => names(&["fc2"]),
        ("decoder", "attention/layer_norm") => names(&["encoder_attn_layer_norm"]),
        ("decoder", "attention/linear_0") => names(&["encoder_attn.q_proj"]),
        ("decoder", "attention/linear_1") => names(&["encoder_attn.k_proj", "encoder_attn.v_proj"]),
        ("decoder", "attention/linear_2") => names(&["encoder_attn.out_proj"]),
        _ => None,
    }
}

/// Scalar config variables of the Whisper spec (read, not written as tensors);
/// the last three are written by CTranslate2 4.x's decoder spec (off for Whisper).
const SCALARS: [&str; 12] = [
    "num_heads",
    "pre_norm",
    "activation",
    "alibi",
    "alignment_heads",
    "alignment_layer",
    "scale_embeddings",
    "start_from_zero_embedding",
    "embeddings_merge",
    "alibi_use_positive_positions",
    "scale_alibi",
    "sliding_window",
];

/// Maps every tensor variable of `m` to canonical names (splitting fused ones);
/// an unknown variable or a quantized (int8/int16) weight is an error.
pub fn map_variables(path: &Path, m: &Ct2Model) -> Result<Vec<Mapped>, ImportError> {
    let mut out = Vec::new();
    for v in &m.variables {
        let leaf = v.name.rsplit('/').next().unwrap_or("");
        if v.shape.is_empty() && SCALARS.contains(&leaf) {
            continue;
        }
        let names = canonical(&v.name).ok_or_else(|| {
            unsupported(
                path,
                format!(
                    "CTranslate2 variable `{}` is not part of WhisperSpec",
                    v.name
                ),
            )
        })?;
        if !matches!(v.dtype, Ct2Type::F32 | Ct2Type::F16 | Ct2Type::BF16) {
            return Err(unsupported(
                path,
                format!(
                    "variable `{}` is {:?}: quantized CTranslate2 models are not supported \
                     (convert with --quantization float16 or float32)",
                    v.name, v.dtype
                ),
            ));
        }
        out.extend(split(path, v, &names)?);
    }
    for (alias, target) in &m.aliases {
        if alias == "decoder/projection/weight" && target == "decoder/embeddings/weight" {
            continue;
        }
        return Err(unsupported(
            path,
            format!("CTranslate2 alias `{alias}` -> `{target}` is not part of WhisperSpec"),
        ));
    }
    Ok(out)
}

fn split(path: &Path, v: &Variable, names: &[String]) -> Result<Vec<Mapped>, ImportError> {
    let parts = names.len();
    let rows = v.shape.first().copied().unwrap_or(0);
    if parts == 1 {
        return Ok(vec![Mapped {
            name: names[0].clone(),
            source: v.name.clone(),
            shape: v.shape.clone(),
            data: v.data.clone(),
            dtype: v.dtype,
        }]);
    }
    if rows == 0 || rows % parts != 0 {
        return Err(format_err(
            path,
            format!(
                "fused variable `{}` has {rows} rows, not a multiple of {parts}",
                v.name
            ),
        ));
    }
    let part_bytes = v.data.len() / parts;
    let mut shape = v.shape.clone();
    shape[0] = rows / parts;
    Ok(names
        .iter()
        .enumerate()
        .map(|(i, n)| Mapped {
            name: n.clone(),
            source: v.name.clone(),
            shape: shape.clone(),
            data: v.data.start + i * part_bytes..v.data.start + (i + 1) * part_bytes,
            dtype: v.dtype,
        })
        .collect())
}

fn scalar_int(bytes: &[u8], m: &Ct2Model, name: &str) -> Option<i64> {
    let v = m.get(name)?;
    let b = bytes.get(v.data.clone())?;
    Some(match v.dtype {
        Ct2Type::I8 => i64::from(*b.first()? as i8),
        Ct2Type::I16 => i64::from(i16::from_le_bytes(b.get(..2)?.try_into().ok()?)),
        Ct2Type::I32 => i64::from(i32::from_le_bytes(b.get(..4)?.try_into().ok()?)),
        _ => return None,
    })
}

fn ids(cfg: &Value, key: &str) -> Vec<i64> {
    cfg.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

/// The cross-attention heads that follow the word timing (`[layer, head]` pairs): the
/// config's `alignment_heads` (written by CTranslate2's converter), or, when it lists
/// none, openai-whisper's default: every head of the last half of the decoder layers.
/// A pair outside the decoder is an error naming it.
fn alignment_heads(
    cfg: &Value,
    cfg_path: &Path,
    layers: usize,
    heads: usize,
) -> Result<Vec<(usize, usize)>, ImportError> {
    let mut listed = Vec::new();
    for p in (cfg.get("alignment_heads").and_then(Value::as_array))
        .into_iter()
        .flatten()
    {
        let pair = (p.as_array())
            .filter(|p| p.len() == 2)
            .and_then(|p| Some((p[0].as_u64()? as usize, p[1].as_u64()? as usize)))
            .filter(|&(l, h)| l < layers && h < heads)
            .ok_or_else(|| {
                format_err(
                    cfg_path,
                    format!(
                        "alignment_heads entry {p} is not a [layer, head] pair of the \
                         decoder ({layers} layers, {heads} heads)"
                    ),
                )
            })?;
        listed.push(pair);
    }
    if listed.is_empty() {
        listed = (layers / 2..layers)
            .flat_map(|l| (0..heads).map(move |h| (l, h)))
            .collect();
    }
    Ok(listed)
}

fn count_layers(m: &Ct2Model, tower: &str) -> usize {
    let prefix = format!("{tower}/layer_");
    m.variables
        .iter()
        .filter_map(|v| {
            v.name
                .strip_prefix(&prefix)?
                .split('/')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .map(|i| i + 1)
        .max()
        .unwrap_or(0)
}

/// Imports the CTranslate2 Whisper folder `source` into the `.model` file `out`.
pub fn import(source: &Path, out: &Path, opts: &ImportOptions) -> Result<(), ImportError> {
    let bin = source.join("model.bin");
    let file = std::fs::File::open(&bin).map_err(|e| ImportError::Io {
        path: bin.clone(),
        source: e,
    })?;
    // SAFETY: read-only mapping of the source file for the duration of the import.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| ImportError::Io {
        path: bin.clone(),
        source: e,
    })?;
    let bytes: &[u8] = &map;
    let m = reader::parse(&bin, bytes)?;
    if m.spec != "WhisperSpec" {
        return Err(unsupported(
            &bin,
            format!(
                "CTranslate2 spec `{}` (only WhisperSpec is imported)",
                m.spec
            ),
        ));
    }
    for (flag, want) in [
        ("decoder/pre_norm", Some(1)),
        ("decoder/scale_embeddings", Some(0)),
        ("decoder/alibi", Some(0)),
    ] {
        let got = scalar_int(bytes, &m, flag);
        if got.is_some() && got != want {
            return Err(unsupported(
                &bin,
                format!("{flag} = {got:?} differs from Whisper's {want:?}"),
            ));
        }
    }
    let cfg_path = source.join("config.json");
    let cfg: Value =
        serde_json::from_slice(&std::fs::read(&cfg_path).map_err(|e| ImportError::Io {
            path: cfg_path.clone(),
            source: e,
        })?)
        .map_err(|e| format_err(&cfg_path, format!("invalid JSON: {e}")))?;

    let mapped = map_variables(&bin, &m)?;
    let shape_of = |name: &str| {
        mapped
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.shape.clone())
            .ok_or_else(|| ImportError::MissingKey {
                path: bin.clone(),
                key: name.to_string(),
                hint: " (a WhisperSpec variable is missing)".into(),
            })
    };
    let dim = |name: &str, axis: usize| {
        shape_of(name)?.get(axis).copied().ok_or_else(|| {
            format_err(
                &bin,
                format!("variable `{name}` has fewer than {} dimensions", axis + 1),
            )
        })
    };
    let emb = "model.decoder.embed_tokens.weight";
    let (n_vocab, d_model) = (dim(emb, 0)?, dim(emb, 1)?);
    let n_mels = dim("model.encoder.conv1.weight", 1)?;
    let n_audio_ctx = dim("model.encoder.embed_positions.weight", 0)?;
    let n_text_ctx = dim("model.decoder.embed_positions.weight", 0)?;
    let ffn = dim("model.decoder.layers.0.fc1.weight", 0)?;
    let enc_ffn = dim("model.encoder.layers.0.fc1.weight", 0)?;
    let head_count = |tower: &str| {
        scalar_int(bytes, &m, &format!("{tower}/num_heads"))
            .filter(|&h| h > 0)
            .map(|h| h as usize)
            .ok_or_else(|| ImportError::MissingKey {
                path: bin.clone(),
                key: format!("{tower}/num_heads"),
                hint: String::new(),
            })
    };
    let (dec_heads, enc_heads) = (head_count("decoder")?, head_count("encoder")?);

    let vocab = vocab::read(source, n_vocab)?;
    let id_of = |piece: &str| vocab.tokens.iter().position(|t| t == piece);
    let need_id = |piece: &str| {
        id_of(piece).ok_or_else(|| ImportError::MissingKey {
            path: source.to_path_buf(),
            key: piece.to_string(),
            hint: " (a Whisper special token is missing from the vocabulary)".into(),
        })
    };
    let eot = need_id("<|endoftext|>")?;
    let sot = need_id("<|startoftranscript|>")?;
    let no_ts = need_id("<|notimestamps|>")?;
    let no_speech = id_of("<|nospeech|>").or_else(|| id_of("<|nocaptions|>"));
    let lang_ids: Vec<i64> = (sot + 1..n_vocab)
        .take_while(|&i| {
            let t = &vocab.tokens[i];
            t.len() <= 10 && t.starts_with("<|") && t.ends_with("|>") && {
                let code = &t[2..t.len() - 2];
                !code.is_empty()
                    && code.chars().all(|c| c.is_ascii_lowercase())
                    && code != "translate"
                    && code != "transcribe"
            }
        })
        .map(|i| i as i64)
        .collect();
    // `.en` models: the vocabulary has language tokens, but only 51864 rows.
    let multilingual = n_vocab >= 51865;

    let mut extra = toml::Table::new();
    let mut put = |k: &str, v: toml::Value| {
        extra.insert(k.to_string(), v);
    };
    let int = |v: usize| toml::Value::Integer(v as i64);
    let list = |v: &[i64]| toml::Value::Array(v.iter().map(|&x| toml::Value::Integer(x)).collect());
    put("n_mels", int(n_mels));
    put("encoder_layers", int(count_layers(&m, "encoder")));
    put("encoder_attention_heads", int(enc_heads));
    put("encoder_ffn_dim", int(enc_ffn));
    put("max_source_positions", int(n_audio_ctx));
    put("multilingual", toml::Value::Boolean(multilingual));
    put("eot_token_id", int(eot));
    put("sot_token_id", int(sot));
    put("no_timestamps_token_id", int(no_ts));
    put("timestamp_begin", int(no_ts + 1));
    for (key, piece) in [
        ("translate_token_id", "<|translate|>"),
        ("transcribe_token_id", "<|transcribe|>"),
        ("sot_prev_token_id", "<|startofprev|>"),
        ("sot_lm_token_id", "<|startoflm|>"),
    ] {
        put(key, int(need_id(piece)?));
    }
    if let Some(ns) = no_speech {
        put("no_speech_token_id", int(ns));
    }
    put("lang_token_ids", list(&lang_ids));
    put("suppress_tokens", list(&ids(&cfg, "suppress_ids")));
    put(
        "begin_suppress_tokens",
        list(&ids(&cfg, "suppress_ids_begin")),
    );
    let dec_layers = count_layers(&m, "decoder");
    put(
        "alignment_heads",
        toml::Value::Array(
            alignment_heads(&cfg, &cfg_path, dec_layers, dec_heads)?
                .into_iter()
                .map(|(l, h)| list(&[l as i64, h as i64]))
                .collect(),
        ),
    );

    let architecture = Architecture {
        hidden_size: Some(d_model),
        num_attention_heads: Some(dec_heads),
        num_hidden_layers: Some(dec_layers),
        intermediate_size: Some(ffn),
        vocab_size: Some(n_vocab),
        max_position_embeddings: Some(n_text_ctx),
        layer_norm_eps: Some(1e-5),
        hidden_act: Some("gelu".into()),
        tie_word_embeddings: Some(!mapped.iter().any(|t| t.name == "proj_out.weight")),
        extra,
        ..Default::default()
    };

    let name = opts.name.clone().unwrap_or_else(|| {
        std::fs::canonicalize(source)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "whisper".into())
    });
    let mut writer = ModelWriter::new(name.clone());
    let mut parameters = 0u64;
    for t in &mapped {
        parameters += t.shape.iter().product::<usize>() as u64;
        let dtype = match t.dtype {
            Ct2Type::F32 => DType::F32,
            Ct2Type::F16 => DType::F16,
            _ => DType::BF16,
        };
        let (dtype, data) = requant::apply(
            &bin,
            &t.name,
            &t.shape,
            dtype,
            Cow::Borrowed(&bytes[t.data.clone()]),
            opts.quant,
        )?;
        writer.add_tensor(PendingTensor {
            name: t.name.clone(),
            shape: t.shape.clone(),
            dtype,
            scale: None,
            data,
        })?;
    }
    let filters = slaney_filters(crate::audio::SAMPLE_RATE, N_FFT, n_mels);
    writer.add_tensor(PendingTensor {
        name: "model.mel_filters".into(),
        shape: vec![n_mels, N_FFT / 2 + 1],
        dtype: DType::F32,
        scale: None,
        data: Cow::Owned(bytemuck::cast_slice(&filters).to_vec()),
    })?;
    let config = Config {
        model_type: "whisper".into(),
        parameters: Some(parameters),
        license: None,
        architecture,
        tokenizer: Some(TokenizerConfig {
            kind: "bpe".into(),
            pre: Some("gpt2".into()),
            eos_token_ids: vec![eot as u32],
            add_bos: Some(false),
            add_eos: Some(false),
            ..Default::default()
        }),
        sampling: None,
        ..Default::default()
    };
    writer.set_config(&config)?;
    writer.set_section("vocab", vocab.to_toml());
    writer.set_section(
        "card",
        format!(
            "# {name}\n\nWhisper ({}) imported by cyb-llm from a CTranslate2 folder \
             (binary version {}, {} revision {}).\n",
            if multilingual {
                "multilingual"
            } else {
                "English-only"
            },
            m.binary_version,
            m.spec,
            m.revision
        ),
    );
    if !opts.no_graph {
        crate::graph::write_graph_section(&mut writer, &config);
    }
    writer.write(out)
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn names_and_splits() {
        assert_eq!(
            canonical("encoder/layer_3/self_attention/linear_0/bias").unwrap(),
            vec![
                "model.encoder.layers.3.self_attn.q_proj.bias",
                "model.encoder.layers.3.self_attn.k_proj.bias",
                "model.encoder.layers.3.self_attn.v_proj.bias"
            ]
        );
        assert_eq!(
            canonical("decoder/layer_0/attention/linear_1/weight").unwrap(),
            vec![
                "model.decoder.layers.0.encoder_attn.k_proj.weight",
                "model.decoder.layers.0.encoder_attn.v_proj.weight"
            ]
        );
        assert_eq!(
            canonical("decoder/layer_1/ffn/layer_norm/gamma").unwrap(),
            vec!["model.decoder.layers.1.final_layer_norm.weight"]
        );
        assert!(canonical("encoder/layer_0/attention/linear_0/weight").is_none());
        assert!(canonical("decoder/something/weight").is_none());
    }
}
