//! `TensorProto` values: typed fields, `raw_data` (little-endian), or
//! external data (`location` / `offset` / `length` in a file beside the model).

use super::proto::TensorProto;
use super::sym::Sym;
use super::translate::Val;
use std::path::Path;
use std::sync::Arc;

/// The value of `t`, reading external data relative to `dir`.
pub fn value(t: &TensorProto, dir: &Path) -> Result<Val, String> {
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("tensor `{}` has dimension {d}", t.name)))
        .collect::<Result<Vec<_>, _>>()?;
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("tensor `{}`: shape {shape:?} overflows", t.name))?;
    let external;
    let raw: &[u8] = if t.data_location == 1 {
        external = read_external(t, dir)?;
        &external
    } else {
        &t.raw_data
    };
    let width = match t.data_type {
        1 | 6 => 4,
        7 | 11 => 8,
        9 | 2 | 3 => 1,
        10 => 2,
        other => {
            return Err(format!(
                "tensor `{}` has ONNX data type {other}; f32, f16, f64, i64, i32, i8, u8 and bool are read",
                t.name
            ))
        }
    };
    let from_raw = !raw.is_empty();
    if from_raw && Some(raw.len()) != count.checked_mul(width) {
        return Err(format!(
            "tensor `{}`: {} bytes of data for shape {shape:?} ({count} values of {width} bytes expected)",
            t.name,
            raw.len(),
        ));
    }
    let typed_len = match t.data_type {
        1 => t.float_data.len(),
        6 | 9 | 2 | 3 | 10 => t.int32_data.len(),
        7 => t.int64_data.len(),
        _ => t.double_data.len(),
    };
    if !from_raw && typed_len != count {
        return Err(format!(
            "tensor `{}`: {typed_len} values for shape {shape:?} ({count} expected)",
            t.name
        ));
    }
    let chunk = |i: usize| &raw[i * width..(i + 1) * width];
    let floats = |f: Vec<f32>| Val::Floats {
        shape: shape.clone(),
        data: Arc::new(f),
    };
    let ints = |v: Vec<i64>| Val::Ints {
        shape: shape.clone(),
        data: v.into_iter().map(Sym::known).collect(),
    };
    Ok(match (t.data_type, from_raw) {
        (1, true) => floats(
            (0..count)
                .map(|i| f32::from_le_bytes(chunk(i).try_into().unwrap_or_default()))
                .collect(),
        ),
        (1, false) => floats(t.float_data.clone()),
        (10, true) => floats(
            (0..count)
                .map(|i| half::f16::from_le_bytes(chunk(i).try_into().unwrap_or_default()).to_f32())
                .collect(),
        ),
        (10, false) => floats(
            t.int32_data
                .iter()
                .map(|&b| half::f16::from_bits(b as u16).to_f32())
                .collect(),
        ),
        (11, true) => floats(
            (0..count)
                .map(|i| f64::from_le_bytes(chunk(i).try_into().unwrap_or_default()) as f32)
                .collect(),
        ),
        (11, false) => floats(t.double_data.iter().map(|&d| d as f32).collect()),
        (7, true) => ints(
            (0..count)
                .map(|i| i64::from_le_bytes(chunk(i).try_into().unwrap_or_default()))
                .collect(),
        ),
        (7, false) => ints(t.int64_data.clone()),
        (6, true) => ints(
            (0..count)
                .map(|i| i32::from_le_bytes(chunk(i).try_into().unwrap_or_default()) as i64)
                .collect(),
        ),
        (3, true) => ints((0..count).map(|i| raw[i] as i8 as i64).collect()),
        (2 | 9, true) => ints((0..count).map(|i| raw[i] as i64).collect()),
        (_, _) => ints(t.int32_data.iter().map(|&v| v as i64).collect()),
    })
}

fn read_external(t: &TensorProto, dir: &Path) -> Result<Vec<u8>, String> {
    let get = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.as_str())
    };
    let location = get("location")
        .ok_or_else(|| format!("tensor `{}` is external but names no location", t.name))?;
    if Path::new(location).is_absolute() || location.split(['/', '\\']).any(|p| p == "..") {
        return Err(format!(
            "tensor `{}`: external data location `{location}` must be a path inside the model's folder",
            t.name
        ));
    }
    let number = |k: &str| -> Result<Option<u64>, String> {
        get(k)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    format!(
                        "tensor `{}`: external `{k}` = `{v}` is not a number",
                        t.name
                    )
                })
            })
            .transpose()
    };
    let path = dir.join(location);
    let bytes = std::fs::read(&path).map_err(|e| {
        format!(
            "tensor `{}`: cannot read its external data {}: {e} (keep the data file beside the .onnx file)",
            t.name,
            path.display()
        )
    })?;
    let offset = number("offset")?.unwrap_or(0) as usize;
    let length = number("length")?.map_or(bytes.len().saturating_sub(offset), |l| l as usize);
    bytes
        .get(offset..offset.saturating_add(length))
        .map(<[u8]>::to_vec)
        .ok_or_else(|| {
            format!(
                "tensor `{}`: external data {} has {} bytes, offset {offset} + length {length} reach past its end",
                t.name,
                path.display(),
                bytes.len()
            )
        })
}
