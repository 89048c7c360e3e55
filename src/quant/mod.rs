//! Dequantizers and quantizers for every encoding of `../shared/spec/quant.md`,
//! bit-identical to gguf-py (`gguf.quants`).

use crate::dtype::DType;

/// Why a byte buffer cannot be decoded as the given encoding.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantError {
    #[error("{dtype}: {bytes} bytes is not a whole number of {block_bytes}-byte blocks")]
    PartialBlock {
        dtype: DType,
        bytes: usize,
        block_bytes: usize,
    },
    #[error("{dtype}: output holds {out} values but the input decodes to {values}")]
    OutputLength {
        dtype: DType,
        out: usize,
        values: usize,
    },
    #[error("{dtype}: no quantizer for this encoding")]
    NoQuantizer { dtype: DType },
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
    let _ = (dtype, bytes, scale, out);
    todo!("filled by the quant work")
}

/// Decodes `bytes` of encoding `dtype` into a new vector.
pub fn dequantize(dtype: DType, bytes: &[u8], scale: Option<f32>) -> Result<Vec<f32>, QuantError> {
    let values = bytes.len() / dtype.block_bytes() * dtype.block_values();
    let mut out = vec![0.0; values];
    dequantize_into(dtype, bytes, scale, &mut out)?;
    Ok(out)
}
