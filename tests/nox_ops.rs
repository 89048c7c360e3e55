//! The nox backend's own math and ops against independent references:
//! its exp / tanh / erf / sin / cos against the platform's f64 functions, and
//! every op it implements against the CPU reference library (ops.md one-op
//! tolerance 1e-5) on seeded random inputs of odd sizes (`scripts/seed-sweep.sh` draws fresh seeds).

use cyb_llm::backend::cpu::reference;
use cyb_llm::backend::nox::{self, math};
use cyb_llm::backend::{
    BackendConfig, ExecContext, Mask, Op, RopeStyle, SampleParams, SharedBytes, Tensor,
};
use cyb_llm::DType;
use rand::{Rng, SeedableRng};

mod backend_util;

/// The test's seed: fixed per test unless `CYB_TEST_SEED` says otherwise (backend_util).
fn seed() -> u64 {
    backend_util::seed("nox_ops")
}

fn ulps(a: f32, b: f32) -> u32 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
}

#[test]
fn transcendentals_match_the_platform_to_an_ulp() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed());
    for _ in 0..200_000 {
        let x: f32 = rng.gen_range(-80.0..80.0);
        let e = (x as f64).exp() as f32;
        assert!(
            ulps(math::exp(x), e) <= 1,
            "exp({x}) = {} vs {e}",
            math::exp(x)
        );
        let y: f32 = rng.gen_range(-10.0..10.0);
        let t = (y as f64).tanh() as f32;
        assert!(
            ulps(math::tanh(y), t) <= 1,
            "tanh({y}) = {} vs {t}",
            math::tanh(y)
        );
        let z: f32 = rng.gen_range(-5.0..5.0);
        let r = libm::erf(z as f64) as f32;
        assert!(
            ulps(math::erf(z), r) <= 1,
            "erf({z}) = {} vs {r}",
            math::erf(z)
        );
        let a: f64 = rng.gen_range(-9000.0..9000.0);
        let (s, c) = math::sincos64(a);
        assert!(
            (s - a.sin()).abs() < 1e-12 && (c - a.cos()).abs() < 1e-12,
            "sincos({a})"
        );
        let b: f64 = rng.gen_range(1.0..1e6);
        let p: f64 = rng.gen_range(-1.0..1.0);
        let want = b.powf(p);
        assert!(
            ((math::powf64(b, p) - want) / want).abs() < 1e-14,
            "{b}^{p}"
        );
    }
    assert_eq!(math::exp(f32::NEG_INFINITY), 0.0);
    assert_eq!(math::exp(100.0), f32::INFINITY);
    assert_eq!(math::tanh(30.0), 1.0);
    assert_eq!(math::erf(-6.0), -1.0);
}

fn rand_vec(rng: &mut impl Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect()
}

fn t(shape: &[usize], v: Vec<f32>) -> Tensor {
    Tensor::from_f32(shape, v).unwrap()
}

fn rel_err(y: &[f32], r: &[f32]) -> f32 {
    assert_eq!(y.len(), r.len());
    let scale = r.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
    y.iter()
        .zip(r)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()))
        / scale
}

