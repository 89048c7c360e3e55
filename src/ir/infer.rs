//! Load-time shape inference of the graph ops: each op's outputs under two
//! probe lengths for the dynamic dims (a dimension that differs between the two
//! runs is dynamic), and the load-time shapes of the run-time shape ops
//! ([`GraphOp::is_run_time_shape`]) from the `dims` the importer knew.

use super::ops::{self, GraphOp, MaskKind};
use super::{dims_text, Dim, Source, StateDecl, Value};
use crate::backend::{Op, TensorInfo};
use crate::dtype::DType;

/// Two probe lengths substituted for dynamic dims: a dimension that differs
/// between the two inferences is dynamic.
pub(crate) const PROBES: [usize; 2] = [3, 5];

pub(crate) fn concrete(shape: &[Dim], probe: usize) -> Vec<usize> {
    shape.iter().map(|d| d.unwrap_or(probe)).collect()
}

/// The backend op and inputs used to infer a graph op's shapes under a probe.
fn probe_op(op: &GraphOp, infos: &[TensorInfo]) -> Result<(Op, Vec<TensorInfo>), String> {
    Ok(match op {
        GraphOp::Fixed(op) => (op.clone(), infos.to_vec()),
        GraphOp::Reshape(shape) => {
            let x = infos.first().ok_or("needs 1 input")?;
            let target = ops::reshape_target(shape, x.numel())
                .ok_or_else(|| format!("cannot reshape {:?} into {shape:?}", x.shape))?;
            (Op::Reshape(target), infos.to_vec())
        }
        GraphOp::Slice { axis, start, end } => {
            let x = infos.first().ok_or("needs 1 input")?;
            let len = *x
                .shape
                .get(*axis)
                .ok_or_else(|| format!("axis {axis} out of range for {:?}", x.shape))?;
            let (start, end) = ops::slice_range(*start, *end, len);
            let op = Op::Slice {
                axis: *axis,
                start,
                end,
            };
            (op, infos.to_vec())
        }
        GraphOp::Rope { style, rot_dim, .. } => {
            if infos.len() != 2 {
                return Err(format!("needs 2 inputs [x, pos], got {}", infos.len()));
            }
            let pos = &infos[1];
            if pos.dtype != DType::I32 || pos.numel() != 1 {
                return Err(format!(
                    "input 1 (pos) must be one i32 value, got {}{:?}",
                    pos.dtype, pos.shape
                ));
            }
            let d = infos[0].shape.last().copied().unwrap_or(0);
            let op = Op::Rope {
                style: *style,
                rot_dim: rot_dim.unwrap_or(d),
                pos: 0,
                base: 10000.0,
            };
            (op, infos[..1].to_vec())
        }
        GraphOp::Sdpa { scale, mask } => {
            let mut infos = infos.to_vec();
            let keep = if *mask == MaskKind::Padding {
                if infos.len() != 4 {
                    return Err(format!(
                        "the padding mask needs 4 inputs [q, k, v, mask], got {}",
                        infos.len()
                    ));
                }
                let m = infos
                    .pop()
                    .unwrap_or_else(|| TensorInfo::new(&[], DType::I32));
                let keys = infos[1].shape.first().copied().unwrap_or(0);
                if m.dtype != DType::I32 || m.shape.len() != 1 {
                    return Err(format!(
                        "input 3 (mask) must be i32 [keys], got {}{:?}",
                        m.dtype, m.shape
                    ));
                }
                ops::padding_keep(&vec![1; m.numel()], keys)?
            } else {
                Vec::new()
            };
            let op = Op::Sdpa {
                scale: *scale,
                mask: ops::backend_mask(*mask, keep),
                q_pos: 0,
                kv_len: None,
            };
            (op, infos)
        }
        GraphOp::KvAppend => return Err("KvAppend is inferred from its state".into()),
        other => return Err(format!("{} is inferred from its dims", other.name())),
    })
}

/// The concrete shapes of a value under the two probes.
pub(crate) type Probed = [Vec<usize>; 2];

pub(crate) fn probed_of(shape: &[Dim]) -> Probed {
    [concrete(shape, PROBES[0]), concrete(shape, PROBES[1])]
}

/// An output's inferred dims, encoding and probe shapes.
type Inferred = (Vec<Dim>, DType, Probed);

/// Infers a node's outputs. Each probe run starts from the inputs' own probe
/// shapes (so a dimension twice the dynamic one stays twice it through reshapes).
pub(crate) fn infer_node(
    op: &GraphOp,
    inputs: &[&Value],
    probed: &[&Probed],
    states: &[StateDecl],
) -> Result<Vec<Inferred>, String> {
    if let GraphOp::KvAppend = op {
        if inputs.len() != 3 {
            return Err(format!(
                "needs 3 inputs [state, k, v], got {}",
                inputs.len()
            ));
        }
        let Source::State(s) = inputs[0].source else {
            return Err(format!("input 0 `{}` must be a state", inputs[0].name));
        };
        let st = &states[s];
        for v in &inputs[1..] {
            let ok = v.dtype == DType::F32
                && v.shape.len() == 3
                && v.shape[1..] == [Some(st.kv_heads), Some(st.head_dim)];
            if !ok {
                return Err(format!(
                    "`{}` has shape {:?}, state `{}` needs [s, {}, {}] f32",
                    v.name,
                    dims_text(&v.shape),
                    st.name,
                    st.kv_heads,
                    st.head_dim
                ));
            }
        }
        let all = vec![None, Some(st.kv_heads), Some(st.head_dim)];
        let p = probed_of(&all);
        return Ok(vec![
            (all.clone(), DType::F32, p.clone()),
            (all, DType::F32, p),
        ]);
    }
    if let Some(v) = inputs.iter().find(|v| matches!(v.source, Source::State(_))) {
        return Err(format!(
            "state `{}` can only be the first input of KvAppend",
            v.name
        ));
    }
    if op.is_run_time_shape() {
        let dtypes: Vec<DType> = inputs.iter().map(|v| v.dtype).collect();
        let shapes: Vec<&[Dim]> = inputs.iter().map(|v| v.shape.as_slice()).collect();
        return infer_static(op, &dtypes, &shapes, probed);
    }
    let mut runs = Vec::with_capacity(2);
    for k in 0..PROBES.len() {
        let infos: Vec<TensorInfo> = inputs
            .iter()
            .zip(probed)
            .map(|(v, p)| TensorInfo::new(&p[k], v.dtype))
            .collect();
        let (bop, binfos) = probe_op(op, &infos)?;
        let outs = bop.infer(&binfos).map_err(|e| e.to_string())?;
        runs.push(outs);
    }
    let (a, b) = (&runs[0], &runs[1]);
    Ok(a.iter()
        .zip(b)
        .map(|(x, y)| {
            let shape = x
                .shape
                .iter()
                .zip(y.shape.iter().chain(std::iter::repeat(&usize::MAX)))
                .map(|(&p, &q)| (p == q).then_some(p))
                .collect();
            (shape, x.dtype, [x.shape.clone(), y.shape.clone()])
        })
        .collect())
}

