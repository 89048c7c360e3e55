//! `cyb-llm diffuse` and `cyb_llm::diffusion` against references made by
//! tests/diffusion/make_fixtures.py: the terrain package's own generator
//! (one step), the consistency and Euler loops on its denoiser (onnxruntime),
//! and diffusers' DDIM / Euler steps on a small timestep network. Then
//! reproducibility (seeds, threads, batches) and every bad input named.

mod onnx_util;

use cyb_llm::diffusion::{DiffusionModel, DiffusionOptions, DiffusionRequest, NoiseInput};
use onnx_util::{max_abs_diff, read_npy, scratch_dir, unet_onnx, write_npy};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_cyb-llm");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/diffusion")
        .join(name)
}

fn cli(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run cyb-llm")
}

fn ok(args: &[&str]) -> String {
    let out = cli(args);
    assert!(
        out.status.success(),
        "cyb-llm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a failing command; returns its stderr, checked to be one error and no panic.
fn fails(args: &[&str]) -> String {
    let out = cli(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "cyb-llm {args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Imports the terrain UNet as `TAG.model` with the import `flags`.
fn import_terrain(tag: &str, flags: &str) -> PathBuf {
    let out = scratch_dir().join(format!("{tag}.model"));
    let onnx = unet_onnx();
    let mut args = vec!["import", s(&onnx), "-o", s(&out)];
    args.extend(flags.split(' '));
    ok(&args);
    out
}

/// The terrain UNet imported with the command line (consistency, one step).
fn terrain() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        import_terrain(
            "terrain",
            "--sampler consistency --sigma-min 0.002 --sigma-max 80 --sigma-data 0.5 --labels 1..100",
        )
    })
}

/// The same UNet with the Euler sampler, 3 steps.
fn terrain_euler() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        import_terrain(
            "terrain-euler",
            "--sampler euler --sigma-min 0.002 --sigma-max 80 --labels 1..100 --steps 3",
        )
    })
}

/// The small timestep network with the sampler of `toml` (a fixture),
/// imported as `TAG.model` (each test its own file).
fn tiny(toml: &str, tag: &str) -> PathBuf {
    let out = scratch_dir().join(format!("{tag}.model"));
    ok(&[
        "import",
        s(&fixture("tiny_unet.onnx")),
        "-o",
        s(&out),
        "--config",
        s(&fixture(toml)),
    ]);
    out
}

/// Runs `diffuse` with `--noise CASE_noise.npy` and compares `--raw` with
/// `CASE_samples.npy`; the output goes to `out-CASE-TAG`.
fn matches_reference(model: &Path, case: &str, tag: &str, extra: &[&str]) -> f32 {
    let dir = scratch_dir().join(format!("out-{case}-{tag}"));
    let raw = dir.join("raw.npy");
    let noise = fixture(&format!("{case}_noise.npy"));
    let mut args = vec![
        "diffuse",
        s(model),
        "--noise",
        s(&noise),
        "-o",
        s(&dir),
        "--raw",
        s(&raw),
    ];
    args.extend_from_slice(extra);
    ok(&args);
    let (shape, ours) = read_npy(&raw);
    let (want_shape, want) = read_npy(&fixture(&format!("{case}_samples.npy")));
    assert_eq!(shape, want_shape, "{case}");
    let d = max_abs_diff(&ours, &want);
    assert!(d <= 1e-3, "{case}: max |diff| {d} vs the reference");
    d
}

#[test]
fn one_step_samples_match_the_packages_generator_batch_1_and_3() {
    let d1 = matches_reference(terrain(), "onestep_b1", "cpu", &["--label", "37"]);
    let d3 = matches_reference(
        terrain(),
        "onestep_b3",
        "cpu",
        &["-n", "3", "--batch", "3", "--label", "1,50,100", "-t", "2"],
    );
    let dir = scratch_dir().join("out-onestep_b3-cpu");
    for i in 0..3 {
        let png = dir.join(format!("sample_{i:04}.png"));
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{}", png.display());
        // IHDR: width 128, height 128, bit depth 16, color type 0 (grayscale).
        assert_eq!(&bytes[16..26], &[0, 0, 0, 128, 0, 0, 0, 128, 16, 0]);
    }
    eprintln!("one step: batch 1 max |diff| {d1:e}, batch 3 {d3:e}");
}

