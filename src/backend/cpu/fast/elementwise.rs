//! Fast element-wise ops, norms and softmax, parallel over rows when large.

use super::super::kernels::gelu::{erf, gelu};
use super::super::reference::silu;
use super::super::simd;
use super::par::chunks;
use crate::backend::Op;
use rayon::ThreadPool;

/// Elements per parallel task of the element-wise maps.
const CHUNK: usize = 16 * 1024;

/// Transcendental functions cost about this many multiply-adds.
const TRANSCENDENTAL: usize = 16;

/// Lanes of the per-row partial sums of [`layer_norm`] (one AVX-512 vector).
const LANES: usize = 16;

/// Runs `f` compiled for AVX-512F where the CPU has it: its loops (inlined into
/// the wrapper) then vectorize 16 lanes wide instead of the baseline's 4. `f` must be
/// a closure marked `#[inline(always)]`: otherwise LLVM may keep it a function of its
/// own, compiled for the baseline (the wrapper then gains nothing). Every
/// element-wise map computes the same operations in the same order either way,
/// so results do not depend on the path.
#[inline(always)]
pub(super) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if super::super::kernels::avx512_detected() {
        // SAFETY: the CPU has AVX-512F (checked above).
        return unsafe { on_avx512(f) };
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn on_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `e^x` without a libm call, so that loops over it vectorize: `x = n ln 2 + r` with
/// `|r| <= ln 2 / 2`, a degree-6 Taylor polynomial for `e^r` (relative error below 2e-7),
/// times `2^n` built in the exponent bits. Inputs are clamped to `[-87, 88]` (the result
/// stays normal); NaN stays NaN.
#[inline(always)]
pub(super) fn exp_approx(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding 1.5 * 2^23 leaves round(x / ln 2) in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let k = x * LOG2E + ROUND;
    let n = k - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0 / 720.0;
    let p = p * r + 1.0 / 120.0;
    let p = p * r + 1.0 / 24.0;
    let p = p * r + 1.0 / 6.0;
    let p = p * r + 0.5;
    let p = p * r + 1.0;
    let p = p * r + 1.0;
    let bits = ((k.to_bits() as i32 - 0x4b40_0000 + 127) << 23) as u32;
    p * f32::from_bits(bits)
}

/// `tanh x` without a libm call, so that loops over it vectorize: Eigen's rational
/// approximation (an odd degree-13 numerator over an even degree-6 denominator) on `x`
/// clamped to `[-7.9053, 7.9053]` (where f32 `tanh` is already ±1 to within an ulp), `x`
/// itself below `|x| < 0.0004`; relative error a few ulp. NaN stays NaN.
#[inline(always)]
pub(super) fn tanh_approx(x: f32) -> f32 {
    const CLAMP: f32 = 7.905_311;
    let c = x.clamp(-CLAMP, CLAMP);
    let x2 = c * c;
    let p = -2.760_768_5e-16_f32;
    let p = p * x2 + 2.000_188e-13;
    let p = p * x2 - 8.604_672e-11;
    let p = p * x2 + 5.122_297e-8;
    let p = p * x2 + 1.485_722_4e-5;
    let p = p * x2 + 6.372_619_3e-4;
    let p = p * x2 + 4.893_524_6e-3;
    let q = 1.198_258_4e-6_f32;
    let q = q * x2 + 1.185_347_1e-4;
    let q = q * x2 + 2.268_434_6e-3;
    let q = q * x2 + 4.893_525e-3;
    if x.abs() < 0.0004 {
        x
    } else {
        c * p / q
    }
}

/// GELU, tanh approximation: `0.5 x (1 + tanh(u)) = x / (1 + e^(-2u))` with
/// `u = sqrt(2 / pi) (x + 0.044715 x^3)`, through [`exp_approx`].
#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    const C: f32 = 0.797_884_6;
    let u = C * (x + 0.044_715 * x * x * x);
    x / (1.0 + exp_approx(-2.0 * u))
}

