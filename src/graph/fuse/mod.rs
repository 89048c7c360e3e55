//! The fusion pass (graph.md, "Execution" step 2), run once at load:
//!
//! - `Add(a, b) -> s`, `RmsNorm(s, g) -> n` becomes `FusedSkipNorm(a, b, g) -> (n, s)`
//!   (the sum stays available to its other consumers, since the fused op returns it);
//! - `RmsNorm(x, g) -> n`, `Matmul(n, W)` becomes `FusedNormMatmul(x, g, W)`
//!   when the Matmul is `n`'s only consumer;
//! - `Silu(gate) -> a`, `Mul(a, up)` becomes `FusedSwiGlu(x, Wg, Wu)` when
//!   `gate` and `up` are single-consumer `Matmul`s of the same `x`, else
//!   `SwiGlu(gate, up)`, when `a` has no other consumer.
//!
//! - `Reshape(x) -> [B, G, L]`, `GroupNorm{groups: G}`, `Reshape` back to x's shape,
//!   `Mul` by a per-channel weight, `Add` of a per-channel weight (an exported
//!   `torch.nn.GroupNorm`) becomes `GroupNormAffine(x, g, b, gamma, beta)` when each
//!   step's output has no other consumer;
//! - `Sigmoid(x) -> s`, `Mul(x, s)` becomes `Silu(x)` when `s` has no other
//!   consumer (exporters write SiLU so; ONNX has no SiLU op before opset 24);
//! - then, on the result, `GroupNormAffine` followed by a per batch entry and channel
//!   `Mul` and `Add` and/or an element-wise activation becomes `FusedGroupNorm`
//!   (`fuse/group_norm.rs`);
//! - `BatchMatmul`, `Softmax`, `BatchMatmul` becomes `FusedAttention` (`fuse/attention.rs`);
//! - and `Conv2d` (through a reshape) then `Add` of a residual becomes `FusedConvAdd`
//!   (`fuse/conv_add.rs`), a further `Add` of its sum joining it as a second addend.
//!
//! A rewrite happens only where the backend that would run the node
//! `supports` the fused op; otherwise the nodes stay as they are.

mod attention;
mod conv_add;
mod group_norm;

use crate::backend::Op;
use crate::ir::{Graph, GraphOp, Node, Source};

/// Asks whether the backend chosen for a node supports an op on the given
/// input values.
pub type Supports<'a> = dyn Fn(&Node, &Op, &[usize], &Graph) -> bool + 'a;

fn producer(g: &Graph, v: usize) -> Option<usize> {
    match g.values[v].source {
        Source::Node(n) => Some(n),
        _ => None,
    }
}

fn fixed(node: &Node) -> Option<&Op> {
    match &node.op {
        GraphOp::Fixed(op) => Some(op),
        _ => None,
    }
}

/// For each value, the nodes that read it (in node order).
fn users(g: &Graph) -> Vec<Vec<usize>> {
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); g.values.len()];
    for (ni, n) in g.nodes.iter().enumerate() {
        for &i in &n.inputs {
            users[i].push(ni);
        }
    }
    users
}

/// Available at node `at`: not produced by a node at or after it.
fn available_before(g: &Graph, v: usize, at: usize) -> bool {
    producer(g, v).is_none_or(|p| p < at)
}

/// Returns the fused graph and how many rewrites were made.
pub fn fuse(graph: &Graph, supports: &Supports) -> (Graph, usize) {
    let (first, count) = fuse_first(graph, supports);
    let (normed, norms) = group_norm::fuse_group_norms(&first, supports);
    let (attended, attentions) = attention::fuse_attention(&normed, supports);
    let (convolved, convs) = conv_add::fuse_conv_add(&attended, supports);
    let (out, sums) = conv_add::fuse_second_addends(&convolved, supports);
    (out, count + norms + attentions + convs + sums)
}

