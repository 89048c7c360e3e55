//! Every wgpu kernel against the CPU reference on random inputs with awkward
//! shapes. Runs on whatever Vulkan/Metal/DX12 adapter exists (lavapipe in
//! CI); no adapter is a failure, never a skip.

mod backend_util;

use backend_util::wgpu::{assert_close_on, attention_on_matrix_units, check, check_on, gpu};
use backend_util::{matmul_typical, rand_tensor, rand_weight, rel_err, rng};
use cyb_llm::backend::cpu::reference;
use cyb_llm::backend::wgpu::WgpuBackend;
use cyb_llm::backend::{
    rope_cache, rope_inv_freq, Backend, ExecContext, Mask, Op, RopeStyle, SampleParams, Tensor,
    TensorInfo,
};
use cyb_llm::DType;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The matmul encodings the wgpu kernels take: all but q2_k and q3_k.
fn matmul_dtypes() -> impl Iterator<Item = DType> {
    (DType::MATMUL_WEIGHTS.into_iter()).filter(|d| !matches!(d, DType::Q2K | DType::Q3K))
}

fn k_for(dtype: DType) -> usize {
    match dtype.block_values() {
        1 => 67,
        32 => 96,
        _ => 512,
    }
}

#[test]
fn matmul_every_dtype_matches_reference() {
    let mut r = rng("matmul_every_dtype_matches_reference");
    for dtype in matmul_dtypes() {
        let k = k_for(dtype);
        // 140 rows: two tiles of the matrix-unit kernel where the device has
        // it, the second partial.
        for m in [1, 3, 11, 140] {
            let x = rand_tensor(&mut r, &[m, k]);
            let w = rand_weight(&mut r, &[37, k], dtype);
            let floor = matmul_typical(&x, &w);
            check(&Op::Matmul, &[x, w], 1e-4, floor);
        }
    }
}

/// The decode matvec (one input row) and the mm kernel (9 rows: two tiles of
/// 8) over several loop turns of their workgroups (K above 8 values x 256
/// threads x 4 parts per turn) and a row count that is no multiple of their 4 rows per
/// workgroup; the matvec with the subgroup reduction (when the adapter has
/// SUBGROUP) and with the workgroup-memory one.
#[test]
fn matvec_and_mm_long_rows_match_reference() {
    let mut r = rng("matvec_and_mm_long_rows_match_reference");
    let plain = WgpuBackend::without_subgroups().expect("a second wgpu device");
    for dtype in matmul_dtypes() {
        let k = match dtype.block_values() {
            1 => 8195,
            32 => 8224,
            _ => 8448,
        };
        let w = rand_weight(&mut r, &[13, k], dtype);
        for m in [1, 9] {
            let x = rand_tensor(&mut r, &[m, k]);
            let floor = matmul_typical(&x, &w);
            for g in [gpu(), &plain] {
                check_on(g, &Op::Matmul, &[x.clone(), w.clone()], 1e-4, floor);
            }
        }
    }
}

/// Products of 2 to 8 input rows on 8-bit activations
/// (shaders/matvec_q8_cols.wgsl: short prompts, a few sequences at once) for
/// every encoding that has them, judged against the reference on the rows
/// rounded as the kernel rounds them: K over several turns of the
/// workgroup's 64 threads, a row count no multiple of its 4 rows, and an
/// output that is a column range of a wider one (the chunk offset). Nine
/// rows leave this path.
#[test]
fn few_row_products_on_8_bit_activations_match_reference() {
    let mut r = rng("few_row_products_on_8_bit_activations_match_reference");
    let g = gpu();
    let int8: Vec<DType> = matmul_dtypes().filter(|&d| g.int8_matvec(d)).collect();
    assert_eq!(int8.len(), 7, "the 8-bit encodings: {int8:?}");
    for dtype in int8 {
        assert!(g.int8_product(dtype, 8) && !g.int8_product(dtype, 9));
        let k = if dtype.block_values() == 256 {
            4352
        } else {
            4192
        };
        let w = rand_weight(&mut r, &[37, k], dtype);
        for m in [2, 5, 8] {
            let x = rand_tensor(&mut r, &[m, k]);
            let floor = matmul_typical(&x, &w);
            check(&Op::Matmul, &[x, w.clone()], 1e-4, floor);
        }
    }
}

#[test]
fn embed_every_dtype_matches_reference() {
    let mut r = rng("embed_every_dtype_matches_reference");
    for dtype in matmul_dtypes() {
        let d = k_for(dtype);
        let table = rand_weight(&mut r, &[23, d], dtype);
        let ids: Vec<i32> = (0..5).map(|_| r.gen_range(0..23)).collect();
        let ids = Tensor::from_i32(&[5], ids).unwrap();
        check(&Op::Embed, &[ids, table], 1e-6, 0.0);
    }
    let table = rand_weight(&mut r, &[23, 32], DType::Q8_0);
    let bad = Tensor::from_i32(&[2], vec![1, 23]).unwrap();
    let mut ctx = ExecContext::new(1);
    assert!(gpu().execute(&Op::Embed, &[bad, table], &mut ctx).is_err());
}

