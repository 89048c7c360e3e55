//! `BatchMatmul(q, kt) -> s`, `Softmax(s) -> p`, `BatchMatmul(p, v)` becomes one
//! `FusedAttention(q, kt, v)` (see [`Op::FusedAttention`]) when `s` and `p` have no
//! other consumer and q, kt and v have one rank and the same leading dims (as far as the
//! graph knows them: a symbolic dim must be symbolic in all three).

use super::{fixed, producer, Pass, Supports};
use crate::backend::Op;
use crate::ir::{Graph, Node};

/// Returns the fused graph and how many rewrites were made.
pub(super) fn fuse_attention(g: &Graph, supports: &Supports) -> (Graph, usize) {
    let mut pass = Pass::new(g);
    for (si, softmax) in g.nodes.iter().enumerate() {
        if fixed(softmax) != Some(&Op::Softmax) {
            continue;
        }
        let (s, p) = (softmax.inputs[0], softmax.outputs[0]);
        let Some(qi) = producer(g, s).filter(|_| pass.consumers[s] == 1) else {
            continue;
        };
        let Some(pi) = pass.only_user(p) else {
            continue;
        };
        let (scores, product) = (&g.nodes[qi], &g.nodes[pi]);
        let batch_matmul = |n: &Node| fixed(n) == Some(&Op::BatchMatmul);
        if !batch_matmul(scores) || !batch_matmul(product) || product.inputs[0] != p {
            continue;
        }
        let inputs = vec![scores.inputs[0], scores.inputs[1], product.inputs[1]];
        let shapes: Vec<_> = inputs.iter().map(|&v| &g.values[v].shape).collect();
        let r = shapes[0].len();
        let same_lead = r >= 3
            && shapes
                .iter()
                .all(|s| s.len() == r && s[..r - 2] == shapes[0][..r - 2]);
        let chain = [qi, si, pi];
        if !same_lead
            || chain.iter().any(|&n| pass.touched(n))
            || !supports(product, &Op::FusedAttention, &inputs, g)
        {
            continue;
        }
        let outputs = product.outputs.clone();
        pass.rewrite(
            pi,
            scores.id,
            Op::FusedAttention,
            [inputs, outputs],
            &[qi, si],
        );
    }
    pass.finish()
}
