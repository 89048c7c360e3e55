//! `config.json` → the `config` section's model type and `[architecture]`, per model_type.

use super::json::Json;
use crate::error::ImportError;
use crate::loader::config::Architecture;
use serde_json::Value;
use std::path::Path;

/// The curated family an imported model_type belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Decoder-only LLM (llama, mistral, qwen2, qwen3, gemma3).
    Llama,
    /// BERT encoder.
    Bert,
}

/// What the importer needs from `config.json`.
#[derive(Debug, Clone)]
pub struct Arch {
    /// The family.
    pub family: Kind,
    /// `model_type` as written to the `.model` file.
    pub model_type: String,
    /// `model_type` as the source folder says.
    pub source_model_type: String,
    /// `[architecture]`; `tie_word_embeddings` is settled later from the tensors.
    pub architecture: Architecture,
    /// Rows of the token embedding.
    pub vocab_size: usize,
    /// HF Gemma norms compute `normed * (1 + w)`: store `1 + w`.
    pub gemma_norms: bool,
    /// Rows of q_proj, of k_proj / v_proj, of gate_proj / up_proj (for splitting fused tensors).
    pub q_rows: usize,
    /// See `q_rows`.
    pub kv_rows: usize,
    /// See `q_rows`.
    pub ffn_rows: usize,
    /// `tie_word_embeddings` as declared, or the model_type's default.
    pub tie_declared: bool,
}

/// The model_types this importer knows.
const SUPPORTED: &str =
    "llama, mistral, qwen2, qwen3, gemma3, gemma3_text, bert, roberta, xlm-roberta, distilbert";

/// Maps `config.json` of the folder `dir`.
pub fn map(dir: &Path, cfg: &Json) -> Result<Arch, ImportError> {
    let model_type = cfg
        .str("model_type")?
        .ok_or_else(|| cfg.missing("model_type", &format!(" (supported: {SUPPORTED})")))?
        .to_string();
    match model_type.as_str() {
        "llama" | "mistral" | "qwen2" | "qwen3" => llama(cfg, &model_type, &model_type),
        "gemma3_text" => llama(cfg, "gemma3", &model_type),
        "gemma3" => match cfg.object("text_config") {
            Some(text) => llama(&text, "gemma3", &model_type),
            None => llama(cfg, "gemma3", &model_type),
        },
        "bert" | "roberta" | "xlm-roberta" => bert(dir, cfg, &model_type),
        "distilbert" => distilbert(dir, cfg),
        other => Err(ImportError::Unsupported {
            path: cfg.path.clone(),
            reason: format!("model_type `{other}` is not supported by the Hugging Face importer (supported: {SUPPORTED})"),
        }),
    }
}

fn put(a: &mut Architecture, key: &str, v: impl Into<toml::Value>) {
    a.extra.insert(key.to_string(), v.into());
}

/// A JSON scalar as TOML (numbers, strings, booleans); other values are skipped.
fn scalar(v: &Value) -> Option<toml::Value> {
    match v {
        Value::Bool(b) => Some(toml::Value::Boolean(*b)),
        Value::String(s) => Some(toml::Value::String(s.clone())),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Some(toml::Value::Integer(i)),
            None => n.as_f64().map(toml::Value::Float),
        },
        _ => None,
    }
}

/// `rope_scaling` (transformers 4) or `rope_parameters` (transformers 5, maybe per layer
/// type): the scaling table with `type`, or `None` for plain RoPE.
fn rope_scaling(cfg: &Json) -> Option<toml::Table> {
    let params = cfg.object("rope_parameters");
    let src = cfg
        .object("rope_scaling")
        .or_else(|| params.as_ref().and_then(|p| p.object("full_attention")))
        .or(params)?;
    let obj = src.value().as_object()?;
    let kind = obj
        .get("rope_type")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    if kind == "default" {
        return None;
    }
    let mut t = toml::Table::new();
    t.insert("type".into(), toml::Value::String(kind.to_string()));
    for (k, v) in obj {
        if !matches!(k.as_str(), "rope_type" | "type" | "rope_theta") {
            if let Some(v) = scalar(v) {
                t.insert(k.clone(), v);
            }
        }
    }
    Some(t)
}