#[test]
fn fused_ops_match_reference() {
    let mut r = rng("fused_ops_match_reference");
    let (m, k) = (3, 96);
    let x = rand_tensor(&mut r, &[m, k]);
    let wq = rand_weight(&mut r, &[40, k], DType::Q4_0);
    let wk = rand_weight(&mut r, &[24, k], DType::Q8_0);
    let wv = rand_weight(&mut r, &[24, k], DType::F16);
    let floor = matmul_typical(&x, &wq);
    check(&Op::FusedQkv, &[x.clone(), wq.clone(), wk, wv], 1e-4, floor);
    let wg = rand_weight(&mut r, &[50, k], DType::Q4_1);
    let wu = rand_weight(&mut r, &[50, k], DType::Q5_0);
    check(&Op::FusedSwiGlu, &[x.clone(), wg, wu], 1e-4, 0.0);
    let g = rand_tensor(&mut r, &[k]);
    let op = Op::FusedNormMatmul {
        eps: 1e-5,
        add_one: false,
    };
    check(&op, &[x.clone(), g.clone(), wq.clone()], 1e-4, 0.0);
    // More rows than one tile of the f32 kernel.
    let x20 = rand_tensor(&mut r, &[20, k]);
    check(&op, &[x20, g.clone(), wq], 1e-4, 0.0);
    let skip = rand_tensor(&mut r, &[m, k]);
    for add_one in [false, true] {
        let op = Op::FusedSkipNorm { eps: 1e-6, add_one };
        check(&op, &[x.clone(), skip.clone(), g.clone()], 1e-5, 0.0);
    }
}

/// The decode chain on 8-bit activations: a one-row norm also writes its
/// output as 8-bit blocks, and the products of that row recorded after it
/// read those instead of quantizing the row again. A FusedSkipNorm, then
/// FusedQkv and FusedSwiGlu on its output (fused and unfused weights), judged
/// against the reference on the norm's own output rounded as the kernels round
/// it; and FusedNormMatmul, judged against the reference norm (a value within
/// a rounding step of a boundary can round the other way there: about 4e-4 of
/// the typical output at this K, hence 1e-3). Rows longer than the norm holds
/// in registers (4 x 4 x 256 values), with and without subgroups.
#[test]
fn norm_output_feeds_the_8_bit_products() {
    let mut r = rng("norm_output_feeds_the_8_bit_products");
    let plain = WgpuBackend::without_subgroups().expect("a second wgpu device");
    let k = 4352;
    let x = rand_tensor(&mut r, &[1, k]);
    let skip = rand_tensor(&mut r, &[1, k]);
    let gain = rand_tensor(&mut r, &[k]);
    let [wq, wk, wv] = [40, 16, 16].map(|n| rand_weight(&mut r, &[n, k], DType::Q4_0));
    let wg = rand_weight(&mut r, &[30, k], DType::Q8_0);
    let wu = rand_weight(&mut r, &[30, k], DType::Q5_1);
    let floor = matmul_typical(&x, &wq);
    let (eps, add_one) = (1e-5, false);
    for g in [gpu(), &plain] {
        assert!(g.int8_matvec(DType::Q4_0) && g.int8_matvec(DType::Q5_1));
        let mut ctx = ExecContext::new(1);
        let run = |op: &Op, ins: &[Tensor], ctx: &mut ExecContext| {
            g.execute(op, ins, ctx).expect("wgpu executes")
        };
        let normed = run(
            &Op::FusedSkipNorm { eps, add_one },
            &[x.clone(), skip.clone(), gain.clone()],
            &mut ctx,
        )
        .remove(0);
        let qkv = run(
            &Op::FusedQkv,
            &[normed.clone(), wq.clone(), wk.clone(), wv.clone()],
            &mut ctx,
        );
        let glu = run(
            &Op::FusedSwiGlu,
            &[normed.clone(), wg.clone(), wu.clone()],
            &mut ctx,
        );
        let host =
            Tensor::from_f32(&[1, k], g.try_download_f32(&normed).expect("download")).unwrap();
        let q = backend_util::wgpu::q8_rounded(&host);
        let want_qkv = reference::execute(
            &Op::FusedQkv,
            &[q.clone(), wq.clone(), wk.clone(), wv.clone()],
        )
        .unwrap();
        for (a, b) in qkv.iter().zip(&want_qkv) {
            assert_close_on(g, "FusedQkv after the norm", a, b, 1e-4, floor);
        }
        let want_glu = reference::execute(&Op::FusedSwiGlu, &[q, wg.clone(), wu.clone()]).unwrap();
        assert_close_on(
            g,
            "FusedSwiGlu after the norm",
            &glu[0],
            &want_glu[0],
            1e-4,
            0.0,
        );
        check_on(
            g,
            &Op::FusedNormMatmul { eps, add_one },
            &[x.clone(), gain.clone(), wq.clone()],
            1e-3,
            floor,
        );
    }
}

