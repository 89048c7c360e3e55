//! NumPy `.npy` files of f32 or i64 values (C order), read and written by `eval`
//! and `diffuse`.

use npyz::WriterBuilder;
use std::io::BufWriter;
use std::path::Path;

/// Reads an f32 `.npy` file; errors start with `what` (`input `noisy``, `--noise`).
pub fn read_f32(what: &str, path: &Path) -> Result<(Vec<usize>, Vec<f32>), String> {
    read(what, path, ("'<f4'", "f32 (<f4)", "numpy.float32"))
}

/// Reads an i64 `.npy` file; errors start with `what`.
pub fn read_i64(what: &str, path: &Path) -> Result<(Vec<usize>, Vec<i64>), String> {
    read(what, path, ("'<i8'", "i64 (<i8)", "numpy.int64"))
}

/// Reads a `.npy` file of values `T`, whose header descr, name and NumPy type are `kind`.
fn read<T: npyz::Deserialize>(
    what: &str,
    path: &Path,
    kind: (&str, &str, &str),
) -> Result<(Vec<usize>, Vec<T>), String> {
    let (descr, type_name, numpy) = kind;
    let width = std::mem::size_of::<T>();
    let bytes =
        std::fs::read(path).map_err(|e| format!("{what}: cannot read {}: {e}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..])
        .map_err(|e| format!("{what}: {} is not a .npy file: {e}", path.display()))?;
    if npy.order() != npyz::Order::C {
        return Err(format!(
            "{what}: {} is in Fortran order; save it with numpy.ascontiguousarray",
            path.display()
        ));
    }
    let dtype = npy.dtype().descr();
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
        .collect();
    if dtype != descr {
        return Err(format!(
            "{what}: {} holds {dtype} values; {type_name} is needed: convert with .astype({numpy})",
            path.display()
        ));
    }
    // The header's shape is a claim: checked against the bytes present before reading.
    let values = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if values
        .and_then(|n| n.checked_mul(width))
        .is_none_or(|b| b > bytes.len())
    {
        return Err(format!(
            "{what}: {} claims shape {shape:?}, more {type_name} values than its {} bytes hold (truncated or damaged file)",
            path.display(),
            bytes.len()
        ));
    }
    let data = npy
        .into_vec::<T>()
        .map_err(|e| format!("{what}: {}: {e}", path.display()))?;
    if Some(data.len()) != values {
        return Err(format!(
            "{what}: {} holds {} values, its shape {shape:?} says otherwise (truncated or damaged file)",
            path.display(),
            data.len()
        ));
    }
    Ok((shape, data))
}

/// Writes `data` with `shape` as an f32 `.npy` file.
pub fn write_f32(path: &Path, shape: &[usize], data: &[f32]) -> std::io::Result<()> {
    write(path, shape, data)
}

/// Writes `data` with `shape` as an i64 `.npy` file.
pub fn write_i64(path: &Path, shape: &[usize], data: &[i64]) -> std::io::Result<()> {
    write(path, shape, data)
}

fn write<T: npyz::Serialize + npyz::AutoSerialize + Copy>(
    path: &Path,
    shape: &[usize],
    data: &[T],
) -> std::io::Result<()> {
    let file = BufWriter::new(std::fs::File::create(path)?);
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let mut w = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(&shape)
        .writer(file)
        .begin_nd()?;
    w.extend(data.iter().copied())?;
    w.finish()
}
