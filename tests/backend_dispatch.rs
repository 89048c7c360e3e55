//! Dispatcher: fallback along the chain is taken and recorded, unsupported
//! ops never pass silently, explicit backends that cannot start are
//! `BackendInit`; the frame allocator reaches a steady size.

mod backend_util;

use backend_util::{rand_tensor, rand_weight, rel_err, rng};
use cyb_llm::backend::cpu::reference::{self, ReferenceBackend};
use cyb_llm::backend::{
    Backend, BackendChoice, BackendConfig, Dispatcher, ExecContext, Mask, Op, RopeStyle, Tensor,
    TensorInfo,
};
use cyb_llm::{DType, ExecutionError};
use std::sync::Arc;

/// A backend that implements only `Add` (through the reference loops).
struct AddOnly;

impl Backend for AddOnly {
    fn name(&self) -> &str {
        "add-only"
    }
    fn supports(&self, op: &Op, _inputs: &[TensorInfo]) -> bool {
        *op == Op::Add
    }
    fn execute(
        &self,
        op: &Op,
        inputs: &[Tensor],
        _ctx: &mut ExecContext,
    ) -> Result<Vec<Tensor>, ExecutionError> {
        reference::execute(op, inputs)
    }
    fn alloc(&self, shape: &[usize], _dtype: DType) -> Result<Tensor, ExecutionError> {
        Ok(Tensor::state_zeros(shape))
    }
    fn upload(&self, data: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        ReferenceBackend.upload(data, shape, dtype)
    }
    fn download_f32(&self, t: &Tensor) -> Vec<f32> {
        ReferenceBackend.download_f32(t)
    }
}

#[test]
fn unsupported_ops_fall_back_and_are_recorded() {
    let mut r = rng("fallback");
    let d = Dispatcher::with_chain(vec![Arc::new(AddOnly), Arc::new(ReferenceBackend)], 1);
    let mut ctx = ExecContext::new(1);
    ctx.log.keep_records(true);
    ctx.begin_forward();
    let x = rand_tensor(&mut r, &[3, 17]);
    let g = rand_tensor(&mut r, &[17]);
    ctx.set_label("layer 0");
    let sum = d.run1(&Op::Add, &[x.clone(), x.clone()], &mut ctx).unwrap();
    let normed = d
        .run1(
            &Op::RmsNorm {
                eps: 1e-6,
                add_one: false,
            },
            &[sum.clone(), g.clone()],
            &mut ctx,
        )
        .unwrap();

    let recs = ctx.log.records();
    assert_eq!(recs.len(), 2);
    assert_eq!(
        (
            recs[0].op,
            recs[0].backend.as_str(),
            recs[0].fallback.is_none()
        ),
        ("Add", "add-only", true)
    );
    assert_eq!(
        (recs[1].op, recs[1].backend.as_str()),
        ("RmsNorm", "reference")
    );
    let why = recs[1]
        .fallback
        .as_deref()
        .expect("fallback reason recorded");
    assert!(why.contains("add-only does not support RmsNorm"), "{why}");
    assert!(
        recs[1]
            .to_string()
            .starts_with("layer 0 RmsNorm: reference (fallback: "),
        "{}",
        recs[1]
    );
    assert_eq!(ctx.log.counts().get("add-only"), Some(&1));
    assert_eq!(ctx.log.counts().get("reference"), Some(&1));
    assert_eq!(ctx.log.fallbacks().values().sum::<usize>(), 1);
    assert!(
        ctx.log
            .summary()
            .contains("add-only 1, reference 1 (fallbacks: 1)"),
        "{}",
        ctx.log.summary()
    );

    // The fallback computes the same thing the reference does.
    let want = reference::execute(
        &Op::RmsNorm {
            eps: 1e-6,
            add_one: false,
        },
        &[sum, g],
    )
    .unwrap();
    assert_eq!(
        rel_err(normed.as_f32().unwrap(), want[0].as_f32().unwrap()),
        0.0
    );

    // A new forward starts a new per-op list; counts accumulate.
    ctx.begin_forward();
    assert!(ctx.log.records().is_empty());
    d.run(&Op::Add, &[x.clone(), x], &mut ctx).unwrap();
    assert_eq!(ctx.log.counts().get("add-only"), Some(&2));
}

