//! The `tensors` section: the index of every tensor in the weights part, and
//! its validation (sizes, blocks, bounds, overlap).

use crate::dtype::DType;
use crate::error::LoadError;
use std::collections::HashMap;
use std::path::Path;

/// One validated tensor of the index.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorEntry {
    /// Canonical (Hugging Face style) name.
    pub name: String,
    /// Row-major shape, outermost first; `[out, in]` for linear weights.
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Bytes from the start of the weights part.
    pub offset: u64,
    /// Byte length; equals `dtype.byte_size(&shape)`.
    pub size: u64,
    /// Per-tensor scale (`ternary` only).
    pub scale: Option<f32>,
}

impl TensorEntry {
    /// Number of values.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The validated tensor index, sorted by offset, with lookup by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TensorIndex {
    entries: Vec<TensorEntry>,
    by_name: HashMap<String, usize>,
}

impl TensorIndex {
    /// All tensors, sorted by offset.
    pub fn entries(&self) -> &[TensorEntry] {
        &self.entries
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&TensorEntry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// Whether a tensor named `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no tensors.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[derive(serde::Deserialize)]
struct RawTensor {
    shape: Vec<i64>,
    encoding: String,
    offset: i64,
    size: i64,
    #[serde(default)]
    scale: Option<f64>,
}

/// Parses and validates the `tensors` section body against a weights part of `weights_size` bytes.
/// `first_line` is the file line of the body's first line (for error messages).
pub fn parse(
    path: &Path,
    body: &str,
    first_line: usize,
    weights_size: u64,
) -> Result<TensorIndex, LoadError> {
    let raw: HashMap<String, RawTensor> = toml::from_str(body)
        .map_err(|e| super::toml_error(path, "tensors", body, first_line, &e))?;
    let mut entries = Vec::with_capacity(raw.len());
    for (name, t) in raw {
        entries.push(validate_entry(path, name, t, weights_size)?);
    }
    entries.sort_by(|a, b| (a.offset, &a.name).cmp(&(b.offset, &b.name)));
    let mut prev: Option<&TensorEntry> = None;
    for e in entries.iter().filter(|e| e.size > 0) {
        if let Some(p) = prev {
            if e.offset < p.offset + p.size {
                return Err(LoadError::TensorOverlap {
                    path: path.to_path_buf(),
                    first: p.name.clone(),
                    second: e.name.clone(),
                });
            }
        }
        prev = Some(e);
    }
    let by_name = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.name.clone(), i))
        .collect();
    Ok(TensorIndex { entries, by_name })
}

fn validate_entry(
    path: &Path,
    name: String,
    t: RawTensor,
    weights_size: u64,
) -> Result<TensorEntry, LoadError> {
    let invalid = |reason: String| LoadError::InvalidTensor {
        path: path.to_path_buf(),
        tensor: name.clone(),
        reason,
    };
    let dtype = DType::from_name(&t.encoding).ok_or_else(|| LoadError::UnknownEncoding {
        path: path.to_path_buf(),
        tensor: name.clone(),
        encoding: t.encoding.clone(),
    })?;
    let mut shape = Vec::with_capacity(t.shape.len());
    for &d in &t.shape {
        let d = usize::try_from(d)
            .map_err(|_| invalid(format!("shape {:?} has a negative dimension", t.shape)))?;
        shape.push(d);
    }
    if t.offset < 0 || t.size < 0 {
        return Err(invalid(format!(
            "offset {} and size {} must not be negative",
            t.offset, t.size
        )));
    }
    let (offset, size) = (t.offset as u64, t.size as u64);
    let bv = dtype.block_values();
    if shape.last().copied().unwrap_or(1) % bv != 0 {
        return Err(invalid(format!(
            "innermost dimension of shape {shape:?} is not a multiple of the {dtype} block of {bv} values"
        )));
    }
    let expected = dtype
        .byte_size(&shape)
        .ok_or_else(|| invalid(format!("shape {shape:?} overflows the addressable size")))?;
    if expected != size {
        return Err(LoadError::WeightFormatMismatch {
            path: path.to_path_buf(),
            tensor: name,
            shape,
            encoding: dtype,
            declared: size,
            expected,
        });
    }
    let end = offset.checked_add(size).filter(|&e| e <= weights_size);
    let Some(_) = end else {
        return Err(LoadError::TensorOutOfBounds {
            path: path.to_path_buf(),
            tensor: name,
            offset,
            end: offset.saturating_add(size),
            weights_size,
        });
    };
    let scale = match (dtype, t.scale) {
        (DType::Ternary, None) => {
            return Err(invalid("ternary tensors need a `scale` key".into()));
        }
        (_, s) => s.map(|s| s as f32),
    };
    if scale.is_some_and(|s| !s.is_finite()) {
        return Err(invalid("`scale` must be finite".into()));
    }
    Ok(TensorEntry {
        name,
        shape,
        dtype,
        offset,
        size,
        scale,
    })
}