/// The attention of one query row also writes its output as 8-bit blocks,
/// which the output projection recorded after it reads (keys in one pass,
/// and split in chunks, whose merge pass writes them): the attention against
/// the reference, the product against the reference on the attention's own
/// output rounded as the kernels round it.
#[test]
fn attention_output_feeds_the_8_bit_product() {
    let mut r = rng("attention_output_feeds_the_8_bit_product");
    let (h, hkv, d, dv) = (4, 2, 40, 64);
    let wo = rand_weight(&mut r, &[36, h * dv], DType::Q4_0);
    let g = gpu();
    for m in [150, 700] {
        let ins = [
            rand_tensor(&mut r, &[1, h, d]),
            rand_tensor(&mut r, &[m, hkv, d]),
            rand_tensor(&mut r, &[m, hkv, dv]),
        ];
        let op = Op::Sdpa {
            scale: None,
            mask: Mask::Causal,
            q_pos: m - 1,
            kv_len: Some(m),
        };
        let mut ctx = ExecContext::new(1);
        let o = g
            .execute(&op, &ins, &mut ctx)
            .expect("wgpu executes")
            .remove(0);
        let o = o.reshaped(&[1, h * dv]).unwrap();
        let y = g
            .execute(&Op::Matmul, &[o.clone(), wo.clone()], &mut ctx)
            .expect("wgpu executes");
        let want_o = reference::execute(&op, &ins)
            .unwrap()
            .remove(0)
            .reshaped(&[1, h * dv])
            .unwrap();
        assert_close_on(
            g,
            &format!("attention over {m} keys"),
            &o,
            &want_o,
            1e-5,
            0.0,
        );
        let host =
            Tensor::from_f32(&[1, h * dv], g.try_download_f32(&o).expect("download")).unwrap();
        let want = reference::execute(
            &Op::Matmul,
            &[backend_util::wgpu::q8_rounded(&host), wo.clone()],
        )
        .unwrap();
        let what = format!("output projection after attention over {m} keys");
        assert_close_on(g, &what, &y[0], &want[0], 1e-4, matmul_typical(&host, &wo));
    }
}

/// FusedQkv and FusedSwiGlu on weights of one encoding, which the backend lays
/// end to end in one buffer (one matvec dispatch for a single input row, one
/// mm dispatch per part otherwise): row counts no multiple of the kernels' 4
/// (or 2 for SwiGLU) rows per workgroup, K over several loop turns, with and
/// without subgroups.
#[test]
fn fused_weights_of_one_encoding_match_reference() {
    let mut r = rng("fused_weights_of_one_encoding_match_reference");
    let plain = WgpuBackend::without_subgroups().expect("a second wgpu device");
    for dtype in [DType::Q4_0, DType::Q8_0, DType::Q4K, DType::F16] {
        let k = if dtype.block_values() == 256 {
            2304
        } else {
            2080
        };
        let wq = rand_weight(&mut r, &[42, k], dtype);
        let wk = rand_weight(&mut r, &[13, k], dtype);
        let wv = rand_weight(&mut r, &[13, k], dtype);
        let wg = rand_weight(&mut r, &[51, k], dtype);
        let wu = rand_weight(&mut r, &[51, k], dtype);
        for m in [1, 5, 140] {
            let x = rand_tensor(&mut r, &[m, k]);
            let floor = matmul_typical(&x, &wq);
            for g in [gpu(), &plain] {
                let qkv = [x.clone(), wq.clone(), wk.clone(), wv.clone()];
                check_on(g, &Op::FusedQkv, &qkv, 1e-4, floor);
                let glu = [x.clone(), wg.clone(), wu.clone()];
                check_on(g, &Op::FusedSwiGlu, &glu, 1e-4, 0.0);
            }
        }
    }
}

/// The residual add fused into the norm kernel, and the norms, on rows longer
/// than one pass of its 256 threads, with and without subgroups.
#[test]
fn skip_norm_long_rows_match_reference() {
    let mut r = rng("skip_norm_long_rows_match_reference");
    let plain = WgpuBackend::without_subgroups().expect("a second wgpu device");
    for d in [300, 4099] {
        let x = rand_tensor(&mut r, &[3, d]);
        let skip = rand_tensor(&mut r, &[3, d]);
        let gain = rand_tensor(&mut r, &[d]);
        let bias = rand_tensor(&mut r, &[d]);
        for g in [gpu(), &plain] {
            for add_one in [false, true] {
                let op = Op::FusedSkipNorm { eps: 1e-6, add_one };
                check_on(g, &op, &[x.clone(), skip.clone(), gain.clone()], 1e-5, 0.0);
                let op = Op::RmsNorm { eps: 1e-6, add_one };
                check_on(g, &op, &[x.clone(), gain.clone()], 1e-5, 0.0);
            }
            let op = Op::LayerNorm { eps: 1e-5 };
            check_on(g, &op, &[x.clone(), gain.clone(), bias.clone()], 1e-5, 0.0);
        }
    }
}

#[test]
fn norms_match_reference() {
    let mut r = rng("norms_match_reference");
    let x = rand_tensor(&mut r, &[5, 77]);
    let g = rand_tensor(&mut r, &[77]);
    let b = rand_tensor(&mut r, &[77]);
    for add_one in [false, true] {
        check(
            &Op::RmsNorm { eps: 1e-6, add_one },
            &[x.clone(), g.clone()],
            1e-5,
            0.0,
        );
    }
    let gf16 = rand_weight(&mut r, &[77], DType::F16);
    check(
        &Op::RmsNorm {
            eps: 1e-5,
            add_one: false,
        },
        &[x.clone(), gf16],
        1e-5,
        0.0,
    );
    check(
        &Op::LayerNorm { eps: 1e-5 },
        &[x.clone(), g.clone(), b],
        1e-5,
        0.0,
    );
    check(&Op::LayerNorm { eps: 1e-5 }, &[x, g], 1e-5, 0.0);
}

