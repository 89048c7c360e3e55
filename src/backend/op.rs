//! The [`Op`] enum (`../shared/spec/ops.md`) and its shape rules.
//!
//! Every op documents its inputs (in order) and outputs. Activations are host
//! f32; weights (`W`, `table`, norm gains) may be any encoding. [`Op::infer`]
//! checks the inputs and gives the output shapes; every backend calls it
//! before computing, so a bad shape is always a `ShapeMismatch`, never a panic.

use super::tensor::{Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;

/// RoPE pairing: `neox` rotates `(x[j], x[j + rot/2])`, `normal` rotates `(x[2j], x[2j+1])`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// Halves (GPT-NeoX, Llama in HF layout).
    Neox,
    /// Adjacent pairs (GPT-J, Llama in GGUF/Meta layout).
    Normal,
}

/// Attention mask of [`Op::Sdpa`]. Key `j` sits at absolute position `j`;
/// query `i` at `q_pos + i`.
#[derive(Debug, Clone, PartialEq)]
pub enum Mask {
    /// Every query sees every key (encoders, cross-attention).
    None,
    /// Query at position p sees keys at positions <= p.
    Causal,
    /// Causal, and no key older than `p - window + 1`.
    Sliding(usize),
    /// Per-key keep flag (`true` = attend); length = the keys read.
    Padding(Vec<bool>),
}

/// Sampling parameters of [`Op::Sample`]; the random draw `u` comes from the
/// caller's seeded generator so the op itself is deterministic.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleParams {
    /// 0 = greedy argmax (ties to the lowest id).
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = off).
    pub top_k: usize,
    /// Keep the smallest set with cumulative probability >= top_p (1.0 = off).
    pub top_p: f32,
    /// Drop tokens with probability < min_p * max probability (0 = off).
    pub min_p: f32,
    /// Divide positive / multiply negative logits of recent tokens (1.0 = off).
    pub repeat_penalty: f32,
    /// How many of the most recent history tokens the penalty looks at.
    pub repeat_last_n: usize,
    /// Uniform draw in [0, 1) that picks the token.
    pub u: f32,
}

/// Integer arithmetic of [`Op::IntBinary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`, truncated toward zero.
    Div,
}

/// Comparison of [`Op::Compare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `a == b`.
    Equal,
    /// `a < b`.
    Less,
    /// `a <= b`.
    LessOrEqual,
    /// `a > b`.
    Greater,
    /// `a >= b`.
    GreaterOrEqual,
}

/// Which way a recurrent op ([`Op::Lstm`]) runs over the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RnnDirection {
    /// First step to last (one direction).
    Forward,
    /// Last step to first (one direction).
    Reverse,
    /// Both: direction 0 forward, direction 1 reverse.
    Bidirectional,
}

impl RnnDirection {
    /// Number of directions (`D` of [`Op::Lstm`]): 2 when bidirectional, else 1.
    pub fn count(self) -> usize {
        match self {
            RnnDirection::Bidirectional => 2,
            _ => 1,
        }
    }

    /// The ONNX attribute value (`forward`, `reverse`, `bidirectional`).
    pub fn name(self) -> &'static str {
        match self {
            RnnDirection::Forward => "forward",
            RnnDirection::Reverse => "reverse",
            RnnDirection::Bidirectional => "bidirectional",
        }
    }

    /// The direction named `s` (see [`RnnDirection::name`]).
    pub fn parse(s: &str) -> Option<RnnDirection> {
        [
            RnnDirection::Forward,
            RnnDirection::Reverse,
            RnnDirection::Bidirectional,
        ]
        .into_iter()
        .find(|d| d.name() == s)
    }
}

/// The attributes of [`Op::Lstm`].
#[derive(Debug, Clone, PartialEq)]
pub struct LstmSpec {
    /// Hidden size `H`.
    pub hidden: usize,
    /// Direction(s) run (`D` = [`RnnDirection::count`]).
    pub direction: RnnDirection,
    /// Bound on the gate inputs, if any.
    pub clip: Option<f32>,
    /// Couple the forget gate to the input gate (`f = 1 - i`).
    pub input_forget: bool,
    /// Steps run per batch entry (each in `1..=S`), if not all `S`.
    pub seq_lens: Option<Vec<usize>>,
}

/// Reduction of [`Op::Reduce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// Sum of the values.
    Sum,
    /// Largest value.
    Max,
    /// Sum divided by the count.
    Mean,
}

