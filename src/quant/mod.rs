//! Dequantizers and quantizers for every encoding of `../shared/spec/quant.md`,
//! bit-identical to gguf-py (`gguf.quants`).
//!
//! Layout: [`plain`] (f32, f16, bf16, integers, ternary), [`blocks32`] (q8_0, q4_0, q4_1,
//! q5_0, q5_1), [`kquants`] (q2_k .. q6_k) and [`quantize()`] (f32 to f16, bf16,
//! q8_0, q4_0, q4_k, q6_k).

pub mod blocks32;
pub mod kquants;
pub mod plain;
mod quantize;

pub use quantize::quantize;

use crate::dtype::DType;

/// Why a byte buffer cannot be decoded as the given encoding, or values cannot be encoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantError {
    /// The byte length is not a whole number of blocks.
    #[error("{dtype}: {bytes} bytes is not a whole number of {block_bytes}-byte blocks")]
    PartialBlock {
        dtype: DType,
        bytes: usize,
        block_bytes: usize,
    },
    /// The output slice does not hold exactly the decoded values.
    #[error("{dtype}: output holds {out} values but the input decodes to {values}")]
    OutputLength {
        dtype: DType,
        out: usize,
        values: usize,
    },
    /// The encoding has no quantizer (see [`quantize`] for the list).
    #[error("{dtype}: no quantizer for this encoding")]
    NoQuantizer { dtype: DType },
    /// `ternary` needs the tensor's `scale` key, and none was given.
    #[error(
        "{dtype}: the tensor has no `scale` (ternary tensors need one in their `tensors` entry)"
    )]
    MissingScale { dtype: DType },
    /// The number of values to quantize is not a multiple of the block.
    #[error("{dtype}: {values} values is not a whole number of {block_values}-value blocks")]
    PartialRow {
        dtype: DType,
        values: usize,
        block_values: usize,
    },
    /// A value to quantize into a block encoding is NaN or infinite.
    #[error("{dtype}: value {index} is not finite ({value}); block encodings need finite input")]
    NonFinite {
        dtype: DType,
        index: usize,
        value: f32,
    },
}

/// Decodes `bytes` of encoding `dtype` into `out` (one f32 per value).
/// `scale` is the per-tensor scale of `ternary` (ignored otherwise).
/// Integer encodings are converted to f32 by value.
pub fn dequantize_into(
    dtype: DType,
    bytes: &[u8],
    scale: Option<f32>,
    out: &mut [f32],
) -> Result<(), QuantError> {
    let block_bytes = dtype.block_bytes();
    if !bytes.len().is_multiple_of(block_bytes) {
        return Err(QuantError::PartialBlock {
            dtype,
            bytes: bytes.len(),
            block_bytes,
        });
    }
    let values = bytes.len() / block_bytes * dtype.block_values();
    if out.len() != values {
        return Err(QuantError::OutputLength {
            dtype,
            out: out.len(),
            values,
        });
    }
    match dtype {
        DType::F32 => plain::f32s(bytes, out),
        DType::F16 => plain::f16s(bytes, out),
        DType::BF16 => plain::bf16s(bytes, out),
        DType::I32 => plain::i32s(bytes, out),
        DType::I8 => plain::i8s(bytes, out),
        DType::U8 | DType::Bool => plain::u8s(bytes, out),
        DType::I64 => plain::i64s(bytes, out),
        DType::Ternary => {
            let scale = scale.ok_or(QuantError::MissingScale { dtype })?;
            plain::ternary(bytes, scale, out)
        }
        DType::Q8_0 => blocks(bytes, out, dtype, blocks32::q8_0),
        DType::Q4_0 => blocks(bytes, out, dtype, blocks32::q4_0),
        DType::Q4_1 => blocks(bytes, out, dtype, blocks32::q4_1),
        DType::Q5_0 => blocks(bytes, out, dtype, blocks32::q5_0),
        DType::Q5_1 => blocks(bytes, out, dtype, blocks32::q5_1),
        DType::Q2K => blocks(bytes, out, dtype, kquants::q2_k),
        DType::Q3K => blocks(bytes, out, dtype, kquants::q3_k),
        DType::Q4K => blocks(bytes, out, dtype, kquants::q4_k),
        DType::Q5K => blocks(bytes, out, dtype, kquants::q5_k),
        DType::Q6K => blocks(bytes, out, dtype, kquants::q6_k),
    }
    Ok(())
}

/// Decodes `bytes` of encoding `dtype` into a new vector.
pub fn dequantize(dtype: DType, bytes: &[u8], scale: Option<f32>) -> Result<Vec<f32>, QuantError> {
    let values = bytes.len() / dtype.block_bytes() * dtype.block_values();
    let mut out = vec![0.0; values];
    dequantize_into(dtype, bytes, scale, &mut out)?;
    Ok(out)
}

/// Runs a one-block decoder over whole blocks (lengths already checked by the caller).
fn blocks(bytes: &[u8], out: &mut [f32], dtype: DType, decode: fn(&[u8], &mut [f32])) {
    let chunks = bytes.chunks_exact(dtype.block_bytes());
    for (block, y) in chunks.zip(out.chunks_exact_mut(dtype.block_values())) {
        decode(block, y);
    }
}

/// Reads the little-endian f16 at `b[at..at + 2]` as f32 (exact).
#[inline]
pub(crate) fn f16_at(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_errors_name_the_encoding() {
        let e = dequantize(DType::Q4K, &[0; 145], None).unwrap_err();
        assert_eq!(
            e,
            QuantError::PartialBlock {
                dtype: DType::Q4K,
                bytes: 145,
                block_bytes: 144
            }
        );
        let mut out = [0.0; 31];
        let e = dequantize_into(DType::Q8_0, &[0; 34], None, &mut out).unwrap_err();
        assert_eq!(
            e,
            QuantError::OutputLength {
                dtype: DType::Q8_0,
                out: 31,
                values: 32
            }
        );
        let e = dequantize(DType::Ternary, &[0; 4], None).unwrap_err();
        assert_eq!(
            e,
            QuantError::MissingScale {
                dtype: DType::Ternary
            }
        );
        assert!(e.to_string().contains("scale"));
    }

    #[test]
    fn empty_input_decodes_to_nothing() {
        for dtype in DType::ALL {
            assert_eq!(
                dequantize(dtype, &[], Some(1.0)).unwrap(),
                Vec::<f32>::new()
            );
        }
    }
}
