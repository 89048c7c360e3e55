//! Run-time integer values of the ONNX importer: what import-time folding
//! ([`Sym`]) cannot settle becomes IR values computed per call. Symbolic values
//! are read back at run time from their [`VarSrc`] (a dimension of a value, or
//! an element of a run-time integer vector); small run-time integer vectors are
//! kept as [`Val::Ints`] of fresh symbolic values so shape arithmetic on them
//! still folds where it can.

use super::sym::Sym;
use super::translate::{Translator, Val, VarSrc, WeightData, WeightOut, Why};
use crate::backend::cpu::reference;
use crate::backend::{IntOp, Op, Tensor};
use crate::dtype::DType;
use crate::ir::GraphOp;

/// Run-time integer vectors up to this length are tracked element by element.
const TRACKED: usize = 64;

impl Translator {
    /// The IR name of an integer constant of `dtype` (written once per value).
    pub(super) fn int_const(&mut self, dtype: DType, shape: &[usize], values: Vec<i64>) -> String {
        let key = (dtype, shape.to_vec(), values);
        if let Some(w) = self.int_consts.get(&key) {
            return w.clone();
        }
        let name = format!("onnx::const{}", self.int_consts.len());
        self.weights.push(WeightOut {
            name: name.clone(),
            shape: key.1.clone(),
            data: WeightData::Ints(dtype, key.2.clone()),
        });
        self.int_consts.insert(key, name.clone());
        name
    }

    /// A new IR value name derived from `base`.
    fn temp(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{base}::rt{}", self.fresh)
    }

    /// Emits backend `op` over IR values `inputs` into a new IR value of `dims` and `dtype`.
    fn ir_node(
        &mut self,
        op: Op,
        inputs: Vec<String>,
        dims: Vec<Option<Sym>>,
        dtype: DType,
    ) -> String {
        let out = self.temp(op.name());
        self.emit(&GraphOp::Fixed(op), inputs, &[&out], vec![(dims, dtype)]);
        out
    }

    /// The IR value (i64 `[rank]`) of the shape of IR value `value`.
    fn shape_node(&mut self, value: &str) -> Result<String, Why> {
        if let Some(s) = self.shape_nodes.get(value) {
            return Ok(s.clone());
        }
        let rank = self.shape_of(value)?.len();
        let s = self.ir_node(
            Op::Shape,
            vec![value.to_string()],
            vec![Some(Sym::known(rank as i64))],
            DType::I64,
        );
        self.shape_nodes.insert(value.to_string(), s.clone());
        Ok(s)
    }

    /// An i64 `[1]` IR value holding symbolic value `d`.
    fn sym_node(&mut self, d: &Sym) -> Result<String, Why> {
        let Some(var) = &d.var else {
            return Ok(self.int_const(DType::I64, &[1], vec![d.coef]));
        };
        let src = self
            .sources
            .get(var)
            .cloned()
            .ok_or_else(|| format!("symbolic value `{var}` has no run-time source"))?;
        let (vector, i) = match src {
            VarSrc::Dim(value, axis) => (self.shape_node(&value)?, axis),
            VarSrc::Elem(value, i) => (value, i),
        };
        let at = self.int_const(DType::I64, &[1], vec![i as i64]);
        let one = vec![Some(Sym::known(1))];
        let base = self.ir_node(
            Op::Gather { axis: 0 },
            vec![vector, at],
            one.clone(),
            DType::I64,
        );
        if d.coef == 1 {
            return Ok(base);
        }
        let c = self.int_const(DType::I64, &[1], vec![d.coef]);
        Ok(self.ir_node(Op::IntBinary(IntOp::Mul), vec![base, c], one, DType::I64))
    }

