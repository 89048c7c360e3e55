//! WhisperStyle (families.md): speech recognition with an audio encoder and a
//! text decoder, written against the [`Dispatcher`] so it runs on every backend.
//!
//! ```text
//! encoder: x = Gelu(Conv1d(mel, conv1, k3 s1 p1)); x = Gelu(Conv1d(x, conv2, k3 s2 p1))
//!          x += embed_positions; pre-norm layers (no mask); LN(x, encoder.layer_norm)
//! decoder: y = embed_tokens[tokens] + embed_positions[pos]; pre-norm layers with causal
//!          self-attention (KV cache) and cross-attention (K/V computed once per window)
//!          logits = LN(y, decoder.layer_norm) @ embed_tokens^T
//! ```
//!
//! The convolutions run as im2col + `Matmul` (weights `[Cout, Cin, 3]` viewed as
//! `[Cout, Cin * 3]`), which equals `Conv1d` of ops.md. [`decode`] holds the decoding
//! rules and the long-form loop; [`Whisper::transcribe`] is the entry point.

pub mod beam;
pub mod config;
pub mod decode;
pub mod options;
pub mod words;

pub use config::{SpecialTokens, WhisperConfig};
pub use decode::{Segment, Timings, Transcript};
pub use options::TranscribeOptions;
pub use words::Word;

use super::{Linear, WeightBinder};
use crate::backend::{Dispatcher, ExecContext, Mask, Op, SharedBytes, Tensor};
use crate::dtype::DType;
use crate::error::ExecutionError;
use crate::loader::whisper_names as wn;
use crate::loader::Model;
use crate::tokenizer::Tokenizer;
use std::sync::Arc;

/// LayerNorm gain and bias (f32).
struct Norm {
    g: Tensor,
    b: Tensor,
}

/// Attention projections.
struct Attn {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
}

struct EncoderLayer {
    ln1: Norm,
    attn: Attn,
    ln2: Norm,
    fc1: Linear,
    fc2: Linear,
}

struct DecoderLayer {
    ln1: Norm,
    self_attn: Attn,
    ln2: Norm,
    cross: Attn,
    ln3: Norm,
    fc1: Linear,
    fc2: Linear,
}

/// WhisperStyle's composite weights: linear layers (optional bias), LayerNorms, attention blocks.
trait WhisperWeights {
    fn linear(&self, p: &str) -> Result<Linear, ExecutionError>;
    fn norm(&self, p: &str) -> Result<Norm, ExecutionError>;
    fn attn(&self, p: &str) -> Result<Attn, ExecutionError>;
}

impl WhisperWeights for WeightBinder {
    fn linear(&self, p: &str) -> Result<Linear, ExecutionError> {
        Ok(Linear {
            w: self.need(&format!("{p}.weight"), false)?,
            b: self.get(&format!("{p}.bias"), true)?,
        })
    }

    fn norm(&self, p: &str) -> Result<Norm, ExecutionError> {
        Ok(Norm {
            g: self.need(&format!("{p}.weight"), true)?,
            b: self.need(&format!("{p}.bias"), true)?,
        })
    }

    fn attn(&self, block: &str) -> Result<Attn, ExecutionError> {
        let [q, k, v, o] = wn::attn_proj(block);
        Ok(Attn {
            q: self.linear(&q)?,
            k: self.linear(&k)?,
            v: self.linear(&v)?,
            o: self.linear(&o)?,
        })
    }
}

/// Cross-attention keys and values of one window, per decoder layer (`[n_audio_ctx, H, dh]`).
pub struct EncoderOutput {
    cross: Vec<(Tensor, Tensor)>,
}

/// Self-attention KV cache of one decoding, `[n_text_ctx, H, dh]` per layer.
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    len: usize,
}

impl KvCache {
    /// Number of positions filled.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets everything (keeps the buffers).
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `len` positions.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

/// A WhisperStyle model bound to its weights, tokenizer and backends.
pub struct Whisper {
    /// Hyper-parameters and special tokens.
    pub config: WhisperConfig,
    /// The model's tokenizer (byte-level BPE with Whisper's special tokens).
    pub tokenizer: Tokenizer,
    dispatcher: Dispatcher,
    mel_filters: Vec<f32>,
    conv1: Linear,
    conv2: Linear,
    enc_pos: Tensor,
    enc_layers: Vec<EncoderLayer>,
    enc_norm: Norm,
    embed: Tensor,
    dec_pos: Tensor,
    dec_layers: Vec<DecoderLayer>,
    dec_norm: Norm,
    proj: Tensor,
}

impl std::fmt::Debug for Whisper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Whisper")
            .field("config", &self.config)
            .finish()
    }
}

