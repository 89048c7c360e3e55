//! Every input a fuzz target (fuzz/fuzz_targets, scripts/fuzz.sh) found to
//! crash, abort or hang is kept in tests/fixtures/fuzz/TARGET/ and must now
//! give the error listed here for it, quickly.

use cyb_llm::import::ImportOptions;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The crash inputs of `target`, sorted, each with the text its error must contain.
fn cases(target: &str, expected: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let listed: Vec<&str> = expected.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        listed,
        "every file of {} has one expected error here",
        dir.display()
    );
    files
        .into_iter()
        .zip(expected)
        .map(|(f, (_, e))| (f, e.to_string()))
        .collect()
}

/// Runs `f` on each case: an error containing the expected text, within 10 s.
fn check<E: std::fmt::Display>(cases: Vec<(PathBuf, String)>, f: impl Fn(&Path) -> Result<(), E>) {
    for (file, want) in cases {
        let started = Instant::now();
        let got = f(&file);
        let name = file.display();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name}: took {:?}",
            started.elapsed()
        );
        match got {
            Ok(()) => panic!("{name}: accepted, expected an error containing {want:?}"),
            Err(e) => assert!(e.to_string().contains(&want), "{name}: {e}"),
        }
    }
}

#[test]
fn gguf_import_crashes_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.model");
    let cases = cases(
        "gguf_import",
        // llama.embedding_length mutated: a head_dim of 1.8 billion, 7.4 GB of RoPE table at import.
        &[("oom-rope-head-dim.gguf", "but token_embd.weight has shape")],
    );
    check(cases, |f| {
        cyb_llm::import::gguf::import(f, &out, &ImportOptions::default())
    });
}

#[test]
fn audio_decode_crashes_are_errors() {
    let cases = cases(
        "audio_decode",
        // A float WAV whose samples reach 1e28: the resampler's FFT overflowed into NaN and
        // rubato panicked on it.
        &[
            ("float-wav-3e28-samples", "outside -1000..=1000"),
            // A WAV header with a sample rate of 0: symphonia's TimeBase panicked.
            (
                "wav-rate-0-symphonia-panic",
                "the decoder failed on damaged data",
            ),
        ],
    );
    // The first byte is the fuzz target's file-name hint (0: a .wav).
    check(cases, |f| {
        let bytes = std::fs::read(f).unwrap();
        cyb_llm::audio::bytes_16k(bytes[1..].to_vec(), Path::new("fuzz.wav")).map(|_| ())
    });
}

#[test]
fn onnx_import_crashes_are_errors() {
    let cases = cases(
        "onnx_import",
        &[
            // A wrap Pad of 12.5 million values: the import built their source
            // positions for minutes.
            (
                "pad-wrap-12-million-values.onnx",
                "at most 1048576 padded values in all",
            ),
            // A wrap Pad of 34 billion values: the same, without end.
            (
                "pad-wrap-34-billion-values.onnx",
                "at most 1048576 padded values in all",
            ),
            // Resize scales whose product with the input shape overflows usize.
            ("resize-scales-overflow.onnx", "shape mismatch"),
            // A Slice of a rank-0 input: indexed past its shape.
            (
                "slice-axis-of-a-scalar.onnx",
                "axis 0 is out of range for rank 0",
            ),
            // A Slice with fewer ends than axes: indexed past the ends.
            (
                "slice-fewer-ends-than-axes.onnx",
                "Slice starts, ends, axes and steps differ in length",
            ),
            // A Split of a rank-0 input: indexed past its shape.
            (
                "split-axis-of-a-scalar.onnx",
                "axis 0 is out of range for rank 0",
            ),
        ],
    );
    check(cases, |f| {
        cyb_llm::import::onnx::convert(f, &std::fs::read(f).unwrap()).map(|_| ())
    });
}
