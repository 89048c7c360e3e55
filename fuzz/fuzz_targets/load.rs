//! Fuzzes `cyb_llm::load` on arbitrary file contents: any input must give
//! `Ok` or a structured `LoadError`, never a panic or an absurd allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("cyb-fuzz-{}.model", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(data).unwrap();
    drop(f);
    if let Ok(model) = cyb_llm::load(&path) {
        for e in model.tensors.entries() {
            let _ = model.tensor_of(e).dequantize();
        }
    }
});