/// `LeakyRelu` of `slope`: `v` where positive, else `slope v` (the op's value, for the ops
/// that apply it on the way).
#[inline(always)]
pub(super) fn leaky_relu(v: f32, slope: f32) -> f32 {
    if v > 0.0 {
        v
    } else {
        slope * v
    }
}

/// `y[i] = f(x[i])`.
fn map(
    pool: &ThreadPool,
    cost: usize,
    x: &[f32],
    y: &mut [f32],
    f: impl Fn(f32) -> f32 + Copy + Sync + Send,
) {
    chunks(
        pool,
        y.len() * cost,
        y,
        CHUNK,
        || (),
        |_, c, o| {
            vectorized(
                #[inline(always)]
                || {
                    // A local copy inside the vectorized function: its parameters are then
                    // known not to change under the stores, and stay in registers.
                    let local = f;
                    for (o, &v) in o.iter_mut().zip(&x[c * CHUNK..]) {
                        *o = local(v);
                    }
                },
            )
        },
    );
}

/// What to do with the scalar function of a unary op ([`with_unary`]).
trait UnaryUse {
    /// Uses `f`, which costs about `cost` multiply-adds per value.
    fn apply(self, cost: usize, f: impl Fn(f32) -> f32 + Copy + Sync + Send);
}

/// Calls `u` with the scalar function of element-wise unary op `op` (one monomorphized
/// loop per op); `false` when `op` is not one. The functions own their parameters (`move`):
/// one read through a reference would be redone per value, and the loop not vectorized.
fn with_unary(op: &Op, u: impl UnaryUse) -> bool {
    let t = TRANSCENDENTAL;
    match *op {
        Op::Scale(s) => u.apply(1, move |v| v * s),
        Op::Clamp { lo, hi } => u.apply(1, move |v| v.max(lo).min(hi)),
        Op::Silu => u.apply(t, |v| v / (1.0 + exp_approx(-v))),
        Op::Gelu => u.apply(t, gelu),
        Op::GeluTanh => u.apply(t, gelu_tanh),
        Op::Relu => u.apply(1, |v| v.max(0.0)),
        Op::LeakyRelu(s) => u.apply(1, move |v| leaky_relu(v, s)),
        Op::Sigmoid => u.apply(t, |v| 1.0 / (1.0 + exp_approx(-v))),
        Op::Tanh => u.apply(t, tanh_approx),
        Op::Softcap(c) => u.apply(t, move |v| c * (v / c).tanh()),
        Op::Sqrt => u.apply(2, f32::sqrt),
        Op::Log => u.apply(t, f32::ln),
        Op::Exp => u.apply(t, f32::exp),
        Op::Cos => u.apply(t, f32::cos),
        Op::Sin => u.apply(t, f32::sin),
        Op::Reciprocal => u.apply(2, |v| 1.0 / v),
        Op::Neg => u.apply(1, |v| -v),
        Op::Erf => u.apply(t, erf),
        Op::PowScalar(p) => u.apply(t, move |v| crate::backend::cpu::reference::pow_scalar(v, p)),
        Op::Softplus => u.apply(t, crate::backend::cpu::reference::softplus),
        Op::Ceil => u.apply(1, f32::ceil),
        _ => return false,
    }
    true
}

/// One element-wise unary op, `y = op(x)`; `false` when `op` is not one.
pub(super) fn unary(pool: &ThreadPool, op: &Op, x: &[f32], y: &mut [f32]) -> bool {
    struct Map<'a>(&'a ThreadPool, &'a [f32], &'a mut [f32]);
    impl UnaryUse for Map<'_> {
        fn apply(self, cost: usize, f: impl Fn(f32) -> f32 + Copy + Sync + Send) {
            map(self.0, cost, self.1, self.2, f);
        }
    }
    with_unary(op, Map(pool, x, y))
}

/// A linear layer's finish on whole rows, on the calling thread: `bias` added to each row
/// of `rows` (rows of `bias.len()` values), then the element-wise unary op `act` where given
/// — the values of the `Add` and unary ops.
pub(super) fn bias_act(rows: &mut [f32], bias: &[f32], act: Option<&Op>) {
    vectorized(
        #[inline(always)]
        || {
            for row in rows.chunks_exact_mut(bias.len().max(1)) {
                for (o, &b) in row.iter_mut().zip(bias) {
                    *o += b;
                }
            }
        },
    );
    if let Some(op) = act {
        unary_in_place(op, rows);
    }
}

