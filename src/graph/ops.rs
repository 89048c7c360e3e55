//! Graph-level ops: the stable op tag table, attribute parsing, and the
//! per-call binding of a graph op to a backend [`Op`].
//!
//! Most graph ops are a backend [`Op`] with static attributes. Four take
//! values known only per call: `Reshape` (`-1` dims), `Slice` (negative
//! indices count from the end), `Rope` (its second input is the `pos` value)
//! and `Sdpa` / `KvAppend` (positions come from the conversation's KV state).

use crate::backend::{Mask, Op, RopeStyle};

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
        }
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
                _ => {}
            },
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
