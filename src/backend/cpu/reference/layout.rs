//! Reference layout ops and broadcasting, through explicit multi-indices.

/// Row-major strides of `shape`.
pub(super) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `shape`.
pub(super) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        idx[i] = flat % shape[i];
        flat /= shape[i];
    }
    idx
}

/// Flat position in `shape` (right-aligned, size-1 dims broadcast) of output index `idx`.
fn broadcast_flat(idx: &[usize], shape: &[usize]) -> usize {
    let offset = idx.len() - shape.len();
    let st = strides(shape);
    (0..shape.len())
        .map(|i| {
            if shape[i] == 1 {
                0
            } else {
                idx[offset + i] * st[i]
            }
        })
        .sum()
}

/// `f(a, b)` with NumPy broadcasting into `out_shape`.
pub(super) fn broadcast(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out_shape: &[usize],
    f: fn(f32, f32) -> f32,
) -> Vec<f32> {
    let n: usize = out_shape.iter().product();
    (0..n)
        .map(|flat| {
            let idx = unravel(flat, out_shape);
            f(
                a[broadcast_flat(&idx, a_shape)],
                b[broadcast_flat(&idx, b_shape)],
            )
        })
        .collect()
}

/// `y[i0, i1, ..] = x[..]` where output dim `d` is input dim `perm[d]`.
pub(super) fn permute<T: Copy>(x: &[T], shape: &[usize], perm: &[usize]) -> Vec<T> {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let st = strides(shape);
    (0..x.len())
        .map(|flat| {
            let idx = unravel(flat, &out_shape);
            let src: usize = idx.iter().zip(perm).map(|(&i, &p)| i * st[p]).sum();
            x[src]
        })
        .collect()
}

/// Concatenation of `parts` (values, shape) along `axis`.
pub(super) fn concat<T: Copy>(parts: &[(&[T], &[usize])], axis: usize) -> Vec<T> {
    let shape = parts[0].1;
    let outer: usize = shape[..axis].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for (values, s) in parts {
            let block: usize = s[axis..].iter().product();
            out.extend_from_slice(&values[o * block..(o + 1) * block]);
        }
    }
    out
}

/// `x[.., start..end, ..]` along `axis`.
pub(super) fn slice<T: Copy>(
    x: &[T],
    shape: &[usize],
    axis: usize,
    start: usize,
    end: usize,
) -> Vec<T> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::with_capacity(outer * (end - start) * inner);
    for o in 0..outer {
        let base = o * shape[axis] * inner;
        out.extend_from_slice(&x[base + start * inner..base + end * inner]);
    }
    out
}

/// For each flat position of `out_shape`, the flat position in `shape` that NumPy
/// broadcasting reads.
pub(super) fn broadcast_src(out_shape: &[usize], shape: &[usize]) -> Vec<usize> {
    let n: usize = out_shape.iter().product();
    (0..n)
        .map(|flat| broadcast_flat(&unravel(flat, out_shape), shape))
        .collect()
}
