//! Fast versions of the index ops that move f32 values of imported graphs (`Pad`,
//! `StridedSlice`, `Reduce`, `Where`, `ResizeNearest`): by rows of the last axis, the
//! row's source offsets stepped like an odometer, instead of the reference's multi-index
//! per value.
//! They give the reference loops' values bit for bit (the reductions sum in f64 in the
//! same order).

use crate::backend::op::ReduceKind;

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Calls `f(index)` for every multi-index of the leading `dims` (row-major order), the
/// index updated in place between calls; nothing when a dim is 0.
fn for_each_index(dims: &[usize], mut f: impl FnMut(&[usize])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    loop {
        f(&idx);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// `Pad` (see [`crate::backend::Op::Pad`]) of f32 `x [shape]` into `y`: each output row
/// (last axis) is `value`, with the overlapping part of its source row copied in when
/// every leading index lands inside `x`.
pub(super) fn pad(x: &[f32], shape: &[usize], pads: &[[i64; 2]], value: f32, y: &mut [f32]) {
    let rank = shape.len();
    if rank == 0 {
        y.copy_from_slice(x);
        return;
    }
    let out: Vec<usize> = shape
        .iter()
        .zip(pads)
        .map(|(&n, p)| (n as i64 + p[0] + p[1]).max(0) as usize)
        .collect();
    let st = strides(shape);
    let (len, w) = (out[rank - 1], shape[rank - 1] as i64);
    if len == 0 {
        return;
    }
    let before = pads[rank - 1][0];
    // Output columns [lo, hi) read input columns [lo - before, hi - before).
    let lo = before.clamp(0, len as i64) as usize;
    let hi = (before + w).clamp(0, len as i64) as usize;
    let mut rows = y.chunks_mut(len);
    for_each_index(&out[..rank - 1], |idx| {
        let Some(row) = rows.next() else { return };
        let mut src = Some(0usize);
        for (d, &i) in idx.iter().enumerate() {
            let j = i as i64 - pads[d][0];
            src = src.filter(|_| (0..shape[d] as i64).contains(&j));
            src = src.map(|s| s + j as usize * st[d]);
        }
        match src {
            Some(s) if hi > lo => {
                row[..lo].fill(value);
                let first = (s as i64 + lo as i64 - before) as usize;
                row[lo..hi].copy_from_slice(&x[first..first + hi - lo]);
                row[hi..].fill(value);
            }
            _ => row.fill(value),
        }
    });
}

/// `StridedSlice` (see [`crate::backend::Op::StridedSlice`]) of f32 `x [shape]` into
/// `y [out]`: per output row its first source value, then steps of `steps[last]`.
pub(super) fn strided_slice(
    x: &[f32],
    shape: &[usize],
    starts: &[usize],
    steps: &[i64],
    out: &[usize],
    y: &mut [f32],
) {
    let rank = shape.len();
    if rank == 0 {
        y.copy_from_slice(x);
        return;
    }
    let st = strides(shape);
    let len = out[rank - 1];
    if len == 0 {
        return;
    }
    let step = steps[rank - 1];
    let mut rows = y.chunks_mut(len);
    for_each_index(&out[..rank - 1], |idx| {
        let Some(row) = rows.next() else { return };
        let mut s = starts[rank - 1] as i64;
        for (d, &i) in idx.iter().enumerate() {
            s += (starts[d] as i64 + i as i64 * steps[d]) * st[d] as i64;
        }
        if step == 1 {
            row.copy_from_slice(&x[s as usize..s as usize + len]);
        } else {
            for (j, o) in row.iter_mut().enumerate() {
                *o = x[(s + j as i64 * step) as usize];
            }
        }
    });
}

/// `Reduce` (see [`crate::backend::Op::Reduce`]) of f32 `x [shape]` over `axes` (all when
/// empty) into `y`, when the axes are one contiguous run (else `false`, `y` untouched):
/// `x` is then `[outer, reduced, inner]`, and each output sums (f64) or takes the max of
/// its values in increasing order along the run, NaN winning a max.
pub(super) fn reduce(
    x: &[f32],
    shape: &[usize],
    kind: ReduceKind,
    axes: &[usize],
    y: &mut [f32],
) -> bool {
    let (first, last) = match (axes.iter().min(), axes.iter().max()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0, shape.len().saturating_sub(1)),
    };
    let all = axes.is_empty();
    let contiguous = all || (last - first + 1 == axes.len() && last < shape.len());
    if !contiguous || shape.is_empty() {
        return false;
    }
    let outer: usize = shape[..first].iter().product();
    let red: usize = shape[first..=last].iter().product();
    let inner: usize = shape[last + 1..].iter().product();
    if y.len() != outer * inner {
        return false;
    }
    let div = if kind == ReduceKind::Mean {
        red.max(1) as f64
    } else {
        1.0
    };
    let start = if kind == ReduceKind::Max {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    if inner == 1 {
        // Rows reduced [`ROWS`] at a time, each in its own order: independent chains of f64
        // adds instead of one chain's latency per value.
        const ROWS: usize = 8;
        for (block, out) in y.chunks_mut(ROWS).enumerate() {
            let mut acc = [start; ROWS];
            let first = block * ROWS * red;
            for r in 0..red {
                for (k, a) in acc.iter_mut().enumerate().take(out.len()) {
                    let v = x[first + k * red + r];
                    match kind {
                        ReduceKind::Max => {
                            if (v as f64) > *a || v.is_nan() {
                                *a = v as f64;
                            }
                        }
                        _ => *a += v as f64,
                    }
                }
            }
            for (o, &a) in out.iter_mut().zip(&acc) {
                *o = (a / div) as f32;
            }
        }
        return true;
    }
    let mut acc = vec![start; inner];
    for (o, out) in y.chunks_mut(inner.max(1)).enumerate().take(outer) {
        acc.fill(start);
        for r in 0..red {
            let src = &x[(o * red + r) * inner..][..inner];
            for (a, &v) in acc.iter_mut().zip(src) {
                match kind {
                    ReduceKind::Max => {
                        if (v as f64) > *a || v.is_nan() {
                            *a = v as f64;
                        }
                    }
                    _ => *a += v as f64,
                }
            }
        }
        for (o, &a) in out.iter_mut().zip(&acc) {
            *o = (a / div) as f32;
        }
    }
    true
}

/// Per output axis, the element stride of an operand of `shape` broadcast to rank `rank`
/// (right-aligned; 0 where the operand's dim is 1 or absent).
fn broadcast_strides(shape: &[usize], rank: usize) -> Vec<usize> {
    let mut st = vec![0; rank];
    let mut s = 1;
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 {
            st[rank - shape.len() + i] = s;
        }
        s *= shape[i];
    }
    st
}

/// `Where` (see [`crate::backend::Op::Where`]) with f32 values: `y = cond ? a : b` with
/// NumPy broadcasting of the three operands into `out`, by output rows.
pub(super) fn select(
    cond: (&[i64], &[usize]),
    a: (&[f32], &[usize]),
    b: (&[f32], &[usize]),
    out: &[usize],
    y: &mut [f32],
) {
    let rank = out.len();
    let len = out.last().copied().unwrap_or(1);
    if len == 0 {
        return;
    }
    let st = [cond.1, a.1, b.1].map(|s| broadcast_strides(s, rank));
    let step = st.each_ref().map(|s| s.last().copied().unwrap_or(0));
    let mut rows = y.chunks_mut(len);
    for_each_index(&out[..rank.saturating_sub(1)], |idx| {
        let Some(row) = rows.next() else { return };
        let at = st
            .each_ref()
            .map(|s| idx.iter().zip(s).map(|(i, s)| i * s).sum::<usize>());
        for (j, o) in row.iter_mut().enumerate() {
            *o = if cond.0[at[0] + j * step[0]] != 0 {
                a.0[at[1] + j * step[1]]
            } else {
                b.0[at[2] + j * step[2]]
            };
        }
    });
}

/// `ResizeNearest` (see [`crate::backend::Op::ResizeNearest`]) of f32 `x [shape]` into `y`:
/// each output row (last axis) repeats every value of its source row `scale` times; the
/// source row is the leading output index divided by the scales, axis by axis.
pub(super) fn resize_nearest(x: &[f32], shape: &[usize], scales: &[usize], y: &mut [f32]) {
    let rank = shape.len();
    if rank == 0 {
        y.copy_from_slice(x);
        return;
    }
    let out: Vec<usize> = shape.iter().zip(scales).map(|(&d, &s)| d * s).collect();
    let (w, s) = (shape[rank - 1], scales[rank - 1]);
    if w == 0 || s == 0 {
        return;
    }
    let st = strides(shape);
    let mut rows = y.chunks_exact_mut(w * s);
    for_each_index(&out[..rank - 1], |idx| {
        let Some(row) = rows.next() else { return };
        let src: usize = idx
            .iter()
            .zip(scales)
            .zip(&st)
            .map(|((&i, &sc), &st)| i / sc * st)
            .sum();
        let src = &x[src..src + w];
        if s == 2 {
            for (pair, &v) in row.chunks_exact_mut(2).zip(src) {
                pair[0] = v;
                pair[1] = v;
            }
        } else {
            for (run, &v) in row.chunks_exact_mut(s).zip(src) {
                run.fill(v);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::reference;
    use crate::backend::{Op, Tensor};

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
            .collect()
    }

    fn want(op: &Op, inputs: &[Tensor]) -> (Vec<usize>, Vec<f32>) {
        let out = reference::execute(op, inputs).unwrap().remove(0);
        let values = out.read_f32("test").unwrap().to_vec();
        (out.shape().to_vec(), values)
    }

    #[test]
    fn pad_matches_the_reference_loops() {
        let cases: [(&[usize], &[[i64; 2]]); 6] = [
            (&[1, 768, 31], &[[0, 0], [0, 0], [1, 1]]),
            (&[1, 9, 96], &[[0, 0], [26, 26], [0, 0]]),
            (&[2, 3, 5], &[[1, 0], [0, 2], [3, 1]]),
            // Negative pads crop; a row cropped away entirely.
            (&[2, 4, 6], &[[0, 0], [-1, 2], [-2, -3]]),
            (&[3, 4], &[[0, 0], [-5, 2]]),
            (&[7], &[[2, 3]]),
        ];
        for (shape, pads) in cases {
            let n = shape.iter().product();
            let x = values(n, 7);
            let op = Op::Pad {
                pads: pads.to_vec(),
                value: 0.25,
            };
            let (out, want) = want(&op, &[Tensor::from_f32(shape, x.clone()).unwrap()]);
            let mut got = vec![f32::NAN; want.len()];
            pad(&x, shape, pads, 0.25, &mut got);
            assert_eq!(got, want, "{shape:?} {pads:?} -> {out:?}");
        }
    }

    #[test]
    fn strided_slice_matches_the_reference_loops() {
        type Case<'a> = (&'a [usize], &'a [usize], &'a [i64], &'a [usize]);
        let cases: [Case; 4] = [
            (&[1, 192, 72], &[0, 191, 0], &[1, -1, 1], &[1, 192, 72]),
            (
                &[1, 2, 31, 62],
                &[0, 0, 0, 1],
                &[1, 1, 1, 1],
                &[1, 2, 31, 61],
            ),
            (&[3, 5, 9], &[2, 1, 8], &[-1, 2, -3], &[3, 2, 3]),
            (&[10], &[1], &[4], &[3]),
        ];
        for (shape, starts, steps, out) in cases {
            let n = shape.iter().product();
            let x = values(n, 3);
            let op = Op::StridedSlice {
                starts: starts.to_vec(),
                steps: steps.to_vec(),
                shape: out.to_vec(),
            };
            let (_, want) = want(&op, &[Tensor::from_f32(shape, x.clone()).unwrap()]);
            let mut got = vec![f32::NAN; want.len()];
            strided_slice(&x, shape, starts, steps, out, &mut got);
            assert_eq!(got, want, "{shape:?} {starts:?} {steps:?}");
        }
    }

    #[test]
    fn reduce_matches_the_reference_loops() {
        let cases: [(&[usize], &[usize]); 7] = [
            (&[1, 31, 192], &[2]),
            (&[3, 7, 5], &[1, 2]),
            (&[4, 5, 6], &[0]),
            (&[4, 5, 6], &[1, 2]),
            (&[4, 5, 6, 3], &[1, 2]),
            (&[4, 5, 6], &[]),
            (&[3, 1, 7], &[1]),
        ];
        for (shape, axes) in cases {
            for kind in [ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max] {
                for keepdims in [true, false] {
                    let n = shape.iter().product();
                    let mut x = values(n, 11);
                    if kind == ReduceKind::Max && n > 5 {
                        x[5] = f32::NAN;
                    }
                    let op = Op::Reduce {
                        kind,
                        axes: axes.to_vec(),
                        keepdims,
                    };
                    let (_, want) = want(&op, &[Tensor::from_f32(shape, x.clone()).unwrap()]);
                    let mut got = vec![f32::INFINITY; want.len()];
                    assert!(reduce(&x, shape, kind, axes, &mut got));
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits());
                    assert!(same, "{shape:?} {axes:?} {kind:?}: {got:?} vs {want:?}");
                }
            }
        }
        // Axes that are not one run are left to the reference.
        let mut y = vec![0.0; 5];
        assert!(!reduce(
            &values(120, 1),
            &[4, 5, 6],
            ReduceKind::Sum,
            &[0, 2],
            &mut y
        ));
    }

    #[test]
    fn resize_nearest_matches_the_reference_loops() {
        let cases: [(&[usize], &[usize]); 5] = [
            (&[1, 32, 64, 64], &[1, 1, 2, 2]),
            (&[2, 3, 4, 5], &[1, 2, 3, 1]),
            (&[3, 5], &[2, 3]),
            (&[7], &[4]),
            (&[2, 0, 3], &[1, 2, 2]),
        ];
        for (shape, scales) in cases {
            let x = values(shape.iter().product(), 13);
            let op = Op::ResizeNearest {
                scales: scales.to_vec(),
            };
            let (_, want) = want(&op, &[Tensor::from_f32(shape, x.clone()).unwrap()]);
            let mut got = vec![f32::NAN; want.len()];
            resize_nearest(&x, shape, scales, &mut got);
            assert_eq!(got, want, "{shape:?} {scales:?}");
        }
    }

    #[test]
    fn select_matches_the_reference_loops() {
        let cases: [[&[usize]; 3]; 4] = [
            [&[1, 1, 31, 31], &[], &[1, 2, 31, 31]],
            [&[3, 1], &[1, 4], &[3, 4]],
            [&[5], &[5], &[1]],
            [&[2, 3, 1], &[1, 3, 4], &[2, 1, 4]],
        ];
        for [cs, a_shape, b_shape] in cases {
            let nc: usize = cs.iter().product();
            let cond: Vec<bool> = (0..nc).map(|i| (i * 7) % 3 == 0).collect();
            let a = values(a_shape.iter().product(), 5);
            let b = values(b_shape.iter().product(), 9);
            let inputs = [
                Tensor::from_bool(cs, cond).unwrap(),
                Tensor::from_f32(a_shape, a.clone()).unwrap(),
                Tensor::from_f32(b_shape, b.clone()).unwrap(),
            ];
            let (out, want) = want(&Op::Where, &inputs);
            let mut got = vec![f32::NAN; want.len()];
            let c = inputs[0].as_i64().unwrap();
            select((c, cs), (&a, a_shape), (&b, b_shape), &out, &mut got);
            assert_eq!(got, want, "{cs:?} {a_shape:?} {b_shape:?}");
        }
    }
}
