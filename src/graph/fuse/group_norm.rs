//! `GroupNormAffine(x) -> n`, then `Mul(n, scale)` and `Add(.., shift)` with `scale` and
//! `shift` per batch entry and channel (`[B or 1, C, 1, ..]`), and/or an element-wise
//! unary op, becomes one `FusedGroupNorm` (see [`Op::FusedGroupNorm`]) when each step's
//! output has no other consumer: a diffusion ResNet block's norm, time-embedding
//! modulation and SiLU in one pass over the activations instead of four.

use super::{fixed, Pass, Supports};
use crate::backend::Op;
use crate::ir::{Graph, Node};

/// Returns the fused graph and how many rewrites were made.
pub(super) fn fuse_group_norms(g: &Graph, supports: &Supports) -> (Graph, usize) {
    let mut pass = Pass::new(g);
    for (ni, norm) in g.nodes.iter().enumerate() {
        let Some(&Op::GroupNormAffine { groups, eps }) = fixed(norm) else {
            continue;
        };
        let x = norm.inputs[0];
        let mut inputs = norm.inputs.clone();
        let mut chain = vec![ni];
        let mut out = norm.outputs[0];
        if let Some((scale, shift, mul, add)) = modulation(g, x, out, &|v| pass.only_user(v)) {
            inputs.extend([scale, shift]);
            chain.extend([mul, add]);
            out = g.nodes[add].outputs[0];
        }
        let mut act = None;
        if let Some(ai) = pass.only_user(out) {
            if let Some(op) = fixed(&g.nodes[ai]).filter(|op| op.is_unary_map()) {
                act = Some(Box::new(op.clone()));
                chain.push(ai);
            }
        }
        if chain.len() == 1 || chain.iter().any(|&n| pass.touched(n)) {
            continue;
        }
        let Some((&at, drop)) = chain.split_last() else {
            continue;
        };
        let last = &g.nodes[at];
        let op = Op::FusedGroupNorm { groups, eps, act };
        if !supports(last, &op, &inputs, g) {
            continue;
        }
        pass.rewrite(at, norm.id, op, [inputs, last.outputs.clone()], drop);
    }
    pass.finish()
}

/// `Mul(n, scale) -> m`, `Add(m, shift)` (either operand order) as `(scale, shift, the Mul
/// node, the Add node)`, where `n` (the norm of `x`) and `m` have one consumer each, both
/// operands are `[B or 1, C, 1, ..]` of x's rank, and the products keep x's shape.
fn modulation(
    g: &Graph,
    x: usize,
    n: usize,
    only_user: &dyn Fn(usize) -> Option<usize>,
) -> Option<(usize, usize, usize, usize)> {
    let xs = &g.values[x].shape;
    let c = xs.get(1).copied().flatten()?;
    let per_entry = |v: usize| {
        let s = &g.values[v].shape;
        s.len() == xs.len()
            && (s[0] == Some(1) || s[0] == xs[0])
            && s[1] == Some(c)
            && s[2..].iter().all(|&d| d == Some(1))
    };
    // The other operand of binary node `node` of `op`, when `v` is one of its two and the
    // result keeps x's shape.
    let other = |node: &Node, op: Op, v: usize| {
        let [a, b] = node.inputs[..] else { return None };
        let keeps = g.values[node.outputs[0]].shape == *xs;
        let o = if a == v { b } else { a };
        (fixed(node) == Some(&op) && (a == v || b == v) && o != v && keeps && per_entry(o))
            .then_some(o)
    };
    let mi = only_user(n)?;
    let scale = other(&g.nodes[mi], Op::Mul, n)?;
    let m = g.nodes[mi].outputs[0];
    let ai = only_user(m)?;
    let shift = other(&g.nodes[ai], Op::Add, m)?;
    Some((scale, shift, mi, ai))
}