#[test]
fn elementwise_ops_match_reference() {
    let mut r = rng("elementwise_ops_match_reference");
    let a = rand_tensor(&mut r, &[5, 3, 7]);
    for b_shape in [&[5, 3, 7][..], &[3, 1], &[7], &[5, 1, 7]] {
        let b = rand_tensor(&mut r, b_shape);
        for op in [Op::Add, Op::Sub, Op::Mul] {
            check(&op, &[a.clone(), b.clone()], 1e-6, 0.0);
        }
    }
    let b = rand_tensor(&mut r, &[5, 3, 7]);
    for op in [Op::SwiGlu, Op::GeGlu] {
        check(&op, &[a.clone(), b.clone()], 1e-5, 0.0);
    }
    let x = rand_tensor(&mut r, &[3, 131]);
    let x4 = Op::Scale(4.0);
    let wide = check(&x4, std::slice::from_ref(&x), 1e-6, 0.0).remove(0);
    for op in [
        Op::Silu,
        Op::Gelu,
        Op::GeluTanh,
        Op::Relu,
        Op::LeakyRelu(0.1),
        Op::Sigmoid,
        Op::Tanh,
        Op::Softcap(3.0),
        Op::Scale(-0.37),
    ] {
        check(&op, std::slice::from_ref(&x), 1e-5, 0.0);
        let host = Tensor::from_f32(&[3, 131], gpu().try_download_f32(&wide).unwrap()).unwrap();
        check(&op, &[host], 1e-5, 0.0);
    }
}

#[test]
fn softmax_argmax_sample_match_reference() {
    let mut r = rng("softmax_argmax_sample_match_reference");
    let mut v = backend_util::values(&mut r, 4 * 301);
    v[301..602].fill(f32::NEG_INFINITY);
    v[700] = f32::NEG_INFINITY;
    let x = Tensor::from_f32(&[4, 301], v.clone()).unwrap();
    check(&Op::Softmax, std::slice::from_ref(&x), 1e-5, 0.0);
    v[601 + 17] = 5.0;
    v[601 + 250] = 5.0;
    let x = Tensor::from_f32(&[4, 301], v).unwrap();
    check(&Op::Argmax, std::slice::from_ref(&x), 0.0, 0.0);
    let greedy = SampleParams {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
        u: 0.5,
    };
    check(&Op::Sample(greedy.clone()), &[x], 0.0, 0.0);
    // Rows longer than two argmax chunks of 4096 (the two-stage path): the
    // maximum tied across chunks (the lowest index wins), in the last partial
    // chunk, and a row of -inf.
    let d = 20011;
    let mut v = backend_util::values(&mut r, 3 * d);
    v[5000] = 9.0;
    v[13000] = 9.0;
    v[d + 20005] = 9.0;
    v[2 * d..].fill(f32::NEG_INFINITY);
    let x = Tensor::from_f32(&[3, d], v).unwrap();
    check(&Op::Argmax, std::slice::from_ref(&x), 0.0, 0.0);
    check(&Op::Sample(greedy), &[x], 0.0, 0.0);
}

#[test]
fn rope_both_styles_match_reference() {
    let mut r = rng("rope_both_styles_match_reference");
    let (s, h, d, pos) = (3, 5, 24, 7);
    for style in [RopeStyle::Neox, RopeStyle::Normal] {
        for rot in [d, 16] {
            let x = rand_tensor(&mut r, &[s, h, d]);
            let (cos, sin) = rope_cache(pos + s + 4, &rope_inv_freq(rot, 10000.0)).unwrap();
            let op = Op::Rope {
                style,
                rot_dim: rot,
                pos,
                base: 10000.0,
            };
            check(&op, &[x.clone(), cos, sin], 1e-5, 0.0);
            check(&op, &[x], 1e-5, 0.0);
        }
    }
}