    /// The IR value (i64 of `shape`) holding the values `data`: a constant when all
    /// are known, else read back from their sources.
    pub(super) fn materialize(&mut self, data: &[Sym], shape: &[usize]) -> Result<String, Why> {
        if let Some(v) = data.iter().map(Sym::value).collect::<Option<Vec<i64>>>() {
            return Ok(self.int_const(DType::I64, shape, v));
        }
        let n = data.len();
        let mut parts = Vec::with_capacity(n);
        for d in data {
            parts.push(self.sym_node(d)?);
        }
        let cat = self.ir_node(
            Op::Concat { axis: 0 },
            parts,
            vec![Some(Sym::known(n as i64))],
            DType::I64,
        );
        if shape == [n] {
            return Ok(cat);
        }
        let dims = shape.iter().map(|&d| d as i64).collect();
        let out = self.temp("ints");
        let outputs = vec![(
            shape.iter().map(|&d| Some(Sym::known(d as i64))).collect(),
            DType::I64,
        )];
        self.emit(&GraphOp::Reshape(dims), vec![cat], &[&out], outputs);
        Ok(out)
    }

    /// The IR value of ONNX value `name` as a run-time tensor of `want` (i64 or bool),
    /// cast when it has another encoding.
    pub(super) fn int_operand(&mut self, name: &str, want: DType) -> Result<String, Why> {
        let (ir, have) = match self.val(name)?.clone() {
            Val::Dyn { name, dtype, .. } => (name, dtype),
            Val::Ints { shape, data } => {
                match data.iter().map(Sym::value).collect::<Option<Vec<i64>>>() {
                    Some(v) => return Ok(self.int_const(want, &shape, v)),
                    None => (self.materialize(&data, &shape)?, DType::I64),
                }
            }
            Val::Floats { shape, data } => {
                let v = data.iter().map(|&f| f as i64).collect();
                return Ok(self.int_const(want, &shape, v));
            }
        };
        if have == want {
            return Ok(ir);
        }
        let dims = self.shape_of(name)?.into_iter().map(Some).collect();
        Ok(self.ir_node(Op::Cast(want), vec![ir], dims, want))
    }

    /// After a run-time node defined ONNX value `out`: an i64 vector of a known,
    /// small length is tracked element by element (fresh symbolic values read from it).
    pub(super) fn track_ints(&mut self, out: &str) -> Result<(), Why> {
        let Val::Dyn {
            name,
            shape,
            dtype: DType::I64,
        } = self.val(out)?.clone()
        else {
            return Ok(());
        };
        let Some(dims) = shape.iter().map(Sym::dim).collect::<Option<Vec<usize>>>() else {
            return Ok(());
        };
        let n: usize = dims.iter().product();
        if dims.len() > 1 || n > TRACKED {
            return Ok(());
        }
        let vector = if dims.is_empty() {
            let v = self.temp(out);
            self.emit(
                &GraphOp::Reshape(vec![1]),
                vec![name],
                &[&v],
                vec![(vec![Some(Sym::known(1))], DType::I64)],
            );
            v
        } else {
            name
        };
        let data = (0..n)
            .map(|i| self.fresh_var(VarSrc::Elem(vector.clone(), i)))
            .collect();
        self.set(out, Val::Ints { shape: dims, data });
        Ok(())
    }

    /// Emits run-time shape op `gop` over IR `inputs`, defining `out` with `dims`
    /// (`None`: known per call) and `dtype`; small i64 results are tracked.
    pub(super) fn emit_shape_op(
        &mut self,
        gop: GraphOp,
        inputs: Vec<String>,
        out: &str,
        dims: Vec<Option<Sym>>,
        dtype: DType,
    ) -> Result<(), Why> {
        self.emit(&gop, inputs, &[out], vec![(dims, dtype)]);
        self.track_ints(out)
    }

    /// The IR operand of ONNX value `name` in its own encoding (integers as i64).
    pub(super) fn any_operand(&mut self, name: &str) -> Result<String, Why> {
        match self.dtype_of(name)? {
            DType::F32 => self.operand(name),
            d => self.int_operand(name, d),
        }
    }
}