/// `y = op(y)` in place on the calling thread, for element-wise unary op `op` (the values
/// of [`unary`]); `false` when `op` is not one.
pub(super) fn unary_in_place(op: &Op, y: &mut [f32]) -> bool {
    struct InPlace<'a>(&'a mut [f32]);
    impl UnaryUse for InPlace<'_> {
        fn apply(self, _cost: usize, f: impl Fn(f32) -> f32 + Copy + Sync + Send) {
            vectorized(
                #[inline(always)]
                || {
                    for v in self.0.iter_mut() {
                        *v = f(*v);
                    }
                },
            )
        }
    }
    with_unary(op, InPlace(y))
}

/// The inputs of [`bias_add_norm`] besides the rows.
pub(super) struct AddNorm<'a> {
    /// Added to every row.
    pub bias: &'a [f32],
    /// The residual rows, added after the bias (from the first row of the call on).
    pub residual: &'a [f32],
    /// LayerNorm gain, bias and eps.
    pub g: &'a [f32],
    pub beta: &'a [f32],
    pub eps: f32,
}

/// A post-norm block's finish on whole rows starting at row `first`, on the calling thread:
/// each row becomes `LayerNorm(residual + (row + bias))` — the values of the `Add`, `Add`
/// and `LayerNorm` ops.
pub(super) fn bias_add_norm(first: usize, rows: &mut [f32], a: &AddNorm) {
    let d = a.bias.len().max(1);
    let residual = &a.residual[first * d..];
    vectorized(
        #[inline(always)]
        || {
            for (row, r) in rows.chunks_exact_mut(d).zip(residual.chunks_exact(d)) {
                for ((o, &b), &r) in row.iter_mut().zip(a.bias).zip(r) {
                    *o = r + (*o + b);
                }
                let (mean, inv) = layer_norm_stats(row, a.eps);
                for ((o, &g), &b) in row.iter_mut().zip(a.g).zip(a.beta) {
                    *o = (*o - mean) * inv * g + b;
                }
            }
        },
    )
}

/// `y = f(a, b)` where `b` is broadcast along the leading dimensions of `a`
/// (`b` equal to `a`, or a suffix of it such as a bias row).
pub(super) fn binary_suffix(pool: &ThreadPool, op: &Op, a: &[f32], b: &[f32], y: &mut [f32]) {
    // One monomorphized (vectorized) loop per op, not a call through a fn pointer per value.
    match op {
        Op::Add => binary_with(pool, a, b, y, |a, b| a + b),
        Op::Sub => binary_with(pool, a, b, y, |a, b| a - b),
        Op::Mul => binary_with(pool, a, b, y, |a, b| a * b),
        _ => binary_with(pool, a, b, y, |a, b| a / b),
    }
}

/// `a op b` (`Add`, `Sub`, `Mul`, `Div`) with NumPy broadcasting into `out_shape`: each
/// output row (the last axis) reads its `a` and `b` rows at offsets worked out once per
/// row, a row of one repeated value (a per-channel operand) or a contiguous run in one
/// vectorized loop.
pub(super) fn broadcast_binary(
    pool: &ThreadPool,
    op: &Op,
    a: (&[f32], &[usize]),
    b: (&[f32], &[usize]),
    out_shape: &[usize],
    y: &mut [f32],
) {
    // One monomorphized (vectorized) loop per op, not a call through a fn pointer per value.
    match op {
        Op::Add => broadcast_with(pool, a, b, out_shape, y, |a, b| a + b),
        Op::Sub => broadcast_with(pool, a, b, out_shape, y, |a, b| a - b),
        Op::Mul => broadcast_with(pool, a, b, out_shape, y, |a, b| a * b),
        _ => broadcast_with(pool, a, b, out_shape, y, |a, b| a / b),
    }
}

