//! Reference layout ops through explicit multi-indices, and broadcasting through source
//! positions stepped per output index.

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

/// `f(a, b)` with NumPy broadcasting into `out_shape`.
pub(super) fn broadcast(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out_shape: &[usize],
    f: fn(f32, f32) -> f32,
) -> Vec<f32> {
    let (sa, sb) = (
        broadcast_src(out_shape, a_shape),
        broadcast_src(out_shape, b_shape),
    );
    sa.iter().zip(&sb).map(|(&i, &j)| f(a[i], b[j])).collect()
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

/// For each flat position of `out_shape`, the flat position in `shape` (right-aligned,
/// size-1 dims broadcast) that NumPy broadcasting reads. The output index is stepped like an
/// odometer, the source position moving by each dim's stride (zero where broadcast).
pub(super) fn broadcast_src(out_shape: &[usize], shape: &[usize]) -> Vec<usize> {
    let n: usize = out_shape.iter().product();
    let rank = out_shape.len();
    let mut src = Vec::with_capacity(n);
    if n == 0 {
        return src;
    }
    let Some(&inner) = out_shape.last() else {
        src.push(0);
        return src;
    };
    let offset = rank - shape.len();
    let st = strides(shape);
    let step: Vec<usize> = (0..rank)
        .map(|d| match d.checked_sub(offset) {
            Some(i) if shape[i] != 1 => st[i],
            _ => 0,
        })
        .collect();
    let inner_step = step[rank - 1];
    let mut idx = vec![0usize; rank];
    let mut base = 0;
    loop {
        src.extend((0..inner).map(|i| base + i * inner_step));
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return src;
            }
            d -= 1;
            idx[d] += 1;
            base += step[d];
            if idx[d] < out_shape[d] {
                break;
            }
            base -= step[d] * out_shape[d];
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The source position of each output position by its multi-index, dim by dim.
    fn by_multi_index(out_shape: &[usize], shape: &[usize]) -> Vec<usize> {
        let n: usize = out_shape.iter().product();
        let (offset, st) = (out_shape.len() - shape.len(), strides(shape));
        (0..n)
            .map(|flat| {
                let idx = unravel(flat, out_shape);
                (0..shape.len())
                    .map(|i| {
                        if shape[i] == 1 {
                            0
                        } else {
                            idx[offset + i] * st[i]
                        }
                    })
                    .sum()
            })
            .collect()
    }

    #[test]
    fn broadcast_src_matches_the_multi_index_definition() {
        let cases: [(&[usize], &[usize]); 9] = [
            (&[], &[]),
            (&[5], &[1]),
            (&[5], &[5]),
            (&[109, 239], &[1, 239]),
            (&[109, 239], &[109, 1]),
            (&[2, 3, 4], &[3, 1]),
            (&[2, 1, 4], &[]),
            (&[3, 0, 2], &[0, 1]),
            (&[2, 3, 1, 17], &[2, 1, 1, 17]),
        ];
        for (out, shape) in cases {
            assert_eq!(
                broadcast_src(out, shape),
                by_multi_index(out, shape),
                "{out:?} from {shape:?}"
            );
        }
    }
}
