//! The BertStyle encoder call on the graph executor (the graph itself is the
//! family's forward recorded: [`crate::curated::bert::bert_graph`]).
//!
//! [`encode`] runs one sequence per graph call (no padding needed; the mask
//! is all ones) and assembles the batch's [`Hidden`], so pooling is the
//! curated family's own ([`crate::curated::bert::pool`]).

use super::exec::GraphSession;
use crate::backend::Tensor;
use crate::curated::bert::Hidden;
use crate::error::ExecutionError;

/// The graph inputs of one sequence, in `session`'s input order: `tokens`,
/// `token_types` (all 0), `positions` (`0..S`) and `mask` (1 for the first
/// `real` tokens, 0 for the padding after them).
pub fn encoder_inputs(
    session: &GraphSession,
    ids: &[u32],
    real: usize,
) -> Result<Vec<Tensor>, ExecutionError> {
    let s = ids.len();
    session
        .model()
        .graph()
        .input_decls
        .iter()
        .map(|d| {
            let values: Vec<i32> = match d.name.as_str() {
                "tokens" => ids
                    .iter()
                    .map(|&t| i32::try_from(t).unwrap_or(i32::MAX))
                    .collect(),
                "token_types" => vec![0; s],
                "positions" => (0..s as i32).collect(),
                "mask" => (0..s).map(|i| i32::from(i < real)).collect(),
                other => {
                    return Err(ExecutionError::MissingTensor {
                        name: other.to_string(),
                        required_by: "graph encoder (tokens, token_types, positions, mask)".into(),
                    })
                }
            };
            Tensor::from_i32(&[s], values)
        })
        .collect()
}

/// Runs the encoder graph over `batch` (one graph call per sequence) and
/// returns the final hidden states `[batch, longest, hidden]` (host f32,
/// padding rows zero), as the curated [`crate::curated::bert::Bert::encode`] does.
pub fn encode(session: &mut GraphSession, batch: &[&[u32]]) -> Result<Hidden, ExecutionError> {
    let lengths: Vec<usize> = batch.iter().map(|s| s.len()).collect();
    let longest = lengths.iter().copied().max().unwrap_or(0);
    if batch.is_empty() || lengths.contains(&0) {
        return Err(ExecutionError::ShapeMismatch {
            op: "graph encode (a batch of non-empty token sequences)".into(),
            expected: vec![1],
            got: vec![lengths.iter().copied().min().unwrap_or(0)],
        });
    }
    let mut states: Vec<f32> = Vec::new();
    let mut width = 0;
    for seq in batch {
        session.reset();
        let inputs = encoder_inputs(session, seq, seq.len())?;
        let out = session.run(&inputs, seq.len())?;
        let h = out.first().ok_or_else(|| ExecutionError::MissingTensor {
            name: "hidden".into(),
            required_by: "graph encode".into(),
        })?;
        let values = session.model().dispatcher().primary().try_download_f32(h)?;
        width = h.shape().last().copied().unwrap_or(0);
        if values.len() != seq.len() * width {
            return Err(ExecutionError::ShapeMismatch {
                op: "graph encode (hidden states)".into(),
                expected: vec![seq.len(), width],
                got: h.shape().to_vec(),
            });
        }
        states.extend_from_slice(&values);
        states.resize(states.len() + (longest - seq.len()) * width, 0.0);
    }
    session.reset();
    Ok(Hidden {
        states: Tensor::from_f32(&[batch.len(), longest, width], states)?,
        lengths,
    })
}
