//! The fast cpu ops against the CPU reference, on fresh random inputs with
//! awkward shapes, within the ops.md one-op tolerances; the SIMD and the
//! portable vector primitives against an f64 sum.

mod backend_util;

use backend_util::{
    check_op, check_op_floor, matmul_typical, rand_tensor, rand_weight, rel_err, rng, values,
};
use cyb_llm::backend::cpu::simd;
use cyb_llm::backend::{rope_cache, rope_inv_freq, Mask, Op, RopeStyle, Tensor};
use cyb_llm::DType;
use rand::Rng;

/// One-op tolerance for f32 (ops.md).
const F32_TOL: f32 = 1e-5;
/// Sizes ops.md asks tests to use.
const AWKWARD: [usize; 5] = [1, 3, 17, 255, 4097];
/// Rows used with the widest size: 17 x 4097 values push every op past the
/// thread-pool threshold, so both the inline and the parallel paths run.
fn rows_for(d: usize) -> usize {
    if d == 4097 {
        17
    } else {
        3
    }
}

#[test]
fn simd_and_portable_dot_and_axpy_match_f64() {
    let mut r = rng("simd");
    for n in [0, 1, 3, 7, 8, 9, 15, 16, 17, 255, 4097] {
        let (a, b) = (values(&mut r, n), values(&mut r, n));
        let exact: f64 = a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).sum();
        let scale = a.iter().map(|x| x.abs() as f64).sum::<f64>().max(1.0);
        let portable = simd::portable::dot(&a, &b) as f64;
        assert!(
            (portable - exact).abs() / scale < 1e-6,
            "portable dot n={n}"
        );
        let dispatched = simd::dot(&a, &b) as f64;
        assert!((dispatched - exact).abs() / scale < 1e-6, "dot n={n}");
        let alpha = r.gen_range(-2.0f32..2.0);
        let mut y1 = b.clone();
        simd::portable::axpy(alpha, &a, &mut y1);
        let mut y2 = b.clone();
        simd::axpy(alpha, &a, &mut y2);
        let want: Vec<f32> = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| (alpha as f64 * x as f64 + y as f64) as f32)
            .collect();
        // An axpy's rounding error is relative to its terms, not to its result (which
        // cancels to near zero where alpha x = -y).
        let terms = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| (alpha * x).abs() + y.abs())
            .fold(1e-6f32, f32::max);
        let err = |y: &[f32]| {
            y.iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0f32, f32::max)
                / terms
        };
        assert!(
            err(&y1) < 1e-6 && err(&y2) < 1e-6,
            "axpy n={n}: error {} / {} of the terms' size",
            err(&y1),
            err(&y2)
        );
        #[cfg(target_arch = "x86_64")]
        if simd::has_avx2_fma() {
            // SAFETY: checked just above.
            let avx = unsafe { simd::avx2::dot(&a, &b) } as f64;
            assert!((avx - exact).abs() / scale < 1e-6, "avx2 dot n={n}");
        }
    }
}

#[test]
fn matmul_f32_f16_bf16_awkward_shapes() {
    let mut r = rng("matmul_float");
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for &k in &AWKWARD {
            for &n in &[1, 3, 17] {
                for m in [1, 3] {
                    let x = rand_tensor(&mut r, &[m, k]);
                    let w = rand_weight(&mut r, &[n, k], dtype);
                    let floor = matmul_typical(&x, &w);
                    check_op_floor(&Op::Matmul, &[x, w], F32_TOL, 2, floor);
                }
            }
        }
    }
    // K = 0: every output is an empty sum.
    let x = Tensor::from_f32(&[3, 0], vec![]).unwrap();
    let w = rand_weight(&mut r, &[4, 0], DType::F32);
    let y =
        cyb_llm::backend::cpu::reference::execute(&Op::Matmul, &[x.clone(), w.clone()]).unwrap();
    assert_eq!(y[0].as_f32().unwrap(), &[0.0; 12]);
    check_op(&Op::Matmul, &[x, w], 0.0, 2);
    // Host f32 weights (not bytes), 3-d activations.
    let x = rand_tensor(&mut r, &[2, 3, 17]);
    let w = rand_tensor(&mut r, &[255, 17]);
    check_op(&Op::Matmul, &[x, w], F32_TOL, 3);
}

/// The cpu backend runs quantized matmuls with 8-bit activations, so each
/// output may differ from the reference by what rounding the activations
/// moves: at most half a step (`max|x over its block| / 254`) per value,
/// `|y - ref| <= sum_k |W[n,k]| * half_step_k` (plus f32 rounding). This is
/// checked per output; ternary (decoded to f32) must meet the f32 tolerance.
#[test]
fn matmul_every_quantized_encoding() {
    use cyb_llm::backend::cpu::{reference, CpuBackend};
    use cyb_llm::backend::{Backend, ExecContext};
    let mut r = rng("matmul_quant");
    let encodings = DType::MATMUL_WEIGHTS
        .into_iter()
        .filter(|d| d.is_quantized());
    let cpu = CpuBackend::new(2).unwrap();
    let mut ctx = ExecContext::new(2);
    for dtype in encodings {
        let bv = dtype.block_values();
        for k in [bv, 3 * bv] {
            for n in [1, 17, 64] {
                for m in [1, 3] {
                    let x = rand_tensor(&mut r, &[m, k]);
                    let w = rand_weight(&mut r, &[n, k], dtype);
                    let got = cpu
                        .execute(&Op::Matmul, &[x.clone(), w.clone()], &mut ctx)
                        .unwrap();
                    let want = reference::execute(&Op::Matmul, &[x.clone(), w.clone()]).unwrap();
                    let (got, want) = (got[0].as_f32().unwrap(), want[0].as_f32().unwrap());
                    let (xv, wv) = (x.as_f32().unwrap(), w.read_f32("test").unwrap());
                    for i in 0..m {
                        let xr = &xv[i * k..(i + 1) * k];
                        for j in 0..n {
                            let mut bound = 0.0f64;
                            for c in 0..k {
                                let block = &xr[c / bv * bv..(c / bv + 1) * bv];
                                let amax = block.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                                let wa = wv[j * k + c].abs() as f64;
                                bound += wa * (amax as f64 / 254.0) * 1.001
                                    + wa * xr[c].abs() as f64 * 1e-5;
                            }
                            let err = (got[i * n + j] - want[i * n + j]).abs() as f64;
                            assert!(
                                err <= bound + 1e-6,
                                "{dtype} [{m},{k}]x[{n},{k}] out ({i},{j}): |y - ref| = {err} > bound {bound}"
                            );
                        }
                    }
                }
            }
        }
    }
    for k in [4, 12, 4096] {
        let x = rand_tensor(&mut r, &[3, k]);
        let w = rand_weight(&mut r, &[17, k], DType::Ternary);
        check_op(&Op::Matmul, &[x, w], F32_TOL, 2);
    }
}

