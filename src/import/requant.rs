//! Applies `import --quant` to one tensor: the shared rule of every importer.
//!
//! - `keep`: bytes stay as they are, except `bf16`, which becomes `f32` (exact).
//! - Any other choice re-encodes tensors of two or more dimensions through f32
//!   ([`crate::quant::dequantize`] then [`crate::quant::quantize`]). A tensor already in
//!   the target encoding is copied. When the innermost dimension is not a multiple of the
//!   target's block, the target falls back as llama.cpp's quantizer does: `q4_k` → `q4_0`,
//!   `q6_k` → `q8_0`, and a 32-block encoding → `f16`.
//! - One-dimensional tensors (norms, biases) and integer tensors are never quantized;
//!   `bf16` ones become `f32`.

use super::QuantChoice;
use crate::dtype::DType;
use crate::error::ImportError;
use crate::quant;
use std::borrow::Cow;
use std::path::Path;

/// The encoding `choice` asks for, or `None` for `keep`.
fn target(choice: QuantChoice) -> Option<DType> {
    match choice {
        QuantChoice::Keep => None,
        QuantChoice::F16 => Some(DType::F16),
        QuantChoice::Q8_0 => Some(DType::Q8_0),
        QuantChoice::Q4_0 => Some(DType::Q4_0),
        QuantChoice::Q4K => Some(DType::Q4K),
        QuantChoice::Q6K => Some(DType::Q6K),
    }
}

/// The encoding a tensor with innermost dimension `inner` gets when `wanted` is asked for.
fn fit(wanted: DType, inner: usize) -> DType {
    let mut d = wanted;
    loop {
        if inner.is_multiple_of(d.block_values()) {
            return d;
        }
        d = match d {
            DType::Q4K => DType::Q4_0,
            DType::Q6K => DType::Q8_0,
            _ => return DType::F16,
        };
    }
}

/// Re-encodes the bytes of tensor `name` (`shape`, encoding `dtype`) as `choice` says.
/// `source` names the file in errors. Returns the new encoding and bytes.
pub fn apply<'a>(
    source: &Path,
    name: &str,
    shape: &[usize],
    dtype: DType,
    data: Cow<'a, [u8]>,
    choice: QuantChoice,
) -> Result<(DType, Cow<'a, [u8]>), ImportError> {
    let is_int = matches!(
        dtype,
        DType::I32 | DType::I8 | DType::U8 | DType::I64 | DType::Bool
    );
    let wanted = match target(choice) {
        Some(t) if shape.len() >= 2 && !is_int => fit(t, *shape.last().unwrap_or(&1)),
        _ if dtype == DType::BF16 => DType::F32,
        _ => return Ok((dtype, data)),
    };
    if wanted == dtype {
        return Ok((dtype, data));
    }
    let err = |e: quant::QuantError| ImportError::Format {
        path: source.to_path_buf(),
        reason: format!("tensor `{name}`: cannot convert {dtype} to {wanted}: {e}"),
    };
    let values = quant::dequantize(dtype, &data, None).map_err(err)?;
    let bytes = if wanted == DType::F32 {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    } else {
        quant::quantize(wanted, &values).map_err(err)?
    };
    Ok((wanted, Cow::Owned(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn keep_copies_but_widens_bf16() {
        let p = Path::new("src");
        let data = vec![0x80u8, 0x3f, 0x00, 0x40];
        let (d, out) = apply(
            p,
            "t",
            &[2],
            DType::BF16,
            Cow::Borrowed(&data),
            QuantChoice::Keep,
        )
        .unwrap();
        assert_eq!(d, DType::F32);
        assert_eq!(out.as_ref(), f32_bytes(&[1.0, 2.0]).as_slice());
        let (d, out) = apply(
            p,
            "t",
            &[2],
            DType::F16,
            Cow::Borrowed(&data),
            QuantChoice::Keep,
        )
        .unwrap();
        assert_eq!((d, out.as_ref()), (DType::F16, data.as_slice()));
    }

    #[test]
    fn vectors_stay_and_matrices_fall_back_by_block() {
        let p = Path::new("src");
        let v: Vec<f32> = (0..64).map(|i| i as f32 / 7.0).collect();
        let data = f32_bytes(&v);
        let (d, _) = apply(
            p,
            "n",
            &[64],
            DType::F32,
            Cow::Borrowed(&data),
            QuantChoice::Q4K,
        )
        .unwrap();
        assert_eq!(d, DType::F32);
        let (d, out) = apply(
            p,
            "w",
            &[2, 32],
            DType::F32,
            Cow::Borrowed(&data),
            QuantChoice::Q4K,
        )
        .unwrap();
        assert_eq!(d, DType::Q4_0);
        assert_eq!(out.len() as u64, DType::Q4_0.byte_size(&[2, 32]).unwrap());
        let (d, _) = apply(
            p,
            "w",
            &[4, 16],
            DType::F32,
            Cow::Borrowed(&data),
            QuantChoice::Q8_0,
        )
        .unwrap();
        assert_eq!(d, DType::F16);
    }
}