#[test]
fn attention_matches_reference() {
    let mut r = rng("attention_matches_reference");
    for (sq, m, kv_len, q_pos, mask) in [
        (1, 150, 150, 149, Mask::Causal),
        (3, 200, 140, 137, Mask::Causal),
        (3, 200, 140, 137, Mask::Sliding(50)),
        (5, 70, 70, 0, Mask::None),
        (2, 9, 9, 7, Mask::Sliding(1)),
        // Few rows over a long context: the keys split in chunks (flash
        // decoding), merged in a second pass; the last chunk partial, chunks
        // past a row's causal end or before its window empty.
        (1, 700, 650, 649, Mask::Causal),
        (3, 600, 600, 597, Mask::Causal),
        (2, 900, 900, 898, Mask::Sliding(300)),
        (1, 1000, 1000, 400, Mask::Causal),
        (1, 1200, 1200, 1199, Mask::Sliding(300)),
        // A prompt: 16 query rows and more tile the rows (one K/V tile read
        // for all rows of a workgroup); the last row block partial, rows
        // whose windows start in different tiles, a window of one key.
        (40, 300, 290, 250, Mask::Causal),
        (37, 120, 120, 83, Mask::Sliding(50)),
        (20, 64, 64, 0, Mask::None),
        (16, 30, 30, 14, Mask::Causal),
        (17, 40, 40, 23, Mask::Sliding(1)),
    ] {
        check_attention(gpu(), &mut r, (sq, m, kv_len, q_pos, mask), (40, 43));
    }
    // The decode kernel's max and sum through workgroup memory (no subgroups):
    // keys in one pass and split in chunks.
    let plain = WgpuBackend::without_subgroups().expect("a second wgpu device");
    for case in [
        (1, 150, 150, 149, Mask::Causal),
        (1, 700, 650, 649, Mask::Causal),
        (2, 900, 900, 898, Mask::Sliding(300)),
    ] {
        check_attention(&plain, &mut r, case, (40, 43));
    }
    // Head sizes of real models and the kernel's limits: d a multiple of 16
    // or not (the scalar tail), dv up to 128 (two threads per dimension) and
    // above (one).
    for (sq, d, dv) in [
        (2, 128, 128),
        (2, 37, 130),
        (2, 256, 256),
        (2, 64, 200),
        (33, 128, 128),
        (18, 64, 64),
        (21, 37, 100),
        (19, 200, 64),
    ] {
        check_attention(gpu(), &mut r, (sq, 90, 82, 82 - sq, Mask::Causal), (d, dv));
    }
    // One query row over many keys with the query heads of a key/value head
    // in one workgroup: groups of 1 to 4 heads (8: the per-head kernel),
    // real models' head sizes (Llama 128, SmolLM2 64, Gemma-3 256) and odd
    // ones, tiles of 32 and of 64 keys, one tile a chunk and several, a
    // partial last tile, a window.
    for (case, (d, dv), heads) in [
        ((1, 700, 650, 649, Mask::Causal), (128, 128), (32, 8)),
        ((1, 2200, 2100, 2099, Mask::Causal), (128, 128), (32, 8)),
        ((1, 4300, 4200, 4199, Mask::Causal), (64, 64), (16, 4)),
        ((1, 600, 517, 516, Mask::Causal), (64, 64), (9, 3)),
        ((1, 400, 300, 299, Mask::Causal), (256, 256), (4, 1)),
        ((1, 300, 300, 299, Mask::Causal), (40, 43), (2, 2)),
        ((1, 300, 270, 269, Mask::Causal), (36, 200), (6, 2)),
        ((1, 5000, 4500, 4499, Mask::Causal), (64, 64), (4, 1)),
        ((1, 900, 900, 899, Mask::Sliding(333)), (128, 128), (8, 2)),
        ((1, 900, 800, 799, Mask::Causal), (128, 128), (16, 2)),
    ] {
        check_attention_heads(gpu(), &mut r, case, (d, dv), heads);
    }
    // A prompt with head sizes the matrix units take (multiples of 16 up to
    // 128), where the device has them: three row blocks of 64 (the last
    // partial), keys over several tiles of 32 and a partial last tile, every
    // mask, windows starting inside a tile, grouped heads.
    for (sq, m, kv_len, q_pos, mask, d, dv) in [
        (130, 300, 290, 160, Mask::Causal, 64, 96),
        (70, 200, 200, 130, Mask::Sliding(50), 128, 128),
        (64, 64, 64, 0, Mask::None, 32, 16),
        (16, 30, 30, 14, Mask::Causal, 16, 128),
        (17, 40, 40, 23, Mask::Sliding(1), 64, 64),
    ] {
        check_attention(gpu(), &mut r, (sq, m, kv_len, q_pos, mask), (d, dv));
    }
}

/// Sdpa of `sq` random query rows (4 heads over 2 KV heads, head sizes d and
/// dv) at position `q_pos` over the first `kv_len` of `m` random keys under
/// `mask`, on `g` against the reference: within 1e-5, or where the device
/// runs it on the matrix units within 1.2e-3 of max |V| (the f16
/// probabilities' bound, 2^-10 of it: see `attention_on_matrix_units`).
fn check_attention(
    g: &WgpuBackend,
    r: &mut ChaCha8Rng,
    case: (usize, usize, usize, usize, Mask),
    head_sizes: (usize, usize),
) {
    check_attention_heads(g, r, case, head_sizes, (4, 2));
}

/// [`check_attention`] with `h` query heads over `hkv` key/value heads.
fn check_attention_heads(
    g: &WgpuBackend,
    r: &mut ChaCha8Rng,
    (sq, m, kv_len, q_pos, mask): (usize, usize, usize, usize, Mask),
    (d, dv): (usize, usize),
    (h, hkv): (usize, usize),
) {
    let inputs = [
        rand_tensor(r, &[sq, h, d]),
        rand_tensor(r, &[m, hkv, d]),
        rand_tensor(r, &[m, hkv, dv]),
    ];
    let op = Op::Sdpa {
        scale: None,
        mask,
        q_pos,
        kv_len: Some(kv_len),
    };
    if attention_on_matrix_units(g, &op, &inputs) {
        let v = inputs[2].read_f32("test").expect("host values");
        let v_max = v.iter().fold(0.0f32, |a, x| a.max(x.abs()));
        check_on(g, &op, &inputs, 1.2e-3, v_max);
    } else {
        check_on(g, &op, &inputs, 1e-5, 0.0);
    }
}

