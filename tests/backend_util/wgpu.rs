//! The wgpu side of the kernel tests: the one device of a test binary and the
//! comparison of an op on it against the CPU reference.

use super::rel_err;
use cyb_llm::backend::cpu::reference;
use cyb_llm::backend::wgpu::WgpuBackend;
use cyb_llm::backend::{Backend, ExecContext, Op, Tensor};
use cyb_llm::DType;
use std::sync::OnceLock;

/// The wgpu backend of this test binary (no adapter fails the test, never a
/// skip: CI installs lavapipe).
pub fn gpu() -> &'static WgpuBackend {
    static GPU: OnceLock<WgpuBackend> = OnceLock::new();
    GPU.get_or_init(|| {
        let b = WgpuBackend::new().unwrap_or_else(|e| {
            panic!("wgpu tests need a Vulkan adapter (CI installs lavapipe): {e}")
        });
        eprintln!("wgpu adapter: {:?}", b.report());
        b
    })
}

/// Runs `op` on wgpu and on the reference; every output within `tol` (error
/// denominator floored at `floor`). Returns the wgpu outputs.
pub fn check(op: &Op, inputs: &[Tensor], tol: f32, floor: f32) -> Vec<Tensor> {
    check_on(gpu(), op, inputs, tol, floor)
}

/// [`check`] on backend `g`.
pub fn check_on(g: &WgpuBackend, op: &Op, inputs: &[Tensor], tol: f32, floor: f32) -> Vec<Tensor> {
    let infos: Vec<_> = inputs.iter().map(|t| t.info().clone()).collect();
    assert!(
        g.supports(op, &infos),
        "{op:?} should be supported on {infos:?}"
    );
    let mut ctx = ExecContext::new(1);
    let got = g.execute(op, inputs, &mut ctx).expect("wgpu executes");
    let want = if let Some(want) = int8_operand_reference(g, op, inputs) {
        want
    } else {
        f16_operand_reference(g, op, inputs)
    };
    assert_eq!(got.len(), want.len(), "{op:?}: output counts differ");
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.shape(), b.shape(), "{op:?}: shapes differ");
        if b.dtype() == DType::I32 {
            assert_eq!(a.as_i32(), b.as_i32(), "{op:?}: indices differ");
            continue;
        }
        assert_close_on(g, &format!("{op:?} on {infos:?}"), a, b, tol, floor);
    }
    got
}

/// Output `got` (on `g`) against the host tensor `want`: relative error
/// within `tol`, its denominator floored at `floor`.
pub fn assert_close_on(
    g: &WgpuBackend,
    what: &str,
    got: &Tensor,
    want: &Tensor,
    tol: f32,
    floor: f32,
) {
    let av = g.try_download_f32(got).expect("download");
    let bv = want.read_f32("test").expect("reference values").to_vec();
    let max_ref = bv.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let e = rel_err(&av, &bv) * max_ref.max(1e-6) / max_ref.max(floor).max(1e-6);
    assert!(e <= tol, "{what}: relative error {e} > {tol}");
}

/// Each row's blocks of 32 values as the 8-bit kernels take them
/// (shaders/quant_q8.wgsl): q = round(x * 127 / max|x|), ties to even, times
/// max|x| / 127 rounded to f16.
pub fn q8_rounded(t: &Tensor) -> Tensor {
    let mut v = t.read_f32("test").expect("host values").to_vec();
    for block in v.chunks_mut(32) {
        let amax = block.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        if amax == 0.0 {
            continue;
        }
        let (id, d) = (127.0 / amax, half::f16::from_f32(amax / 127.0).to_f32());
        for x in block.iter_mut() {
            *x = d * (*x * id).round_ties_even().clamp(-127.0, 127.0);
        }
    }
    Tensor::from_f32(t.shape(), v).unwrap()
}

