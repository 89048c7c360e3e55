//! The WhisperStyle forward, written once against the [`Sink`] interface: run
//! eagerly by [`super::Whisper::encode`] / [`super::Whisper::decode_steps`],
//! recorded as the `graph` section by [`super::whisper_graph`].
//!
//! ```text
//! encoder: x = stem(mel) + embed_positions[0..n_audio_ctx]   (Sink::audio_conv_stem)
//!          pre-norm layers (attention without mask, GELU MLP); a = LN(x, encoder.layer_norm)
//!          cross K/V of every decoder layer from a, `cross_k.{i}` / `cross_v.{i}`
//! decoder: y = embed_tokens[tokens] + embed_positions[positions]; pre-norm layers with
//!          causal self-attention (KV cache) and cross-attention on the window's K/V
//!          logits = LN(y, decoder.layer_norm) @ proj_out^T  (embed_tokens when tied)
//! ```

use super::WhisperConfig;
use crate::backend::Op;
use crate::curated::sink::{CachedAttention, Label, Sink, WeightSource};
use crate::error::ExecutionError;
use crate::loader::whisper_names::{self as wn, LayerNames};

/// A linear layer: weight `[out, in]` and, where the file has it, a bias (f32).
pub(crate) struct Linear<V> {
    w: V,
    b: Option<V>,
}

/// A LayerNorm's gain and bias (f32).
struct Norm<V> {
    g: V,
    b: V,
}

/// An attention block's q, k, v and output projections.
struct Attn<V> {
    q: Linear<V>,
    k: Linear<V>,
    v: Linear<V>,
    o: Linear<V>,
}

struct EncoderLayer<V> {
    attn_norm: Norm<V>,
    attn: Attn<V>,
    mlp_norm: Norm<V>,
    fc: [Linear<V>; 2],
}

struct DecoderLayer<V> {
    attn_norm: Norm<V>,
    attn: Attn<V>,
    cross_norm: Norm<V>,
    cross: Attn<V>,
    mlp_norm: Norm<V>,
    fc: [Linear<V>; 2],
}

/// Every weight of a WhisperStyle model but the mel filters.
pub(crate) struct WhisperWeights<V> {
    /// The stem's kernels (`[C, Cin * 3]` matrices) and biases.
    conv: [[V; 2]; 2],
    enc_positions: V,
    enc_layers: Vec<EncoderLayer<V>>,
    enc_norm: Norm<V>,
    embed: V,
    dec_positions: V,
    dec_layers: Vec<DecoderLayer<V>>,
    dec_norm: Norm<V>,
    /// The output projection: `proj_out`, else the tied token table.
    proj: V,
}

fn linear<W: WeightSource>(w: &W, p: &str) -> Result<Linear<W::V>, ExecutionError> {
    Ok(Linear {
        w: w.need(&format!("{p}.weight"), false)?,
        b: w.get(&format!("{p}.bias"), true)?,
    })
}

fn norm<W: WeightSource>(w: &W, p: &str) -> Result<Norm<W::V>, ExecutionError> {
    Ok(Norm {
        g: w.need(&format!("{p}.weight"), true)?,
        b: w.need(&format!("{p}.bias"), true)?,
    })
}

fn attn<W: WeightSource>(w: &W, block: &str) -> Result<Attn<W::V>, ExecutionError> {
    let [q, k, v, o] = wn::attn_proj(block);
    Ok(Attn {
        q: linear(w, &q)?,
        k: linear(w, &k)?,
        v: linear(w, &v)?,
        o: linear(w, &o)?,
    })
}

