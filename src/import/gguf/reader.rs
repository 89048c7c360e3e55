//! A bounds-checked GGUF (v2/v3, little-endian) reader: header, metadata and
//! tensor infos. Every length read from the file is checked against the bytes
//! that remain before anything is allocated, so a malformed or hostile file
//! gives an error, never a panic or an absurd allocation.

use crate::dtype::DType;
use std::collections::BTreeMap;

/// Most dimensions a GGML tensor has.
const MAX_DIMS: u32 = 4;
/// Deepest nesting of metadata arrays accepted.
const MAX_ARRAY_DEPTH: usize = 3;
/// Most items of one metadata array (the largest real vocabularies and merge
/// lists have under a million). Each parsed item takes 32 bytes however small
/// its encoding, so a file of N bytes could otherwise ask for 32 N bytes.
pub const MAX_ARRAY_ITEMS: usize = 1 << 24;

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// uint8 / uint16 / uint32 / uint64.
    UInt(u64),
    /// int8 / int16 / int32 / int64.
    Int(i64),
    /// float32 / float64 (float32 widened exactly).
    Float(f64),
    /// bool.
    Bool(bool),
    /// A UTF-8 string.
    Str(String),
    /// An array (every element of one GGUF type).
    Array(Vec<Value>),
}

impl Value {
    /// The value as an unsigned integer, when it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::UInt(v) => Some(v),
            Value::Int(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float (integers convert). A float32-exact value comes back as the
    /// f64 of its shortest f32 decimal form (`1e-6f32` gives `1e-6`, not `9.99999997e-7`),
    /// so configs read like the source's; converting back to f32 is exact.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Float(v) if v as f32 as f64 == v => format!("{}", v as f32).parse().ok(),
            Value::Float(v) => Some(v),
            Value::UInt(v) => Some(v as f64),
            Value::Int(v) => Some(v as f64),
            _ => None,
        }
    }

    /// A short description of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::UInt(_) => "unsigned integer",
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::Bool(_) => "bool",
            Value::Str(_) => "string",
            Value::Array(_) => "array",
        }
    }
}

/// One tensor info of a GGUF file, shape already row-major (outermost first).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// GGUF tensor name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Row-major shape: GGUF's `ne` reversed.
    pub shape: Vec<usize>,
    /// GGML type id.
    pub ggml_type: u32,
    /// Absolute byte range of the data in the file.
    pub start: usize,
    /// Byte length of the data.
    pub len: usize,
}

/// A parsed GGUF header: version, metadata and tensor infos.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// GGUF version (2 or 3).
    pub version: u32,
    /// Metadata in key order.
    pub kv: BTreeMap<String, Value>,
    /// Tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
}

/// GGML type name of id `t` (for messages), `?` for unknown ids.
pub fn ggml_type_name(t: u32) -> &'static str {
    const NAMES: [&str; 41] = [
        "F32",
        "F16",
        "Q4_0",
        "Q4_1",
        "Q4_2",
        "Q4_3",
        "Q5_0",
        "Q5_1",
        "Q8_0",
        "Q8_1",
        "Q2_K",
        "Q3_K",
        "Q4_K",
        "Q5_K",
        "Q6_K",
        "Q8_K",
        "IQ2_XXS",
        "IQ2_XS",
        "IQ3_XXS",
        "IQ1_S",
        "IQ4_NL",
        "IQ3_S",
        "IQ2_S",
        "IQ4_XS",
        "I8",
        "I16",
        "I32",
        "I64",
        "F64",
        "IQ1_M",
        "BF16",
        "Q4_0_4_4",
        "Q4_0_4_8",
        "Q4_0_8_8",
        "TQ1_0",
        "TQ2_0",
        "IQ4_NL_4_4",
        "IQ4_NL_4_8",
        "IQ4_NL_8_8",
        "MXFP4",
        "NVFP4",
    ];
    NAMES.get(t as usize).copied().unwrap_or("?")
}

/// The `.model` encoding with the same bytes as GGML type `t`, if there is one.
pub fn dtype_of_ggml(t: u32) -> Option<DType> {
    Some(match t {
        0 => DType::F32,
        1 => DType::F16,
        2 => DType::Q4_0,
        3 => DType::Q4_1,
        6 => DType::Q5_0,
        7 => DType::Q5_1,
        8 => DType::Q8_0,
        10 => DType::Q2K,
        11 => DType::Q3K,
        12 => DType::Q4K,
        13 => DType::Q5K,
        14 => DType::Q6K,
        24 => DType::I8,
        26 => DType::I32,
        30 => DType::BF16,
        _ => return None,
    })
}