fn broadcast_with(
    pool: &ThreadPool,
    a: (&[f32], &[usize]),
    b: (&[f32], &[usize]),
    out_shape: &[usize],
    y: &mut [f32],
    f: impl Fn(f32, f32) -> f32 + Sync + Send,
) {
    let rank = out_shape.len();
    let last = out_shape.last().copied().unwrap_or(1).max(1);
    // Element strides of an operand in output axes (0 where it broadcasts).
    let strides = |shape: &[usize]| -> Vec<usize> {
        let mut st = vec![0; rank];
        let mut s = 1;
        for i in (0..shape.len()).rev() {
            let axis = rank - shape.len() + i;
            if shape[i] != 1 {
                st[axis] = s;
            }
            s *= shape[i];
        }
        st
    };
    let (sa, sb) = (strides(a.1), strides(b.1));
    let steps = (
        sa.last().copied().unwrap_or(0),
        sb.last().copied().unwrap_or(0),
    );
    let rows_per_chunk = (CHUNK / last).max(1);
    chunks(
        pool,
        y.len(),
        y,
        rows_per_chunk * last,
        || (),
        |_, c, out| {
            vectorized(
                #[inline(always)]
                || {
                    for (k, o) in out.chunks_mut(last).enumerate() {
                        let (mut oa, mut ob, mut rest) = (0, 0, c * rows_per_chunk + k);
                        for axis in (0..rank.saturating_sub(1)).rev() {
                            let i = rest % out_shape[axis];
                            rest /= out_shape[axis];
                            oa += i * sa[axis];
                            ob += i * sb[axis];
                        }
                        let n = o.len();
                        match steps {
                            (1, 0) => {
                                let v = b.0[ob];
                                for (o, &u) in o.iter_mut().zip(&a.0[oa..oa + n]) {
                                    *o = f(u, v);
                                }
                            }
                            (0, 1) => {
                                let u = a.0[oa];
                                for (o, &v) in o.iter_mut().zip(&b.0[ob..ob + n]) {
                                    *o = f(u, v);
                                }
                            }
                            (1, 1) => {
                                let rows = a.0[oa..oa + n].iter().zip(&b.0[ob..ob + n]);
                                for (o, (&u, &v)) in o.iter_mut().zip(rows) {
                                    *o = f(u, v);
                                }
                            }
                            (step_a, step_b) => {
                                for (j, o) in o.iter_mut().enumerate() {
                                    *o = f(a.0[oa + j * step_a], b.0[ob + j * step_b]);
                                }
                            }
                        }
                    }
                },
            )
        },
    );
}

fn binary_with(
    pool: &ThreadPool,
    a: &[f32],
    b: &[f32],
    y: &mut [f32],
    f: impl Fn(f32, f32) -> f32 + Sync + Send,
) {
    let row = b.len().max(1);
    let chunk = row * (CHUNK / row).max(1);
    chunks(
        pool,
        y.len(),
        y,
        chunk,
        || (),
        |_, c, o| {
            let i = &a[c * chunk..];
            vectorized(
                #[inline(always)]
                || {
                    if let [v] = *b {
                        for (o, &u) in o.iter_mut().zip(i) {
                            *o = f(u, v);
                        }
                        return;
                    }
                    for (rows_o, rows_i) in o.chunks_mut(row).zip(i.chunks(row)) {
                        for ((o, &u), &v) in rows_o.iter_mut().zip(rows_i).zip(b) {
                            *o = f(u, v);
                        }
                    }
                },
            )
        },
    );
}

/// `y = x / sqrt(mean(x^2) + eps) * g` per row of `g.len()`.
pub(super) fn rms_norm(
    pool: &ThreadPool,
    x: &[f32],
    g: &[f32],
    eps: f32,
    add_one: bool,
    y: &mut [f32],
) {
    let d = g.len().max(1);
    chunks(
        pool,
        2 * y.len(),
        y,
        d,
        || (),
        |_, r, o| {
            let row = &x[r * d..(r + 1) * d];
            let inv = 1.0 / (simd::sum_sq(row) / d as f32 + eps).sqrt();
            if add_one {
                for ((o, &v), &gv) in o.iter_mut().zip(row).zip(g) {
                    *o = v * inv * (1.0 + gv);
                }
            } else {
                for ((o, &v), &gv) in o.iter_mut().zip(row).zip(g) {
                    *o = v * inv * gv;
                }
            }
        },
    );
}