/// One op of ops.md. Inputs are listed in order; `[..]` is any leading shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `[x [.., K], W [N, K] (any dtype)] -> [y [.., N]]`, `y = x W^T`.
    Matmul,
    /// `[a, b] -> [a + b]`, NumPy broadcasting.
    Add,
    /// `[a, b] -> [a - b]`, NumPy broadcasting.
    Sub,
    /// `[a, b] -> [a * b]`, NumPy broadcasting.
    Mul,
    /// `[a, b] -> [a / b]`, NumPy broadcasting.
    Div,
    /// `[x] -> [x * s]`.
    Scale(f32),
    /// `[x] -> [min(max(x, lo), hi)]`.
    Clamp {
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
    /// `[x] -> [x]` with NaN, +inf, -inf replaced.
    NanToNum {
        /// Replacement for NaN.
        nan: f32,
        /// Replacement for +inf.
        pos_inf: f32,
        /// Replacement for -inf.
        neg_inf: f32,
    },
    /// `[x] -> [x viewed as shape]` (same element count).
    Reshape(Vec<usize>),
    /// `[x] -> [y]`, `y` dimension i = `x` dimension `perm[i]`.
    Permute(Vec<usize>),
    /// `[x0, x1, ..] -> [concatenation along axis]`.
    Concat {
        /// Axis to join along.
        axis: usize,
    },
    /// `[x] -> [x[.., start..end, ..]]` along `axis`.
    Slice {
        /// Axis to cut.
        axis: usize,
        /// First index kept.
        start: usize,
        /// One past the last index kept.
        end: usize,
    },
    /// `[x] -> [parts..]` along `axis` with the given sizes (ops.md `Split`, `Chunk`).
    Split {
        /// Axis to cut.
        axis: usize,
        /// Size of each part; they sum to the axis length.
        sizes: Vec<usize>,
    },
    /// `[x [.., D], g [D]] -> [x / sqrt(mean(x^2) + eps) * g]`; Gemma's `(1 + g)` when `add_one`.
    RmsNorm {
        /// Added inside the square root.
        eps: f32,
        /// Multiply by `1 + g` instead of `g`.
        add_one: bool,
    },
    /// `[x [.., D], g [D], b [D]?] -> [(x - mean) / sqrt(var + eps) * g + b]`.
    LayerNorm {
        /// Added to the population variance.
        eps: f32,
    },
    /// `[x [B, C, ..], g [C], b [C]] -> [group-normalized x]`.
    GroupNorm {
        /// Number of channel groups (divides C).
        groups: usize,
        /// Added to the variance.
        eps: f32,
    },
    /// `[x [B, C, ..], g [G], b [G], gamma (C values), beta (C values)] -> [y]`,
    /// `y = ((x - mean) / sqrt(var + eps) * g[G(c)] + b[G(c)]) * gamma[c] + beta[c]` with
    /// mean and population variance over each group `G(c)` of `C / G` channels: `GroupNorm`
    /// with per-group gains, then a per-channel scale and shift (an exported
    /// `torch.nn.GroupNorm`: Reshape, InstanceNormalization, Reshape, Mul, Add).
    GroupNormAffine {
        /// Number of channel groups `G` (divides C).
        groups: usize,
        /// Added to the variance.
        eps: f32,
    },
    /// `[x [B, C, ..], g [G], b [G], gamma (C values), beta (C values), scale?, shift?] ->
    /// [act(GroupNormAffine(x, g, b, gamma, beta) * scale + shift)]`: `GroupNormAffine`,
    /// then, with the two optional inputs (each `[B or 1, C, 1, ..]`, x's rank), `Mul` by
    /// `scale` and `Add` of `shift` (a per batch entry and channel modulation, as a
    /// diffusion ResNet block applies its time embedding), then the element-wise `act`
    /// where given; same arithmetic as those ops in turn.
    FusedGroupNorm {
        /// Number of channel groups `G` (divides C).
        groups: usize,
        /// Added to the variance.
        eps: f32,
        /// An op for which [`Op::is_unary_map`] holds, or none.
        act: Option<Box<Op>>,
    },
    /// `[x [S, H, d], cos [P, rot/2]?, sin [P, rot/2]?] -> [rotated x]`.
    /// Row s is at position `pos + s`. Without the cos/sin cache the angles are
    /// computed from `base` (in f64).
    Rope {
        /// Pairing of the rotated dimensions.
        style: RopeStyle,
        /// Rotated dimensions (even, <= d); the rest pass through.
        rot_dim: usize,
        /// Position of the first row.
        pos: usize,
        /// theta base (rope_theta).
        base: f32,
    },
    /// `[x] -> [x / (1 + exp(-x))]`.
    Silu,
    /// `[x] -> [0.5 x (1 + erf(x / sqrt 2))]`.
    Gelu,
    /// `[x] -> [0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))]`.
    GeluTanh,
    /// `[x] -> [max(x, 0)]`.
    Relu,
    /// `[x] -> [x if x > 0 else slope x]`.
    LeakyRelu(f32),
    /// `[x] -> [1 / (1 + exp(-x))]`.
    Sigmoid,
    /// `[x] -> [tanh x]`.
    Tanh,
    /// `[x] -> [c tanh(x / c)]`.
    Softcap(f32),
    /// `[gate, up] -> [silu(gate) * up]`.
    SwiGlu,
    /// `[gate, up] -> [gelu(gate) * up]`.
    GeGlu,
    /// `[x] -> [softmax over the last axis]`; an all `-inf` row gives zeros.
    Softmax,
    /// `[x] -> [sqrt x]` (NaN below 0).
    Sqrt,
    /// `[x] -> [ln x]` (-inf at 0, NaN below).
    Log,
    /// `[x] -> [e^x]`.
    Exp,
    /// `[x] -> [cos x]` (radians).
    Cos,
    /// `[x] -> [sin x]` (radians).
    Sin,
    /// `[x] -> [1 / x]`.
    Reciprocal,
    /// `[x] -> [-x]`.
    Neg,
    /// `[x] -> [erf x]`.
    Erf,
    /// `[x] -> [x^p]` for a constant exponent `p` (`powf`; `p = 2` is `x * x` exactly).
    PowScalar(f32),
    /// `[a [.., M, K], b [.., K, N]] -> [[.., M, N]]`: a matrix product of two
    /// activations per batch entry, the batch dims broadcast as in NumPy
    /// (ONNX `MatMul` with both inputs of rank >= 2).
    BatchMatmul,
    /// `[x [B, Cin, H, W], w [Cout, Cin / groups, kh, kw], b [Cout]?] -> [[B, Cout, Ho, Wo]]`:
    /// `y[n, o, i, j] = b[o] + sum_{c, u, v} x[n, g(o) Cin/groups + c, i sh - pt + u dh,
    /// j sw - pl + v dw] w[o, c, u, v]`, positions outside `x` read as 0;
    /// `Ho = (H + pt + pb - dh (kh - 1) - 1) / sh + 1` (likewise `Wo`).
    Conv2d {
        /// Steps `[sh, sw]`.
        stride: [usize; 2],
        /// Zeros added `[top, left, bottom, right]`.
        pads: [usize; 4],
        /// Kernel dilations `[dh, dw]`.
        dilation: [usize; 2],
        /// Channel groups (divides Cin and Cout).
        groups: usize,
    },
    /// `[x [B, C, H, W]] -> [[B, C, Ho, Wo]]`: the mean of each `kernel` window at
    /// steps `stride` over `x` padded by `pads` `[top, left, bottom, right]`; the
    /// divisor counts the padding when `count_include_pad`, else only the values inside.
    AvgPool2d {
        /// Window `[kh, kw]`.
        kernel: [usize; 2],
        /// Steps `[sh, sw]`.
        stride: [usize; 2],
        /// Zeros added `[top, left, bottom, right]`.
        pads: [usize; 4],
        /// Divide by the whole window (padding included).
        count_include_pad: bool,
    },
    /// `[x] -> [y]`, `y.shape[i] = x.shape[i] * scales[i]`, `y[.., j, ..] = x[.., j / scales[i], ..]`:
    /// nearest-neighbour upsampling by integer factors (ONNX `Resize`, mode `nearest`,
    /// `asymmetric` coordinates, `floor` rounding, integer scales).
    ResizeNearest {
        /// Integer factor per axis (>= 1).
        scales: Vec<usize>,
    },
    /// `[Q [Sq, H, d], K [Sk, Hkv, d], V [Sk, Hkv, dv]] -> [O [Sq, H, dv]]`.
    /// Reads key rows `0..kv_len` (all when `None`), so K/V may be a whole KV cache.
    Sdpa {
        /// Score scale; `None` = `1 / sqrt(d)`.
        scale: Option<f32>,
        /// Which keys each query sees.
        mask: Mask,
        /// Absolute position of the first query row.
        q_pos: usize,
        /// Number of key rows read.
        kv_len: Option<usize>,
    },
    /// `[Kc [M, Hkv, d] (state), Vc [M, Hkv, dv] (state), k [s, Hkv, d], v [s, Hkv, dv]] -> [Kc, Vc]`:
    /// writes rows `pos..pos+s` of the caches in place; past `M` is `ContextOverflow`.
    KvAppend {
        /// First row written.
        pos: usize,
    },
    /// `[ids (i32) [..], table [V, D] (any dtype)] -> [[.., D]]`; an id outside `0..V` is an error.
    Embed,
    /// `[x [Cin, L], w [Cout, Cin, k], b [Cout]?] -> [[Cout, Lout]]`,
    /// `Lout = (L + 2 pad - k) / stride + 1`.
    Conv1d {
        /// Step between windows.
        stride: usize,
        /// Zeros added on both ends.
        padding: usize,
    },
    /// `[x [.., V]] -> [i32 [..]]`: index of the max of each last-axis row (ties: lowest).
    Argmax,
    /// `[logits [.., V], history (i32) [n]?] -> [i32 [1]]`: samples from the last row.
    Sample(SampleParams),
    /// `[x [.., K], g [K], W [N, K]] -> [Matmul(RmsNorm(x, g), W)]`.
    FusedNormMatmul {
        /// RmsNorm eps.
        eps: f32,
        /// RmsNorm `(1 + g)`.
        add_one: bool,
    },
    /// `[x, skip, g] -> [RmsNorm(x + skip, g), x + skip]`.
    FusedSkipNorm {
        /// RmsNorm eps.
        eps: f32,
        /// RmsNorm `(1 + g)`.
        add_one: bool,
    },
    /// `[x [.., K], Wg [N, K], Wu [N, K]] -> [silu(x Wg^T) * (x Wu^T)]`.
    FusedSwiGlu,
    /// `[x [.., K], Wq, Wk, Wv] -> [x Wq^T, x Wk^T, x Wv^T]`.
    FusedQkv,
    /// `[x [.., K], W [N, K], b [N]] -> [act(x W^T + b)]`: `Matmul`, `Add` of the bias,
    /// then the element-wise activation `act` where given (a linear layer; same arithmetic
    /// as the ops in turn).
    MatmulBias {
        /// An op for which [`Op::is_unary_map`] holds, or none.
        act: Option<Box<Op>>,
    },
    /// `[x [.., K], W [N, K], b [N], r [.., N], g [N], beta [N]] -> [LayerNorm(r + (x W^T + b),
    /// g, beta)]`: a post-norm block's output projection, residual add and norm (`Matmul`,
    /// `Add` of the bias, `Add` of `r`, `LayerNorm` in turn).
    FusedLinearAddNorm {
        /// LayerNorm eps.
        eps: f32,
    },
    /// `[Q [n L, H, d], K [n L, Hkv, d], V [n L, Hkv, dv]] -> [O [n L, H, dv]]` for
    /// `n = lengths.len()` sequences of `L` rows each (padded): the `L` query rows of
    /// sequence `b` attend, unmasked, to its first `lengths[b]` key rows — `Sdpa` per
    /// sequence, i.e. an encoder batch under its padding mask (padding queries included).
    SdpaBatch {
        /// Score scale; `None` = `1 / sqrt(d)`.
        scale: Option<f32>,
        /// Real rows of each sequence, each in `1..=L`.
        lengths: Vec<usize>,
    },
    /// `[r, x, w, b?] -> [reshape(conv(a(x), w, b), shape of r) + r]`: a convolution whose
    /// output (as many values as `r`, in the same order) gets the residual `r` added, its
    /// input first through `a`, the `LeakyRelu` of slope `leaky` where given, else the
    /// identity (`LeakyRelu`, `conv`, a `Reshape` where the graph has one, `Add` in turn).
    /// With `second`, `[r, s, x, w, b?] -> [(reshape(conv(a(x), w, b)) + r) + s]`: a second
    /// addend `s` added after `r` (a further `Add`, broadcasting as `Add` does, as HiFi-GAN
    /// sums the outputs of its residual blocks).
    FusedConvAdd {
        /// The convolution: an [`Op::Conv2d`].
        conv: Box<Op>,
        /// The slope of a `LeakyRelu` applied to `x` before the convolution.
        leaky: Option<f32>,
        /// Whether input 1 is a second addend (then `x`, `w`, `b` follow it).
        second: bool,
    },
    /// `[q [.., L, d], kt [.., d, S], v [.., S, e]] -> [softmax(q kt) v [.., L, e]]`, the
    /// same leading dims on all three, the softmax over each row of `S` scores, no scale
    /// and no mask: `BatchMatmul`, `Softmax`, `BatchMatmul` in turn (an exported attention
    /// whose scale is already in q or k), without the `[.., L, S]` scores in memory.
    FusedAttention,
    /// `[x] -> [i64 [rank]]`: the dimensions of `x` (any dtype).
    Shape,
    /// `[x] -> [y]`, `x` converted to `dtype` (f32, i64 or bool): a float to i64
    /// truncates toward zero (NaN or out of range is an error), any value to bool is
    /// `x != 0`, bool to a number is 0 or 1.
    Cast(DType),
    /// `[a i64, b i64] -> [i64]` with NumPy broadcasting: `a op b` ([`IntOp`]);
    /// overflow and a zero divisor are errors.
    IntBinary(IntOp),
    /// `[a, b] -> [bool]` with NumPy broadcasting: `a cmp b` ([`CmpOp`]); `a` and
    /// `b` share a dtype (f32, i64 or bool).
    Compare(CmpOp),
    /// `[x bool] -> [bool]`, `!x` (an i64 input reads as `x != 0`).
    Not,
    /// `[a bool, b bool] -> [bool]` with NumPy broadcasting, `a && b` (i64 inputs read
    /// as `!= 0`).
    And,
    /// `[cond bool, a, b] -> [y]`, `y = cond ? a : b`, the three broadcast as in
    /// NumPy (an i64 `cond` reads as `!= 0`); `a` and `b` share a dtype, which `y` has.
    Where,
    /// `[x] -> [y [shape]]`, `y[i..] = x[i..]` with the size-1 dims of `x` (right-aligned)
    /// repeated: `shape` is the NumPy broadcast of `x`'s shape and the requested one.
    Expand(Vec<usize>),
    /// `[] -> [y [shape] of dtype]`, every value `value` (converted to `dtype`).
    Fill {
        /// Output shape.
        shape: Vec<usize>,
        /// The value (exact for f32 and for integers below 2^53).
        value: f64,
        /// Output encoding (f32, i64 or bool).
        dtype: DType,
    },
    /// `[] -> [y [len]]`: i64 `y[i] = start + i delta`; f32 `y[0] = start`,
    /// `y[i] = y[i-1] + delta` (ONNX `Range` accumulates in the value type).
    Range {
        /// First value.
        start: f64,
        /// Step.
        delta: f64,
        /// Number of values, `max(ceil((limit - start) / delta), 0)`.
        len: usize,
        /// Output encoding (f32 or i64).
        dtype: DType,
    },
    /// `[x] -> [i64 [rank, count]]`: column j holds the multi-index of the j-th nonzero
    /// value of `x` in row-major order. `count`, the number of nonzero values, is bound
    /// per call from the values; a different count is a shape error.
    NonZero {
        /// Number of nonzero values of the input.
        count: usize,
    },
    /// `[data [.., n, ..], idx i64 [I..]] -> [data.shape[..axis] ++ I ++ data.shape[axis+1..]]`,
    /// `y[a.., i.., b..] = data[a.., j, b..]` with `j = idx[i..]` (`+ n` when negative);
    /// `j` outside `0..n` is an error.
    Gather {
        /// The indexed axis of `data`.
        axis: usize,
    },
    /// `[data, idx i64 (same rank)] -> [y [idx.shape]]`, `y[i..] = data[i..]` with dim
    /// `axis` of the index replaced by `idx[i..]` (`+ n` when negative, else an error
    /// outside `0..n`).
    GatherElements {
        /// The indexed axis.
        axis: usize,
    },
    /// `[data [D..], idx i64 [I.., k]] -> [y [I.. ++ D[k..]]]`,
    /// `y[i.., r..] = data[idx[i.., 0], .., idx[i.., k-1], r..]` (negative indices count
    /// from the end of their dim; out of range is an error).
    GatherNd,
    /// `[data [D..], idx i64 [I.., k], upd [I.. ++ D[k..]]] -> [y [D..]]`: `y = data`,
    /// then `y[idx[i..], r..] = upd[i.., r..]` for each `i..` in row-major order.
    ScatterNd,
    /// `[x] -> [y]` (f32 or i64): the running sum along `axis`, `y[.., j, ..] =
    /// sum x[.., t, ..]` over `t <= j` (`t >= j` when `reverse`; the element itself
    /// left out when `exclusive`).
    CumSum {
        /// The summed axis.
        axis: usize,
        /// Leave out the element itself.
        exclusive: bool,
        /// Sum from the end.
        reverse: bool,
    },
    /// `[x] -> [y]` (f32 or i64): the sum, max or mean ([`ReduceKind`]) over `axes`
    /// (sorted, distinct); reduced dims kept with size 1 when `keepdims`, else dropped.
    /// A max over no values is an error.
    Reduce {
        /// What is computed.
        kind: ReduceKind,
        /// The reduced axes.
        axes: Vec<usize>,
        /// Keep reduced dims as size 1.
        keepdims: bool,
    },
    /// `[x] -> [y]`, `y.shape[d] = pads[d][0] + x.shape[d] + pads[d][1]` (>= 0),
    /// `y[i..] = x[i - pads[..][0]]` inside, `value` elsewhere (ONNX `Pad`, constant mode;
    /// a negative pad removes values).
    Pad {
        /// `[before, after]` per dim.
        pads: Vec<[i64; 2]>,
        /// The value of the added positions.
        value: f64,
    },
    /// `[x] -> [y [shape]]`, `y[i..] = x[starts[d] + i_d steps[d] ..]` (ONNX `Slice` with
    /// steps; a negative step reads backwards). Every index read must lie inside `x`.
    StridedSlice {
        /// First index read per dim.
        starts: Vec<usize>,
        /// Step per dim (nonzero).
        steps: Vec<i64>,
        /// Output shape.
        shape: Vec<usize>,
    },
    /// `[x [B, Cin, H, W], w [Cin, Cout / groups, kh, kw], b [Cout]?] -> [[B, Cout, Ho, Wo]]`:
    /// `y[n, g Cout/groups + o, i sh - pt + u dh, j sw - pl + v dw] += x[n, c, i, j] w[c, o, u, v]`
    /// for every input channel c of group g, positions outside the output dropped, plus `b`;
    /// `Ho = (H - 1) sh - pt - pb + dh (kh - 1) + out_pad[0] + 1` (likewise `Wo`).
    ConvTranspose2d {
        /// Steps `[sh, sw]`.
        stride: [usize; 2],
        /// Cropped `[top, left, bottom, right]`.
        pads: [usize; 4],
        /// Kernel dilations `[dh, dw]`.
        dilation: [usize; 2],
        /// Channel groups (divides Cin and Cout).
        groups: usize,
        /// Extra rows / columns added at the end `[h, w]`.
        out_pad: [usize; 2],
    },
    /// `[x] -> [ln(1 + e^x)]` (computed as `max(x, 0) + ln(1 + e^-|x|)`).
    Softplus,
    /// `[x] -> [ceil x]`.
    Ceil,
    /// `[x] -> [y]` of x's shape (f32): `y = mean + scale z`, `z` standard normal draws
    /// (Box-Muller over a SplitMix64 stream started at `seed`; the backend's generator
    /// where it documents its own).
    RandomNormalLike {
        /// Mean.
        mean: f32,
        /// Standard deviation.
        scale: f32,
        /// Generator seed.
        seed: u64,
    },
    /// `[x [S, B, I], w [D, 4H, I], r [D, 4H, H], b [D, 8H], h0 [D, B, H], c0 [D, B, H],
    /// p [D, 3H]?] -> [y [S, D, B, H], h [D, B, H], c [D, B, H]]`: ONNX `LSTM` (layout 0,
    /// activations sigmoid / tanh / tanh). Gate rows of `w`, `r` and each half of `b` in
    /// the order i, o, f, c; per direction and step t (backwards for the reverse one),
    /// with `s(g) = x_t W_g^T + h R_g^T + Wb_g + Rb_g` clipped to `[-clip, clip]`:
    /// `i = sigmoid(s(i) + p_i c)`, `f = sigmoid(s(f) + p_f c)` (`1 - i` when
    /// `input_forget`), `g = tanh(s(c))`, `c' = f c + i g`, `o = sigmoid(s(o) + p_o c')`,
    /// `h' = o tanh(c')`; `y[t, d] = h'`. With `seq_lens`, batch entry b runs its first
    /// `seq_lens[b]` steps only (`y` is 0 after them; `h`, `c` are the state after them).
    Lstm(LstmSpec),
    /// `[q [S, H, d], k [S, Hkv, d], v [S, Hkv, dv], cos, sin, k_cache, v_cache]
    /// -> [rope(q), k_cache, v_cache]`: `Rope` (with the cos/sin cache) of q
    /// and of k, then `KvAppend` of the rotated k and of v at `pos`.
    FusedRopeAppend {
        /// Pairing of the rotated dimensions.
        style: RopeStyle,
        /// Rotated dimensions (even, <= d); the rest pass through.
        rot_dim: usize,
        /// Position of the first row.
        pos: usize,
    },
}