#[test]
fn binary_ops_with_broadcasting() {
    let mut r = rng("binary");
    let cases: [(&[usize], &[usize]); 8] = [
        (&[17, 255], &[17, 255]),
        (&[3, 4097], &[4097]),
        (&[17, 4097], &[4097]),
        (&[17, 4097], &[17, 4097]),
        (&[1], &[1]),
        (&[255], &[3, 255]),
        (&[3, 1, 5], &[1, 4, 5]),
        (&[3, 17], &[3, 1]),
    ];
    for (a, b) in cases {
        for op in [Op::Add, Op::Sub, Op::Mul, Op::Div] {
            let x = rand_tensor(&mut r, a);
            let y = rand_tensor(&mut r, b);
            check_op(&op, &[x, y], F32_TOL, 2);
        }
    }
}

#[test]
fn unary_ops_and_glus() {
    let mut r = rng("unary");
    let ops = [
        Op::Scale(0.37),
        Op::Clamp { lo: -0.3, hi: 0.5 },
        Op::Silu,
        Op::Gelu,
        Op::GeluTanh,
        Op::Relu,
        Op::LeakyRelu(0.01),
        Op::Sigmoid,
        Op::Tanh,
        Op::Softcap(0.5),
    ];
    for &n in &AWKWARD {
        let rows = rows_for(n);
        for op in &ops {
            // Scale up so activations see their tails, not just the linear part.
            let v = values(&mut r, rows * n).iter().map(|v| v * 6.0).collect();
            let x = Tensor::from_f32(&[rows, n], v).unwrap();
            // In f32 an activation's error follows its input's size: in a tail such as
            // GELU's (0.5 x (1 + erf), cancelling for x < -2) the reference's own rounding
            // is about 6e-8 |x|, so outputs below 1 are judged against 1.
            check_op_floor(op, &[x], F32_TOL, 2, 1.0);
        }
        for op in [Op::SwiGlu, Op::GeGlu] {
            let (g, u) = (
                rand_tensor(&mut r, &[rows, n]),
                rand_tensor(&mut r, &[rows, n]),
            );
            check_op(&op, &[g, u], F32_TOL, 2);
        }
    }
}

#[test]
fn softmax_rows_including_masked_rows() {
    let mut r = rng("softmax");
    for &d in &AWKWARD {
        let x = rand_tensor(&mut r, &[rows_for(d), d]);
        check_op(&Op::Softmax, &[x], F32_TOL, 2);
    }
    let mut v = values(&mut r, 17 * 2);
    v[..17].fill(f32::NEG_INFINITY);
    v[20] = f32::NEG_INFINITY;
    let x = Tensor::from_f32(&[2, 17], v).unwrap();
    check_op(&Op::Softmax, std::slice::from_ref(&x), F32_TOL, 2);
    let y = cyb_llm::backend::cpu::reference::execute(&Op::Softmax, &[x]).unwrap();
    let y = y[0].as_f32().unwrap();
    assert!(
        y[..17].iter().all(|&p| p == 0.0),
        "an all -inf row gives zeros"
    );
    assert_eq!(y[20], 0.0);
}

#[test]
fn norms() {
    let mut r = rng("norms");
    for &d in &AWKWARD {
        for add_one in [false, true] {
            let x = rand_tensor(&mut r, &[rows_for(d), d]);
            let g = rand_tensor(&mut r, &[d]);
            check_op(&Op::RmsNorm { eps: 1e-6, add_one }, &[x, g], F32_TOL, 2);
        }
        let x = rand_tensor(&mut r, &[rows_for(d), d]);
        let (g, b) = (rand_tensor(&mut r, &[d]), rand_tensor(&mut r, &[d]));
        check_op(
            &Op::LayerNorm { eps: 1e-5 },
            &[x.clone(), g.clone(), b],
            F32_TOL,
            2,
        );
        check_op(&Op::LayerNorm { eps: 1e-5 }, &[x, g], F32_TOL, 2);
    }
    // Gains stored as f16 bytes.
    let x = rand_tensor(&mut r, &[2, 255]);
    let g = rand_weight(&mut r, &[255], DType::F16);
    check_op(
        &Op::RmsNorm {
            eps: 1e-5,
            add_one: false,
        },
        &[x, g],
        F32_TOL,
        2,
    );
}