impl Translator {
    /// `Equal` of two integer vectors (same length, or one a single value) folded
    /// where every pair is decided at import: equal symbolic values are equal, and a
    /// dimension (never negative) differs from a negative number. `false` otherwise.
    pub(super) fn fold_equal(&mut self, a: &str, b: &str, out: &str) -> Result<bool, Why> {
        let (Ok((sa, da)), Ok((sb, db))) = (self.ints_of(a), self.ints_of(b)) else {
            return Ok(false);
        };
        let (n, shape) = if da.len() >= db.len() {
            (da.len(), sa)
        } else {
            (db.len(), sb)
        };
        if (da.len() != n && da.len() != 1) || (db.len() != n && db.len() != 1) {
            return Ok(false);
        }
        let dim = |t: &Translator, d: &Sym| {
            d.coef > 0
                && d.var
                    .as_ref()
                    .is_some_and(|v| matches!(t.sources.get(v), Some(VarSrc::Dim(..))))
        };
        let decide = |x: &Sym, y: &Sym| -> Option<bool> {
            match (x.value(), y.value()) {
                (Some(p), Some(q)) => Some(p == q),
                _ if x == y => Some(true),
                (None, Some(q)) if q < 0 && dim(self, x) => Some(false),
                (Some(p), None) if p < 0 && dim(self, y) => Some(false),
                _ => None,
            }
        };
        let pick = |d: &[Sym], i: usize| d[if d.len() == 1 { 0 } else { i }].clone();
        let Some(data) = (0..n)
            .map(|i| decide(&pick(&da, i), &pick(&db, i)).map(|e| Sym::known(e as i64)))
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(false);
        };
        self.set(out, Val::Ints { shape, data });
        Ok(true)
    }

    /// Folds a data-movement op whose moved inputs are integer vectors known
    /// symbolically ([`Val::Ints`], some values not numbers) and whose other inputs
    /// are known: the op runs on the positions of the values, which then pick the
    /// symbolic values. `false` when it does not apply.
    pub(super) fn fold_moves(&mut self, op: &Op, ins: &[&str], outs: &[&str]) -> Result<bool, Why> {
        let moved: Vec<usize> = match op {
            Op::Permute(_)
            | Op::Slice { .. }
            | Op::StridedSlice { .. }
            | Op::Reshape(_)
            | Op::Expand(_)
            | Op::Split { .. }
            | Op::Pad { .. }
            | Op::Gather { .. }
            | Op::GatherElements { .. }
            | Op::GatherNd => vec![0],
            Op::Concat { .. } => (0..ins.len()).collect(),
            Op::Where => vec![1, 2],
            Op::ScatterNd => vec![0, 2],
            _ => return Ok(false),
        };
        let mut table: Vec<Sym> = Vec::new();
        let mut tensors = Vec::with_capacity(ins.len());
        for (i, name) in ins.iter().enumerate() {
            if moved.contains(&i) {
                let Val::Ints { shape, data } = self.val(name)?.clone() else {
                    return Ok(false);
                };
                let base = table.len() as i64;
                let at = (0..data.len() as i64).map(|k| base + k).collect();
                tensors.push(Tensor::from_i64(&shape, at).map_err(|e| e.to_string())?);
                table.extend(data);
            } else {
                match self.const_tensor(name) {
                    Some(t) => tensors.push(t),
                    None => return Ok(false),
                }
            }
        }
        if table.iter().all(|d| d.value().is_some()) {
            return Ok(false);
        }
        // Pad fills with -1, which picks the fill value.
        let (op, fill) = match op {
            Op::Pad { pads, value } => (
                Op::Pad {
                    pads: pads.clone(),
                    value: -1.0,
                },
                Sym::known(*value as i64),
            ),
            other => (other.clone(), Sym::known(0)),
        };
        let results = reference::execute(&op, &tensors).map_err(|e| e.to_string())?;
        for (name, t) in outs.iter().zip(results) {
            let at = t.as_i64().ok_or("moved positions are not integers")?;
            let data = at
                .iter()
                .map(|&k| usize::try_from(k).map_or(fill.clone(), |k| table[k].clone()))
                .collect();
            self.set(
                name,
                Val::Ints {
                    shape: t.shape().to_vec(),
                    data,
                },
            );
        }
        Ok(true)
    }
}

/// The ONNX data type code `to` as a run-time encoding.
pub(super) fn onnx_dtype(to: i64) -> Result<DType, Why> {
    match to {
        1 | 10 | 11 => Ok(DType::F32),
        6 | 7 => Ok(DType::I64),
        9 => Ok(DType::Bool),
        t => Err(format!(
            "ONNX data type {t} is not read (f32, f16, f64, i32, i64, bool are)"
        )),
    }
}
