//! Graph-level ops: the stable op tag table, attribute parsing, and the
//! per-call binding of a graph op to a backend [`Op`].
//!
//! Most graph ops are a backend [`Op`] with static attributes. Four take
//! values known only per call: `Reshape` (`-1` dims), `Slice` (negative
//! indices count from the end), `Rope` (its second input is the `pos` value)
//! and `Sdpa` / `KvAppend` (positions come from the conversation's KV state).
//! The run-time shape ops of the ONNX path ([`GraphOp::is_run_time_shape`]:
//! `ReshapeTo`, `ExpandTo`, `ConstantOfShape`, `RangeOf`, `NonZero`, `SliceTo`,
//! `PadTo`, `Unsqueeze`, `Squeeze`) read their integer inputs (or the input's
//! shape) per call and are bound by the executor (`graph::bind`).

use crate::backend::{CmpOp, IntOp, LstmSpec, Mask, Op, ReduceKind, RnnDirection, RopeStyle};
use crate::dtype::DType;

/// Every op the graph runtime knows, with its stable u16 tag (used in trace
/// hashes and any binary form). Append-only: never renumber or reuse a tag.
pub const OP_TAGS: &[(&str, u16)] = &[
    ("Matmul", 1),
    ("Add", 2),
    ("Sub", 3),
    ("Mul", 4),
    ("Div", 5),
    ("Scale", 6),
    ("Clamp", 7),
    ("NanToNum", 8),
    ("Reshape", 9),
    ("Permute", 10),
    ("Concat", 11),
    ("Slice", 12),
    ("Split", 13),
    ("RmsNorm", 14),
    ("LayerNorm", 15),
    ("GroupNorm", 16),
    ("Rope", 17),
    ("Silu", 18),
    ("Gelu", 19),
    ("GeluTanh", 20),
    ("Relu", 21),
    ("LeakyRelu", 22),
    ("Sigmoid", 23),
    ("Tanh", 24),
    ("Softcap", 25),
    ("SwiGlu", 26),
    ("GeGlu", 27),
    ("Softmax", 28),
    ("Sdpa", 29),
    ("KvAppend", 30),
    ("Embed", 31),
    ("Conv1d", 32),
    ("Argmax", 33),
    ("FusedNormMatmul", 34),
    ("FusedSkipNorm", 35),
    ("FusedSwiGlu", 36),
    ("FusedQkv", 37),
    ("Sqrt", 38),
    ("Log", 39),
    ("Exp", 40),
    ("Cos", 41),
    ("Sin", 42),
    ("Reciprocal", 43),
    ("Neg", 44),
    ("Erf", 45),
    ("PowScalar", 46),
    ("BatchMatmul", 47),
    ("Conv2d", 48),
    ("AvgPool2d", 49),
    ("ResizeNearest", 50),
    ("GroupNormAffine", 51),
    ("Shape", 52),
    ("Cast", 53),
    ("IntBinary", 54),
    ("Compare", 55),
    ("Not", 56),
    ("And", 57),
    ("Where", 58),
    ("Expand", 59),
    ("Fill", 60),
    ("Range", 61),
    ("NonZero", 62),
    ("Gather", 63),
    ("GatherElements", 64),
    ("GatherNd", 65),
    ("ScatterNd", 66),
    ("CumSum", 67),
    ("Reduce", 68),
    ("Pad", 69),
    ("StridedSlice", 70),
    ("ConvTranspose2d", 71),
    ("Softplus", 72),
    ("Ceil", 73),
    ("RandomNormalLike", 74),
    ("ReshapeTo", 75),
    ("ExpandTo", 76),
    ("ConstantOfShape", 77),
    ("RangeOf", 78),
    ("SliceTo", 79),
    ("PadTo", 80),
    ("Unsqueeze", 81),
    ("Squeeze", 82),
    ("Lstm", 83),
];

/// The stable tag of op `name`, if the runtime knows it.
pub fn op_tag(name: &str) -> Option<u16> {
    OP_TAGS.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// Mask of a graph `Sdpa` node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskKind {
    /// Every query sees every key.
    None,
    /// Causal.
    Causal,
    /// Causal, and at most `window` most recent keys.
    Sliding(usize),
    /// Every query sees the keys a fourth input, `mask` (i32 `[T]`, nonzero =
    /// a real token), keeps: the padding mask of an encoder.
    Padding,
}

/// Rotation frequencies of a `Rope` node.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeFreqs {
    /// `inv_freq[j] = 1 / base^(2j / rot_dim)` (attribute `base`).
    Base(f64),
    /// Explicit `inv_freq` (attribute `inv_freq`): scaled variants, written
    /// by the graph writer from the same computation the curated family uses.
    List(Vec<f64>),
}

impl RopeFreqs {
    /// `inv_freq` for `rot_dim` rotated dims.
    pub fn inv_freq(&self, rot_dim: usize) -> Vec<f64> {
        match self {
            RopeFreqs::Base(b) => crate::backend::rope_inv_freq(rot_dim, *b),
            RopeFreqs::List(l) => l.clone(),
        }
    }
}