#[test]
fn multi_step_consistency_and_euler_match_the_reference_loops() {
    let dc = matches_reference(
        terrain(),
        "cm2",
        "cpu",
        &[
            "-n", "2", "--batch", "2", "--steps", "2", "--label", "20,80",
        ],
    );
    let de = matches_reference(
        terrain_euler(),
        "euler3",
        "cpu",
        &["-n", "2", "--label", "20,80"],
    );
    eprintln!("consistency 2 steps max |diff| {dc:e}, euler 3 steps {de:e}");
}

#[test]
fn ddim_epsilon_and_euler_v_match_diffusers_steps() {
    let dd = matches_reference(
        &tiny("ddim_eps.toml", "ddim"),
        "ddim_eps",
        "cpu",
        &["-n", "2"],
    );
    let dv = matches_reference(
        &tiny("euler_v.toml", "euler-v"),
        "euler_v",
        "cpu",
        &["-n", "2", "--batch", "2"],
    );
    eprintln!("ddim epsilon max |diff| {dd:e}, euler v {dv:e}");
}

#[test]
fn nox_samples_match_the_reference_bit_for_bit_across_threads() {
    let flags = |t| ["--label", "37", "--backend", "nox", "-t", t];
    let d1 = matches_reference(terrain(), "onestep_b1", "nox1", &flags("1"));
    let d2 = matches_reference(terrain(), "onestep_b1", "nox2", &flags("2"));
    let raw = |tag: &str| {
        std::fs::read(scratch_dir().join(format!("out-onestep_b1-{tag}/raw.npy"))).unwrap()
    };
    assert!(
        raw("nox1") == raw("nox2"),
        "nox on 1 and 2 threads gave different samples"
    );
    eprintln!("nox: max |diff| {d1:e} (1 thread), {d2:e} (2 threads)");
}