#[test]
fn rope_both_styles_partial_rotation_offsets_and_cache() {
    let mut r = rng("rope");
    for style in [RopeStyle::Neox, RopeStyle::Normal] {
        for (s, h, d, rot) in [
            (1, 1, 2, 2),
            (3, 4, 64, 64),
            (17, 3, 64, 32),
            (5, 2, 18, 8),
            (255, 8, 64, 64),
        ] {
            let pos = r.gen_range(0..5000);
            let x = rand_tensor(&mut r, &[s, h, d]);
            let op = Op::Rope {
                style,
                rot_dim: rot,
                pos,
                base: 10000.0,
            };
            check_op(&op, std::slice::from_ref(&x), F32_TOL, 2);
            let (cos, sin) = rope_cache(pos + s, &rope_inv_freq(rot, 10000.0)).unwrap();
            check_op(&op, &[x.clone(), cos.clone(), sin.clone()], F32_TOL, 2);
            // The cache and the on-the-fly angles agree.
            let a =
                cyb_llm::backend::cpu::reference::execute(&op, std::slice::from_ref(&x)).unwrap();
            let b = cyb_llm::backend::cpu::reference::execute(&op, &[x, cos, sin]).unwrap();
            assert!(rel_err(a[0].as_f32().unwrap(), b[0].as_f32().unwrap()) < F32_TOL);
        }
    }
}

#[test]
fn sdpa_masks_gqa_and_long_contexts() {
    let mut r = rng("sdpa");
    // (Sq, H, Hkv, d, Sk, q_pos)
    let shapes = [
        (1, 1, 1, 1, 1, 0),
        (3, 4, 2, 17, 3, 0),
        (1, 8, 2, 64, 4097, 4096),
        (17, 6, 3, 32, 255, 238),
        (5, 2, 1, 8, 300, 100),
        // A Whisper decoder step of five sequences against one window's 1500 frames.
        (5, 6, 6, 64, 1500, 0),
    ];
    for (sq, h, hkv, d, sk, q_pos) in shapes {
        let q = rand_tensor(&mut r, &[sq, h, d]);
        let k = rand_tensor(&mut r, &[sk, hkv, d]);
        let v = rand_tensor(&mut r, &[sk, hkv, d]);
        let keep: Vec<bool> = (0..sk).map(|_| r.gen_bool(0.7)).collect();
        for mask in [
            Mask::None,
            Mask::Causal,
            Mask::Sliding(7),
            Mask::Padding(keep.clone()),
        ] {
            let op = Op::Sdpa {
                scale: None,
                mask,
                q_pos,
                kv_len: None,
            };
            check_op(&op, &[q.clone(), k.clone(), v.clone()], F32_TOL, 2);
        }
        // Reading only the first rows of a larger buffer, with an explicit scale.
        if sk > 2 {
            let op = Op::Sdpa {
                scale: Some(0.3),
                mask: Mask::Causal,
                q_pos: 0,
                kv_len: Some(sk - 2),
            };
            check_op(&op, &[q, k, v], F32_TOL, 2);
        }
    }
}

#[test]
fn kv_append_then_sdpa_reads_the_cache() {
    let mut r = rng("kv");
    let (max_ctx, hkv, d, h) = (20, 2, 8, 4);
    let kc = Tensor::state_zeros(&[max_ctx, hkv, d]);
    let vc = Tensor::state_zeros(&[max_ctx, hkv, d]);
    let mut all_k = Vec::new();
    let mut all_v = Vec::new();
    let mut pos = 0;
    for s in [5, 1, 1, 3] {
        let k = rand_tensor(&mut r, &[s, hkv, d]);
        let v = rand_tensor(&mut r, &[s, hkv, d]);
        all_k.extend_from_slice(k.as_f32().unwrap());
        all_v.extend_from_slice(v.as_f32().unwrap());
        let op = Op::KvAppend { pos };
        check_op(&op, &[kc.clone(), vc.clone(), k, v], 0.0, 2);
        pos += s;
        let q = rand_tensor(&mut r, &[s, h, d]);
        let sdpa = Op::Sdpa {
            scale: None,
            mask: Mask::Causal,
            q_pos: pos - s,
            kv_len: Some(pos),
        };
        check_op(&sdpa, &[q.clone(), kc.clone(), vc.clone()], F32_TOL, 2);
        // Same as attention over plain tensors holding exactly the appended rows.
        let k_plain = Tensor::from_f32(&[pos, hkv, d], all_k.clone()).unwrap();
        let v_plain = Tensor::from_f32(&[pos, hkv, d], all_v.clone()).unwrap();
        let plain = Op::Sdpa {
            scale: None,
            mask: Mask::Causal,
            q_pos: pos - s,
            kv_len: None,
        };
        let a =
            cyb_llm::backend::cpu::reference::execute(&sdpa, &[q.clone(), kc.clone(), vc.clone()])
                .unwrap();
        let b = cyb_llm::backend::cpu::reference::execute(&plain, &[q, k_plain, v_plain]).unwrap();
        assert_eq!(a[0].as_f32().unwrap(), b[0].as_f32().unwrap());
    }
    let k = rand_tensor(&mut r, &[max_ctx - pos + 1, hkv, d]);
    let v = rand_tensor(&mut r, &[max_ctx - pos + 1, hkv, d]);
    let err = cyb_llm::backend::cpu::reference::execute(&Op::KvAppend { pos }, &[kc, vc, k, v])
        .unwrap_err();
    assert_eq!(
        err,
        cyb_llm::ExecutionError::ContextOverflow {
            max: max_ctx,
            requested: max_ctx + 1
        }
    );
}

