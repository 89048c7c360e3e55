//! `Conv2d(x, w, b) -> y`, optionally a reshape of `y` (`Reshape`, `ReshapeTo`,
//! `Squeeze`, `Unsqueeze`: an imported 1-D convolution), then `Add` of a residual `r` of
//! the sum's shape becomes one `FusedConvAdd(r, x, w, b)` (see [`Op::FusedConvAdd`]) when
//! each step's output has no other consumer: the residual is added while the
//! convolution's output tile is in cache instead of in a pass of its own.

use super::{fixed, Pass, Supports};
use crate::backend::Op;
use crate::ir::{Graph, GraphOp};

/// Returns the fused graph and how many rewrites were made.
pub(super) fn fuse_conv_add(g: &Graph, supports: &Supports) -> (Graph, usize) {
    let mut pass = Pass::new(g);
    for (ci, conv) in g.nodes.iter().enumerate() {
        let Some(op @ Op::Conv2d { .. }) = fixed(conv) else {
            continue;
        };
        let mut chain = vec![ci];
        let mut y = conv.outputs[0];
        let Some(mut next) = pass.only_user(y) else {
            continue;
        };
        let reshape = matches!(
            g.nodes[next].op,
            GraphOp::Reshape(_)
                | GraphOp::ReshapeTo { .. }
                | GraphOp::Squeeze(_)
                | GraphOp::Unsqueeze(_)
        );
        if reshape {
            if g.nodes[next].inputs[0] != y {
                continue;
            }
            chain.push(next);
            y = g.nodes[next].outputs[0];
            let Some(after) = pass.only_user(y) else {
                continue;
            };
            next = after;
        }
        let add = &g.nodes[next];
        let [a, b] = add.inputs[..] else { continue };
        let r = if a == y { b } else { a };
        // The residual has the sum's shape (no broadcast), as far as the graph knows it.
        let shape = &g.values[add.outputs[0]].shape;
        if fixed(add) != Some(&Op::Add)
            || r == y
            || g.values[r].shape != *shape
            || g.values[y].shape != *shape
        {
            continue;
        }
        chain.push(next);
        if chain.iter().any(|&n| pass.touched(n)) {
            continue;
        }
        let fused = Op::FusedConvAdd {
            conv: Box::new(op.clone()),
        };
        let mut inputs = vec![r];
        inputs.extend(&conv.inputs);
        if !supports(add, &fused, &inputs, g) {
            continue;
        }
        let Some((&at, drop)) = chain.split_last() else {
            continue;
        };
        pass.rewrite(at, conv.id, fused, [inputs, add.outputs.clone()], drop);
    }
    pass.finish()
}
