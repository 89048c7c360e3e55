//! Reference loops of the run-time integer, index and shape ops
//! ([`Op::is_index_op`]) and of the layout ops on i64 / bool values. Index-moving
//! ops compute, per output position, the input position read, then copy values of
//! whatever dtype; arithmetic on i64 is checked (overflow is an error).

use super::layout::{broadcast_src, concat, permute, slice, strides, unravel};
use crate::backend::op::{CmpOp, IntOp, ReduceKind};
use crate::backend::tensor::F32Read;
use crate::backend::{Op, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;

/// A host tensor's values: f32, or i64 (bool as 0 / 1).
enum Vals<'a> {
    F(F32Read<'a>),
    I(&'a [i64]),
}

fn vals<'a>(t: &'a Tensor, op: &str) -> Result<Vals<'a>, ExecutionError> {
    match t.as_i64() {
        Some(v) => Ok(Vals::I(v)),
        None => Ok(Vals::F(t.read_f32(op)?)),
    }
}

fn ints<'a>(t: &'a Tensor, op: &str) -> Result<&'a [i64], ExecutionError> {
    t.as_i64().ok_or_else(|| ExecutionError::UnsupportedOp {
        op: format!("{op} (needs a host i64 or bool tensor)"),
        backend: "cpu".into(),
        input_dtype: t.dtype(),
    })
}

fn bad(op: &str, reason: String) -> ExecutionError {
    ExecutionError::ShapeMismatch {
        op: format!("{op}: {reason}"),
        expected: Vec::new(),
        got: Vec::new(),
    }
}

/// A tensor of `info` from f32 or i64 values.
fn build(
    info: &TensorInfo,
    f: Option<Vec<f32>>,
    i: Option<Vec<i64>>,
) -> Result<Tensor, ExecutionError> {
    match (f, i) {
        (Some(f), _) => Tensor::from_f32(&info.shape, f),
        (_, Some(i)) => Tensor::host_ints(&info.shape, info.dtype, i),
        _ => Err(bad("index op", "no values".into())),
    }
}

/// `out[j] = t[src[j]]`, keeping `t`'s dtype.
fn take(t: &Tensor, src: &[usize], info: &TensorInfo, op: &str) -> Result<Tensor, ExecutionError> {
    match vals(t, op)? {
        Vals::F(v) => build(info, Some(src.iter().map(|&j| v[j]).collect()), None),
        Vals::I(v) => build(info, None, Some(src.iter().map(|&j| v[j]).collect())),
    }
}

/// `out[j] = a[k]` for `src[j] = (true, k)`, `b[k]` for `(false, k)`; `a` and `b` share a dtype.
fn take2(
    a: &Tensor,
    b: &Tensor,
    src: &[(bool, usize)],
    info: &TensorInfo,
    op: &str,
) -> Result<Tensor, ExecutionError> {
    match (vals(a, op)?, vals(b, op)?) {
        (Vals::F(x), Vals::F(y)) => build(
            info,
            Some(
                src.iter()
                    .map(|&(s, k)| if s { x[k] } else { y[k] })
                    .collect(),
            ),
            None,
        ),
        (Vals::I(x), Vals::I(y)) => build(
            info,
            None,
            Some(
                src.iter()
                    .map(|&(s, k)| if s { x[k] } else { y[k] })
                    .collect(),
            ),
        ),
        _ => Err(bad(op, "inputs of different dtypes".into())),
    }
}

/// The positions NumPy broadcasting reads in two inputs of shapes `a` and `b`.
fn pair_src(out: &[usize], a: &[usize], b: &[usize]) -> (Vec<usize>, Vec<usize>) {
    (broadcast_src(out, a), broadcast_src(out, b))
}

/// Index `i` into a dim of length `n` (negative from the end).
fn wrap(i: i64, n: usize, op: &str) -> Result<usize, ExecutionError> {
    let j = if i < 0 { i + n as i64 } else { i };
    if (0..n as i64).contains(&j) {
        Ok(j as usize)
    } else {
        Err(bad(op, format!("index {i} out of range for a dim of {n}")))
    }
}