/// The number of values of `shape`, `None` when the product overflows.
fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

pub(super) fn mismatch(op: &Op, expected: &[usize], got: &[usize]) -> ExecutionError {
    ExecutionError::ShapeMismatch {
        op: op.name().to_string(),
        expected: expected.to_vec(),
        got: got.to_vec(),
    }
}

/// NumPy broadcast of two shapes (right-aligned; dims equal or 1).
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for (i, o) in out.iter_mut().enumerate() {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        *o = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// `(stride [sh, sw], pads [top, left, bottom, right], dilation [dh, dw],
/// groups)` of a convolution.
pub type ConvAttrs = ([usize; 2], [usize; 4], [usize; 2], usize);

impl Op {
    /// The op's name in ops.md (used in errors and dispatch records).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Matmul => "Matmul",
            Op::Add => "Add",
            Op::Sub => "Sub",
            Op::Mul => "Mul",
            Op::Div => "Div",
            Op::Scale(_) => "Scale",
            Op::Clamp { .. } => "Clamp",
            Op::NanToNum { .. } => "NanToNum",
            Op::Reshape(_) => "Reshape",
            Op::Permute(_) => "Permute",
            Op::Concat { .. } => "Concat",
            Op::Slice { .. } => "Slice",
            Op::Split { .. } => "Split",
            Op::RmsNorm { .. } => "RmsNorm",
            Op::LayerNorm { .. } => "LayerNorm",
            Op::GroupNorm { .. } => "GroupNorm",
            Op::GroupNormAffine { .. } => "GroupNormAffine",
            Op::FusedGroupNorm { .. } => "FusedGroupNorm",
            Op::Rope { .. } => "Rope",
            Op::Silu => "Silu",
            Op::Gelu => "Gelu",
            Op::GeluTanh => "GeluTanh",
            Op::Relu => "Relu",
            Op::LeakyRelu(_) => "LeakyRelu",
            Op::Sigmoid => "Sigmoid",
            Op::Tanh => "Tanh",
            Op::Softcap(_) => "Softcap",
            Op::SwiGlu => "SwiGlu",
            Op::GeGlu => "GeGlu",
            Op::Softmax => "Softmax",
            Op::Sqrt => "Sqrt",
            Op::Log => "Log",
            Op::Exp => "Exp",
            Op::Cos => "Cos",
            Op::Sin => "Sin",
            Op::Reciprocal => "Reciprocal",
            Op::Neg => "Neg",
            Op::Erf => "Erf",
            Op::PowScalar(_) => "PowScalar",
            Op::BatchMatmul => "BatchMatmul",
            Op::Conv2d { .. } => "Conv2d",
            Op::AvgPool2d { .. } => "AvgPool2d",
            Op::ResizeNearest { .. } => "ResizeNearest",
            Op::Sdpa { .. } => "Sdpa",
            Op::KvAppend { .. } => "KvAppend",
            Op::Embed => "Embed",
            Op::Conv1d { .. } => "Conv1d",
            Op::Argmax => "Argmax",
            Op::Sample(_) => "Sample",
            Op::FusedNormMatmul { .. } => "FusedNormMatmul",
            Op::FusedSkipNorm { .. } => "FusedSkipNorm",
            Op::FusedSwiGlu => "FusedSwiGlu",
            Op::FusedQkv => "FusedQkv",
            Op::MatmulBias { .. } => "MatmulBias",
            Op::FusedLinearAddNorm { .. } => "FusedLinearAddNorm",
            Op::SdpaBatch { .. } => "SdpaBatch",
            Op::FusedAttention => "FusedAttention",
            Op::FusedConvAdd { .. } => "FusedConvAdd",
            Op::FusedRopeAppend { .. } => "FusedRopeAppend",
            Op::Shape => "Shape",
            Op::Cast(_) => "Cast",
            Op::IntBinary(_) => "IntBinary",
            Op::Compare(_) => "Compare",
            Op::Not => "Not",
            Op::And => "And",
            Op::Where => "Where",
            Op::Expand(_) => "Expand",
            Op::Fill { .. } => "Fill",
            Op::Range { .. } => "Range",
            Op::NonZero { .. } => "NonZero",
            Op::Gather { .. } => "Gather",
            Op::GatherElements { .. } => "GatherElements",
            Op::GatherNd => "GatherNd",
            Op::ScatterNd => "ScatterNd",
            Op::CumSum { .. } => "CumSum",
            Op::Reduce { .. } => "Reduce",
            Op::Pad { .. } => "Pad",
            Op::StridedSlice { .. } => "StridedSlice",
            Op::ConvTranspose2d { .. } => "ConvTranspose2d",
            Op::Softplus => "Softplus",
            Op::Ceil => "Ceil",
            Op::RandomNormalLike { .. } => "RandomNormalLike",
            Op::Lstm(_) => "Lstm",
        }
    }

    /// Whether the op maps each value on its own through one scalar function of its
    /// attributes (the activations a [`Op::MatmulBias`] may apply).
    pub fn is_unary_map(&self) -> bool {
        matches!(
            self,
            Op::Scale(_)
                | Op::Clamp { .. }
                | Op::Silu
                | Op::Gelu
                | Op::GeluTanh
                | Op::Relu
                | Op::LeakyRelu(_)
                | Op::Sigmoid
                | Op::Tanh
                | Op::Softcap(_)
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
        )
    }

    /// Whether the op is one of the run-time integer, index and shape ops of the
    /// graph path (ONNX import), which only host backends run.
    pub fn is_index_op(&self) -> bool {
        matches!(
            self,
            Op::Shape
                | Op::Cast(_)
                | Op::IntBinary(_)
                | Op::Compare(_)
                | Op::Not
                | Op::And
                | Op::Where
                | Op::Expand(_)
                | Op::Fill { .. }
                | Op::Range { .. }
                | Op::NonZero { .. }
                | Op::Gather { .. }
                | Op::GatherElements { .. }
                | Op::GatherNd
                | Op::ScatterNd
                | Op::CumSum { .. }
                | Op::Reduce { .. }
                | Op::Pad { .. }
                | Op::StridedSlice { .. }
                | Op::RandomNormalLike { .. }
        )
    }

    /// The `Rope` that [`Op::FusedRopeAppend`] applies to q and k (its
    /// cos/sin cache gives the angles, so `base` is unused); None for other ops.
    pub fn rope_part(&self) -> Option<Op> {
        match self {
            Op::FusedRopeAppend {
                style,
                rot_dim,
                pos,
            } => Some(Op::Rope {
                style: *style,
                rot_dim: *rot_dim,
                pos: *pos,
                base: 0.0,
            }),
            _ => None,
        }
    }

    /// The [`ConvAttrs`] of a [`Op::Conv2d`] or [`Op::ConvTranspose2d`];
    /// None for other ops.
    pub fn conv_attrs(&self) -> Option<ConvAttrs> {
        match self {
            Op::Conv2d {
                stride,
                pads,
                dilation,
                groups,
            }
            | Op::ConvTranspose2d {
                stride,
                pads,
                dilation,
                groups,
                ..
            } => Some((*stride, *pads, *dilation, *groups)),
            _ => None,
        }
    }

    /// Checks the inputs (count, dtypes, shapes) and returns the outputs' infos.
    /// Every shape computation is checked: inputs whose dimensions would overflow
    /// give `ShapeMismatch`, and outputs whose byte size does not fit an `isize`
    /// give `OutOfMemory` (the bytes saturated at `usize::MAX`), so callers may
    /// multiply the returned dimensions freely.
    pub fn infer(&self, inputs: &[TensorInfo]) -> Result<Vec<TensorInfo>, ExecutionError> {
        let outputs = self.infer_shapes(inputs)?;
        for o in &outputs {
            let bytes = numel(&o.shape).and_then(|n| n.checked_mul(8));
            if bytes.is_none_or(|b| b > isize::MAX as usize) {
                return Err(ExecutionError::OutOfMemory {
                    backend: "any".into(),
                    requested_bytes: bytes.unwrap_or(usize::MAX),
                });
            }
        }
        Ok(outputs)
    }

    /// The rules of [`Op::infer`], one per op.
    fn infer_shapes(&self, inputs: &[TensorInfo]) -> Result<Vec<TensorInfo>, ExecutionError> {
        let f32_out = |shape: Vec<usize>| TensorInfo {
            shape,
            dtype: DType::F32,
        };
        let arity = |lo: usize, hi: usize| -> Result<(), ExecutionError> {
            if inputs.len() < lo || inputs.len() > hi {
                Err(mismatch(self, &[lo, hi], &[inputs.len()]))
            } else {
                Ok(())
            }
        };
        // Activations must be f32 (host f32 or KV state).
        let act = |i: usize| -> Result<&[usize], ExecutionError> {
            let t = &inputs[i];
            if t.dtype != DType::F32 {
                return Err(ExecutionError::UnsupportedOp {
                    op: format!("{} (input {i} must be f32)", self.name()),
                    backend: "any".into(),
                    input_dtype: t.dtype,
                });
            }
            Ok(&t.shape)
        };
        // Values moved by layout ops: f32, i64 or bool (the output keeps the dtype).
        let data = |i: usize| -> Result<&[usize], ExecutionError> {
            let t = &inputs[i];
            if !matches!(t.dtype, DType::F32 | DType::I64 | DType::Bool) {
                return Err(ExecutionError::UnsupportedOp {
                    op: format!("{} (input {i} must be f32, i64 or bool)", self.name()),
                    backend: "any".into(),
                    input_dtype: t.dtype,
                });
            }
            Ok(&t.shape)
        };
        let same_out = |shape: Vec<usize>| TensorInfo {
            shape,
            dtype: inputs.first().map_or(DType::F32, |t| t.dtype),
        };
        let ids = |i: usize| -> Result<&[usize], ExecutionError> {
            let t = &inputs[i];
            if t.dtype != DType::I32 {
                return Err(ExecutionError::UnsupportedOp {
                    op: format!("{} (input {i} must be i32)", self.name()),
                    backend: "any".into(),
                    input_dtype: t.dtype,
                });
            }
            Ok(&t.shape)
        };
        let last = |s: &[usize]| s.last().copied().unwrap_or(1);
        // A vector of length d (norm gain / bias), any dtype.
        let vector = |i: usize, d: usize| -> Result<(), ExecutionError> {
            if inputs[i].shape != [d] {
                return Err(mismatch(self, &[d], &inputs[i].shape));
            }
            Ok(())
        };
        // x [.., K] times W [N, K]: the output shape.
        let linear = |x: &[usize], w: &TensorInfo| -> Result<Vec<usize>, ExecutionError> {
            let k = last(x);
            if w.shape.len() != 2 || w.shape[1] != k || x.is_empty() {
                return Err(mismatch(self, &[0, k], &w.shape));
            }
            let mut out = x.to_vec();
            *out.last_mut().unwrap_or(&mut 0) = w.shape[0];
            Ok(out)
        };
        match self {
            Op::ConvTranspose2d {
                stride,
                pads,
                dilation,
                groups,
                out_pad,
            } => {
                arity(2, 3)?;
                let x = act(0)?;
                let w = &inputs[1].shape;
                let g = *groups;
                let ok = x.len() == 4
                    && w.len() == 4
                    && g > 0
                    && w[0] == x[1]
                    && x[1].is_multiple_of(g)
                    && stride.iter().all(|&s| s > 0)
                    && dilation.iter().all(|&d| d > 0)
                    && out_pad.iter().zip(stride).all(|(&p, &s)| p < s);
                if !ok {
                    return Err(mismatch(self, x, w));
                }
                let channels = w[1].checked_mul(g).ok_or_else(|| mismatch(self, x, w))?;
                if inputs.len() == 3 {
                    vector(2, channels)?;
                }
                let out_len = |i: usize| {
                    let full = x[2 + i]
                        .checked_sub(1)?
                        .checked_mul(stride[i])?
                        .checked_add(dilation[i].checked_mul(w[2 + i].checked_sub(1)?)?)?
                        .checked_add(out_pad[i] + 1)?;
                    full.checked_sub(pads[i].checked_add(pads[i + 2])?)
                        .filter(|&n| n > 0)
                };
                match (out_len(0), out_len(1)) {
                    (Some(ho), Some(wo)) => Ok(vec![f32_out(vec![x[0], channels, ho, wo])]),
                    _ => Err(mismatch(self, x, w)),
                }
            }
            Op::Matmul => {
                arity(2, 2)?;
                let x = act(0)?;
                Ok(vec![f32_out(linear(x, &inputs[1])?)])
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                arity(2, 2)?;
                let (a, b) = (act(0)?, act(1)?);
                broadcast_shape(a, b)
                    .map(|s| vec![f32_out(s)])
                    .ok_or_else(|| mismatch(self, a, b))
            }
            Op::Scale(_)
            | Op::Clamp { .. }
            | Op::NanToNum { .. }
            | Op::Silu
            | Op::Gelu
            | Op::GeluTanh
            | Op::Relu
            | Op::LeakyRelu(_)
            | Op::Sigmoid
            | Op::Tanh
            | Op::Softcap(_)
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
            | Op::Softmax => {
                arity(1, 1)?;
                Ok(vec![f32_out(act(0)?.to_vec())])
            }
            Op::SwiGlu | Op::GeGlu => {
                arity(2, 2)?;
                let (g, u) = (act(0)?, act(1)?);
                if g != u {
                    return Err(mismatch(self, g, u));
                }
                Ok(vec![f32_out(g.to_vec())])
            }
            Op::Reshape(shape) => {
                arity(1, 1)?;
                let x = data(0)?;
                if numel(shape).is_none() || numel(shape) != numel(x) {
                    return Err(mismatch(self, x, shape));
                }
                Ok(vec![same_out(shape.clone())])
            }
            Op::Permute(perm) => {
                arity(1, 1)?;
                let x = data(0)?;
                let mut seen = vec![false; x.len()];
                for &p in perm {
                    if p >= x.len() || std::mem::replace(&mut seen[p], true) {
                        return Err(mismatch(self, x, perm));
                    }
                }
                if perm.len() != x.len() {
                    return Err(mismatch(self, x, perm));
                }
                Ok(vec![same_out(perm.iter().map(|&p| x[p]).collect())])
            }
            Op::Concat { axis } => {
                arity(1, usize::MAX)?;
                let first = data(0)?;
                if *axis >= first.len() {
                    return Err(mismatch(self, first, &[*axis]));
                }
                let mut out = first.to_vec();
                for i in 1..inputs.len() {
                    let s = data(i)?;
                    if inputs[i].dtype != inputs[0].dtype {
                        return Err(mismatch(self, first, s));
                    }
                    let same_rest = s.len() == first.len()
                        && (0..s.len()).all(|d| d == *axis || s[d] == first[d]);
                    if !same_rest {
                        return Err(mismatch(self, first, s));
                    }
                    out[*axis] = out[*axis]
                        .checked_add(s[*axis])
                        .ok_or_else(|| mismatch(self, first, s))?;
                }
                Ok(vec![same_out(out)])
            }
            Op::Slice { axis, start, end } => {
                arity(1, 1)?;
                let x = data(0)?;
                if *axis >= x.len() || start > end || *end > x[*axis] {
                    return Err(mismatch(self, x, &[*axis, *start, *end]));
                }
                let mut out = x.to_vec();
                out[*axis] = end - start;
                Ok(vec![same_out(out)])
            }
            Op::Split { axis, sizes } => {
                arity(1, 1)?;
                let x = data(0)?;
                let total = sizes.iter().try_fold(0usize, |a, &n| a.checked_add(n));
                if *axis >= x.len() || total != Some(x[*axis]) {
                    return Err(mismatch(self, x, sizes));
                }
                Ok(sizes
                    .iter()
                    .map(|&n| {
                        let mut s = x.to_vec();
                        s[*axis] = n;
                        same_out(s)
                    })
                    .collect())
            }
            Op::RmsNorm { .. } => {
                arity(2, 2)?;
                let x = act(0)?;
                vector(1, last(x))?;
                Ok(vec![f32_out(x.to_vec())])
            }
            Op::LayerNorm { .. } => {
                arity(2, 3)?;
                let x = act(0)?;
                for i in 1..inputs.len() {
                    vector(i, last(x))?;
                }
                Ok(vec![f32_out(x.to_vec())])
            }
            Op::GroupNorm { groups, .. } => {
                arity(3, 3)?;
                let x = act(0)?;
                if x.len() < 2 || *groups == 0 || x[1] % groups != 0 {
                    return Err(mismatch(self, x, &[*groups]));
                }
                vector(1, x[1])?;
                vector(2, x[1])?;
                Ok(vec![f32_out(x.to_vec())])
            }
            Op::GroupNormAffine { groups, .. } => {
                arity(5, 5)?;
                let x = act(0)?;
                if x.len() < 2 || *groups == 0 || !x[1].is_multiple_of(*groups) {
                    return Err(mismatch(self, x, &[*groups]));
                }
                vector(1, *groups)?;
                vector(2, *groups)?;
                for t in &inputs[3..5] {
                    if t.numel() != x[1] {
                        return Err(mismatch(self, &[x[1]], &t.shape));
                    }
                }
                Ok(vec![f32_out(x.to_vec())])
            }
            Op::FusedGroupNorm {
                groups,
                eps,
                act: activation,
            } => {
                arity(5, 7)?;
                if inputs.len() == 6 {
                    return Err(mismatch(self, &[5, 7], &[6]));
                }
                let normed = Op::GroupNormAffine {
                    groups: *groups,
                    eps: *eps,
                }
                .infer(&inputs[..5])?;
                let x = act(0)?;
                for i in 5..inputs.len() {
                    let t = act(i)?;
                    let per_entry = t.len() == x.len()
                        && (t[0] == 1 || t[0] == x[0])
                        && t[1] == x[1]
                        && t[2..].iter().all(|&d| d == 1);
                    if !per_entry {
                        return Err(mismatch(self, x, t));
                    }
                }
                if let Some(a) = activation.as_deref().filter(|a| !a.is_unary_map()) {
                    return Err(ExecutionError::UnsupportedOp {
                        op: format!(
                            "FusedGroupNorm (activation {} is not element-wise)",
                            a.name()
                        ),
                        backend: "any".into(),
                        input_dtype: DType::F32,
                    });
                }
                Ok(normed)
            }
            Op::Rope { rot_dim, pos, .. } => {
                if inputs.len() != 1 && inputs.len() != 3 {
                    return Err(mismatch(self, &[1, 3], &[inputs.len()]));
                }
                let x = act(0)?;
                if x.len() != 3 || rot_dim % 2 != 0 || *rot_dim > x[2] || *rot_dim == 0 {
                    return Err(mismatch(self, &[0, 0, *rot_dim], x));
                }
                if inputs.len() == 3 {
                    let end = pos
                        .checked_add(x[0])
                        .ok_or_else(|| mismatch(self, &[*pos], x))?;
                    let need = [end, rot_dim / 2];
                    for i in 1..3 {
                        let c = act(i)?;
                        if c.len() != 2 || c[0] < need[0] || c[1] != need[1] {
                            return Err(mismatch(self, &need, c));
                        }
                    }
                }
                Ok(vec![f32_out(x.to_vec())])
            }
            Op::Sdpa { mask, kv_len, .. } => {
                arity(3, 3)?;
                let (q, k, v) = (act(0)?, act(1)?, act(2)?);
                let ok = q.len() == 3
                    && k.len() == 3
                    && v.len() == 3
                    && k[0] == v[0]
                    && k[1] == v[1]
                    && q[2] == k[2]
                    && k[1] > 0
                    && q[1] % k[1] == 0;
                if !ok {
                    return Err(mismatch(self, q, k));
                }
                let n = kv_len.unwrap_or(k[0]);
                if n > k[0] {
                    return Err(mismatch(self, &[n], &k[..1]));
                }
                if let Mask::Padding(keep) = mask {
                    if keep.len() != n {
                        return Err(mismatch(self, &[n], &[keep.len()]));
                    }
                }
                Ok(vec![f32_out(vec![q[0], q[1], v[2]])])
            }
            Op::FusedLinearAddNorm { .. } => {
                arity(6, 6)?;
                let x = act(0)?;
                let out = linear(x, &inputs[1])?;
                let n = inputs[1].shape[0];
                vector(2, n)?;
                if act(3)? != out.as_slice() {
                    return Err(mismatch(self, &out, &inputs[3].shape));
                }
                vector(4, n)?;
                vector(5, n)?;
                Ok(vec![f32_out(out)])
            }
            Op::SdpaBatch { lengths, .. } => {
                let out = Op::Sdpa {
                    scale: None,
                    mask: Mask::None,
                    q_pos: 0,
                    kv_len: None,
                }
                .infer(inputs)?;
                let (rows, k) = (inputs[0].shape[0], &inputs[1].shape);
                let n = lengths.len();
                let seq = rows.checked_div(n).unwrap_or(0);
                let ok = n > 0
                    && seq * n == rows
                    && k[0] == rows
                    && lengths.iter().all(|&len| (1..=seq).contains(&len));
                if !ok {
                    return Err(mismatch(self, &[rows], lengths));
                }
                Ok(out)
            }
            Op::FusedRopeAppend { pos, .. } => {
                arity(7, 7)?;
                let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
                let (cos, sin) = (&inputs[3], &inputs[4]);
                let rope = self.rope_part().ok_or_else(|| mismatch(self, &[7], &[0]))?;
                let q_out = rope.infer(&[q.clone(), cos.clone(), sin.clone()])?;
                rope.infer(&[k.clone(), cos.clone(), sin.clone()])?;
                let caches = Op::KvAppend { pos: *pos }.infer(&[
                    inputs[5].clone(),
                    inputs[6].clone(),
                    k.clone(),
                    v.clone(),
                ])?;
                Ok(q_out.into_iter().chain(caches).collect())
            }
            Op::KvAppend { pos } => {
                arity(4, 4)?;
                let (kc, vc, k, v) = (act(0)?, act(1)?, act(2)?, act(3)?);
                let ok = kc.len() == 3
                    && vc.len() == 3
                    && kc[0] == vc[0]
                    && k.len() == 3
                    && v.len() == 3
                    && k[0] == v[0]
                    && k[1..] == kc[1..]
                    && v[1..] == vc[1..];
                if !ok {
                    return Err(mismatch(self, kc, k));
                }
                let requested = pos.saturating_add(k[0]);
                if requested > kc[0] {
                    return Err(ExecutionError::ContextOverflow {
                        max: kc[0],
                        requested,
                    });
                }
                Ok(vec![f32_out(kc.to_vec()), f32_out(vc.to_vec())])
            }
            Op::Embed => {
                arity(2, 2)?;
                let i = ids(0)?;
                let t = &inputs[1].shape;
                if t.len() != 2 {
                    return Err(mismatch(self, &[0, 0], t));
                }
                let mut out = i.to_vec();
                out.push(t[1]);
                Ok(vec![f32_out(out)])
            }
            Op::Conv1d { stride, padding } => {
                arity(2, 3)?;
                let x = act(0)?;
                let w = &inputs[1].shape;
                let ok = x.len() == 2 && w.len() == 3 && w[1] == x[0] && *stride > 0;
                let padded = padding
                    .checked_mul(2)
                    .and_then(|p| p.checked_add(x[1]))
                    .filter(|_| ok);
                let Some(span) = padded.and_then(|p| p.checked_sub(w[2])) else {
                    return Err(mismatch(self, x, w));
                };
                if inputs.len() == 3 {
                    vector(2, w[0])?;
                }
                let lout = span / stride + 1;
                Ok(vec![f32_out(vec![w[0], lout])])
            }
            Op::FusedConvAdd { conv, second, .. } => {
                let at = 1 + usize::from(*second);
                if !matches!(**conv, Op::Conv2d { .. }) || inputs.len() < at + 2 {
                    return Err(ExecutionError::UnsupportedOp {
                        op: format!(
                            "FusedConvAdd (of {} with {} inputs)",
                            conv.name(),
                            inputs.len()
                        ),
                        backend: "any".into(),
                        input_dtype: DType::F32,
                    });
                }
                let y = conv.infer(&inputs[at..])?;
                let r = act(0)?;
                if y[0].numel() != inputs[0].numel() {
                    return Err(mismatch(self, &y[0].shape, r));
                }
                if *second && act(1)? != r {
                    // A second addend that broadcasts: the shape of the `Add` it stands for.
                    return Op::Add.infer(&inputs[..2]);
                }
                Ok(vec![f32_out(r.to_vec())])
            }
            Op::FusedAttention => {
                arity(3, 3)?;
                let (q, kt, v) = (act(0)?, act(1)?, act(2)?);
                let r = q.len();
                let fits = r >= 2
                    && kt.len() == r
                    && v.len() == r
                    && kt[..r - 2] == q[..r - 2]
                    && v[..r - 2] == q[..r - 2]
                    && kt[r - 2] == q[r - 1]
                    && v[r - 2] == kt[r - 1];
                if !fits {
                    return Err(mismatch(self, q, if kt.len() == r { v } else { kt }));
                }
                let mut out = q.to_vec();
                out[r - 1] = v[r - 1];
                Ok(vec![f32_out(out)])
            }
            Op::BatchMatmul => {
                arity(2, 2)?;
                let (a, b) = (act(0)?, act(1)?);
                let (ra, rb) = (a.len(), b.len());
                if ra < 2 || rb < 2 || a[ra - 1] != b[rb - 2] {
                    return Err(mismatch(self, a, b));
                }
                let mut out = broadcast_shape(&a[..ra - 2], &b[..rb - 2])
                    .ok_or_else(|| mismatch(self, a, b))?;
                out.extend([a[ra - 2], b[rb - 1]]);
                Ok(vec![f32_out(out)])
            }
            Op::Conv2d {
                stride,
                pads,
                dilation,
                groups,
            } => {
                arity(2, 3)?;
                let x = act(0)?;
                let w = &inputs[1].shape;
                let g = *groups;
                let ok = x.len() == 4
                    && w.len() == 4
                    && g > 0
                    && x[1].is_multiple_of(g)
                    && w[0].is_multiple_of(g)
                    && w[1].checked_mul(g) == Some(x[1])
                    && stride.iter().all(|&s| s > 0)
                    && dilation.iter().all(|&d| d > 0);
                if !ok {
                    return Err(mismatch(self, x, w));
                }
                if inputs.len() == 3 {
                    vector(2, w[0])?;
                }
                let out_len = |i: usize| {
                    let span = dilation[i].checked_mul(w[2 + i].checked_sub(1)?)? + 1;
                    let padded = x[2 + i].checked_add(pads[i])?.checked_add(pads[i + 2])?;
                    Some(padded.checked_sub(span)? / stride[i] + 1)
                };
                match (out_len(0), out_len(1)) {
                    (Some(ho), Some(wo)) => Ok(vec![f32_out(vec![x[0], w[0], ho, wo])]),
                    _ => Err(mismatch(self, x, w)),
                }
            }
            Op::AvgPool2d {
                kernel,
                stride,
                pads,
                ..
            } => {
                arity(1, 1)?;
                let x = act(0)?;
                if x.len() != 4 {
                    return Err(mismatch(self, &[0, 0, 0, 0], x));
                }
                let out_len = |i: usize| {
                    let padded = x[2 + i].checked_add(pads[i])?.checked_add(pads[i + 2])?;
                    (kernel[i] > 0 && stride[i] > 0)
                        .then(|| Some(padded.checked_sub(kernel[i])? / stride[i] + 1))?
                };
                match (out_len(0), out_len(1)) {
                    (Some(ho), Some(wo)) => Ok(vec![f32_out(vec![x[0], x[1], ho, wo])]),
                    _ => Err(mismatch(self, x, kernel)),
                }
            }
            Op::ResizeNearest { scales } => {
                arity(1, 1)?;
                let x = act(0)?;
                if scales.len() != x.len() || scales.contains(&0) {
                    return Err(mismatch(self, x, scales));
                }
                let out: Option<Vec<usize>> = x
                    .iter()
                    .zip(scales)
                    .map(|(&d, &s)| d.checked_mul(s))
                    .collect();
                match out {
                    Some(out) => Ok(vec![f32_out(out)]),
                    None => Err(mismatch(self, x, scales)),
                }
            }
            Op::Argmax => {
                arity(1, 1)?;
                let x = act(0)?;
                if last(x) == 0 {
                    return Err(mismatch(self, &[1], x));
                }
                Ok(vec![TensorInfo::new(
                    &x[..x.len().saturating_sub(1)],
                    DType::I32,
                )])
            }
            Op::Sample(_) => {
                arity(1, 2)?;
                let x = act(0)?;
                if x.is_empty() || last(x) == 0 {
                    return Err(mismatch(self, &[1], x));
                }
                if inputs.len() == 2 {
                    ids(1)?;
                }
                Ok(vec![TensorInfo::new(&[1], DType::I32)])
            }
            Op::FusedNormMatmul { .. } => {
                arity(3, 3)?;
                let x = act(0)?;
                vector(1, last(x))?;
                Ok(vec![f32_out(linear(x, &inputs[2])?)])
            }
            Op::FusedSkipNorm { .. } => {
                arity(3, 3)?;
                let (x, s) = (act(0)?, act(1)?);
                if x != s {
                    return Err(mismatch(self, x, s));
                }
                vector(2, last(x))?;
                Ok(vec![f32_out(x.to_vec()), f32_out(x.to_vec())])
            }
            Op::FusedSwiGlu => {
                arity(3, 3)?;
                let x = act(0)?;
                let g = linear(x, &inputs[1])?;
                let u = linear(x, &inputs[2])?;
                if g != u {
                    return Err(mismatch(self, &g, &u));
                }
                Ok(vec![f32_out(g)])
            }
            Op::FusedQkv => {
                arity(4, 4)?;
                let x = act(0)?;
                (1..4)
                    .map(|i| Ok(f32_out(linear(x, &inputs[i])?)))
                    .collect()
            }
            Op::MatmulBias { act: activation } => {
                arity(3, 3)?;
                let x = act(0)?;
                let out = linear(x, &inputs[1])?;
                vector(2, inputs[1].shape[0])?;
                if let Some(a) = activation.as_deref().filter(|a| !a.is_unary_map()) {
                    return Err(ExecutionError::UnsupportedOp {
                        op: format!("MatmulBias (activation {} is not element-wise)", a.name()),
                        backend: "any".into(),
                        input_dtype: DType::F32,
                    });
                }
                Ok(vec![f32_out(out)])
            }
            Op::Lstm(spec) => {
                arity(6, 7)?;
                let x = act(0)?;
                let (h, d) = (spec.hidden, spec.direction.count());
                let [s, b, i] = *x else {
                    return Err(mismatch(self, &[0, 0, 0], x));
                };
                let want: [&[usize]; 6] = [
                    &[d, 4 * h, i],
                    &[d, 4 * h, h],
                    &[d, 8 * h],
                    &[d, b, h],
                    &[d, b, h],
                    &[d, 3 * h],
                ];
                for (k, w) in want.iter().enumerate().take(inputs.len() - 1) {
                    if act(k + 1)? != *w {
                        return Err(mismatch(self, w, &inputs[k + 1].shape));
                    }
                }
                if let Some(l) = &spec.seq_lens {
                    if l.len() != b || l.iter().any(|&n| n == 0 || n > s) {
                        return Err(mismatch(self, &[b, s], l));
                    }
                }
                Ok(vec![
                    f32_out(vec![s, d, b, h]),
                    f32_out(vec![d, b, h]),
                    f32_out(vec![d, b, h]),
                ])
            }
            // The index ops, whose rules live in `index_shapes`.
            op => super::index_shapes::infer(op, inputs),
        }
    }
}

