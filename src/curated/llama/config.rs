//! The LlamaStyle hyper-parameters, read from the `config` section (families.md).

use crate::backend::RopeStyle;
use crate::error::ExecutionError;
use crate::loader::Config;

/// The MLP activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `silu` (SwiGLU MLP).
    Silu,
    /// `gelu_pytorch_tanh` / `gelu_tanh` (Gemma's GeGLU with the tanh GELU).
    GeluTanh,
    /// `gelu` (exact erf GELU).
    Gelu,
}

/// Everything the LlamaStyle forward needs from `config`.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// `model_type`.
    pub model_type: String,
    /// Residual width.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (GQA when fewer than `heads`).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Decoder layers.
    pub layers: usize,
    /// MLP width.
    pub intermediate: usize,
    /// Vocabulary size (rows of the embedding).
    pub vocab: usize,
    /// `max_position_embeddings` (the context cap).
    pub max_positions: usize,
    /// RMSNorm epsilon.
    pub eps: f32,
    /// MLP activation.
    pub act: Activation,
    /// RoPE pairing.
    pub rope_style: RopeStyle,
    /// Rotated dimensions per head (`partial_rotary_factor * head_dim`).
    pub rot_dim: usize,
    /// `inv_freq` of full-attention layers (scaled variants applied).
    pub inv_freq_global: Vec<f64>,
    /// `inv_freq` of sliding layers (`rope_local_base_freq`; same as global when absent).
    pub inv_freq_local: Vec<f64>,
    /// Sliding window per layer (`None` = full causal attention).
    pub sliding: Vec<Option<usize>>,
    /// Embeddings are multiplied by `sqrt(hidden)` (Gemma).
    pub embed_scale: Option<f32>,
    /// Sandwich norms around attention and MLP (Gemma 2/3).
    pub sandwich: bool,
    /// Attention score scale.
    pub attn_scale: f32,
    /// `final_logit_softcapping`.
    pub final_softcap: Option<f32>,
}

fn invalid(field: &str, reason: impl Into<String>) -> ExecutionError {
    ExecutionError::InvalidConfig {
        field: field.to_string(),
        reason: reason.into(),
    }
}

fn need(v: Option<usize>, field: &str) -> Result<usize, ExecutionError> {
    v.filter(|&x| x > 0)
        .ok_or_else(|| invalid(&format!("architecture.{field}"), "required and must be > 0"))
}

fn extra_f64(config: &Config, key: &str) -> Option<f64> {
    let v = config.architecture.extra.get(key)?;
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
}

fn extra_usize(config: &Config, key: &str) -> Option<usize> {
    config
        .architecture
        .extra
        .get(key)?
        .as_integer()
        .and_then(|i| usize::try_from(i).ok())
}

/// Applies `rope_scaling` (linear, llama3) to `inv_freq`.
fn scale_inv_freq(config: &Config, inv_freq: &mut [f64]) -> Result<(), ExecutionError> {
    let Some(table) = config
        .architecture
        .extra
        .get("rope_scaling")
        .and_then(|v| v.as_table())
    else {
        return Ok(());
    };
    let num = |k: &str| {
        table
            .get(k)
            .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
    };
    let kind = table
        .get("type")
        .or_else(|| table.get("rope_type"))
        .and_then(|v| v.as_str())
        .unwrap_or("default");
    let factor = num("factor").unwrap_or(1.0);
    match kind {
        "default" | "none" => {}
        "linear" => {
            if factor <= 0.0 {
                return Err(invalid("architecture.rope_scaling.factor", "must be > 0"));
            }
            inv_freq.iter_mut().for_each(|f| *f /= factor);
        }
        "llama3" => {
            let low = num("low_freq_factor").unwrap_or(1.0);
            let high = num("high_freq_factor").unwrap_or(4.0);
            let original = num("original_max_position_embeddings").unwrap_or(8192.0);
            let low_wavelen = original / low;
            let high_wavelen = original / high;
            for f in inv_freq.iter_mut() {
                let wavelen = 2.0 * std::f64::consts::PI / *f;
                if wavelen > low_wavelen {
                    *f /= factor;
                } else if wavelen >= high_wavelen && high != low {
                    let smooth = (original / wavelen - low) / (high - low);
                    *f = (1.0 - smooth) * *f / factor + smooth * *f;
                }
            }
        }
        other => {
            return Err(invalid(
                "architecture.rope_scaling.type",
                format!("'{other}' is not supported (linear, llama3)"),
            ))
        }
    }
    Ok(())
}

/// Largest head dimension accepted (real models use 64 to 256; the RoPE tables
/// are sized by it before any tensor is checked against the config).
pub const MAX_HEAD_DIM: usize = 1 << 16;