/// The rewrites of this file; the passes of the submodules run on their result.
fn fuse_first(graph: &Graph, supports: &Supports) -> (Graph, usize) {
    let g = graph;
    let mut pass = Pass::new(g);

    // Reshape -> GroupNorm -> Reshape -> Mul -> Add: GroupNormAffine.
    // A weight of C values laid out per channel of a rank-`rank` [B, C, ..] value.
    let per_channel = |v: usize, c: usize, rank: usize| {
        let val = &g.values[v];
        let dims: Vec<usize> = val.shape.iter().map(|d| d.unwrap_or(0)).collect();
        val.source == Source::Weight
            && ((dims.len() + 1 == rank && dims[0] == c && dims[1..].iter().all(|&d| d == 1))
                || (dims.len() == rank
                    && dims[0] == 1
                    && dims[1] == c
                    && dims[2..].iter().all(|&d| d == 1)))
    };
    for (ri, r1) in g.nodes.iter().enumerate() {
        if !matches!(r1.op, GraphOp::Reshape(_)) || pass.touched(ri) {
            continue;
        }
        let (x, v1) = (r1.inputs[0], r1.outputs[0]);
        let xs = &g.values[x].shape;
        let Some(c) = xs.get(1).copied().flatten() else {
            continue;
        };
        let Some(ni) = pass.only_user(v1) else {
            continue;
        };
        let gn = &g.nodes[ni];
        let Some(&Op::GroupNorm { groups, eps }) = fixed(gn) else {
            continue;
        };
        let v1s = &g.values[v1].shape;
        // [B, G, C/G * rest] exactly: each group is C/G whole channels of one batch entry.
        let rest: Option<usize> = xs[2..].iter().try_fold(1usize, |a, d| Some(a * (*d)?));
        let grouped = groups > 0
            && c % groups == 0
            && v1s.len() == 3
            && v1s[1] == Some(groups)
            && rest.is_some_and(|r| v1s[2] == Some(c / groups * r));
        if gn.inputs[0] != v1 || !grouped {
            continue;
        }
        let v2 = gn.outputs[0];
        let Some(r2i) = pass.only_user(v2) else {
            continue;
        };
        let r2 = &g.nodes[r2i];
        let v3 = r2.outputs[0];
        if !matches!(r2.op, GraphOp::Reshape(_)) || g.values[v3].shape != *xs {
            continue;
        }
        let Some(mi) = pass.only_user(v3) else {
            continue;
        };
        let mul = &g.nodes[mi];
        let v4 = mul.outputs[0];
        let other = |n: &Node, v: usize| {
            if n.inputs[0] == v {
                n.inputs[1]
            } else {
                n.inputs[0]
            }
        };
        let gamma = other(mul, v3);
        if fixed(mul) != Some(&Op::Mul) || !per_channel(gamma, c, xs.len()) {
            continue;
        }
        let Some(ai) = pass.only_user(v4) else {
            continue;
        };
        let add = &g.nodes[ai];
        let beta = other(add, v4);
        if fixed(add) != Some(&Op::Add) || !per_channel(beta, c, xs.len()) {
            continue;
        }
        let chain = [ri, ni, r2i, mi, ai];
        if chain.iter().any(|&n| pass.touched(n))
            || !available_before(g, gn.inputs[1], ri)
            || !available_before(g, gn.inputs[2], ri)
        {
            continue;
        }
        let op = Op::GroupNormAffine { groups, eps };
        let inputs = vec![x, gn.inputs[1], gn.inputs[2], gamma, beta];
        if !supports(add, &op, &inputs, g) {
            continue;
        }
        pass.rewrite(ai, r1.id, op, [inputs, add.outputs.clone()], &chain[..4]);
    }

    // Sigmoid -> Mul of the same value: Silu.
    for (si, sig) in g.nodes.iter().enumerate() {
        if fixed(sig) != Some(&Op::Sigmoid) || pass.touched(si) {
            continue;
        }
        let (x, s) = (sig.inputs[0], sig.outputs[0]);
        if pass.consumers[s] != 1 {
            continue;
        }
        let Some(&mi) = pass.users[s].first() else {
            continue;
        };
        let mul = &g.nodes[mi];
        let pair = mul.inputs.as_slice();
        let same = pair == [x, s] || pair == [s, x];
        if fixed(mul) != Some(&Op::Mul) || !same || pass.touched(mi) {
            continue;
        }
        let inputs = vec![x];
        if !supports(mul, &Op::Silu, &inputs, g) {
            continue;
        }
        pass.rewrite(mi, mul.id, Op::Silu, [inputs, mul.outputs.clone()], &[si]);
    }

    // Add -> RmsNorm.
    for (ai, add) in g.nodes.iter().enumerate() {
        if fixed(add) != Some(&Op::Add) {
            continue;
        }
        let (a, b, s) = (add.inputs[0], add.inputs[1], add.outputs[0]);
        if g.values[a].shape != g.values[b].shape || g.values[a].shape.is_empty() {
            continue;
        }
        let Some(&ni) = pass.users[s].iter().find(|&&u| {
            matches!(fixed(&g.nodes[u]), Some(Op::RmsNorm { .. })) && g.nodes[u].inputs[0] == s
        }) else {
            continue;
        };
        let norm = &g.nodes[ni];
        let Some(&Op::RmsNorm { eps, add_one }) = fixed(norm) else {
            continue;
        };
        let gain = norm.inputs[1];
        if pass.touched(ni) || !available_before(g, gain, ai) {
            continue;
        }
        let op = Op::FusedSkipNorm { eps, add_one };
        let inputs = vec![a, b, gain];
        if !supports(add, &op, &inputs, g) {
            continue;
        }
        pass.rewrite(ai, add.id, op, [inputs, vec![norm.outputs[0], s]], &[ni]);
    }

    // Silu -> Mul.
    for (si, silu) in g.nodes.iter().enumerate() {
        if fixed(silu) != Some(&Op::Silu) || pass.touched(si) {
            continue;
        }
        let (gate, act) = (silu.inputs[0], silu.outputs[0]);
        if pass.consumers[act] != 1 {
            continue;
        }
        let Some(&mi) = pass.users[act].first() else {
            continue;
        };
        let mul = &g.nodes[mi];
        if fixed(mul) != Some(&Op::Mul) || pass.touched(mi) {
            continue;
        }
        let up = if mul.inputs[0] == act {
            mul.inputs[1]
        } else {
            mul.inputs[0]
        };
        if g.values[gate].shape != g.values[up].shape {
            continue;
        }
        let matmul_of = |v: usize| {
            let p = producer(g, v)?;
            let n = &g.nodes[p];
            (fixed(n) == Some(&Op::Matmul) && pass.consumers[v] == 1 && !pass.touched(p))
                .then_some((p, n.inputs[0], n.inputs[1]))
        };
        let swiglu = match (matmul_of(gate), matmul_of(up)) {
            (Some((gp, x, wg)), Some((up_p, x2, wu))) if x == x2 => {
                let inputs = vec![x, wg, wu];
                let op = Op::FusedSwiGlu;
                supports(mul, &op, &inputs, g).then_some((op, inputs, vec![gp, up_p]))
            }
            _ => None,
        };
        let (op, inputs, drop) = match swiglu {
            Some(found) => found,
            None => {
                let inputs = vec![gate, up];
                if !supports(mul, &Op::SwiGlu, &inputs, g) {
                    continue;
                }
                (Op::SwiGlu, inputs, Vec::new())
            }
        };
        let drop: Vec<usize> = std::iter::once(si).chain(drop).collect();
        pass.rewrite(mi, mul.id, op, [inputs, mul.outputs.clone()], &drop);
    }

    // RmsNorm -> Matmul.
    for (ni, norm) in g.nodes.iter().enumerate() {
        let Some(&Op::RmsNorm { eps, add_one }) = fixed(norm) else {
            continue;
        };
        let out = norm.outputs[0];
        if pass.touched(ni) || pass.consumers[out] != 1 {
            continue;
        }
        let Some(&mi) = pass.users[out].first() else {
            continue;
        };
        let mm = &g.nodes[mi];
        if fixed(mm) != Some(&Op::Matmul) || mm.inputs[0] != out || pass.touched(mi) {
            continue;
        }
        let inputs = vec![norm.inputs[0], norm.inputs[1], mm.inputs[1]];
        let op = Op::FusedNormMatmul { eps, add_one };
        if !supports(mm, &op, &inputs, g) {
            continue;
        }
        pass.rewrite(mi, norm.id, op, [inputs, mm.outputs.clone()], &[ni]);
    }

    pass.finish()
}