/// A graph node's op with its parsed attributes.
#[derive(Debug, Clone, PartialEq)]
pub enum GraphOp {
    /// An op whose attributes are all static.
    Fixed(Op),
    /// `[x] -> [x reshaped]`; at most one `-1`, resolved from the element count.
    Reshape(Vec<i64>),
    /// `[x] -> [x[start..end] along axis]`; negative indices count from the end.
    Slice {
        /// Axis to cut.
        axis: usize,
        /// First index kept (negative: from the end).
        start: i64,
        /// One past the last index kept (negative: from the end; none: the end).
        end: Option<i64>,
    },
    /// `[x [S, H, d], pos (i32 scalar)] -> [rotated x]`, row s at `pos + s`.
    Rope {
        /// Pairing of rotated dims.
        style: RopeStyle,
        /// Rotated dims; none = all of d.
        rot_dim: Option<usize>,
        /// The rotation frequencies.
        freqs: RopeFreqs,
    },
    /// `[Q [Sq, H, d], K [T, Hkv, d], V [T, Hkv, dv]] -> [O [Sq, H, dv]]`;
    /// queries sit at the last Sq of the T key positions. With the padding
    /// mask a fourth input `mask [T]` (i32) says which keys are real.
    Sdpa {
        /// Score scale; none = `1/sqrt(d)`.
        scale: Option<f32>,
        /// Which keys a query sees.
        mask: MaskKind,
    },
    /// `[state, k [s, Hkv, d], v [s, Hkv, d]] -> [K_all, V_all]`: appends to the
    /// conversation's cache at its current length.
    KvAppend,
    /// `[x, shape i64 [r]] -> [x viewed as shape]` (ONNX `Reshape`): a 0 copies the
    /// input's dim (unless `allowzero`), one -1 is resolved from the element count.
    ReshapeTo {
        /// A 0 in `shape` means a dim of 0, not a copy.
        allowzero: bool,
        /// The output dims known at import (-1: known per call), checked per call.
        dims: Vec<i64>,
    },
    /// `[x, shape i64 [r]] -> [Expand(x)]` to the NumPy broadcast of x's shape and `shape`.
    ExpandTo {
        /// The output dims known at import (-1: known per call), checked per call.
        dims: Vec<i64>,
    },
    /// `[shape i64 [r]] -> [y [shape]]`, every value `value` of `dtype`.
    ConstantOfShape {
        /// The value.
        value: f64,
        /// Output encoding.
        dtype: DType,
        /// The output dims known at import (-1: known per call), checked per call.
        dims: Vec<i64>,
    },
    /// `[start, limit, delta] (scalars of one dtype, i64 or f32) -> [y [n]]`, ONNX
    /// `Range`: `n = max(ceil((limit - start) / delta), 0)` values from `start` by `delta`.
    RangeOf,
    /// `[x] -> [i64 [rank, n]]`: the multi-indices of the n nonzero values of x.
    NonZero,
    /// `[x, starts i64 [k], ends i64 [k], axes i64 [k]?, steps i64 [k]?] -> [y]` (ONNX
    /// `Slice`): per listed axis, indices from start by step up to end (exclusive),
    /// negative values counting from the end and clamped as ONNX clamps them.
    SliceTo {
        /// The output dims known at import (-1: known per call), checked per call.
        dims: Vec<i64>,
    },
    /// `[x, pads i64 [2r], value?] -> [y]` (ONNX `Pad`, constant mode): `pads` is
    /// `[begin_0, .., begin_r-1, end_0, .., end_r-1]` (negative: values removed); `value` (a scalar of
    /// x's dtype) fills, 0 without it.
    PadTo {
        /// The output dims known at import (-1: known per call), checked per call.
        dims: Vec<i64>,
    },
    /// `[x] -> [x viewed with size-1 dims at the output positions axes]` (sorted).
    Unsqueeze(Vec<usize>),
    /// `[x] -> [x viewed without the dims axes]` (sorted; each must have size 1).
    Squeeze(Vec<usize>),
}

/// Why a node's attributes are unusable.
pub type AttrError = String;

struct Attrs<'a> {
    table: &'a toml::Table,
    used: Vec<&'static str>,
}

impl<'a> Attrs<'a> {
    fn new(table: &'a toml::Table) -> Self {
        Attrs {
            table,
            used: Vec::new(),
        }
    }

    fn get(&mut self, key: &'static str) -> Option<&'a toml::Value> {
        self.used.push(key);
        self.table.get(key)
    }

    fn f64_opt(&mut self, key: &'static str) -> Result<Option<f64>, AttrError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Float(f)) => Ok(Some(*f)),
            Some(toml::Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(v) => Err(format!("attribute `{key}` must be a number, got {v}")),
        }
    }

    fn f64(&mut self, key: &'static str) -> Result<f64, AttrError> {
        self.f64_opt(key)?
            .ok_or_else(|| format!("missing attribute `{key}`"))
    }

    fn f32(&mut self, key: &'static str) -> Result<f32, AttrError> {
        Ok(self.f64(key)? as f32)
    }

    fn int_opt(&mut self, key: &'static str) -> Result<Option<i64>, AttrError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) => Ok(Some(*i)),
            Some(v) => Err(format!("attribute `{key}` must be an integer, got {v}")),
        }
    }

