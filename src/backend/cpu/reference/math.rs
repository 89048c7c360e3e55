//! Reference arithmetic: matmul, element-wise functions, softmax, embedding,
//! conv1d, argmax and sampling.

use crate::backend::op::{Op, SampleParams};
use crate::error::ExecutionError;

/// `erf` (libm, pure Rust and platform independent).
pub fn erf(x: f32) -> f32 {
    libm::erff(x)
}

/// `x / (1 + exp(-x))`.
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Exact GELU, `0.5 x (1 + erf(x / sqrt 2))`.
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// Tanh-approximated GELU, `0.5 x (1 + tanh(u))` with `u = sqrt(2/pi) (x + 0.044715 x^3)`,
/// evaluated in f64 as the equal `x / (1 + e^(-2u))`, which keeps its relative
/// accuracy in the negative tail (where `1 + tanh(u)` cancels in f32).
pub fn gelu_tanh(x: f32) -> f32 {
    let x = x as f64;
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    (x / (1.0 + (-2.0 * u).exp())) as f32
}

/// One element-wise op applied to one value.
pub(super) fn unary(op: &Op, x: f32) -> f32 {
    match *op {
        Op::Scale(s) => x * s,
        Op::Clamp { lo, hi } => x.max(lo).min(hi),
        Op::NanToNum {
            nan,
            pos_inf,
            neg_inf,
        } => {
            if x.is_nan() {
                nan
            } else if x == f32::INFINITY {
                pos_inf
            } else if x == f32::NEG_INFINITY {
                neg_inf
            } else {
                x
            }
        }
        Op::Silu => silu(x),
        Op::Gelu => gelu(x),
        Op::GeluTanh => gelu_tanh(x),
        Op::Relu => x.max(0.0),
        Op::LeakyRelu(slope) => {
            if x > 0.0 {
                x
            } else {
                slope * x
            }
        }
        Op::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Op::Tanh => x.tanh(),
        Op::Softcap(c) => c * (x / c).tanh(),
        Op::Sqrt => x.sqrt(),
        Op::Log => x.ln(),
        Op::Exp => x.exp(),
        Op::Cos => x.cos(),
        Op::Sin => x.sin(),
        Op::Reciprocal => 1.0 / x,
        Op::Neg => -x,
        Op::Erf => erf(x),
        Op::PowScalar(p) => pow_scalar(x, p),
        Op::Softplus => softplus(x),
        Op::Ceil => x.ceil(),
        _ => x,
    }
}

/// `x^p`; `p = 2` is `x * x` (exact, as exporters write squares), `p = 0.5` is `sqrt`.
pub fn pow_scalar(x: f32, p: f32) -> f32 {
    if p == 2.0 {
        x * x
    } else if p == 0.5 {
        x.sqrt()
    } else if p == 1.0 {
        x
    } else {
        x.powf(p)
    }
}

/// `y[r, n] = sum_k x[r, k] w[n, k]` for `rows` rows of x and `w` of shape `[N, K]`.
pub(super) fn matmul(x: &[f32], rows: usize, w: &[f32], w_shape: &[usize]) -> Vec<f32> {
    let (n, k) = (w_shape[0], w_shape[1]);
    let mut y = vec![0.0; rows * n];
    for r in 0..rows {
        for j in 0..n {
            let mut acc = 0.0f64;
            for i in 0..k {
                acc += x[r * k + i] as f64 * w[j * k + i] as f64;
            }
            y[r * n + j] = acc as f32;
        }
    }
    y
}

/// Softmax of each row of length `d`; a row of all `-inf` gives zeros.
pub(super) fn softmax_rows(x: &[f32], d: usize) -> Vec<f32> {
    let mut y = vec![0.0; x.len()];
    for (xr, yr) in x.chunks(d.max(1)).zip(y.chunks_mut(d.max(1))) {
        let max = xr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if max == f32::NEG_INFINITY {
            continue;
        }
        let mut sum = 0.0f64;
        for (o, &v) in yr.iter_mut().zip(xr) {
            *o = (v - max).exp();
            sum += *o as f64;
        }
        for o in yr.iter_mut() {
            *o = (*o as f64 / sum) as f32;
        }
    }
    y
}

/// Rows `ids` of `table` (`vocab` rows).
pub(super) fn embed(ids: &[i32], table: &[f32], vocab: usize) -> Result<Vec<f32>, ExecutionError> {
    let d = table.len() / vocab.max(1);
    let mut out = Vec::with_capacity(ids.len() * d);
    for &id in ids {
        if id < 0 || id as usize >= vocab {
            return Err(ExecutionError::IndexOutOfRange {
                op: "Embed".into(),
                index: id as i64,
                len: vocab,
            });
        }
        out.extend_from_slice(&table[id as usize * d..(id as usize + 1) * d]);
    }
    Ok(out)
}

