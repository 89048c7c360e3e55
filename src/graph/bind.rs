//! The run-time shape ops of the ONNX path ([`GraphOp::is_run_time_shape`]):
//! their per-call binding to a backend [`Op`] from the values of their integer
//! inputs or the shape of their data input (their shapes at load are inferred
//! in [`crate::ir`]).

use crate::backend::{broadcast_shape, Op, Tensor};
use crate::ir::{regroup, GraphOp};

/// The largest element count a run-time shape may ask for (2^31).
const MAX_ELEMS: u128 = 1 << 31;

/// Integer values of a host tensor (i64, or i32).
fn ints(t: &Tensor, what: &str) -> Result<Vec<i64>, String> {
    match (t.as_i64(), t.as_i32()) {
        (Some(v), _) => Ok(v.to_vec()),
        (_, Some(v)) => Ok(v.iter().map(|&x| x as i64).collect()),
        _ => Err(format!(
            "{what} must be a host i64 tensor, is {}",
            t.dtype()
        )),
    }
}

/// One value of a scalar input as f64 (f32 or integer).
fn scalar(t: &Tensor, what: &str) -> Result<f64, String> {
    if t.numel() != 1 {
        return Err(format!(
            "{what} must be one value, has shape {:?}",
            t.shape()
        ));
    }
    match t.as_i64() {
        Some(v) => Ok(v[0] as f64),
        None => t
            .read_f32(what)
            .map(|v| v[0] as f64)
            .map_err(|e| e.to_string()),
    }
}

fn to_dims(v: &[i64], what: &str) -> Result<Vec<usize>, String> {
    let dims = v
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("{what} {v:?} has a negative dim")))
        .collect::<Result<Vec<_>, _>>()?;
    let n = dims.iter().try_fold(1u128, |acc, &d| {
        let next = acc * d as u128;
        (next <= MAX_ELEMS).then_some(next)
    });
    match n {
        Some(_) => Ok(dims),
        None => Err(format!("{what} {v:?} has more than {MAX_ELEMS} elements")),
    }
}

/// ONNX `Reshape` target of `spec` for `x`.
fn reshape_target(x: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(spec.len());
    let mut infer_at = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            0 if !allowzero => out.push(
                *x.get(i)
                    .ok_or_else(|| format!("shape {spec:?} copies dim {i} of {x:?}"))?,
            ),
            -1 if infer_at.replace(i).is_none() => out.push(1),
            d => out.push(usize::try_from(d).map_err(|_| format!("shape {spec:?}: bad dim {d}"))?),
        }
    }
    let numel: usize = x.iter().product();
    if let Some(i) = infer_at {
        let rest: usize = out.iter().product();
        if rest == 0 || !numel.is_multiple_of(rest) {
            return Err(format!("cannot reshape {x:?} to {spec:?}"));
        }
        out[i] = numel / rest;
    }
    if out.iter().product::<usize>() != numel {
        return Err(format!("cannot reshape {x:?} ({numel} values) to {out:?}"));
    }
    Ok(out)
}