#[test]
fn every_nox_op_matches_the_reference_library() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed());
    let nox = nox::init(&BackendConfig { threads: 2 }).unwrap();
    let mut ctx = ExecContext::new(2);
    for (m, k, n) in [(1, 17, 3), (3, 64, 5), (5, 96, 33)] {
        let x = t(&[m, k], rand_vec(&mut rng, m * k));
        let w32 = rand_vec(&mut rng, n * k);
        // A q8_0 weight: quantized with the crate's quantizer.
        let wq = if k % 32 == 0 {
            let bytes = cyb_llm::quant::quantize(DType::Q8_0, &w32).unwrap();
            Some(
                Tensor::from_bytes(&[n, k], DType::Q8_0, SharedBytes::from_vec(bytes), None)
                    .unwrap(),
            )
        } else {
            None
        };
        let g = t(&[k], rand_vec(&mut rng, k));
        let s = t(&[m, k], rand_vec(&mut rng, m * k));
        let row = t(&[k], rand_vec(&mut rng, k));
        let mut cases: Vec<(Op, Vec<Tensor>)> = vec![
            (Op::Matmul, vec![x.clone(), t(&[n, k], w32.clone())]),
            (Op::Add, vec![x.clone(), s.clone()]),
            (Op::Mul, vec![x.clone(), row.clone()]),
            (Op::Sub, vec![x.clone(), row.clone()]),
            (
                Op::Div,
                vec![x.clone(), t(&[k], (0..k).map(|i| 1.0 + i as f32).collect())],
            ),
            (Op::Scale(0.37), vec![x.clone()]),
            (
                Op::RmsNorm {
                    eps: 1e-6,
                    add_one: false,
                },
                vec![x.clone(), g.clone()],
            ),
            (
                Op::RmsNorm {
                    eps: 1e-5,
                    add_one: true,
                },
                vec![x.clone(), g.clone()],
            ),
            (
                Op::LayerNorm { eps: 1e-5 },
                vec![x.clone(), g.clone(), row.clone()],
            ),
            (Op::Silu, vec![x.clone()]),
            (Op::Gelu, vec![x.clone()]),
            (Op::GeluTanh, vec![x.clone()]),
            (Op::Sigmoid, vec![x.clone()]),
            (Op::Tanh, vec![x.clone()]),
            (Op::Relu, vec![x.clone()]),
            (Op::LeakyRelu(0.1), vec![x.clone()]),
            (Op::Softcap(1.5), vec![x.clone()]),
            (Op::Clamp { lo: -0.5, hi: 0.7 }, vec![x.clone()]),
            (Op::Softmax, vec![x.clone()]),
            (Op::SwiGlu, vec![x.clone(), s.clone()]),
            (Op::GeGlu, vec![x.clone(), s.clone()]),
            (
                Op::Slice {
                    axis: 1,
                    start: 1,
                    end: k - 1,
                },
                vec![x.clone()],
            ),
            (
                Op::Embed,
                vec![
                    Tensor::from_i32(&[3], vec![0, (n - 1) as i32, 1]).unwrap(),
                    t(&[n, k], w32.clone()),
                ],
            ),
        ];
        if let Some(wq) = &wq {
            cases.push((Op::Matmul, vec![x.clone(), wq.clone()]));
            cases.push((
                Op::Embed,
                vec![Tensor::from_i32(&[2], vec![1, 0]).unwrap(), wq.clone()],
            ));
        }
        // Attention and rope on [S, H, d].
        let (sq, h, kvh, d, len) = (m, 4, 2, 16, m + 6);
        let q = t(&[sq, h, d], rand_vec(&mut rng, sq * h * d));
        let kk = t(&[len, kvh, d], rand_vec(&mut rng, len * kvh * d));
        let vv = t(&[len, kvh, d], rand_vec(&mut rng, len * kvh * d));
        for mask in [Mask::Causal, Mask::Sliding(3), Mask::None] {
            cases.push((
                Op::Sdpa {
                    scale: None,
                    mask,
                    q_pos: len - sq,
                    kv_len: Some(len),
                },
                vec![q.clone(), kk.clone(), vv.clone()],
            ));
        }
        for style in [RopeStyle::Neox, RopeStyle::Normal] {
            cases.push((
                Op::Rope {
                    style,
                    rot_dim: 12,
                    pos: 5,
                    base: 10000.0,
                },
                vec![q.clone()],
            ));
        }
        for temperature in [0.0, 0.7, 1.3] {
            let logits = t(&[2, 97], rand_vec(&mut rng, 2 * 97));
            let history = Tensor::from_i32(&[5], vec![3, 9, 3, 40, 96]).unwrap();
            let params = SampleParams {
                temperature,
                top_k: 40,
                top_p: 0.9,
                min_p: 0.05,
                repeat_penalty: 1.3,
                repeat_last_n: 4,
                u: rng.gen_range(0.0..1.0),
            };
            cases.push((Op::Sample(params), vec![logits, history]));
        }
        for (op, inputs) in cases {
            assert!(nox.supports(
                &op,
                &inputs.iter().map(|i| i.info().clone()).collect::<Vec<_>>()
            ));
            let got = nox.execute(&op, &inputs, &mut ctx).unwrap();
            let want = reference::execute(&op, &inputs).unwrap();
            for (g, w) in got.iter().zip(&want) {
                let (g, w) = (g.read_f32("test").unwrap(), w.read_f32("test").unwrap());
                let e = rel_err(&g, &w);
                assert!(e <= 1e-5, "{op:?} m={m} k={k}: relative error {e}");
            }
        }
    }
    // An id outside the table is an error, not a read out of bounds.
    let table = t(&[4, 8], vec![0.5; 32]);
    let bad = Tensor::from_i32(&[1], vec![4]).unwrap();
    assert!(nox.execute(&Op::Embed, &[bad, table], &mut ctx).is_err());
}

