//! The CTranslate2 (Whisper) importer on an arbitrary folder: the input is split
//! at `folder::SEPARATOR` into model.bin, config.json and vocabulary.txt. Any
//! folder must give an `ImportError`, never a panic, a hang or an absurd
//! allocation. Seeds: fuzz/seeds/ct2_import (scripts/make_fuzz_seeds.py);
//! `scripts/fuzz.sh ct2_import`.
#![no_main]

mod folder;

use cyb_llm::import::ImportOptions;
use libfuzzer_sys::fuzz_target;

const FILES: [&str; 3] = ["model.bin", "config.json", "vocabulary.txt"];

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("cyb-fuzz-ct2-{}", std::process::id()));
    folder::write(&dir, data, &FILES);
    let out = std::env::temp_dir().join(format!("cyb-fuzz-ct2-{}.model", std::process::id()));
    let _ = cyb_llm::import::ct2::import(&dir, &out, &ImportOptions::default());
});
