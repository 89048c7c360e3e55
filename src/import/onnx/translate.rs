//! ONNX graph -> graph IR. Walks the nodes in their (topological) order and
//! keeps, per ONNX value, what is known at import:
//!
//! - [`Val::Ints`]: an integer tensor whose values are known, or multiples of
//!   a symbolic input dimension (shape arithmetic: `Shape`, `Gather`,
//!   `Concat`, ... are folded here and never reach the executor);
//! - [`Val::Floats`]: an f32 constant (initializers, `Constant` nodes, and
//!   float subgraphs of constants, folded with the CPU reference ops); it
//!   becomes a tensor of the weights section when a run-time node reads it;
//! - [`Val::Dyn`]: a run-time f32 value of the IR, with its symbolic shape.
//!
//! Each ONNX node becomes zero or more IR nodes. An op, attribute or form this
//! importer does not translate is an error naming the node, its op type and
//! the opset — at import, never at the first run.

use super::sym::Sym;
use crate::backend::cpu::reference;
use crate::backend::{CmpOp, IntOp, Op, ReduceKind, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::ir::{GraphDoc, GraphOp, InputDecl, NodeDecl};
use std::collections::HashMap;
use std::sync::Arc;

/// The largest dimension a translated value may have (2^31; larger is a corrupt file).
const MAX_DIM: usize = 1 << 31;

/// An f32 constant's shape and values.
pub(super) type Constant = (Vec<usize>, Arc<Vec<f32>>);

/// What the importer knows of one ONNX value.
#[derive(Debug, Clone)]
pub enum Val {
    /// Integer (or bool) values known at import.
    Ints { shape: Vec<usize>, data: Vec<Sym> },
    /// An f32 constant.
    Floats {
        shape: Vec<usize>,
        data: Arc<Vec<f32>>,
    },
    /// A run-time value: its IR name, symbolic shape and encoding (f32, i64, bool).
    Dyn {
        name: String,
        shape: Vec<Sym>,
        dtype: DType,
    },
}

/// The values of a constant the IR reads.
pub enum WeightData {
    /// f32 values.
    F32(Arc<Vec<f32>>),
    /// i64 or bool values (bool as 0 / 1).
    Ints(DType, Vec<i64>),
}

/// A constant the IR reads: becomes a tensor of the weights section.
pub struct WeightOut {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: WeightData,
}

/// The translation: the graph section and the tensors it reads.
pub struct Translated {
    pub doc: GraphDoc,
    pub weights: Vec<WeightOut>,
}

/// An output's dims (`None`: known only per call) and encoding.
pub(super) type OutDims = (Vec<Option<Sym>>, DType);

/// Why a node does not translate: the node's position and name are added by the caller.
pub type Why = String;

/// An ONNX attribute value, decoded.
#[derive(Debug, Clone)]
pub enum Attr {
    Float(f32),
    Int(i64),
    Str(String),
    Tensor(Val),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strings(Vec<String>),
}

/// One ONNX node, decoded: op type, inputs (`""` = absent), outputs, attributes.
pub struct OnnxNode<'a> {
    pub op_type: &'a str,
    pub inputs: &'a [String],
    pub outputs: &'a [String],
    pub attrs: HashMap<String, Attr>,
}

impl OnnxNode<'_> {
    pub(super) fn int(&self, key: &str, default: i64) -> Result<i64, Why> {
        match self.attrs.get(key) {
            None => Ok(default),
            Some(Attr::Int(i)) => Ok(*i),
            Some(a) => Err(format!("attribute `{key}` must be an int, got {a:?}")),
        }
    }

    pub(super) fn float(&self, key: &str, default: f32) -> Result<f32, Why> {
        match self.attrs.get(key) {
            None => Ok(default),
            Some(Attr::Float(f)) => Ok(*f),
            Some(a) => Err(format!("attribute `{key}` must be a float, got {a:?}")),
        }
    }

    pub(super) fn string(&self, key: &str, default: &str) -> Result<String, Why> {
        match self.attrs.get(key) {
            None => Ok(default.to_string()),
            Some(Attr::Str(s)) => Ok(s.clone()),
            Some(a) => Err(format!("attribute `{key}` must be a string, got {a:?}")),
        }
    }

    pub(super) fn ints(&self, key: &str) -> Result<Option<Vec<i64>>, Why> {
        match self.attrs.get(key) {
            None => Ok(None),
            Some(Attr::Ints(v)) => Ok(Some(v.clone())),
            Some(a) => Err(format!(
                "attribute `{key}` must be a list of ints, got {a:?}"
            )),
        }
    }

    pub(super) fn strings(&self, key: &str) -> Result<Option<Vec<String>>, Why> {
        match self.attrs.get(key) {
            None => Ok(None),
            Some(Attr::Strings(v)) => Ok(Some(v.clone())),
            Some(a) => Err(format!(
                "attribute `{key}` must be a list of strings, got {a:?}"
            )),
        }
    }

    /// Input `i`, when present (ONNX marks a skipped optional input with `""`).
    pub(super) fn input(&self, i: usize) -> Option<&str> {
        self.inputs
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    pub(super) fn output(&self, i: usize) -> Result<&str, Why> {
        self.outputs
            .get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("needs output {i}"))
    }
}

/// The translation state.
pub struct Translator {
    pub(super) vals: HashMap<String, Val>,
    /// ONNX value name -> name of its tensor in the weights section.
    emitted: HashMap<String, String>,
    pub(super) weights: Vec<WeightOut>,
    nodes: Vec<NodeDecl>,
    inputs: Vec<InputDecl>,
    pub(super) fresh: usize,
    /// Where each symbolic value (input dims, run-time dims and integers) is read at run time.
    pub(super) sources: HashMap<String, VarSrc>,
    /// IR value -> the IR value of its `Shape`.
    pub(super) shape_nodes: HashMap<String, String>,
    /// Integer constants already written: (dtype, shape, values) -> weight name.
    pub(super) int_consts: HashMap<(DType, Vec<usize>, Vec<i64>), String>,
    /// Source positions written so far for reflect, edge and wrap `Pad`s.
    pub(super) pad_positions: i64,
}

/// Where the run-time value of a symbolic dimension or integer is read.
#[derive(Debug, Clone)]
pub(super) enum VarSrc {
    /// Dimension `axis` of an IR value.
    Dim(String, usize),
    /// Element `i` of a 1-D i64 IR value.
    Elem(String, usize),
}

/// ONNX's axis rule: `axis` in `[-rank, rank)`, negative counting from the end; a
/// rank-0 value has no axis.
pub(super) fn normalize_axis(axis: i64, rank: usize) -> Result<usize, Why> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

fn known_dims(shape: &[Sym], what: &str) -> Result<Vec<usize>, Why> {
    shape
        .iter()
        .map(|d| {
            d.dim()
                .ok_or_else(|| format!("{what}: dimension `{d}` must be known at import"))
        })
        .collect()
}

pub(super) fn syms(dims: &[usize]) -> Vec<Sym> {
    dims.iter().map(|&d| Sym::known(d as i64)).collect()
}

/// NumPy broadcast of two symbolic shapes.
pub(super) fn broadcast(a: &[Sym], b: &[Sym]) -> Result<Vec<Sym>, Why> {
    let rank = a.len().max(b.len());
    let one = Sym::known(1);
    (0..rank)
        .map(|i| {
            let da = if i + a.len() >= rank {
                &a[i + a.len() - rank]
            } else {
                &one
            };
            let db = if i + b.len() >= rank {
                &b[i + b.len() - rank]
            } else {
                &one
            };
            if da == db || *db == one {
                Ok(da.clone())
            } else if *da == one {
                Ok(db.clone())
            } else {
                Err(format!("shapes {a:?} and {b:?} do not broadcast"))
            }
        })
        .collect()
}

