//! CTranslate2's binary model format (`model.bin`, binary versions 2..=6), as
//! `ctranslate2/specs/model_spec.py` writes it, all little-endian:
//!
//! ```text
//! u32 binary_version
//! string spec_name; u32 spec_revision                 (version >= 2)
//! u32 n_variables, then per variable:
//!   string name; u8 rank; u32 dims[rank]
//!   u8 dtype_id; u32 n_bytes                          (version >= 4)
//!   (version < 4: u8 item_size; u32 n_items)
//!   n_bytes of row-major data
//! u32 n_aliases, then per alias: string alias; string target   (version >= 3)
//! string = u16 length (with the trailing NUL) + bytes + NUL
//! ```
//!
//! dtype ids: 0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16.

use crate::error::ImportError;
use std::ops::Range;
use std::path::Path;

/// The newest binary version this reader knows.
pub const MAX_BINARY_VERSION: u32 = 6;

/// Element type of a CTranslate2 variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ct2Type {
    /// float32
    F32,
    /// int8
    I8,
    /// int16
    I16,
    /// int32
    I32,
    /// float16
    F16,
    /// bfloat16
    BF16,
}

impl Ct2Type {
    fn from_id(id: u8) -> Option<Ct2Type> {
        Some(match id {
            0 => Ct2Type::F32,
            1 => Ct2Type::I8,
            2 => Ct2Type::I16,
            3 => Ct2Type::I32,
            4 => Ct2Type::F16,
            5 => Ct2Type::BF16,
            _ => return None,
        })
    }

    fn from_item_size(size: u8) -> Option<Ct2Type> {
        Some(match size {
            1 => Ct2Type::I8,
            2 => Ct2Type::I16,
            4 => Ct2Type::F32,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Ct2Type::I8 => 1,
            Ct2Type::I16 | Ct2Type::F16 | Ct2Type::BF16 => 2,
            Ct2Type::F32 | Ct2Type::I32 => 4,
        }
    }
}

/// One variable of the model: name, shape, type and its bytes in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    /// Spec name, e.g. `encoder/layer_0/self_attention/linear_0/weight`.
    pub name: String,
    /// Dimensions (empty for scalars).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: Ct2Type,
    /// Byte range of the data inside the file.
    pub data: Range<usize>,
}

/// The parsed header and variable table of a `model.bin`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ct2Model {
    /// Binary format version.
    pub binary_version: u32,
    /// Spec class name, e.g. `WhisperSpec`.
    pub spec: String,
    /// Spec revision.
    pub revision: u32,
    /// Variables in file order.
    pub variables: Vec<Variable>,
    /// `(alias, target)` pairs: the alias names the same data as the target.
    pub aliases: Vec<(String, String)>,
}

impl Ct2Model {
    /// The variable named `name`, following aliases.
    pub fn get(&self, name: &str) -> Option<&Variable> {
        let target = self
            .aliases
            .iter()
            .find(|(a, _)| a == name)
            .map_or(name, |(_, t)| t.as_str());
        self.variables.iter().find(|v| v.name == target)
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, what: &str) -> ImportError {
        ImportError::Format {
            path: self.path.to_path_buf(),
            reason: format!("CTranslate2 model.bin: byte {}: {what}", self.at),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ImportError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| self.err(&format!("truncated while reading {what}")))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self, what: &str) -> Result<u8, ImportError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, ImportError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, ImportError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self, what: &str) -> Result<String, ImportError> {
        let n = self.u16(what)? as usize;
        let b = self.take(n, what)?;
        let b = b.strip_suffix(&[0]).unwrap_or(b);
        String::from_utf8(b.to_vec()).map_err(|_| self.err(&format!("{what} is not UTF-8")))
    }
}

/// Parses the header and variable table of `bytes` (the whole `model.bin`).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Ct2Model, ImportError> {
    let mut c = Cursor { bytes, at: 0, path };
    let binary_version = c.u32("the binary version")?;
    if binary_version == 0 || binary_version > MAX_BINARY_VERSION {
        return Err(ImportError::Unsupported {
            path: path.to_path_buf(),
            reason: format!(
                "CTranslate2 binary version {binary_version} (this reader knows 1..={MAX_BINARY_VERSION})"
            ),
        });
    }
    let (spec, revision) = if binary_version >= 2 {
        (c.string("the spec name")?, c.u32("the spec revision")?)
    } else {
        (String::new(), 1)
    };
    let n = c.u32("the variable count")? as usize;
    let mut variables = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let name = c.string("a variable name")?;
        let rank = c.u8("a rank")? as usize;
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(c.u32("a dimension")? as usize);
        }
        let (dtype, n_bytes) = if binary_version >= 4 {
            let id = c.u8("a dtype id")?;
            let dtype = Ct2Type::from_id(id)
                .ok_or_else(|| c.err(&format!("variable `{name}`: unknown dtype id {id}")))?;
            (dtype, c.u32("a byte count")? as usize)
        } else {
            let size = c.u8("an item size")?;
            let dtype = Ct2Type::from_item_size(size)
                .ok_or_else(|| c.err(&format!("variable `{name}`: unknown item size {size}")))?;
            (dtype, c.u32("an item count")? as usize * size as usize)
        };
        let count = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| c.err(&format!("variable `{name}`: shape {shape:?} overflows")))?;
        if count.checked_mul(dtype.size()) != Some(n_bytes) {
            return Err(c.err(&format!(
                "variable `{name}`: {n_bytes} bytes do not match shape {shape:?} of {dtype:?}"
            )));
        }
        let start = c.at;
        c.take(n_bytes, &format!("the data of `{name}`"))?;
        variables.push(Variable {
            name,
            shape,
            dtype,
            data: start..c.at,
        });
    }
    let mut aliases = Vec::new();
    if binary_version >= 3 {
        let n = c.u32("the alias count")? as usize;
        for _ in 0..n {
            let alias = c.string("an alias")?;
            let target = c.string("an alias target")?;
            aliases.push((alias, target));
        }
    }
    Ok(Ct2Model {
        binary_version,
        spec,
        revision,
        variables,
        aliases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend(((s.len() + 1) as u16).to_le_bytes());
        out.extend(s.as_bytes());
        out.push(0);
    }

    #[test]
    fn parses_a_small_file_and_rejects_truncation() {
        let mut b = Vec::new();
        b.extend(6u32.to_le_bytes());
        string(&mut b, "WhisperSpec");
        b.extend(3u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        string(&mut b, "a/weight");
        b.push(2);
        b.extend(2u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        b.push(0);
        b.extend(8u32.to_le_bytes());
        b.extend(1.5f32.to_le_bytes());
        b.extend((-2.0f32).to_le_bytes());
        b.extend(1u32.to_le_bytes());
        string(&mut b, "b/weight");
        string(&mut b, "a/weight");
        let m = parse(Path::new("m.bin"), &b).unwrap();
        assert_eq!(m.spec, "WhisperSpec");
        assert_eq!(m.variables[0].shape, vec![2, 1]);
        assert_eq!(m.get("b/weight").unwrap().name, "a/weight");
        for cut in 0..b.len() - 20 {
            assert!(parse(Path::new("m.bin"), &b[..cut]).is_err(), "cut {cut}");
        }
    }
}
