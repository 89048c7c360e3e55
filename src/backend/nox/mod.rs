//! The `nox` backend: deterministic, verifiable execution of graph ops
//! (graph.md, "nox"). Graph path only; the CLI refuses it for curated code.
//!
//! Bit-exactness rules every kernel here follows:
//!
//! - f32 values, plain IEEE-754 `+ - * / sqrt` (Rust never contracts to FMA);
//! - every reduction in one fixed order: dot products and sums use 8 lane
//!   accumulators over the index (lane = index mod 8) and then the fixed tree
//!   `((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7))`;
//! - transcendental functions from [`math`] (own polynomials, no libm);
//! - threads only split independent outputs (rows, output features, heads),
//!   never a reduction, so the thread count does not change any bit.
//!
//! Weights of any encoding are decoded row by row with the crate's
//! dequantizers (integer and f32 arithmetic only).

mod image;
pub mod math;

use super::cpu::reference;
use super::tensor::decode_into;
use super::{Backend, BackendConfig, ExecContext, Mask, Op, RopeStyle, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;
use rayon::prelude::*;
use std::sync::Arc;

/// The backend's name in `--backend` and dispatch records.
pub const NAME: &str = "nox";

/// The nox backend with its own thread pool.
pub struct NoxBackend {
    pool: rayon::ThreadPool,
}

/// Starts nox with `config.threads` threads (results do not depend on it).
pub fn init(config: &BackendConfig) -> Result<Arc<dyn Backend>, ExecutionError> {
    let threads = config.threads.max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("cyb-nox-{i}"))
        .build()
        .map_err(|e| ExecutionError::BackendInit {
            backend: NAME.into(),
            reason: format!("cannot start {threads} threads: {e}"),
        })?;
    Ok(Arc::new(NoxBackend { pool }))
}

/// Sum of `a[i] * b[i]` in the fixed order of the module doc.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let n = a.len().min(b.len());
    let (ac, bc) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..8 {
            lanes[l] += x[l] * y[l];
        }
    }
    for l in 0..ar.len() {
        lanes[l] += ar[l] * br[l];
    }
    tree(&lanes)
}

/// Sum of `a[i]` in the fixed order of the module doc.
pub fn sum(a: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let c = a.chunks_exact(8);
    let r = c.remainder();
    for x in c {
        for l in 0..8 {
            lanes[l] += x[l];
        }
    }
    for l in 0..r.len() {
        lanes[l] += r[l];
    }
    tree(&lanes)
}

fn shape_last(s: &[usize]) -> usize {
    s.last().copied().unwrap_or(1)
}

fn tree(l: &[f32; 8]) -> f32 {
    ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

fn silu(x: f32) -> f32 {
    x / (1.0 + math::exp(-x))
}

fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + math::erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

fn gelu_tanh(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2/pi)
    0.5 * x * (1.0 + math::tanh(K * (x + 0.044715 * x * x * x)))
}

fn unary(op: &Op, x: f32) -> f32 {
    match op {
        Op::Scale(s) => x * s,
        Op::Clamp { lo, hi } => x.max(*lo).min(*hi),
        Op::Silu => silu(x),
        Op::Gelu => gelu(x),
        Op::GeluTanh => gelu_tanh(x),
        Op::Relu => x.max(0.0),
        Op::LeakyRelu(s) => {
            if x > 0.0 {
                x
            } else {
                s * x
            }
        }
        Op::Sigmoid => 1.0 / (1.0 + math::exp(-x)),
        Op::Tanh => math::tanh(x),
        Op::Softcap(c) => c * math::tanh(x / c),
        Op::Sqrt => x.sqrt(),
        Op::Log => math::ln64(x as f64) as f32,
        Op::Exp => math::exp(x),
        Op::Cos => math::sincos64(x as f64).1 as f32,
        Op::Sin => math::sincos64(x as f64).0 as f32,
        Op::Reciprocal => 1.0 / x,
        Op::Neg => -x,
        Op::Erf => math::erf(x),
        Op::PowScalar(p) => pow_scalar(x, *p),
        Op::Softplus => x.max(0.0) + math::ln64(1.0 + math::exp(-x.abs()) as f64) as f32,
        Op::Ceil => x.ceil(),
        _ => x,
    }
}

/// `n` standard normal draws of nox's own generator: the reference's Box-Muller over
/// SplitMix64 with nox's `ln64` and `sincos64` (the same bits on every machine).
fn normals(seed: u64, n: usize) -> Vec<f32> {
    crate::backend::cpu::reference::box_muller(seed, n, math::ln64, math::sincos64)
}