impl Translator {
    /// A translator holding the initializers as constants.
    pub fn new(initializers: Vec<(String, Val)>) -> Translator {
        Translator {
            vals: initializers.into_iter().collect(),
            emitted: HashMap::new(),
            weights: Vec::new(),
            nodes: Vec::new(),
            inputs: Vec::new(),
            fresh: 0,
            sources: HashMap::new(),
            shape_nodes: HashMap::new(),
            int_consts: HashMap::new(),
            pad_positions: 0,
        }
    }

    /// Declares graph input `name` of `dtype` (f32, i64 or bool) with dims known or
    /// symbolic (`None` dim names an unknown dimension, which becomes a symbolic one of its own).
    pub fn input(&mut self, name: &str, dims: Vec<Sym>, dtype: DType) {
        for (axis, d) in dims.iter().enumerate() {
            if let Some(v) = &d.var {
                self.sources
                    .entry(v.clone())
                    .or_insert_with(|| VarSrc::Dim(name.to_string(), axis));
            }
        }
        let shape = dims.iter().map(|d| d.value().unwrap_or(-1)).collect();
        self.inputs.push(InputDecl {
            name: name.to_string(),
            dtype: dtype.name().into(),
            shape,
        });
        self.vals.insert(
            name.to_string(),
            Val::Dyn {
                name: name.to_string(),
                shape: dims,
                dtype,
            },
        );
    }

    /// The graph and its tensors, with `outputs` returned.
    pub fn finish(mut self, outputs: &[String]) -> Result<Translated, Why> {
        let mut names = Vec::new();
        for o in outputs {
            match self.vals.get(o).cloned() {
                // An output that is another value under a new name (Identity, a folded
                // reshape) gets a view node of its own name, so the caller finds it by name.
                Some(Val::Dyn { name, shape, dtype }) if name != *o => {
                    let alias = Val::Dyn { name, shape: shape.clone(), dtype };
                    let tmp = self.fresh_name(o);
                    self.set(&tmp, alias);
                    self.vals.remove(o);
                    self.reshape(&tmp, shape, o)?;
                    names.push(o.clone());
                }
                Some(Val::Dyn { name, .. }) => names.push(name),
                Some(_) => {
                    return Err(format!(
                        "graph output `{o}` is a constant; an output computed from the inputs is needed"
                    ))
                }
                None => return Err(format!("graph output `{o}` is not produced by any node")),
            }
        }
        Ok(Translated {
            doc: GraphDoc {
                version: 1,
                inputs: self.inputs,
                outputs: names,
                state: Vec::new(),
                nodes: self.nodes,
            },
            weights: self.weights,
        })
    }

    pub(super) fn val(&self, name: &str) -> Result<&Val, Why> {
        self.vals.get(name).ok_or_else(|| {
            format!("input `{name}` is not a graph input, initializer or earlier output")
        })
    }

    pub(super) fn set(&mut self, name: &str, v: Val) {
        self.vals.insert(name.to_string(), v);
    }

    pub(super) fn fresh_name(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{base}::{}", self.fresh)
    }

    /// The symbolic shape of a value.
    pub(super) fn shape_of(&self, name: &str) -> Result<Vec<Sym>, Why> {
        Ok(match self.val(name)? {
            Val::Ints { shape, .. } | Val::Floats { shape, .. } => syms(shape),
            Val::Dyn { shape, .. } => shape.clone(),
        })
    }

    /// The IR name of an f32 operand: a run-time value, or a constant written
    /// to the weights section (once).
    pub(super) fn operand(&mut self, name: &str) -> Result<String, Why> {
        match self.val(name)?.clone() {
            Val::Dyn { name, .. } => Ok(name),
            Val::Floats { shape, data } => {
                if let Some(w) = self.emitted.get(name) {
                    return Ok(w.clone());
                }
                let w = format!("onnx::{name}");
                self.weights.push(WeightOut {
                    name: w.clone(),
                    shape,
                    data: WeightData::F32(data),
                });
                self.emitted.insert(name.to_string(), w.clone());
                Ok(w)
            }
            Val::Ints { shape, data } => self.materialize(&data, &shape),
        }
    }

    pub(super) fn ints_of(&self, name: &str) -> Result<(Vec<usize>, Vec<Sym>), Why> {
        match self.val(name)? {
            Val::Ints { shape, data } => Ok((shape.clone(), data.clone())),
            Val::Floats { shape, data } => Ok((
                shape.clone(),
                data.iter().map(|&f| Sym::known(f as i64)).collect(),
            )),
            Val::Dyn { .. } => Err(format!(
                "`{name}` must be known at import (a constant or shape arithmetic) here"
            )),
        }
    }

    pub(super) fn known_ints(&self, name: &str) -> Result<Vec<i64>, Why> {
        self.ints_of(name)?
            .1
            .iter()
            .map(|d| {
                d.value().ok_or_else(|| {
                    format!("`{name}` has the symbolic value `{d}`; a number is needed")
                })
            })
            .collect()
    }

    pub(super) fn floats_of(&self, name: &str) -> Option<Constant> {
        match self.vals.get(name)? {
            Val::Floats { shape, data } => Some((shape.clone(), data.clone())),
            Val::Ints { shape, data } => {
                let v: Option<Vec<f32>> =
                    data.iter().map(|d| d.value().map(|x| x as f32)).collect();
                Some((shape.clone(), Arc::new(v?)))
            }
            Val::Dyn { .. } => None,
        }
    }

    pub(super) fn scalar_f32(&self, name: &str) -> Result<f32, Why> {
        match self.floats_of(name) {
            Some((_, d)) if d.len() == 1 => Ok(d[0]),
            _ => Err(format!("`{name}` must be a constant scalar")),
        }
    }