/// Block geometry `(values, bytes)` of GGML type `t`, for sizing tensors of
/// types we cannot import (so the error names the type, not a size problem).
fn ggml_block(t: u32) -> Option<(u64, u64)> {
    if let Some(d) = dtype_of_ggml(t) {
        return Some((d.block_values() as u64, d.block_bytes() as u64));
    }
    Some(match t {
        9 => (32, 36),
        15 => (256, 292),
        16 => (256, 66),
        17 => (256, 74),
        18 => (256, 98),
        19 => (256, 50),
        20 => (32, 18),
        21 => (256, 110),
        22 => (256, 82),
        23 => (256, 136),
        25 => (1, 2),
        27 | 28 => (1, 8),
        29 => (256, 56),
        34 => (256, 54),
        35 => (256, 66),
        39 => (32, 17),
        _ => return None,
    })
}

/// Why a GGUF could not be parsed; the caller adds the path.
pub type ParseError = String;

struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ParseError> {
        if n > self.remaining() {
            return Err(format!(
                "truncated: {what} at byte {} needs {n} bytes, {} remain",
                self.at,
                self.remaining()
            ));
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], ParseError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32, ParseError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, ParseError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count that must fit the remaining bytes at `min_each` bytes per item.
    fn count(&mut self, min_each: usize, what: &str) -> Result<usize, ParseError> {
        let at = self.at;
        let n = self.u64(what)?;
        let fits = usize::try_from(n).ok().filter(|&n| {
            n.checked_mul(min_each.max(1))
                .is_some_and(|b| b <= self.remaining())
        });
        fits.ok_or_else(|| {
            format!(
                "{what} at byte {at} is {n}, more than the {} remaining bytes can hold",
                self.remaining()
            )
        })
    }

    fn string(&mut self, what: &str) -> Result<String, ParseError> {
        let len = self.count(1, what)?;
        let at = self.at;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("{what} at byte {at} is not valid UTF-8"))
    }

    fn value(&mut self, ty: u32, depth: usize, what: &str) -> Result<Value, ParseError> {
        Ok(match ty {
            0 => Value::UInt(self.array::<1>(what)?[0] as u64),
            1 => Value::Int(self.array::<1>(what)?[0] as i8 as i64),
            2 => Value::UInt(u16::from_le_bytes(self.array(what)?) as u64),
            3 => Value::Int(i16::from_le_bytes(self.array(what)?) as i64),
            4 => Value::UInt(self.u32(what)? as u64),
            5 => Value::Int(i32::from_le_bytes(self.array(what)?) as i64),
            6 => Value::Float(f32::from_le_bytes(self.array(what)?) as f64),
            7 => match self.array::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("{what}: bool byte {b} is neither 0 nor 1")),
            },
            8 => Value::Str(self.string(what)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(format!(
                        "{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}"
                    ));
                }
                let elem = self.u32(what)?;
                let min_each = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8..=12 => 8,
                    t => return Err(format!("{what}: unknown array element type {t}")),
                };
                let n = self.count(min_each, what)?;
                if n > MAX_ARRAY_ITEMS {
                    return Err(format!(
                        "{what}: an array of {n} items, more than the {MAX_ARRAY_ITEMS} this reader accepts (damaged file?)"
                    ));
                }
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(elem, depth + 1, what)?);
                }
                Value::Array(items)
            }
            10 => Value::UInt(self.u64(what)?),
            11 => Value::Int(i64::from_le_bytes(self.array(what)?)),
            12 => Value::Float(f64::from_le_bytes(self.array(what)?)),
            t => return Err(format!("{what}: unknown metadata value type {t}")),
        })
    }
}