impl LlamaConfig {
    /// Reads and checks the LlamaStyle keys of `config`.
    pub fn from_config(config: &Config) -> Result<LlamaConfig, ExecutionError> {
        let a = &config.architecture;
        let mt = config.model_type.as_str();
        let gemma = mt.starts_with("gemma");
        let sandwich = mt.starts_with("gemma2") || mt.starts_with("gemma3");
        let hidden = need(a.hidden_size, "hidden_size")?;
        let heads = need(a.num_attention_heads, "num_attention_heads")?;
        let kv_heads = need(
            a.num_key_value_heads.or(a.num_attention_heads),
            "num_key_value_heads",
        )?;
        if heads % kv_heads != 0 {
            return Err(invalid(
                "architecture.num_key_value_heads",
                format!("{kv_heads} does not divide num_attention_heads {heads}"),
            ));
        }
        let head_dim = need(a.head_dim(), "head_dim")?;
        if head_dim > MAX_HEAD_DIM {
            return Err(invalid(
                "architecture.head_dim",
                format!("{head_dim} is more than {MAX_HEAD_DIM} (damaged config?)"),
            ));
        }
        let layers = need(a.num_hidden_layers, "num_hidden_layers")?;
        let intermediate = need(a.intermediate_size, "intermediate_size")?;
        let vocab = need(a.vocab_size, "vocab_size")?;
        let max_positions = a.max_position_embeddings.filter(|&m| m > 0).unwrap_or(4096);
        let eps = a.rms_norm_eps().unwrap_or(if gemma { 1e-6 } else { 1e-5 }) as f32;
        let act = match a.hidden_act.as_deref() {
            None if gemma => Activation::GeluTanh,
            None | Some("silu") | Some("swish") => Activation::Silu,
            Some("gelu_pytorch_tanh") | Some("gelu_tanh") | Some("gelu_new") => {
                Activation::GeluTanh
            }
            Some("gelu") => Activation::Gelu,
            Some(other) => {
                return Err(invalid(
                    "architecture.hidden_act",
                    format!("'{other}' is not supported (silu, gelu, gelu_pytorch_tanh)"),
                ))
            }
        };
        let rope_style = match a.rope_style.as_deref() {
            None | Some("neox") => RopeStyle::Neox,
            Some("normal") => RopeStyle::Normal,
            Some(other) => {
                return Err(invalid(
                    "architecture.rope_style",
                    format!("'{other}' is not neox or normal"),
                ))
            }
        };
        let partial = extra_f64(config, "partial_rotary_factor").unwrap_or(1.0);
        let rot_dim = ((head_dim as f64 * partial).round() as usize) & !1;
        if rot_dim == 0 || rot_dim > head_dim {
            return Err(invalid(
                "architecture.partial_rotary_factor",
                format!("{partial} gives {rot_dim} rotated dims of {head_dim}"),
            ));
        }
        let theta = a.rope_theta.unwrap_or(10000.0);
        if theta <= 0.0 {
            return Err(invalid("architecture.rope_theta", "must be > 0"));
        }
        let mut inv_freq_global = crate::backend::rope_inv_freq(rot_dim, theta);
        scale_inv_freq(config, &mut inv_freq_global)?;
        let inv_freq_local = match extra_f64(config, "rope_local_base_freq") {
            Some(local) if local > 0.0 => crate::backend::rope_inv_freq(rot_dim, local),
            _ => inv_freq_global.clone(),
        };
        let window = extra_usize(config, "sliding_window").filter(|&w| w > 0);
        let sliding = match (window, a.extra.get("layer_types")) {
            (_, Some(types)) => {
                let types = types.as_array().ok_or_else(|| {
                    invalid("architecture.layer_types", "must be an array of strings")
                })?;
                if types.len() != layers {
                    return Err(invalid(
                        "architecture.layer_types",
                        format!("{} entries for {layers} layers", types.len()),
                    ));
                }
                types
                    .iter()
                    .map(|t| match t.as_str() {
                        Some("full_attention") => Ok(None),
                        Some("sliding_attention") => window.map(Some).ok_or_else(|| {
                            invalid(
                                "architecture.sliding_window",
                                "required by sliding_attention layers",
                            )
                        }),
                        _ => Err(invalid(
                            "architecture.layer_types",
                            format!("unknown layer type {t}"),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            (Some(w), None) => match extra_usize(config, "sliding_window_pattern") {
                Some(n) if n > 0 => (0..layers)
                    .map(|i| ((i + 1) % n != 0).then_some(w))
                    .collect(),
                _ if mt == "mistral" => vec![Some(w); layers],
                _ => vec![None; layers],
            },
            (None, None) => vec![None; layers],
        };
        let attn_scale = match extra_f64(config, "query_pre_attn_scalar") {
            Some(s) if s > 0.0 => (1.0 / s.sqrt()) as f32,
            Some(_) => return Err(invalid("architecture.query_pre_attn_scalar", "must be > 0")),
            None => 1.0 / (head_dim as f32).sqrt(),
        };
        if extra_f64(config, "attn_logit_softcapping").is_some_and(|c| c > 0.0) {
            return Err(invalid(
                "architecture.attn_logit_softcapping",
                "attention logit soft-capping (gemma2) is not supported by the LlamaStyle family yet",
            ));
        }
        let final_softcap = extra_f64(config, "final_logit_softcapping")
            .filter(|&c| c > 0.0)
            .map(|c| c as f32);
        Ok(LlamaConfig {
            model_type: config.model_type.clone(),
            hidden,
            heads,
            kv_heads,
            head_dim,
            layers,
            intermediate,
            vocab,
            max_positions,
            eps,
            act,
            rope_style,
            rot_dim,
            inv_freq_global,
            inv_freq_local,
            sliding,
            embed_scale: gemma.then(|| (hidden as f32).sqrt()),
            sandwich,
            attn_scale,
            final_softcap,
        })
    }
}