#[test]
fn a_batch_gives_the_samples_of_its_items_alone() {
    let opts = DiffusionOptions {
        threads: 2,
        ..Default::default()
    };
    let model = DiffusionModel::load(terrain(), &opts).unwrap();
    let labels = vec![1, 50, 100];
    let batched = model
        .diffuse(&DiffusionRequest {
            count: 3,
            labels: labels.clone(),
            seed: 99,
            batch: 3,
            ..Default::default()
        })
        .unwrap();
    let single = model
        .diffuse(&DiffusionRequest {
            count: 3,
            labels: labels.clone(),
            seed: 99,
            batch: 1,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(batched.labels, labels);
    assert!(
        batched.data == single.data,
        "batch of 3 vs one at a time: max |diff| {}",
        max_abs_diff(&batched.data, &single.data)
    );
    // Given noise equal to what the seed draws gives the same samples.
    let mut noise = vec![0.0f32; 3 * 128 * 128];
    for (k, chunk) in noise.chunks_mut(128 * 128).enumerate() {
        cyb_llm::diffusion::noise::GaussianStream::new(99, k as u64).fill(chunk);
    }
    let given = model
        .diffuse(&DiffusionRequest {
            count: 3,
            labels,
            seed: 1,
            batch: 3,
            noise: Some(NoiseInput {
                shape: vec![3, 1, 128, 128],
                data: noise,
            }),
            ..Default::default()
        })
        .unwrap();
    assert!(
        given.data == batched.data,
        "--noise equal to the seed's draws gave other samples"
    );
}

#[test]
fn the_same_seed_gives_identical_pngs_across_runs_and_thread_counts() {
    let run = |tag: &str, threads: &str, seed: &str| -> Vec<Vec<u8>> {
        let dir = scratch_dir().join(format!("seed-{tag}"));
        ok(&[
            "diffuse",
            s(terrain()),
            "-n",
            "2",
            "--batch",
            "2",
            "--label",
            "10,60",
            "--seed",
            seed,
            "-t",
            threads,
            "-o",
            s(&dir),
        ]);
        (0..2)
            .map(|i| std::fs::read(dir.join(format!("sample_{i:04}.png"))).unwrap())
            .collect()
    };
    let first = run("a", "1", "5");
    assert_eq!(first, run("b", "1", "5"), "two runs with seed 5 differ");
    assert_eq!(first, run("c", "2", "5"), "1 and 2 threads differ");
    assert_ne!(
        first,
        run("d", "2", "6"),
        "seeds 5 and 6 gave the same images"
    );
    assert_ne!(first[0], first[1]);
}

/// Runs a command that must fail with an error holding each of `wanted`.
fn refused(args: &[&str], wanted: &[&str]) {
    let e = fails(args);
    for w in wanted {
        assert!(e.contains(w), "cyb-llm {args:?}: no `{w}` in: {e}");
    }
}

#[test]
fn bad_input_is_named() {
    let out = scratch_dir().join("bad");
    let o = s(&out);
    let model = s(terrain());
    for label in ["0", "101"] {
        let want = format!("label {label} is outside the model's classes 1..100");
        refused(
            &["diffuse", model, "--label", label, "--seed", "1", "-o", o],
            &[&want],
        );
    }
    refused(
        &[
            "diffuse", model, "-n", "3", "--label", "1,2", "--seed", "1", "-o", o,
        ],
        &["2 labels for 3 samples"],
    );
    let wrong = scratch_dir().join("noise-64.npy");
    write_npy(&wrong, &[1, 1, 64, 64], &vec![0.0f32; 64 * 64]);
    refused(
        &[
            "diffuse",
            model,
            "--label",
            "5",
            "--noise",
            s(&wrong),
            "-o",
            o,
        ],
        &[
            "noise: the noise has shape [1, 1, 64, 64]",
            "[1, 1, 128, 128]",
        ],
    );
    let f64s = scratch_dir().join("noise-f64.npy");
    write_npy(&f64s, &[1, 1, 128, 128], &vec![0.0f64; 128 * 128]);
    refused(
        &[
            "diffuse",
            model,
            "--label",
            "5",
            "--noise",
            s(&f64s),
            "-o",
            o,
        ],
        &["--noise", "<f8", "float32"],
    );
    refused(
        &["diffuse", model, "--label", "5", "--steps", "0", "-o", o],
        &["steps: steps must be at least 1"],
    );
    let ddim = tiny("ddim_eps.toml", "ddim-bad");
    refused(
        &["diffuse", s(&ddim), "--steps", "2000", "-o", o],
        &[
            "2000 steps exceed the model's 1000 training timesteps",
            "sampler ddim",
        ],
    );
    refused(
        &["diffuse", s(&ddim), "--label", "3", "-o", o],
        &["takes no condition"],
    );
    let plain = scratch_dir().join("plain-unet.model");
    ok(&["import", s(&unet_onnx()), "-o", s(&plain)]);
    refused(
        &["diffuse", s(&plain), "-o", o],
        &[
            "'onnx' is not a diffusion model",
            "cyb-llm eval",
            "--sampler",
        ],
    );
    let file = scratch_dir().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let below = file.join("images");
    let want = format!("-o {}: cannot write there", below.display());
    refused(
        &["diffuse", model, "--label", "5", "-o", s(&below)],
        &[&want],
    );
}

#[test]
fn import_refuses_a_sampler_that_does_not_fit_the_graph() {
    let out = scratch_dir().join("refused.model");
    let onnx = unet_onnx();
    // (flags after `import UNET.onnx -o OUT`, what the error must say)
    let cases: [(&str, &[&str]); 5] = [
        (
            "--sampler consistency --sigma-min 0.002 --sigma-max 80",
            &["diffusion.label_min", "--labels MIN..MAX"],
        ),
        (
            "--sampler ddim --labels 1..100 --sigma-min 0.002 --sigma-max 80",
            &["diffusion.sampler", "use euler or consistency"],
        ),
        (
            "--sampler euler --labels 1..100 --sigma-min 80 --sigma-max 0.002",
            &["diffusion.sigma_max", "0 < sigma_min < sigma_max"],
        ),
        (
            "--sampler euler --labels 1..100 --sigma-min 0.002 --sigma-max 80 --sample-input image",
            &["the graph has no input `image`; its inputs: noisy, sigma, difficulty"],
        ),
        ("--sampler heun --labels 1..100", &["heun", "consistency"]),
    ];
    for (flags, wanted) in cases {
        let mut args = vec!["import", s(&onnx), "-o", s(&out)];
        args.extend(flags.split(' '));
        refused(&args, wanted);
    }
    assert!(!out.exists(), "a refused import left {}", out.display());
}