/// The state of one rewrite pass over a graph: each value's consumers (graph outputs
/// count) and reading nodes, the nodes dropped and the nodes swapped in so far.
struct Pass<'g> {
    g: &'g Graph,
    consumers: Vec<usize>,
    users: Vec<Vec<usize>>,
    removed: Vec<bool>,
    replaced: Vec<Option<Node>>,
    count: usize,
}

impl<'g> Pass<'g> {
    fn new(g: &'g Graph) -> Self {
        Pass {
            g,
            consumers: g.consumers(),
            users: users(g),
            removed: vec![false; g.nodes.len()],
            replaced: vec![None; g.nodes.len()],
            count: 0,
        }
    }

    /// The node that reads `v`, when it is `v`'s only consumer.
    fn only_user(&self, v: usize) -> Option<usize> {
        (self.consumers[v] == 1)
            .then(|| self.users[v].first().copied())
            .flatten()
    }

    /// Whether a rewrite already dropped or replaced node `n`.
    fn touched(&self, n: usize) -> bool {
        self.removed[n] || self.replaced[n].is_some()
    }

    /// Node `at` becomes `op` on `[inputs, outputs]`, with id `id` and `at`'s backend hint;
    /// the nodes of `drop` go.
    fn rewrite(
        &mut self,
        at: usize,
        id: usize,
        op: Op,
        [inputs, outputs]: [Vec<usize>; 2],
        drop: &[usize],
    ) {
        self.replaced[at] = Some(Node {
            id,
            op: GraphOp::Fixed(op),
            inputs,
            outputs,
            backend_hint: self.g.nodes[at].backend_hint.clone(),
        });
        for &n in drop {
            self.removed[n] = true;
        }
        self.count += 1;
    }

