//! `Conv2d(x, w, b) -> y`, optionally a reshape of `y` (`Reshape`, `ReshapeTo`,
//! `Squeeze`, `Unsqueeze`: an imported 1-D convolution), then `Add` of a residual `r` of
//! the sum's shape becomes one `FusedConvAdd(r, x, w, b)` (see [`Op::FusedConvAdd`]) when
//! each step's output has no other consumer: the residual is added while the
//! convolution's output tile is in cache instead of in a pass of its own. A `LeakyRelu`
//! producing `x` for the convolution alone joins too (HiFi-GAN's residual blocks), applied
//! as the input is copied into the padded planes. A further `Add` of the fused sum and a
//! value of its shape joins as a second addend ([`fuse_second_addends`]).

use super::{fixed, producer, Pass, Supports};
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
        let activation = leaky_input(g, &pass, ci);
        let fused = Op::FusedConvAdd {
            conv: Box::new(op.clone()),
            leaky: activation.map(|a| a.slope),
            second: false,
        };
        let mut inputs = vec![r];
        inputs.extend(&conv.inputs);
        if let Some(LeakyInput {
            reshape: None, x, ..
        }) = activation
        {
            inputs[1] = x;
        }
        if !supports(add, &fused, &inputs, g) {
            continue;
        }
        let Some((&at, drop)) = chain.split_last() else {
            continue;
        };
        pass.rewrite(at, conv.id, fused, [inputs, add.outputs.clone()], drop);
        if let Some(a) = activation {
            if let Some(ri) = a.reshape {
                pass.reroute(ri, 0, a.x);
            }
            pass.remove(a.node);
        }
    }
    pass.finish()
}

/// `FusedConvAdd(r, x, w, b) -> y` then `Add(y, s)` of the same shape becomes
/// `FusedConvAdd { second: true }(r, s, x, w, b)` when the `Add` is `y`'s only consumer:
/// `s` is added in the convolution's output stores after `r`, as the `Add` would (HiFi-GAN
/// sums its residual blocks' outputs so). Returns the fused graph and how many rewrites
/// were made.
pub(super) fn fuse_second_addends(g: &Graph, supports: &Supports) -> (Graph, usize) {
    let mut pass = Pass::new(g);
    for (fi, node) in g.nodes.iter().enumerate() {
        let Some(Op::FusedConvAdd {
            conv,
            leaky,
            second: false,
        }) = fixed(node)
        else {
            continue;
        };
        let y = node.outputs[0];
        let Some(ai) = pass.only_user(y) else {
            continue;
        };
        let add = &g.nodes[ai];
        let [a, b] = add.inputs[..] else { continue };
        let s = if a == y { b } else { a };
        let shape = &g.values[y].shape;
        if fixed(add) != Some(&Op::Add)
            || s == y
            || g.values[s].shape != *shape
            || g.values[add.outputs[0]].shape != *shape
            || pass.touched(fi)
            || pass.touched(ai)
        {
            continue;
        }
        let fused = Op::FusedConvAdd {
            conv: conv.clone(),
            leaky: *leaky,
            second: true,
        };
        let mut inputs = vec![node.inputs[0], s];
        inputs.extend(&node.inputs[1..]);
        if !supports(add, &fused, &inputs, g) {
            continue;
        }
        pass.rewrite(ai, node.id, fused, [inputs, add.outputs.clone()], &[fi]);
    }
    pass.finish()
}

/// A `LeakyRelu` feeding convolution node `ci` alone, directly or through one reshape that
/// feeds it alone: the reshape then reads the activation's input (an element-wise op commutes
/// with a reshape) and the activation goes into the fused convolution.
#[derive(Clone, Copy)]
struct LeakyInput {
    /// The `LeakyRelu` node.
    node: usize,
    slope: f32,
    /// Its input.
    x: usize,
    /// The reshape between it and the convolution.
    reshape: Option<usize>,
}

fn leaky_input(g: &Graph, pass: &Pass, ci: usize) -> Option<LeakyInput> {
    let v = g.nodes[ci].inputs[0];
    if pass.only_user(v) != Some(ci) {
        return None;
    }
    let p = producer(g, v)?;
    let (reshape, v) = match g.nodes[p].op {
        GraphOp::Reshape(_)
        | GraphOp::ReshapeTo { .. }
        | GraphOp::Squeeze(_)
        | GraphOp::Unsqueeze(_) => {
            let u = g.nodes[p].inputs[0];
            if pass.only_user(u) != Some(p) {
                return None;
            }
            (Some(p), u)
        }
        _ => (None, v),
    };
    let li = producer(g, v)?;
    let Some(&Op::LeakyRelu(slope)) = fixed(&g.nodes[li]) else {
        return None;
    };
    if pass.touched(li) || reshape.is_some_and(|r| pass.touched(r)) {
        return None;
    }
    Some(LeakyInput {
        node: li,
        slope,
        x: g.nodes[li].inputs[0],
        reshape,
    })
}
