//! WhisperStyle (families.md): speech recognition with an audio encoder and a
//! text decoder. The forward is written once in `forward.rs` (run here through
//! the eager sink on the [`Dispatcher`], so it runs on every backend;
//! recorded as the graph section by [`whisper_graph`]). [`decode`] holds the
//! decoding rules and the long-form loop; [`Whisper::transcribe`] is the entry point.

pub mod beam;
pub mod config;
pub mod decode;
pub(crate) mod forward;
mod graph;
pub mod options;
pub mod words;

pub use config::{SpecialTokens, WhisperConfig};
pub use decode::{Segment, Timings, Transcript};
pub use graph::whisper_graph;
pub use options::TranscribeOptions;
pub use words::Word;

use super::sink::eager::{host, SequenceCaches};
use super::sink::EagerSink;
use super::WeightBinder;
use crate::backend::{Dispatcher, ExecContext, Op, SharedBytes, Tensor};
use crate::dtype::DType;
use crate::error::ExecutionError;
use crate::loader::whisper_names as wn;
use crate::loader::Model;
use crate::tokenizer::Tokenizer;
use forward::{DecoderInputs, WhisperWeights};
use std::sync::Arc;

/// Cross-attention keys and values of one window, per decoder layer (`[n_audio_ctx, H, dh]`).
pub struct EncoderOutput {
    cross: Vec<[Tensor; 2]>,
}

/// Self-attention KV cache of one decoding, `[n_text_ctx, H, dh]` per layer.
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
    weights: WhisperWeights<Tensor>,
}

impl std::fmt::Debug for Whisper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Whisper")
            .field("config", &self.config)
            .finish()
    }
}

impl Whisper {
    /// Binds `model`'s weights; ops run on `dispatcher`'s backends.
    pub fn new(model: Arc<Model>, dispatcher: Dispatcher) -> Result<Whisper, ExecutionError> {
        let config = WhisperConfig::from_config(&model.config)?;
        let tokenizer = Tokenizer::from_model(&model)?;
        let b = WeightBinder::new(model, "WhisperStyle");
        let mut weights = forward::bind(&config, &b)?;
        // The window's matmuls have 1500-3000 rows: on a backend that prefers
        // f32 weights there, they are decoded to f32 once here.
        if dispatcher.primary().capabilities().widened_f32_weights {
            weights.map_window_weights(f32_weight)?;
        }
        let mel_filters = host(&b.need(wn::MEL_FILTERS, true)?, &dispatcher)?.to_vec();
        Ok(Whisper {
            weights,
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
        let mel = Tensor::from_f32(&[c.n_mels, frames], mel.to_vec())?;
        let positions = Tensor::from_i32(&[c.n_audio_ctx], (0..c.n_audio_ctx as i32).collect())?;
        let mut sink = EagerSink::new(&self.dispatcher, ctx, c.n_audio_ctx, None, &[]);
        let cross = forward::encode(c, &self.weights, &mut sink, &mel, &positions)?;
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

    /// [`Whisper::decode_steps`]; with `capture`, the raw cross-attention scores of the
    /// alignment heads are collected too (word timestamps).
    fn decode_steps_on_pool(
        &self,
        enc: &EncoderOutput,
        caches: &mut [KvCache],
        tokens: &[u32],
        want: &[usize],
        capture: Option<&mut words::AlignCapture>,
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        let c = &self.config;
        let n = tokens.len();
        let pos: Vec<usize> = caches.iter().map(|k| k.len).collect();
        let s = decode::rows_per_sequence(n, &pos, c.n_text_ctx)?;
        ctx.begin_forward();
        let ids = Tensor::from_i32(&[n], tokens.iter().map(|&t| t as i32).collect())?;
        let pids = (pos.iter())
            .flat_map(|&p| (p..p + s).map(|p| p as i32))
            .collect();
        let positions = Tensor::from_i32(&[n], pids)?;
        let sequences = SequenceCaches {
            pos,
            layers: caches.iter_mut().map(|k| &mut k.layers[..]).collect(),
        };
        let dispatcher = &self.dispatcher;
        let mut take = capture.map(|cap| {
            move |layer: usize, q: &Tensor, k: &Tensor| cap.take(layer, q, k, dispatcher)
        });
        let observe = take
            .as_mut()
            .map(|f| f as forward::CrossObserver<'_, Tensor>);
        let mut sink = EagerSink::new(dispatcher, ctx, n, None, &[]).with_sequences(sequences);
        let inputs = DecoderInputs {
            tokens: ids,
            positions,
            cross: &enc.cross,
        };
        let logits = forward::decode(c, &self.weights, &mut sink, inputs, Some(want), observe)?;
        for cache in caches.iter_mut() {
            cache.len += s;
        }
        let lv = host(&logits, dispatcher)?;
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
