//! Weight and tensor encodings (`../shared/spec/quant.md`): names, aliases and
//! block geometry. Dequantizers live in [`crate::quant`].

use std::fmt;

/// One encoding of the `.model` tensor index. Block layouts are byte-identical to GGUF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Ternary,
    I32,
    I8,
    U8,
    /// Run-time integers (ONNX int64): indices, lengths, shapes.
    I64,
    /// Run-time truth values (ONNX bool), one byte each (0 or 1).
    Bool,
}

impl DType {
    /// The weight encodings a matmul takes: the float encodings and the block
    /// quantizations (legacy and k-quants), in the order of the format table.
    pub const MATMUL_WEIGHTS: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q2K,
        DType::Q3K,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
    ];

    /// Every encoding, in the order of the format table: [`Self::MATMUL_WEIGHTS`],
    /// then ternary and the integer encodings.
    pub const ALL: [DType; 17] = {
        let rest = [DType::Ternary, DType::I32, DType::I8, DType::U8];
        let mut all = [DType::F32; 17];
        let mut i = 0;
        while i < all.len() {
            all[i] = if i < 13 {
                Self::MATMUL_WEIGHTS[i]
            } else {
                rest[i - 13]
            };
            i += 1;
        }
        all
    };

    /// The encodings of run-time graph values that are not in the format table's
    /// weight encodings (graph inputs, node outputs, constants of the graph path).
    pub const RUNTIME: [DType; 2] = [DType::I64, DType::Bool];

    /// The name writers emit in the `tensors` section.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::Q8_0 => "q8_0",
            DType::Q4_0 => "q4_0",
            DType::Q4_1 => "q4_1",
            DType::Q5_0 => "q5_0",
            DType::Q5_1 => "q5_1",
            DType::Q2K => "q2_k",
            DType::Q3K => "q3_k",
            DType::Q4K => "q4_k",
            DType::Q5K => "q5_k",
            DType::Q6K => "q6_k",
            DType::Ternary => "ternary",
            DType::I32 => "i32",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    /// Parses a canonical name or one of the aliases readers accept (`u32`, `q8`, `q4k`, ...).
    pub fn from_name(s: &str) -> Option<DType> {
        let canonical = match s {
            "u32" => "f32",
            "u16" => "f16",
            "q8" => "q8_0",
            "q4" => "q4_0",
            "q2k" => "q2_k",
            "q3k" => "q3_k",
            "q4k" => "q4_k",
            "q5k" => "q5_k",
            "q6k" => "q6_k",
            other => other,
        };
        DType::ALL
            .into_iter()
            .chain(DType::RUNTIME)
            .find(|d| d.name() == canonical)
    }

    /// Number of values in one block (1 for plain types).
    pub fn block_values(self) -> usize {
        match self {
            DType::Q8_0 | DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 => 32,
            DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K => 256,
            DType::Ternary => 4,
            _ => 1,
        }
    }

    /// Number of bytes in one block.
    pub fn block_bytes(self) -> usize {
        match self {
            DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I8 | DType::U8 | DType::Bool | DType::Ternary => 1,
            DType::Q8_0 => 34,
            DType::Q4_0 => 18,
            DType::Q4_1 => 20,
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::Q2K => 84,
            DType::Q3K => 110,
            DType::Q4K => 144,
            DType::Q5K => 176,
            DType::Q6K => 210,
        }
    }

    /// Byte offsets of the f16 scale fields (`d`, and `m` / `dmin` where there
    /// is one) in one block (quant.md layouts); none for the other encodings.
    pub fn f16_scale_offsets(self) -> &'static [usize] {
        match self {
            DType::Q8_0 | DType::Q4_0 | DType::Q5_0 => &[0],
            DType::Q4_1 | DType::Q5_1 | DType::Q4K | DType::Q5K => &[0, 2],
            DType::Q2K => &[80, 82],
            DType::Q3K => &[108],
            DType::Q6K => &[208],
            _ => &[],
        }
    }

    /// True for the block-quantized encodings (and ternary).
    pub fn is_quantized(self) -> bool {
        self.block_values() > 1
    }

    /// Byte size of a row-major tensor of this encoding, or `None` when the innermost
    /// dimension is not a multiple of the block or the size overflows `u64`.
    pub fn byte_size(self, shape: &[usize]) -> Option<u64> {
        let inner = *shape.last().unwrap_or(&1) as u64;
        let bv = self.block_values() as u64;
        if !inner.is_multiple_of(bv) {
            return None;
        }
        let mut elems: u64 = 1;
        for &d in shape {
            elems = elems.checked_mul(d as u64)?;
        }
        (elems / bv).checked_mul(self.block_bytes() as u64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_resolve() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_name("q4k"), Some(DType::Q4K));
        assert_eq!(DType::from_name("u32"), Some(DType::F32));
        assert_eq!(DType::from_name("q9_9"), None);
    }

    #[test]
    fn byte_size_checks_blocks_and_overflow() {
        assert_eq!(DType::Q8_0.byte_size(&[2, 64]), Some(2 * 2 * 34));
        assert_eq!(DType::Q4K.byte_size(&[3, 100]), None);
        assert_eq!(DType::F32.byte_size(&[1 << 40, 1 << 40]), None);
        assert_eq!(DType::Ternary.byte_size(&[8]), Some(2));
    }
}