fn host(t: &Tensor, d: &Dispatcher) -> Result<Vec<f32>, ExecutionError> {
    match t.read_f32("download") {
        Ok(v) => Ok(v.to_vec()),
        Err(_) => d.primary().try_download_f32(t),
    }
}

impl Whisper {
    /// Binds `model`'s weights; ops run on `dispatcher`'s backends.
    pub fn new(model: Arc<Model>, dispatcher: Dispatcher) -> Result<Whisper, ExecutionError> {
        let config = WhisperConfig::from_config(&model.config)?;
        let tokenizer = Tokenizer::from_model(&model)?;
        let b = WeightBinder::new(model, "WhisperStyle");
        let (d, n_mels) = (config.d_model, config.n_mels);
        // The encoder's matmuls have 1500-3000 rows: on a backend that prefers
        // f32 weights there, they are decoded to f32 once here.
        let widen = dispatcher.primary().capabilities().widened_f32_weights;
        let wide = |l: Linear| -> Result<Linear, ExecutionError> {
            Ok(Linear {
                w: if widen { f32_weight(&l.w)? } else { l.w },
                b: l.b,
            })
        };
        let conv = |p: &str, cin: usize| -> Result<Linear, ExecutionError> {
            wide(Linear {
                w: b.need_as(&format!("{p}.weight"), false, Some(&[d, cin * 3]))?,
                b: Some(b.need(&format!("{p}.bias"), true)?),
            })
        };
        let wide_attn = |a: Attn| -> Result<Attn, ExecutionError> {
            Ok(Attn {
                q: wide(a.q)?,
                k: wide(a.k)?,
                v: wide(a.v)?,
                o: wide(a.o)?,
            })
        };
        let mel_filters = host(&b.need(wn::MEL_FILTERS, true)?, &dispatcher)?;
        let enc_layers = (0..config.encoder_layers)
            .map(|i| {
                let n = wn::LayerNames::encoder(i);
                Ok(EncoderLayer {
                    ln1: b.norm(&n.attn_norm)?,
                    attn: wide_attn(b.attn(&n.attn)?)?,
                    ln2: b.norm(&n.mlp_norm)?,
                    fc1: wide(b.linear(&n.fc[0])?)?,
                    fc2: wide(b.linear(&n.fc[1])?)?,
                })
            })
            .collect::<Result<Vec<_>, ExecutionError>>()?;
        let dec_layers = (0..config.decoder_layers)
            .map(|i| {
                let n = wn::LayerNames::decoder(i);
                let [cross_norm, cross] = wn::cross(i);
                Ok(DecoderLayer {
                    ln1: b.norm(&n.attn_norm)?,
                    self_attn: b.attn(&n.attn)?,
                    ln2: b.norm(&cross_norm)?,
                    cross: {
                        let a = b.attn(&cross)?;
                        Attn {
                            k: wide(a.k)?,
                            v: wide(a.v)?,
                            ..a
                        }
                    },
                    ln3: b.norm(&n.mlp_norm)?,
                    fc1: b.linear(&n.fc[0])?,
                    fc2: b.linear(&n.fc[1])?,
                })
            })
            .collect::<Result<Vec<_>, ExecutionError>>()?;
        let embed = b.need(wn::DEC_EMBED, false)?;
        let proj = match b.get(wn::PROJ_OUT, false)? {
            Some(p) => p,
            None => embed.clone(),
        };
        Ok(Whisper {
            conv1: conv(wn::CONV[0], n_mels)?,
            conv2: conv(wn::CONV[1], d)?,
            enc_pos: b.need(wn::ENC_POSITIONS, true)?,
            enc_layers,
            enc_norm: b.norm(wn::ENC_NORM)?,
            dec_pos: b.need(wn::DEC_POSITIONS, true)?,
            dec_layers,
            dec_norm: b.norm(wn::DEC_NORM)?,
            embed,
            proj,
            mel_filters,
            config,
            tokenizer,
            dispatcher,
        })
    }

    /// The Slaney mel filter bank `[n_mels, 201]` stored in the model.
    pub fn mel_filters(&self) -> &[f32] {
        &self.mel_filters
    }