    fn usize_opt(&mut self, key: &'static str) -> Result<Option<usize>, AttrError> {
        self.int_opt(key)?
            .map(|i| usize::try_from(i).map_err(|_| format!("attribute `{key}` must be >= 0")))
            .transpose()
    }

    fn usize(&mut self, key: &'static str) -> Result<usize, AttrError> {
        self.usize_opt(key)?
            .ok_or_else(|| format!("missing attribute `{key}`"))
    }

    fn ints(&mut self, key: &'static str) -> Result<Vec<i64>, AttrError> {
        match self.get(key) {
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_integer()
                        .ok_or_else(|| format!("attribute `{key}` must be a list of integers"))
                })
                .collect(),
            Some(v) => Err(format!("attribute `{key}` must be a list, got {v}")),
            None => Err(format!("missing attribute `{key}`")),
        }
    }

    fn usizes(&mut self, key: &'static str) -> Result<Vec<usize>, AttrError> {
        self.ints(key)?
            .into_iter()
            .map(|i| usize::try_from(i).map_err(|_| format!("attribute `{key}` must be >= 0")))
            .collect()
    }

    fn str_opt(&mut self, key: &'static str) -> Result<Option<&'a str>, AttrError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!("attribute `{key}` must be a string, got {v}")),
        }
    }

    fn bool_opt(&mut self, key: &'static str) -> Result<Option<bool>, AttrError> {
        match self.get(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(format!("attribute `{key}` must be true or false, got {v}")),
        }
    }

    /// Fails on keys the op does not read.
    fn finish(self) -> Result<(), AttrError> {
        match self.table.keys().find(|k| !self.used.contains(&k.as_str())) {
            Some(k) => Err(format!("unknown attribute `{k}`")),
            None => Ok(()),
        }
    }
}

/// A two-value attribute (`[h, w]`); `default` for both when absent (0: required).
fn pair(a: &mut Attrs, key: &'static str, default: usize) -> Result<[usize; 2], AttrError> {
    if a.table.get(key).is_none() && default > 0 {
        a.used.push(key);
        return Ok([default; 2]);
    }
    let v = a.usizes(key)?;
    <[usize; 2]>::try_from(v).map_err(|v| format!("attribute `{key}` needs 2 values, got {v:?}"))
}

/// The `[top, left, bottom, right]` padding attribute; zeros when absent.
fn quad(a: &mut Attrs, key: &'static str) -> Result<[usize; 4], AttrError> {
    if a.table.get(key).is_none() {
        a.used.push(key);
        return Ok([0; 4]);
    }
    let v = a.usizes(key)?;
    <[usize; 4]>::try_from(v).map_err(|v| format!("attribute `{key}` needs 4 values, got {v:?}"))
}