/// RoPE base of full-attention layers and of sliding layers (gemma3), from either config style.
fn rope_thetas(cfg: &Json, default: f64) -> Result<(f64, Option<f64>), ImportError> {
    let params = cfg.object("rope_parameters");
    let theta_of = |j: &Option<Json>| -> Result<Option<f64>, ImportError> {
        match j {
            Some(j) => j.f64("rope_theta"),
            None => Ok(None),
        }
    };
    let full = match cfg.f64("rope_theta")? {
        Some(t) => Some(t),
        None => match theta_of(&params)? {
            Some(t) => Some(t),
            None => theta_of(&params.as_ref().and_then(|p| p.object("full_attention")))?,
        },
    };
    let local = match cfg.f64("rope_local_base_freq")? {
        Some(t) => Some(t),
        None => theta_of(&params.as_ref().and_then(|p| p.object("sliding_attention")))?,
    };
    Ok((full.unwrap_or(default), local))
}

fn llama(cfg: &Json, model_type: &str, source_type: &str) -> Result<Arch, ImportError> {
    let gemma = model_type == "gemma3";
    let hidden = cfg.req_usize("hidden_size")?;
    let heads = cfg.req_usize("num_attention_heads")?;
    let layers = cfg.req_usize("num_hidden_layers")?;
    let inter = cfg.req_usize("intermediate_size")?;
    let vocab = cfg.req_usize("vocab_size")?;
    let kv_heads = cfg.usize("num_key_value_heads")?.unwrap_or(heads);
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(cfg.bad(
            "num_key_value_heads",
            &format!("a divisor of num_attention_heads ({heads})"),
        ));
    }
    let head_dim_key = cfg.usize("head_dim")?;
    let head_dim = match head_dim_key {
        Some(d) => d,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(cfg.missing(
                "head_dim",
                " (hidden_size is not a multiple of num_attention_heads)",
            ))
        }
    };
    let q_rows = heads
        .checked_mul(head_dim)
        .filter(|&r| r > 0 && r.checked_mul(3).is_some())
        .ok_or_else(|| {
            cfg.bad(
                "head_dim",
                &format!(
                    "a positive integer whose product with num_attention_heads ({heads}) fits"
                ),
            )
        })?;
    let (theta, local_theta) = rope_thetas(cfg, if gemma { 1_000_000.0 } else { 10_000.0 })?;
    let act_key = if gemma && cfg.get("hidden_activation").is_some() {
        "hidden_activation"
    } else {
        "hidden_act"
    };
    let act = cfg
        .str(act_key)?
        .unwrap_or(if gemma { "gelu_pytorch_tanh" } else { "silu" });
    if !matches!(act, "silu" | "gelu" | "gelu_pytorch_tanh") {
        return Err(cfg.bad(act_key, "one of silu, gelu, gelu_pytorch_tanh"));
    }
    let tie = cfg.bool("tie_word_embeddings")?.unwrap_or(gemma);
    let mut a = Architecture {
        hidden_size: Some(hidden),
        num_attention_heads: Some(heads),
        num_key_value_heads: Some(kv_heads),
        head_dim: head_dim_key,
        num_hidden_layers: Some(layers),
        intermediate_size: Some(inter),
        vocab_size: Some(vocab),
        max_position_embeddings: cfg.usize("max_position_embeddings")?,
        rope_theta: Some(theta),
        rope_style: Some("neox".into()),
        rms_norm_eps: Some(cfg.f64("rms_norm_eps")?.unwrap_or(1e-6)),
        hidden_act: Some(act.to_string()),
        ..Default::default()
    };
    let uses_window = match model_type {
        "qwen2" | "qwen3" => cfg.bool("use_sliding_window")?.unwrap_or(false),
        _ => true,
    };
    if let (Some(w), true) = (cfg.usize("sliding_window")?, uses_window) {
        put(&mut a, "sliding_window", w as i64);
    }
    if uses_window {
        if let Some(types) = cfg.get("layer_types") {
            let list = types
                .as_array()
                .filter(|l| l.len() == layers)
                .and_then(|l| {
                    l.iter()
                        .map(|t| t.as_str().map(String::from))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| cfg.bad("layer_types", &format!("a list of {layers} strings")))?;
            if let Some(bad) = list
                .iter()
                .find(|t| !matches!(t.as_str(), "sliding_attention" | "full_attention"))
            {
                return Err(cfg.bad(
                    "layer_types",
                    &format!("sliding_attention / full_attention entries, not `{bad}`"),
                ));
            }
            put(
                &mut a,
                "layer_types",
                toml::Value::Array(list.into_iter().map(toml::Value::String).collect()),
            );
        } else if gemma {
            let key = if cfg.get("sliding_window_pattern").is_some() {
                "sliding_window_pattern"
            } else {
                "_sliding_window_pattern"
            };
            if let Some(p) = cfg.usize(key)? {
                put(&mut a, "sliding_window_pattern", p as i64);
            }
        }
    }
    if let Some(t) = local_theta.filter(|_| gemma) {
        put(&mut a, "rope_local_base_freq", t);
    }
    for key in [
        "query_pre_attn_scalar",
        "attn_logit_softcapping",
        "final_logit_softcapping",
        "partial_rotary_factor",
    ] {
        if let Some(v) = cfg.f64(key)? {
            put(&mut a, key, v);
        }
    }
    if let Some(t) = rope_scaling(cfg) {
        put(&mut a, "rope_scaling", toml::Value::Table(t));
    }
    Ok(Arch {
        family: Kind::Llama,
        model_type: model_type.to_string(),
        source_model_type: source_type.to_string(),
        architecture: a,
        vocab_size: vocab,
        gemma_norms: gemma,
        q_rows,
        kv_rows: kv_heads * head_dim,
        ffn_rows: inter,
        tie_declared: tie,
    })
}