    /// Output shapes and encodings of backend `op` on symbolic inputs of `dtypes`,
    /// read back from probes: every symbolic dimension 3, then 5, then each one
    /// alone 7. A dimension that differs between the first two is `c * v` when
    /// exactly one symbolic dimension `v` moves it (a probe that fails means two
    /// symbolic dimensions must be equal, and is left out); `None` otherwise.
    fn infer(&self, op: &Op, ins: &[Vec<Sym>], dtypes: &[DType]) -> Result<Vec<OutDims>, Why> {
        let run = |value: &dyn Fn(&str) -> i64| -> Result<Vec<TensorInfo>, Why> {
            let infos = ins
                .iter()
                .zip(dtypes)
                .map(|(s, &dtype)| {
                    let dims = s
                        .iter()
                        .map(|d| {
                            let v = match &d.var {
                                Some(v) => d.coef.saturating_mul(value(v)),
                                None => d.coef,
                            };
                            match usize::try_from(v) {
                                Ok(n) if n <= MAX_DIM => Ok(n),
                                Ok(_) => Err(format!("dimension {d} is larger than {MAX_DIM}")),
                                Err(_) => Err(format!("negative dimension {d}")),
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(TensorInfo::new(&dims, dtype))
                })
                .collect::<Result<Vec<_>, Why>>()?;
            op.infer(&infos).map_err(|e| e.to_string())
        };
        let a = run(&|_| 3)?;
        let b = run(&|_| 5)?;
        let mut vars: Vec<&str> = ins
            .iter()
            .flatten()
            .filter_map(|d| d.var.as_deref())
            .collect();
        vars.sort_unstable();
        vars.dedup();
        let alone: Vec<(&str, Vec<TensorInfo>)> = vars
            .iter()
            .filter_map(|&v| run(&|w| if w == v { 7 } else { 3 }).ok().map(|r| (v, r)))
            .collect();
        Ok(a.iter()
            .zip(&b)
            .enumerate()
            .map(|(o, (x, y))| {
                let dims = x
                    .shape
                    .iter()
                    .zip(&y.shape)
                    .enumerate()
                    .map(|(k, (&p, &q))| {
                        if p == q {
                            return Some(Sym::known(p as i64));
                        }
                        let coef = (q as i64 - p as i64) / 2;
                        if coef <= 0 || coef * 3 != p as i64 {
                            return None;
                        }
                        let moved: Vec<(&str, usize)> = alone
                            .iter()
                            .filter_map(|(v, r)| {
                                let d = r.get(o)?.shape.get(k).copied()?;
                                (d != p).then_some((*v, d))
                            })
                            .collect();
                        match moved.as_slice() {
                            [(v, d)] if *d as i64 == 7 * coef => Some(Sym {
                                coef,
                                var: Some(v.to_string()),
                            }),
                            _ => None,
                        }
                    })
                    .collect();
                (dims, x.dtype)
            })
            .collect())
    }

    /// The encoding of an ONNX value: f32 constants, i64 integers, run-time values' own.
    pub(super) fn dtype_of(&self, name: &str) -> Result<DType, Why> {
        Ok(match self.val(name)? {
            Val::Floats { .. } => DType::F32,
            Val::Ints { .. } => DType::I64,
            Val::Dyn { dtype, .. } => *dtype,
        })
    }

    /// The value of an ONNX value known at import, as a tensor.
    pub(super) fn const_tensor(&self, name: &str) -> Option<Tensor> {
        match self.vals.get(name)? {
            Val::Floats { shape, data } => Tensor::from_f32(shape, data.to_vec()).ok(),
            Val::Ints { shape, data } => {
                let v: Option<Vec<i64>> = data.iter().map(Sym::value).collect();
                Tensor::from_i64(shape, v?).ok()
            }
            Val::Dyn { .. } => None,
        }
    }

    /// Applies backend `op` to the ONNX values `ins`, naming the results `outs`:
    /// folded with the reference ops when every input is known at import, else IR nodes.
    pub(super) fn apply(&mut self, op: Op, ins: &[&str], outs: &[&str]) -> Result<(), Why> {
        if self.fold_moves(&op, ins, outs)? {
            return Ok(());
        }
        let consts: Option<Vec<Tensor>> = ins.iter().map(|n| self.const_tensor(n)).collect();
        if let Some(tensors) = consts {
            let results = reference::execute(&op, &tensors).map_err(|e| e.to_string())?;
            for (name, t) in outs.iter().zip(results) {
                let shape = t.shape().to_vec();
                let v = match t.as_i64() {
                    Some(v) => Val::Ints {
                        shape,
                        data: v.iter().map(|&x| Sym::known(x)).collect(),
                    },
                    None => Val::Floats {
                        shape,
                        data: Arc::new(t.read_f32("fold").map_err(|e| e.to_string())?.to_vec()),
                    },
                };
                self.set(name, v);
            }
            return Ok(());
        }
        let shapes = ins
            .iter()
            .map(|n| self.shape_of(n))
            .collect::<Result<Vec<_>, _>>()?;
        let dtypes = ins
            .iter()
            .map(|n| self.dtype_of(n))
            .collect::<Result<Vec<_>, _>>()?;
        let inferred = self.infer(&op, &shapes, &dtypes)?;
        let operands = ins
            .iter()
            .map(|n| self.operand(n))
            .collect::<Result<Vec<_>, _>>()?;
        // The IR writes a slice as the graph op (its indices in attributes).
        let gop = match op {
            Op::Slice { axis, start, end } => GraphOp::Slice {
                axis,
                start: start as i64,
                end: Some(end as i64),
            },
            op => GraphOp::Fixed(op),
        };
        self.emit(&gop, operands, outs, inferred);
        Ok(())
    }

    /// Writes IR node `gop` over the IR values `inputs`, defining the ONNX values
    /// `outs` with the given dims (`None`: a new symbolic dimension read at run time)
    /// and encodings.
    pub(super) fn emit(
        &mut self,
        gop: &crate::ir::GraphOp,
        inputs: Vec<String>,
        outs: &[&str],
        outputs: Vec<OutDims>,
    ) {
        let id = self.nodes.len();
        self.nodes.push(NodeDecl {
            id,
            op: gop.name().to_string(),
            inputs,
            outputs: outs.iter().map(|s| s.to_string()).collect(),
            attrs: gop.attrs(),
            backend_hint: None,
        });
        for (name, (dims, dtype)) in outs.iter().zip(outputs) {
            let shape = dims
                .into_iter()
                .enumerate()
                .map(|(axis, d)| {
                    d.unwrap_or_else(|| self.fresh_var(VarSrc::Dim(name.to_string(), axis)))
                })
                .collect();
            self.set(
                name,
                Val::Dyn {
                    name: name.to_string(),
                    shape,
                    dtype,
                },
            );
        }
    }

    /// A new symbolic value read at run time from `src`.
    pub(super) fn fresh_var(&mut self, src: VarSrc) -> Sym {
        self.fresh += 1;
        let name = format!("?{}", self.fresh);
        self.sources.insert(name.clone(), src);
        Sym::var(&name)
    }

    /// `x` viewed as `target` (same element count; symbolic dims allowed: with
    /// more than one, the target is computed at run time).
    pub(super) fn reshape(&mut self, x: &str, target: Vec<Sym>, out: &str) -> Result<(), Why> {
        match self.val(x)?.clone() {
            Val::Ints { data, .. } => {
                let shape = known_dims(&target, "reshape of an integer constant")?;
                self.set(out, Val::Ints { shape, data });
            }
            Val::Floats { data, .. } => {
                let shape = known_dims(&target, "reshape of a constant")?;
                self.set(out, Val::Floats { shape, data });
            }
            Val::Dyn { name, dtype, .. } => {
                let dims: Vec<i64> = target.iter().map(|d| d.value().unwrap_or(-1)).collect();
                let (gop, inputs) = if target.iter().filter(|d| d.var.is_some()).count() <= 1 {
                    (GraphOp::Reshape(dims), vec![name])
                } else {
                    let spec = self.materialize(&target, &[target.len()])?;
                    let gop = GraphOp::ReshapeTo {
                        allowzero: true,
                        dims,
                    };
                    (gop, vec![name, spec])
                };
                let outputs = vec![(target.into_iter().map(Some).collect(), dtype)];
                self.emit(&gop, inputs, &[out], outputs);
            }
        }
        Ok(())
    }

    /// The target of ONNX `Reshape(x, spec)` when import-time values settle it.
    fn reshape_target(&self, x: &str, spec: &str, allowzero: bool) -> Result<Vec<Sym>, Why> {
        let shape = self.shape_of(x)?;
        let (_, spec) = self.ints_of(spec)?;
        if spec.iter().any(|d| self.is_run_time_value(d)) {
            return Err("the shape holds values known only per call".into());
        }
        let mut target = Vec::with_capacity(spec.len());
        let mut infer_at = None;
        for (i, d) in spec.iter().enumerate() {
            match d.value() {
                Some(0) if !allowzero => target.push(shape.get(i).cloned().ok_or_else(|| {
                    format!("Reshape copies dim {i} of a rank-{} input", shape.len())
                })?),
                Some(-1) => {
                    if infer_at.replace(i).is_some() {
                        return Err("Reshape shape has two -1".into());
                    }
                    target.push(Sym::known(1));
                }
                Some(v) if v < 0 => return Err(format!("Reshape shape has {v}")),
                _ => target.push(d.clone()),
            }
        }
        if let Some(i) = infer_at {
            let mut others = target.clone();
            others.remove(i);
            target[i] = Sym::ratio(&shape, &others)
                .ok_or_else(|| format!("Reshape: the -1 of {spec:?} for {shape:?} is not known"))?;
        }
        Ok(target)
    }

    /// Whether symbolic value `d` is an integer read from a run-time vector (any
    /// value, not a dimension).
    pub(super) fn is_run_time_value(&self, d: &Sym) -> bool {
        d.var
            .as_ref()
            .is_some_and(|v| matches!(self.sources.get(v), Some(VarSrc::Elem(..))))
    }

    /// ONNX `Reshape(x, spec)` resolved per call (`ReshapeTo`).
    fn reshape_to(&mut self, x: &str, spec: &str, allowzero: bool, out: &str) -> Result<(), Why> {
        let shape = self.shape_of(x)?;
        let rank = self
            .shape_of(spec)?
            .first()
            .and_then(Sym::dim)
            .ok_or("Reshape shape of unknown length")?;
        let known: Vec<Option<Sym>> = match self.ints_of(spec) {
            Ok((_, v)) => v
                .iter()
                .enumerate()
                .map(|(i, d)| match d.value() {
                    Some(0) if !allowzero => shape.get(i).cloned(),
                    Some(v) if v > 0 => Some(d.clone()),
                    None if !self.is_run_time_value(d) => Some(d.clone()),
                    _ => None,
                })
                .collect(),
            Err(_) => vec![None; rank],
        };
        let dims = known
            .iter()
            .map(|d| d.as_ref().and_then(Sym::value).unwrap_or(-1))
            .collect();
        let dtype = self.dtype_of(x)?;
        let xi = self.any_operand(x)?;
        let si = self.int_operand(spec, DType::I64)?;
        self.emit_shape_op(
            GraphOp::ReshapeTo { allowzero, dims },
            vec![xi, si],
            out,
            known,
            dtype,
        )
    }

    /// ONNX `Slice` with indices known at import (steps of 1).
    fn slice_static(&mut self, n: &OnnxNode, out0: &str) -> Result<(), Why> {
        let in0 = || n.input(0).ok_or_else(|| "needs input 0".to_string());
        let x = in0()?;
        let shape = self.shape_of(x)?;
        let starts = self.known_ints(n.input(1).ok_or("Slice needs starts")?)?;
        let ends = self.known_ints(n.input(2).ok_or("Slice needs ends")?)?;
        let axes = match n.input(3) {
            Some(a) => self.known_ints(a)?,
            None => (0..starts.len() as i64).collect(),
        };
        if starts.len() != axes.len() || ends.len() != axes.len() {
            return Err(format!(
                "Slice has {} starts and {} ends for {} axes",
                starts.len(),
                ends.len(),
                axes.len()
            ));
        }
        if let Some(s) = n.input(4) {
            if self.known_ints(s)?.iter().any(|&s| s != 1) {
                return Err("Slice with steps other than 1 is not supported yet".into());
            }
        }
        if let Val::Ints { shape: s, data } = self.val(x)?.clone() {
            if s.len() == 1 && axes.len() == 1 {
                let len = data.len() as i64;
                let (b, e) =
                    crate::ir::ops::slice_range(starts[0], Some(ends[0].min(len)), len as usize);
                let part = data[b..e].to_vec();
                self.set(
                    out0,
                    Val::Ints {
                        shape: vec![part.len()],
                        data: part,
                    },
                );
                return Ok(());
            }
        }
        let mut cur = x.to_string();
        for (k, &a) in axes.iter().enumerate() {
            let axis = normalize_axis(a, shape.len())?;
            let len = shape
                .get(axis)
                .ok_or("Slice axis beyond the input's rank")?
                .dim()
                .ok_or("Slice along a symbolic axis")?;
            let end = ends[k].clamp(-(len as i64) - 1, len as i64);
            let (b, e) = crate::ir::ops::slice_range(starts[k], Some(end), len);
            let next = if k + 1 == axes.len() {
                out0.to_string()
            } else {
                self.fresh_name(out0)
            };
            self.apply(
                Op::Slice {
                    axis,
                    start: b,
                    end: e,
                },
                &[&cur],
                &[&next],
            )?;
            cur = next;
        }
        if axes.is_empty() {
            let v = self.val(x)?.clone();
            self.set(out0, v);
        }
        Ok(())
    }

    /// Translates one node.
    pub fn node(&mut self, n: &OnnxNode) -> Result<(), Why> {
        let in0 = || n.input(0).ok_or_else(|| "needs input 0".to_string());
        let out0 = n.output(0)?;
        match n.op_type {
            "Constant" => {
                let v = match n.attrs.iter().next() {
                    Some((_, Attr::Tensor(v))) => v.clone(),
                    Some((k, Attr::Float(f))) if k == "value_float" => Val::Floats {
                        shape: vec![],
                        data: Arc::new(vec![*f]),
                    },
                    Some((k, Attr::Floats(f))) if k == "value_floats" => Val::Floats {
                        shape: vec![f.len()],
                        data: Arc::new(f.clone()),
                    },
                    Some((k, Attr::Int(i))) if k == "value_int" => Val::Ints {
                        shape: vec![],
                        data: vec![Sym::known(*i)],
                    },
                    Some((k, Attr::Ints(i))) if k == "value_ints" => Val::Ints {
                        shape: vec![i.len()],
                        data: i.iter().map(|&x| Sym::known(x)).collect(),
                    },
                    other => return Err(format!("unsupported Constant attribute {other:?}")),
                };
                self.set(out0, v);
            }
            "Identity" => {
                let v = self.val(in0()?)?.clone();
                self.set(out0, v);
            }
            "Shape" => {
                let shape = self.shape_of(in0()?)?;
                let r = shape.len() as i64;
                let clamp = |i: i64| (if i < 0 { i + r } else { i }).clamp(0, r) as usize;
                let start = clamp(n.int("start", 0)?);
                let end = clamp(n.int("end", r)?).max(start);
                let data = shape[start..end].to_vec();
                self.set(
                    out0,
                    Val::Ints {
                        shape: vec![data.len()],
                        data,
                    },
                );
            }
            "Cast" => {
                let to = n.int("to", 1)?;
                let x = in0()?;
                let want = super::runtime::onnx_dtype(to)?;
                match (self.val(x)?.clone(), want) {
                    (v @ Val::Dyn { .. }, w) if self.dtype_of(x)? == w => self.set(out0, v),
                    (Val::Dyn { .. }, w) => self.apply(Op::Cast(w), &[x], &[out0])?,
                    (Val::Ints { shape, data }, DType::F32) => {
                        match data
                            .iter()
                            .map(|d| d.value().map(|v| v as f32))
                            .collect::<Option<Vec<_>>>()
                        {
                            Some(f) => self.set(
                                out0,
                                Val::Floats {
                                    shape,
                                    data: Arc::new(f),
                                },
                            ),
                            None => self.apply(Op::Cast(DType::F32), &[x], &[out0])?,
                        }
                    }
                    (Val::Ints { shape, data }, DType::Bool)
                        if data.iter().all(|d| d.value().is_some()) =>
                    {
                        let data = data
                            .iter()
                            .map(|d| Sym::known((d.value() != Some(0)) as i64))
                            .collect();
                        self.set(out0, Val::Ints { shape, data });
                    }
                    (Val::Ints { .. }, DType::Bool) => {
                        self.apply(Op::Cast(DType::Bool), &[x], &[out0])?
                    }
                    (v @ Val::Ints { .. }, _) => self.set(out0, v),
                    (v @ Val::Floats { .. }, DType::F32) => self.set(out0, v),
                    (Val::Floats { shape, data }, t) => {
                        let bool_like = t == DType::Bool;
                        let ints = data
                            .iter()
                            .map(|&f| {
                                Sym::known(if bool_like {
                                    (f != 0.0) as i64
                                } else {
                                    f as i64
                                })
                            })
                            .collect();
                        self.set(out0, Val::Ints { shape, data: ints });
                    }
                }
            }
            "Unsqueeze" | "Squeeze" => {
                let x = in0()?;
                let shape = self.shape_of(x)?;
                let axes = match n.input(1) {
                    Some(a) => Some(self.known_ints(a)?),
                    None => n.ints("axes")?,
                };
                let target = if n.op_type == "Unsqueeze" {
                    let axes = axes.ok_or("Unsqueeze needs axes")?;
                    let rank = shape.len() + axes.len();
                    let mut at = axes
                        .iter()
                        .map(|&a| normalize_axis(a, rank))
                        .collect::<Result<Vec<_>, _>>()?;
                    at.sort_unstable();
                    let mut src = shape.into_iter();
                    (0..rank)
                        .map(|i| {
                            if at.contains(&i) {
                                Ok(Sym::known(1))
                            } else {
                                src.next().ok_or_else(|| "bad Unsqueeze axes".to_string())
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?
                } else {
                    let rank = shape.len();
                    let drop = match axes {
                        Some(a) => a
                            .iter()
                            .map(|&a| normalize_axis(a, rank))
                            .collect::<Result<Vec<_>, _>>()?,
                        None => (0..rank).filter(|&i| shape[i] == Sym::known(1)).collect(),
                    };
                    for &d in &drop {
                        if shape[d].var.is_some() {
                            if let Val::Dyn { name, dtype, .. } = self.val(x)?.clone() {
                                let mut axes = drop.clone();
                                axes.sort_unstable();
                                let dims = (0..rank)
                                    .filter(|i| !axes.contains(i))
                                    .map(|i| Some(shape[i].clone()))
                                    .collect();
                                return self.emit_shape_op(
                                    GraphOp::Squeeze(axes),
                                    vec![name],
                                    out0,
                                    dims,
                                    dtype,
                                );
                            }
                        }
                        if shape[d] != Sym::known(1) && shape[d].var.is_none() {
                            return Err(format!("Squeeze of axis {d}, of size {}", shape[d]));
                        }
                    }
                    shape
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| !drop.contains(i))
                        .map(|(_, d)| d)
                        .collect()
                };
                self.reshape(x, target, out0)?;
            }
            "Reshape" => {
                let x = in0()?;
                let spec = n.input(1).ok_or("Reshape needs its shape input")?;
                let allowzero = n.int("allowzero", 0)? != 0;
                match self.reshape_target(x, spec, allowzero) {
                    Ok(target) => self.reshape(x, target, out0)?,
                    Err(_) => self.reshape_to(x, spec, allowzero, out0)?,
                }
            }
            "Flatten" => {
                let x = in0()?;
                let shape = self.shape_of(x)?;
                let axis = normalize_axis(n.int("axis", 1)?, shape.len() + 1)?;
                let a = Sym::product(&shape[..axis]).ok_or("Flatten of two symbolic dims")?;
                let b = Sym::product(&shape[axis..]).ok_or("Flatten of two symbolic dims")?;
                self.reshape(x, vec![a, b], out0)?;
            }
            "Concat" => {
                let names: Vec<&str> = n
                    .inputs
                    .iter()
                    .map(String::as_str)
                    .filter(|s| !s.is_empty())
                    .collect();
                let first = self.shape_of(names.first().ok_or("Concat needs inputs")?)?;
                let axis = normalize_axis(n.int("axis", 0)?, first.len())?;
                let all_ints = names
                    .iter()
                    .all(|x| matches!(self.vals.get(*x), Some(Val::Ints { .. })));
                if all_ints && first.len() == 1 {
                    let mut data = Vec::new();
                    for x in &names {
                        data.extend(self.ints_of(x)?.1);
                    }
                    self.set(
                        out0,
                        Val::Ints {
                            shape: vec![data.len()],
                            data,
                        },
                    );
                } else {
                    self.apply(Op::Concat { axis }, &names, &[out0])?;
                }
            }
            "Gather" => {
                let data = in0()?;
                let idx = n.input(1).ok_or("Gather needs indices")?;
                let shape = self.shape_of(data)?;
                let axis = normalize_axis(n.int("axis", 0)?, shape.len())?;
                if !self.gather_static(data, idx, axis, out0)? {
                    self.apply(Op::Gather { axis }, &[data, idx], &[out0])?;
                }
            }
            "Add" | "Sub" | "Mul" | "Div" => self.binary(n, out0)?,
            "Pow" => {
                let p = self
                    .scalar_f32(n.input(1).ok_or("Pow needs an exponent")?)
                    .map_err(|e| {
                        format!("{e} (Pow with a run-time exponent is not supported yet)")
                    })?;
                self.apply(Op::PowScalar(p), &[in0()?], &[out0])?;
            }
            "Sqrt" | "Log" | "Exp" | "Cos" | "Sin" | "Reciprocal" | "Neg" | "Erf" | "Sigmoid"
            | "Tanh" | "Relu" | "Softplus" | "Ceil" => {
                let op = match n.op_type {
                    "Sqrt" => Op::Sqrt,
                    "Log" => Op::Log,
                    "Exp" => Op::Exp,
                    "Cos" => Op::Cos,
                    "Sin" => Op::Sin,
                    "Reciprocal" => Op::Reciprocal,
                    "Neg" => Op::Neg,
                    "Erf" => Op::Erf,
                    "Sigmoid" => Op::Sigmoid,
                    "Tanh" => Op::Tanh,
                    "Softplus" => Op::Softplus,
                    "Ceil" => Op::Ceil,
                    _ => Op::Relu,
                };
                self.apply(op, &[in0()?], &[out0])?;
            }
            "LeakyRelu" => {
                let alpha = n.float("alpha", 0.01)?;
                self.apply(Op::LeakyRelu(alpha), &[in0()?], &[out0])?;
            }
            "Clip" => {
                let lo = match n.input(1) {
                    Some(m) => self.scalar_f32(m)?,
                    None => f32::NEG_INFINITY,
                };
                let hi = match n.input(2) {
                    Some(m) => self.scalar_f32(m)?,
                    None => f32::INFINITY,
                };
                self.apply(Op::Clamp { lo, hi }, &[in0()?], &[out0])?;
            }
            "Softmax" => {
                let x = in0()?;
                let rank = self.shape_of(x)?.len();
                let axis = normalize_axis(n.int("axis", -1)?, rank)?;
                if axis + 1 == rank {
                    self.apply(Op::Softmax, &[x], &[out0])?;
                } else {
                    let mut perm: Vec<usize> = (0..rank).collect();
                    perm.swap(axis, rank - 1);
                    let (a, b) = (self.fresh_name(out0), self.fresh_name(out0));
                    self.apply(Op::Permute(perm.clone()), &[x], &[&a])?;
                    self.apply(Op::Softmax, &[&a], &[&b])?;
                    self.apply(Op::Permute(perm), &[&b], &[out0])?;
                }
            }
            "Transpose" => {
                let x = in0()?;
                let rank = self.shape_of(x)?.len();
                let perm = match n.ints("perm")? {
                    Some(p) => p
                        .iter()
                        .map(|&a| normalize_axis(a, rank))
                        .collect::<Result<Vec<_>, _>>()?,
                    None => (0..rank).rev().collect(),
                };
                self.apply(Op::Permute(perm), &[x], &[out0])?;
            }
            "Gemm" => self.gemm(n, out0)?,
            "MatMul" => self.matmul(in0()?, n.input(1).ok_or("MatMul needs 2 inputs")?, out0)?,
            "Conv" => self.conv(n, out0)?,
            "InstanceNormalization" => {
                let x = in0()?;
                let shape = self.shape_of(x)?;
                let c = shape
                    .get(1)
                    .and_then(Sym::dim)
                    .filter(|_| shape.len() >= 3)
                    .ok_or("InstanceNormalization needs [N, C, ...] with a known C")?;
                let eps = n.float("epsilon", 1e-5)?;
                let scale = n.input(1).ok_or("needs scale")?;
                let bias = n.input(2).ok_or("needs bias")?;
                self.apply(Op::GroupNorm { groups: c, eps }, &[x, scale, bias], &[out0])?;
            }
            "Split" => {
                let x = in0()?;
                let shape = self.shape_of(x)?;
                let axis = normalize_axis(n.int("axis", 0)?, shape.len())?;
                let len = shape
                    .get(axis)
                    .ok_or("Split axis beyond the input's rank")?
                    .dim()
                    .ok_or("Split along a symbolic axis")?;
                let sizes: Vec<usize> = match n.input(1) {
                    Some(s) => self
                        .known_ints(s)?
                        .iter()
                        .map(|&v| usize::try_from(v).map_err(|_| "negative split".to_string()))
                        .collect::<Result<_, _>>()?,
                    None => match n.ints("split")? {
                        Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
                        None => {
                            let parts = n.int("num_outputs", n.outputs.len() as i64)?;
                            if parts != n.outputs.len() as i64 || parts < 1 {
                                return Err(format!(
                                    "Split num_outputs {parts} with {} outputs",
                                    n.outputs.len()
                                ));
                            }
                            let parts = parts as usize;
                            let each = len.div_ceil(parts);
                            (0..parts)
                                .map(|i| each.min(len.saturating_sub(i * each)))
                                .collect()
                        }
                    },
                };
                let outs: Vec<&str> = n.outputs.iter().map(String::as_str).collect();
                if outs.len() != sizes.len() {
                    return Err(format!(
                        "Split into {} parts names {} outputs",
                        sizes.len(),
                        outs.len()
                    ));
                }
                self.apply(Op::Split { axis, sizes }, &[x], &outs)?;
            }
            "Einsum" => self.einsum(n, out0)?,
            "AveragePool" => {
                let x = in0()?;
                if n.string("auto_pad", "NOTSET")? != "NOTSET" || n.int("ceil_mode", 0)? != 0 {
                    return Err(
                        "AveragePool with auto_pad or ceil_mode is not supported yet".into(),
                    );
                }
                let kernel = n.ints("kernel_shape")?.ok_or("needs kernel_shape")?;
                if kernel.len() != 2 {
                    return Err(format!(
                        "AveragePool over {} dims (2 are supported)",
                        kernel.len()
                    ));
                }
                let two = |v: Option<Vec<i64>>, d: i64| -> [usize; 2] {
                    let v = v.unwrap_or(vec![d, d]);
                    [
                        v.first().copied().unwrap_or(d).max(0) as usize,
                        v.get(1).copied().unwrap_or(d).max(0) as usize,
                    ]
                };
                let pads = n.ints("pads")?.unwrap_or(vec![0; 4]);
                if pads.len() != 4 {
                    return Err("AveragePool pads must have 4 values".into());
                }
                let op = Op::AvgPool2d {
                    kernel: two(Some(kernel), 1),
                    stride: two(n.ints("strides")?, 1),
                    pads: [pads[0], pads[1], pads[2], pads[3]].map(|p| p.max(0) as usize),
                    count_include_pad: n.int("count_include_pad", 0)? != 0,
                };
                self.apply(op, &[x], &[out0])?;
            }
            "Resize" => self.resize(n, out0)?,
            "Slice" => {
                if self.slice_static(n, out0).is_err() && !self.slice_strided(n, out0)? {
                    self.slice_to(n, out0)?;
                }
            }
            "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" => {
                let cmp = match n.op_type {
                    "Equal" => CmpOp::Equal,
                    "Less" => CmpOp::Less,
                    "LessOrEqual" => CmpOp::LessOrEqual,
                    "Greater" => CmpOp::Greater,
                    _ => CmpOp::GreaterOrEqual,
                };
                let b = n.input(1).ok_or("needs 2 inputs")?;
                if cmp != CmpOp::Equal || !self.fold_equal(in0()?, b, out0)? {
                    self.apply(Op::Compare(cmp), &[in0()?, b], &[out0])?;
                }
            }
            "Not" => self.apply(Op::Not, &[in0()?], &[out0])?,
            "And" => {
                let b = n.input(1).ok_or("needs 2 inputs")?;
                self.apply(Op::And, &[in0()?, b], &[out0])?;
            }
            "Where" => {
                let (a, b) = (
                    n.input(1).ok_or("Where needs 3 inputs")?,
                    n.input(2).ok_or("Where needs 3 inputs")?,
                );
                self.apply(Op::Where, &[in0()?, a, b], &[out0])?;
            }
            "Expand" => self.expand(in0()?, n.input(1).ok_or("Expand needs a shape")?, out0)?,
            "ConstantOfShape" => self.constant_of_shape(n, out0)?,
            "Range" => self.range(n, out0)?,
            "NonZero" => {
                let x = in0()?;
                let rank = self.shape_of(x)?.len() as i64;
                let xi = self.any_operand(x)?;
                self.emit_shape_op(
                    GraphOp::NonZero,
                    vec![xi],
                    out0,
                    vec![Some(Sym::known(rank)), None],
                    DType::I64,
                )?;
            }
            "GatherElements" => {
                let x = in0()?;
                let axis = normalize_axis(n.int("axis", 0)?, self.shape_of(x)?.len())?;
                let idx = n.input(1).ok_or("GatherElements needs indices")?;
                self.apply(Op::GatherElements { axis }, &[x, idx], &[out0])?;
            }
            "GatherND" => {
                if n.int("batch_dims", 0)? != 0 {
                    return Err("GatherND with batch_dims is not supported yet".into());
                }
                let idx = n.input(1).ok_or("GatherND needs indices")?;
                self.apply(Op::GatherNd, &[in0()?, idx], &[out0])?;
            }
            "ScatterND" => {
                if n.string("reduction", "none")? != "none" {
                    return Err("ScatterND with a reduction is not supported yet".into());
                }
                let idx = n.input(1).ok_or("ScatterND needs indices")?;
                let upd = n.input(2).ok_or("ScatterND needs updates")?;
                self.apply(Op::ScatterNd, &[in0()?, idx, upd], &[out0])?;
            }
            "CumSum" => {
                let x = in0()?;
                let a = self.known_ints(n.input(1).ok_or("CumSum needs an axis")?)?;
                let axis = normalize_axis(
                    *a.first().ok_or("CumSum axis is empty")?,
                    self.shape_of(x)?.len(),
                )?;
                let op = Op::CumSum {
                    axis,
                    exclusive: n.int("exclusive", 0)? != 0,
                    reverse: n.int("reverse", 0)? != 0,
                };
                self.apply(op, &[x], &[out0])?;
            }
            "ReduceSum" | "ReduceMax" | "ReduceMean" => {
                let x = in0()?;
                let rank = self.shape_of(x)?.len();
                let listed = match n.input(1) {
                    Some(a) => Some(self.known_ints(a)?),
                    None => n.ints("axes")?,
                };
                let mut axes = listed
                    .unwrap_or_default()
                    .iter()
                    .map(|&a| normalize_axis(a, rank))
                    .collect::<Result<Vec<_>, _>>()?;
                axes.sort_unstable();
                axes.dedup();
                if axes.is_empty() && n.int("noop_with_empty_axes", 0)? != 0 {
                    let v = self.val(x)?.clone();
                    self.set(out0, v);
                } else {
                    let kind = match n.op_type {
                        "ReduceSum" => ReduceKind::Sum,
                        "ReduceMax" => ReduceKind::Max,
                        _ => ReduceKind::Mean,
                    };
                    let keepdims = n.int("keepdims", 1)? != 0;
                    self.apply(
                        Op::Reduce {
                            kind,
                            axes,
                            keepdims,
                        },
                        &[x],
                        &[out0],
                    )?;
                }
            }
            "Pad" => self.pad(n, out0)?,
            "ConvTranspose" => self.conv_transpose(n, out0)?,
            "LSTM" => self.lstm(n)?,
            "RandomNormalLike" => {
                let op = Op::RandomNormalLike {
                    mean: n.float("mean", 0.0)?,
                    scale: n.float("scale", 1.0)?,
                    seed: n.float("seed", 0.0)?.to_bits() as u64,
                };
                self.apply(op, &[in0()?], &[out0])?;
            }
            other => return Err(format!("op type `{other}` is not supported yet")),
        }
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            self.track_ints(o)?;
        }
        Ok(())
    }

    fn binary(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let a = n.input(0).ok_or("needs 2 inputs")?;
        let b = n.input(1).ok_or("needs 2 inputs")?;
        let ints = |v: Option<&Val>| matches!(v, Some(Val::Ints { .. }));
        if ints(self.vals.get(a)) && ints(self.vals.get(b)) {
            let (sa, da) = self.ints_of(a)?;
            let (sb, db) = self.ints_of(b)?;
            let shape = broadcast(&syms(&sa), &syms(&sb))?;
            let shape = known_dims(&shape, "integer arithmetic")?;
            let count: usize = shape.iter().product();
            let pick = |d: &[Sym], i: usize| d[if d.len() == 1 { 0 } else { i }].clone();
            let scalar_like = |d: &[Sym]| d.len() == count || d.len() == 1;
            let kind = match n.op_type {
                "Add" => IntOp::Add,
                "Sub" => IntOp::Sub,
                "Mul" => IntOp::Mul,
                _ => IntOp::Div,
            };
            if !scalar_like(&da) || !scalar_like(&db) {
                return self.apply(Op::IntBinary(kind), &[a, b], &[out]);
            }
            let folded = (0..count)
                .map(|i| {
                    let (x, y) = (pick(&da, i), pick(&db, i));
                    match n.op_type {
                        "Add" => x.add(&y, 1),
                        "Sub" => x.add(&y, -1),
                        "Mul" => x.mul(&y),
                        _ => x.div(&y),
                    }
                    .filter(|_| !self.is_run_time_value(&x) && !self.is_run_time_value(&y))
                })
                .collect::<Option<Vec<_>>>();
            return match folded {
                Some(data) => {
                    self.set(out, Val::Ints { shape, data });
                    Ok(())
                }
                None => self.apply(Op::IntBinary(kind), &[a, b], &[out]),
            };
        }
        if self.dtype_of(a)? == DType::I64 || self.dtype_of(b)? == DType::I64 {
            let kind = match n.op_type {
                "Add" => IntOp::Add,
                "Sub" => IntOp::Sub,
                "Mul" => IntOp::Mul,
                _ => IntOp::Div,
            };
            return self.apply(Op::IntBinary(kind), &[a, b], &[out]);
        }
        let op = match n.op_type {
            "Add" => Op::Add,
            "Sub" => Op::Sub,
            "Mul" => Op::Mul,
            _ => Op::Div,
        };
        // A product by a constant scalar keeps the other shape: one Scale, no weight.
        if op == Op::Mul {
            for (x, c) in [(a, b), (b, a)] {
                let dynamic = matches!(self.vals.get(x), Some(Val::Dyn { .. }));
                if let (true, Some((s, d))) = (dynamic, self.floats_of(c)) {
                    if d.len() == 1 && s.len() <= self.shape_of(x)?.len() {
                        return self.apply(Op::Scale(d[0]), &[x], &[out]);
                    }
                }
            }
        }
        self.apply(op, &[a, b], &[out])
    }

    /// A constant `[K, N]` matrix stored transposed, as `Matmul` reads `[N, K]`.
    fn transposed_const(&mut self, name: &str) -> Result<String, Why> {
        let (shape, data) = self
            .floats_of(name)
            .ok_or_else(|| format!("`{name}` must be a constant matrix"))?;
        if shape.len() != 2 {
            return Err(format!("`{name}` must be a matrix, has shape {shape:?}"));
        }
        let (k, n) = (shape[0], shape[1]);
        let mut t = vec![0.0f32; k * n];
        for i in 0..k {
            for j in 0..n {
                t[j * k + i] = data[i * n + j];
            }
        }
        let tn = format!("{name}::T");
        self.set(
            &tn,
            Val::Floats {
                shape: vec![n, k],
                data: Arc::new(t),
            },
        );
        Ok(tn)
    }

    fn gemm(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let a = n.input(0).ok_or("Gemm needs A")?;
        let b = n.input(1).ok_or("Gemm needs B")?;
        if n.int("transA", 0)? != 0 {
            return Err("Gemm with transA is not supported yet".into());
        }
        let (alpha, beta) = (n.float("alpha", 1.0)?, n.float("beta", 1.0)?);
        let w = if n.int("transB", 0)? != 0 {
            if self.floats_of(b).is_none() {
                return Err("Gemm with a run-time B is not supported yet".into());
            }
            b.to_string()
        } else {
            self.transposed_const(b)?
        };
        let prod = if n.input(2).is_some() || alpha != 1.0 {
            self.fresh_name(out)
        } else {
            out.to_string()
        };
        self.apply(Op::Matmul, &[a, &w], &[&prod])?;
        let mut cur = prod;
        if alpha != 1.0 {
            let next = if n.input(2).is_some() {
                self.fresh_name(out)
            } else {
                out.to_string()
            };
            self.apply(Op::Scale(alpha), &[&cur], &[&next])?;
            cur = next;
        }
        if let Some(c) = n.input(2) {
            let c = if beta != 1.0 {
                let scaled = self.fresh_name(out);
                self.apply(Op::Scale(beta), &[c], &[&scaled])?;
                scaled
            } else {
                c.to_string()
            };
            self.apply(Op::Add, &[&cur, &c], &[out])?;
        }
        Ok(())
    }

    fn matmul(&mut self, a: &str, b: &str, out: &str) -> Result<(), Why> {
        let (sa, sb) = (self.shape_of(a)?, self.shape_of(b)?);
        if sa.len() < 2 || sb.len() < 2 {
            return Err("MatMul with a vector operand is not supported yet".into());
        }
        if self.floats_of(b).is_some() && sb.len() == 2 {
            let w = self.transposed_const(b)?;
            return self.apply(Op::Matmul, &[a, &w], &[out]);
        }
        self.apply(Op::BatchMatmul, &[a, b], &[out])
    }

    /// A 1-D convolution `op` (its 2-D form) of `x [N, C, L]` by the constant kernel
    /// `w [A, B, k]`: run over a height of 1 (`x` and `w` reshaped, the result back).
    pub(super) fn as_2d(
        &mut self,
        op: Op,
        x: &str,
        w: &str,
        bias: Option<&str>,
        out: &str,
    ) -> Result<(), Why> {
        let xs = self.shape_of(x)?;
        let ws = self.shape_of(w)?;
        if xs.len() != 3 || ws.len() != 3 {
            return Err(format!(
                "{} 1-D input and kernel must have rank 3, got {} and {}",
                op.name(),
                xs.len(),
                ws.len()
            ));
        }
        let (x4, w4, y4) = (
            self.fresh_name(out),
            format!("{w}::2d"),
            self.fresh_name(out),
        );
        let one = Sym::known(1);
        self.reshape(
            x,
            vec![xs[0].clone(), xs[1].clone(), one.clone(), xs[2].clone()],
            &x4,
        )?;
        self.reshape(
            w,
            vec![ws[0].clone(), ws[1].clone(), one, ws[2].clone()],
            &w4,
        )?;
        let mut ins4: Vec<&str> = vec![&x4, &w4];
        ins4.extend(bias);
        self.apply(op, &ins4, &[&y4])?;
        let ys = self.shape_of(&y4)?;
        self.reshape(&y4, vec![ys[0].clone(), ys[1].clone(), ys[3].clone()], out)
    }

    pub(super) fn conv(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let x = n.input(0).ok_or("Conv needs X")?;
        let w = n.input(1).ok_or("Conv needs W")?;
        let (ws, _) = self
            .floats_of(w)
            .ok_or("Conv with a run-time kernel is not supported yet")?;
        if n.string("auto_pad", "NOTSET")? != "NOTSET" {
            return Err(
                "Conv with auto_pad is not supported yet (export with explicit pads)".into(),
            );
        }
        let spatial = ws.len().saturating_sub(2);
        let get = |key: &str, d: i64| -> Result<Vec<usize>, Why> {
            let v = n.ints(key)?.unwrap_or(vec![d; spatial]);
            v.iter()
                .map(|&x| usize::try_from(x).map_err(|_| format!("negative {key}")))
                .collect()
        };
        let (strides, dil) = (get("strides", 1)?, get("dilations", 1)?);
        let pads = n.ints("pads")?.unwrap_or(vec![0; 2 * spatial]);
        let pads: Vec<usize> = pads.iter().map(|&p| p.max(0) as usize).collect();
        let groups = n.int("group", 1)?.max(1) as usize;
        let bias = n.input(2);
        let mut ins = vec![x, w];
        ins.extend(bias);
        match spatial {
            2 if strides.len() == 2 && dil.len() == 2 && pads.len() == 4 => {
                let op = Op::Conv2d {
                    stride: [strides[0], strides[1]],
                    pads: [pads[0], pads[1], pads[2], pads[3]],
                    dilation: [dil[0], dil[1]],
                    groups,
                };
                self.apply(op, &ins, &[out])
            }
            1 if strides.len() == 1 && dil.len() == 1 && pads.len() == 2 => {
                let op = Op::Conv2d {
                    stride: [1, strides[0]],
                    pads: [0, pads[0], 0, pads[1]],
                    dilation: [1, dil[0]],
                    groups,
                };
                self.as_2d(op, x, w, bias, out)
            }
            s => Err(format!("Conv over {s} spatial dims is not supported yet")),
        }
    }

    fn resize(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let x = n.input(0).ok_or("Resize needs X")?;
        let mode = n.string("mode", "nearest")?;
        let coords = n.string("coordinate_transformation_mode", "half_pixel")?;
        let nearest = n.string("nearest_mode", "round_prefer_floor")?;
        let exact = match coords.as_str() {
            "asymmetric" => nearest == "floor",
            // With an integer factor s, output i = s j + r maps to j + (r + 1/2)/s - 1/2,
            // strictly inside (j - 1/2, j + 1/2): both rounding modes give j.
            "half_pixel" | "pytorch_half_pixel" => {
                nearest == "round_prefer_floor" || nearest == "round_prefer_ceil"
            }
            _ => false,
        };
        if mode != "nearest" || !exact {
            return Err(format!(
                "Resize mode `{mode}` with `{coords}` / `{nearest}` is not supported yet (nearest with integer factors is)"
            ));
        }
        let shape = self.shape_of(x)?;
        let scales: Vec<f32> = match (n.input(2), n.input(3)) {
            (Some(s), _) if self.floats_of(s).is_some_and(|(_, d)| !d.is_empty()) => self
                .floats_of(s)
                .map(|(_, d)| d.to_vec())
                .unwrap_or_default(),
            (_, Some(sz)) => {
                let sizes = self.known_ints(sz)?;
                let dims = known_dims(&shape[2.min(shape.len())..], "Resize by sizes")?;
                let mut v = vec![1.0; shape.len() - dims.len()];
                v.extend(
                    sizes[sizes.len() - dims.len()..]
                        .iter()
                        .zip(&dims)
                        .map(|(&s, &d)| s as f32 / d as f32),
                );
                v
            }
            _ => return Err("Resize needs constant scales or sizes".into()),
        };
        if scales.len() != shape.len() {
            return Err(format!(
                "Resize has {} scales for rank {}",
                scales.len(),
                shape.len()
            ));
        }
        let ints = scales
            .iter()
            .map(|&s| (s >= 1.0 && s.fract() == 0.0).then_some(s as usize))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("Resize scales {scales:?} are not integers >= 1"))?;
        self.apply(Op::ResizeNearest { scales: ints }, &[x], &[out])
    }

    /// Two-operand einsum without ellipsis or repeated letters: each letter is a
    /// batch axis (both operands and the output), a contracted axis (both
    /// operands only) or a free axis of one operand. Lowered to `Permute`,
    /// `Reshape` and `BatchMatmul`.
    fn einsum(&mut self, n: &OnnxNode, out: &str) -> Result<(), Why> {
        let eq = n.string("equation", "")?.replace(' ', "");
        let (lhs, rhs) = eq
            .split_once("->")
            .ok_or("Einsum needs an explicit `->` output")?;
        let ops: Vec<&str> = lhs.split(',').collect();
        if ops.len() != 2 || eq.contains('.') {
            return Err(format!(
                "Einsum `{eq}`: only two operands without `...` are supported"
            ));
        }
        let (ta, tb) = (ops[0].as_bytes(), ops[1].as_bytes());
        let to = rhs.as_bytes();
        let a = n.input(0).ok_or("Einsum needs 2 inputs")?;
        let b = n.input(1).ok_or("Einsum needs 2 inputs")?;
        let (sa, sb) = (self.shape_of(a)?, self.shape_of(b)?);
        if sa.len() != ta.len() || sb.len() != tb.len() {
            return Err(format!(
                "Einsum `{eq}` does not match input ranks {} and {}",
                sa.len(),
                sb.len()
            ));
        }
        let has = |t: &[u8], c: u8| t.contains(&c);
        let mut batch = Vec::new();
        let mut contract = Vec::new();
        let mut free_a = Vec::new();
        let mut free_b = Vec::new();
        for &c in ta {
            match (has(tb, c), has(to, c)) {
                (true, true) => batch.push(c),
                (true, false) => contract.push(c),
                (false, true) => free_a.push(c),
                (false, false) => {
                    return Err(format!(
                        "Einsum `{eq}`: summing `{}` out of one operand is not supported yet",
                        c as char
                    ))
                }
            }
        }
        for &c in tb {
            if !has(ta, c) {
                if !has(to, c) {
                    return Err(format!(
                        "Einsum `{eq}`: summing `{}` out of one operand is not supported yet",
                        c as char
                    ));
                }
                free_b.push(c);
            }
        }
        let dim =
            |t: &[u8], s: &[Sym], c: u8| s[t.iter().position(|&x| x == c).unwrap_or(0)].clone();
        let group = |t: &[u8], s: &[Sym], cs: &[u8]| {
            Sym::product(&cs.iter().map(|&c| dim(t, s, c)).collect::<Vec<_>>())
        };
        let perm_of = |t: &[u8], order: &[u8]| -> Vec<usize> {
            order
                .iter()
                .filter_map(|c| t.iter().position(|x| x == c))
                .collect()
        };
        let bad = || format!("Einsum `{eq}`: a group of axes with two symbolic dimensions");
        // A as [batch.., M, K], B as [batch.., K, N].
        let order_a: Vec<u8> = batch
            .iter()
            .chain(&free_a)
            .chain(&contract)
            .copied()
            .collect();
        let order_b: Vec<u8> = batch
            .iter()
            .chain(&contract)
            .chain(&free_b)
            .copied()
            .collect();
        let mut prepared = Vec::new();
        for (name, t, s, order, second) in
            [(a, ta, &sa, &order_a, false), (b, tb, &sb, &order_b, true)]
        {
            let perm = perm_of(t, order);
            let mut cur = name.to_string();
            if perm.iter().enumerate().any(|(i, &p)| i != p) {
                let next = self.fresh_name(out);
                self.apply(Op::Permute(perm), &[&cur], &[&next])?;
                cur = next;
            }
            let (rows, cols) = if second {
                (&contract, &free_b)
            } else {
                (&free_a, &contract)
            };
            let mut target: Vec<Sym> = batch.iter().map(|&c| dim(t, s, c)).collect();
            target.push(group(t, s, rows).ok_or_else(bad)?);
            target.push(group(t, s, cols).ok_or_else(bad)?);
            if target != self.shape_of(&cur)? {
                let next = self.fresh_name(out);
                self.reshape(&cur, target, &next)?;
                cur = next;
            }
            prepared.push(cur);
        }
        let prod = self.fresh_name(out);
        self.apply(Op::BatchMatmul, &[&prepared[0], &prepared[1]], &[&prod])?;
        // [batch.., free_a.., free_b..] in the output's order.
        let natural: Vec<u8> = batch
            .iter()
            .chain(&free_a)
            .chain(&free_b)
            .copied()
            .collect();
        let mut full: Vec<Sym> = batch.iter().map(|&c| dim(ta, &sa, c)).collect();
        full.extend(free_a.iter().map(|&c| dim(ta, &sa, c)));
        full.extend(free_b.iter().map(|&c| dim(tb, &sb, c)));
        let perm = perm_of(&natural, to);
        let needs_perm = perm.iter().enumerate().any(|(i, &p)| i != p);
        let shaped = if full != self.shape_of(&prod)? {
            let next = if needs_perm {
                self.fresh_name(out)
            } else {
                out.to_string()
            };
            self.reshape(&prod, full, &next)?;
            next
        } else if !needs_perm {
            let v = self.val(&prod)?.clone();
            self.set(out, v);
            return Ok(());
        } else {
            prod
        };
        if needs_perm {
            self.apply(Op::Permute(perm), &[&shaped], &[out])?;
        }
        Ok(())
    }
}