#[test]
fn embed_plain_and_quantized_tables_and_bad_ids() {
    let mut r = rng("embed");
    for dtype in [DType::F32, DType::F16, DType::Q8_0, DType::Q4K, DType::Q6K] {
        let d = dtype.block_values().max(32) * 2;
        let table = rand_weight(&mut r, &[300, d], dtype);
        let ids: Vec<i32> = (0..17).map(|_| r.gen_range(0..300)).collect();
        let ids = Tensor::from_i32(&[17], ids).unwrap();
        check_op(&Op::Embed, &[ids, table.clone()], 0.0, 2);
        for bad in [-1, 300] {
            let ids = Tensor::from_i32(&[2], vec![0, bad]).unwrap();
            let cpu = cyb_llm::backend::cpu::CpuBackend::new(1).unwrap();
            let mut ctx = cyb_llm::backend::ExecContext::new(1);
            use cyb_llm::backend::Backend;
            let err = cpu
                .execute(&Op::Embed, &[ids.clone(), table.clone()], &mut ctx)
                .unwrap_err();
            let want = cyb_llm::ExecutionError::IndexOutOfRange {
                op: "Embed".into(),
                index: bad as i64,
                len: 300,
            };
            assert_eq!(err, want);
            assert_eq!(
                cyb_llm::backend::cpu::reference::execute(&Op::Embed, &[ids, table.clone()])
                    .unwrap_err(),
                want
            );
        }
    }
}

/// Each fused op equals its unfused composition on the same backend (cpu and
/// reference), and for f32 weights the cpu matches the reference.
#[test]
fn fused_ops_equal_their_compositions() {
    use cyb_llm::backend::cpu::{reference, CpuBackend};
    use cyb_llm::backend::{Backend, ExecContext};
    let mut r = rng("fused");
    let cpu = CpuBackend::new(2).unwrap();
    let mut ctx = ExecContext::new(2);
    for (k, n, dtype) in [
        (17, 17, DType::F32),
        (255, 64, DType::F32),
        (256, 255, DType::Q8_0),
        (256, 17, DType::Q4K),
    ] {
        let x = rand_tensor(&mut r, &[3, k]);
        let skip = rand_tensor(&mut r, &[3, k]);
        let g = rand_tensor(&mut r, &[k]);
        let w = [0, 1, 2].map(|_| rand_weight(&mut r, &[n, k], dtype));
        let (eps, add_one) = (1e-6, true);
        let norm_mm = [x.clone(), g.clone(), w[0].clone()];
        let skip_norm = [x.clone(), skip.clone(), g.clone()];
        let swiglu = [x.clone(), w[0].clone(), w[1].clone()];
        let qkv = [x.clone(), w[0].clone(), w[1].clone(), w[2].clone()];
        for on_cpu in [true, false] {
            let mut run = |op: &Op, inputs: &[Tensor]| -> Vec<Tensor> {
                if on_cpu {
                    cpu.execute(op, inputs, &mut ctx).unwrap()
                } else {
                    reference::execute(op, inputs).unwrap()
                }
            };
            let close = |a: &Tensor, b: &Tensor, what: &str| {
                let e = rel_err(a.as_f32().unwrap(), b.as_f32().unwrap());
                assert!(
                    e <= F32_TOL,
                    "{what} ({dtype}, cpu={on_cpu}): fused vs unfused {e}"
                );
            };
            let h = run(&Op::RmsNorm { eps, add_one }, &[x.clone(), g.clone()]);
            let want = run(&Op::Matmul, &[h[0].clone(), w[0].clone()]);
            close(
                &run(&Op::FusedNormMatmul { eps, add_one }, &norm_mm)[0],
                &want[0],
                "FusedNormMatmul",
            );

            let sum = run(&Op::Add, &[x.clone(), skip.clone()]);
            let normed = run(&Op::RmsNorm { eps, add_one }, &[sum[0].clone(), g.clone()]);
            let got = run(&Op::FusedSkipNorm { eps, add_one }, &skip_norm);
            close(&got[0], &normed[0], "FusedSkipNorm normed");
            close(&got[1], &sum[0], "FusedSkipNorm sum");

            let gate = run(&Op::Matmul, &[x.clone(), w[0].clone()]);
            let up = run(&Op::Matmul, &[x.clone(), w[1].clone()]);
            let want = run(&Op::SwiGlu, &[gate[0].clone(), up[0].clone()]);
            close(&run(&Op::FusedSwiGlu, &swiglu)[0], &want[0], "FusedSwiGlu");

            let got = run(&Op::FusedQkv, &qkv);
            for i in 0..3 {
                let want = run(&Op::Matmul, &[x.clone(), w[i].clone()]);
                close(&got[i], &want[0], "FusedQkv");
            }
        }
        if dtype == DType::F32 {
            check_op(&Op::FusedNormMatmul { eps, add_one }, &norm_mm, F32_TOL, 2);
            check_op(&Op::FusedSwiGlu, &swiglu, F32_TOL, 2);
            check_op(&Op::FusedQkv, &qkv, F32_TOL, 2);
        }
        check_op(&Op::FusedSkipNorm { eps, add_one }, &skip_norm, F32_TOL, 2);
    }
}

#[test]
fn reshape_is_zero_copy_and_shape_errors_are_structured() {
    let mut r = rng("reshape");
    let x = rand_tensor(&mut r, &[3, 17]);
    let cpu = cyb_llm::backend::cpu::CpuBackend::new(1).unwrap();
    let mut ctx = cyb_llm::backend::ExecContext::new(1);
    use cyb_llm::backend::Backend;
    let y = cpu
        .execute(
            &Op::Reshape(vec![17, 3]),
            std::slice::from_ref(&x),
            &mut ctx,
        )
        .unwrap();
    assert_eq!(y[0].shape(), &[17, 3]);
    assert_eq!(
        y[0].as_f32().unwrap().as_ptr(),
        x.as_f32().unwrap().as_ptr()
    );
    let err = cpu
        .execute(
            &Op::Matmul,
            &[x.clone(), rand_tensor(&mut r, &[4, 16])],
            &mut ctx,
        )
        .unwrap_err();
    assert!(
        matches!(err, cyb_llm::ExecutionError::ShapeMismatch { .. }),
        "{err:?}"
    );
    let err = cpu
        .execute(&Op::Add, &[x, rand_tensor(&mut r, &[4])], &mut ctx)
        .unwrap_err();
    assert!(
        matches!(err, cyb_llm::ExecutionError::ShapeMismatch { .. }),
        "{err:?}"
    );
}

