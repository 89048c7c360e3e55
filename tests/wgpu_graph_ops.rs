//! The wgpu kernels of imported graphs' ops (layout copies, BatchMatmul,
//! reductions, the element-wise math ops, Shape) against the CPU reference on
//! small awkward shapes. Runs on whatever Vulkan/Metal/DX12 adapter exists
//! (lavapipe in CI); no adapter is a failure, never a skip.

mod backend_util;

use backend_util::wgpu::{check, gpu};
use backend_util::{rand_tensor, rng};
use cyb_llm::backend::{Backend, ExecContext, Op, ReduceKind, Tensor, TensorInfo};
use cyb_llm::DType;

/// Values move unchanged: wgpu must give the reference's bytes.
const EXACT: f32 = 0.0;

#[test]
fn layout_ops_match_reference_exactly() {
    let mut r = rng("layout_ops_match_reference_exactly");
    let x = rand_tensor(&mut r, &[2, 3, 5, 7]);
    for perm in [[0, 2, 1, 3], [3, 2, 1, 0], [0, 1, 3, 2], [1, 0, 2, 3]] {
        check(
            &Op::Permute(perm.to_vec()),
            std::slice::from_ref(&x),
            EXACT,
            0.0,
        );
    }
    for axis in 0..4 {
        let mut other = x.shape().to_vec();
        other[axis] = 4;
        let y = rand_tensor(&mut r, &other);
        let parts = [x.clone(), y, x.clone()];
        check(&Op::Concat { axis }, &parts, EXACT, 0.0);
        let sizes = vec![1, x.shape()[axis] - 1];
        let split = Op::Split { axis, sizes };
        check(&split, std::slice::from_ref(&x), EXACT, 0.0);
    }
    let slice = Op::StridedSlice {
        starts: vec![1, 2, 0, 6],
        steps: vec![1, -2, 2, -3],
        shape: vec![1, 2, 3, 3],
    };
    check(&slice, std::slice::from_ref(&x), EXACT, 0.0);
    for pads in [
        vec![[0, 0], [1, 2], [0, 0], [3, 0]],
        vec![[0, 0], [-1, 1], [2, -2], [0, -3]],
        vec![[0, 0], [0, 0], [-1, 0], [0, -2]],
    ] {
        let pad = Op::Pad { pads, value: 0.5 };
        check(&pad, std::slice::from_ref(&x), EXACT, 0.0);
    }
    let col = rand_tensor(&mut r, &[3, 1]);
    check(&Op::Expand(vec![2, 3, 5]), &[col], EXACT, 0.0);
    let scales = vec![1, 1, 2, 3];
    check(&Op::ResizeNearest { scales }, &[x], EXACT, 0.0);
}

#[test]
fn batch_matmul_matches_reference() {
    let mut r = rng("batch_matmul_matches_reference");
    for (a, b) in [
        (&[2, 13, 96][..], &[2, 96, 13][..]),
        (&[1, 2, 13, 96], &[1, 1, 96, 25]),
        (&[3, 17, 33], &[33, 19]),
        (&[2, 1, 5, 16], &[3, 16, 1]),
    ] {
        let inputs = [rand_tensor(&mut r, a), rand_tensor(&mut r, b)];
        check(&Op::BatchMatmul, &inputs, 1e-5, 0.0);
    }
}

#[test]
fn reductions_match_reference() {
    let mut r = rng("reductions_match_reference");
    let x = rand_tensor(&mut r, &[2, 13, 19]);
    let gap = rand_tensor(&mut r, &[3, 1, 5, 7]);
    for kind in [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Mean] {
        for (input, axes) in [
            (&x, vec![2]),
            (&x, vec![1]),
            (&x, vec![0, 1]),
            (&gap, vec![1, 2]),
            (&gap, vec![0, 2]),
        ] {
            for keepdims in [true, false] {
                let op = Op::Reduce {
                    kind,
                    axes: axes.clone(),
                    keepdims,
                };
                check(&op, std::slice::from_ref(input), 1e-5, 0.0);
            }
        }
    }
    let img = rand_tensor(&mut r, &[2, 3, 9, 10]);
    for (kernel, stride, pads, count_include_pad) in [
        ([2, 2], [2, 2], [0; 4], false),
        ([3, 3], [1, 1], [1, 1, 1, 1], false),
        ([3, 2], [2, 1], [1, 0, 1, 1], true),
    ] {
        let op = Op::AvgPool2d {
            kernel,
            stride,
            pads,
            count_include_pad,
        };
        check(&op, std::slice::from_ref(&img), 1e-5, 0.0);
    }
}

#[test]
fn math_ops_match_reference() {
    let mut r = rng("math_ops_match_reference");
    let x = rand_tensor(&mut r, &[3, 67]);
    let v = x.read_f32("test").unwrap();
    let pos = Tensor::from_f32(&[3, 67], v.iter().map(|a| a.abs() + 0.1).collect()).unwrap();
    let wide = Tensor::from_f32(&[3, 67], v.iter().map(|a| a * 4.0).collect()).unwrap();
    for op in [
        Op::Exp,
        Op::Cos,
        Op::Sin,
        Op::Neg,
        Op::Erf,
        Op::Softplus,
        Op::Ceil,
        Op::PowScalar(2.0),
        Op::PowScalar(3.0),
        Op::PowScalar(-2.0),
        Op::Clamp { lo: -0.5, hi: 0.25 },
    ] {
        check(&op, std::slice::from_ref(&wide), 1e-5, 0.0);
    }
    for op in [
        Op::Sqrt,
        Op::Log,
        Op::Reciprocal,
        Op::PowScalar(0.5),
        Op::PowScalar(1.5),
    ] {
        check(&op, std::slice::from_ref(&pos), 1e-5, 0.0);
    }
}

#[test]
fn shape_is_answered_without_reading_the_values() {
    let mut r = rng("shape_is_answered_without_reading_the_values");
    let g = gpu();
    let x = check(&Op::Exp, &[rand_tensor(&mut r, &[2, 3, 5])], 1e-5, 0.0).remove(0);
    assert!(g.supports(&Op::Shape, &[x.info().clone()]));
    let mut ctx = ExecContext::new(1);
    let dims = g.execute(&Op::Shape, &[x], &mut ctx).unwrap().remove(0);
    assert_eq!(dims.as_i64(), Some(&[2i64, 3, 5][..]));
}

#[test]
fn graph_ops_outside_the_kernels_are_declined() {
    let g = gpu();
    let f = |s: &[usize]| TensorInfo::new(s, DType::F32);
    let reduce = Op::Reduce {
        kind: ReduceKind::Sum,
        axes: vec![0, 2],
        keepdims: false,
    };
    assert!(!g.supports(&reduce, &[f(&[2, 3, 4])]), "axes not one run");
    let deep = [f(&[2, 2, 2, 2, 2, 3, 4]), f(&[2, 2, 2, 2, 2, 4, 3])];
    assert!(!g.supports(&Op::BatchMatmul, &deep), "five batch dims");
    let perm = Op::Permute(vec![6, 5, 4, 3, 2, 1, 0]);
    assert!(
        !g.supports(&perm, &[f(&[2; 7])]),
        "seven dims that do not merge"
    );
    let halves = TensorInfo::new(&[2, 3], DType::F16);
    let cat = Op::Concat { axis: 0 };
    assert!(!g.supports(&cat, &[halves.clone(), halves]), "f16 values");
}
