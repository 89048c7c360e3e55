//! The LlamaStyle forward, written once against the [`Sink`] interface: run
//! eagerly by [`super::Llama::forward`], recorded as the `graph` section by
//! [`super::llama_graph`].
//!
//! Per layer (pre-norm): `RmsNorm`, the q/k/v projections (+ biases), QK-norm,
//! RoPE and the KV cache, attention (causal or sliding), the output projection
//! (sandwich-normed for Gemma 2/3), the residual add, `RmsNorm`, the gated MLP
//! (SwiGLU or GeGLU) and its residual add; at the end the rows asked for are
//! normed and projected to logits (soft-capped where the config says).

use super::{Activation, LlamaConfig, LogitRows};
use crate::backend::Op;
use crate::curated::sink::{
    CachedAttention, Label, QkvProjections, Residual, RopeSpec, Sink, WeightSource,
};
use crate::error::ExecutionError;
use crate::loader::llama_names::{self, LayerNames};

/// The weights of one layer, as the sink's values.
pub(crate) struct LayerWeights<V> {
    input_norm: V,
    qkv: [V; 3],
    bias: Option<[V; 3]>,
    qk_norm: Option<[V; 2]>,
    o: V,
    /// Sandwich: the norm of the attention output; otherwise the pre-MLP norm.
    post_attn_norm: V,
    /// Sandwich only: `(pre_feedforward, post_feedforward)`.
    ff_norms: Option<[V; 2]>,
    /// Gate, up, down.
    mlp: [V; 3],
}

/// Every weight of a LlamaStyle model, as the sink's values.
pub(crate) struct LlamaWeights<V> {
    embed: V,
    layers: Vec<LayerWeights<V>>,
    final_norm: V,
    lm_head: V,
}

/// `[a, b, c]` when all of `names` exist, none when none does; a partial set
/// is `MissingTensor` naming the whole set.
fn all_or_none<W: WeightSource, const N: usize>(
    w: &W,
    names: &[String; N],
    decode: bool,
    rule: &str,
) -> Result<Option<[W::V; N]>, ExecutionError> {
    let mut found = Vec::with_capacity(N);
    for n in names {
        found.extend(w.get(n, decode)?);
    }
    match found.len() {
        0 => Ok(None),
        k if k == N => Ok(found.try_into().ok()),
        _ => Err(ExecutionError::MissingTensor {
            name: names.join(" / "),
            required_by: format!("LlamaStyle ({rule})"),
        }),
    }
}

/// Binds every weight `config` needs from `w`: matrices as stored (zero-copy),
/// norm gains and biases decoded to f32.
pub(crate) fn bind<W: WeightSource>(
    config: &LlamaConfig,
    w: &W,
) -> Result<LlamaWeights<W::V>, ExecutionError> {
    let mut layers = Vec::with_capacity(config.layers);
    for i in 0..config.layers {
        let n = LayerNames::of(i);
        let matrix = |name: &String| w.need(name, false);
        let gain = |name: &String| w.need(name, true);
        let ff_norms = if config.sandwich {
            Some([gain(&n.ff_norms[0])?, gain(&n.ff_norms[1])?])
        } else {
            None
        };
        layers.push(LayerWeights {
            bias: all_or_none(w, &n.qkv_bias, true, "all three biases or none")?,
            qk_norm: all_or_none(w, &n.qk_norm, true, "both QK norms or none")?,
            input_norm: gain(&n.input_norm)?,
            qkv: [matrix(&n.qkv[0])?, matrix(&n.qkv[1])?, matrix(&n.qkv[2])?],
            o: matrix(&n.o)?,
            post_attn_norm: gain(&n.post_attn_norm)?,
            ff_norms,
            mlp: [matrix(&n.mlp[0])?, matrix(&n.mlp[1])?, matrix(&n.mlp[2])?],
        });
    }
    let embed = w.need(llama_names::EMBED, false)?;
    let lm_head = match w.get(llama_names::LM_HEAD, false)? {
        Some(t) => t,
        None => embed.clone(),
    };
    Ok(LlamaWeights {
        final_norm: w.need(llama_names::FINAL_NORM, true)?,
        embed,
        lm_head,
        layers,
    })
}