    /// Node `at` reads value `v` as its input `k` (the rest of it unchanged).
    fn reroute(&mut self, at: usize, k: usize, v: usize) {
        let mut node = self.replaced[at]
            .clone()
            .unwrap_or_else(|| self.g.nodes[at].clone());
        node.inputs[k] = v;
        self.replaced[at] = Some(node);
    }

    /// Node `n` goes (its outputs must have no reader left).
    fn remove(&mut self, n: usize) {
        self.removed[n] = true;
    }

    /// The rewritten graph and how many rewrites were made.
    fn finish(self) -> (Graph, usize) {
        (rebuild(self.g, &self.removed, &self.replaced), self.count)
    }
}

/// `g` without the `removed` nodes and with the `replaced` ones swapped in, each value's
/// source pointing at its node's new index.
fn rebuild(g: &Graph, removed: &[bool], replaced: &[Option<Node>]) -> Graph {
    let mut out = g.clone();
    out.nodes.clear();
    for (ni, node) in g.nodes.iter().enumerate() {
        if removed[ni] {
            continue;
        }
        let node = replaced[ni].clone().unwrap_or_else(|| node.clone());
        let k = out.nodes.len();
        for &o in &node.outputs {
            out.values[o].source = Source::Node(k);
        }
        out.nodes.push(node);
    }
    out
}
