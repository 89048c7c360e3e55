//! The WhisperStyle `graph` section: encoder and decoder of [`super::forward`]
//! recorded by the [`RecordingSink`] in one graph.
//!
//! - Inputs: `mel` `[n_mels, 2 n_audio_ctx]` and `audio_positions`
//!   (`0..n_audio_ctx`) for the encoder; `tokens` and `positions` (absolute)
//!   `[S]` for the decoder.
//! - Outputs: `logits` `[S, n_vocab]`, and per decoder layer the
//!   cross-attention values `cross_k.{i}` / `cross_v.{i}` `[n_audio_ctx, H, dh]`
//!   (computed from `mel`, or given to a decoding run).
//! - State: the self-attention KV cache `kv.{i}` of each decoder layer.
//!
//! One window is two runs (`crate::graph::whisper`): the cross values from
//! `mel`, then per decoding step the logits with those values given, so the
//! encoder runs once per window as on the eager path.

use super::{forward, WhisperConfig};
use crate::curated::sink::{record, GraphWeights, RecordingSink};
use crate::error::ExecutionError;
use crate::ir::GraphDoc;
use crate::loader::Config;

/// The graph of a WhisperStyle model with `config`; `has` tells which
/// optional tensors (biases, `proj_out.weight`) the file holds.
pub fn whisper_graph(
    config: &Config,
    has: &dyn Fn(&str) -> bool,
) -> Result<GraphDoc, ExecutionError> {
    let c = WhisperConfig::from_config(config)?;
    let family = "WhisperStyle";
    let weights = forward::bind(&c, &GraphWeights { has, family })?;
    let mut sink = RecordingSink::new(Vec::new());
    let (mel, audio_positions) = ("mel".to_string(), "audio_positions".to_string());
    let cross = forward::encode(&c, &weights, &mut sink, &mel, &audio_positions)?;
    let inputs = forward::DecoderInputs {
        tokens: record::TOKENS.to_string(),
        positions: "positions".to_string(),
        cross: &cross,
    };
    let logits = forward::decode(&c, &weights, &mut sink, inputs, None, None)?;
    let mut outputs = vec![logits];
    outputs.extend(cross.into_iter().flatten());
    let inputs = vec![
        record::input(&mel, "f32", &[c.n_mels as i64, 2 * c.n_audio_ctx as i64]),
        record::input(&audio_positions, "i32", &[c.n_audio_ctx as i64]),
        record::input(record::TOKENS, "i32", &[-1]),
        record::input("positions", "i32", &[-1]),
    ];
    Ok(sink.finish(inputs, outputs))
}
