//! Reference loops of the recurrent op [`Op::Lstm`]: one step at a time, the gate
//! sums of each step accumulated in f64.

use crate::backend::op::{LstmSpec, RnnDirection};

/// The arguments of one `Lstm` call: shapes from the inputs, attributes from the op.
pub(super) struct LstmArgs<'a> {
    /// Sequence length `S`.
    pub steps: usize,
    /// Batch `B`.
    pub batch: usize,
    /// Input width `I`.
    pub input: usize,
    /// The op's attributes.
    pub spec: &'a LstmSpec,
}

/// The logistic function, `1 / (1 + e^-x)`.
fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `[y [S, D, B, H], h [D, B, H], c [D, B, H]]` of `Lstm` over `x [S, B, I]` with
/// weights `w [D, 4H, I]`, `r [D, 4H, H]`, biases `b [D, 8H]`, initial state `h0`,
/// `c0 [D, B, H]` and peepholes `p [D, 3H]` if any (gate order i, o, f, c).
#[allow(clippy::too_many_arguments)]
pub(super) fn lstm(
    a: &LstmArgs,
    x: &[f32],
    w: &[f32],
    r: &[f32],
    b: &[f32],
    h0: &[f32],
    c0: &[f32],
    p: Option<&[f32]>,
) -> [Vec<f32>; 3] {
    let spec = a.spec;
    let (s, nb, ni, nh) = (a.steps, a.batch, a.input, spec.hidden);
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
        let wd = &w[d * 4 * nh * ni..(d + 1) * 4 * nh * ni];
        let rd = &r[d * 4 * nh * nh..(d + 1) * 4 * nh * nh];
        let bd = &b[d * 8 * nh..(d + 1) * 8 * nh];
        let pd = p.map(|p| &p[d * 3 * nh..(d + 1) * 3 * nh]);
        for bi in 0..nb {
            let state = (d * nb + bi) * nh;
            let mut h: Vec<f32> = h0[state..state + nh].to_vec();
            let mut c: Vec<f32> = c0[state..state + nh].to_vec();
            let len = spec.seq_lens.as_ref().map_or(s, |l| l[bi]);
            let order: Box<dyn Iterator<Item = usize>> = if reverse {
                Box::new((0..len).rev())
            } else {
                Box::new(0..len)
            };
            for t in order {
                let xt = &x[(t * nb + bi) * ni..(t * nb + bi + 1) * ni];
                // Gate inputs s(g) for the 4H rows (i, o, f, c).
                let pre: Vec<f64> = (0..4 * nh)
                    .map(|row| {
                        let wx: f64 = wd[row * ni..(row + 1) * ni]
                            .iter()
                            .zip(xt)
                            .map(|(&w, &v)| w as f64 * v as f64)
                            .sum();
                        let rh: f64 = rd[row * nh..(row + 1) * nh]
                            .iter()
                            .zip(&h)
                            .map(|(&w, &v)| w as f64 * v as f64)
                            .sum();
                        wx + rh + bd[row] as f64 + bd[4 * nh + row] as f64
                    })
                    .collect();
                let peep =
                    |k: usize, j: usize, cv: f64| pd.map_or(0.0, |p| p[k * nh + j] as f64 * cv);
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