/// The layout ops (`Reshape`, `Permute`, `Concat`, `Slice`, `Split`) on i64 / bool values.
pub(super) fn layout_ints(
    op: &Op,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    let name = op.name();
    let x = ints(&inputs[0], name)?;
    let shape = inputs[0].shape();
    let one = |v: Vec<i64>| Ok(vec![build(&outs[0], None, Some(v))?]);
    match op {
        Op::Reshape(_) => one(x.to_vec()),
        Op::Permute(perm) => one(permute(x, shape, perm)),
        Op::Slice { axis, start, end } => one(slice(x, shape, *axis, *start, *end)),
        Op::Concat { axis } => {
            let parts = inputs
                .iter()
                .map(|t| Ok((ints(t, name)?, t.shape())))
                .collect::<Result<Vec<_>, ExecutionError>>()?;
            one(concat(&parts, *axis))
        }
        Op::Split { axis, sizes } => {
            let mut start = 0;
            let mut res = Vec::new();
            for (info, &n) in outs.iter().zip(sizes) {
                res.push(build(
                    info,
                    None,
                    Some(slice(x, shape, *axis, start, start + n)),
                )?);
                start += n;
            }
            Ok(res)
        }
        _ => Err(bad(name, "not a layout op".into())),
    }
}

/// Runs index op `op` (inputs checked by `infer`, whose results are `outs`).
pub(super) fn execute(
    op: &Op,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    let name = op.name();
    let info = &outs[0];
    let shape = |i: usize| inputs[i].shape();
    let one = |t: Tensor| Ok(vec![t]);
    match op {
        Op::Shape => one(Tensor::from_i64(
            &info.shape,
            shape(0).iter().map(|&d| d as i64).collect(),
        )?),
        Op::Cast(to) => one(cast(&inputs[0], *to, info)?),
        Op::IntBinary(k) => {
            let (a, b) = (ints(&inputs[0], name)?, ints(&inputs[1], name)?);
            let (sa, sb) = pair_src(&info.shape, shape(0), shape(1));
            let v = sa
                .iter()
                .zip(&sb)
                .map(|(&i, &j)| {
                    let (x, y) = (a[i], b[j]);
                    match k {
                        IntOp::Add => x.checked_add(y),
                        IntOp::Sub => x.checked_sub(y),
                        IntOp::Mul => x.checked_mul(y),
                        IntOp::Div => x.checked_div(y),
                    }
                    .ok_or_else(|| {
                        bad(
                            name,
                            format!("{k:?} of {x} and {y} overflows or divides by 0"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            one(Tensor::from_i64(&info.shape, v)?)
        }
        Op::Compare(c) => {
            let (sa, sb) = pair_src(&info.shape, shape(0), shape(1));
            let test = |o: std::cmp::Ordering| match c {
                CmpOp::Equal => o.is_eq(),
                CmpOp::Less => o.is_lt(),
                CmpOp::LessOrEqual => o.is_le(),
                CmpOp::Greater => o.is_gt(),
                CmpOp::GreaterOrEqual => o.is_ge(),
            };
            let v: Vec<bool> = match (vals(&inputs[0], name)?, vals(&inputs[1], name)?) {
                (Vals::F(a), Vals::F(b)) => sa
                    .iter()
                    .zip(&sb)
                    .map(|(&i, &j)| a[i].partial_cmp(&b[j]).is_some_and(test))
                    .collect(),
                (Vals::I(a), Vals::I(b)) => sa
                    .iter()
                    .zip(&sb)
                    .map(|(&i, &j)| test(a[i].cmp(&b[j])))
                    .collect(),
                _ => return Err(bad(name, "inputs of different dtypes".into())),
            };
            one(Tensor::from_bool(&info.shape, v)?)
        }
        Op::Not => {
            let x = ints(&inputs[0], name)?;
            one(Tensor::from_bool(
                &info.shape,
                x.iter().map(|&v| v == 0).collect(),
            )?)
        }
        Op::And => {
            let (a, b) = (ints(&inputs[0], name)?, ints(&inputs[1], name)?);
            let (sa, sb) = pair_src(&info.shape, shape(0), shape(1));
            let v = sa
                .iter()
                .zip(&sb)
                .map(|(&i, &j)| a[i] != 0 && b[j] != 0)
                .collect();
            one(Tensor::from_bool(&info.shape, v)?)
        }
        Op::Where => {
            let c = ints(&inputs[0], name)?;
            let sc = broadcast_src(&info.shape, shape(0));
            let sa = broadcast_src(&info.shape, shape(1));
            let sb = broadcast_src(&info.shape, shape(2));
            let src: Vec<(bool, usize)> = (0..sc.len())
                .map(|k| {
                    if c[sc[k]] != 0 {
                        (true, sa[k])
                    } else {
                        (false, sb[k])
                    }
                })
                .collect();
            one(take2(&inputs[1], &inputs[2], &src, info, name)?)
        }
        Op::Expand(_) => one(take(
            &inputs[0],
            &broadcast_src(&info.shape, shape(0)),
            info,
            name,
        )?),
        Op::Fill { value, dtype, .. } => {
            let n = info.numel();
            one(match dtype {
                DType::F32 => Tensor::from_f32(&info.shape, vec![*value as f32; n])?,
                _ => Tensor::host_ints(&info.shape, *dtype, vec![*value as i64; n])?,
            })
        }
        Op::Range {
            start,
            delta,
            len,
            dtype,
        } => one(match dtype {
            DType::F32 => {
                let (s, d) = (*start as f32, *delta as f32);
                let mut v = Vec::with_capacity(*len);
                let mut x = s;
                for _ in 0..*len {
                    v.push(x);
                    x += d;
                }
                Tensor::from_f32(&info.shape, v)?
            }
            _ => {
                let (s, d) = (*start as i64, *delta as i64);
                let v = (0..*len as i64)
                    .map(|i| i.checked_mul(d).and_then(|x| x.checked_add(s)))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad(name, "the range overflows i64".into()))?;
                Tensor::from_i64(&info.shape, v)?
            }
        }),
        Op::NonZero { count } => {
            let s = shape(0);
            let flags: Vec<bool> = match vals(&inputs[0], name)? {
                Vals::F(v) => v.iter().map(|&x| x != 0.0).collect(),
                Vals::I(v) => v.iter().map(|&x| x != 0).collect(),
            };
            let at: Vec<usize> = (0..flags.len()).filter(|&i| flags[i]).collect();
            if at.len() != *count {
                return Err(bad(
                    name,
                    format!("{} nonzero values, bound for {count}", at.len()),
                ));
            }
            let mut v = vec![0i64; s.len() * at.len()];
            for (j, &flat) in at.iter().enumerate() {
                for (d, &i) in unravel(flat, s).iter().enumerate() {
                    v[d * at.len() + j] = i as i64;
                }
            }
            one(Tensor::from_i64(&info.shape, v)?)
        }
        Op::Gather { axis } => {
            let s = shape(0);
            let idx = ints(&inputs[1], name)?;
            let n = s[*axis];
            let outer: usize = s[..*axis].iter().product();
            let inner: usize = s[axis + 1..].iter().product();
            let js = idx
                .iter()
                .map(|&i| wrap(i, n, name))
                .collect::<Result<Vec<_>, _>>()?;
            let mut src = Vec::with_capacity(info.numel());
            for o in 0..outer {
                for &j in &js {
                    src.extend((0..inner).map(|r| (o * n + j) * inner + r));
                }
            }
            one(take(&inputs[0], &src, info, name)?)
        }
        Op::GatherElements { axis } => {
            let s = shape(0);
            let idx = ints(&inputs[1], name)?;
            let st = strides(s);
            let src = idx
                .iter()
                .enumerate()
                .map(|(flat, &i)| {
                    let mut at = unravel(flat, &info.shape);
                    at[*axis] = wrap(i, s[*axis], name)?;
                    Ok(at.iter().zip(&st).map(|(a, b)| a * b).sum())
                })
                .collect::<Result<Vec<usize>, ExecutionError>>()?;
            one(take(&inputs[0], &src, info, name)?)
        }
        Op::GatherNd => {
            let s = shape(0);
            let idx = ints(&inputs[1], name)?;
            let k = *shape(1).last().unwrap_or(&0);
            let inner: usize = s[k..].iter().product();
            let rows: usize = shape(1)[..shape(1).len() - 1].iter().product();
            let mut src = Vec::with_capacity(info.numel());
            for r in 0..rows {
                let base = nd_offset(&idx[r * k..(r + 1) * k], &s[..k], name)?;
                src.extend((0..inner).map(|e| base * inner + e));
            }
            one(take(&inputs[0], &src, info, name)?)
        }
        Op::ScatterNd => {
            let s = shape(0);
            let idx = ints(&inputs[1], name)?;
            let k = *shape(1).last().unwrap_or(&0);
            let inner: usize = s[k..].iter().product();
            let mut src: Vec<(bool, usize)> = (0..info.numel()).map(|i| (true, i)).collect();
            let rows: usize = shape(1)[..shape(1).len() - 1].iter().product();
            for r in 0..rows {
                let base = nd_offset(&idx[r * k..(r + 1) * k], &s[..k], name)?;
                for e in 0..inner {
                    src[base * inner + e] = (false, r * inner + e);
                }
            }
            one(take2(&inputs[0], &inputs[2], &src, info, name)?)
        }
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => {
            let s = shape(0);
            let n = s[*axis];
            let inner: usize = s[axis + 1..].iter().product();
            let outer: usize = s[..*axis].iter().product();
            let order: Vec<usize> = if *reverse {
                (0..n).rev().collect()
            } else {
                (0..n).collect()
            };
            match vals(&inputs[0], name)? {
                Vals::F(x) => {
                    let mut y = vec![0.0f32; x.len()];
                    for o in 0..outer {
                        for r in 0..inner {
                            let mut acc = 0.0f64;
                            for &j in &order {
                                let at = (o * n + j) * inner + r;
                                if *exclusive {
                                    y[at] = acc as f32;
                                    acc += x[at] as f64;
                                } else {
                                    acc += x[at] as f64;
                                    y[at] = acc as f32;
                                }
                            }
                        }
                    }
                    one(Tensor::from_f32(&info.shape, y)?)
                }
                Vals::I(x) => {
                    let mut y = vec![0i64; x.len()];
                    for o in 0..outer {
                        for r in 0..inner {
                            let mut acc = 0i64;
                            for &j in &order {
                                let at = (o * n + j) * inner + r;
                                let next = acc
                                    .checked_add(x[at])
                                    .ok_or_else(|| bad(name, "the sum overflows i64".into()))?;
                                y[at] = if *exclusive { acc } else { next };
                                acc = next;
                            }
                        }
                    }
                    one(Tensor::from_i64(&info.shape, y)?)
                }
            }
        }
        Op::Reduce { kind, axes, .. } => one(reduce(&inputs[0], *kind, axes, info, name)?),
        Op::Pad { pads, value } => {
            let s = shape(0);
            let st = strides(s);
            let src: Vec<Option<usize>> = (0..info.numel())
                .map(|flat| {
                    let at = unravel(flat, &info.shape);
                    let mut k = 0;
                    for d in 0..s.len() {
                        let i = at[d] as i64 - pads[d][0];
                        if !(0..s[d] as i64).contains(&i) {
                            return None;
                        }
                        k += i as usize * st[d];
                    }
                    Some(k)
                })
                .collect();
            one(match vals(&inputs[0], name)? {
                Vals::F(x) => Tensor::from_f32(
                    &info.shape,
                    src.iter()
                        .map(|k| k.map_or(*value as f32, |k| x[k]))
                        .collect(),
                )?,
                Vals::I(x) => Tensor::host_ints(
                    &info.shape,
                    info.dtype,
                    src.iter()
                        .map(|k| k.map_or(*value as i64, |k| x[k]))
                        .collect(),
                )?,
            })
        }
        Op::StridedSlice { starts, steps, .. } => {
            let st = strides(shape(0));
            let src: Vec<usize> = (0..info.numel())
                .map(|flat| {
                    unravel(flat, &info.shape)
                        .iter()
                        .enumerate()
                        .map(|(d, &i)| (starts[d] as i64 + i as i64 * steps[d]) as usize * st[d])
                        .sum()
                })
                .collect();
            one(take(&inputs[0], &src, info, name)?)
        }
        Op::RandomNormalLike { mean, scale, seed } => {
            let z = super::math::normals(*seed, info.numel());
            one(Tensor::from_f32(
                &info.shape,
                z.iter().map(|&v| mean + scale * v).collect(),
            )?)
        }
        _ => Err(bad(name, "not an index op".into())),
    }
}

/// Flat row index of the leading multi-index `row` in dims `dims` (negative from the end).
fn nd_offset(row: &[i64], dims: &[usize], op: &str) -> Result<usize, ExecutionError> {
    let mut base = 0;
    for (&i, &n) in row.iter().zip(dims) {
        base = base * n + wrap(i, n, op)?;
    }
    Ok(base)
}

fn cast(t: &Tensor, to: DType, info: &TensorInfo) -> Result<Tensor, ExecutionError> {
    let name = "Cast";
    let from_ints: Option<Vec<i64>> = match t.as_i64() {
        Some(v) => Some(v.to_vec()),
        None => t.as_i32().map(|v| v.iter().map(|&x| x as i64).collect()),
    };
    match (from_ints, to) {
        (Some(v), DType::F32) => {
            Tensor::from_f32(&info.shape, v.iter().map(|&x| x as f32).collect())
        }
        (Some(v), _) => Tensor::host_ints(&info.shape, to, v),
        (None, DType::F32) => Tensor::from_f32(&info.shape, t.read_f32(name)?.to_vec()),
        (None, DType::Bool) => Tensor::from_bool(
            &info.shape,
            t.read_f32(name)?.iter().map(|&x| x != 0.0).collect(),
        ),
        (None, _) => {
            let limit = 9.223_372e18_f32;
            let v = t
                .read_f32(name)?
                .iter()
                .map(|&x| {
                    if x.is_finite() && x.abs() < limit {
                        Ok(x.trunc() as i64)
                    } else {
                        Err(bad(name, format!("{x} does not fit an i64")))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            Tensor::from_i64(&info.shape, v)
        }
    }
}

fn reduce(
    t: &Tensor,
    kind: ReduceKind,
    axes: &[usize],
    info: &TensorInfo,
    op: &str,
) -> Result<Tensor, ExecutionError> {
    let s = t.shape();
    let reduced = |d: usize| axes.is_empty() || axes.contains(&d);
    // Output position of each input position (reduced dims collapse to 0).
    let kept: Vec<usize> = s
        .iter()
        .enumerate()
        .map(|(d, &n)| if reduced(d) { 1 } else { n })
        .collect();
    let kst = strides(&kept);
    let target = |flat: usize| -> usize {
        unravel(flat, s)
            .iter()
            .enumerate()
            .map(|(d, &i)| if reduced(d) { 0 } else { i * kst[d] })
            .sum()
    };
    let n_out = info.numel();
    let count = (t.numel() / n_out.max(1)).max(1);
    match vals(t, op)? {
        Vals::F(x) => {
            let mut acc = vec![
                match kind {
                    ReduceKind::Max => f64::NEG_INFINITY,
                    _ => 0.0,
                };
                n_out
            ];
            for (flat, &v) in x.iter().enumerate() {
                let a = &mut acc[target(flat)];
                match kind {
                    ReduceKind::Max => {
                        if (v as f64) > *a || v.is_nan() {
                            *a = v as f64;
                        }
                    }
                    _ => *a += v as f64,
                }
            }
            let div = if kind == ReduceKind::Mean {
                count as f64
            } else {
                1.0
            };
            Tensor::from_f32(&info.shape, acc.iter().map(|&a| (a / div) as f32).collect())
        }
        Vals::I(x) => {
            let mut acc = vec![if kind == ReduceKind::Max { i64::MIN } else { 0 }; n_out];
            for (flat, &v) in x.iter().enumerate() {
                let a = &mut acc[target(flat)];
                *a = match kind {
                    ReduceKind::Max => (*a).max(v),
                    _ => a
                        .checked_add(v)
                        .ok_or_else(|| bad(op, "the sum overflows i64".into()))?,
                };
            }
            Tensor::host_ints(&info.shape, info.dtype, acc)
        }
    }
}