/// `y = (x - mean) / sqrt(var + eps) * g + b` per row.
pub(super) fn layer_norm(
    pool: &ThreadPool,
    x: &[f32],
    g: &[f32],
    b: Option<&[f32]>,
    eps: f32,
    y: &mut [f32],
) {
    let d = g.len().max(1);
    // Several rows per task: one row of a small model is too little work to hand out.
    let rows = (CHUNK / d).max(1);
    chunks(
        pool,
        3 * y.len(),
        y,
        rows * d,
        || (),
        |_, c, o| {
            let x = &x[c * rows * d..];
            vectorized(
                #[inline(always)]
                || {
                    for (o, row) in o.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
                        layer_norm_row(row, g, b, eps, o);
                    }
                },
            )
        },
    );
}

/// Mean and `1 / sqrt(variance + eps)` of one row of [`layer_norm`], summed in [`LANES`]
/// partial sums.
#[inline(always)]
fn layer_norm_stats(row: &[f32], eps: f32) -> (f32, f32) {
    let n = row.len() as f32;
    let mean = lane_sum(row, |v| v) / n;
    let var = lane_sum(row, |v| (v - mean) * (v - mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// One row of [`layer_norm`].
#[inline(always)]
fn layer_norm_row(row: &[f32], g: &[f32], b: Option<&[f32]>, eps: f32, o: &mut [f32]) {
    let (mean, inv) = layer_norm_stats(row, eps);
    match b {
        Some(b) => {
            for (((o, &v), &g), &b) in o.iter_mut().zip(row).zip(g).zip(b) {
                *o = (v - mean) * inv * g + b;
            }
        }
        None => {
            for ((o, &v), &g) in o.iter_mut().zip(row).zip(g) {
                *o = (v - mean) * inv * g;
            }
        }
    }
}

/// `sum f(x[i])`, accumulated in [`LANES`] independent partial sums (so the loop vectorizes).
#[inline(always)]
pub(super) fn lane_sum<T>(x: &[f32], f: impl Fn(f32) -> T) -> T
where
    T: Copy + Default + std::ops::AddAssign + std::iter::Sum,
{
    let mut acc = [T::default(); LANES];
    let mut blocks = x.chunks_exact(LANES);
    for blk in &mut blocks {
        for (a, &v) in acc.iter_mut().zip(blk) {
            *a += f(v);
        }
    }
    for (a, &v) in acc.iter_mut().zip(blocks.remainder()) {
        *a += f(v);
    }
    acc.into_iter().sum()
}

/// The largest value of `x` (NaNs skipped; `-inf` when empty), in [`LANES`] partial maxima
/// (so the loop vectorizes).
#[inline(always)]
fn lane_max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut blocks = x.chunks_exact(LANES);
    for blk in &mut blocks {
        for (a, &v) in acc.iter_mut().zip(blk) {
            *a = if v > *a { v } else { *a };
        }
    }
    for (a, &v) in acc.iter_mut().zip(blocks.remainder()) {
        *a = if v > *a { v } else { *a };
    }
    acc.into_iter().fold(f32::NEG_INFINITY, f32::max)
}

/// Softmax of each row of `d` through [`exp_approx`] (the sum in [`LANES`] partial
/// sums); `-inf` entries give exactly 0, an all `-inf` row zeros.
pub(super) fn softmax(pool: &ThreadPool, x: &[f32], d: usize, y: &mut [f32]) {
    let d = d.max(1);
    chunks(
        pool,
        TRANSCENDENTAL * y.len(),
        y,
        d,
        || (),
        |_, r, o| {
            let row = &x[r * d..(r + 1) * d];
            vectorized(
                #[inline(always)]
                || {
                    let max = lane_max(row);
                    if max == f32::NEG_INFINITY {
                        o.fill(0.0);
                        return;
                    }
                    for (o, &v) in o.iter_mut().zip(row) {
                        let e = exp_approx(v - max);
                        *o = if v == f32::NEG_INFINITY { 0.0 } else { e };
                    }
                    let inv = 1.0 / lane_sum(o, |v| v);
                    o.iter_mut().for_each(|v| *v *= inv);
                },
            )
        },
    );
}

/// `y = act(gate) * up` with `act` silu (SwiGlu) or gelu (GeGlu).
pub(super) fn glu(pool: &ThreadPool, gelu_gate: bool, gate: &[f32], up: &[f32], y: &mut [f32]) {
    chunks(
        pool,
        TRANSCENDENTAL * y.len(),
        y,
        CHUNK,
        || (),
        |_, c, o| {
            let (g, u) = (&gate[c * CHUNK..], &up[c * CHUNK..]);
            for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
                *o = if gelu_gate { gelu(g) } else { silu(g) } * u;
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::reference;
    use crate::backend::Tensor;

    #[test]
    fn broadcast_binary_matches_the_reference_loops() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("thread pool");
        // Per-channel operands either side, a row operand, a column operand, a scalar.
        let cases: [(&[usize], &[usize]); 6] = [
            (&[2, 32, 64, 64], &[2, 32, 1, 1]),
            (&[1, 3, 1, 1], &[2, 3, 4, 5]),
            (&[4, 1, 7], &[1, 5, 7]),
            (&[3, 1], &[1, 300]),
            (&[2, 3, 4], &[1]),
            (&[6, 1, 1], &[6, 5, 1]),
        ];
        for (sa, sb) in cases {
            let x = |shape: &[usize], seed: f32| {
                let v: Vec<f32> = (0..shape.iter().product::<usize>())
                    .map(|i| (i as f32 * 1.3 + seed).sin() + 1.5)
                    .collect();
                Tensor::from_f32(shape, v).unwrap()
            };
            let (a, b) = (x(sa, 1.0), x(sb, 2.0));
            for op in [Op::Add, Op::Sub, Op::Mul, Op::Div] {
                let want = reference::execute(&op, &[a.clone(), b.clone()])
                    .unwrap()
                    .remove(0);
                let mut got = vec![f32::NAN; want.shape().iter().product()];
                let (av, bv) = (a.read_f32("a").unwrap(), b.read_f32("b").unwrap());
                broadcast_binary(&pool, &op, (&av, sa), (&bv, sb), want.shape(), &mut got);
                assert_eq!(
                    got,
                    want.read_f32("want").unwrap().to_vec(),
                    "{op:?} {sa:?} {sb:?}"
                );
            }
        }
    }

    #[test]
    fn exp_approx_matches_f64_exp() {
        let mut worst = 0.0f64;
        for i in -870_000..=880_000 {
            let x = i as f32 * 1e-4;
            let want = (x as f64).exp();
            worst = worst.max(((exp_approx(x) as f64) - want).abs() / want);
        }
        assert!(worst < 3e-7, "relative error {worst:e}");
        let floor = (-87.0f64).exp();
        assert!((exp_approx(f32::NEG_INFINITY) as f64 - floor).abs() < 3e-7 * floor);
        assert!(exp_approx(f32::NAN).is_nan());
    }

    #[test]
    fn silu_sigmoid_and_softmax_match_the_f64_formulas() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("thread pool");
        let x: Vec<f32> = (-40_000..=40_000).map(|i| i as f32 * 2e-3).collect();
        let mut y = vec![f32::NAN; x.len()];
        let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
        for (op, f) in [
            (Op::Silu, &(|v: f64| v * sigmoid(v)) as &dyn Fn(f64) -> f64),
            (Op::Sigmoid, &sigmoid),
        ] {
            assert!(unary(&pool, &op, &x, &mut y));
            for (&v, &got) in x.iter().zip(&y) {
                let want = f(v as f64);
                let err = (got as f64 - want).abs();
                assert!(
                    err <= 4e-7 * want.abs().max(1e-30),
                    "{op:?}({v}): {got} vs {want}"
                );
            }
        }
        // Rows with a remainder of lanes, masked entries and an all-masked row.
        let d = 37;
        let mut rows: Vec<f32> = (0..3 * d).map(|i| (i as f32 * 0.77).sin() * 30.0).collect();
        rows[5] = f32::NEG_INFINITY;
        rows[2 * d..].fill(f32::NEG_INFINITY);
        let mut y = vec![f32::NAN; rows.len()];
        softmax(&pool, &rows, d, &mut y);
        for (xr, yr) in rows.chunks(d).zip(y.chunks(d)) {
            // The exponents as the kernel rounds them (`v - max` in f32).
            let max = xr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e = |v: f32| ((v - max) as f64).exp();
            let sum: f64 = xr.iter().map(|&v| e(v)).sum();
            for (&v, &got) in xr.iter().zip(yr) {
                let want = if max == f32::NEG_INFINITY {
                    0.0
                } else {
                    e(v) / sum
                };
                assert!(
                    (got as f64 - want).abs() <= 1e-6 * want.max(1e-30),
                    "{got} vs {want}"
                );
            }
        }
        assert_eq!(y[5], 0.0);
    }

    #[test]
    fn layer_norm_matches_the_f64_formula() {
        use rand::{Rng, SeedableRng};
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("thread pool");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
        // Rows of a whole number of lanes and with a remainder; few rows (inline) and
        // enough for several parallel tasks; an offset mean (cancellation in the variance).
        for &(rows, d, offset) in &[(3, 384, 0.0), (700, 384, 5.0), (5, 37, 0.0), (2, 1, 0.0)] {
            let x: Vec<f32> = (0..rows * d)
                .map(|_| offset + rng.gen_range(-2.0f32..2.0))
                .collect();
            let g: Vec<f32> = (0..d).map(|_| rng.gen_range(0.5f32..1.5)).collect();
            let b: Vec<f32> = (0..d).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
            for bias in [Some(&b[..]), None] {
                let mut y = vec![f32::NAN; rows * d];
                layer_norm(&pool, &x, &g, bias, 1e-12, &mut y);
                for (r, (xr, yr)) in x.chunks(d).zip(y.chunks(d)).enumerate() {
                    let mean = xr.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
                    let var = xr.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
                    let inv = 1.0 / (var + 1e-12).sqrt();
                    for i in 0..d {
                        let want = (xr[i] as f64 - mean) * inv * g[i] as f64
                            + bias.map_or(0.0, |b| b[i] as f64);
                        let got = yr[i] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                            "rows={rows} d={d} row {r} [{i}]: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn tanh_approx_matches_f64_tanh() {
        let mut worst = 0.0f64;
        for i in -120_000..=120_000 {
            let x = i as f32 * 1e-4;
            let want = (x as f64).tanh();
            worst = worst.max((tanh_approx(x) as f64 - want).abs() / want.abs().max(1e-30));
        }
        assert!(worst < 1e-6, "relative error {worst:e}");
        for (x, want) in [
            (0.0, 0.0),
            (1e-30, 1e-30),
            (30.0, 1.0),
            (f32::NEG_INFINITY, -1.0),
        ] {
            assert_eq!(tanh_approx(x), want, "tanh({x})");
        }
        assert!(tanh_approx(f32::NAN).is_nan());
    }

    #[test]
    fn gelu_tanh_matches_the_f64_formula() {
        for i in -20_000..=20_000 {
            let x = i as f32 * 1e-3;
            let xd = x as f64;
            let c = (2.0 / std::f64::consts::PI).sqrt();
            let want = 0.5 * xd * (1.0 + (c * (xd + 0.044715 * xd.powi(3))).tanh());
            let err = (gelu_tanh(x) as f64 - want).abs();
            assert!(
                err <= 1e-6 * want.abs().max(1.0),
                "x={x}: {} vs {want}",
                gelu_tanh(x)
            );
        }
        assert_eq!(gelu_tanh(f32::INFINITY), f32::INFINITY);
        assert!(gelu_tanh(-1e30).abs() < 1e-7);
    }
}