/// Pooling and normalization of a sentence-transformers folder (`modules.json`).
fn sentence_transformers(dir: &Path, a: &mut Architecture) -> Result<(), ImportError> {
    // The input limit sentence-transformers truncates at (e.g. 256 for all-MiniLM-L6-v2).
    if let Some(st) = Json::read_opt(&dir.join("sentence_bert_config.json"))? {
        if let Some(n) = st.usize("max_seq_length")? {
            put(a, "max_seq_length", n as i64);
        }
    }
    let path = dir.join("modules.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let bad = |reason: String| ImportError::Format {
        path: path.clone(),
        reason,
    };
    let modules: Vec<Value> =
        serde_json::from_str(&text).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    for m in &modules {
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "sentence_transformers.models.Transformer" => {}
            "sentence_transformers.models.Normalize" => put(a, "normalize", true),
            "sentence_transformers.models.Pooling" => {
                let sub = m.get("path").and_then(Value::as_str).unwrap_or("");
                let pcfg = Json::read(&dir.join(sub).join("config.json"))?;
                let modes: Vec<&str> = [
                    ("pooling_mode_cls_token", "cls"),
                    ("pooling_mode_mean_tokens", "mean"),
                    ("pooling_mode_max_tokens", "max"),
                    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
                    ("pooling_mode_weightedmean_tokens", "weightedmean"),
                    ("pooling_mode_lasttoken", "lasttoken"),
                ]
                .into_iter()
                .filter(|(k, _)| matches!(pcfg.get(k), Some(Value::Bool(true))))
                .map(|(_, m)| m)
                .collect();
                match modes.as_slice() {
                    [m @ ("cls" | "mean" | "max")] => put(a, "pooling", *m),
                    other => {
                        return Err(ImportError::Unsupported {
                            path: pcfg.path.clone(),
                            reason: format!(
                            "pooling modes {other:?}: exactly one of cls, mean, max is supported"
                        ),
                        })
                    }
                }
            }
            other => {
                return Err(ImportError::Unsupported {
                    path: path.clone(),
                    reason: format!(
                        "sentence-transformers module `{other}` has no equivalent in a .model file"
                    ),
                })
            }
        }
    }
    Ok(())
}

