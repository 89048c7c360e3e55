//! The BertStyle `graph` section: the encoder recorded by the
//! [`RecordingSink`] for one sequence per call: inputs `tokens`,
//! `token_types`, `positions` (0-based; RoBERTa's position offset is a `Slice`
//! of the position table) and the padding `mask` (i32, nonzero = a real
//! token), all `[S]`; output the final hidden states `[S, hidden_size]`.

use super::{forward, BertConfig};
use crate::curated::sink::{record, GraphWeights, RecordingSink};
use crate::error::ExecutionError;
use crate::ir::GraphDoc;
use crate::loader::Config;

/// The graph of a BertStyle model with `config`; `has` tells whether the
/// optional token-type table is in the file.
pub fn bert_graph(config: &Config, has: &dyn Fn(&str) -> bool) -> Result<GraphDoc, ExecutionError> {
    let c = BertConfig::from_config(config)?;
    let family = "BertStyle";
    let weights = forward::bind(&c, &GraphWeights { has, family })?;
    let mut sink = RecordingSink::new(Vec::new());
    let inputs = forward::EncoderInputs {
        tokens: record::TOKENS.to_string(),
        positions: "positions".to_string(),
        token_types: "token_types".to_string(),
    };
    let hidden = forward::forward(&c, &weights, &mut sink, inputs)?;
    Ok(sink.finish_encoder(hidden))
}