/// `x^p` as the reference defines it (`p = 2`: `x * x`, `p = 0.5`: `sqrt x`,
/// `p = 1`: `x`), else `e^(p ln |x|)` with the sign of `x` for odd integer
/// `p`, NaN for `x < 0` and a fractional `p`.
fn pow_scalar(x: f32, p: f32) -> f32 {
    if p == 2.0 {
        return x * x;
    }
    if p == 0.5 {
        return x.sqrt();
    }
    if p == 1.0 {
        return x;
    }
    if p == 0.0 {
        return 1.0;
    }
    if x == 0.0 {
        return if p > 0.0 { 0.0 } else { f32::INFINITY };
    }
    let magnitude = math::powf64((x as f64).abs(), p as f64) as f32;
    if x > 0.0 {
        magnitude
    } else if p.fract() != 0.0 {
        f32::NAN
    } else if (p as i64) % 2 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// Every op nox implements itself (the rest of the graph ops are rejected by
/// [`Backend::supports`]; nox has no fallback).
fn implemented(op: &Op) -> bool {
    matches!(
        op,
        Op::Matmul
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Scale(_)
            | Op::Clamp { .. }
            | Op::Reshape(_)
            | Op::Permute(_)
            | Op::Concat { .. }
            | Op::Slice { .. }
            | Op::Split { .. }
            | Op::RmsNorm { .. }
            | Op::LayerNorm { .. }
            | Op::Rope { .. }
            | Op::Silu
            | Op::Gelu
            | Op::GeluTanh
            | Op::Relu
            | Op::LeakyRelu(_)
            | Op::Sigmoid
            | Op::Tanh
            | Op::Softcap(_)
            | Op::SwiGlu
            | Op::GeGlu
            | Op::Softmax
            | Op::Sdpa { .. }
            | Op::KvAppend { .. }
            | Op::Embed
            | Op::Argmax
            | Op::Sample(_)
            | Op::Conv1d { .. }
            | Op::Conv2d { .. }
            | Op::BatchMatmul
            | Op::AvgPool2d { .. }
            | Op::ResizeNearest { .. }
            | Op::GroupNorm { .. }
            | Op::GroupNormAffine { .. }
            | Op::Sqrt
            | Op::Log
            | Op::Exp
            | Op::Cos
            | Op::Sin
            | Op::Reciprocal
            | Op::Neg
            | Op::Erf
            | Op::PowScalar(_)
            | Op::Softplus
            | Op::Ceil
            | Op::ConvTranspose2d { .. }
    ) || op.is_index_op()
}

/// `Conv1d` (ops.md) as one fixed-order [`dot`] per output value over the
/// window `[Cin * K]` (zeros outside the input), plus the bias; output
/// channels split across threads, each value computed sequentially.
fn conv1d(
    pool: &rayon::ThreadPool,
    x: &[f32],
    x_shape: &[usize],
    w: &[f32],
    w_shape: &[usize],
    bias: Option<&[f32]>,
    (stride, padding): (usize, usize),
) -> Vec<f32> {
    let (cin, len) = (x_shape[0], x_shape[1]);
    let (cout, k) = (w_shape[0], w_shape[2]);
    let lout = (len + 2 * padding - k) / stride + 1;
    let mut cols = vec![0.0f32; lout * cin * k];
    for (t, col) in cols.chunks_mut(cin * k).enumerate() {
        for c in 0..cin {
            for j in 0..k {
                let src = (t * stride + j) as isize - padding as isize;
                if src >= 0 && (src as usize) < len {
                    col[c * k + j] = x[c * len + src as usize];
                }
            }
        }
    }
    let rows: Vec<Vec<f32>> = pool.install(|| {
        (0..cout)
            .into_par_iter()
            .map(|o| {
                let wr = &w[o * cin * k..(o + 1) * cin * k];
                let b = bias.map_or(0.0, |b| b[o]);
                cols.chunks(cin * k).map(|col| dot(col, wr) + b).collect()
            })
            .collect()
    });
    rows.concat()
}

/// `Sample` (ops.md) with this backend's exp: repetition penalty, greedy
/// argmax at temperature 0 (ties to the lowest id), else top-k, top-p,
/// min-p over probabilities summed in one fixed order, and the caller's draw.
fn sample(logits: &[f32], history: &[i32], p: &super::SampleParams) -> i32 {
    let mut l = logits.to_vec();
    if p.repeat_penalty != 1.0 {
        let start = history.len().saturating_sub(p.repeat_last_n);
        let mut seen = std::collections::BTreeSet::new();
        for &id in &history[start..] {
            if id >= 0 && (id as usize) < l.len() && seen.insert(id) {
                let v = &mut l[id as usize];
                *v = if *v > 0.0 {
                    *v / p.repeat_penalty
                } else {
                    *v * p.repeat_penalty
                };
            }
        }
    }
    if p.temperature <= 0.0 {
        let mut best = 0;
        for (i, &v) in l.iter().enumerate() {
            if v > l[best] {
                best = i;
            }
        }
        return best as i32;
    }
    let mut cand: Vec<(usize, f32)> = l
        .iter()
        .enumerate()
        .map(|(i, &v)| (i, v / p.temperature))
        .collect();
    cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if p.top_k > 0 {
        cand.truncate(p.top_k);
    }
    let max = cand[0].1;
    let mut probs: Vec<f64> = cand
        .iter()
        .map(|c| math::exp64((c.1 - max) as f64))
        .collect();
    let total: f64 = probs.iter().fold(0.0, |a, &b| a + b);
    probs.iter_mut().for_each(|x| *x /= total);
    if p.top_p < 1.0 {
        let mut cum = 0.0;
        let mut keep = probs.len();
        for (i, x) in probs.iter().enumerate() {
            cum += x;
            if cum >= p.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
        probs.truncate(keep);
    }
    if p.min_p > 0.0 {
        let floor = p.min_p as f64 * probs[0];
        let keep = probs.iter().take_while(|&&x| x >= floor).count().max(1);
        probs.truncate(keep);
    }
    let total: f64 = probs.iter().fold(0.0, |a, &b| a + b);
    let target = p.u as f64 * total;
    let mut cum = 0.0;
    for (i, x) in probs.iter().enumerate() {
        cum += x;
        if target < cum {
            return cand[i].0 as i32;
        }
    }
    cand[probs.len() - 1].0 as i32
}

fn host_err(t: &Tensor, op: &str) -> ExecutionError {
    ExecutionError::UnsupportedOp {
        op: format!("{op} (input not in host memory)"),
        backend: NAME.into(),
        input_dtype: t.dtype(),
    }
}

/// Row `r` of a 2-D weight of any encoding, decoded into `out` (`len = cols`).
fn weight_row(w: &Tensor, r: usize, out: &mut [f32], op: &str) -> Result<(), ExecutionError> {
    let cols = out.len();
    if let Some(v) = w.as_f32() {
        out.copy_from_slice(&v[r * cols..(r + 1) * cols]);
        return Ok(());
    }
    let bytes = w.as_bytes().ok_or_else(|| host_err(w, op))?;
    let rb = w
        .dtype()
        .byte_size(&[cols])
        .ok_or_else(|| ExecutionError::WeightFormatMismatch {
            name: format!("{op} weight row of {cols}"),
            declared: w.dtype(),
            actual_bytes: bytes.len(),
        })? as usize;
    decode_into(w.dtype(), &bytes[r * rb..(r + 1) * rb], w.scale(), out)
}

impl NoxBackend {
    fn out(shape: &[usize], values: Vec<f32>) -> Result<Vec<Tensor>, ExecutionError> {
        Ok(vec![Tensor::from_f32(shape, values)?])
    }

    fn matmul(&self, x: &[f32], w: &Tensor, shape: &[usize]) -> Result<Vec<f32>, ExecutionError> {
        let (n, k) = (w.shape()[0], w.shape()[1]);
        let m = x.len() / k.max(1);
        // Output features split across threads; each dot product is sequential.
        let cols: Vec<Result<Vec<f32>, ExecutionError>> = self.pool.install(|| {
            (0..n)
                .into_par_iter()
                .map_init(
                    || vec![0.0f32; k],
                    |row, j| {
                        weight_row(w, j, row, "Matmul")?;
                        Ok((0..m).map(|i| dot(&x[i * k..(i + 1) * k], row)).collect())
                    },
                )
                .collect()
        });
        let mut y = vec![0.0f32; shape.iter().product()];
        for (j, col) in cols.into_iter().enumerate() {
            for (i, v) in col?.into_iter().enumerate() {
                y[i * n + j] = v;
            }
        }
        Ok(y)
    }

    fn binary(
        op: &Op,
        a: &TensorInfo,
        av: &[f32],
        b: &TensorInfo,
        bv: &[f32],
        out: &[usize],
    ) -> Vec<f32> {
        let rank = out.len();
        let strides = |s: &[usize]| {
            let mut st = vec![0usize; rank];
            let mut acc = 1;
            for i in (0..s.len()).rev() {
                let o = rank - s.len() + i;
                st[o] = if s[i] == 1 { 0 } else { acc };
                acc *= s[i];
            }
            st
        };
        let (sa, sb) = (strides(&a.shape), strides(&b.shape));
        let f = |x: f32, y: f32| match op {
            Op::Add => x + y,
            Op::Sub => x - y,
            Op::Mul => x * y,
            _ => x / y,
        };
        let total: usize = out.iter().product();
        let mut idx = vec![0usize; rank];
        let mut y = Vec::with_capacity(total);
        for _ in 0..total {
            let (mut ia, mut ib) = (0, 0);
            for d in 0..rank {
                ia += idx[d] * sa[d];
                ib += idx[d] * sb[d];
            }
            y.push(f(av[ia], bv[ib]));
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < out[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        y
    }

    fn rms_norm(x: &[f32], g: &[f32], eps: f32, add_one: bool) -> Vec<f32> {
        let d = g.len().max(1);
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks(d) {
            let ms = dot(row, row) / d as f32;
            let inv = 1.0 / (ms + eps).sqrt();
            for (v, &gi) in row.iter().zip(g) {
                let gain = if add_one { 1.0 + gi } else { gi };
                y.push(v * inv * gain);
            }
        }
        y
    }

    fn layer_norm(x: &[f32], g: &[f32], b: Option<&[f32]>, eps: f32) -> Vec<f32> {
        let d = g.len().max(1);
        let mut y = Vec::with_capacity(x.len());
        let mut centered = vec![0.0f32; d];
        for row in x.chunks(d) {
            let mean = sum(row) / d as f32;
            for (c, &v) in centered.iter_mut().zip(row) {
                *c = v - mean;
            }
            let var = dot(&centered, &centered) / d as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for (i, &c) in centered.iter().enumerate() {
                y.push(c * inv * g[i] + b.map_or(0.0, |b| b[i]));
            }
        }
        y
    }

    fn softmax_row(row: &mut [f32]) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        if max == f32::NEG_INFINITY {
            row.iter_mut().for_each(|v| *v = 0.0);
            return;
        }
        for v in row.iter_mut() {
            *v = math::exp(*v - max);
        }
        let s = sum(row);
        for v in row.iter_mut() {
            *v /= s;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rope(
        x: &[f32],
        shape: &[usize],
        style: RopeStyle,
        rot: usize,
        pos: usize,
        base: f32,
        cache: Option<(&[f32], &[f32])>,
    ) -> Vec<f32> {
        let (s, h, d) = (shape[0], shape[1], shape[2]);
        let half = rot / 2;
        let inv = math::rope_inv_freq(rot, base as f64);
        let mut y = x.to_vec();
        let mut cs = vec![(0.0f32, 0.0f32); half];
        for si in 0..s {
            let p = pos + si;
            for (j, c) in cs.iter_mut().enumerate() {
                *c = match cache {
                    Some((cos, sin)) => (cos[p * half + j], sin[p * half + j]),
                    None => {
                        let (sn, cn) = math::sincos64(p as f64 * inv[j]);
                        (cn as f32, sn as f32)
                    }
                };
            }
            for hi in 0..h {
                let row = &mut y[(si * h + hi) * d..(si * h + hi + 1) * d];
                for (j, &(c, sn)) in cs.iter().enumerate() {
                    let (a, b) = match style {
                        RopeStyle::Neox => (j, j + half),
                        RopeStyle::Normal => (2 * j, 2 * j + 1),
                    };
                    let (x1, x2) = (row[a], row[b]);
                    row[a] = x1 * c - x2 * sn;
                    row[b] = x1 * sn + x2 * c;
                }
            }
        }
        y
    }

    #[allow(clippy::too_many_arguments)]
    fn sdpa(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        qs: &[usize],
        kvh: usize,
        dv: usize,
        scale: f32,
        mask: &Mask,
        q_pos: usize,
        kv_len: usize,
    ) -> Vec<f32> {
        let (sq, h, d) = (qs[0], qs[1], qs[2]);
        let group = h / kvh.max(1);
        let rows: Vec<Vec<f32>> = self.pool.install(|| {
            (0..sq * h)
                .into_par_iter()
                .map(|ih| {
                    let (i, hi) = (ih / h, ih % h);
                    let kh = hi / group;
                    let p = q_pos + i;
                    let (lo, hi_end) = match mask {
                        Mask::None | Mask::Padding(_) => (0, kv_len),
                        Mask::Causal => (0, (p + 1).min(kv_len)),
                        Mask::Sliding(w) => ((p + 1).saturating_sub(*w), (p + 1).min(kv_len)),
                    };
                    let qrow = &q[(i * h + hi) * d..(i * h + hi + 1) * d];
                    let mut scores: Vec<f32> = (lo..hi_end)
                        .map(|j| {
                            let keep = match mask {
                                Mask::Padding(m) => m[j],
                                _ => true,
                            };
                            if keep {
                                dot(qrow, &k[(j * kvh + kh) * d..(j * kvh + kh + 1) * d]) * scale
                            } else {
                                f32::NEG_INFINITY
                            }
                        })
                        .collect();
                    Self::softmax_row(&mut scores);
                    let mut o = vec![0.0f32; dv];
                    for (t, j) in (lo..hi_end).enumerate() {
                        let vrow = &v[(j * kvh + kh) * dv..(j * kvh + kh + 1) * dv];
                        for (oi, &vi) in o.iter_mut().zip(vrow) {
                            *oi += scores[t] * vi;
                        }
                    }
                    o
                })
                .collect()
        });
        rows.concat()
    }
}

impl Backend for NoxBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn supports(&self, op: &Op, inputs: &[TensorInfo]) -> bool {
        implemented(op) && op.infer(inputs).is_ok()
    }

    fn execute(
        &self,
        op: &Op,
        inputs: &[Tensor],
        _ctx: &mut ExecContext,
    ) -> Result<Vec<Tensor>, ExecutionError> {
        let infos: Vec<TensorInfo> = inputs.iter().map(|t| t.info().clone()).collect();
        let outs = op.infer(&infos)?;
        crate::backend::alloc::check_host_room("nox", &outs)?;
        let name = op.name();
        let shape = outs[0].shape.as_slice();
        if let Op::RandomNormalLike { mean, scale, seed } = op {
            let z = normals(*seed, outs[0].numel());
            return Self::out(shape, z.iter().map(|&v| mean + scale * v).collect());
        }
        // Integer, index and data-movement ops are exact; the reference's sums (Reduce,
        // CumSum, ConvTranspose2d) run in a fixed order on one thread, in f64: the same
        // bits on every run, thread count and machine.
        let exact = op.is_index_op() || matches!(op, Op::ConvTranspose2d { .. });
        if exact || inputs.iter().any(|t| t.as_i64().is_some()) {
            return crate::backend::cpu::reference::execute(op, inputs);
        }
        let read = |i: usize| inputs[i].read_f32(name);
        match op {
            Op::Matmul => {
                let x = read(0)?;
                Self::out(shape, self.matmul(&x, &inputs[1], shape)?)
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                let (a, b) = (read(0)?, read(1)?);
                Self::out(shape, Self::binary(op, &infos[0], &a, &infos[1], &b, shape))
            }
            op if op.is_unary_map() => {
                let x = read(0)?;
                Self::out(shape, x.iter().map(|&v| unary(op, v)).collect())
            }
            Op::SwiGlu | Op::GeGlu => {
                let (g, u) = (read(0)?, read(1)?);
                let act = if *op == Op::SwiGlu { silu } else { gelu };
                Self::out(
                    shape,
                    g.iter().zip(u.iter()).map(|(&a, &b)| act(a) * b).collect(),
                )
            }
            Op::Softmax => {
                let mut x = read(0)?.to_vec();
                let d = shape.last().copied().unwrap_or(1).max(1);
                x.chunks_mut(d).for_each(Self::softmax_row);
                Self::out(shape, x)
            }
            Op::RmsNorm { eps, add_one } => {
                let (x, g) = (read(0)?, read(1)?);
                Self::out(shape, Self::rms_norm(&x, &g, *eps, *add_one))
            }
            Op::LayerNorm { eps } => {
                let (x, g) = (read(0)?, read(1)?);
                let b = if inputs.len() == 3 {
                    Some(read(2)?)
                } else {
                    None
                };
                Self::out(shape, Self::layer_norm(&x, &g, b.as_deref(), *eps))
            }
            Op::Rope {
                style,
                rot_dim,
                pos,
                base,
            } => {
                let x = read(0)?;
                let cache = if inputs.len() == 3 {
                    Some((read(1)?, read(2)?))
                } else {
                    None
                };
                let c = cache.as_ref().map(|(c, s)| (&**c, &**s));
                Self::out(
                    shape,
                    Self::rope(&x, shape, *style, *rot_dim, *pos, *base, c),
                )
            }
            Op::Sdpa {
                scale,
                mask,
                q_pos,
                kv_len,
            } => {
                let (q, k, v) = (read(0)?, read(1)?, read(2)?);
                let d = infos[0].shape[2];
                let scale = scale.unwrap_or(1.0 / (d as f32).sqrt());
                let y = self.sdpa(
                    &q,
                    &k,
                    &v,
                    &infos[0].shape,
                    infos[1].shape[1],
                    infos[2].shape[2],
                    scale,
                    mask,
                    *q_pos,
                    kv_len.unwrap_or(infos[1].shape[0]),
                );
                Self::out(shape, y)
            }
            Op::Conv1d { stride, padding } => {
                let b = match inputs.get(2) {
                    Some(t) => Some(t.read_f32(name)?),
                    None => None,
                };
                let y = conv1d(
                    &self.pool,
                    &read(0)?,
                    &infos[0].shape,
                    &read(1)?,
                    &infos[1].shape,
                    b.as_deref(),
                    (*stride, *padding),
                );
                Self::out(shape, y)
            }
            Op::Conv2d {
                stride,
                pads,
                dilation,
                groups,
            } => {
                let b = match inputs.get(2) {
                    Some(t) => Some(t.read_f32(name)?),
                    None => None,
                };
                let args = image::Conv2d {
                    x_shape: &infos[0].shape,
                    w_shape: &infos[1].shape,
                    out_shape: shape,
                    stride: *stride,
                    pads: *pads,
                    dilation: *dilation,
                    groups: *groups,
                };
                let y = image::conv2d(&self.pool, &args, &read(0)?, &read(1)?, b.as_deref());
                Self::out(shape, y)
            }
            Op::BatchMatmul => {
                let y = image::batch_matmul(
                    &self.pool,
                    &read(0)?,
                    &infos[0].shape,
                    &read(1)?,
                    &infos[1].shape,
                    shape,
                );
                Self::out(shape, y)
            }
            Op::Embed => {
                let ids = inputs[0]
                    .as_i32()
                    .ok_or_else(|| host_err(&inputs[0], name))?;
                let table = &inputs[1];
                let (rows, dim) = (table.shape()[0], table.shape()[1]);
                let mut y = vec![0.0f32; ids.len() * dim];
                for (i, &id) in ids.iter().enumerate() {
                    let r = usize::try_from(id).ok().filter(|&r| r < rows).ok_or(
                        ExecutionError::IndexOutOfRange {
                            op: name.into(),
                            index: id as i64,
                            len: rows,
                        },
                    )?;
                    weight_row(table, r, &mut y[i * dim..(i + 1) * dim], name)?;
                }
                Self::out(shape, y)
            }
            Op::Sample(params) => {
                let x = read(0)?;
                let v = shape_last(&infos[0].shape);
                let history = match inputs.get(1) {
                    Some(h) => h.as_i32().ok_or_else(|| host_err(h, name))?,
                    None => &[],
                };
                let id = sample(&x[x.len() - v..], history, params);
                Ok(vec![Tensor::from_i32(&[1], vec![id])?])
            }
            // Layout ops, KvAppend and Argmax only move or compare values:
            // the reference loops are exact. Pooling and group norms are
            // sequential f64 sums, `/` and `sqrt` there: one fixed order, IEEE
            // operations only, so they are bit-exact too.
            Op::AvgPool2d { .. }
            | Op::ResizeNearest { .. }
            | Op::GroupNorm { .. }
            | Op::GroupNormAffine { .. }
            | Op::Reshape(_)
            | Op::Permute(_)
            | Op::Concat { .. }
            | Op::Slice { .. }
            | Op::Split { .. }
            | Op::KvAppend { .. }
            | Op::Argmax => reference::execute(op, inputs),
            _ => Err(ExecutionError::UnsupportedOp {
                op: name.into(),
                backend: NAME.into(),
                input_dtype: infos.first().map_or(DType::F32, |i| i.dtype),
            }),
        }
    }

    fn alloc(&self, shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        super::cpu::host_alloc(NAME, shape, dtype)
    }

    fn upload(&self, data: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        super::cpu::host_upload(data, shape, dtype)
    }

    fn download_f32(&self, t: &Tensor) -> Vec<f32> {
        t.read_f32("download")
            .map_or_else(|_| Vec::new(), |v| v.to_vec())
    }
}