#[test]
fn nox_rejects_fused_ops_and_results_do_not_depend_on_threads() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed());
    let one = nox::init(&BackendConfig { threads: 1 }).unwrap();
    let two = nox::init(&BackendConfig { threads: 2 }).unwrap();
    let mut ctx = ExecContext::new(2);
    let x = t(&[7, 96], rand_vec(&mut rng, 7 * 96));
    let w = t(&[61, 96], rand_vec(&mut rng, 61 * 96));
    let g = t(&[96], rand_vec(&mut rng, 96));
    let infos = [x.info().clone(), g.info().clone(), w.info().clone()];
    assert!(!one.supports(
        &Op::FusedNormMatmul {
            eps: 1e-6,
            add_one: false
        },
        &infos
    ));
    let a = one
        .execute(&Op::Matmul, &[x.clone(), w.clone()], &mut ctx)
        .unwrap();
    let b = two.execute(&Op::Matmul, &[x, w], &mut ctx).unwrap();
    let bits =
        |t: &Tensor| -> Vec<u32> { t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect() };
    assert_eq!(bits(&a[0]), bits(&b[0]));
}

#[test]
fn image_ops_match_the_reference_and_do_not_depend_on_threads() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed());
    let one = nox::init(&BackendConfig { threads: 1 }).unwrap();
    let two = nox::init(&BackendConfig { threads: 2 }).unwrap();
    let mut ctx = ExecContext::new(2);
    let mut r = |shape: &[usize]| t(shape, rand_vec(&mut rng, shape.iter().product()));
    let conv = |stride, pads, dilation, groups| Op::Conv2d {
        stride,
        pads,
        dilation,
        groups,
    };
    let x = r(&[2, 6, 9, 11]);
    let positive = t(
        &[2, 6, 9, 11],
        x.read_f32("test")
            .unwrap()
            .iter()
            .map(|v| v.abs() + 0.1)
            .collect(),
    );
    let cases: Vec<(Op, Vec<Tensor>)> = vec![
        (
            conv([1, 1], [1, 1, 1, 1], [1, 1], 1),
            vec![x.clone(), r(&[5, 6, 3, 3]), r(&[5])],
        ),
        (
            conv([2, 1], [0, 2, 1, 0], [1, 2], 2),
            vec![x.clone(), r(&[4, 3, 3, 2])],
        ),
        (
            conv([1, 1], [0, 0, 0, 0], [1, 1], 6),
            vec![x.clone(), r(&[6, 1, 1, 1]), r(&[6])],
        ),
        (Op::BatchMatmul, vec![r(&[2, 3, 5, 17]), r(&[3, 17, 7])]),
        (Op::BatchMatmul, vec![r(&[1, 33, 9]), r(&[4, 9, 10])]),
        (
            Op::AvgPool2d {
                kernel: [2, 3],
                stride: [2, 2],
                pads: [0, 1, 0, 1],
                count_include_pad: false,
            },
            vec![x.clone()],
        ),
        (
            Op::ResizeNearest {
                scales: vec![1, 1, 2, 3],
            },
            vec![x.clone()],
        ),
        (
            Op::GroupNorm {
                groups: 3,
                eps: 1e-5,
            },
            vec![x.clone(), r(&[6]), r(&[6])],
        ),
        (
            Op::GroupNormAffine {
                groups: 2,
                eps: 1e-5,
            },
            vec![x.clone(), r(&[2]), r(&[2]), r(&[6]), r(&[6])],
        ),
        (Op::Sqrt, vec![positive.clone()]),
        (Op::Log, vec![positive.clone()]),
        (Op::Exp, vec![x.clone()]),
        (Op::Cos, vec![x.clone()]),
        (Op::Sin, vec![x.clone()]),
        (Op::Reciprocal, vec![positive.clone()]),
        (Op::Neg, vec![x.clone()]),
        (Op::Erf, vec![x.clone()]),
        (Op::PowScalar(2.0), vec![x.clone()]),
        (Op::PowScalar(3.0), vec![x.clone()]),
        (Op::PowScalar(-0.5), vec![positive.clone()]),
    ];
    let bits = |t: &Tensor| -> Vec<u32> {
        t.read_f32("test")
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    for (op, inputs) in cases {
        let infos: Vec<_> = inputs.iter().map(|i| i.info().clone()).collect();
        assert!(one.supports(&op, &infos), "{op:?}");
        let a = one.execute(&op, &inputs, &mut ctx).unwrap();
        let b = two.execute(&op, &inputs, &mut ctx).unwrap();
        let want = reference::execute(&op, &inputs).unwrap();
        assert_eq!(bits(&a[0]), bits(&b[0]), "{op:?}: 1 and 2 threads differ");
        let e = rel_err(
            &a[0].read_f32("test").unwrap(),
            &want[0].read_f32("test").unwrap(),
        );
        assert!(e <= 1e-5, "{op:?}: relative error {e} vs the reference");
    }
}