impl GraphOp {
    /// Parses op `name` with `attrs`. `Ok(None)` means the op is unknown
    /// (the caller reports `UnsupportedOp`).
    pub fn parse(name: &str, attrs: &toml::Table) -> Result<Option<GraphOp>, AttrError> {
        if op_tag(name).is_none() {
            return Ok(None);
        }
        let mut a = Attrs::new(attrs);
        let norm = |a: &mut Attrs| -> Result<(f32, bool), AttrError> {
            Ok((a.f32("eps")?, a.bool_opt("add_one")?.unwrap_or(false)))
        };
        let fixed = |op: Op| GraphOp::Fixed(op);
        let op = match name {
            "Matmul" => fixed(Op::Matmul),
            "Add" => fixed(Op::Add),
            "Sub" => fixed(Op::Sub),
            "Mul" => fixed(Op::Mul),
            "Div" => fixed(Op::Div),
            "Scale" => fixed(Op::Scale(a.f32("s")?)),
            "Clamp" => fixed(Op::Clamp {
                lo: a.f32("lo")?,
                hi: a.f32("hi")?,
            }),
            "NanToNum" => fixed(Op::NanToNum {
                nan: a.f64_opt("nan")?.unwrap_or(0.0) as f32,
                pos_inf: a.f64_opt("pos_inf")?.unwrap_or(f32::MAX as f64) as f32,
                neg_inf: a.f64_opt("neg_inf")?.unwrap_or(f32::MIN as f64) as f32,
            }),
            "Reshape" => {
                let shape = a.ints("shape")?;
                if shape.iter().filter(|&&d| d == -1).count() > 1 || shape.iter().any(|&d| d < -1) {
                    return Err("attribute `shape`: at most one -1 and no other negative".into());
                }
                GraphOp::Reshape(shape)
            }
            "Permute" => fixed(Op::Permute(a.usizes("perm")?)),
            "Concat" => fixed(Op::Concat {
                axis: a.usize("axis")?,
            }),
            "Slice" => GraphOp::Slice {
                axis: a.usize("axis")?,
                start: a.int_opt("start")?.unwrap_or(0),
                end: a.int_opt("end")?,
            },
            "Split" => fixed(Op::Split {
                axis: a.usize("axis")?,
                sizes: a.usizes("sizes")?,
            }),
            "RmsNorm" => {
                let (eps, add_one) = norm(&mut a)?;
                fixed(Op::RmsNorm { eps, add_one })
            }
            "LayerNorm" => fixed(Op::LayerNorm { eps: a.f32("eps")? }),
            "GroupNorm" => fixed(Op::GroupNorm {
                groups: a.usize("groups")?,
                eps: a.f32("eps")?,
            }),
            "Rope" => {
                let style = match a.str_opt("style")?.unwrap_or("neox") {
                    "neox" => RopeStyle::Neox,
                    "normal" => RopeStyle::Normal,
                    s => return Err(format!("attribute `style`: `{s}` is not neox or normal")),
                };
                let rot_dim = a.usize_opt("rot_dim")?;
                let freqs = match (a.f64_opt("base")?, a.get("inv_freq")) {
                    (Some(b), None) if b > 0.0 => RopeFreqs::Base(b),
                    (None, Some(toml::Value::Array(l))) => RopeFreqs::List(
                        l.iter()
                            .map(|v| {
                                v.as_float().ok_or_else(|| {
                                    "attribute `inv_freq` must be a list of floats".to_string()
                                })
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    _ => return Err("needs either `base` (> 0) or an `inv_freq` list".into()),
                };
                if let (RopeFreqs::List(l), Some(r)) = (&freqs, rot_dim) {
                    if l.len() * 2 != r {
                        return Err(format!(
                            "`inv_freq` has {} entries, rot_dim {r} needs {}",
                            l.len(),
                            r / 2
                        ));
                    }
                }
                GraphOp::Rope {
                    style,
                    rot_dim,
                    freqs,
                }
            }
            "Silu" => fixed(Op::Silu),
            "Gelu" => fixed(Op::Gelu),
            "GeluTanh" => fixed(Op::GeluTanh),
            "Relu" => fixed(Op::Relu),
            "LeakyRelu" => fixed(Op::LeakyRelu(a.f32("slope")?)),
            "Sigmoid" => fixed(Op::Sigmoid),
            "Tanh" => fixed(Op::Tanh),
            "Softcap" => fixed(Op::Softcap(a.f32("c")?)),
            "SwiGlu" => fixed(Op::SwiGlu),
            "GeGlu" => fixed(Op::GeGlu),
            "Softmax" => fixed(Op::Softmax),
            "Sdpa" => {
                let mask = match a.str_opt("mask")?.unwrap_or("causal") {
                    "none" => MaskKind::None,
                    "causal" => MaskKind::Causal,
                    "sliding" => MaskKind::Sliding(a.usize("window")?),
                    "padding" => MaskKind::Padding,
                    m => {
                        return Err(format!(
                            "attribute `mask`: `{m}` is not none, causal, sliding or padding"
                        ))
                    }
                };
                GraphOp::Sdpa {
                    scale: a.f64_opt("scale")?.map(|s| s as f32),
                    mask,
                }
            }
            "KvAppend" => GraphOp::KvAppend,
            "Embed" => fixed(Op::Embed),
            "Conv1d" => fixed(Op::Conv1d {
                stride: a.usize_opt("stride")?.unwrap_or(1),
                padding: a.usize_opt("padding")?.unwrap_or(0),
            }),
            "Argmax" => fixed(Op::Argmax),
            "FusedNormMatmul" => {
                let (eps, add_one) = norm(&mut a)?;
                fixed(Op::FusedNormMatmul { eps, add_one })
            }
            "FusedSkipNorm" => {
                let (eps, add_one) = norm(&mut a)?;
                fixed(Op::FusedSkipNorm { eps, add_one })
            }
            "FusedSwiGlu" => fixed(Op::FusedSwiGlu),
            "FusedQkv" => fixed(Op::FusedQkv),
            "Sqrt" => fixed(Op::Sqrt),
            "Log" => fixed(Op::Log),
            "Exp" => fixed(Op::Exp),
            "Cos" => fixed(Op::Cos),
            "Sin" => fixed(Op::Sin),
            "Reciprocal" => fixed(Op::Reciprocal),
            "Neg" => fixed(Op::Neg),
            "Erf" => fixed(Op::Erf),
            "PowScalar" => fixed(Op::PowScalar(a.f32("p")?)),
            "BatchMatmul" => fixed(Op::BatchMatmul),
            "Conv2d" => fixed(Op::Conv2d {
                stride: pair(&mut a, "stride", 1)?,
                pads: quad(&mut a, "pads")?,
                dilation: pair(&mut a, "dilation", 1)?,
                groups: a.usize_opt("groups")?.unwrap_or(1),
            }),
            "AvgPool2d" => fixed(Op::AvgPool2d {
                kernel: pair(&mut a, "kernel", 0)?,
                stride: pair(&mut a, "stride", 1)?,
                pads: quad(&mut a, "pads")?,
                count_include_pad: a.bool_opt("count_include_pad")?.unwrap_or(false),
            }),
            "GroupNormAffine" => fixed(Op::GroupNormAffine {
                groups: a.usize("groups")?,
                eps: a.f32("eps")?,
            }),
            "ResizeNearest" => fixed(Op::ResizeNearest {
                scales: a.usizes("scales")?,
            }),
            "Shape" => fixed(Op::Shape),
            "Cast" => fixed(Op::Cast(dtype(&mut a, "to")?)),
            "IntBinary" => fixed(Op::IntBinary(
                match a.str_opt("op")?.ok_or("missing attribute `op`")? {
                    "add" => IntOp::Add,
                    "sub" => IntOp::Sub,
                    "mul" => IntOp::Mul,
                    "div" => IntOp::Div,
                    o => return Err(format!("attribute `op`: `{o}` is not add, sub, mul or div")),
                },
            )),
            "Compare" => fixed(Op::Compare(
                match a.str_opt("cmp")?.ok_or("missing attribute `cmp`")? {
                    "eq" => CmpOp::Equal,
                    "lt" => CmpOp::Less,
                    "le" => CmpOp::LessOrEqual,
                    "gt" => CmpOp::Greater,
                    "ge" => CmpOp::GreaterOrEqual,
                    c => {
                        return Err(format!(
                            "attribute `cmp`: `{c}` is not eq, lt, le, gt or ge"
                        ))
                    }
                },
            )),
            "Not" => fixed(Op::Not),
            "And" => fixed(Op::And),
            "Where" => fixed(Op::Where),
            "Expand" => fixed(Op::Expand(a.usizes("shape")?)),
            "Fill" => fixed(Op::Fill {
                shape: a.usizes("shape")?,
                value: a.f64("value")?,
                dtype: dtype(&mut a, "dtype")?,
            }),
            "Range" => fixed(Op::Range {
                start: a.f64("start")?,
                delta: a.f64("delta")?,
                len: a.usize("len")?,
                dtype: dtype(&mut a, "dtype")?,
            }),
            "Gather" => fixed(Op::Gather {
                axis: a.usize("axis")?,
            }),
            "GatherElements" => fixed(Op::GatherElements {
                axis: a.usize("axis")?,
            }),
            "GatherNd" => fixed(Op::GatherNd),
            "ScatterNd" => fixed(Op::ScatterNd),
            "CumSum" => fixed(Op::CumSum {
                axis: a.usize("axis")?,
                exclusive: a.bool_opt("exclusive")?.unwrap_or(false),
                reverse: a.bool_opt("reverse")?.unwrap_or(false),
            }),
            "Reduce" => fixed(Op::Reduce {
                kind: match a.str_opt("kind")?.ok_or("missing attribute `kind`")? {
                    "sum" => ReduceKind::Sum,
                    "max" => ReduceKind::Max,
                    "mean" => ReduceKind::Mean,
                    k => return Err(format!("attribute `kind`: `{k}` is not sum, max or mean")),
                },
                axes: a.usizes("axes")?,
                keepdims: a.bool_opt("keepdims")?.unwrap_or(true),
            }),
            "Pad" => {
                let flat = a.ints("pads")?;
                if flat.len() % 2 != 0 {
                    return Err("attribute `pads` needs [before, after] per dim".into());
                }
                fixed(Op::Pad {
                    pads: flat.chunks(2).map(|c| [c[0], c[1]]).collect(),
                    value: a.f64_opt("value")?.unwrap_or(0.0),
                })
            }
            "StridedSlice" => fixed(Op::StridedSlice {
                starts: a.usizes("starts")?,
                steps: a.ints("steps")?,
                shape: a.usizes("shape")?,
            }),
            "ConvTranspose2d" => fixed(Op::ConvTranspose2d {
                stride: pair(&mut a, "stride", 1)?,
                pads: quad(&mut a, "pads")?,
                dilation: pair(&mut a, "dilation", 1)?,
                groups: a.usize_opt("groups")?.unwrap_or(1),
                out_pad: match a.table.get("out_pad") {
                    None => {
                        a.used.push("out_pad");
                        [0, 0]
                    }
                    Some(_) => pair(&mut a, "out_pad", 0)?,
                },
            }),
            "Lstm" => fixed(Op::Lstm(LstmSpec {
                hidden: a.usize("hidden")?,
                direction: match a.str_opt("direction")? {
                    None => RnnDirection::Forward,
                    Some(d) => RnnDirection::parse(d).ok_or_else(|| {
                        format!(
                            "attribute `direction`: `{d}` is not forward, reverse or bidirectional"
                        )
                    })?,
                },
                clip: a.f64_opt("clip")?.map(|c| c as f32),
                input_forget: a.bool_opt("input_forget")?.unwrap_or(false),
                seq_lens: match a.table.get("seq_lens") {
                    None => None,
                    Some(_) => Some(a.usizes("seq_lens")?),
                },
            })),
            "Softplus" => fixed(Op::Softplus),
            "Ceil" => fixed(Op::Ceil),
            "RandomNormalLike" => fixed(Op::RandomNormalLike {
                mean: a.f64_opt("mean")?.unwrap_or(0.0) as f32,
                scale: a.f64_opt("scale")?.unwrap_or(1.0) as f32,
                seed: a.usize_opt("seed")?.unwrap_or(0) as u64,
            }),
            "ReshapeTo" => GraphOp::ReshapeTo {
                allowzero: a.bool_opt("allowzero")?.unwrap_or(false),
                dims: a.ints("dims")?,
            },
            "ExpandTo" => GraphOp::ExpandTo {
                dims: a.ints("dims")?,
            },
            "ConstantOfShape" => GraphOp::ConstantOfShape {
                value: a.f64_opt("value")?.unwrap_or(0.0),
                dtype: dtype(&mut a, "dtype")?,
                dims: a.ints("dims")?,
            },
            "RangeOf" => GraphOp::RangeOf,
            "NonZero" => GraphOp::NonZero,
            "SliceTo" => GraphOp::SliceTo {
                dims: a.ints("dims")?,
            },
            "PadTo" => GraphOp::PadTo {
                dims: a.ints("dims")?,
            },
            "Unsqueeze" => GraphOp::Unsqueeze(a.usizes("axes")?),
            "Squeeze" => GraphOp::Squeeze(a.usizes("axes")?),
            _ => return Ok(None),
        };
        a.finish()?;
        Ok(Some(op))
    }

    /// The op name of ops.md.
    pub fn name(&self) -> &'static str {
        match self {
            GraphOp::Fixed(op) => op.name(),
            GraphOp::Reshape(_) => "Reshape",
            GraphOp::Slice { .. } => "Slice",
            GraphOp::Rope { .. } => "Rope",
            GraphOp::Sdpa { .. } => "Sdpa",
            GraphOp::KvAppend => "KvAppend",
            GraphOp::ReshapeTo { .. } => "ReshapeTo",
            GraphOp::ExpandTo { .. } => "ExpandTo",
            GraphOp::ConstantOfShape { .. } => "ConstantOfShape",
            GraphOp::RangeOf => "RangeOf",
            GraphOp::NonZero => "NonZero",
            GraphOp::SliceTo { .. } => "SliceTo",
            GraphOp::PadTo { .. } => "PadTo",
            GraphOp::Unsqueeze(_) => "Unsqueeze",
            GraphOp::Squeeze(_) => "Squeeze",
        }
    }

    /// Whether the op is one of the run-time shape ops bound per call (`graph::bind`).
    pub fn is_run_time_shape(&self) -> bool {
        matches!(
            self,
            GraphOp::ReshapeTo { .. }
                | GraphOp::ExpandTo { .. }
                | GraphOp::ConstantOfShape { .. }
                | GraphOp::RangeOf
                | GraphOp::NonZero
                | GraphOp::SliceTo { .. }
                | GraphOp::PadTo { .. }
                | GraphOp::Unsqueeze(_)
                | GraphOp::Squeeze(_)
        )
    }

    /// The stable tag of [`OP_TAGS`].
    pub fn tag(&self) -> u16 {
        op_tag(self.name()).unwrap_or(0)
    }

    /// Attributes as TOML (the inverse of [`GraphOp::parse`]).
    pub fn attrs(&self) -> toml::Table {
        let mut t = toml::Table::new();
        let f = |v: f32| toml::Value::Float(v as f64);
        let i = |v: usize| toml::Value::Integer(v as i64);
        let list = |v: &[usize]| toml::Value::Array(v.iter().map(|&x| i(x)).collect());
        let mut put = |k: &str, v: toml::Value| {
            t.insert(k.to_string(), v);
        };
        match self {
            GraphOp::Fixed(op) => match op {
                Op::Scale(s) => put("s", f(*s)),
                Op::Clamp { lo, hi } => {
                    put("lo", f(*lo));
                    put("hi", f(*hi));
                }
                Op::NanToNum {
                    nan,
                    pos_inf,
                    neg_inf,
                } => {
                    put("nan", f(*nan));
                    put("pos_inf", f(*pos_inf));
                    put("neg_inf", f(*neg_inf));
                }
                Op::Permute(p) => put("perm", list(p)),
                Op::Concat { axis } => put("axis", i(*axis)),
                Op::Split { axis, sizes } => {
                    put("axis", i(*axis));
                    put("sizes", list(sizes));
                }
                Op::RmsNorm { eps, add_one }
                | Op::FusedNormMatmul { eps, add_one }
                | Op::FusedSkipNorm { eps, add_one } => {
                    put("eps", f(*eps));
                    if *add_one {
                        put("add_one", toml::Value::Boolean(true));
                    }
                }
                Op::LayerNorm { eps } => put("eps", f(*eps)),
                Op::GroupNorm { groups, eps } | Op::GroupNormAffine { groups, eps } => {
                    put("groups", i(*groups));
                    put("eps", f(*eps));
                }
                Op::LeakyRelu(s) => put("slope", f(*s)),
                Op::Softcap(c) => put("c", f(*c)),
                Op::Conv1d { stride, padding } => {
                    put("stride", i(*stride));
                    put("padding", i(*padding));
                }
                Op::PowScalar(p) => put("p", f(*p)),
                Op::Conv2d {
                    stride,
                    pads,
                    dilation,
                    groups,
                } => {
                    put("stride", list(stride));
                    put("pads", list(pads));
                    put("dilation", list(dilation));
                    put("groups", i(*groups));
                }
                Op::AvgPool2d {
                    kernel,
                    stride,
                    pads,
                    count_include_pad,
                } => {
                    put("kernel", list(kernel));
                    put("stride", list(stride));
                    put("pads", list(pads));
                    put(
                        "count_include_pad",
                        toml::Value::Boolean(*count_include_pad),
                    );
                }
                Op::ResizeNearest { scales } => put("scales", list(scales)),
                Op::Cast(d) => put("to", toml::Value::String(d.name().into())),
                Op::IntBinary(k) => {
                    let o = match k {
                        IntOp::Add => "add",
                        IntOp::Sub => "sub",
                        IntOp::Mul => "mul",
                        IntOp::Div => "div",
                    };
                    put("op", toml::Value::String(o.into()));
                }
                Op::Compare(c) => {
                    let o = match c {
                        CmpOp::Equal => "eq",
                        CmpOp::Less => "lt",
                        CmpOp::LessOrEqual => "le",
                        CmpOp::Greater => "gt",
                        CmpOp::GreaterOrEqual => "ge",
                    };
                    put("cmp", toml::Value::String(o.into()));
                }
                Op::Expand(shape) => put("shape", list(shape)),
                Op::Fill {
                    shape,
                    value,
                    dtype,
                } => {
                    put("shape", list(shape));
                    put("value", toml::Value::Float(*value));
                    put("dtype", toml::Value::String(dtype.name().into()));
                }
                Op::Range {
                    start,
                    delta,
                    len,
                    dtype,
                } => {
                    put("start", toml::Value::Float(*start));
                    put("delta", toml::Value::Float(*delta));
                    put("len", i(*len));
                    put("dtype", toml::Value::String(dtype.name().into()));
                }
                Op::Gather { axis } | Op::GatherElements { axis } => put("axis", i(*axis)),
                Op::CumSum {
                    axis,
                    exclusive,
                    reverse,
                } => {
                    put("axis", i(*axis));
                    put("exclusive", toml::Value::Boolean(*exclusive));
                    put("reverse", toml::Value::Boolean(*reverse));
                }
                Op::Reduce {
                    kind,
                    axes,
                    keepdims,
                } => {
                    let k = match kind {
                        ReduceKind::Sum => "sum",
                        ReduceKind::Max => "max",
                        ReduceKind::Mean => "mean",
                    };
                    put("kind", toml::Value::String(k.into()));
                    put("axes", list(axes));
                    put("keepdims", toml::Value::Boolean(*keepdims));
                }
                Op::Pad { pads, value } => {
                    let flat: Vec<i64> = pads.iter().flatten().copied().collect();
                    put("pads", int_list(&flat));
                    put("value", toml::Value::Float(*value));
                }
                Op::StridedSlice {
                    starts,
                    steps,
                    shape,
                } => {
                    put("starts", list(starts));
                    put("steps", int_list(steps));
                    put("shape", list(shape));
                }
                Op::ConvTranspose2d {
                    stride,
                    pads,
                    dilation,
                    groups,
                    out_pad,
                } => {
                    put("stride", list(stride));
                    put("pads", list(pads));
                    put("dilation", list(dilation));
                    put("groups", i(*groups));
                    put("out_pad", list(out_pad));
                }
                Op::Lstm(spec) => {
                    put("hidden", i(spec.hidden));
                    put(
                        "direction",
                        toml::Value::String(spec.direction.name().into()),
                    );
                    if let Some(c) = spec.clip {
                        put("clip", f(c));
                    }
                    put("input_forget", toml::Value::Boolean(spec.input_forget));
                    if let Some(l) = &spec.seq_lens {
                        put("seq_lens", list(l));
                    }
                }
                Op::RandomNormalLike { mean, scale, seed } => {
                    put("mean", f(*mean));
                    put("scale", f(*scale));
                    put("seed", toml::Value::Integer(*seed as i64));
                }
                _ => {}
            },
            GraphOp::ReshapeTo { allowzero, dims } => {
                put("allowzero", toml::Value::Boolean(*allowzero));
                put("dims", int_list(dims));
            }
            GraphOp::ExpandTo { dims } | GraphOp::SliceTo { dims } | GraphOp::PadTo { dims } => {
                put("dims", int_list(dims))
            }
            GraphOp::ConstantOfShape { value, dtype, dims } => {
                put("value", toml::Value::Float(*value));
                put("dtype", toml::Value::String(dtype.name().into()));
                put("dims", int_list(dims));
            }
            GraphOp::RangeOf | GraphOp::NonZero => {}
            GraphOp::Unsqueeze(axes) | GraphOp::Squeeze(axes) => put("axes", list(axes)),
            GraphOp::Reshape(shape) => put(
                "shape",
                toml::Value::Array(shape.iter().map(|&d| toml::Value::Integer(d)).collect()),
            ),
            GraphOp::Slice { axis, start, end } => {
                put("axis", i(*axis));
                put("start", toml::Value::Integer(*start));
                if let Some(e) = end {
                    put("end", toml::Value::Integer(*e));
                }
            }
            GraphOp::Rope {
                style,
                rot_dim,
                freqs,
            } => {
                let s = match style {
                    RopeStyle::Neox => "neox",
                    RopeStyle::Normal => "normal",
                };
                put("style", toml::Value::String(s.into()));
                if let Some(r) = rot_dim {
                    put("rot_dim", i(*r));
                }
                match freqs {
                    RopeFreqs::Base(b) => put("base", toml::Value::Float(*b)),
                    RopeFreqs::List(l) => put(
                        "inv_freq",
                        toml::Value::Array(l.iter().map(|&x| toml::Value::Float(x)).collect()),
                    ),
                }
            }
            GraphOp::Sdpa { scale, mask } => {
                if let Some(s) = scale {
                    put("scale", f(*s));
                }
                let m = match mask {
                    MaskKind::None => "none",
                    MaskKind::Causal => "causal",
                    MaskKind::Sliding(w) => {
                        put("window", i(*w));
                        "sliding"
                    }
                    MaskKind::Padding => "padding",
                };
                put("mask", toml::Value::String(m.into()));
            }
            GraphOp::KvAppend => {}
        }
        t
    }
}

/// A list of integers as a TOML array.
fn int_list(v: &[i64]) -> toml::Value {
    toml::Value::Array(v.iter().map(|&x| toml::Value::Integer(x)).collect())
}

/// A dtype attribute (`f32`, `i64` or `bool`).
fn dtype(a: &mut Attrs, key: &'static str) -> Result<DType, AttrError> {
    let name = a
        .str_opt(key)?
        .ok_or_else(|| format!("missing attribute `{key}`"))?;
    DType::from_name(name)
        .filter(|d| matches!(d, DType::F32 | DType::I64 | DType::Bool))
        .ok_or_else(|| format!("attribute `{key}`: `{name}` is not f32, i64 or bool"))
}

/// The `(first index, step, length)` of an ONNX `Slice` of `start..end` by `step` over a
/// dim of `n` (negative indices count from the end, then clamped as ONNX clamps them).
pub fn onnx_slice_axis(
    start: i64,
    end: i64,
    step: i64,
    n: usize,
) -> Result<(usize, i64, usize), String> {
    if step == 0 {
        return Err("Slice step 0".into());
    }
    let n = n as i128;
    let (mut s, mut e, st) = (start as i128, end as i128, step as i128);
    if s < 0 {
        s += n;
    }
    if e < 0 {
        e += n;
    }
    let (s, e) = if st > 0 {
        (s.clamp(0, n), e.clamp(0, n))
    } else {
        (s.clamp(0, n - 1), e.clamp(-1, n - 1))
    };
    let len = if st > 0 {
        (e - s + st - 1).div_euclid(st).max(0)
    } else {
        (s - e + (-st) - 1).div_euclid(-st).max(0)
    };
    Ok((if len == 0 { 0 } else { s as usize }, step, len as usize))
}

/// `Slice` indices resolved against an axis of length `len` (negative from
/// the end, clamped into `0..=len`).
pub fn slice_range(start: i64, end: Option<i64>, len: usize) -> (usize, usize) {
    let resolve = |i: i64| -> usize {
        if i < 0 {
            len.saturating_sub(i.unsigned_abs() as usize)
        } else {
            (i as usize).min(len)
        }
    };
    let s = resolve(start);
    let e = end.map_or(len, resolve);
    (s, e.max(s))
}

/// `Reshape` target resolved for a tensor of `numel` elements; `None` when
/// the element counts cannot match.
pub fn reshape_target(shape: &[i64], numel: usize) -> Option<Vec<usize>> {
    let known: usize = shape
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as usize)
        .product();
    let mut out = Vec::with_capacity(shape.len());
    for &d in shape {
        if d == -1 {
            if known == 0 || !numel.is_multiple_of(known) {
                return None;
            }
            out.push(numel / known);
        } else {
            out.push(d as usize);
        }
    }
    (out.iter().product::<usize>() == numel).then_some(out)
}

/// The backend mask of an Sdpa node; `keep` is the per-key flag list of a
/// padding mask (read from the node's `mask` input), unused by the others.
pub fn backend_mask(kind: MaskKind, keep: Vec<bool>) -> Mask {
    match kind {
        MaskKind::None => Mask::None,
        MaskKind::Causal => Mask::Causal,
        MaskKind::Sliding(w) => Mask::Sliding(w),
        MaskKind::Padding => Mask::Padding(keep),
    }
}

/// The per-key flags of an Sdpa padding-mask input (i32 values, nonzero =
/// keep) for `keys` keys.
pub fn padding_keep(mask: &[i32], keys: usize) -> Result<Vec<bool>, String> {
    if mask.len() != keys {
        return Err(format!(
            "the padding mask has {} values for {keys} keys",
            mask.len()
        ));
    }
    Ok(mask.iter().map(|&m| m != 0).collect())
}
