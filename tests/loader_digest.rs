//! Section digests on a real imported model (SmolLM2): the vocabulary edits
//! that used to load silently (a special token's text changed, a token-type
//! line dropped) are `DigestMismatch` errors naming `vocab`; `validate --deep`
//! checks the weights' digest and `inspect` shows every digest.

mod generate_util;

use cyb_llm::LoadError;
use generate_util::model_path;
use std::process::Command;

fn variant(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = memchr::memmem::find(bytes, from).expect("the model holds the edited text");
    [&bytes[..at], to, &bytes[at + from.len()..]].concat()
}

#[test]
fn vocabulary_edits_are_digest_errors_naming_the_vocab() {
    let path = model_path("smollm2");
    let bytes = std::fs::read(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let vocab_at = memchr::memmem::find(&bytes, b"\n~~~vocab\n").unwrap();
    // The first entry of the vocab's [types] table (`0 = 3`: a control token), dropped.
    let types = vocab_at + memchr::memmem::find(&bytes[vocab_at..], b"\n[types]\n").unwrap() + 9;
    let end = types + memchr::memchr(b'\n', &bytes[types..]).unwrap() + 1;
    assert!(bytes[types..end].ends_with(b" = 3\n"));
    let dropped = [&bytes[..types], &bytes[end..]].concat();
    let edits = [
        variant(&bytes, b"\"<|endoftext|>\"", b"\"<|gndoftext|>\""),
        dropped,
    ];
    for (i, edited) in edits.iter().enumerate() {
        let p = dir.path().join(format!("variant{i}.model"));
        std::fs::write(&p, edited).unwrap();
        let err = cyb_llm::load(&p).unwrap_err();
        assert!(
            matches!(&err, LoadError::DigestMismatch { section, .. } if section == "vocab"),
            "edit {i}: {err}"
        );
        assert!(err.to_string().contains("re-import the model"), "{err}");
    }
}

#[test]
fn validate_deep_checks_the_weights_and_inspect_shows_digests() {
    let path = model_path("smollm2");
    let bin = env!("CARGO_BIN_EXE_cyb-llm");
    let o = Command::new(bin)
        .args(["validate", path.to_str().unwrap(), "--deep", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["weights_digest"], "verified");

    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() - 1000;
    bytes[mid] ^= 0x40;
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged.model");
    std::fs::write(&damaged, &bytes).unwrap();
    let o = Command::new(bin)
        .args(["validate", damaged.to_str().unwrap(), "--deep"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("section `weights` is damaged"), "{err}");

    let o = Command::new(bin)
        .args(["inspect", path.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for s in v["sections"].as_array().unwrap() {
        let d = s["digest"].as_str().unwrap_or_default();
        assert!(d.starts_with("xxh3-128:") && d.len() == 41, "{s}");
    }
}
