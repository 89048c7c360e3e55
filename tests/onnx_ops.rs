//! Every ONNX op the importer translates, one small graph per case with awkward shapes
//! (1, 3, 17, broadcasting, negative axes, a symbolic batch, uneven splits, empty results,
//! integer inputs, run-time shapes and data-dependent ones), against
//! onnxruntime's outputs (tests/fixtures/onnx/ops, made by tests/onnx/make_op_fixtures.py):
//! each case is imported, run by `cyb-llm eval` on cpu (1 and 2 threads) and reference,
//! and every output must match within 1e-4 (relative to its largest value when above 1).

mod onnx_util;

use onnx_util::{fixture, max_abs_diff, read_npy};
use std::path::Path;
use std::process::Command;

fn run_case(dir: &Path, backend: &[&str]) -> Result<(), String> {
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("case.model");
    cyb_llm::import::import(&dir.join("model.onnx"), &model, &Default::default())
        .map_err(|e| format!("import: {e}"))?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cyb-llm"));
    cmd.arg("eval").arg(&model).args(backend);
    let mut outputs = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(input) = name
            .strip_prefix("in_")
            .and_then(|n| n.strip_suffix(".npy"))
        {
            cmd.arg("--input").arg(format!("{input}={}", p.display()));
        } else if let Some(out) = name.strip_prefix("out_") {
            outputs.push(out.to_string());
        }
    }
    let run = cmd.arg("--output-dir").arg(work.path()).output().unwrap();
    if !run.status.success() {
        return Err(format!("eval: {}", String::from_utf8_lossy(&run.stderr)));
    }
    for out in outputs {
        let (want_shape, want) = read_npy(&dir.join(format!("out_{out}")));
        let got_file = work.path().join(&out);
        if !got_file.is_file() {
            return Err(format!("eval wrote no {out}"));
        }
        let (shape, got) = read_npy(&got_file);
        if shape != want_shape {
            return Err(format!(
                "{out}: shape {shape:?}, onnxruntime {want_shape:?}"
            ));
        }
        let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let d = max_abs_diff(&got, &want);
        if d > 1e-4 * scale {
            return Err(format!("{out}: max |diff| {d:e} (scale {scale})"));
        }
    }
    Ok(())
}

#[test]
fn every_op_case_matches_onnxruntime_on_cpu_and_reference() {
    let root = fixture("ops");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 70,
        "only {} cases in {}",
        cases.len(),
        root.display()
    );
    let mut failures = Vec::new();
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for backend in [
            &["--backend", "cpu", "-t", "1"][..],
            &["--backend", "cpu", "-t", "2"],
            &["--backend", "reference"],
        ] {
            if let Err(e) = run_case(dir, backend) {
                failures.push(format!("{name} {backend:?}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