/// FusedRopeAppend (both RoPE styles, full and partial rotation, grouped
/// heads, dv != d) into device caches in one dispatch, and into host caches
/// part by part, against the reference's ropes and append.
#[test]
fn fused_rope_append_matches_reference() {
    let mut r = rng("fused_rope_append_matches_reference");
    let g = gpu();
    let (m, h, hkv, d, dv) = (12, 4, 2, 24, 27);
    let mut ctx = ExecContext::new(1);
    for style in [RopeStyle::Neox, RopeStyle::Normal] {
        for rot in [d, 16] {
            let (cos, sin) = rope_cache(m, &rope_inv_freq(rot, 10000.0)).unwrap();
            let device = [
                g.alloc(&[m, hkv, d], DType::F32).unwrap(),
                g.alloc(&[m, hkv, dv], DType::F32).unwrap(),
            ];
            let host = [
                Tensor::state_zeros(&[m, hkv, d]),
                Tensor::state_zeros(&[m, hkv, dv]),
            ];
            let want = [
                Tensor::state_zeros(&[m, hkv, d]),
                Tensor::state_zeros(&[m, hkv, dv]),
            ];
            let mut pos = 0;
            for s in [3, 1, 2] {
                let q = rand_tensor(&mut r, &[s, h, d]);
                let k = rand_tensor(&mut r, &[s, hkv, d]);
                let v = rand_tensor(&mut r, &[s, hkv, dv]);
                let op = Op::FusedRopeAppend {
                    style,
                    rot_dim: rot,
                    pos,
                };
                let args = |caches: &[Tensor; 2]| {
                    let mut a = vec![q.clone(), k.clone(), v.clone(), cos.clone(), sin.clone()];
                    a.extend(caches.iter().cloned());
                    a
                };
                let expect = reference::execute(&op, &args(&want)).unwrap();
                let q_want = expect[0].read_f32("t").unwrap().to_vec();
                for caches in [&device, &host] {
                    let got = g.execute(&op, &args(caches), &mut ctx).unwrap();
                    let q_got = g.try_download_f32(&got[0]).unwrap();
                    assert!(rel_err(&q_got, &q_want) < 1e-6, "{style:?} rot {rot}: q");
                }
                pos += s;
            }
            for caches in [&device, &host] {
                for (c, w) in caches.iter().zip(&want) {
                    let got = g.try_download_f32(c).unwrap();
                    let w = w.read_f32("t").unwrap().to_vec();
                    assert!(rel_err(&got, &w) < 1e-6, "{style:?} rot {rot}: caches");
                }
            }
        }
    }
}

/// A one-token FusedQkv and the FusedRopeAppend of its outputs (RoPE style
/// normal) run as one dispatch (shaders/matvec_qkv_rope.wgsl) on 8-bit and on
/// f32 activations, with and without subgroups: the rotated q, the unrotated
/// q/k/v and the caches against the reference's ops in turn (on the input as
/// the 8-bit kernels round it); the neox style, not fused, takes one dispatch
/// more for the same work.
#[test]
fn one_token_qkv_and_rope_append_fuse_and_match_reference() {
    let mut r = rng("one_token_qkv_and_rope_append_fuse_and_match_reference");
    // Devices of this test's own: the dispatch counts see no other test's.
    let own = WgpuBackend::new().expect("a second wgpu device");
    let plain = WgpuBackend::without_subgroups().expect("a third wgpu device");
    let f32_acts = WgpuBackend::with_f32_activations().expect("a fourth wgpu device");
    let (m, h, hkv, d, dv, k) = (6, 4, 2, 24, 20, 320);
    let heads = [(h, d), (hkv, d), (hkv, dv)];
    let [wq, wk, wv] = heads.map(|(n, w)| rand_weight(&mut r, &[n * w, k], DType::Q4_0));
    for g in [&own, &plain, &f32_acts] {
        let mut counts = Vec::new();
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            for rot in [d, 16] {
                let (cos, sin) = rope_cache(m, &rope_inv_freq(rot, 10000.0)).unwrap();
                let caches = [
                    g.alloc(&[m, hkv, d], DType::F32).unwrap(),
                    g.alloc(&[m, hkv, dv], DType::F32).unwrap(),
                ];
                let want = [
                    Tensor::state_zeros(&[m, hkv, d]),
                    Tensor::state_zeros(&[m, hkv, dv]),
                ];
                let mut ctx = ExecContext::new(1);
                for pos in 0..3 {
                    let what = format!("{style:?} rot {rot} pos {pos}");
                    let x = rand_tensor(&mut r, &[1, k]);
                    let floor = matmul_typical(&x, &wq);
                    let before = g.dispatches();
                    let ws = [wq.clone(), wk.clone(), wv.clone()];
                    let ins = [&[x.clone()][..], &ws].concat();
                    let qkv = g.execute(&Op::FusedQkv, &ins, &mut ctx).unwrap();
                    let rows = |t: &[Tensor]| -> Vec<Tensor> {
                        t.iter()
                            .zip(heads)
                            .map(|(t, (n, w))| t.reshaped(&[1, n, w]).unwrap())
                            .collect()
                    };
                    let op = Op::FusedRopeAppend {
                        style,
                        rot_dim: rot,
                        pos,
                    };
                    let args = |qkv: &[Tensor], caches: &[Tensor; 2]| {
                        let mut a = qkv.to_vec();
                        a.extend([cos.clone(), sin.clone()]);
                        a.extend(caches.iter().cloned());
                        a
                    };
                    let got = g
                        .execute(&op, &args(&rows(&qkv), &caches), &mut ctx)
                        .unwrap();
                    g.synchronize().unwrap();
                    counts.push((style, g.dispatches() - before));
                    let xr = if g.int8_matvec(DType::Q4_0) {
                        backend_util::wgpu::q8_rounded(&x)
                    } else {
                        x
                    };
                    let ins = [&[xr][..], &ws].concat();
                    let want_qkv = reference::execute(&Op::FusedQkv, &ins).unwrap();
                    for (a, b) in qkv.iter().zip(&want_qkv) {
                        assert_close_on(g, &format!("{what}: q/k/v"), a, b, 1e-4, floor);
                    }
                    let expect = reference::execute(&op, &args(&rows(&want_qkv), &want)).unwrap();
                    assert_close_on(g, &format!("{what}: q"), &got[0], &expect[0], 1e-4, floor);
                }
                for (c, w) in caches.iter().zip(&want) {
                    assert_close_on(g, &format!("{style:?} rot {rot}: caches"), c, w, 1e-4, 1.0);
                }
            }
        }
        let (normal, neox): (Vec<&(RopeStyle, u64)>, Vec<_>) =
            counts.iter().partition(|(s, _)| *s == RopeStyle::Normal);
        for (a, b) in normal.iter().zip(&neox) {
            assert_eq!(a.1 + 1, b.1, "dispatches of normal and neox: {counts:?}");
        }
    }
}