/// `y[o, t] = b[o] + sum_{c, j} w[o, c, j] x[c, t*stride + j - pad]` (zeros outside x).
pub(super) fn conv1d(
    x: &[f32],
    x_shape: &[usize],
    w: &[f32],
    w_shape: &[usize],
    b: Option<&[f32]>,
    stride: usize,
    pad: usize,
) -> Vec<f32> {
    let (cin, len) = (x_shape[0], x_shape[1]);
    let (cout, kw) = (w_shape[0], w_shape[2]);
    let lout = (len + 2 * pad - kw) / stride + 1;
    let mut y = vec![0.0; cout * lout];
    for o in 0..cout {
        for t in 0..lout {
            let mut acc = b.map_or(0.0, |b| b[o] as f64);
            for c in 0..cin {
                for j in 0..kw {
                    let pos = (t * stride + j) as isize - pad as isize;
                    if pos >= 0 && (pos as usize) < len {
                        acc += w[(o * cin + c) * kw + j] as f64 * x[c * len + pos as usize] as f64;
                    }
                }
            }
            y[o * lout + t] = acc as f32;
        }
    }
    y
}

/// Index of the largest value (ties and NaN: the lowest index wins).
pub(super) fn argmax(row: &[f32]) -> i32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as i32
}

/// ops.md `Sample`: repetition penalty, temperature (0 = greedy), top-k,
/// top-p, min-p, renormalize, then pick with the draw `params.u`.
pub fn sample(logits: &[f32], history: &[i32], params: &SampleParams) -> i32 {
    let mut l = logits.to_vec();
    if params.repeat_penalty != 1.0 {
        let start = history.len().saturating_sub(params.repeat_last_n);
        let mut seen = std::collections::BTreeSet::new();
        for &id in &history[start..] {
            if id >= 0 && (id as usize) < l.len() && seen.insert(id) {
                let v = &mut l[id as usize];
                *v = if *v > 0.0 {
                    *v / params.repeat_penalty
                } else {
                    *v * params.repeat_penalty
                };
            }
        }
    }
    if params.temperature <= 0.0 {
        return argmax(&l);
    }
    // Candidates by probability, highest first; ties to the lowest id.
    let mut cand: Vec<(usize, f32)> = l
        .iter()
        .enumerate()
        .map(|(i, &v)| (i, v / params.temperature))
        .collect();
    cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if params.top_k > 0 {
        cand.truncate(params.top_k);
    }
    let max = cand[0].1;
    let mut probs: Vec<f64> = cand.iter().map(|c| ((c.1 - max) as f64).exp()).collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    if params.top_p < 1.0 {
        let mut cum = 0.0;
        let mut keep = probs.len();
        for (i, p) in probs.iter().enumerate() {
            cum += p;
            if cum >= params.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
        probs.truncate(keep);
    }
    if params.min_p > 0.0 {
        let floor = params.min_p as f64 * probs[0];
        let keep = probs.iter().take_while(|&&p| p >= floor).count().max(1);
        probs.truncate(keep);
    }
    let total: f64 = probs.iter().sum();
    let target = params.u as f64 * total;
    let mut cum = 0.0;
    for (i, p) in probs.iter().enumerate() {
        cum += p;
        if target < cum {
            return cand[i].0 as i32;
        }
    }
    cand[probs.len() - 1].0 as i32
}

/// `ln(1 + e^x)` as `max(x, 0) + ln(1 + e^-|x|)` (no overflow for large `x`).
pub fn softplus(x: f32) -> f32 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// `n` standard normal draws: Box-Muller over a SplitMix64 stream started at `seed`
/// (two uniforms in (0, 1] per pair of draws, computed in f64), with the
/// logarithm `ln` and `sincos` (sine, cosine) given.
pub(crate) fn box_muller(
    seed: u64,
    n: usize,
    ln: fn(f64) -> f64,
    sincos: fn(f64) -> (f64, f64),
) -> Vec<f32> {
    let mut state = seed;
    let mut uniform = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    };
    let mut out = Vec::with_capacity(n + 1);
    while out.len() < n {
        let (u1, u2) = (uniform(), uniform());
        let r = (-2.0 * ln(u1)).sqrt();
        let (sin, cos) = sincos(std::f64::consts::TAU * u2);
        out.push((r * cos) as f32);
        out.push((r * sin) as f32);
    }
    out.truncate(n);
    out
}

/// [`box_muller`] with the standard library's `ln` and `sin_cos`.
pub(crate) fn normals(seed: u64, n: usize) -> Vec<f32> {
    box_muller(seed, n, f64::ln, f64::sin_cos)
}