#[test]
fn a_chain_without_fallback_reports_unsupported_ops() {
    let mut r = rng("no_fallback");
    let d = Dispatcher::with_chain(vec![Arc::new(AddOnly)], 1);
    let mut ctx = ExecContext::new(1);
    let x = rand_tensor(&mut r, &[4]);
    let err = d.run(&Op::Silu, &[x], &mut ctx).unwrap_err();
    match err {
        ExecutionError::UnsupportedOp {
            op,
            backend,
            input_dtype,
        } => {
            assert!(op.starts_with("Silu"), "{op}");
            assert_eq!(backend, "add-only");
            assert_eq!(input_dtype, DType::F32);
        }
        other => panic!("expected UnsupportedOp, got {other:?}"),
    }
    assert!(ctx.log.counts().is_empty(), "nothing ran");
}

#[test]
fn explicit_backends_that_cannot_start_are_errors_and_auto_moves_on() {
    let config = BackendConfig { threads: 2 };
    // honeycrisp never starts here: off Apple Silicon it says why, on it it is not built yet.
    match Dispatcher::new(BackendChoice::parse("honeycrisp").unwrap(), &config) {
        Err(ExecutionError::BackendInit { backend, reason }) => {
            assert_eq!(backend, "honeycrisp");
            if cfg!(not(all(target_os = "macos", target_arch = "aarch64"))) {
                assert!(
                    reason.starts_with("requires Apple Silicon macOS; this is "),
                    "{reason}"
                );
            }
        }
        Err(other) => panic!("expected BackendInit, got {other:?}"),
        Ok(_) => panic!("honeycrisp must not start"),
    }
    // wgpu starts when an adapter exists; either way the outcome is explicit,
    // and a started wgpu falls back to cpu.
    for name in ["wgpu", "wgpu+rs"] {
        match Dispatcher::new(BackendChoice::parse(name).unwrap(), &config) {
            Ok(d) => {
                let names: Vec<&str> = d.chain().iter().map(|b| b.name()).collect();
                assert_eq!(names, ["wgpu", "cpu"]);
            }
            Err(ExecutionError::BackendInit { backend, reason }) => {
                assert_eq!(backend, "wgpu");
                assert!(!reason.is_empty());
            }
            Err(other) => panic!("{name}: expected BackendInit, got {other:?}"),
        }
    }
    let auto = Dispatcher::new(BackendChoice::Auto, &config).unwrap();
    assert_eq!(auto.chain().last().map(|b| b.name()), Some("cpu"));
    if cfg!(not(all(target_os = "macos", target_arch = "aarch64"))) {
        assert!(
            auto.notes()
                .iter()
                .any(|n| n.contains("skipped honeycrisp")),
            "{:?}",
            auto.notes()
        );
    }
    let cpu = Dispatcher::new(BackendChoice::parse("cpu").unwrap(), &config).unwrap();
    let names: Vec<&str> = cpu.chain().iter().map(|b| b.name()).collect();
    assert_eq!(names, ["cpu"]);
    let err = BackendChoice::parse("tpu").unwrap_err();
    assert!(
        matches!(err, ExecutionError::BackendInit { ref backend, .. } if backend == "tpu"),
        "{err:?}"
    );
}

/// Weights of the small layer of [`forward`], in several encodings.
fn layer_weights(r: &mut rand_chacha::ChaCha8Rng) -> Vec<Tensor> {
    vec![
        rand_tensor(r, &[64]),
        rand_weight(r, &[64, 64], DType::Q8_0),
        rand_weight(r, &[32, 64], DType::Q8_0),
        rand_weight(r, &[32, 64], DType::F16),
        rand_weight(r, &[64, 64], DType::Q4_0),
        rand_weight(r, &[96, 64], DType::Q8_0),
        rand_weight(r, &[96, 64], DType::Q8_0),
        rand_weight(r, &[100, 96], DType::F32),
    ]
}

