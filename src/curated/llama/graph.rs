//! The LlamaStyle `graph` section: the family's forward recorded by the
//! [`RecordingSink`], so any imported LlamaStyle model also runs with
//! `--path graph` and on `nox`.

use super::{forward, LlamaConfig, LogitRows};
use crate::curated::sink::{record, GraphWeights, RecordingSink};
use crate::error::ExecutionError;
use crate::ir::ops::RopeFreqs;
use crate::ir::GraphDoc;
use crate::loader::Config;

/// The rope frequencies as `base` when they are the unscaled ones of `base`,
/// else as the explicit list.
fn freqs(inv_freq: &[f64], rot_dim: usize, base: Option<f64>) -> RopeFreqs {
    match base {
        Some(b) if crate::backend::rope_inv_freq(rot_dim, b) == inv_freq => RopeFreqs::Base(b),
        _ => RopeFreqs::List(inv_freq.to_vec()),
    }
}

/// The graph of a LlamaStyle model with `config`: inputs `tokens` (i32 `[S]`)
/// and `pos`, output `logits` `[1, vocab]` of the last token; `has` tells which
/// optional tensors (biases, QK norms, `lm_head.weight`) the file holds.
pub fn llama_graph(
    config: &Config,
    has: &dyn Fn(&str) -> bool,
) -> Result<GraphDoc, ExecutionError> {
    let c = LlamaConfig::from_config(config)?;
    let a = &config.architecture;
    let global_base = Some(a.rope_theta.unwrap_or(10000.0));
    let local_base = a
        .extra
        .get("rope_local_base_freq")
        .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
        .or(global_base);
    let ropes = vec![
        freqs(&c.inv_freq_global, c.rot_dim, global_base),
        freqs(&c.inv_freq_local, c.rot_dim, local_base),
    ];
    let family = "LlamaStyle";
    let weights = forward::bind(&c, &GraphWeights { has, family })?;
    let mut sink = RecordingSink::new(ropes);
    let tokens = record::TOKENS.to_string();
    let logits = forward::forward(&c, &weights, &mut sink, tokens, LogitRows::Last)?;
    Ok(sink.finish_decoder(logits))
}