fn bert(dir: &Path, cfg: &Json, model_type: &str) -> Result<Arch, ImportError> {
    let hidden = cfg.req_usize("hidden_size")?;
    let heads = cfg.req_usize("num_attention_heads")?;
    let layers = cfg.req_usize("num_hidden_layers")?;
    let inter = cfg.req_usize("intermediate_size")?;
    let vocab = cfg.req_usize("vocab_size")?;
    let max_pos = cfg.req_usize("max_position_embeddings")?;
    if let Some(p) = cfg
        .str("position_embedding_type")?
        .filter(|p| *p != "absolute")
    {
        return Err(ImportError::Unsupported {
            path: cfg.path.clone(),
            reason: format!("position_embedding_type `{p}` (only absolute)"),
        });
    }
    let act = cfg.str("hidden_act")?.unwrap_or("gelu");
    let mut a = Architecture {
        hidden_size: Some(hidden),
        num_attention_heads: Some(heads),
        num_hidden_layers: Some(layers),
        intermediate_size: Some(inter),
        vocab_size: Some(vocab),
        max_position_embeddings: Some(max_pos),
        layer_norm_eps: Some(cfg.f64("layer_norm_eps")?.unwrap_or(1e-12)),
        hidden_act: Some(act.to_string()),
        ..Default::default()
    };
    put(
        &mut a,
        "type_vocab_size",
        cfg.usize("type_vocab_size")?.unwrap_or(2) as i64,
    );
    if let Some(p) = cfg.usize("pad_token_id")? {
        put(&mut a, "pad_token_id", p as i64);
    }
    encoder_arch(dir, cfg, a, model_type, vocab)
}

/// DistilBERT's `config.json` keys (`dim`, `n_heads`, `n_layers`, `hidden_dim`,
/// `activation`) as the BertStyle architecture; LayerNorm eps is fixed at 1e-12, there are
/// no token types, and `sinusoidal_pos_embds` needs nothing (the fixed table is stored in
/// the weights like a learned one).
fn distilbert(dir: &Path, cfg: &Json) -> Result<Arch, ImportError> {
    let vocab = cfg.req_usize("vocab_size")?;
    let hidden = cfg.req_usize("dim")?;
    let mut a = Architecture {
        hidden_size: Some(hidden),
        num_attention_heads: Some(cfg.req_usize("n_heads")?),
        num_hidden_layers: Some(cfg.req_usize("n_layers")?),
        intermediate_size: Some(cfg.req_usize("hidden_dim")?),
        vocab_size: Some(vocab),
        max_position_embeddings: Some(cfg.req_usize("max_position_embeddings")?),
        layer_norm_eps: Some(1e-12),
        hidden_act: Some(cfg.str("activation")?.unwrap_or("gelu").to_string()),
        ..Default::default()
    };
    if let Some(p) = cfg.usize("pad_token_id")? {
        put(&mut a, "pad_token_id", p as i64);
    }
    encoder_arch(dir, cfg, a, "distilbert", vocab)
}

