//! Limits before allocation: files and inputs that claim huge counts, lengths or
//! shapes (a GGUF's tensor count and arrays, a CTranslate2 variable count, a
//! Hugging Face config's vocab_size, a WAV header's length and rate, an .npy
//! shape) give a named error, never an abort; each claim kind has its test here
//! (the `.model` ones are in loader_corpus.rs).

use cyb_llm::audio::{self, AudioError};
use cyb_llm::import::ImportOptions;
use cyb_llm::ImportError;
use std::path::{Path, PathBuf};
use std::process::Command;

fn gguf_header(n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(n_tensors.to_le_bytes());
    b.extend(n_kv.to_le_bytes());
    b
}

fn import_gguf(dir: &Path, bytes: &[u8]) -> ImportError {
    let src = dir.join("hostile.gguf");
    std::fs::write(&src, bytes).unwrap();
    cyb_llm::import::import(&src, &dir.join("out.model"), &ImportOptions::default()).unwrap_err()
}

#[test]
fn gguf_claiming_2_pow_40_tensors_is_a_format_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = import_gguf(dir.path(), &gguf_header(1 << 40, 0));
    assert!(
        matches!(&e, ImportError::Format { reason, .. } if reason.contains("tensor count") && reason.contains("1099511627776")),
        "{e}"
    );
    assert!(e.to_string().contains("hostile.gguf"), "{e}");
}

#[test]
fn gguf_array_of_2_pow_60_items_is_a_format_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = gguf_header(0, 1);
    b.extend(14u64.to_le_bytes());
    b.extend(b"tokenizer.list");
    b.extend(9u32.to_le_bytes()); // array
    b.extend(8u32.to_le_bytes()); // of strings
    b.extend((1u64 << 60).to_le_bytes());
    b.extend([0u8; 64]);
    let e = import_gguf(dir.path(), &b);
    assert!(
        matches!(&e, ImportError::Format { reason, .. } if reason.contains("`tokenizer.list`")),
        "{e}"
    );
}

#[test]
fn ct2_claiming_4_billion_variables_is_a_format_error() {
    let mut b = Vec::new();
    b.extend(6u32.to_le_bytes()); // binary version
    b.extend(4u16.to_le_bytes());
    b.extend(b"spec");
    b.extend(1u32.to_le_bytes()); // revision
    b.extend(u32::MAX.to_le_bytes()); // variable count
    let e = cyb_llm::import::ct2::reader::parse(Path::new("model.bin"), &b).unwrap_err();
    assert!(
        matches!(&e, ImportError::Format { reason, .. } if reason.contains("truncated while reading a variable name")),
        "{e}"
    );
}

/// A copy of the test folder `tests/fixtures/hf/NAME/model` in `dir/NAME`.
fn hf_fixture_copy(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/hf/{name}/model"));
    let dst = dir.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    dst
}

/// A copy of the Qwen2 test folder with `vocab_size` in config.json set to `vocab`.
fn hf_folder_with_vocab(dir: &Path, vocab: u64) -> PathBuf {
    let dst = hf_fixture_copy("qwen2", dir);
    let cfg = std::fs::read_to_string(dst.join("config.json")).unwrap();
    assert!(cfg.contains("\"vocab_size\": 328"));
    let cfg = cfg.replace("\"vocab_size\": 328", &format!("\"vocab_size\": {vocab}"));
    std::fs::write(dst.join("config.json"), cfg).unwrap();
    dst
}

#[test]
fn hf_config_claiming_2_pow_50_tokens_is_an_error_naming_vocab_size() {
    let dir = tempfile::tempdir().unwrap();
    let src = hf_folder_with_vocab(dir.path(), 1 << 50);
    let out = dir.path().join("out.model");
    let e = cyb_llm::import::import(&src, &out, &ImportOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, ImportError::Format { .. })
            && msg.contains("config.json")
            && msg.contains("vocab_size is 1125899906842624")
            && msg.contains("has 328 rows"),
        "{msg}"
    );
    // The unchanged folder imports (the check does not refuse real models).
    let ok = hf_folder_with_vocab(&dir.path().join("ok"), 328);
    cyb_llm::import::import(&ok, &out, &ImportOptions::default()).unwrap();
}

