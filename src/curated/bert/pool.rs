//! Pooling of final hidden states and L2 normalization (families.md, BertStyle).

use super::{Hidden, Pooling};
use crate::error::ExecutionError;

/// One vector per sequence of `h`: the first token's state (`cls`), or the
/// mean / element-wise max over its non-padding tokens.
pub fn pool(h: &Hidden, method: Pooling) -> Result<Vec<Vec<f32>>, ExecutionError> {
    let (l, d) = (h.longest(), h.hidden());
    let values = h
        .states
        .as_f32()
        .ok_or_else(|| ExecutionError::UnsupportedOp {
            op: "pool (hidden states must be host f32)".into(),
            backend: "host".into(),
            input_dtype: h.states.dtype(),
        })?;
    if values.len() != h.batch() * l * d || h.lengths.iter().any(|&n| n == 0 || n > l) {
        return Err(ExecutionError::ShapeMismatch {
            op: "pool".into(),
            expected: vec![h.batch(), l, d],
            got: h.states.shape().to_vec(),
        });
    }
    Ok(h.lengths
        .iter()
        .enumerate()
        .map(|(b, &n)| {
            let tokens = values[b * l * d..(b * l + n) * d].chunks_exact(d);
            match method {
                Pooling::Cls => values[b * l * d..][..d].to_vec(),
                Pooling::Mean => {
                    let mut sum = vec![0.0f64; d];
                    for t in tokens {
                        for (s, &x) in sum.iter_mut().zip(t) {
                            *s += x as f64;
                        }
                    }
                    sum.iter().map(|&s| (s / n as f64) as f32).collect()
                }
                Pooling::Max => {
                    let mut max = vec![f32::NEG_INFINITY; d];
                    for t in tokens {
                        for (m, &x) in max.iter_mut().zip(t) {
                            *m = m.max(x);
                        }
                    }
                    max
                }
            }
        })
        .collect())
}

/// Scales `v` to unit Euclidean length (as `torch.nn.functional.normalize`:
/// the norm is clamped below at 1e-12, so a zero vector stays zero).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v
        .iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt();
    let inv = 1.0 / norm.max(1e-12);
    for x in v.iter_mut() {
        *x = (*x as f64 * inv) as f32;
    }
}