/// The keys every BertStyle import shares: the classification head's labels and problem
/// type, the sentence-transformers settings; then the [`Arch`].
fn encoder_arch(
    dir: &Path,
    cfg: &Json,
    mut a: Architecture,
    model_type: &str,
    vocab: usize,
) -> Result<Arch, ImportError> {
    let (hidden, inter) = (a.hidden_size.unwrap_or(0), a.intermediate_size.unwrap_or(0));
    let classifier = cfg
        .get("architectures")
        .and_then(Value::as_array)
        .is_some_and(|l| {
            l.iter().any(|x| {
                x.as_str()
                    .is_some_and(|s| s.ends_with("ForSequenceClassification"))
            })
        });
    if classifier {
        if let Some(map) = cfg.get("id2label").and_then(Value::as_object) {
            let labels = (0..map.len())
                .map(|i| {
                    map.get(&i.to_string())
                        .and_then(Value::as_str)
                        .map(String::from)
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| cfg.bad("id2label", "a map of ids 0..n to label strings"))?;
            put(
                &mut a,
                "labels",
                toml::Value::Array(labels.into_iter().map(toml::Value::String).collect()),
            );
        }
        if let Some(p) = cfg.str("problem_type")? {
            put(&mut a, "problem_type", p);
        }
    }
    sentence_transformers(dir, &mut a)?;
    Ok(Arch {
        family: Kind::Bert,
        model_type: model_type.into(),
        source_model_type: model_type.into(),
        architecture: a,
        vocab_size: vocab,
        gemma_norms: false,
        q_rows: hidden,
        kv_rows: hidden,
        ffn_rows: inter,
        tie_declared: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Json {
        Json::parse(Path::new("config.json"), text).unwrap()
    }

    #[test]
    fn gemma3_transformers4_style_maps_rope_and_window_keys() {
        let cfg = json(
            r#"{"model_type": "gemma3_text", "hidden_size": 640, "num_attention_heads": 4,
            "num_key_value_heads": 1, "head_dim": 256, "num_hidden_layers": 18, "intermediate_size": 2048,
            "vocab_size": 262144, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
            "sliding_window": 512, "sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
            "final_logit_softcapping": null, "rope_scaling": null, "hidden_activation": "gelu_pytorch_tanh"}"#,
        );
        let a = map(Path::new("."), &cfg).unwrap();
        assert_eq!(a.model_type, "gemma3");
        assert!(a.gemma_norms && a.tie_declared);
        let arch = &a.architecture;
        assert_eq!(arch.rope_theta, Some(1e6));
        assert_eq!(arch.head_dim, Some(256));
        assert_eq!(arch.extra["rope_local_base_freq"].as_float(), Some(1e4));
        assert_eq!(arch.extra["sliding_window_pattern"].as_integer(), Some(6));
        assert_eq!(arch.extra["sliding_window"].as_integer(), Some(512));
        assert_eq!(arch.extra["query_pre_attn_scalar"].as_float(), Some(256.0));
        assert!(!arch.extra.contains_key("final_logit_softcapping"));
        assert!(!arch.extra.contains_key("rope_scaling"));
        assert_eq!((a.q_rows, a.kv_rows), (1024, 256));
    }

    #[test]
    fn multimodal_gemma3_reads_text_config_and_scaling() {
        let cfg = json(
            r#"{"model_type": "gemma3", "text_config": {"hidden_size": 64, "num_attention_heads": 2,
            "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 10,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}"#,
        );
        let a = map(Path::new("."), &cfg).unwrap();
        let t = a.architecture.extra["rope_scaling"].as_table().unwrap();
        assert_eq!(t["type"].as_str(), Some("linear"));
        assert_eq!(t["factor"].as_float(), Some(8.0));
        let cfg = json(r#"{"model_type": "gemma3", "text_config": {"hidden_size": 64}}"#);
        match map(Path::new("."), &cfg).unwrap_err() {
            ImportError::MissingKey { key, .. } => {
                assert_eq!(key, "text_config.num_attention_heads")
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn unknown_model_type_and_bad_values_are_named() {
        let e = map(Path::new("."), &json(r#"{"model_type": "mamba"}"#)).unwrap_err();
        assert!(
            matches!(e, ImportError::Unsupported { .. }) && e.to_string().contains("`mamba`"),
            "{e}"
        );
        let e = map(Path::new("."), &json(r#"{"hidden_size": 4}"#)).unwrap_err();
        assert!(
            matches!(&e, ImportError::MissingKey { key, .. } if key == "model_type"),
            "{e}"
        );
        let cfg = json(
            r#"{"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 3,
            "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 4}"#,
        );
        let e = map(Path::new("."), &cfg).unwrap_err();
        assert!(e.to_string().contains("num_key_value_heads"), "{e}");
        let cfg = json(r#"{"model_type": "qwen2", "hidden_size": "big"}"#);
        assert!(map(Path::new("."), &cfg)
            .unwrap_err()
            .to_string()
            .contains("`hidden_size` must be"));
    }
}
