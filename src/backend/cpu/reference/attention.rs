//! Reference RoPE and scaled dot-product attention.

use crate::backend::op::{Mask, RopeStyle};

/// Rotates `x [S, H, d]`; row s is at position `pos + s`. `cache` is the
/// cos/sin table `[P, rot/2]`; without it the angles are computed in f64.
pub(super) fn rope(
    x: &[f32],
    shape: &[usize],
    style: RopeStyle,
    rot: usize,
    pos: usize,
    base: f32,
    cache: Option<(&[f32], &[f32])>,
) -> Vec<f32> {
    let (s_len, heads, d) = (shape[0], shape[1], shape[2]);
    let half = rot / 2;
    let mut y = x.to_vec();
    for s in 0..s_len {
        let p = pos + s;
        for h in 0..heads {
            let row = (s * heads + h) * d;
            for j in 0..half {
                let (cos, sin) = match cache {
                    Some((c, sn)) => (c[p * half + j], sn[p * half + j]),
                    None => {
                        let angle = p as f64 / (base as f64).powf(2.0 * j as f64 / rot as f64);
                        (angle.cos() as f32, angle.sin() as f32)
                    }
                };
                let (i1, i2) = match style {
                    RopeStyle::Neox => (row + j, row + j + half),
                    RopeStyle::Normal => (row + 2 * j, row + 2 * j + 1),
                };
                let (x1, x2) = (x[i1], x[i2]);
                y[i1] = x1 * cos - x2 * sin;
                y[i2] = x1 * sin + x2 * cos;
            }
        }
    }
    y
}

/// Shapes and settings of one attention call.
pub(super) struct SdpaArgs<'a> {
    pub q_shape: &'a [usize],
    pub k_shape: &'a [usize],
    pub v_dim: usize,
    pub scale: Option<f32>,
    pub mask: &'a Mask,
    pub q_pos: usize,
    pub kv_len: usize,
}

/// Whether the query at absolute position `p` sees key `j`.
pub(crate) fn visible(mask: &Mask, p: usize, j: usize) -> bool {
    match mask {
        Mask::None => true,
        Mask::Causal => j <= p,
        Mask::Sliding(w) => j <= p && j + w > p,
        Mask::Padding(keep) => keep[j],
    }
}

/// `O[i, h] = sum_j softmax_j(scale q_i.k_j) v_j` over keys `0..kv_len`,
/// query head h reading kv head `h / (H / Hkv)`.
pub(super) fn sdpa(a: &SdpaArgs, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
    let (sq, heads, d) = (a.q_shape[0], a.q_shape[1], a.q_shape[2]);
    let kv_heads = a.k_shape[1];
    let dv = a.v_dim;
    let group = heads / kv_heads;
    let scale = a.scale.unwrap_or(1.0 / (d as f32).sqrt()) as f64;
    let mut out = vec![0.0; sq * heads * dv];
    for i in 0..sq {
        let p = a.q_pos + i;
        for h in 0..heads {
            let kh = h / group;
            let qrow = &q[(i * heads + h) * d..][..d];
            let scores: Vec<f64> = (0..a.kv_len)
                .map(|j| {
                    if !visible(a.mask, p, j) {
                        return f64::NEG_INFINITY;
                    }
                    let krow = &k[(j * kv_heads + kh) * d..][..d];
                    qrow.iter()
                        .zip(krow)
                        .map(|(&x, &y)| x as f64 * y as f64)
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                continue;
            }
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            let orow = &mut out[(i * heads + h) * dv..][..dv];
            for c in 0..dv {
                let mut acc = 0.0;
                for (j, w) in weights.iter().enumerate() {
                    acc += w * v[(j * kv_heads + kh) * dv + c] as f64;
                }
                orow[c] = (acc / total) as f32;
            }
        }
    }
    out
}