#[test]
fn sample_greedy_top_k_and_seeded_draws() {
    use cyb_llm::backend::cpu::reference::sample;
    use cyb_llm::backend::SampleParams;
    let mut r = rng("sample");
    let logits = values(&mut r, 255);
    let argmax = logits
        .iter()
        .enumerate()
        .fold(0, |b, (i, &v)| if v > logits[b] { i } else { b }) as i32;
    let greedy = SampleParams {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
        u: 0.5,
    };
    assert_eq!(sample(&logits, &[], &greedy), argmax);
    let top1 = SampleParams {
        temperature: 0.8,
        top_k: 1,
        u: 0.99,
        ..greedy.clone()
    };
    assert_eq!(sample(&logits, &[], &top1), argmax);
    // A strong penalty on the argmax moves greedy to another token.
    let penal = SampleParams {
        repeat_penalty: 1e6,
        ..greedy.clone()
    };
    if logits[argmax as usize] > 0.0 {
        assert_ne!(sample(&logits, &[argmax], &penal), argmax);
    }
    // Draws spread across tokens in proportion to their probability.
    let two = [0.0f32, (3.0f32).ln()]; // probabilities 1/4, 3/4
    let mut hits = 0;
    for i in 0..1000 {
        let p = SampleParams {
            temperature: 1.0,
            u: (i as f32 + 0.5) / 1000.0,
            ..greedy.clone()
        };
        hits += (sample(&two, &[], &p) == 1) as i32;
    }
    assert!((740..=760).contains(&hits), "{hits}");
}

#[test]
fn conv1d_group_norm_layout_ops_run_through_cpu() {
    let mut r = rng("misc");
    let x = rand_tensor(&mut r, &[3, 17]);
    let w = rand_tensor(&mut r, &[4, 3, 3]);
    let b = rand_tensor(&mut r, &[4]);
    check_op(
        &Op::Conv1d {
            stride: 2,
            padding: 1,
        },
        &[x.clone(), w, b],
        F32_TOL,
        2,
    );
    let gx = rand_tensor(&mut r, &[2, 6, 5]);
    let (g, bb) = (rand_tensor(&mut r, &[6]), rand_tensor(&mut r, &[6]));
    check_op(
        &Op::GroupNorm {
            groups: 3,
            eps: 1e-5,
        },
        &[gx, g, bb],
        F32_TOL,
        2,
    );
    check_op(&Op::Permute(vec![1, 0]), std::slice::from_ref(&x), 0.0, 2);
    check_op(&Op::Concat { axis: 1 }, &[x.clone(), x.clone()], 0.0, 2);
    check_op(
        &Op::Slice {
            axis: 1,
            start: 3,
            end: 9,
        },
        std::slice::from_ref(&x),
        0.0,
        2,
    );
    check_op(
        &Op::Split {
            axis: 1,
            sizes: vec![5, 12],
        },
        std::slice::from_ref(&x),
        0.0,
        2,
    );
    check_op(&Op::Argmax, &[x], 0.0, 2);
}