/// Binds every weight from `w`.
pub(crate) fn bind<W: WeightSource>(
    c: &WhisperConfig,
    w: &W,
) -> Result<WhisperWeights<W::V>, ExecutionError> {
    let conv = |p: &str| -> Result<[W::V; 2], ExecutionError> {
        Ok([
            w.need_matrix(&format!("{p}.weight"))?,
            w.need(&format!("{p}.bias"), true)?,
        ])
    };
    let enc_layers = (0..c.encoder_layers)
        .map(|i| {
            let n = LayerNames::encoder(i);
            Ok(EncoderLayer {
                attn_norm: norm(w, &n.attn_norm)?,
                attn: attn(w, &n.attn)?,
                mlp_norm: norm(w, &n.mlp_norm)?,
                fc: [linear(w, &n.fc[0])?, linear(w, &n.fc[1])?],
            })
        })
        .collect::<Result<Vec<_>, ExecutionError>>()?;
    let dec_layers = (0..c.decoder_layers)
        .map(|i| {
            let n = LayerNames::decoder(i);
            let [cross_norm, cross] = wn::cross(i);
            Ok(DecoderLayer {
                attn_norm: norm(w, &n.attn_norm)?,
                attn: attn(w, &n.attn)?,
                cross_norm: norm(w, &cross_norm)?,
                cross: attn(w, &cross)?,
                mlp_norm: norm(w, &n.mlp_norm)?,
                fc: [linear(w, &n.fc[0])?, linear(w, &n.fc[1])?],
            })
        })
        .collect::<Result<Vec<_>, ExecutionError>>()?;
    let embed = w.need(wn::DEC_EMBED, false)?;
    let proj = match w.get(wn::PROJ_OUT, false)? {
        Some(p) => p,
        None => embed.clone(),
    };
    Ok(WhisperWeights {
        conv: [conv(wn::CONV[0])?, conv(wn::CONV[1])?],
        enc_positions: w.need(wn::ENC_POSITIONS, true)?,
        enc_layers,
        enc_norm: norm(w, wn::ENC_NORM)?,
        embed,
        dec_positions: w.need(wn::DEC_POSITIONS, true)?,
        dec_layers,
        dec_norm: norm(w, wn::DEC_NORM)?,
        proj,
    })
}

impl<V> WhisperWeights<V> {
    /// Replaces the weights of the products over the window's 1500-3000 rows
    /// (the stem, the encoder layers, the cross K/V projections) with `f` of
    /// them (e.g. decoded to f32 once, for a backend that prefers that).
    pub(crate) fn map_window_weights(
        &mut self,
        f: impl Fn(&V) -> Result<V, ExecutionError>,
    ) -> Result<(), ExecutionError> {
        let map = |l: &mut Linear<V>| -> Result<(), ExecutionError> {
            l.w = f(&l.w)?;
            Ok(())
        };
        for [w, _] in &mut self.conv {
            *w = f(w)?;
        }
        for l in &mut self.enc_layers {
            for p in [&mut l.attn.q, &mut l.attn.k, &mut l.attn.v, &mut l.attn.o] {
                map(p)?;
            }
            for p in &mut l.fc {
                map(p)?;
            }
        }
        for l in &mut self.dec_layers {
            map(&mut l.cross.k)?;
            map(&mut l.cross.v)?;
        }
        Ok(())
    }
}

/// The name of the cross-attention keys (`k`) or values (`v`) of decoder layer `i`.
pub(crate) fn cross_name(kv: &str, i: usize) -> String {
    format!("cross_{kv}.{i}")
}

fn apply<S: Sink>(
    s: &mut S,
    x: &S::V,
    l: &Linear<S::V>,
    act: Option<Op>,
    label: Label,
) -> Result<S::V, ExecutionError> {
    s.linear(x, &l.w, l.b.as_ref(), act, label)
}

fn layer_norm<S: Sink>(
    s: &mut S,
    x: &S::V,
    n: &Norm<S::V>,
    eps: f32,
    label: Label,
) -> Result<S::V, ExecutionError> {
    s.op(Op::LayerNorm { eps }, &[x, &n.g, &n.b], label)
}

/// The projection `l` of `x` viewed as `[-1, heads, head_dim]`.
fn heads<S: Sink>(
    s: &mut S,
    x: &S::V,
    l: &Linear<S::V>,
    [h, dh]: [usize; 2],
    label: Label,
) -> Result<S::V, ExecutionError> {
    let y = apply(s, x, l, None, label)?;
    s.rows_of(y, &[h, dh], label)
}

