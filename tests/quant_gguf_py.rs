//! Encodings against independent references: the fixtures of `tests/fixtures/quant/`, written
//! by `scripts/make_quant_fixtures.py` from gguf-py (`gguf.quants`), numpy, quant.md's ternary
//! table, and ggml's reference k-quant quantizers. Dequantizers must be bit-identical;
//! quantizers must produce identical bytes.

use cyb_llm::quant::{dequantize, quantize};
use cyb_llm::DType;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::PathBuf;

#[derive(Deserialize)]
struct Manifest {
    fixtures: Vec<Fixture>,
}

#[derive(Deserialize)]
struct Fixture {
    kind: String,
    dtype: String,
    input: String,
    output: String,
    scale: Option<f32>,
    reference: String,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quant")
}

fn manifest() -> Manifest {
    let text = std::fs::read_to_string(dir().join("manifest.json")).expect("manifest.json");
    serde_json::from_str(&text).expect("valid manifest")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
fn every_encoding_dequantizes_bit_identically() {
    let mut seen = BTreeSet::new();
    for f in manifest()
        .fixtures
        .iter()
        .filter(|f| f.kind == "dequantize")
    {
        let dtype = DType::from_name(&f.dtype).expect("known dtype");
        let got = dequantize(dtype, &read(&f.input), f.scale).expect("decodes");
        let want = f32s(&read(&f.output));
        assert_eq!(got.len(), want.len(), "{}: value count", f.dtype);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{} value {i}: got {g:e}, {} gives {w:e}",
                f.dtype,
                f.reference
            );
        }
        seen.insert(dtype);
    }
    let all: BTreeSet<DType> = DType::ALL.into_iter().collect();
    assert_eq!(seen, all, "every encoding has a dequantize fixture");
}

#[test]
fn quantizers_match_gguf_py_and_ggml_byte_for_byte() {
    let mut seen = BTreeSet::new();
    for f in manifest().fixtures.iter().filter(|f| f.kind == "quantize") {
        let dtype = DType::from_name(&f.dtype).expect("known dtype");
        let x = f32s(&read(&f.input));
        let got = quantize(dtype, &x).expect("quantizes");
        let want = read(&f.output);
        assert_eq!(got.len(), want.len(), "{}: byte count", f.dtype);
        let bb = dtype.block_bytes();
        for (b, (g, w)) in got.chunks(bb).zip(want.chunks(bb)).enumerate() {
            assert_eq!(g, w, "{} block {b} differs from {}", f.dtype, f.reference);
        }
        seen.insert(dtype);
    }
    let expected: BTreeSet<DType> = [
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4K,
        DType::Q6K,
    ]
    .into_iter()
    .collect();
    assert_eq!(seen, expected, "every quantizer has a fixture");
}
