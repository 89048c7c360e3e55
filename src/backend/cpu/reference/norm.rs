//! Reference normalizations (statistics in f64).

/// Each row of length `g.len()`: `x / sqrt(mean(x^2) + eps) * g` (`* (1 + g)` when `add_one`).
pub(super) fn rms_norm(x: &[f32], g: &[f32], eps: f32, add_one: bool) -> Vec<f32> {
    let d = g.len();
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(d.max(1)) {
        let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / d as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for (&v, &gv) in row.iter().zip(g) {
            let gain = if add_one { 1.0 + gv as f64 } else { gv as f64 };
            y.push((v as f64 * inv * gain) as f32);
        }
    }
    y
}

/// Each row: `(x - mean) / sqrt(var + eps) * g + b`, population variance.
pub(super) fn layer_norm(x: &[f32], g: &[f32], b: Option<&[f32]>, eps: f32) -> Vec<f32> {
    let d = g.len();
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(d.max(1)) {
        let (mean, var) = mean_var(row);
        let inv = 1.0 / (var + eps as f64).sqrt();
        for (i, &v) in row.iter().enumerate() {
            let bias = b.map_or(0.0, |b| b[i] as f64);
            y.push(((v as f64 - mean) * inv * g[i] as f64 + bias) as f32);
        }
    }
    y
}

/// `x [B, C, rest..]`: statistics over each group of `C / groups` channels
/// (and all of `rest`), then per-channel `g`, `b`.
pub(super) fn group_norm(
    x: &[f32],
    shape: &[usize],
    g: &[f32],
    b: &[f32],
    groups: usize,
    eps: f32,
) -> Vec<f32> {
    let c = shape[1];
    let rest: usize = shape[2..].iter().product();
    let per_group = c / groups * rest;
    let mut y = vec![0.0; x.len()];
    for (gi, (xg, yg)) in x
        .chunks(per_group.max(1))
        .zip(y.chunks_mut(per_group.max(1)))
        .enumerate()
    {
        let (mean, var) = mean_var(xg);
        let inv = 1.0 / (var + eps as f64).sqrt();
        for (i, (&v, o)) in xg.iter().zip(yg.iter_mut()).enumerate() {
            let ch = (gi % groups) * (c / groups) + i / rest.max(1);
            *o = ((v as f64 - mean) * inv * g[ch] as f64 + b[ch] as f64) as f32;
        }
    }
    y
}

fn mean_var(v: &[f32]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean, var)
}