/// Binds run-time shape op `op` to a backend op for the inputs `ins` of this
/// call; returns the op and how many leading inputs it reads.
pub(super) fn bind(op: &GraphOp, ins: &[Tensor]) -> Result<(Op, usize), String> {
    let x = || ins.first().map(Tensor::shape).unwrap_or(&[]);
    match op {
        GraphOp::ReshapeTo { allowzero, .. } => {
            let spec = ints(&ins[1], "the shape")?;
            Ok((Op::Reshape(reshape_target(x(), &spec, *allowzero)?), 1))
        }
        GraphOp::ExpandTo { .. } => {
            let want = to_dims(&ints(&ins[1], "the shape")?, "Expand shape")?;
            let out = broadcast_shape(x(), &want)
                .ok_or_else(|| format!("{:?} does not broadcast to {want:?}", x()))?;
            to_dims(
                &out.iter().map(|&d| d as i64).collect::<Vec<_>>(),
                "Expand output",
            )?;
            Ok((Op::Expand(out), 1))
        }
        GraphOp::ConstantOfShape { value, dtype, .. } => {
            let shape = to_dims(&ints(&ins[0], "the shape")?, "ConstantOfShape shape")?;
            Ok((
                Op::Fill {
                    shape,
                    value: *value,
                    dtype: *dtype,
                },
                0,
            ))
        }
        GraphOp::RangeOf => {
            let (s, l, d) = (
                scalar(&ins[0], "start")?,
                scalar(&ins[1], "limit")?,
                scalar(&ins[2], "delta")?,
            );
            if d == 0.0 || !(s.is_finite() && l.is_finite() && d.is_finite()) {
                return Err(format!("Range({s}, {l}, {d}) has no finite length"));
            }
            let len = ((l - s) / d).ceil().max(0.0);
            if len > MAX_ELEMS as f64 {
                return Err(format!(
                    "Range({s}, {l}, {d}) has more than {MAX_ELEMS} values"
                ));
            }
            let dtype = ins[0].dtype();
            Ok((
                Op::Range {
                    start: s,
                    delta: d,
                    len: len as usize,
                    dtype,
                },
                0,
            ))
        }
        GraphOp::NonZero => {
            let count = match ins[0].as_i64() {
                Some(v) => v.iter().filter(|&&x| x != 0).count(),
                None => ins[0]
                    .read_f32("NonZero")
                    .map_err(|e| e.to_string())?
                    .iter()
                    .filter(|&&x| x != 0.0)
                    .count(),
            };
            Ok((Op::NonZero { count }, 1))
        }
        GraphOp::SliceTo { .. } => {
            let shape = x();
            let starts = ints(&ins[1], "starts")?;
            let ends = ints(&ins[2], "ends")?;
            let rank = shape.len() as i64;
            let axes = match ins.get(3) {
                Some(a) => ints(a, "axes")?,
                None => (0..starts.len() as i64).collect(),
            };
            let steps = match ins.get(4) {
                Some(s) => ints(s, "steps")?,
                None => vec![1; starts.len()],
            };
            if ends.len() != starts.len()
                || axes.len() != starts.len()
                || steps.len() != starts.len()
            {
                return Err(format!(
                    "starts {starts:?}, ends {ends:?}, axes {axes:?} and steps {steps:?} differ in length"
                ));
            }
            let mut st: Vec<usize> = vec![0; shape.len()];
            let mut sp: Vec<i64> = vec![1; shape.len()];
            let mut out = shape.to_vec();
            for k in 0..axes.len() {
                let a = if axes[k] < 0 { axes[k] + rank } else { axes[k] };
                if !(0..rank).contains(&a) {
                    return Err(format!("Slice axis {} out of range for {shape:?}", axes[k]));
                }
                let a = a as usize;
                let (s, step, len) =
                    crate::ir::ops::onnx_slice_axis(starts[k], ends[k], steps[k], shape[a])?;
                st[a] = s;
                sp[a] = step;
                out[a] = len;
            }
            Ok((
                Op::StridedSlice {
                    starts: st,
                    steps: sp,
                    shape: out,
                },
                1,
            ))
        }
        GraphOp::PadTo { .. } => {
            let p = ints(&ins[1], "pads")?;
            let r = x().len();
            if p.len() != 2 * r {
                return Err(format!("pads {p:?} for a rank-{r} input"));
            }
            let pads = (0..r).map(|d| [p[d], p[r + d]]).collect();
            let value = match ins.get(2) {
                Some(v) => scalar(v, "the pad value")?,
                None => 0.0,
            };
            Ok((Op::Pad { pads, value }, 1))
        }
        GraphOp::Unsqueeze(axes) | GraphOp::Squeeze(axes) => {
            if let GraphOp::Squeeze(_) = op {
                if let Some(&a) = axes.iter().find(|&&a| x().get(a).is_some_and(|&d| d != 1)) {
                    return Err(format!("Squeeze of dim {a} of {:?}", x()));
                }
            }
            Ok((Op::Reshape(regroup(op, axes, x(), 1)?), 1))
        }
        other => Err(format!("{} is not a run-time shape op", other.name())),
    }
}

/// Checks a bound output shape against the dims known at import (-1: any).
pub(super) fn check_dims(op: &GraphOp, got: &[usize]) -> Result<(), String> {
    let dims = match op {
        GraphOp::ReshapeTo { dims, .. }
        | GraphOp::ExpandTo { dims }
        | GraphOp::SliceTo { dims }
        | GraphOp::PadTo { dims }
        | GraphOp::ConstantOfShape { dims, .. } => dims,
        _ => return Ok(()),
    };
    let fits = dims.len() == got.len()
        && dims
            .iter()
            .zip(got)
            .all(|(&d, &g)| d < 0 || d as usize == g);
    if fits {
        Ok(())
    } else {
        Err(format!(
            "output shape {got:?} differs from the imported dims {dims:?}"
        ))
    }
}