/// `MatmulBias` (with and without each element-wise activation) and `FusedLinearAddNorm`
/// give exactly their op compositions on the cpu backend (the float GEMM finishes each task's
/// rows while they are in cache, the other kernels afterwards), on both sides of the GEMM's
/// row threshold and for quantized weights; and the reference within the one-op tolerance.
#[test]
fn linear_layer_ops_equal_their_compositions() {
    use cyb_llm::backend::cpu::CpuBackend;
    use cyb_llm::backend::{Backend, ExecContext};
    let mut r = rng("matmul_bias");
    let cpu = CpuBackend::new(2).unwrap();
    let mut ctx = ExecContext::new(2);
    let acts = [
        None,
        Some(Op::Gelu),
        Some(Op::GeluTanh),
        Some(Op::Relu),
        Some(Op::Silu),
        Some(Op::Tanh),
        Some(Op::Sigmoid),
        Some(Op::Scale(0.5)),
        Some(Op::Clamp { lo: -0.1, hi: 0.2 }),
        Some(Op::LeakyRelu(0.1)),
        Some(Op::Softcap(3.0)),
    ];
    let eps = 1e-12;
    for dtype in [DType::F32, DType::F16, DType::Q8_0, DType::Q4K] {
        for (m, n) in [(1, 17), (3, 255), (8, 3), (17, 17), (100, 255), (300, 64)] {
            let k = 256;
            let x = rand_tensor(&mut r, &[m, k]);
            let w = rand_weight(&mut r, &[n, k], dtype);
            let b = rand_tensor(&mut r, &[n]);
            let (h, g, beta) = (
                rand_tensor(&mut r, &[m, n]),
                rand_tensor(&mut r, &[n]),
                rand_tensor(&mut r, &[n]),
            );
            let mut run = |op: &Op, inputs: &[Tensor]| cpu.execute(op, inputs, &mut ctx).unwrap();
            let y = run(&Op::Matmul, &[x.clone(), w.clone()]);
            let biased = run(&Op::Add, &[y[0].clone(), b.clone()]);
            for act in &acts {
                let op = Op::MatmulBias {
                    act: act.clone().map(Box::new),
                };
                let fused = run(&op, &[x.clone(), w.clone(), b.clone()]);
                let want = match act {
                    Some(a) => run(a, &[biased[0].clone()]),
                    None => biased.clone(),
                };
                assert_eq!(
                    fused[0].as_f32().unwrap(),
                    want[0].as_f32().unwrap(),
                    "{op:?} vs its ops ({dtype}, m={m}, n={n})"
                );
            }
            let sum = run(&Op::Add, &[h.clone(), biased[0].clone()]);
            let want = run(
                &Op::LayerNorm { eps },
                &[sum[0].clone(), g.clone(), beta.clone()],
            );
            let post_norm = Op::FusedLinearAddNorm { eps };
            let args = [x.clone(), w.clone(), b.clone(), h, g, beta];
            let fused = run(&post_norm, &args);
            assert_eq!(
                fused[0].as_f32().unwrap(),
                want[0].as_f32().unwrap(),
                "FusedLinearAddNorm vs its ops ({dtype}, m={m}, n={n})"
            );
            if !dtype.is_quantized() {
                let floor = matmul_typical(&x, &w);
                let gelu = Op::MatmulBias {
                    act: Some(Box::new(Op::Gelu)),
                };
                check_op_floor(&gelu, &[x.clone(), w.clone(), b], F32_TOL, 2, floor);
                check_op(&post_norm, &args, 1e-4, 2);
            }
        }
    }
    // A bias of the wrong length, a residual of the wrong shape and an activation that is
    // not element-wise are errors, not panics.
    let x = rand_tensor(&mut r, &[3, 32]);
    let w = rand_weight(&mut r, &[5, 32], DType::F32);
    let (b4, b5) = (rand_tensor(&mut r, &[4]), rand_tensor(&mut r, &[5]));
    let plain = Op::MatmulBias { act: None };
    assert!(cpu
        .execute(&plain, &[x.clone(), w.clone(), b4], &mut ctx)
        .is_err());
    let softmax = Op::MatmulBias {
        act: Some(Box::new(Op::Softmax)),
    };
    let err = cpu.execute(&softmax, &[x.clone(), w.clone(), b5.clone()], &mut ctx);
    assert!(
        err.is_err(),
        "Softmax accepted as an element-wise activation"
    );
    let h = rand_tensor(&mut r, &[3, 4]);
    let args = [x, w, b5.clone(), h, b5.clone(), b5];
    let err = cpu.execute(&Op::FusedLinearAddNorm { eps }, &args, &mut ctx);
    assert!(err.is_err(), "residual [3, 4] for [3, 5] outputs accepted");
}

/// `FusedGroupNorm` (with and without the per batch entry and channel modulation, with and
/// without an activation) gives exactly its op composition on the cpu backend — on both sides
/// of the thread-pool threshold, with one modulation entry for the whole batch and one per
/// entry — and the reference within the one-op tolerance; bad modulation shapes are errors.
#[test]
fn fused_group_norm_equals_its_composition() {
    use cyb_llm::backend::cpu::CpuBackend;
    use cyb_llm::backend::{Backend, ExecContext};
    let mut r = rng("fused_group_norm");
    let cpu = CpuBackend::new(2).unwrap();
    let mut ctx = ExecContext::new(2);
    let (groups, eps) = (4, 1e-5);
    for (shape, entries) in [([2, 8, 3, 5], 2), ([2, 8, 3, 5], 1), ([3, 32, 40, 40], 3)] {
        let c = shape[1];
        let x = rand_tensor(&mut r, &shape);
        let (g, b) = (
            rand_tensor(&mut r, &[groups]),
            rand_tensor(&mut r, &[groups]),
        );
        let (gamma, beta) = (
            rand_tensor(&mut r, &[c, 1, 1]),
            rand_tensor(&mut r, &[c, 1, 1]),
        );
        let scale = rand_tensor(&mut r, &[entries, c, 1, 1]);
        let shift = rand_tensor(&mut r, &[entries, c, 1, 1]);
        let mut run = |op: &Op, inputs: &[Tensor]| cpu.execute(op, inputs, &mut ctx).unwrap();
        let plain = [x.clone(), g.clone(), b.clone(), gamma.clone(), beta.clone()];
        let normed = run(&Op::GroupNormAffine { groups, eps }, &plain);
        let scaled = run(&Op::Mul, &[normed[0].clone(), scale.clone()]);
        let modulated = run(&Op::Add, &[scaled[0].clone(), shift.clone()]);
        let mut full = plain.to_vec();
        full.extend([scale.clone(), shift.clone()]);
        for act in [None, Some(Op::Silu), Some(Op::Gelu)] {
            for (inputs, before) in [(&plain[..], &normed[0]), (&full[..], &modulated[0])] {
                let op = Op::FusedGroupNorm {
                    groups,
                    eps,
                    act: act.clone().map(Box::new),
                };
                let want = match &act {
                    Some(a) => run(a, std::slice::from_ref(before)).remove(0),
                    None => before.clone(),
                };
                let got = run(&op, inputs);
                assert_eq!(
                    got[0].as_f32().unwrap(),
                    want.as_f32().unwrap(),
                    "{op:?} vs its ops ({shape:?}, {} inputs)",
                    inputs.len()
                );
                check_op(&op, inputs, 1e-4, 2);
            }
        }
    }
    // Modulation of another channel count, of another batch, or not per channel: errors.
    let x = rand_tensor(&mut r, &[2, 8, 3, 5]);
    let (g, b) = (rand_tensor(&mut r, &[4]), rand_tensor(&mut r, &[4]));
    let (gamma, beta) = (rand_tensor(&mut r, &[8]), rand_tensor(&mut r, &[8]));
    let op = Op::FusedGroupNorm {
        groups: 4,
        eps: 1e-5,
        act: None,
    };
    for bad in [[2, 4, 1, 1], [3, 8, 1, 1], [2, 8, 3, 1]] {
        let m = rand_tensor(&mut r, &bad);
        let inputs = [
            x.clone(),
            g.clone(),
            b.clone(),
            gamma.clone(),
            beta.clone(),
            m.clone(),
            m,
        ];
        assert!(
            cpu.execute(&op, &inputs, &mut ctx).is_err(),
            "modulation {bad:?} for x [2, 8, 3, 5] accepted"
        );
    }
}

