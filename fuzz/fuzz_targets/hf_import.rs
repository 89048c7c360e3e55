//! The Hugging Face importer on an arbitrary folder: the input is split at
//! `folder::SEPARATOR` into config.json, tokenizer.json, tokenizer_config.json
//! and model.safetensors. Any folder must give an `ImportError`, never a panic,
//! a hang or an absurd allocation. Seeds: fuzz/seeds/hf_import
//! (scripts/make_fuzz_seeds.py); `scripts/fuzz.sh hf_import`.
#![no_main]

mod folder;

use cyb_llm::import::ImportOptions;
use libfuzzer_sys::fuzz_target;

const FILES: [&str; 4] = [
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "model.safetensors",
];

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("cyb-fuzz-hf-{}", std::process::id()));
    folder::write(&dir, data, &FILES);
    let out = std::env::temp_dir().join(format!("cyb-fuzz-hf-{}.model", std::process::id()));
    let _ = cyb_llm::import::hf::import(&dir, &out, &ImportOptions::default());
});
