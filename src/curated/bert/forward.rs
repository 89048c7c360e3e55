//! The BertStyle encoder, written once against the [`Sink`] interface: run
//! eagerly by [`super::Bert::encode`] over a padded batch, recorded as the
//! `graph` section (one sequence per call) by [`super::bert_graph`].
//!
//! ```text
//! h = LayerNorm(word[tokens] + position[positions] + token_type[token_types])
//! per layer: h = LayerNorm(h + Attn(h));  h = LayerNorm(h + Out(act(In(h))))
//! ```

use super::{layer_names, Activation, BertConfig};
use crate::backend::Op;
use crate::curated::sink::{Label, Sink, WeightSource};
use crate::error::ExecutionError;
use crate::loader::bert_names;

/// A weight with its bias: a linear layer `(W, b)` or a LayerNorm `(gain, bias)`.
pub(crate) struct Affine<V> {
    /// The weight (`[out, in]`) or gain.
    pub w: V,
    /// The bias (f32).
    pub b: V,
}

impl<V> Affine<V> {
    fn pair(&self) -> [&V; 2] {
        [&self.w, &self.b]
    }
}

/// The weights of one encoder layer.
pub(crate) struct LayerWeights<V> {
    qkv: [Affine<V>; 3],
    attn_out: Affine<V>,
    attn_norm: Affine<V>,
    inter: Affine<V>,
    out: Affine<V>,
    out_norm: Affine<V>,
}

/// Every encoder weight (the classification head is not part of the encoder).
pub(crate) struct EncoderWeights<V> {
    word: V,
    position: V,
    token_type: Option<V>,
    embed_norm: Affine<V>,
    layers: Vec<LayerWeights<V>>,
}

/// The encoder's inputs, one row per token: ids, position ids (into the table
/// [`Sink::position_table`] returns) and token types.
pub(crate) struct EncoderInputs<V> {
    /// Token ids.
    pub tokens: V,
    /// Position ids.
    pub positions: V,
    /// Token types.
    pub token_types: V,
}

/// The linear layer (or LayerNorm) `prefix`: `.weight` as stored, `.bias`
/// decoded to f32 (a norm's gain too when `gain`).
pub(crate) fn affine<W: WeightSource>(
    w: &W,
    prefix: &str,
    gain: bool,
) -> Result<Affine<W::V>, ExecutionError> {
    Ok(Affine {
        w: w.need(&format!("{prefix}.weight"), gain)?,
        b: w.need(&format!("{prefix}.bias"), true)?,
    })
}

/// Binds the encoder's weights from `w`.
pub(crate) fn bind<W: WeightSource>(
    config: &BertConfig,
    w: &W,
) -> Result<EncoderWeights<W::V>, ExecutionError> {
    let (stack, [q, k, v, o, on, fi, fo, fon]) = layer_names(config.variant);
    let layers = (0..config.layers)
        .map(|i| {
            let p = |n: &str| format!("{stack}.{i}.{n}");
            Ok(LayerWeights {
                qkv: [
                    affine(w, &p(q), false)?,
                    affine(w, &p(k), false)?,
                    affine(w, &p(v), false)?,
                ],
                attn_out: affine(w, &p(o), false)?,
                attn_norm: affine(w, &p(on), true)?,
                inter: affine(w, &p(fi), false)?,
                out: affine(w, &p(fo), false)?,
                out_norm: affine(w, &p(fon), true)?,
            })
        })
        .collect::<Result<Vec<_>, ExecutionError>>()?;
    Ok(EncoderWeights {
        word: w.need(bert_names::WORD_EMBEDDINGS, false)?,
        position: w.need(bert_names::POSITION_EMBEDDINGS, false)?,
        token_type: w.get(bert_names::TOKEN_TYPE_EMBEDDINGS, false)?,
        embed_norm: affine(w, bert_names::EMBED_NORM, true)?,
        layers,
    })
}

/// The final hidden states `[rows, hidden]` of `inputs`.
pub(crate) fn forward<S: Sink>(
    c: &BertConfig,
    w: &EncoderWeights<S::V>,
    s: &mut S,
    inputs: EncoderInputs<S::V>,
) -> Result<S::V, ExecutionError> {
    s.section(format_args!("embeddings"));
    let word = s.op(Op::Embed, &[&inputs.tokens, &w.word], Label::top("word"))?;
    let table = s.position_table(&w.position, c.position_offset)?;
    let position = s.op(
        Op::Embed,
        &[&inputs.positions, &table],
        Label::top("position"),
    )?;
    let mut e = s.op(Op::Add, &[&word, &position], Label::top("embed"))?;
    if let Some(tt) = &w.token_type {
        let t = s.op(Op::Embed, &[&inputs.token_types, tt], Label::top("type"))?;
        e = s.op(Op::Add, &[&e, &t], Label::top("embed"))?;
    }
    let ln = Op::LayerNorm { eps: c.eps };
    let [g, b] = w.embed_norm.pair();
    let mut h = s.op(ln, &[&e, g, b], Label::top("h"))?;
    let act = match c.act {
        Activation::Gelu => Op::Gelu,
        Activation::GeluTanh => Op::GeluTanh,
        Activation::Relu => Op::Relu,
    };
    for (i, l) in w.layers.iter().enumerate() {
        s.reuse_buffers();
        s.section(format_args!("layer {i} attention"));
        let [q, k, v] = &l.qkv;
        let lin = [q.pair(), k.pair(), v.pair()];
        let o = s.padded_self_attention(&h, lin, c.heads, c.head_dim, i)?;
        let attn_out = Label::layer(i, "attn_out");
        h = s.linear_add_norm(
            &o,
            l.attn_out.pair(),
            h,
            l.attn_norm.pair(),
            c.eps,
            attn_out,
        )?;
        s.section(format_args!("layer {i} mlp"));
        let f = s.linear(
            &h,
            &l.inter.w,
            Some(&l.inter.b),
            Some(act.clone()),
            Label::layer(i, "mlp"),
        )?;
        let mlp_out = Label::layer(i, "mlp_out");
        h = s.linear_add_norm(&f, l.out.pair(), h, l.out_norm.pair(), c.eps, mlp_out)?;
    }
    Ok(h)
}
