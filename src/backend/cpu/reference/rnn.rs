//! Reference loops of the recurrent op [`Op::Lstm`](crate::backend::Op::Lstm): one
//! step at a time, the gate sums of each step accumulated in f64. The step driver
//! ([`run_lstm`]) is shared with the fast cpu op, which computes the gate sums its
//! own way.

use crate::backend::cpu::simd;
use crate::backend::op::{LstmSpec, RnnDirection};
use crate::backend::{Tensor, TensorInfo};
use crate::error::ExecutionError;

/// The sizes of one `Lstm` call (from its input) and the op's attributes.
struct LstmArgs<'a> {
    /// Sequence length `S`.
    pub steps: usize,
    /// Batch `B`.
    pub batch: usize,
    /// The op's attributes.
    pub spec: &'a LstmSpec,
}

/// The logistic function, `1 / (1 + e^-x)`.
fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `[y [S, D, B, H], h [D, B, H], c [D, B, H]]` of `Lstm` from the initial state
/// `h0`, `c0 [D, B, H]` and peepholes `p [D, 3H]` if any, where `gates(d, t, b, h)`
/// gives the 4H gate sums `x_t W^T + h R^T + Wb + Rb` (rows i, o, f, c) of
/// direction d at step t of batch entry b with hidden state `h`.
fn run_lstm(
    a: &LstmArgs,
    h0: &[f32],
    c0: &[f32],
    p: Option<&[f32]>,
    mut gates: impl FnMut(usize, usize, usize, &[f32]) -> Vec<f64>,
) -> [Vec<f32>; 3] {
    let spec = a.spec;
    let (s, nb, nh) = (a.steps, a.batch, spec.hidden);
    let nd = spec.direction.count();
    let mut y = vec![0f32; s * nd * nb * nh];
    let mut h_out = vec![0f32; nd * nb * nh];
    let mut c_out = vec![0f32; nd * nb * nh];
    let clip = |v: f64| match spec.clip {
        Some(c) => v.clamp(-(c as f64), c as f64),
        None => v,
    };
    for d in 0..nd {
        let reverse = spec.direction == RnnDirection::Reverse || d == 1;
        let pd = p.map(|p| &p[d * 3 * nh..(d + 1) * 3 * nh]);
        let peep = |k: usize, j: usize, cv: f64| pd.map_or(0.0, |p| p[k * nh + j] as f64 * cv);
        for bi in 0..nb {
            let state = (d * nb + bi) * nh;
            let mut h: Vec<f32> = h0[state..state + nh].to_vec();
            let mut c: Vec<f32> = c0[state..state + nh].to_vec();
            let len = spec.seq_lens.as_ref().map_or(s, |l| l[bi]);
            for k in 0..len {
                let t = if reverse { len - 1 - k } else { k };
                let pre = gates(d, t, bi, &h);
                for j in 0..nh {
                    let cj = c[j] as f64;
                    let i = sigmoid(clip(pre[j] + peep(0, j, cj)));
                    let f = if spec.input_forget {
                        1.0 - i
                    } else {
                        sigmoid(clip(pre[2 * nh + j] + peep(2, j, cj)))
                    };
                    let g = clip(pre[3 * nh + j]).tanh();
                    let cn = f * cj + i * g;
                    let o = sigmoid(clip(pre[nh + j] + peep(1, j, cn)));
                    c[j] = cn as f32;
                    h[j] = (o * cn.tanh()) as f32;
                }
                let at = ((t * nd + d) * nb + bi) * nh;
                y[at..at + nh].copy_from_slice(&h);
            }
            h_out[state..state + nh].copy_from_slice(&h);
            c_out[state..state + nh].copy_from_slice(&c);
        }
    }
    [y, h_out, c_out]
}

/// `y [M, N] = x [M, K] W^T` for row-major `W [N, K]` (a fast matmul).
pub(crate) type Gemm<'a> =
    &'a dyn Fn(&[f32], usize, &[f32], usize, &mut [f32]) -> Result<(), ExecutionError>;

/// `Lstm` on `inputs` (`x [S, B, I]`, `w [D, 4H, I]`, `r [D, 4H, H]`, `b [D, 8H]`,
/// `h0`, `c0`, peepholes `p` if any; [`run_lstm`]) into tensors of `outs`. Without
/// `gemm` each gate sum is accumulated in f64 (the reference); with it, `x W^T` of
/// all steps is one `gemm` per direction and `h R^T` an f32 [`simd::dot`] per row.
pub(crate) fn execute(
    spec: &LstmSpec,
    inputs: &[Tensor],
    outs: &[TensorInfo],
    gemm: Option<Gemm>,
) -> Result<Vec<Tensor>, ExecutionError> {
    let read = |i: usize| inputs[i].read_f32("Lstm");
    let shape = inputs[0].shape();
    let &[steps, batch, input] = shape else {
        return Err(ExecutionError::ShapeMismatch {
            op: "Lstm".into(),
            expected: vec![0, 0, 0],
            got: shape.to_vec(),
        });
    };
    let a = LstmArgs { steps, batch, spec };
    let (x, w, r, b) = (read(0)?, read(1)?, read(2)?, read(3)?);
    let (h0, c0) = (read(4)?, read(5)?);
    let p = inputs.get(6).map(|t| t.read_f32("Lstm")).transpose()?;
    let (nb, ni, nh, nd) = (batch, input, spec.hidden, spec.direction.count());
    let f64_dot =
        |u: &[f32], v: &[f32]| -> f64 { u.iter().zip(v).map(|(&p, &q)| p as f64 * q as f64).sum() };
    let rows = |d: usize| {
        (
            &w[d * 4 * nh * ni..(d + 1) * 4 * nh * ni],
            &r[d * 4 * nh * nh..(d + 1) * 4 * nh * nh],
            &b[d * 8 * nh..(d + 1) * 8 * nh],
        )
    };
    let result = match gemm {
        None => run_lstm(&a, &h0, &c0, p.as_deref(), |d, t, bi, h| {
            let xt = &x[(t * nb + bi) * ni..(t * nb + bi + 1) * ni];
            let (wd, rd, bd) = rows(d);
            (0..4 * nh)
                .map(|g| {
                    f64_dot(&wd[g * ni..(g + 1) * ni], xt)
                        + f64_dot(&rd[g * nh..(g + 1) * nh], h)
                        + bd[g] as f64
                        + bd[4 * nh + g] as f64
                })
                .collect()
        }),
        Some(gemm) => {
            let mut gx = vec![vec![0f32; steps * nb * 4 * nh]; nd];
            for (d, out) in gx.iter_mut().enumerate() {
                gemm(&x, ni, rows(d).0, 4 * nh, out)?;
            }
            run_lstm(&a, &h0, &c0, p.as_deref(), |d, t, bi, h| {
                let at = (t * nb + bi) * 4 * nh;
                let (_, rd, bd) = rows(d);
                (0..4 * nh)
                    .map(|g| {
                        f64::from(gx[d][at + g] + simd::dot(&rd[g * nh..(g + 1) * nh], h))
                            + bd[g] as f64
                            + bd[4 * nh + g] as f64
                    })
                    .collect()
            })
        }
    };
    outs.iter()
        .zip(result)
        .map(|(info, v)| Tensor::from_f32(&info.shape, v))
        .collect()
}
