//! Shared by the ONNX tests: the real models from scripts/fetch-models.sh
//! (`$CYB_MODELS_DIR`, default `.cache/models`), imported once per test
//! binary; `.npy` reading and writing; the max-abs-diff comparison.
#![allow(dead_code)]

#[path = "../scratch/mod.rs"]
mod scratch;

use npyz::WriterBuilder;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// This test binary's scratch folder.
pub fn scratch_dir() -> PathBuf {
    scratch::scratch_dir()
}

/// File `rel` of the models folder that fetch-models.sh target `target` fills;
/// a missing file fails the test, naming the fetch command.
fn fetched(rel: &str, target: &str) -> PathBuf {
    let base = std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"));
    let f = base.join(rel);
    assert!(
        f.is_file(),
        "{} is missing: run scripts/fetch-models.sh {target} (or set CYB_MODELS_DIR) before the tests",
        f.display()
    );
    f
}

/// The terrain UNet `.onnx` fetch-models.sh's `terrain` target unpacks.
pub fn unet_onnx() -> PathBuf {
    fetched(
        "terrain/terrain_consistency_unet_difficulty100.onnx",
        "terrain",
    )
}

/// The Piper VITS voice `.onnx` fetch-models.sh's `piper` target unpacks.
pub fn piper_onnx() -> PathBuf {
    fetched("piper/en_US-joe-medium.onnx", "piper")
}

/// The Piper voice imported once per test binary.
pub fn piper_model() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let out = scratch::scratch_dir().join("piper.model");
        cyb_llm::import::import(&piper_onnx(), &out, &Default::default())
            .expect("import the Piper voice");
        out
    })
}

/// The UNet imported once per test binary.
pub fn unet_model() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let out = scratch::scratch_dir().join("unet.model");
        cyb_llm::import::import(&unet_onnx(), &out, &Default::default()).expect("import the UNet");
        out
    })
}

/// A committed fixture of `tests/fixtures/onnx`.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/onnx")
        .join(rel)
}

/// Runs `cyb-llm eval MODEL` with `args` on the fixtures `SET/CASE_INPUT.npy` of each
/// of `inputs` (a failed run fails the test): the folder of the outputs and what eval
/// printed on stderr.
pub fn eval_run(
    model: &Path,
    set: &str,
    case: &str,
    inputs: &[&str],
    args: &[&str],
) -> (PathBuf, String) {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run_id = RUNS.fetch_add(1, Ordering::Relaxed);
    let out = scratch_dir().join(format!("eval-{case}-{run_id}"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cyb-llm"));
    cmd.arg("eval").arg(model);
    for input in inputs {
        let f = fixture(&format!("{set}/{case}_{input}.npy"));
        cmd.arg("--input").arg(format!("{input}={}", f.display()));
    }
    let run = cmd
        .arg("--output-dir")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "eval {case} {args:?}: {stderr}");
    (out, stderr)
}

/// [`eval_run`], then [`fixture_diff`] of its f32 `output`.
pub fn eval_fixture(
    model: &Path,
    set: &str,
    case: &str,
    inputs: &[&str],
    output: &str,
    args: &[&str],
) -> (f32, Vec<u8>) {
    let (out, _) = eval_run(model, set, case, inputs, args);
    fixture_diff(&out, set, case, output, args)
}

/// The f32 `output` eval wrote to folder `out` (a run with `args`) compared with
/// `SET/CASE_OUTPUT.npy` (the shapes must be equal): the max |diff| and the
/// bytes of the `.npy` file.
pub fn fixture_diff(
    out: &Path,
    set: &str,
    case: &str,
    output: &str,
    args: &[&str],
) -> (f32, Vec<u8>) {
    let written = out.join(format!("{output}.npy"));
    let (shape, got) = read_npy(&written);
    let (want_shape, want) = read_npy(&fixture(&format!("{set}/{case}_{output}.npy")));
    assert_eq!(shape, want_shape, "{case} {args:?}: output shape");
    let d = max_abs_diff(&got, &want);
    eprintln!("{set} {case} {args:?}: max |diff| vs onnxruntime {d:.3e}");
    (d, std::fs::read(written).unwrap())
}

/// An f32 `.npy` file: shape and values.
pub fn read_npy(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().iter().map(|&d| d as usize).collect();
    (shape, npy.into_vec::<f32>().unwrap())
}

/// An i64 `.npy` file: shape and values.
pub fn read_npy_i64(path: &Path) -> (Vec<usize>, Vec<i64>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().iter().map(|&d| d as usize).collect();
    (shape, npy.into_vec::<i64>().unwrap())
}

/// Writes values of type `T` as a `.npy` file.
pub fn write_npy<T: npyz::Serialize + npyz::AutoSerialize + Copy>(
    path: &Path,
    shape: &[u64],
    data: &[T],
) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(shape)
        .writer(file)
        .begin_nd()
        .unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

/// The largest `|a - b|` (infinite when a value is not finite or lengths differ).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            if x.is_finite() && y.is_finite() {
                (x - y).abs()
            } else {
                f32::INFINITY
            }
        })
        .fold(0.0, f32::max)
}