    /// The backends the ops run on.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    fn run1(
        &self,
        op: Op,
        inputs: &[Tensor],
        ctx: &mut ExecContext,
    ) -> Result<Tensor, ExecutionError> {
        self.dispatcher.run1(&op, inputs, ctx)
    }

    fn linear(
        &self,
        x: &Tensor,
        l: &Linear,
        ctx: &mut ExecContext,
    ) -> Result<Tensor, ExecutionError> {
        l.apply(&self.dispatcher, x, None, ctx)
    }

    fn norm(&self, x: &Tensor, n: &Norm, ctx: &mut ExecContext) -> Result<Tensor, ExecutionError> {
        self.run1(
            Op::LayerNorm {
                eps: self.config.eps,
            },
            &[x.clone(), n.g.clone(), n.b.clone()],
            ctx,
        )
    }

    fn heads(
        &self,
        x: Tensor,
        heads: usize,
        ctx: &mut ExecContext,
    ) -> Result<Tensor, ExecutionError> {
        let s = x.shape()[0];
        let d = self.config.d_model;
        self.run1(Op::Reshape(vec![s, heads, d / heads]), &[x], ctx)
    }

    fn mlp(
        &self,
        x: &Tensor,
        fc1: &Linear,
        fc2: &Linear,
        ctx: &mut ExecContext,
    ) -> Result<Tensor, ExecutionError> {
        let h = fc1.apply(&self.dispatcher, x, Some(&Op::Gelu), ctx)?;
        self.linear(&h, fc2, ctx)
    }

    /// Runs the encoder on one window `mel` `[n_mels, frames]` (row-major; frames
    /// = 2 x n_audio_ctx) and projects the cross-attention K/V of every decoder layer.
    /// The whole encoder runs on the cpu worker pool ([`Dispatcher::install`]).
    pub fn encode(
        &self,
        mel: &[f32],
        ctx: &mut ExecContext,
    ) -> Result<EncoderOutput, ExecutionError> {
        self.dispatcher.install(|| self.encode_on_pool(mel, ctx))
    }

    fn encode_on_pool(
        &self,
        mel: &[f32],
        ctx: &mut ExecContext,
    ) -> Result<EncoderOutput, ExecutionError> {
        let c = &self.config;
        let frames = 2 * c.n_audio_ctx;
        if mel.len() != c.n_mels * frames {
            return Err(ExecutionError::ShapeMismatch {
                op: "whisper encoder input".into(),
                expected: vec![c.n_mels, frames],
                got: vec![mel.len() / frames.max(1), frames],
            });
        }
        ctx.begin_forward();
        ctx.set_label("encoder conv");
        // conv1: im2col [frames, n_mels * 3] from channel-major mel.
        let cols = im2col(frames, c.n_mels, 1, |ch, t| mel[ch * frames + t]);
        let x = Tensor::from_f32(&[frames, c.n_mels * 3], cols)?;
        let x = self
            .conv1
            .apply(&self.dispatcher, &x, Some(&Op::Gelu), ctx)?;
        let xv = host(&x, &self.dispatcher)?;
        let d = c.d_model;
        let cols = im2col(c.n_audio_ctx, d, 2, |ch, t| {
            if t < frames {
                xv[t * d + ch]
            } else {
                0.0
            }
        });
        let x = Tensor::from_f32(&[c.n_audio_ctx, d * 3], cols)?;
        let x = self
            .conv2
            .apply(&self.dispatcher, &x, Some(&Op::Gelu), ctx)?;
        let mut x = self.run1(Op::Add, &[x, self.enc_pos.clone()], ctx)?;
        let h = c.encoder_heads;
        for (i, l) in self.enc_layers.iter().enumerate() {
            ctx.set_label(&format!("encoder layer {i} attention"));
            let n = self.norm(&x, &l.ln1, ctx)?;
            let q = self.heads(self.linear(&n, &l.attn.q, ctx)?, h, ctx)?;
            let k = self.heads(self.linear(&n, &l.attn.k, ctx)?, h, ctx)?;
            let v = self.heads(self.linear(&n, &l.attn.v, ctx)?, h, ctx)?;
            let a = self.run1(
                Op::Sdpa {
                    scale: None,
                    mask: Mask::None,
                    q_pos: 0,
                    kv_len: None,
                },
                &[q, k, v],
                ctx,
            )?;
            let a = self.run1(Op::Reshape(vec![c.n_audio_ctx, d]), &[a], ctx)?;
            let o = self.linear(&a, &l.attn.o, ctx)?;
            x = self.run1(Op::Add, &[x, o], ctx)?;
            ctx.set_label(&format!("encoder layer {i} mlp"));
            let n = self.norm(&x, &l.ln2, ctx)?;
            let m = self.mlp(&n, &l.fc1, &l.fc2, ctx)?;
            x = self.run1(Op::Add, &[x, m], ctx)?;
        }
        let x = self.norm(&x, &self.enc_norm, ctx)?;
        let hd = c.decoder_heads;
        let mut cross = Vec::with_capacity(self.dec_layers.len());
        for (i, l) in self.dec_layers.iter().enumerate() {
            ctx.set_label(&format!("decoder layer {i} cross K/V"));
            let k = self.heads(self.linear(&x, &l.cross.k, ctx)?, hd, ctx)?;
            let v = self.heads(self.linear(&x, &l.cross.v, ctx)?, hd, ctx)?;
            cross.push((k, v));
        }
        Ok(EncoderOutput { cross })
    }

    /// A fresh self-attention cache on the primary backend.
    pub fn new_cache(&self) -> Result<KvCache, ExecutionError> {
        let c = &self.config;
        let shape = [c.n_text_ctx, c.decoder_heads, c.d_model / c.decoder_heads];
        let layers = (0..c.decoder_layers)
            .map(|_| {
                let p = self.dispatcher.primary();
                Ok((p.alloc(&shape, DType::F32)?, p.alloc(&shape, DType::F32)?))
            })
            .collect::<Result<Vec<_>, ExecutionError>>()?;
        Ok(KvCache { layers, len: 0 })
    }

    /// Feeds `tokens` at positions `cache.len()..` and returns the logits of the
    /// rows `want` (indices into `tokens`), each `n_vocab` long.
    /// The whole step runs on the cpu worker pool ([`Dispatcher::install`]).
    pub fn decode_step(
        &self,
        enc: &EncoderOutput,
        cache: &mut KvCache,
        tokens: &[u32],
        want: &[usize],
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        self.decode_steps(enc, std::slice::from_mut(cache), tokens, want, ctx)
    }

    /// [`Whisper::decode_step`] for several sequences on one encoder output (the beams
    /// of a search): `tokens` is split into `caches.len()` equal groups, group `g` fed
    /// at positions `caches[g].len()..`. Every projection and the cross-attention run
    /// once on all rows; only the self-attention runs per sequence, on its own cache.
    /// `want` indexes the rows of `tokens`.
    pub fn decode_steps(
        &self,
        enc: &EncoderOutput,
        caches: &mut [KvCache],
        tokens: &[u32],
        want: &[usize],
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        self.dispatcher
            .install(|| self.decode_steps_on_pool(enc, caches, tokens, want, None, ctx))
    }

    /// Self-attention of one sequence: appends its `k`, `v` rows to `cache` and attends
    /// `q` to the cache (causal); returns the attention output `[s, H, dh]`.
    fn self_attention(
        &self,
        cache: &mut KvCache,
        layer: usize,
        [q, k, v]: [Tensor; 3],
        ctx: &mut ExecContext,
    ) -> Result<Tensor, ExecutionError> {
        let (pos, s) = (cache.len, q.shape()[0]);
        let (kc, vc) = &cache.layers[layer];
        let kv =
            self.dispatcher
                .run(&Op::KvAppend { pos }, &[kc.clone(), vc.clone(), k, v], ctx)?;
        let (kc, vc) = kv_pair(kv)?;
        let a = self.run1(
            Op::Sdpa {
                scale: None,
                mask: Mask::Causal,
                q_pos: pos,
                kv_len: Some(pos + s),
            },
            &[q, kc.clone(), vc.clone()],
            ctx,
        )?;
        cache.layers[layer] = (kc, vc);
        Ok(a)
    }

    /// [`Whisper::decode_steps`]; with `capture`, the raw cross-attention scores of the
    /// alignment heads are collected too (word timestamps).
    fn decode_steps_on_pool(
        &self,
        enc: &EncoderOutput,
        caches: &mut [KvCache],
        tokens: &[u32],
        want: &[usize],
        mut capture: Option<&mut words::AlignCapture>,
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        let c = &self.config;
        let (n, d) = (tokens.len(), c.d_model);
        let groups = caches.len();
        if groups == 0 || n % groups != 0 {
            return Err(ExecutionError::ShapeMismatch {
                op: "whisper decoder tokens per sequence".into(),
                expected: vec![groups, n / groups.max(1)],
                got: vec![n],
            });
        }
        let s = n / groups;
        if let Some(over) = caches.iter().find(|k| k.len + s > c.n_text_ctx) {
            return Err(ExecutionError::ContextOverflow {
                max: c.n_text_ctx,
                requested: over.len + s,
            });
        }
        ctx.begin_forward();
        ctx.set_label("decoder embed");
        let ids = Tensor::from_i32(&[n], tokens.iter().map(|&t| t as i32).collect())?;
        let pids = (caches.iter())
            .flat_map(|k| (k.len..k.len + s).map(|p| p as i32))
            .collect();
        let pids = Tensor::from_i32(&[n], pids)?;
        let e = self.run1(Op::Embed, &[ids, self.embed.clone()], ctx)?;
        let p = self.run1(Op::Embed, &[pids, self.dec_pos.clone()], ctx)?;
        let mut x = self.run1(Op::Add, &[e, p], ctx)?;
        let h = c.decoder_heads;
        let split = Op::Split {
            axis: 0,
            sizes: vec![s; groups],
        };
        for (i, l) in self.dec_layers.iter().enumerate() {
            ctx.set_label(&format!("decoder layer {i} self-attention"));
            let nx = self.norm(&x, &l.ln1, ctx)?;
            let q = self.heads(self.linear(&nx, &l.self_attn.q, ctx)?, h, ctx)?;
            let k = self.heads(self.linear(&nx, &l.self_attn.k, ctx)?, h, ctx)?;
            let v = self.heads(self.linear(&nx, &l.self_attn.v, ctx)?, h, ctx)?;
            let a = if groups == 1 {
                self.self_attention(&mut caches[0], i, [q, k, v], ctx)?
            } else {
                let (qs, ks, vs) = (
                    self.dispatcher.run(&split, &[q], ctx)?,
                    self.dispatcher.run(&split, &[k], ctx)?,
                    self.dispatcher.run(&split, &[v], ctx)?,
                );
                let parts = (caches.iter_mut().zip(qs).zip(ks).zip(vs))
                    .map(|(((cache, q), k), v)| self.self_attention(cache, i, [q, k, v], ctx))
                    .collect::<Result<Vec<_>, ExecutionError>>()?;
                self.run1(Op::Concat { axis: 0 }, &parts, ctx)?
            };
            let a = self.run1(Op::Reshape(vec![n, d]), &[a], ctx)?;
            let o = self.linear(&a, &l.self_attn.o, ctx)?;
            x = self.run1(Op::Add, &[x, o], ctx)?;
            ctx.set_label(&format!("decoder layer {i} cross-attention"));
            let nx = self.norm(&x, &l.ln2, ctx)?;
            let q = self.heads(self.linear(&nx, &l.cross.q, ctx)?, h, ctx)?;
            let (ck, cv) = &enc.cross[i];
            if let Some(cap) = capture.as_deref_mut() {
                cap.take(i, &q, ck, self)?;
            }
            let a = self.run1(
                Op::Sdpa {
                    scale: None,
                    mask: Mask::None,
                    q_pos: 0,
                    kv_len: None,
                },
                &[q, ck.clone(), cv.clone()],
                ctx,
            )?;
            let a = self.run1(Op::Reshape(vec![n, d]), &[a], ctx)?;
            let o = self.linear(&a, &l.cross.o, ctx)?;
            x = self.run1(Op::Add, &[x, o], ctx)?;
            ctx.set_label(&format!("decoder layer {i} mlp"));
            let nx = self.norm(&x, &l.ln3, ctx)?;
            let m = self.mlp(&nx, &l.fc1, &l.fc2, ctx)?;
            x = self.run1(Op::Add, &[x, m], ctx)?;
        }
        for cache in caches.iter_mut() {
            cache.len += s;
        }
        ctx.set_label("decoder logits");
        let xs = host(&x, &self.dispatcher)?;
        let mut rows = Vec::with_capacity(want.len() * d);
        for &r in want {
            let row = xs
                .get(r * d..(r + 1) * d)
                .ok_or(ExecutionError::IndexOutOfRange {
                    op: "whisper logits row".into(),
                    index: r as i64,
                    len: n,
                })?;
            rows.extend_from_slice(row);
        }
        let y = Tensor::from_f32(&[want.len(), d], rows)?;
        let y = self.norm(&y, &self.dec_norm, ctx)?;
        let logits = self.run1(Op::Matmul, &[y, self.proj.clone()], ctx)?;
        let lv = host(&logits, &self.dispatcher)?;
        Ok(lv.chunks(c.n_vocab).map(<[f32]>::to_vec).collect())
    }

    /// Makes `dst` a copy of `src`'s filled positions (a beam taking over another's
    /// history): the rows are read back and written with `KvAppend` at 0, so it works
    /// on every backend.
    pub fn copy_cache(
        &self,
        src: &KvCache,
        dst: &mut KvCache,
        ctx: &mut ExecContext,
    ) -> Result<(), ExecutionError> {
        let c = &self.config;
        let (len, dh) = (src.len, c.d_model / c.decoder_heads);
        let row = c.decoder_heads * dh;
        let rows = |t: &Tensor| -> Result<Tensor, ExecutionError> {
            let v = match t.read_f32("whisper kv copy") {
                Ok(v) => v[..len * row].to_vec(),
                Err(_) => {
                    let mut v = self.dispatcher.primary().try_download_f32(t)?;
                    v.truncate(len * row);
                    v
                }
            };
            Tensor::from_f32(&[len, c.decoder_heads, dh], v)
        };
        dst.len = 0;
        if len > 0 {
            for (i, (sk, sv)) in src.layers.iter().enumerate() {
                let (k, v) = (rows(sk)?, rows(sv)?);
                let (dk, dv) = &dst.layers[i];
                let kv = self.dispatcher.run(
                    &Op::KvAppend { pos: 0 },
                    &[dk.clone(), dv.clone(), k, v],
                    ctx,
                )?;
                dst.layers[i] = kv_pair(kv)?;
            }
        }
        dst.len = len;
        Ok(())
    }
}