/// The reference for a product that `g` runs on 8-bit activations
/// ([`WgpuBackend::int8_product`] of its weight's encoding and input rows): the
/// input rows (after the norm, for a fused norm) rounded as [`q8_rounded`];
/// `None` for every other op. The kernel's offset term s = d * sum(q) of
/// q4_1 / q5_1 is rounded to f16 (as ggml's q8_1 and the cpu backend's), which
/// the rounded operand does not express: measured on lavapipe, the largest
/// error of the kernel tests is 3e-5 of the typical output, within their 1e-4.
fn int8_operand_reference(g: &WgpuBackend, op: &Op, inputs: &[Tensor]) -> Option<Vec<Tensor>> {
    let rows = |t: &Tensor| t.numel() / t.shape().last().copied().unwrap_or(1).max(1);
    let run = |op: &Op, ins: &[Tensor]| reference::execute(op, ins).expect("reference executes");
    let weight = match op {
        Op::Matmul | Op::FusedQkv | Op::FusedSwiGlu => &inputs[1],
        Op::FusedNormMatmul { .. } => &inputs[2],
        _ => return None,
    };
    let int8 = |w: &Tensor| g.int8_product(w.dtype(), rows(&inputs[0]));
    if let (Op::FusedQkv, false) = (op, inputs[1..].iter().all(|w| int8(w) == int8(weight))) {
        // Q, K and V of encodings on different paths: each its own product.
        let plain =
            |w: &Tensor| f16_operand_reference(g, &Op::Matmul, &[inputs[0].clone(), w.clone()]);
        let on_int8 = |w: &Tensor| run(&Op::Matmul, &[q8_rounded(&inputs[0]), w.clone()]);
        let outs = inputs[1..]
            .iter()
            .map(|w| if int8(w) { on_int8(w) } else { plain(w) });
        return Some(outs.map(|mut o| o.remove(0)).collect());
    }
    if !int8(weight) {
        return None;
    }
    if let Op::FusedNormMatmul { eps, add_one } = op {
        let norm = Op::RmsNorm {
            eps: *eps,
            add_one: *add_one,
        };
        let normed = run(&norm, &inputs[..2]).remove(0);
        return Some(run(&Op::Matmul, &[q8_rounded(&normed), inputs[2].clone()]));
    }
    let mut ins = inputs.to_vec();
    ins[0] = q8_rounded(&inputs[0]);
    Some(run(op, &ins))
}

/// Whether `g` runs attention `op` on `inputs` on the matrix units. There its
/// probabilities P are rounded to f16 (relative error up to 2^-11 each), which
/// moves the output, a P-weighted average of V rows, by up to 2^-11 times the
/// spread of V's values: at most 2^-10 of max |V|, so such outputs are
/// compared with an error bound of about 1e-3 relative to max |V|.
pub fn attention_on_matrix_units(g: &WgpuBackend, op: &Op, inputs: &[Tensor]) -> bool {
    let infos: Vec<_> = inputs.iter().map(|t| t.info().clone()).collect();
    g.attention_on_matrix_units(op, &infos)
}

/// Values rounded to f16 and back, as an f32 tensor of the same shape.
fn f16_rounded(t: &Tensor) -> Tensor {
    let v = t.read_f32("test").expect("host values");
    let r = v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect();
    Tensor::from_f32(t.shape(), r).unwrap()
}

/// The reference where `g`'s products of several input rows run on the
/// matrix units: those products take their input rows and (decoded) weights
/// rounded to f16, as the kernel does, and sum exactly; an attention there
/// takes Q, K and V rounded to f16 (its probabilities are rounded too, which
/// the reference does not do: see [`attention_on_matrix_units`]); everything
/// else (one input row, other ops, devices without matrix units) is the plain
/// reference.
fn f16_operand_reference(g: &WgpuBackend, op: &Op, inputs: &[Tensor]) -> Vec<Tensor> {
    let rows = |t: &Tensor| t.numel() / t.shape().last().copied().unwrap_or(1).max(1);
    let run = |op: &Op, ins: &[Tensor]| reference::execute(op, ins).expect("reference executes");
    if !g.matrix_units() {
        return run(op, inputs);
    }
    match op {
        Op::Matmul | Op::FusedQkv | Op::FusedSwiGlu if rows(&inputs[0]) > 1 => {
            run(op, &inputs.iter().map(f16_rounded).collect::<Vec<_>>())
        }
        Op::Sdpa { .. } if attention_on_matrix_units(g, op, inputs) => {
            run(op, &inputs.iter().map(f16_rounded).collect::<Vec<_>>())
        }
        Op::FusedNormMatmul { eps, add_one } if rows(&inputs[0]) > 1 => {
            let norm = Op::RmsNorm {
                eps: *eps,
                add_one: *add_one,
            };
            let normed = run(&norm, &inputs[..2]).remove(0);
            run(
                &Op::Matmul,
                &[f16_rounded(&normed), f16_rounded(&inputs[2])],
            )
        }
        _ => run(op, inputs),
    }
}