#[test]
fn kv_cache_on_device_matches_host_append() {
    let mut r = rng("kv_cache_on_device_matches_host_append");
    let g = gpu();
    let (m, hkv, d) = (16, 2, 8);
    let kc = g.alloc(&[m, hkv, d], DType::F32).unwrap();
    let vc = g.alloc(&[m, hkv, d], DType::F32).unwrap();
    let hk = Tensor::state_zeros(&[m, hkv, d]);
    let hv = Tensor::state_zeros(&[m, hkv, d]);
    let mut ctx = ExecContext::new(1);
    let mut pos = 0;
    for s in [3, 1, 1, 4] {
        let k = rand_tensor(&mut r, &[s, hkv, d]);
        let v = rand_tensor(&mut r, &[s, hkv, d]);
        let op = Op::KvAppend { pos };
        g.execute(
            &op,
            &[kc.clone(), vc.clone(), k.clone(), v.clone()],
            &mut ctx,
        )
        .unwrap();
        reference::execute(&op, &[hk.clone(), hv.clone(), k, v]).unwrap();
        pos += s;
        let q = rand_tensor(&mut r, &[s, 4, d]);
        let sdpa = Op::Sdpa {
            scale: None,
            mask: Mask::Causal,
            q_pos: pos - s,
            kv_len: Some(pos),
        };
        let got = g
            .execute(&sdpa, &[q.clone(), kc.clone(), vc.clone()], &mut ctx)
            .unwrap();
        let want = reference::execute(&sdpa, &[q, hk.clone(), hv.clone()]).unwrap();
        let e = rel_err(
            &g.try_download_f32(&got[0]).unwrap(),
            &want[0].read_f32("t").unwrap(),
        );
        assert!(e < 1e-5, "attention over the device cache: error {e}");
    }
    let over = Op::KvAppend { pos: m - 1 };
    let k = rand_tensor(&mut r, &[2, hkv, d]);
    let res = g.execute(&over, &[kc.clone(), vc, k.clone(), k], &mut ctx);
    assert!(matches!(
        res,
        Err(cyb_llm::ExecutionError::ContextOverflow { .. })
    ));
    assert_eq!(
        g.try_download_f32(&kc).unwrap(),
        hk.read_f32("t").unwrap().to_vec()
    );
}

#[test]
fn slice_matches_reference() {
    let mut r = rng("slice_matches_reference");
    let x = rand_tensor(&mut r, &[4, 3, 5]);
    for (axis, start, end) in [(0, 3, 4), (1, 1, 3), (2, 0, 2)] {
        check(
            &Op::Slice { axis, start, end },
            std::slice::from_ref(&x),
            0.0,
            0.0,
        );
    }
}

/// One-op tolerance of the f32 convolutions and group norms (f32 sums on the
/// GPU against the reference's f64).
const IMAGE_TOL: f32 = 1e-5;

/// Each `(x shape, w shape, op)` of `cases` on random `[x, w]` and on `[x, w,
/// b]` (b: a random bias, one value per output channel), f32 or `dtype` weights.
fn check_convs(seed: &str, cases: &[([usize; 4], [usize; 4], Op)], dtype: DType) {
    let mut r = rng(seed);
    for (xs, ws, op) in cases {
        let x = rand_tensor(&mut r, xs);
        let w = rand_weight(&mut r, ws, dtype);
        let outs = op.infer(&[x.info().clone(), w.info().clone()]).unwrap();
        check(op, &[x.clone(), w.clone()], IMAGE_TOL, 0.0);
        let b = rand_tensor(&mut r, &[outs[0].shape[1]]);
        check(op, &[x, w, b], IMAGE_TOL, 0.0);
    }
}

/// A Conv2d of steps `stride`, pads `[top, left, bottom, right]`, dilation and groups.
fn conv2d(stride: [usize; 2], pads: [usize; 4], dilation: [usize; 2], groups: usize) -> Op {
    Op::Conv2d {
        stride,
        pads,
        dilation,
        groups,
    }
}

/// Conv2d: pads (uneven too), strides, dilations, groups (depthwise too),
/// channel counts that are no multiple of the kernel's 4 per invocation,
/// batches of 1 to 3, with and without bias, f32 and f16 weights.
#[test]
fn conv2d_matches_reference() {
    let cases = [
        (
            [1, 3, 7, 9],
            [5, 3, 3, 3],
            conv2d([1, 1], [1; 4], [1, 1], 1),
        ),
        (
            [2, 4, 8, 6],
            [6, 2, 3, 2],
            conv2d([2, 1], [0, 1, 2, 0], [1, 2], 2),
        ),
        (
            [2, 6, 9, 9],
            [6, 1, 3, 3],
            conv2d([1, 1], [1; 4], [1, 1], 6),
        ),
        (
            [1, 5, 10, 11],
            [7, 5, 1, 1],
            conv2d([1, 1], [0; 4], [1, 1], 1),
        ),
        (
            [1, 3, 12, 12],
            [9, 3, 5, 5],
            conv2d([2, 2], [2; 4], [2, 2], 1),
        ),
        (
            [3, 8, 5, 5],
            [12, 2, 3, 3],
            conv2d([1, 2], [1, 0, 1, 1], [1, 1], 4),
        ),
        (
            [2, 3, 4, 4],
            [3, 3, 4, 4],
            conv2d([3, 3], [3, 2, 1, 3], [1, 1], 1),
        ),
    ];
    check_convs("conv2d_matches_reference", &cases, DType::F32);
    let f16 = [(
        [1, 4, 6, 5],
        [5, 4, 3, 3],
        conv2d([1, 1], [1; 4], [1, 1], 1),
    )];
    check_convs("conv2d_f16_weights_match_reference", &f16, DType::F16);
}

