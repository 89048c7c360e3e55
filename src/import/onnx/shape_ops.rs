//! ONNX ops whose output shape may be known only per call: `Gather`, `Slice`,
//! `Expand`, `ConstantOfShape`, `Range`, `Pad` (folded or static where import-time
//! values settle them, else the run-time shape ops of the graph), and
//! `ConvTranspose`.

use super::sym::Sym;
use super::translate::{broadcast, normalize_axis, Attr, OnnxNode, Translator, Val, Why};
use crate::backend::Op;
use crate::dtype::DType;
use crate::ir::GraphOp;

/// The most source positions the reflect, edge and wrap `Pad`s of one model may
/// have in all (each padded dim's positions are an import-time index tensor; real
/// models pad a few dims of at most a few thousand values).
const MAX_PAD_POSITIONS: i64 = 1 << 20;

/// Dims for messages and `dims` attributes: known values, -1 otherwise.
fn dims_attr(dims: &[Option<Sym>]) -> Vec<i64> {
    dims.iter()
        .map(|d| d.as_ref().and_then(Sym::value).unwrap_or(-1))
        .collect()
}

impl Translator {
    /// `Gather` folded (integer vectors) or as a `Slice` (one known index along a
    /// known axis); `false` when neither applies.
    pub(super) fn gather_static(
        &mut self,
        data: &str,
        idx: &str,
        axis: usize,
        out: &str,
    ) -> Result<bool, Why> {
        let Ok((ishape, indices)) = self.ints_of(idx) else {
            return Ok(false);
        };
        let Some(indices) = indices.iter().map(Sym::value).collect::<Option<Vec<i64>>>() else {
            return Ok(false);
        };
        let shape = self.shape_of(data)?;
        match self.val(data)?.clone() {
            Val::Ints {
                shape: dshape,
                data: values,
            } if dshape.len() == 1 => {
                let len = values.len() as i64;
                let picked = indices
                    .iter()
                    .map(|&i| {
                        let j = if i < 0 { i + len } else { i };
                        values
                            .get(j as usize)
                            .cloned()
                            .ok_or_else(|| format!("Gather index {i} out of range {len}"))
                    })
                    .collect::<Result<Vec<_>, Why>>()?;
                self.set(
                    out,
                    Val::Ints {
                        shape: ishape,
                        data: picked,
                    },
                );
                Ok(true)
            }
            Val::Ints { .. } => Ok(false),
            _ if ishape.is_empty() => {
                let Some(len) = shape[axis].value() else {
                    return Ok(false);
                };
                let i = if indices[0] < 0 {
                    indices[0] + len
                } else {
                    indices[0]
                };
                if !(0..len).contains(&i) {
                    return Err(format!("Gather index {} out of range {len}", indices[0]));
                }
                let part = self.fresh_name(out);
                let op = Op::Slice {
                    axis,
                    start: i as usize,
                    end: i as usize + 1,
                };
                self.apply(op, &[data], &[&part])?;
                let mut target = shape.clone();
                target.remove(axis);
                self.reshape(&part, target, out)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// ONNX `Slice` with every index and the sliced dims known at import, as a
    /// `StridedSlice` (folded on known values); `false` when something is not known.
    pub(super) fn slice_strided(&mut self, n: &OnnxNode, out: &str) -> Result<bool, Why> {
        let x = n.input(0).ok_or("Slice needs data")?;
        let shape = self.shape_of(x)?;
        let known = |t: &Translator, i: usize| n.input(i).map(|a| t.known_ints(a).ok());
        let (Some(Some(starts)), Some(Some(ends))) = (known(self, 1), known(self, 2)) else {
            return Ok(false);
        };
        let axes = match known(self, 3) {
            None => (0..starts.len() as i64).collect(),
            Some(Some(a)) => a,
            Some(None) => return Ok(false),
        };
        let steps = match known(self, 4) {
            None => vec![1; starts.len()],
            Some(Some(s)) => s,
            Some(None) => return Ok(false),
        };
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            return Err("Slice starts, ends, axes and steps differ in length".into());
        }
        let rank = shape.len();
        let mut st = vec![0; rank];
        let mut sp = vec![1; rank];
        let mut dims: Vec<usize> = Vec::with_capacity(rank);
        for d in &shape {
            dims.push(d.dim().unwrap_or(usize::MAX));
        }
        let mut out_shape = dims.clone();
        for k in 0..axes.len() {
            let a = normalize_axis(axes[k], rank)?;
            let Some(len) = shape[a].dim() else {
                return Ok(false);
            };
            let (s, step, l) = crate::ir::ops::onnx_slice_axis(starts[k], ends[k], steps[k], len)?;
            st[a] = s;
            sp[a] = step;
            out_shape[a] = l;
        }
        if out_shape.contains(&usize::MAX) {
            return Ok(false);
        }
        let op = Op::StridedSlice {
            starts: st,
            steps: sp,
            shape: out_shape,
        };
        self.apply(op, &[x], &[out])?;
        Ok(true)
    }

    /// ONNX `Slice` resolved per call (`SliceTo`).
    pub(super) fn slice_to(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let x = n.input(0).ok_or("Slice needs data")?;
        let starts = n.input(1).ok_or("Slice needs starts")?;
        let ends = n.input(2).ok_or("Slice needs ends")?;
        let shape = self.shape_of(x)?;
        let rank = shape.len();
        let k = self
            .shape_of(starts)?
            .first()
            .and_then(Sym::dim)
            .ok_or("Slice starts of unknown length")?;
        let axes = match n.input(3) {
            Some(a) => self.known_ints(a).ok(),
            None => Some((0..k as i64).collect()),
        };
        let known = |t: &Translator, i: usize| n.input(i).and_then(|a| t.known_ints(a).ok());
        let steps = match n.input(4) {
            Some(_) => known(self, 4),
            None => Some(vec![1; k]),
        };
        let dims: Vec<Option<Sym>> = match &axes {
            Some(axes) => {
                let cut = axes
                    .iter()
                    .map(|&a| normalize_axis(a, rank))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut dims: Vec<Option<Sym>> = (0..rank)
                    .map(|d| (!cut.contains(&d)).then(|| shape[d].clone()))
                    .collect();
                // A sliced dim of known length with known indices has a known length.
                if let (Some(s), Some(e), Some(st)) = (known(self, 1), known(self, 2), steps) {
                    for (j, &a) in cut.iter().enumerate() {
                        if let (Some(len), Some(&s), Some(&e), Some(&st)) =
                            (shape[a].dim(), s.get(j), e.get(j), st.get(j))
                        {
                            let (_, _, l) = crate::ir::ops::onnx_slice_axis(s, e, st, len)?;
                            dims[a] = Some(Sym::known(l as i64));
                        }
                    }
                }
                dims
            }
            None => vec![None; rank],
        };
        let dtype = self.dtype_of(x)?;
        let mut inputs = vec![
            self.any_operand(x)?,
            self.int_operand(starts, DType::I64)?,
            self.int_operand(ends, DType::I64)?,
        ];
        match (n.input(3), n.input(4)) {
            (Some(a), _) => inputs.push(self.int_operand(a, DType::I64)?),
            (None, Some(_)) => {
                let all = (0..k as i64).collect();
                inputs.push(self.int_const(DType::I64, &[k], all));
            }
            _ => {}
        }
        if let Some(st) = n.input(4) {
            inputs.push(self.int_operand(st, DType::I64)?);
        }
        let gop = GraphOp::SliceTo {
            dims: dims_attr(&dims),
        };
        self.emit_shape_op(gop, inputs, out, dims, dtype)
    }

    /// ONNX `Expand`: static when the broadcast shape is known at import.
    pub(super) fn expand(&mut self, x: &str, spec: &str, out: &str) -> Result<(), Why> {
        let xs = self.shape_of(x)?;
        let len = self
            .shape_of(spec)?
            .first()
            .and_then(Sym::dim)
            .ok_or("Expand shape of unknown length")?;
        let target = match self.ints_of(spec) {
            Ok((_, t)) if !t.iter().any(|d| self.is_run_time_value(d)) => broadcast(&xs, &t).ok(),
            _ => None,
        };
        if let Some(t) = &target {
            if let Some(known) = t.iter().map(Sym::dim).collect::<Option<Vec<usize>>>() {
                return self.apply(Op::Expand(known), &[x], &[out]);
            }
        }
        let dims: Vec<Option<Sym>> = match target {
            Some(t) => t.into_iter().map(Some).collect(),
            None => vec![None; xs.len().max(len)],
        };
        let dtype = self.dtype_of(x)?;
        let inputs = vec![self.any_operand(x)?, self.int_operand(spec, DType::I64)?];
        let gop = GraphOp::ExpandTo {
            dims: dims_attr(&dims),
        };
        self.emit_shape_op(gop, inputs, out, dims, dtype)
    }

    /// ONNX `ConstantOfShape`: folded when the shape is known at import.
    pub(super) fn constant_of_shape(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let spec = n.input(0).ok_or("ConstantOfShape needs a shape")?;
        let (value, dtype) = match n.attrs.get("value") {
            None => (0.0, DType::F32),
            Some(Attr::Tensor(Val::Floats { data, .. })) if data.len() == 1 => {
                (data[0] as f64, DType::F32)
            }
            Some(Attr::Tensor(Val::Ints { data, .. })) if data.len() == 1 => (
                data[0]
                    .value()
                    .ok_or("ConstantOfShape value must be known")? as f64,
                DType::I64,
            ),
            Some(other) => {
                return Err(format!("ConstantOfShape value {other:?} is not one number"))
            }
        };
        if let Ok(v) = self.known_ints(spec) {
            if let Ok(shape) = v
                .iter()
                .map(|&d| usize::try_from(d))
                .collect::<Result<Vec<_>, _>>()
            {
                return self.apply(
                    Op::Fill {
                        shape,
                        value,
                        dtype,
                    },
                    &[],
                    &[out],
                );
            }
        }
        let len = self
            .shape_of(spec)?
            .first()
            .and_then(Sym::dim)
            .ok_or("ConstantOfShape shape of unknown length")?;
        let dims: Vec<Option<Sym>> = match self.ints_of(spec) {
            Ok((_, v)) => v.into_iter().map(Some).collect(),
            Err(_) => vec![None; len],
        };
        let gop = GraphOp::ConstantOfShape {
            value,
            dtype,
            dims: dims_attr(&dims),
        };
        let inputs = vec![self.int_operand(spec, DType::I64)?];
        self.emit_shape_op(gop, inputs, out, dims, dtype)
    }

    /// ONNX `Range`: folded when start, limit and delta are known at import.
    pub(super) fn range(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let names = [0, 1, 2].map(|i| n.input(i));
        let [Some(s), Some(l), Some(d)] = names else {
            return Err("Range needs start, limit and delta".into());
        };
        let dtype = self.dtype_of(s)?;
        let known = |t: &Translator, x: &str| -> Option<f64> {
            match t.val(x).ok()? {
                Val::Floats { data, .. } if data.len() == 1 => Some(data[0] as f64),
                Val::Ints { data, .. } if data.len() == 1 => data[0].value().map(|v| v as f64),
                _ => None,
            }
        };
        if let (Some(a), Some(b), Some(c)) = (known(self, s), known(self, l), known(self, d)) {
            if c == 0.0 {
                return Err("Range with delta 0".into());
            }
            let len = ((b - a) / c).ceil().max(0.0) as usize;
            let op = Op::Range {
                start: a,
                delta: c,
                len,
                dtype,
            };
            return self.apply(op, &[], &[out]);
        }
        // `Range(s, limit, 1)` of an integer dimension has `limit - s` values.
        let len = match (self.ints_of(s), self.ints_of(l), known(self, d)) {
            (Ok((_, a)), Ok((_, b)), Some(1.0)) if a.len() == 1 && b.len() == 1 => {
                Some(b[0].add(&a[0], -1))
                    .flatten()
                    .filter(|x| !self.is_run_time_value(x))
            }
            _ => None,
        };
        let mut inputs = Vec::with_capacity(3);
        for x in [s, l, d] {
            inputs.push(match dtype {
                DType::F32 => self.operand(x)?,
                t => self.int_operand(x, t)?,
            });
        }
        self.emit_shape_op(GraphOp::RangeOf, inputs, out, vec![len], dtype)
    }

    /// ONNX `Pad`: constant mode static when the pads are known at import, else
    /// per call; reflect, edge and wrap modes as gathers of import-time indices.
    pub(super) fn pad(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        if n.input(3).is_some() {
            return Err("Pad with axes is not supported yet".into());
        }
        let x = n.input(0).ok_or("Pad needs data")?;
        let pads = n.input(1).ok_or("Pad needs pads")?;
        let shape = self.shape_of(x)?;
        let r = shape.len();
        let mode = n.string("mode", "constant")?;
        if mode != "constant" {
            return self.pad_gather(&mode, x, pads, &shape, out);
        }
        let value = match n.input(2) {
            None => Some(0.0),
            Some(v) => match self.val(v)? {
                Val::Floats { data, .. } if data.len() == 1 => Some(data[0] as f64),
                Val::Ints { data, .. } if data.len() == 1 => data[0].value().map(|v| v as f64),
                _ => None,
            },
        };
        if let (Ok(p), Some(value)) = (self.known_ints(pads), value) {
            if p.len() == 2 * r {
                let pairs = (0..r).map(|d| [p[d], p[r + d]]).collect();
                return self.apply(Op::Pad { pads: pairs, value }, &[x], &[out]);
            }
        }
        let dims: Vec<Option<Sym>> = match self.ints_of(pads) {
            Ok((_, p)) if p.len() == 2 * r => (0..r)
                .map(|d| {
                    let grown = shape[d].add(&p[d], 1)?.add(&p[r + d], 1)?;
                    (!self.is_run_time_value(&p[d]) && !self.is_run_time_value(&p[r + d]))
                        .then_some(grown)
                })
                .collect(),
            _ => vec![None; r],
        };
        let dtype = self.dtype_of(x)?;
        let mut inputs = vec![self.any_operand(x)?, self.int_operand(pads, DType::I64)?];
        if let Some(v) = n.input(2) {
            inputs.push(self.any_operand(v)?);
        }
        let gop = GraphOp::PadTo {
            dims: dims_attr(&dims),
        };
        self.emit_shape_op(gop, inputs, out, dims, dtype)
    }

    /// ONNX `Pad` in `mode` reflect, edge or wrap with pads known at import: per padded
    /// dim (of a length known at import) one `Gather` of the source positions,
    /// `y[j] = x[src(j - before)]`.
    fn pad_gather(
        &mut self,
        mode: &str,
        x: &str,
        pads: &str,
        shape: &[Sym],
        out: &str,
    ) -> Result<(), Why> {
        let r = shape.len();
        let p = self
            .known_ints(pads)
            .map_err(|e| format!("Pad mode {mode} needs pads known at import ({e})"))?;
        if p.len() != 2 * r || p.iter().any(|&v| v < 0) {
            return Err(format!(
                "Pad mode {mode} needs 2 x {r} pads >= 0, got {p:?}"
            ));
        }
        let padded: Vec<usize> = (0..r).filter(|&d| p[d] != 0 || p[r + d] != 0).collect();
        let mut cur = x.to_string();
        for (k, &d) in padded.iter().enumerate() {
            let len = shape[d]
                .dim()
                .ok_or_else(|| format!("Pad mode {mode} along a symbolic dim"))?
                as i64;
            let (before, after) = (p[d], p[r + d]);
            let total = (len.checked_add(before))
                .and_then(|v| v.checked_add(after))
                .and_then(|v| v.checked_add(self.pad_positions));
            match total {
                Some(t) if t <= MAX_PAD_POSITIONS => self.pad_positions = t,
                _ => {
                    return Err(format!(
                        "Pad mode {mode} grows a dim of {len} by {before}/{after} values; the reflect, edge and wrap pads of a model may have at most {MAX_PAD_POSITIONS} padded values in all (their source positions are stored in the model)"
                    ))
                }
            }
            let src = |i: i64| -> Option<i64> {
                match mode {
                    "reflect" if before < len && after < len => Some(if i < 0 {
                        -i
                    } else if i >= len {
                        2 * (len - 1) - i
                    } else {
                        i
                    }),
                    "edge" if len > 0 => Some(i.clamp(0, len - 1)),
                    "wrap" if len > 0 => Some(i.rem_euclid(len)),
                    _ => None,
                }
            };
            let idx = (-before..len + after)
                .map(|i| src(i).map(Sym::known))
                .collect::<Option<Vec<Sym>>>()
                .ok_or_else(|| {
                    format!("Pad mode {mode} of {before}/{after} values over a dim of {len} (reflect needs pads < the dim; modes: constant, reflect, edge, wrap)")
                })?;
            let idx_name = self.fresh_name(out);
            self.set(
                &idx_name,
                Val::Ints {
                    shape: vec![idx.len()],
                    data: idx,
                },
            );
            let next = if k + 1 == padded.len() {
                out.to_string()
            } else {
                self.fresh_name(out)
            };
            self.apply(Op::Gather { axis: d }, &[&cur, &idx_name], &[&next])?;
            cur = next;
        }
        if padded.is_empty() {
            let v = self.val(x)?.clone();
            self.set(out, v);
        }
        Ok(())
    }

    /// ONNX `ConvTranspose` over 1 or 2 spatial dims (a 1-D one runs as 2-D over a
    /// height of 1).
    pub(super) fn conv_transpose(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let x = n.input(0).ok_or("ConvTranspose needs X")?;
        let w = n.input(1).ok_or("ConvTranspose needs W")?;
        let (ws, _) = self
            .floats_of(w)
            .ok_or("ConvTranspose with a run-time kernel is not supported yet")?;
        if n.string("auto_pad", "NOTSET")? != "NOTSET" || n.ints("output_shape")?.is_some() {
            return Err("ConvTranspose with auto_pad or output_shape is not supported yet".into());
        }
        let spatial = ws.len().saturating_sub(2);
        let get = |key: &str, d: i64, len: usize| -> Result<Vec<usize>, Why> {
            n.ints(key)?
                .unwrap_or(vec![d; len])
                .iter()
                .map(|&v| usize::try_from(v).map_err(|_| format!("negative {key}")))
                .collect()
        };
        let strides = get("strides", 1, spatial)?;
        let dil = get("dilations", 1, spatial)?;
        let pads = get("pads", 0, 2 * spatial)?;
        let opad = get("output_padding", 0, spatial)?;
        let groups = n.int("group", 1)?.max(1) as usize;
        let bias = n.input(2);
        let lists_fit =
            [&strides, &dil, &opad].iter().all(|v| v.len() == spatial) && pads.len() == 2 * spatial;
        if !lists_fit {
            return Err("ConvTranspose attributes do not match the kernel's rank".into());
        }
        match spatial {
            2 => {
                let op = Op::ConvTranspose2d {
                    stride: [strides[0], strides[1]],
                    pads: [pads[0], pads[1], pads[2], pads[3]],
                    dilation: [dil[0], dil[1]],
                    groups,
                    out_pad: [opad[0], opad[1]],
                };
                let mut ins = vec![x, w];
                ins.extend(bias);
                self.apply(op, &ins, &[out])
            }
            1 => {
                let op = Op::ConvTranspose2d {
                    stride: [1, strides[0]],
                    pads: [0, pads[0], 0, pads[1]],
                    dilation: [1, dil[0]],
                    groups,
                    out_pad: [0, opad[0]],
                };
                self.as_2d(op, x, w, bias, out)
            }
            s => Err(format!(
                "ConvTranspose over {s} spatial dims is not supported yet"
            )),
        }
    }
}