/// `FusedConvAdd` gives exactly `Conv2d`, `Reshape` to the residual's shape, `Add` on the
/// cpu backend (the direct kernel's tiles, stored in place and through its tile buffer, and
/// the im2col path for strided convolutions), with and without the `LeakyRelu` before the
/// convolution, and the reference within the one-op tolerance; a second addend after the
/// residual likewise (of the sum's shape, and broadcast); a residual of another size is an
/// error.
#[test]
fn fused_conv_add_equals_its_composition() {
    use cyb_llm::backend::cpu::CpuBackend;
    use cyb_llm::backend::{Backend, ExecContext};
    let mut r = rng("fused_conv_add");
    let cpu = CpuBackend::new(2).unwrap();
    let mut ctx = ExecContext::new(2);
    let conv = |stride: [usize; 2], pads: [usize; 4], dilation: [usize; 2]| Op::Conv2d {
        stride,
        pads,
        dilation,
        groups: 1,
    };
    let cases = [
        // 1-D as Piper's decoder runs it (a rank-3 residual), dilated.
        (
            [1, 32, 1, 3000],
            [32, 32, 1, 3],
            conv([1, 1], [0, 3, 0, 3], [1, 3]),
            true,
        ),
        // 3x3 planes as the UNet's blocks (padded rows: the tile buffer), batch 2.
        (
            [2, 16, 20, 24],
            [24, 16, 3, 3],
            conv([1, 1], [1, 1, 1, 1], [1, 1]),
            false,
        ),
        // 1x1 without padding (stored in place), no bias.
        (
            [1, 16, 32, 32],
            [16, 16, 1, 1],
            conv([1, 1], [0, 0, 0, 0], [1, 1]),
            false,
        ),
        // Strided: not the direct kernel.
        (
            [1, 8, 9, 11],
            [4, 8, 3, 3],
            conv([2, 2], [1, 1, 1, 1], [1, 1]),
            false,
        ),
    ];
    for (i, (xs, ws, op, flat)) in cases.into_iter().enumerate() {
        for leaky in [None, Some(0.1)] {
            let x = rand_tensor(&mut r, &xs);
            let w = rand_tensor(&mut r, &ws);
            let activated = match leaky {
                Some(s) => cpu
                    .execute(&Op::LeakyRelu(s), std::slice::from_ref(&x), &mut ctx)
                    .unwrap()
                    .remove(0),
                None => x.clone(),
            };
            let mut inputs = vec![activated, w];
            if i != 2 {
                inputs.push(rand_tensor(&mut r, &[ws[0]]));
            }
            let y = cpu.execute(&op, &inputs, &mut ctx).unwrap().remove(0);
            let mut shape = y.shape().to_vec();
            if flat {
                shape.remove(2);
            }
            let residual = rand_tensor(&mut r, &shape);
            let y = Tensor::from_f32(&shape, y.as_f32().unwrap().to_vec()).unwrap();
            let want = cpu
                .execute(&Op::Add, &[y, residual.clone()], &mut ctx)
                .unwrap();
            let fused = Op::FusedConvAdd {
                conv: Box::new(op.clone()),
                leaky,
                second: false,
            };
            inputs[0] = x;
            let mut all = vec![residual];
            all.extend(inputs);
            let got = cpu.execute(&fused, &all, &mut ctx).unwrap();
            assert_eq!(got[0].shape(), want[0].shape(), "{op:?}");
            assert_eq!(
                got[0].as_f32().unwrap(),
                want[0].as_f32().unwrap(),
                "{op:?} {xs:?} leaky {leaky:?}: fused vs LeakyRelu, Conv2d, Add"
            );
            check_op(&fused, &all, 1e-4, 2);
            // A second addend after the residual: of the sum's shape (added in the stores),
            // and one that broadcasts along the last axis (the fused sum, then `Add`).
            let second = Op::FusedConvAdd {
                conv: Box::new(op.clone()),
                leaky,
                second: true,
            };
            let mut last_one = want[0].shape().to_vec();
            if let Some(d) = last_one.last_mut() {
                *d = 1;
            }
            for shape in [want[0].shape().to_vec(), last_one] {
                let s = rand_tensor(&mut r, &shape);
                let want2 = cpu
                    .execute(&Op::Add, &[want[0].clone(), s.clone()], &mut ctx)
                    .unwrap();
                let mut all2 = vec![all[0].clone(), s];
                all2.extend_from_slice(&all[1..]);
                let got2 = cpu.execute(&second, &all2, &mut ctx).unwrap();
                assert_eq!(got2[0].shape(), want2[0].shape(), "{op:?} {shape:?}");
                assert_eq!(
                    got2[0].as_f32().unwrap(),
                    want2[0].as_f32().unwrap(),
                    "{op:?} {xs:?} leaky {leaky:?} second {shape:?}: fused vs its composition"
                );
                check_op(&second, &all2, 1e-4, 2);
            }
            all[0] = rand_tensor(&mut r, &[3]);
            assert!(
                cpu.execute(&fused, &all, &mut ctx).is_err(),
                "residual [3] accepted for {xs:?}"
            );
        }
    }
}