/// ConvTranspose2d: strides with output padding, cropping, dilation, groups
/// (depthwise too), batches, odd output channel counts, with and without bias.
#[test]
fn conv_transpose2d_matches_reference() {
    let t = |stride, pads, dilation, groups, out_pad| Op::ConvTranspose2d {
        stride,
        pads,
        dilation,
        groups,
        out_pad,
    };
    let cases = [
        (
            [1, 3, 5, 6],
            [3, 5, 3, 3],
            t([1, 1], [1; 4], [1, 1], 1, [0, 0]),
        ),
        (
            [2, 4, 4, 5],
            [4, 3, 4, 4],
            t([2, 2], [1; 4], [1, 1], 1, [0, 0]),
        ),
        (
            [1, 6, 3, 4],
            [6, 1, 3, 2],
            t([2, 3], [0, 1, 1, 0], [2, 1], 2, [1, 2]),
        ),
        (
            [2, 5, 4, 4],
            [5, 1, 3, 3],
            t([1, 1], [0; 4], [1, 1], 5, [0, 0]),
        ),
        (
            [1, 4, 7, 3],
            [4, 7, 2, 2],
            t([2, 2], [0; 4], [1, 1], 1, [1, 0]),
        ),
    ];
    check_convs("conv_transpose2d_matches_reference", &cases, DType::F32);
}

/// Conv1d (a Conv2d of height 1 on the GPU): strides and padding.
#[test]
fn conv1d_matches_reference() {
    let mut r = rng("conv1d_matches_reference");
    for (cin, len, cout, k, stride, padding) in [(3, 17, 5, 3, 1, 1), (2, 30, 7, 4, 2, 0)] {
        let op = Op::Conv1d { stride, padding };
        let x = rand_tensor(&mut r, &[cin, len]);
        let w = rand_tensor(&mut r, &[cout, cin, k]);
        check(&op, &[x.clone(), w.clone()], IMAGE_TOL, 0.0);
        let b = rand_tensor(&mut r, &[cout]);
        check(&op, &[x, w, b], IMAGE_TOL, 0.0);
    }
}

/// GroupNorm (instance norm as groups = C, rank 2 and 4 inputs, groups whose
/// values span many loop turns of the workgroup) and GroupNormAffine.
#[test]
fn group_norms_match_reference() {
    let mut r = rng("group_norms_match_reference");
    let cases: [(&[usize], usize); 5] = [
        (&[2, 6, 5, 7], 3),
        (&[1, 5, 17], 5),
        (&[3, 4], 2),
        (&[1, 4, 33, 33], 2),
        (&[2, 9, 3, 1], 1),
    ];
    for (shape, groups) in cases {
        let c = shape[1];
        let x = rand_tensor(&mut r, shape);
        let (g, b) = (rand_tensor(&mut r, &[c]), rand_tensor(&mut r, &[c]));
        let op = Op::GroupNorm { groups, eps: 1e-5 };
        check(&op, &[x.clone(), g, b], IMAGE_TOL, 0.0);
        let (g, b) = (
            rand_tensor(&mut r, &[groups]),
            rand_tensor(&mut r, &[groups]),
        );
        let (gamma, beta) = (rand_tensor(&mut r, &[c]), rand_tensor(&mut r, &[c]));
        let op = Op::GroupNormAffine { groups, eps: 1e-6 };
        check(&op, &[x, g, b, gamma, beta], IMAGE_TOL, 0.0);
    }
}

#[test]
fn unsupported_ops_are_declined() {
    let g = gpu();
    let mut r = rng("unsupported_ops_are_declined");
    let x = rand_tensor(&mut r, &[2, 64]);
    let w = rand_weight(&mut r, &[3, 64], DType::Ternary);
    assert!(!g.supports(&Op::Matmul, &[x.info().clone(), w.info().clone()]));
    let pad = Op::Sdpa {
        scale: None,
        mask: Mask::Padding(vec![true; 4]),
        q_pos: 0,
        kv_len: Some(4),
    };
    let q = TensorInfo::new(&[1, 2, 8], DType::F32);
    let k = TensorInfo::new(&[4, 2, 8], DType::F32);
    assert!(!g.supports(&pad, &[q, k.clone(), k]));
    let conv = Op::Conv2d {
        stride: [1, 1],
        pads: [0; 4],
        dilation: [1, 1],
        groups: 1,
    };
    let x = TensorInfo::new(&[1, 32, 4, 4], DType::F32);
    let w = TensorInfo::new(&[8, 32, 1, 1], DType::Q8_0);
    assert!(!g.supports(&conv, &[x, w]), "quantized conv weights");
    let x = TensorInfo::new(&[1, 1, 1 << 17, 1 << 14], DType::F32);
    let w = TensorInfo::new(&[1, 1, 1, 1], DType::F32);
    assert!(!g.supports(&conv, &[x, w]), "input larger than one binding");
}