/// The logits of `rows` for the token ids `tokens` (at the sink's position),
/// appending their keys and values to the sink's KV cache.
pub(crate) fn forward<S: Sink>(
    c: &LlamaConfig,
    w: &LlamaWeights<S::V>,
    s: &mut S,
    tokens: S::V,
    rows: LogitRows,
) -> Result<S::V, ExecutionError> {
    s.section(format_args!("embed"));
    let mut h = s.op(Op::Embed, &[&tokens, &w.embed], Label::top("h"))?;
    if let Some(scale) = c.embed_scale {
        h = s.op(Op::Scale(scale), &[&h], Label::top("h"))?;
    }
    let norm = Op::RmsNorm {
        eps: c.eps,
        add_one: false,
    };
    let act = match c.act {
        Activation::Silu => Op::Silu,
        Activation::GeluTanh => Op::GeluTanh,
        Activation::Gelu => Op::Gelu,
    };
    let (hd, nh, nkv) = (c.head_dim, c.heads, c.kv_heads);
    let mut r = Residual { h, pending: None };
    for (i, l) in w.layers.iter().enumerate() {
        s.section(format_args!("layer {i} attention"));
        let x = s.residual_norm(&mut r, &norm, &l.input_norm, Label::layer(i, "attn_in"))?;
        let [wq, wk, wv] = &l.qkv;
        let bias = l.bias.as_ref().map(|[a, b, c]| [a, b, c]);
        let proj = QkvProjections {
            w: [wq, wk, wv],
            bias,
            heads: [nh, nkv, nkv],
            head_dim: hd,
            layer: i,
        };
        let [mut q, mut k, v] = s.qkv(&x, proj)?;
        if let Some([qn, kn]) = &l.qk_norm {
            q = s.op(norm.clone(), &[&q, qn], Label::layer(i, "q"))?;
            k = s.op(norm.clone(), &[&k, kn], Label::layer(i, "k"))?;
        }
        let window = c.sliding.get(i).copied().flatten();
        let rope = RopeSpec {
            style: c.rope_style,
            rot_dim: c.rot_dim,
            table: usize::from(window.is_some()),
        };
        let attn = CachedAttention {
            layer: i,
            scale: Some(c.attn_scale),
            window,
            kv_heads: nkv,
            head_dim: hd,
        };
        let o = s.cached_attention([q, k, v], Some(rope), attn)?;
        let o = s.rows_of(o, &[nh * hd], Label::layer(i, "attn"))?;
        let mut o = s.op(Op::Matmul, &[&o, &l.o], Label::layer(i, "attn_out"))?;
        s.section(format_args!("layer {i} mlp"));
        let ff_norm = match &l.ff_norms {
            Some([pre, _]) => {
                o = s.op(
                    norm.clone(),
                    &[&o, &l.post_attn_norm],
                    Label::layer(i, "attn_out"),
                )?;
                pre
            }
            None => &l.post_attn_norm,
        };
        r.pending = Some(o);
        let f = s.residual_norm(&mut r, &norm, ff_norm, Label::layer(i, "mlp_in"))?;
        let [gate, up, down] = &l.mlp;
        let m = s.gated_mlp(&f, [gate, up], act.clone(), i)?;
        let mut d = s.op(Op::Matmul, &[&m, down], Label::layer(i, "mlp_out"))?;
        if let Some([_, post]) = &l.ff_norms {
            d = s.op(norm.clone(), &[&d, post], Label::layer(i, "mlp_out"))?;
        }
        r.pending = Some(d);
    }
    s.section(format_args!("output"));
    s.select_rows(&mut r, rows)?;
    let x = s.residual_norm(&mut r, &norm, &w.final_norm, Label::top("out_norm"))?;
    match c.final_softcap {
        None => s.output(Op::Matmul, &[&x, &w.lm_head], "logits"),
        Some(cap) => {
            let raw = s.output(Op::Matmul, &[&x, &w.lm_head], "logits_raw")?;
            s.output(Op::Softcap(cap), &[&raw], "logits")
        }
    }
}
