//! Ops that only move values (shaders/copy_nd.wgsl): Permute, Concat, Split,
//! StridedSlice, Pad, Expand and ResizeNearest, each as one or more strided
//! copies; their math is on [`Op`]'s variants.

use super::gpu::{Gpu, Params, Recorder, WG};
use super::ops::{act, out};
use crate::backend::{Op, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;

/// Dims a copy may have after merging (copy_nd.wgsl's arrays).
const RANK: usize = 6;

/// One strided copy over the index space `dims`:
/// `outs[out][dst0 + sum c_d dst[d]] = inputs[input][src0 + sum c_d src[d]]` for
/// every index `c`, or `value` everywhere when `input` is None.
#[derive(Debug)]
struct Move {
    dims: Vec<usize>,
    input: Option<usize>,
    src0: i64,
    src: Vec<i64>,
    out: usize,
    dst0: usize,
    dst: Vec<usize>,
    value: f32,
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

fn signed(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&v| v as i64).collect()
}

impl Move {
    /// A copy of input `input` (strides `src` from `src0`) into output `out`
    /// written contiguously over `dims`.
    fn gather(dims: &[usize], input: usize, src0: i64, src: Vec<i64>) -> Move {
        Move {
            dims: dims.to_vec(),
            input: Some(input),
            src0,
            src,
            out: 0,
            dst0: 0,
            dst: strides(dims),
            value: 0.0,
        }
    }

    /// Size-1 dims dropped and neighbours that are contiguous on both sides
    /// merged (the same copy over fewer dims).
    fn merged(mut self) -> Move {
        let (mut dims, mut src, mut dst) = (Vec::new(), Vec::new(), Vec::new());
        for d in 0..self.dims.len() {
            let (n, s, t) = (self.dims[d], self.src[d], self.dst[d]);
            if n == 1 {
                continue;
            }
            let k = dims.len();
            if k > 0 && dst[k - 1] == t * n && src[k - 1] == s * n as i64 {
                dims[k - 1] *= n;
                src[k - 1] = s;
                dst[k - 1] = t;
            } else {
                dims.push(n);
                src.push(s);
                dst.push(t);
            }
        }
        self.dims = dims;
        self.src = src;
        self.dst = dst;
        self
    }

    fn count(&self) -> usize {
        self.dims.iter().product()
    }

    /// The kernel's parameters: dims and strides right-aligned in
    /// [`RANK`] slots as copy_nd.wgsl reads them.
    fn params(&self) -> Params {
        let mut p: Params = [0; 32];
        p[0] = self.count() as u32;
        p[1] = self.src0 as i32 as u32;
        p[2] = self.dst0 as u32;
        p[3] = u32::from(self.input.is_none());
        let pad = RANK - self.dims.len();
        for d in 0..RANK {
            let (n, s, t) = match d.checked_sub(pad) {
                Some(i) => (self.dims[i], self.src[i], self.dst[i]),
                None => (1, 0, 0),
            };
            p[4 + d] = n as u32;
            p[10 + d] = s as i32 as u32;
            p[16 + d] = t as u32;
        }
        p[22] = self.value.to_bits();
        p
    }
}

/// The copies `op` is made of on inputs `ins` giving `outs` (shapes checked by
/// `Op::infer`), merged; None for other ops and where a copy keeps more than
/// [`RANK`] dims.
fn moves(op: &Op, ins: &[&[usize]], outs: &[&[usize]]) -> Option<Vec<Move>> {
    let x = *ins.first()?;
    let xs = strides(x);
    let y = *outs.first()?;
    let list = match op {
        Op::Permute(perm) => {
            let src = perm.iter().map(|&a| xs[a] as i64).collect();
            vec![Move::gather(y, 0, 0, src)]
        }
        Op::Expand(_) => {
            let lead = y.len() - x.len();
            let src = (0..y.len())
                .map(|d| match d.checked_sub(lead) {
                    Some(i) if x[i] == y[d] => xs[i] as i64,
                    _ => 0,
                })
                .collect();
            vec![Move::gather(y, 0, 0, src)]
        }
        Op::StridedSlice { starts, steps, .. } => {
            let src0 = starts.iter().zip(&xs).map(|(&s, &t)| (s * t) as i64).sum();
            let src = steps.iter().zip(&xs).map(|(&s, &t)| s * t as i64).collect();
            vec![Move::gather(y, 0, src0, src)]
        }
        Op::Split { axis, sizes } => {
            let mut at = 0;
            let mut list = Vec::new();
            for (j, (&n, part)) in sizes.iter().zip(outs).enumerate() {
                let m = Move::gather(part, 0, (at * xs[*axis]) as i64, signed(&xs));
                list.push(Move { out: j, ..m });
                at += n;
            }
            list
        }
        Op::Concat { axis } => {
            let ys = strides(y);
            let mut at = 0;
            let mut list = Vec::new();
            for (j, part) in ins.iter().enumerate() {
                list.push(Move {
                    dst0: at * ys[*axis],
                    dst: ys.clone(),
                    ..Move::gather(part, j, 0, signed(&strides(part)))
                });
                at += part[*axis];
            }
            list
        }
        Op::ResizeNearest { scales } => {
            // y[.., j s + r, ..] = x[.., j, ..]: each scaled axis split into (j, r).
            let ys = strides(y);
            let (mut dims, mut src, mut dst) = (Vec::new(), Vec::new(), Vec::new());
            for d in 0..x.len() {
                dims.extend([x[d], scales[d]]);
                src.extend([xs[d] as i64, 0]);
                dst.extend([ys[d] * scales[d], ys[d]]);
            }
            vec![Move {
                dims,
                src,
                dst,
                ..Move::gather(&[], 0, 0, Vec::new())
            }]
        }
        Op::Pad { pads, value } => pad(x, y, pads, *value as f32),
        _ => return None,
    };
    let list: Vec<Move> = list
        .into_iter()
        .map(Move::merged)
        .filter(|m| m.count() > 0)
        .collect();
    list.iter().all(|m| m.dims.len() <= RANK).then_some(list)
}

/// Pad of `x` into `y`: `value` everywhere a positive pad adds, then the kept
/// part of `x` (negative pads crop it).
fn pad(x: &[usize], y: &[usize], pads: &[[i64; 2]], value: f32) -> Vec<Move> {
    let (xs, ys) = (strides(x), strides(y));
    let mut list = Vec::new();
    if pads.iter().flatten().any(|&p| p > 0) {
        list.push(Move {
            input: None,
            value,
            ..Move::gather(y, 0, 0, vec![0; y.len()])
        });
    }
    let (mut src0, mut dst0, mut dims) = (0i64, 0usize, Vec::new());
    for d in 0..x.len() {
        let [lo, hi] = pads[d];
        let (skip, at) = ((-lo).max(0) as usize, lo.max(0) as usize);
        dims.push(x[d].saturating_sub(skip + (-hi).max(0) as usize));
        src0 += (skip * xs[d]) as i64;
        dst0 += at * ys[d];
    }
    list.push(Move {
        dst0,
        dst: ys,
        ..Move::gather(&dims, 0, src0, signed(&xs))
    });
    list
}

/// Whether every tensor of `inputs` and `outs` is f32 and within one binding
/// of `max_binding` bytes.
pub fn f32_within(inputs: &[TensorInfo], outs: &[TensorInfo], max_binding: u64) -> bool {
    inputs
        .iter()
        .chain(outs)
        .all(|i| i.dtype == DType::F32 && (i.numel() as u64 + 1) * 4 <= max_binding)
}

/// Whether wgpu runs `op` (inputs `inputs`, outputs `outs`) as strided
/// copies: [`f32_within`], each copy within [`RANK`] merged dims.
pub fn fits(op: &Op, inputs: &[TensorInfo], outs: &[TensorInfo], max_binding: u64) -> bool {
    let ins: Vec<&[usize]> = inputs.iter().map(|i| i.shape.as_slice()).collect();
    let os: Vec<&[usize]> = outs.iter().map(|i| i.shape.as_slice()).collect();
    f32_within(inputs, outs, max_binding) && moves(op, &ins, &os).is_some()
}

/// Runs `op` (one of [`fits`]'s) as its copies, one dispatch each.
pub fn run(
    gpu: &Gpu,
    rec: &mut Recorder,
    op: &Op,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    let ins: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
    let os: Vec<&[usize]> = outs.iter().map(|i| i.shape.as_slice()).collect();
    let list = moves(op, &ins, &os).ok_or_else(|| {
        let dtype = inputs.first().map_or(DType::F32, |t| t.dtype());
        super::ops::unsupported(op.name(), dtype)
    })?;
    let xs = inputs
        .iter()
        .map(|t| act(gpu, rec, t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut res = Vec::with_capacity(outs.len());
    let mut ys = Vec::with_capacity(outs.len());
    for info in outs {
        let (t, y) = out(gpu, rec, info)?;
        res.push(t);
        ys.push(y);
    }
    for m in &list {
        let x = &xs[m.input.unwrap_or(0)];
        let groups = (m.count() as u64).div_ceil(WG);
        gpu.dispatch(rec, "copy_nd", &[x, &ys[m.out]], m.params(), groups, 1)?;
    }
    Ok(res)
}