/// The two caches `KvAppend` returns.
fn kv_pair(kv: Vec<Tensor>) -> Result<(Tensor, Tensor), ExecutionError> {
    let got = kv.len();
    match <[Tensor; 2]>::try_from(kv) {
        Ok([a, b]) => Ok((a, b)),
        Err(_) => Err(ExecutionError::ShapeMismatch {
            op: "KvAppend outputs".into(),
            expected: vec![2],
            got: vec![got],
        }),
    }
}

/// Owner of a widened weight's values, seen as bytes (4-aligned, as f32 reads need).
struct F32Bytes(Vec<f32>);

impl AsRef<[u8]> for F32Bytes {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

/// `w` decoded to f32 and stored as an f32 weight tensor (the cpu matmuls read it in place).
fn f32_weight(w: &Tensor) -> Result<Tensor, ExecutionError> {
    let values = w.read_f32("whisper weight")?.to_vec();
    let len = values.len() * 4;
    let bytes = SharedBytes::new(Arc::new(F32Bytes(values)), 0..len).ok_or_else(|| {
        ExecutionError::ShapeMismatch {
            op: "whisper weight".into(),
            expected: w.shape().to_vec(),
            got: vec![len / 4],
        }
    })?;
    Tensor::from_bytes(w.shape(), DType::F32, bytes, None)
}

/// im2col for a kernel-3, padding-1 convolution: row `t` holds, for each input
/// channel `ch`, the inputs at `stride * t - 1 + k` for `k` in 0..3 (zeros outside),
/// laid out `[ch * 3 + k]` to match the `[Cout, Cin, 3]` weight.
fn im2col(
    out_len: usize,
    channels: usize,
    stride: usize,
    at: impl Fn(usize, usize) -> f32 + Sync,
) -> Vec<f32> {
    use rayon::prelude::*;
    let in_len = out_len * stride;
    let mut cols = vec![0.0f32; out_len * channels * 3];
    cols.par_chunks_mut(channels * 3)
        .enumerate()
        .for_each(|(t, row)| {
            for ch in 0..channels {
                for k in 0..3 {
                    let src = (stride * t + k) as isize - 1;
                    if src >= 0 && (src as usize) < in_len {
                        row[ch * 3 + k] = at(ch, src as usize);
                    }
                }
            }
        });
    cols
}

#[cfg(test)]
mod tests {
    use super::im2col;

    #[test]
    fn im2col_is_a_padded_conv_window() {
        // 1 channel, input [1, 2, 3, 4], stride 2 -> rows for t = 0, 1.
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let c = im2col(2, 1, 2, |_, t| x[t]);
        assert_eq!(c, vec![0.0, 1.0, 2.0, 2.0, 3.0, 4.0]);
    }
}