fn dims_of(dims: &[i64]) -> Vec<Dim> {
    dims.iter().map(|&d| usize::try_from(d).ok()).collect()
}

fn probe(dims: &[Dim]) -> Probed {
    PROBES.map(|p| dims.iter().map(|d| d.unwrap_or(p)).collect())
}

/// The outputs at load of run-time shape op `op` on inputs of `dtypes` and
/// `shapes` (probe shapes `probed`).
fn infer_static(
    op: &GraphOp,
    dtypes: &[DType],
    shapes: &[&[Dim]],
    probed: &[&Probed],
) -> Result<Vec<Inferred>, String> {
    let need = |lo: usize, hi: usize| {
        if dtypes.len() < lo || dtypes.len() > hi {
            Err(format!("needs {lo} to {hi} inputs, got {}", dtypes.len()))
        } else {
            Ok(())
        }
    };
    let ints_at = |from: usize| -> Result<(), String> {
        match dtypes.iter().skip(from).position(|&d| d != DType::I64) {
            Some(i) => Err(format!(
                "input {} must be i64, is {}",
                from + i,
                dtypes[from + i]
            )),
            None => Ok(()),
        }
    };
    let with = |dims: &[i64], dtype: DType| {
        let d = dims_of(dims);
        let p = probe(&d);
        Ok(vec![(d, dtype, p)])
    };
    match op {
        GraphOp::ReshapeTo { dims, .. } | GraphOp::ExpandTo { dims } => {
            need(2, 2)?;
            ints_at(1)?;
            with(dims, dtypes[0])
        }
        GraphOp::SliceTo { dims } => {
            need(3, 5)?;
            ints_at(1)?;
            with(dims, dtypes[0])
        }
        GraphOp::PadTo { dims } => {
            need(2, 3)?;
            if dtypes[1] != DType::I64 {
                return Err(format!("input 1 (pads) must be i64, is {}", dtypes[1]));
            }
            with(dims, dtypes[0])
        }
        GraphOp::ConstantOfShape { dims, dtype, .. } => {
            need(1, 1)?;
            ints_at(0)?;
            with(dims, *dtype)
        }
        GraphOp::RangeOf => {
            need(3, 3)?;
            if dtypes.iter().any(|&d| d != dtypes[0])
                || !matches!(dtypes[0], DType::I64 | DType::F32)
            {
                return Err(format!(
                    "start, limit and delta must share a dtype, i64 or f32: {dtypes:?}"
                ));
            }
            with(&[-1], dtypes[0])
        }
        GraphOp::NonZero => {
            need(1, 1)?;
            with(&[shapes[0].len() as i64, -1], DType::I64)
        }
        GraphOp::Unsqueeze(axes) | GraphOp::Squeeze(axes) => {
            need(1, 1)?;
            let dims = regroup(op, axes, shapes[0], Some(1))?;
            let p = [0, 1].map(|k| regroup(op, axes, &probed[0][k], 1).unwrap_or_default());
            Ok(vec![(dims, dtypes[0], p)])
        }
        other => Err(format!("{} is not a run-time shape op", other.name())),
    }
}

/// The shape of an `Unsqueeze` / `Squeeze` of `shape` (dims of any kind: a `Dim`
/// at load, a `usize` per call; a squeezed dim must not be known to differ from 1).
pub(crate) fn regroup<D: Copy + std::fmt::Debug>(
    op: &GraphOp,
    axes: &[usize],
    shape: &[D],
    one: D,
) -> Result<Vec<D>, String> {
    let sorted = axes.windows(2).all(|w| w[0] < w[1]);
    if !sorted {
        return Err(format!("axes {axes:?} must be sorted and distinct"));
    }
    match op {
        GraphOp::Unsqueeze(_) => {
            let rank = shape.len() + axes.len();
            if axes.iter().any(|&a| a >= rank) {
                return Err(format!("axes {axes:?} out of range for rank {rank}"));
            }
            let mut src = shape.iter();
            Ok((0..rank)
                .map(|i| {
                    if axes.contains(&i) {
                        Some(one)
                    } else {
                        src.next().copied()
                    }
                })
                .collect::<Option<Vec<D>>>()
                .unwrap_or_default())
        }
        _ => {
            if axes.iter().any(|&a| a >= shape.len()) {
                return Err(format!("axes {axes:?} out of range for {shape:?}"));
            }
            Ok(shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, &d)| d)
                .collect())
        }
    }
}