/// Parses the header, metadata and tensor infos of a whole GGUF file in `buf`,
/// checking that every tensor's data lies inside `buf`.
pub fn parse(buf: &[u8]) -> Result<Header, ParseError> {
    let mut c = Cursor { buf, at: 0 };
    let magic = c.array::<4>("magic")?;
    if &magic != b"GGUF" {
        return Err(format!(
            "not a GGUF file: magic is {magic:?}, expected \"GGUF\""
        ));
    }
    let version = c.u32("version")?;
    if version != 2 && version != 3 {
        let hint = if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
            " (a big-endian GGUF; only little-endian files are supported)"
        } else if version == 1 {
            " (GGUF v1 is obsolete; re-convert the model)"
        } else {
            ""
        };
        return Err(format!("unsupported GGUF version {version}{hint}"));
    }
    // A tensor info is at least 8 (name len) + 4 (n_dims) + 4 (type) + 8 (offset) bytes.
    let n_tensors = c.count(24, "tensor count")?;
    // A key-value pair is at least 8 (key len) + 4 (type) + 1 bytes.
    let n_kv = c.count(13, "metadata count")?;
    let mut kv = BTreeMap::new();
    for i in 0..n_kv {
        let key = c.string(&format!("metadata key #{i}"))?;
        let ty = c.u32(&format!("type of `{key}`"))?;
        let value = c.value(ty, 0, &format!("value of `{key}`"))?;
        if kv.insert(key.clone(), value).is_some() {
            return Err(format!("metadata key `{key}` appears twice"));
        }
    }
    let mut raw = Vec::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let name = c.string(&format!("name of tensor #{i}"))?;
        let n_dims = c.u32(&format!("dimension count of `{name}`"))?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(format!(
                "tensor `{name}`: {n_dims} dimensions (1..={MAX_DIMS} allowed)"
            ));
        }
        let mut ne = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            ne.push(c.u64(&format!("dimensions of `{name}`"))?);
        }
        let ty = c.u32(&format!("type of `{name}`"))?;
        let offset = c.u64(&format!("offset of `{name}`"))?;
        raw.push((name, ne, ty, offset));
    }
    let alignment = match kv.get("general.alignment") {
        None => 32,
        Some(v) => v
            .as_u64()
            .filter(|a| a.is_power_of_two() && *a <= 1 << 20)
            .ok_or_else(|| format!("general.alignment = {v:?} is not a power of two"))?,
    };
    let data_start = (c.at as u64).next_multiple_of(alignment);
    let mut tensors = Vec::with_capacity(raw.len());
    let mut names = std::collections::HashSet::new();
    for (name, ne, ty, offset) in raw {
        if !names.insert(name.clone()) {
            return Err(format!("tensor `{name}` appears twice"));
        }
        let (bv, bb) =
            ggml_block(ty).ok_or_else(|| format!("tensor `{name}`: unknown GGML type id {ty}"))?;
        let mut elems: u64 = 1;
        for &d in &ne {
            elems = elems
                .checked_mul(d)
                .ok_or_else(|| format!("tensor `{name}`: shape {ne:?} overflows"))?;
        }
        if !ne[0].is_multiple_of(bv) {
            return Err(format!(
                "tensor `{name}`: innermost dimension {} is not a multiple of the {} block ({bv} values)",
                ne[0],
                ggml_type_name(ty)
            ));
        }
        let len = (elems / bv)
            .checked_mul(bb)
            .ok_or_else(|| format!("tensor `{name}`: byte size overflows"))?;
        let start = data_start
            .checked_add(offset)
            .filter(|s| s.checked_add(len).is_some_and(|e| e <= buf.len() as u64))
            .ok_or_else(|| {
                format!(
                    "tensor `{name}`: data at offset {offset} ({len} bytes) lies outside the file ({} bytes; truncated?)",
                    buf.len()
                )
            })?;
        let shape = ne
            .iter()
            .rev()
            .map(|&d| {
                usize::try_from(d).map_err(|_| format!("tensor `{name}`: dimension {d} too large"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        tensors.push(TensorInfo {
            name,
            shape,
            ggml_type: ty,
            start: start as usize,
            len: len as usize,
        });
    }
    Ok(Header {
        version,
        kv,
        tensors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(n_tensors: u64, n_kv: u64) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(n_tensors.to_le_bytes());
        b.extend(n_kv.to_le_bytes());
        b
    }

    fn push_str(b: &mut Vec<u8>, s: &str) {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    }

    #[test]
    fn parses_kv_and_tensor() {
        let mut b = header(1, 2);
        push_str(&mut b, "a.str");
        b.extend(8u32.to_le_bytes());
        push_str(&mut b, "hi");
        push_str(&mut b, "a.arr");
        b.extend(9u32.to_le_bytes());
        b.extend(5u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend((-1i32).to_le_bytes());
        b.extend(7i32.to_le_bytes());
        push_str(&mut b, "t");
        b.extend(2u32.to_le_bytes());
        b.extend(3u64.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        let start = b.len().next_multiple_of(32);
        b.resize(start + 24, 0);
        let h = parse(&b).unwrap();
        assert_eq!(h.kv["a.str"], Value::Str("hi".into()));
        assert_eq!(
            h.kv["a.arr"],
            Value::Array(vec![Value::Int(-1), Value::Int(7)])
        );
        assert_eq!(h.tensors[0].shape, vec![2, 3]);
        assert_eq!((h.tensors[0].start, h.tensors[0].len), (start, 24));
        assert!(parse(&b[..b.len() - 1])
            .unwrap_err()
            .contains("outside the file"));
    }

    #[test]
    fn huge_counts_are_rejected_before_allocating() {
        let b = header(1 << 62, 0);
        assert!(parse(&b).unwrap_err().contains("tensor count"));
        let mut b = header(0, 1);
        push_str(&mut b, "k");
        b.extend(9u32.to_le_bytes());
        b.extend(4u32.to_le_bytes());
        b.extend((1u64 << 60).to_le_bytes());
        assert!(parse(&b).unwrap_err().contains("value of `k`"));
        // Bytes present for every item, but more items than the reader accepts.
        let mut b = header(0, 1);
        push_str(&mut b, "big");
        b.extend(9u32.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(((MAX_ARRAY_ITEMS + 1) as u64).to_le_bytes());
        b.resize(b.len() + MAX_ARRAY_ITEMS + 1, 0);
        let e = parse(&b).unwrap_err();
        assert!(
            e.contains("value of `big`") && e.contains("16777217 items"),
            "{e}"
        );
    }
}
