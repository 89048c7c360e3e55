//! Corrupted variants of the committed fuzz seeds (fuzz/seeds: a GGUF, Hugging
//! Face folders, a CTranslate2 folder, WAV / FLAC / MP3 files), generated here:
//! truncations, flipped bytes and zeroed runs spread over each file. Every
//! variant must be imported (decoded) or rejected with an error naming the
//! source, within seconds: no panic, no hang.

#[path = "../fuzz/fuzz_targets/folder.rs"]
mod folder;

use cyb_llm::import::ImportOptions;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The variants of `bytes`: 16 truncations, 48 single flipped bytes and 16
/// zeroed 8-byte runs, at offsets spread evenly over the input.
fn variants(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let n = bytes.len();
    let at = |i: usize, k: usize| i * n / k;
    let mut out = Vec::new();
    for i in 0..16 {
        out.push((format!("cut at {}", at(i, 16)), bytes[..at(i, 16)].to_vec()));
    }
    for i in 0..48 {
        let mut b = bytes.to_vec();
        b[at(i, 48)] ^= 0xff;
        out.push((format!("byte {} flipped", at(i, 48)), b));
    }
    for i in 0..16 {
        let mut b = bytes.to_vec();
        let s = at(i, 16);
        b[s..(s + 8).min(n)].fill(0);
        out.push((format!("8 bytes at {s} zeroed"), b));
    }
    out
}

fn seeds(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds for {target}");
    files
}

/// Runs `f` on every variant of every seed of `target`: no panic, at most 10 s
/// each, and an error that contains `name`. Returns (accepted, rejected).
fn check<E: std::fmt::Display>(
    target: &str,
    name: &str,
    f: impl Fn(&[u8]) -> Result<(), E>,
) -> (usize, usize) {
    let (mut ok, mut rejected) = (0, 0);
    for seed in seeds(target) {
        for (what, bytes) in variants(&std::fs::read(&seed).unwrap()) {
            let started = Instant::now();
            let got = catch_unwind(AssertUnwindSafe(|| f(&bytes)));
            let label = format!("{} ({what})", seed.display());
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{label}: took {:?}",
                started.elapsed()
            );
            match got {
                Err(_) => panic!("{label}: panicked"),
                Ok(Ok(())) => ok += 1,
                Ok(Err(e)) => {
                    assert!(
                        e.to_string().contains(name),
                        "{label}: error does not name {name}: {e}"
                    );
                    rejected += 1;
                }
            }
        }
    }
    eprintln!("{target}: {ok} variants accepted, {rejected} rejected");
    (ok, rejected)
}

#[test]
fn gguf_variants_import_or_give_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("variant.gguf");
    let out = dir.path().join("out.model");
    let (_, rejected) = check("gguf_import", "variant.gguf", |b| {
        std::fs::write(&src, b).unwrap();
        cyb_llm::import::import(&src, &out, &ImportOptions::default())
    });
    assert!(rejected > 0);
}

/// The variants of `target`'s seeds, each split into the folder of `files`
/// (as the fuzz target does) and imported: (accepted, rejected).
fn folder_variants(target: &str, files: &[&str]) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(format!("{target}-variant"));
    let out = dir.path().join("out.model");
    check(target, &format!("{target}-variant"), |b| {
        folder::write(&src, b, files);
        cyb_llm::import::import(&src, &out, &ImportOptions::default())
    })
}

#[test]
fn hugging_face_variants_import_or_give_errors_naming_the_folder() {
    let files = [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.safetensors",
    ];
    assert!(folder_variants("hf_import", &files).1 > 0);
}

#[test]
fn ctranslate2_variants_import_or_give_errors_naming_the_folder() {
    let files = ["model.bin", "config.json", "vocabulary.txt"];
    assert!(folder_variants("ct2_import", &files).1 > 0);
}

#[test]
fn audio_variants_decode_or_give_errors_naming_the_file() {
    // The seeds' first byte is the fuzz target's name hint: 0 wav, 1 flac, 2 mp3.
    let (ok, rejected) = check("audio_decode", "variant.", |b| {
        let Some((&hint, rest)) = b.split_first() else {
            return Ok(());
        };
        let name = ["variant.wav", "variant.flac", "variant.mp3"][hint as usize % 3];
        cyb_llm::audio::bytes_16k(rest.to_vec(), Path::new(name)).map(|_| ())
    });
    assert!(ok > 0 && rejected > 0);
}
