//! Shape rules of the run-time integer, index and shape ops ([`Op::is_index_op`]):
//! input counts, dtypes and shapes checked, output infos returned.

use super::op::{broadcast_shape, mismatch, Op, ReduceKind};
use super::tensor::TensorInfo;
use crate::dtype::DType;
use crate::error::ExecutionError;

/// The most values an index op may produce (2^31).
const MAX_VALUES: usize = 1 << 31;

fn dtype_err(op: &Op, i: usize, want: &str, got: DType) -> ExecutionError {
    ExecutionError::UnsupportedOp {
        op: format!("{} (input {i} must be {want})", op.name()),
        backend: "any".into(),
        input_dtype: got,
    }
}

/// Whether `d` is a dtype the index ops move (f32, i64, bool).
fn movable(d: DType) -> bool {
    matches!(d, DType::F32 | DType::I64 | DType::Bool)
}

/// The output infos of index op `op` on `inputs`.
pub(super) fn infer(op: &Op, inputs: &[TensorInfo]) -> Result<Vec<TensorInfo>, ExecutionError> {
    let arity = |lo: usize, hi: usize| -> Result<(), ExecutionError> {
        if inputs.len() < lo || inputs.len() > hi {
            Err(mismatch(op, &[lo, hi], &[inputs.len()]))
        } else {
            Ok(())
        }
    };
    let of = |i: usize, ok: fn(DType) -> bool, want: &str| -> Result<&[usize], ExecutionError> {
        let t = &inputs[i];
        if ok(t.dtype) {
            Ok(&t.shape)
        } else {
            Err(dtype_err(op, i, want, t.dtype))
        }
    };
    let any = |i: usize| of(i, movable, "f32, i64 or bool");
    let int = |i: usize| of(i, |d| d == DType::I64, "i64");
    // Truth values: bool, or i64 read as `!= 0`.
    let boolean = |i: usize| of(i, |d| matches!(d, DType::Bool | DType::I64), "bool or i64");
    // Outputs made from attributes are capped (a hostile graph must not ask for
    // more memory than any real one).
    let out = |shape: Vec<usize>, dtype: DType| {
        let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if n.is_none_or(|n| n > MAX_VALUES) {
            return Err(mismatch(op, &[MAX_VALUES], &shape));
        }
        Ok(vec![TensorInfo { shape, dtype }])
    };
    let bcast = |a: &[usize], b: &[usize]| broadcast_shape(a, b).ok_or_else(|| mismatch(op, a, b));
    match op {
        Op::Shape => {
            arity(1, 1)?;
            out(vec![inputs[0].shape.len()], DType::I64)
        }
        Op::Cast(to) => {
            arity(1, 1)?;
            let x = of(
                0,
                |d| movable(d) || d == DType::I32,
                "f32, i64, i32 or bool",
            )?;
            if !movable(*to) {
                return Err(dtype_err(op, 0, "cast to f32, i64 or bool", *to));
            }
            out(x.to_vec(), *to)
        }
        Op::IntBinary(_) => {
            arity(2, 2)?;
            out(bcast(int(0)?, int(1)?)?, DType::I64)
        }
        Op::Compare(_) => {
            arity(2, 2)?;
            let (a, b) = (any(0)?, any(1)?);
            if inputs[0].dtype != inputs[1].dtype {
                return Err(dtype_err(op, 1, "of input 0's dtype", inputs[1].dtype));
            }
            out(bcast(a, b)?, DType::Bool)
        }
        Op::Not => {
            arity(1, 1)?;
            out(boolean(0)?.to_vec(), DType::Bool)
        }
        Op::And => {
            arity(2, 2)?;
            out(bcast(boolean(0)?, boolean(1)?)?, DType::Bool)
        }
        Op::Where => {
            arity(3, 3)?;
            let (c, a, b) = (boolean(0)?, any(1)?, any(2)?);
            if inputs[1].dtype != inputs[2].dtype {
                return Err(dtype_err(op, 2, "of input 1's dtype", inputs[2].dtype));
            }
            out(bcast(&bcast(c, a)?, b)?, inputs[1].dtype)
        }
        Op::Expand(shape) => {
            arity(1, 1)?;
            let x = any(0)?;
            if bcast(x, shape)? != *shape {
                return Err(mismatch(op, x, shape));
            }
            out(shape.clone(), inputs[0].dtype)
        }
        Op::Fill { shape, dtype, .. } => {
            arity(0, 0)?;
            if !movable(*dtype) {
                return Err(dtype_err(op, 0, "filled as f32, i64 or bool", *dtype));
            }
            out(shape.clone(), *dtype)
        }
        Op::Range { len, dtype, .. } => {
            arity(0, 0)?;
            if !matches!(dtype, DType::F32 | DType::I64) {
                return Err(dtype_err(op, 0, "a range of f32 or i64", *dtype));
            }
            out(vec![*len], *dtype)
        }
        Op::NonZero { count } => {
            arity(1, 1)?;
            out(vec![any(0)?.len(), *count], DType::I64)
        }
        Op::Gather { axis } => {
            arity(2, 2)?;
            let (x, idx) = (any(0)?, int(1)?);
            if *axis >= x.len() {
                return Err(mismatch(op, x, &[*axis]));
            }
            let mut s = x[..*axis].to_vec();
            s.extend_from_slice(idx);
            s.extend_from_slice(&x[axis + 1..]);
            out(s, inputs[0].dtype)
        }
        Op::GatherElements { axis } => {
            arity(2, 2)?;
            let (x, idx) = (any(0)?, int(1)?);
            let ok = *axis < x.len()
                && idx.len() == x.len()
                && (0..x.len()).all(|d| d == *axis || idx[d] <= x[d]);
            if !ok {
                return Err(mismatch(op, x, idx));
            }
            out(idx.to_vec(), inputs[0].dtype)
        }
        Op::GatherNd => {
            arity(2, 2)?;
            let (x, idx) = (any(0)?, int(1)?);
            let k = idx.last().copied().unwrap_or(0);
            if idx.is_empty() || k > x.len() {
                return Err(mismatch(op, x, idx));
            }
            let mut s = idx[..idx.len() - 1].to_vec();
            s.extend_from_slice(&x[k..]);
            out(s, inputs[0].dtype)
        }
        Op::ScatterNd => {
            arity(3, 3)?;
            let (x, idx, upd) = (any(0)?, int(1)?, any(2)?);
            let k = idx.last().copied().unwrap_or(0);
            if idx.is_empty() || k > x.len() || inputs[2].dtype != inputs[0].dtype {
                return Err(mismatch(op, x, idx));
            }
            let mut want = idx[..idx.len() - 1].to_vec();
            want.extend_from_slice(&x[k..]);
            if upd != want.as_slice() {
                return Err(mismatch(op, &want, upd));
            }
            out(x.to_vec(), inputs[0].dtype)
        }
        Op::CumSum { axis, .. } => {
            arity(1, 1)?;
            let x = of(0, |d| matches!(d, DType::F32 | DType::I64), "f32 or i64")?;
            if *axis >= x.len() {
                return Err(mismatch(op, x, &[*axis]));
            }
            out(x.to_vec(), inputs[0].dtype)
        }
        Op::Reduce {
            kind,
            axes,
            keepdims,
        } => {
            arity(1, 1)?;
            let x = of(0, |d| matches!(d, DType::F32 | DType::I64), "f32 or i64")?;
            let sorted = axes.windows(2).all(|w| w[0] < w[1]);
            if !sorted || axes.iter().any(|&a| a >= x.len()) {
                return Err(mismatch(op, x, axes));
            }
            let all = axes.is_empty();
            let reduced = |d: usize| all || axes.contains(&d);
            if *kind == ReduceKind::Max && (0..x.len()).any(|d| reduced(d) && x[d] == 0) {
                return Err(mismatch(op, &[1], x));
            }
            if *kind == ReduceKind::Mean && inputs[0].dtype != DType::F32 {
                return Err(dtype_err(op, 0, "f32 for a mean", inputs[0].dtype));
            }
            let shape = (0..x.len())
                .filter_map(|d| match (reduced(d), keepdims) {
                    (false, _) => Some(x[d]),
                    (true, true) => Some(1),
                    (true, false) => None,
                })
                .collect();
            out(shape, inputs[0].dtype)
        }
        Op::Pad { pads, .. } => {
            arity(1, 1)?;
            let x = any(0)?;
            if pads.len() != x.len() {
                return Err(mismatch(op, x, &[pads.len()]));
            }
            let shape: Option<Vec<usize>> = x
                .iter()
                .zip(pads)
                .map(|(&d, p)| {
                    usize::try_from((d as i64).checked_add(p[0])?.checked_add(p[1])?).ok()
                })
                .collect();
            out(shape.ok_or_else(|| mismatch(op, x, &[]))?, inputs[0].dtype)
        }
        Op::StridedSlice {
            starts,
            steps,
            shape,
        } => {
            arity(1, 1)?;
            let x = any(0)?;
            let r = x.len();
            if starts.len() != r || steps.len() != r || shape.len() != r {
                return Err(mismatch(op, x, shape));
            }
            for d in 0..r {
                if shape[d] == 0 {
                    continue;
                }
                let last = starts[d] as i128 + (shape[d] as i128 - 1) * steps[d] as i128;
                let inside = |i: i128| (0..x[d] as i128).contains(&i);
                if steps[d] == 0 || !inside(starts[d] as i128) || !inside(last) {
                    return Err(mismatch(op, x, shape));
                }
            }
            out(shape.clone(), inputs[0].dtype)
        }
        Op::RandomNormalLike { .. } => {
            arity(1, 1)?;
            out(any(0)?.to_vec(), DType::F32)
        }
        _ => Err(mismatch(op, &[], &[])),
    }
}