/// `x + o(a)` for the attention output `a` `[-1, H, dh]`.
fn attn_out<S: Sink>(
    s: &mut S,
    x: &S::V,
    a: S::V,
    o: &Linear<S::V>,
    d: usize,
    layer: usize,
) -> Result<S::V, ExecutionError> {
    let a = s.rows_of(a, &[d], Label::layer(layer, "attn"))?;
    let y = apply(s, &a, o, None, Label::layer(layer, "attn_out"))?;
    s.op(Op::Add, &[x, &y], Label::layer(layer, "x"))
}

/// `x + fc2(gelu(fc1(LN(x))))`.
fn mlp<S: Sink>(
    s: &mut S,
    x: &S::V,
    n: &Norm<S::V>,
    [fc1, fc2]: &[Linear<S::V>; 2],
    eps: f32,
    layer: usize,
) -> Result<S::V, ExecutionError> {
    let h = layer_norm(s, x, n, eps, Label::layer(layer, "mlp_in"))?;
    let f = apply(s, &h, fc1, Some(Op::Gelu), Label::layer(layer, "mlp"))?;
    let f = apply(s, &f, fc2, None, Label::layer(layer, "mlp_out"))?;
    s.op(Op::Add, &[x, &f], Label::layer(layer, "x"))
}

/// The encoder of one window: `mel` `[n_mels, 2 n_audio_ctx]` and `positions`
/// (`0..n_audio_ctx`, i32) in; per decoder layer the cross-attention keys and
/// values `[n_audio_ctx, H, dh]` out, named [`cross_name`].
pub(crate) fn encode<S: Sink>(
    c: &WhisperConfig,
    w: &WhisperWeights<S::V>,
    s: &mut S,
    mel: &S::V,
    positions: &S::V,
) -> Result<Vec<[S::V; 2]>, ExecutionError> {
    let d = c.d_model;
    s.section(format_args!("encoder conv"));
    let [c1, c2] = &w.conv;
    let x = s.audio_conv_stem(mel, [[&c1[0], &c1[1]], [&c2[0], &c2[1]]])?;
    let pos = s.op(
        Op::Embed,
        &[positions, &w.enc_positions],
        Label::top("audio_pos"),
    )?;
    let mut x = s.op(Op::Add, &[&x, &pos], Label::top("x"))?;
    let shape = [c.encoder_heads, d / c.encoder_heads];
    for (i, l) in w.enc_layers.iter().enumerate() {
        s.section(format_args!("encoder layer {i} attention"));
        let n = layer_norm(s, &x, &l.attn_norm, c.eps, Label::layer(i, "attn_in"))?;
        let q = heads(s, &n, &l.attn.q, shape, Label::layer(i, "q"))?;
        let k = heads(s, &n, &l.attn.k, shape, Label::layer(i, "k"))?;
        let v = heads(s, &n, &l.attn.v, shape, Label::layer(i, "v"))?;
        let a = s.attention([&q, &k, &v], Label::layer(i, "attn"))?;
        x = attn_out(s, &x, a, &l.attn.o, d, i)?;
        s.section(format_args!("encoder layer {i} mlp"));
        x = mlp(s, &x, &l.mlp_norm, &l.fc, c.eps, i)?;
    }
    let audio = layer_norm(s, &x, &w.enc_norm, c.eps, Label::top("audio"))?;
    let shape = [c.decoder_heads, d / c.decoder_heads];
    let mut cross = Vec::with_capacity(w.dec_layers.len());
    for (i, l) in w.dec_layers.iter().enumerate() {
        s.section(format_args!("decoder layer {i} cross K/V"));
        let label = Label::layer(i, "cross");
        let k = apply(s, &audio, &l.cross.k, None, label)?;
        let k = s.named_rows_of(k, &shape, &cross_name("k", i))?;
        let v = apply(s, &audio, &l.cross.v, None, label)?;
        let v = s.named_rows_of(v, &shape, &cross_name("v", i))?;
        cross.push([k, v]);
    }
    Ok(cross)
}

