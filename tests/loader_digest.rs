//! Section digests on a real imported model (SmolLM2): the vocabulary edits
//! that used to load silently (a special token's text changed, a token-type
//! line dropped) are `DigestMismatch` errors naming `vocab`; `validate --deep`
//! checks the weights' digest, `run --verify` refuses damaged weights that
//! `run` alone loads, and `inspect` shows every digest.

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

    let dir = tempfile::tempdir().unwrap();
    let damaged = damaged_weights(dir.path());
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

/// SmolLM2 with one weights byte flipped (the text sections untouched), in `dir`.
fn damaged_weights(dir: &std::path::Path) -> std::path::PathBuf {
    let mut bytes = std::fs::read(model_path("smollm2")).unwrap();
    let mid = bytes.len() - 1000;
    bytes[mid] ^= 0x40;
    let damaged = dir.join("damaged.model");
    std::fs::write(&damaged, &bytes).unwrap();
    damaged
}

#[test]
fn run_verify_refuses_a_flipped_weights_byte_that_run_loads() {
    let dir = tempfile::tempdir().unwrap();
    let damaged = damaged_weights(dir.path());
    let bin = env!("CARGO_BIN_EXE_cyb-llm");
    let run = |verify: bool| {
        let mut c = Command::new(bin);
        c.args(["run", damaged.to_str().unwrap(), "-p", "Hi", "-n", "2"])
            .args(["--temp", "0", "--backend", "cpu", "-t", "2"]);
        if verify {
            c.arg("--verify");
        }
        c.output().unwrap()
    };
    let o = run(false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "run --verify accepted damaged weights");
    assert!(
        err.contains("section `weights` is damaged")
            && err.contains("re-import the model")
            && err.contains("xxh3-128:"),
        "{err}"
    );
    let o = Command::new(bin)
        .args(["run", model_path("smollm2").to_str().unwrap(), "-p", "Hi"])
        .args([
            "-n",
            "1",
            "--temp",
            "0",
            "--backend",
            "cpu",
            "-t",
            "2",
            "--verify",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn every_command_that_loads_a_model_takes_verify() {
    let bin = env!("CARGO_BIN_EXE_cyb-llm");
    let commands = [
        "run",
        "chat",
        "embed",
        "classify",
        "transcribe",
        "bench",
        "perplexity",
        "eval",
        "diffuse",
        "serve",
    ];
    for c in commands {
        let o = Command::new(bin).args([c, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(
            help.contains("--verify"),
            "`{c} --help` lacks --verify:\n{help}"
        );
    }
}