/// A small decoder-layer-like sequence of ops, as a family would run it.
fn forward(
    d: &Dispatcher,
    ctx: &mut ExecContext,
    w: &[Tensor],
    kv: &(Tensor, Tensor),
    pos: usize,
    x: &Tensor,
) -> Tensor {
    ctx.begin_forward();
    let x = x.clone();
    let h = d
        .run1(
            &Op::RmsNorm {
                eps: 1e-6,
                add_one: false,
            },
            &[x.clone(), w[0].clone()],
            ctx,
        )
        .unwrap();
    let qkv = d
        .run(
            &Op::FusedQkv,
            &[h, w[1].clone(), w[2].clone(), w[3].clone()],
            ctx,
        )
        .unwrap();
    let q = qkv[0].reshaped(&[1, 4, 16]).unwrap();
    let k = qkv[1].reshaped(&[1, 2, 16]).unwrap();
    let v = qkv[2].reshaped(&[1, 2, 16]).unwrap();
    let rope = Op::Rope {
        style: RopeStyle::Neox,
        rot_dim: 16,
        pos,
        base: 10000.0,
    };
    let q = d.run1(&rope, &[q], ctx).unwrap();
    let k = d.run1(&rope, &[k], ctx).unwrap();
    d.run(
        &Op::KvAppend { pos },
        &[kv.0.clone(), kv.1.clone(), k, v],
        ctx,
    )
    .unwrap();
    let sdpa = Op::Sdpa {
        scale: None,
        mask: Mask::Causal,
        q_pos: pos,
        kv_len: Some(pos + 1),
    };
    let a = d
        .run1(&sdpa, &[q, kv.0.clone(), kv.1.clone()], ctx)
        .unwrap();
    let a = a.reshaped(&[1, 64]).unwrap();
    let o = d.run1(&Op::Matmul, &[a, w[4].clone()], ctx).unwrap();
    let x = d.run1(&Op::Add, &[x, o], ctx).unwrap();
    let m = d
        .run1(
            &Op::FusedSwiGlu,
            &[x.clone(), w[5].clone(), w[6].clone()],
            ctx,
        )
        .unwrap();
    let logits = d.run1(&Op::Matmul, &[m, w[7].clone()], ctx).unwrap();
    d.run1(&Op::Softmax, &[logits], ctx).unwrap()
}

#[test]
fn frame_allocator_pool_stops_growing_after_the_second_forward() {
    let mut r = rng("pool");
    let d = Dispatcher::new(
        BackendChoice::parse("cpu").unwrap(),
        &BackendConfig { threads: 2 },
    )
    .unwrap();
    let w = layer_weights(&mut r);
    let kv = (
        Tensor::state_zeros(&[8, 2, 16]),
        Tensor::state_zeros(&[8, 2, 16]),
    );
    let mut ctx = ExecContext::new(2);
    let mut sizes = Vec::new();
    let mut held = None;
    for pos in 0..5 {
        // The caller keeps the previous output alive into the next forward, as a sampler does.
        let x = rand_tensor(&mut r, &[1, 64]);
        held = Some(forward(&d, &mut ctx, &w, &kv, pos, &x));
        sizes.push(ctx.alloc.pool_bytes());
    }
    assert!(held.is_some());
    assert!(sizes[0] > 0, "activations come from the pool");
    assert!(sizes[1] >= sizes[0]);
    assert_eq!(
        sizes[2..],
        [sizes[1]; 3],
        "pool grew after the second forward: {sizes:?}"
    );
    assert_eq!(ctx.log.counts().get("cpu"), Some(&(5 * 11)));
}

#[test]
fn core_types_are_thread_safe() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Tensor>();
    send_sync::<Dispatcher>();
    send_sync::<cyb_llm::backend::cpu::CpuBackend>();
    send::<ExecContext>();
}

#[test]
fn install_runs_ops_on_the_worker_pool_with_identical_results() {
    let mut r = rng("install");
    let d = Dispatcher::new(
        BackendChoice::parse("cpu").unwrap(),
        &BackendConfig { threads: 2 },
    )
    .unwrap();
    assert!(
        d.install(|| rayon::current_thread_index().is_some() && rayon::current_num_threads() == 2)
    );
    let w = layer_weights(&mut r);
    let inputs: Vec<Tensor> = (0..3).map(|_| rand_tensor(&mut r, &[1, 64])).collect();
    let run_all = |ctx: &mut ExecContext| -> Vec<Vec<f32>> {
        let kv = (
            Tensor::state_zeros(&[8, 2, 16]),
            Tensor::state_zeros(&[8, 2, 16]),
        );
        (0..3)
            .map(|pos| {
                forward(&d, ctx, &w, &kv, pos, &inputs[pos])
                    .as_f32()
                    .unwrap()
                    .to_vec()
            })
            .collect()
    };
    let outside = run_all(&mut ExecContext::new(2));
    let mut ctx = ExecContext::new(2);
    let inside = d.install(|| run_all(&mut ctx));
    assert_eq!(outside, inside);
}