/// `FusedAttention` against `BatchMatmul`, `Softmax`, `BatchMatmul` (reference), on the cpu
/// backend (the tiled kernels for long sequences, the row kernels for short ones or odd
/// value widths) and on the reference; mismatched operands are errors.
#[test]
fn fused_attention_equals_its_composition() {
    use cyb_llm::backend::cpu::{reference, CpuBackend};
    use cyb_llm::backend::{Backend, ExecContext};
    let mut r = rng("fused_attention");
    let cpu = CpuBackend::new(2).unwrap();
    let mut ctx = ExecContext::new(2);
    for [n, l, d, s, e] in [
        [2, 1024, 32, 1024, 32],
        [3, 5, 8, 7, 3],
        [1, 64, 16, 300, 17],
    ] {
        let q = rand_tensor(&mut r, &[n, l, d]);
        let kt = rand_tensor(&mut r, &[n, d, s]);
        let v = rand_tensor(&mut r, &[n, s, e]);
        let scores = reference::execute(&Op::BatchMatmul, &[q.clone(), kt.clone()]).unwrap();
        let p = reference::execute(&Op::Softmax, &scores).unwrap();
        let want = reference::execute(&Op::BatchMatmul, &[p[0].clone(), v.clone()]).unwrap();
        let inputs = [q, kt, v];
        for (got, on) in [
            (cpu.execute(&Op::FusedAttention, &inputs, &mut ctx), "cpu"),
            (
                reference::execute(&Op::FusedAttention, &inputs),
                "reference",
            ),
        ] {
            let got = got.unwrap();
            assert_eq!(got[0].shape(), want[0].shape());
            let err = rel_err(got[0].as_f32().unwrap(), want[0].as_f32().unwrap());
            assert!(err <= 1e-4, "{on} [{n}, {l}, {d}, {s}, {e}]: {err}");
        }
    }
    let q = rand_tensor(&mut r, &[2, 4, 8]);
    for (kt, v) in [
        ([2, 7, 5], [2, 5, 3]),
        ([1, 8, 5], [1, 5, 3]),
        ([2, 8, 5], [2, 6, 3]),
    ] {
        let inputs = [q.clone(), rand_tensor(&mut r, &kt), rand_tensor(&mut r, &v)];
        assert!(
            cpu.execute(&Op::FusedAttention, &inputs, &mut ctx).is_err(),
            "q [2, 4, 8], kt {kt:?}, v {v:?} accepted"
        );
    }
}

/// `SdpaBatch` against an independent formulation: per sequence, `Sdpa` over all `L`
/// padded key rows with a padding mask (reference), and the cpu backend against the
/// reference — sequences shorter than a key tile, shorter and longer than a query block,
/// grouped heads, and head sizes the tiled kernels do not take.
#[test]
fn sdpa_batch_equals_padding_masked_sdpa_per_sequence() {
    use cyb_llm::backend::cpu::reference;
    let mut r = rng("sdpa_batch");
    // (L, H, Hkv, d, lengths)
    let cases: [(usize, usize, usize, usize, &[usize]); 5] = [
        (5, 12, 12, 32, &[5, 1, 3]),
        (30, 12, 12, 32, &[30, 24, 17, 2]),
        (40, 4, 2, 64, &[40, 33]),
        (7, 2, 2, 17, &[7, 4]),
        (1, 3, 1, 16, &[1, 1, 1]),
    ];
    for (l, h, hkv, d, lengths) in cases {
        let n = lengths.len();
        let q = rand_tensor(&mut r, &[n * l, h, d]);
        let k = rand_tensor(&mut r, &[n * l, hkv, d]);
        let v = rand_tensor(&mut r, &[n * l, hkv, d]);
        let op = Op::SdpaBatch {
            scale: None,
            lengths: lengths.to_vec(),
        };
        let inputs = [q.clone(), k.clone(), v.clone()];
        check_op(&op, &inputs, F32_TOL, 2);
        let got = reference::execute(&op, &inputs).unwrap();
        let (qv, kv, vv) = (
            q.as_f32().unwrap(),
            k.as_f32().unwrap(),
            v.as_f32().unwrap(),
        );
        let mut want = Vec::new();
        for (b, &len) in lengths.iter().enumerate() {
            let part = |t: &[f32], heads: usize| {
                let rows = l * heads * d;
                Tensor::from_f32(&[l, heads, d], t[b * rows..(b + 1) * rows].to_vec()).unwrap()
            };
            let masked = Op::Sdpa {
                scale: None,
                mask: Mask::Padding((0..l).map(|j| j < len).collect()),
                q_pos: 0,
                kv_len: None,
            };
            let out = reference::execute(&masked, &[part(qv, h), part(kv, hkv), part(vv, hkv)]);
            want.extend_from_slice(out.unwrap()[0].as_f32().unwrap());
        }
        let e = rel_err(got[0].as_f32().unwrap(), &want);
        assert!(e <= F32_TOL, "SdpaBatch L={l} lengths={lengths:?}: {e}");
    }
    // Lengths that do not fit the rows are shape errors.
    let q = rand_tensor(&mut r, &[6, 2, 8]);
    for lengths in [vec![3, 0], vec![4, 3], vec![2, 2, 2, 2], vec![]] {
        let op = Op::SdpaBatch {
            scale: None,
            lengths: lengths.clone(),
        };
        let err = reference::execute(&op, &[q.clone(), q.clone(), q.clone()]);
        assert!(err.is_err(), "lengths {lengths:?} for 6 rows accepted");
    }
}
