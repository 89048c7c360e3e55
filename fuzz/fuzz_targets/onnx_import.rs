//! The ONNX importer on arbitrary bytes: decoding, initializer values and the translation
//! must return an error, never panic. Seeds: `scripts/fuzz.sh onnx_import` copies the committed
//! op-case models (tests/fixtures/onnx/ops/*/model.onnx).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    // External data would be looked up beside this path, which holds no files.
    let _ = cyb_llm::import::onnx::convert(Path::new("/nonexistent/fuzz.onnx"), data);
});
