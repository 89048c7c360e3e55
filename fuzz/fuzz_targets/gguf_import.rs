//! The GGUF importer on arbitrary file contents: header, metadata, tensor infos,
//! the tokenizer and the tensor mapping must give an `ImportError`, never a
//! panic, a hang or an absurd allocation. Seeds: fuzz/seeds/gguf_import
//! (scripts/make_fuzz_seeds.py); `scripts/fuzz.sh gguf_import`.
#![no_main]

use cyb_llm::import::ImportOptions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("cyb-fuzz-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("fuzz.gguf");
    std::fs::write(&src, data).unwrap();
    let out = dir.join("out.model");
    let _ = cyb_llm::import::gguf::import(&src, &out, &ImportOptions::default());
});