/// The decoder's inputs: token ids and their absolute positions (i32, one
/// per row), and the window's cross-attention keys and values per layer.
pub(crate) struct DecoderInputs<'a, V> {
    /// Token ids.
    pub tokens: V,
    /// Position ids.
    pub positions: V,
    /// [`encode`]'s keys and values.
    pub cross: &'a [[V; 2]],
}

/// Called with each decoder layer's cross-attention queries `[rows, H, dh]`
/// and keys (word timestamps read the alignment heads' scores from them).
pub(crate) type CrossObserver<'a, V> =
    &'a mut dyn FnMut(usize, &V, &V) -> Result<(), ExecutionError>;

/// The logits `[rows, n_vocab]` of the decoder rows `want` (every row when
/// none), the self-attention appending to the sink's KV caches.
pub(crate) fn decode<S: Sink>(
    c: &WhisperConfig,
    w: &WhisperWeights<S::V>,
    s: &mut S,
    inputs: DecoderInputs<'_, S::V>,
    want: Option<&[usize]>,
    observe: Option<CrossObserver<'_, S::V>>,
) -> Result<S::V, ExecutionError> {
    let mut observe = observe;
    let d = c.d_model;
    let (h, dh) = (c.decoder_heads, d / c.decoder_heads);
    s.section(format_args!("decoder embed"));
    let e = s.op(Op::Embed, &[&inputs.tokens, &w.embed], Label::top("embed"))?;
    let p = s.op(
        Op::Embed,
        &[&inputs.positions, &w.dec_positions],
        Label::top("embed"),
    )?;
    let mut y = s.op(Op::Add, &[&e, &p], Label::top("y"))?;
    for (i, l) in w.dec_layers.iter().enumerate() {
        s.section(format_args!("decoder layer {i} self-attention"));
        let n = layer_norm(s, &y, &l.attn_norm, c.eps, Label::layer(i, "attn_in"))?;
        let q = heads(s, &n, &l.attn.q, [h, dh], Label::layer(i, "q"))?;
        let k = heads(s, &n, &l.attn.k, [h, dh], Label::layer(i, "k"))?;
        let v = heads(s, &n, &l.attn.v, [h, dh], Label::layer(i, "v"))?;
        let attn = CachedAttention {
            layer: i,
            scale: None,
            window: None,
            kv_heads: h,
            head_dim: dh,
        };
        let a = s.cached_attention([q, k, v], None, attn)?;
        y = attn_out(s, &y, a, &l.attn.o, d, i)?;
        s.section(format_args!("decoder layer {i} cross-attention"));
        let n = layer_norm(s, &y, &l.cross_norm, c.eps, Label::layer(i, "cross_in"))?;
        let q = heads(s, &n, &l.cross.q, [h, dh], Label::layer(i, "cross_q"))?;
        let missing = || ExecutionError::MissingTensor {
            name: cross_name("k", i),
            required_by: "WhisperStyle decoder (the encoder's output)".into(),
        };
        let [ck, cv] = inputs.cross.get(i).ok_or_else(missing)?;
        if let Some(f) = observe.as_mut() {
            f(i, &q, ck)?;
        }
        let a = s.attention([&q, ck, cv], Label::layer(i, "cross"))?;
        y = attn_out(s, &y, a, &l.cross.o, d, i)?;
        s.section(format_args!("decoder layer {i} mlp"));
        y = mlp(s, &y, &l.mlp_norm, &l.fc, c.eps, i)?;
    }
    s.section(format_args!("decoder logits"));
    if let Some(rows) = want {
        y = s.gather_rows(&y, rows)?;
    }
    let y = layer_norm(s, &y, &w.dec_norm, c.eps, Label::top("out_norm"))?;
    s.output(Op::Matmul, &[&y, &w.proj], "logits")
}