/// A 16-bit mono PCM WAV at `rate` Hz holding `samples`, whose data chunk claims `data_len` bytes.
fn wav(rate: u32, samples: &[i16], data_len: u32) -> Vec<u8> {
    let mut b = b"RIFF".to_vec();
    b.extend(data_len.saturating_add(36).to_le_bytes());
    b.extend(b"WAVEfmt ");
    b.extend(16u32.to_le_bytes());
    b.extend(1u16.to_le_bytes()); // PCM
    b.extend(1u16.to_le_bytes()); // mono
    b.extend(rate.to_le_bytes());
    b.extend((rate.wrapping_mul(2)).to_le_bytes());
    b.extend(2u16.to_le_bytes());
    b.extend(16u16.to_le_bytes());
    b.extend(b"data");
    b.extend(data_len.to_le_bytes());
    for s in samples {
        b.extend(s.to_le_bytes());
    }
    b
}

#[test]
fn wav_claiming_a_4_gib_data_chunk_decodes_the_samples_present() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("long.wav");
    let samples: Vec<i16> = (0..1600).map(|i| (i * 17 % 2000) as i16).collect();
    std::fs::write(&p, wav(16_000, &samples, u32::MAX - 64)).unwrap();
    match audio::decode_file(&p) {
        Ok(a) => assert_eq!(a.samples.len(), samples.len()),
        Err(e) => assert!(
            matches!(e, AudioError::Unsupported { .. }) && e.to_string().contains("long.wav"),
            "{e}"
        ),
    }
}

#[test]
fn wav_claiming_a_rate_of_1_hz_is_a_sample_rate_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("slow.wav");
    let samples = vec![100i16; 4000];
    std::fs::write(&p, wav(1, &samples, 8000)).unwrap();
    let e = audio::load_16k(&p).unwrap_err();
    assert!(
        matches!(e, AudioError::SampleRate { rate: 1, .. }) && e.to_string().contains("slow.wav"),
        "{e}"
    );
    // 4000 samples at 1 Hz would have resampled to 64 million.
    assert!(audio::resample(&vec![0.0; 4000], 1, 16_000).is_err());
    assert!(audio::resample(&vec![0.0; 4000], 0, 16_000).is_err());
}

/// An f32 .npy header (v1.0) declaring `shape`, followed by `data_bytes` zero bytes.
fn npy(shape: &str, data_bytes: usize) -> Vec<u8> {
    let mut dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((dict.len() as u16).to_le_bytes());
    b.extend(dict.as_bytes());
    b.resize(b.len() + data_bytes, 0);
    b
}

#[test]
fn npy_claiming_a_2_pow_64_element_shape_is_a_named_error() {
    let dir = tempfile::tempdir().unwrap();
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/onnx/ops/binary_add");
    let huge = dir.path().join("huge.npy");
    std::fs::write(&huge, npy("(4294967296, 4294967296)", 16)).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .arg("eval")
        .arg(case.join("model.onnx"))
        .arg("-i")
        .arg(format!("a={}", huge.display()))
        .arg("-i")
        .arg(format!("b={}", case.join("in_b.npy").display()))
        .args(["--backend", "cpu", "-o"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("input `a`") && err.contains("huge.npy claims shape [4294967296, 4294967296]"),
        "{err}"
    );
}

#[test]
fn gguf_claiming_4_billion_layers_is_a_format_error() {
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/gguf_import/tiny_llama.gguf");
    let mut b = std::fs::read(seed).unwrap();
    // The value of `llama.block_count` (uint32 1), after its key and type.
    let key = b"llama.block_count";
    let at = memchr::memmem::find(&b, key).unwrap() + key.len();
    assert_eq!(b[at..at + 8], [4, 0, 0, 0, 1, 0, 0, 0]);
    b[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let e = import_gguf(dir.path(), &b);
    assert!(
        matches!(&e, ImportError::Format { reason, .. } if reason.contains("`llama.block_count` = 4294967295")),
        "{e}"
    );
}

#[test]
fn hf_head_dim_overflowing_with_the_head_count_is_an_error_naming_head_dim() {
    let dir = tempfile::tempdir().unwrap();
    let dst = hf_fixture_copy("llama_fused", dir.path());
    let cfg = std::fs::read_to_string(dst.join("config.json")).unwrap();
    let cfg = cfg.replacen('{', "{\"head_dim\": 4611686018427387904,", 1);
    std::fs::write(dst.join("config.json"), cfg).unwrap();
    let e = cyb_llm::import::import(
        &dst,
        &dir.path().join("out.model"),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("head_dim"), "{e}");
}
