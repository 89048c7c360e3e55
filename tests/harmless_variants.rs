//! The other half of the corrupted-variant corpora (corrupt_corpora.rs,
//! loader_corpus.rs): changes that are harmless by construction — JSON
//! reformatted, its keys reordered, unknown keys added, GGUF padding after the
//! data, unknown WAV chunks, an ONNX documentation string — must give output
//! identical to the original's: the same `.model` bytes from an import, the
//! same samples from the audio decoder.

#[path = "../fuzz/fuzz_targets/folder.rs"]
mod folder;

mod fs_util;

use cyb_llm::import::onnx::proto::ModelProto;
use cyb_llm::import::{import, ImportOptions};
use fs_util::copy_dir;
use prost::Message;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `.model` bytes imported from `src` (written under `out_dir`).
fn imported(src: &Path, out_dir: &Path) -> Vec<u8> {
    let out = out_dir.join("out.model");
    import(src, &out, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    std::fs::read(out).unwrap()
}

/// `json` reformatted: pretty-printed, keys of every object in reverse order,
/// plus `extra` keys at the top level.
fn reformatted(json: &[u8], extra: &[(&str, serde_json::Value)]) -> Vec<u8> {
    fn reverse(v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let entries: Vec<_> = m.into_iter().collect();
                serde_json::Value::Object(
                    entries
                        .into_iter()
                        .rev()
                        .map(|(k, v)| (k, reverse(v)))
                        .collect(),
                )
            }
            serde_json::Value::Array(a) => {
                serde_json::Value::Array(a.into_iter().map(reverse).collect())
            }
            other => other,
        }
    }
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    if let serde_json::Value::Object(m) = &mut v {
        for (k, x) in extra {
            m.insert(k.to_string(), x.clone());
        }
    }
    serde_json::to_vec_pretty(&reverse(v)).unwrap()
}

/// Imports the folder `original` and a copy edited by `edit` (same folder
/// name, another parent) and requires identical `.model` bytes.
fn folder_edit_is_harmless(original: &Path, edit: impl Fn(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let name = original.file_name().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    copy_dir(original, &a.join(name));
    copy_dir(original, &b.join(name));
    edit(&b.join(name));
    let want = imported(&a.join(name), &a);
    let got = imported(&b.join(name), &b);
    assert!(
        want == got,
        "{}: the harmless edit changed the imported .model",
        original.display()
    );
}

fn rewrite_json(path: &Path, extra: &[(&str, serde_json::Value)]) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, reformatted(&bytes, extra)).unwrap();
}

#[test]
fn hugging_face_json_reformatted_with_unknown_keys_imports_identically() {
    let original = root().join("tests/fixtures/hf/llama_fused/model");
    folder_edit_is_harmless(&original, |d| {
        let note = [("_harmless_note", serde_json::json!("added by a test"))];
        rewrite_json(&d.join("config.json"), &note);
        rewrite_json(&d.join("tokenizer_config.json"), &note);
    });
}

#[test]
fn ctranslate2_config_reformatted_imports_identically() {
    let dir = tempfile::tempdir().unwrap();
    let seed = std::fs::read(root().join("fuzz/seeds/ct2_import/tiny_whisper")).unwrap();
    let folder_path = dir.path().join("tiny_whisper");
    folder::write(
        &folder_path,
        &seed,
        &["model.bin", "config.json", "vocabulary.txt"],
    );
    folder_edit_is_harmless(&folder_path, |d| {
        rewrite_json(
            &d.join("config.json"),
            &[("_harmless_note", serde_json::json!(1))],
        );
    });
}

#[test]
fn gguf_with_bytes_after_its_tensor_data_imports_identically() {
    let dir = tempfile::tempdir().unwrap();
    let seed = std::fs::read(root().join("fuzz/seeds/gguf_import/tiny_llama.gguf")).unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for d in [&a, &b] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(a.join("tiny.gguf"), &seed).unwrap();
    let mut padded = seed.clone();
    padded.extend([0u8; 32]);
    std::fs::write(b.join("tiny.gguf"), &padded).unwrap();
    assert!(imported(&a.join("tiny.gguf"), &a) == imported(&b.join("tiny.gguf"), &b));
}

/// A RIFF chunk `id` holding `body` (padded to an even length).
fn chunk(id: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut c = id.to_vec();
    c.extend((body.len() as u32).to_le_bytes());
    c.extend(body);
    if body.len() % 2 == 1 {
        c.push(0);
    }
    c
}

#[test]
fn wav_with_unknown_chunks_decodes_to_the_same_samples() {
    for seed in ["mono16.wav", "mono24.wav", "stereo8.wav", "float.wav"] {
        let bytes = std::fs::read(root().join("fuzz/seeds/audio_decode").join(seed)).unwrap();
        // The fuzz seeds start with the target's one-byte format hint.
        let wav = &bytes[1..];
        let data_at = memchr::memmem::find(wav, b"data").expect("a data chunk");
        let mut variant = wav[..data_at].to_vec();
        variant.extend(chunk(b"LIST", b"INFOISFT\x06\x00\x00\x00test\x00\x00"));
        variant.extend(chunk(b"junk", b"odd"));
        variant.extend(&wav[data_at..]);
        let riff_len = (variant.len() - 8) as u32;
        variant[4..8].copy_from_slice(&riff_len.to_le_bytes());
        let name = Path::new("variant.wav");
        let want = cyb_llm::audio::bytes_16k(wav.to_vec(), name).unwrap();
        let got = cyb_llm::audio::bytes_16k(variant, name)
            .unwrap_or_else(|e| panic!("{seed}: the unknown chunks were refused: {e}"));
        assert!(want == got, "{seed}: the samples differ");
    }
}

/// ONNX `ModelProto.doc_string` (field 6) holding `text`, as protobuf bytes
/// appended to an encoded model.
fn model_doc_string(text: &str) -> Vec<u8> {
    let mut b = vec![(6 << 3) | 2, text.len() as u8];
    b.extend(text.as_bytes());
    b
}

/// The producer name and version are recorded as provenance (`[onnx] producer`),
/// so only the documentation string is harmless here.
#[test]
fn onnx_documentation_string_imports_identically() {
    for case in [
        "binary_add",
        "conv2d_groups_no_bias",
        "gemm_alpha_beta_no_transpose",
    ] {
        let path = root()
            .join("tests/fixtures/onnx/ops")
            .join(case)
            .join("model.onnx");
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(a.join("model.onnx"), &bytes).unwrap();
        let mut variant = bytes.clone();
        variant.extend(model_doc_string("documentation added by a test"));
        assert!(
            ModelProto::decode(variant.as_slice()).is_ok(),
            "{case}: the variant is not a valid ModelProto"
        );
        std::fs::write(b.join("model.onnx"), variant).unwrap();
        assert!(
            imported(&a.join("model.onnx"), &a) == imported(&b.join("model.onnx"), &b),
            "{case}: a documentation string changed the imported .model"
        );
    }
}