/// `inv_freq[j] = 1 / base^(2j / rot_dim)` for j in `0..rot_dim/2`, in f64.
/// Scaled RoPE variants (linear, llama3, yarn) adjust these before building the cache.
pub fn rope_inv_freq(rot_dim: usize, base: f64) -> Vec<f64> {
    (0..rot_dim / 2)
        .map(|j| 1.0 / base.powf(2.0 * j as f64 / rot_dim as f64))
        .collect()
}

/// The cos/sin cache of [`Op::Rope`]: two `[max_pos, inv_freq.len()]` f32
/// tensors, angles `pos * inv_freq[j]` computed in f64.
pub fn rope_cache(max_pos: usize, inv_freq: &[f64]) -> Result<(Tensor, Tensor), ExecutionError> {
    let half = inv_freq.len();
    let mut cos = Vec::with_capacity(max_pos * half);
    let mut sin = Vec::with_capacity(max_pos * half);
    for p in 0..max_pos {
        for &f in inv_freq {
            let angle = p as f64 * f;
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    let shape = [max_pos, half];
    Ok((
        Tensor::from_f32(&shape, cos)?,
        Tensor::from_f32(&shape, sin)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize]) -> TensorInfo {
        TensorInfo::new(shape, DType::F32)
    }

    #[test]
    fn shape_arithmetic_that_would_overflow_is_an_error() {
        let conv = |pads: [usize; 4], dilation: usize| Op::Conv2d {
            stride: [1, 1],
            pads,
            dilation: [dilation; 2],
            groups: 1,
        };
        let x = f32s(&[1, 2, 8, 8]);
        let cases = [
            (
                conv([usize::MAX, 0, 1, 0], 1),
                vec![x.clone(), f32s(&[4, 2, 3, 3])],
            ),
            (conv([0; 4], 2), vec![x, f32s(&[4, 2, 0, 3])]),
            (
                Op::Concat { axis: 0 },
                vec![f32s(&[usize::MAX, 1]), f32s(&[2, 1])],
            ),
            (Op::Reshape(vec![1 << 40, 1 << 40]), vec![f32s(&[0])]),
        ];
        for (op, inputs) in cases {
            let r = op.infer(&inputs);
            assert!(
                matches!(r, Err(ExecutionError::ShapeMismatch { .. })),
                "{op:?}: {r:?}"
            );
        }
    }

    #[test]
    fn outputs_whose_bytes_overflow_are_out_of_memory() {
        let ids = TensorInfo::new(&[1 << 40], DType::I32);
        let r = Op::Embed.infer(&[ids, f32s(&[8, 1 << 30])]);
        assert_eq!(
            r,
            Err(ExecutionError::OutOfMemory {
                backend: "any".into(),
                requested_bytes: usize::MAX,
            })
        );
        let r = Op::Embed.infer(&[TensorInfo::new(&[3], DType::I32), f32s(&[8, 16])]);
        assert_eq!(r, Ok(vec![f32s(&[3, 16])]));
    }
}
