//! The graph executor (graph.md, "Execution"): a [`GraphModel`] is a loaded
//! graph bound to its weights and backends (fused once at load); a
//! [`GraphSession`] is one conversation with its own KV cache.
//!
//! Per node: the backend is the node's `backend_hint` when that backend
//! supports the op, else the dispatcher's chain (default, then fallbacks,
//! then cpu); every decision goes to the context's dispatch log. Each
//! intermediate value is freed right after its last use.
//!
//! With `trace` on, every node extends a SHA-256 chain over (op tag, bound
//! attributes, output bytes): `h_i = SHA256(h_{i-1} || tag || attrs || outputs)`.
//! On the `nox` backend the chain is identical on every run, thread count and
//! machine, so two runs compare by one line.

use super::fuse;
use crate::backend::{
    nox, Backend, BackendChoice, BackendConfig, DispatchRecord, Dispatcher, ExecContext, Op,
    SharedBytes, Tensor, TensorInfo, BACKENDS,
};
use crate::dtype::DType;
use crate::error::ExecutionError;
use crate::ir::ops::{self, GraphOp, MaskKind, RopeFreqs};
use crate::ir::{Graph, Node, Source};
use crate::loader::Model;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// How a graph is prepared for execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphOptions {
    /// Run the fusion pass (`--no-fuse` turns it off).
    pub fuse: bool,
    /// Context size cap (`-c/--ctx-size`), further capped by `max_position_embeddings`.
    pub ctx_size: usize,
    /// Keep the per-op dispatch records of each forward (`--dispatch`).
    pub keep_dispatch: bool,
    /// Compute the execution-trace hash chain (`--trace`).
    pub trace: bool,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions {
            fuse: true,
            ctx_size: 4096,
            keep_dispatch: false,
            trace: false,
        }
    }
}

/// How a task that runs one graph model (an image generator, a voice) starts:
/// its backend, worker threads and whether the fusion pass runs.
#[derive(Debug, Clone)]
pub struct GraphTaskOptions {
    /// Backend choice (`auto`, `cpu`, ...).
    pub backend: BackendChoice,
    /// Worker threads.
    pub threads: usize,
    /// Run the fusion pass on the graph.
    pub fuse: bool,
}

impl Default for GraphTaskOptions {
    /// Auto backend, physical cores, fused graph.
    fn default() -> Self {
        GraphTaskOptions {
            backend: BackendChoice::Auto,
            threads: BackendConfig::default().threads,
            fuse: true,
        }
    }
}

/// The model file's bytes, kept alive by the weights that view them.
struct ModelBytes(Arc<Model>);

impl AsRef<[u8]> for ModelBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.file_bytes()
    }
}

/// A graph bound to weights and backends, shared by its conversations.
pub struct GraphModel {
    model: Arc<Model>,
    graph: Graph,
    dispatcher: Dispatcher,
    hints: HashMap<String, Arc<dyn Backend>>,
    weights: Vec<Option<Tensor>>,
    /// Per value: index of the node after which it is freed (`usize::MAX`: kept).
    last_use: Vec<usize>,
    /// Per node: the cos/sin cache of a Rope node.
    ropes: Vec<Option<(Tensor, Tensor)>>,
    labels: Vec<String>,
    max_ctx: usize,
    fused: usize,
    opts: GraphOptions,
}

fn missing(name: &str, by: &str) -> ExecutionError {
    ExecutionError::MissingTensor {
        name: name.to_string(),
        required_by: by.to_string(),
    }
}

fn bind_weight(
    model: &Model,
    owner: &Arc<dyn AsRef<[u8]> + Send + Sync>,
    name: &str,
) -> Result<Tensor, ExecutionError> {
    let t = model.tensor(name).ok_or_else(|| missing(name, "graph"))?;
    let bad = || ExecutionError::WeightFormatMismatch {
        name: name.to_string(),
        declared: t.entry.dtype,
        actual_bytes: t.bytes.len(),
    };
    if matches!(t.entry.dtype, DType::I64 | DType::Bool) {
        // Integer constants of the graph path: host i64 values.
        let width = t.entry.dtype.block_bytes();
        let values = t
            .bytes
            .chunks_exact(width)
            .map(|c| {
                let mut v = [0u8; 8];
                v[..width].copy_from_slice(c);
                i64::from_le_bytes(v)
            })
            .collect();
        return Tensor::host_ints(&t.entry.shape, t.entry.dtype, values);
    }
    if t.entry.shape.len() <= 1 {
        // Norm gains and biases: decoded once (see `crate::ir::bound_dtype`).
        let values = t.dequantize().map_err(|_| bad())?;
        return Tensor::from_f32(&t.entry.shape, values);
    }
    let start = t.bytes.as_ptr() as usize - model.file_bytes().as_ptr() as usize;
    let bytes = SharedBytes::new(owner.clone(), start..start + t.bytes.len()).ok_or_else(bad)?;
    Tensor::from_bytes(&t.entry.shape, t.entry.dtype, bytes, t.entry.scale)
}

/// Probe infos (dynamic dims = 1) for `supports` questions at load.
fn probe_infos(graph: &Graph, ids: &[usize]) -> Vec<TensorInfo> {
    ids.iter()
        .map(|&i| {
            let v = &graph.values[i];
            TensorInfo::new(&crate::ir::concrete(&v.shape, 1), v.dtype)
        })
        .collect()
}

impl GraphModel {
    /// Binds `model`'s graph section to its weights and to `dispatcher`'s backends.
    /// A model without a graph section is `InvalidConfig { field: "graph" }`.
    pub fn new(
        model: Arc<Model>,
        dispatcher: Dispatcher,
        opts: GraphOptions,
    ) -> Result<GraphModel, ExecutionError> {
        let graph = model
            .graph
            .clone()
            .ok_or_else(|| ExecutionError::InvalidConfig {
                field: "graph".into(),
                reason: "model has no graph section".into(),
            })?;
        let mut hints: HashMap<String, Arc<dyn Backend>> = HashMap::new();
        for name in graph.nodes.iter().filter_map(|n| n.backend_hint.as_deref()) {
            if hints.contains_key(name) {
                continue;
            }
            if let Some(b) = dispatcher.chain().iter().find(|b| b.name() == name) {
                hints.insert(name.to_string(), b.clone());
                continue;
            }
            let config = BackendConfig {
                threads: dispatcher.threads(),
            };
            let started = BACKENDS
                .iter()
                .find(|e| e.name == name || e.aliases.contains(&name))
                .map(|e| (e.init)(&config));
            match started {
                Some(Ok(b)) => {
                    hints.insert(name.to_string(), b);
                }
                Some(Err(e)) => tracing::info!("graph: backend hint {name} unavailable: {e}"),
                None => tracing::info!("graph: backend hint {name} is not a backend"),
            }
        }
        let primary = dispatcher.primary();
        let chosen = |node: &Node| -> &dyn Backend {
            node.backend_hint
                .as_deref()
                .and_then(|h| hints.get(h))
                .map_or(primary, |b| &**b)
        };
        let (graph, fused) = if opts.fuse {
            let supports = |node: &Node, op: &Op, ins: &[usize], g: &Graph| {
                chosen(node).supports(op, &probe_infos(g, ins))
            };
            fuse::fuse(&graph, &supports)
        } else {
            (graph, 0)
        };
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(ModelBytes(model.clone()));
        let weights = graph
            .values
            .iter()
            .map(|v| match v.source {
                Source::Weight => bind_weight(&model, &owner, &v.name).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut last_use: Vec<usize> = (0..graph.values.len())
            .map(|i| match graph.values[i].source {
                Source::Node(n) => n,
                _ => usize::MAX,
            })
            .collect();
        for (ni, node) in graph.nodes.iter().enumerate() {
            for &i in &node.inputs {
                if matches!(graph.values[i].source, Source::Node(_) | Source::Input(_)) {
                    last_use[i] = ni;
                }
            }
        }
        for &o in &graph.outputs {
            last_use[o] = usize::MAX;
        }
        let max_ctx = opts
            .ctx_size
            .min(
                model
                    .config
                    .architecture
                    .max_position_embeddings
                    .unwrap_or(usize::MAX),
            )
            .max(1);
        let mut caches: HashMap<(bool, usize, Vec<u64>), (Tensor, Tensor)> = HashMap::new();
        let mut ropes = Vec::with_capacity(graph.nodes.len());
        for node in &graph.nodes {
            let GraphOp::Rope { rot_dim, freqs, .. } = &node.op else {
                ropes.push(None);
                continue;
            };
            let Some(d) = graph.values[node.inputs[0]].shape.last().copied().flatten() else {
                ropes.push(None);
                continue;
            };
            let rot = rot_dim.unwrap_or(d);
            let exact = chosen(node).capabilities().deterministic;
            let inv = match (freqs, exact) {
                (RopeFreqs::Base(b), true) => nox::math::rope_inv_freq(rot, *b),
                _ => freqs.inv_freq(rot),
            };
            let key = (exact, rot, inv.iter().map(|f| f.to_bits()).collect());
            let cache = match caches.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let c = if exact {
                        nox::math::rope_cache(max_ctx, &inv)?
                    } else {
                        crate::backend::rope_cache(max_ctx, &inv)?
                    };
                    caches.insert(key, c.clone());
                    c
                }
            };
            ropes.push(Some(cache));
        }
        let labels = graph
            .nodes
            .iter()
            .map(|n| format!("node {} ({})", n.id, graph.values[n.outputs[0]].name))
            .collect();
        Ok(GraphModel {
            model,
            graph,
            dispatcher,
            hints,
            weights,
            last_use,
            ropes,
            labels,
            max_ctx,
            fused,
            opts,
        })
    }

    /// Loads the dispatcher for `choice` and binds `model` (convenience for
    /// the CLI and tests).
    pub fn with_backend(
        model: Arc<Model>,
        choice: BackendChoice,
        threads: usize,
        opts: GraphOptions,
    ) -> Result<GraphModel, ExecutionError> {
        let dispatcher = Dispatcher::new(choice, &BackendConfig { threads })?;
        GraphModel::new(model, dispatcher, opts)
    }

    /// The executed (possibly fused) graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// How many node groups the fusion pass replaced.
    pub fn fused_count(&self) -> usize {
        self.fused
    }

    /// The loaded model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The dispatcher (backend chain).
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// Context capacity of each conversation.
    pub fn max_ctx(&self) -> usize {
        self.max_ctx
    }

    /// A new conversation with an empty KV cache on the primary backend.
    pub fn session(self: &Arc<Self>) -> Result<GraphSession, ExecutionError> {
        let backend = self.dispatcher.primary();
        let kv = self
            .graph
            .states
            .iter()
            .map(|s| {
                let shape = [self.max_ctx, s.kv_heads, s.head_dim];
                Ok((
                    backend.alloc(&shape, DType::F32)?,
                    backend.alloc(&shape, DType::F32)?,
                ))
            })
            .collect::<Result<Vec<_>, ExecutionError>>()?;
        let mut ctx = ExecContext::new(self.dispatcher.threads());
        ctx.log.keep_records(self.opts.keep_dispatch);
        Ok(GraphSession {
            model: self.clone(),
            kv,
            len: 0,
            ctx,
            trace: self.opts.trace.then_some([0u8; 32]),
            traced: 0,
            profile: None,
            noise_seed: None,
        })
    }
}

/// One conversation over a [`GraphModel`]: its KV cache and position.
pub struct GraphSession {
    model: Arc<GraphModel>,
    kv: Vec<(Tensor, Tensor)>,
    len: usize,
    ctx: ExecContext,
    trace: Option<[u8; 32]>,
    traced: usize,
    /// Per op name: total seconds and runs, when profiling.
    profile: Option<Vec<(&'static str, f64, usize)>>,
    /// Replaces the imported seeds of `RandomNormalLike` ops (see [`GraphSession::set_noise_seed`]).
    noise_seed: Option<u64>,
}

/// What a value holds during a forward.
struct Slot {
    tensor: Tensor,
    /// Filled rows of a KV-cache view (`KvAppend` outputs).
    rows: Option<usize>,
}

fn node_err(id: usize, op: &str, reason: String) -> ExecutionError {
    ExecutionError::ShapeMismatch {
        op: format!("graph node {id} {op}: {reason}"),
        expected: Vec::new(),
        got: Vec::new(),
    }
}

impl GraphSession {
    /// Tokens in the KV cache (the position of the next token).
    pub fn position(&self) -> usize {
        self.len
    }

    /// From now on every `RandomNormalLike` op draws from a stream of `seed`
    /// and its own imported seed (two ops never share a stream), instead of
    /// the imported seed alone: the same `seed` gives the same draws on every
    /// run, thread count and machine.
    pub fn set_noise_seed(&mut self, seed: u64) {
        self.noise_seed = Some(seed);
    }

    /// Forgets the conversation (keeps the buffers; ops.md `reset_kv_cache`).
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `len` tokens (to re-run from a shared prefix).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes this session's KV state a copy of `src`'s filled positions (a
    /// beam taking over another's history): the rows are read back and
    /// written with `KvAppend` at 0, so it works on every backend. `src` must
    /// be a session of the same [`GraphModel`].
    pub fn copy_from(&mut self, src: &GraphSession) -> Result<(), ExecutionError> {
        if !Arc::ptr_eq(&self.model, &src.model) {
            return Err(ExecutionError::InvalidConfig {
                field: "session".into(),
                reason: "a KV state can only be copied between sessions of one graph model".into(),
            });
        }
        let len = src.len;
        self.len = 0;
        let m = self.model.clone();
        for (decl, ((sk, sv), (dk, dv))) in m.graph.states.iter().zip(src.kv.iter().zip(&self.kv)) {
            if len == 0 {
                break;
            }
            let row = decl.kv_heads * decl.head_dim;
            let rows = |t: &Tensor| -> Result<Tensor, ExecutionError> {
                let mut v = match t.read_f32("graph kv copy") {
                    Ok(v) => v.iter().take(len * row).copied().collect(),
                    Err(_) => m.dispatcher.primary().try_download_f32(t)?,
                };
                v.truncate(len * row);
                Tensor::from_f32(&[len, decl.kv_heads, decl.head_dim], v)
            };
            let ins = [dk.clone(), dv.clone(), rows(sk)?, rows(sv)?];
            m.dispatcher
                .run(&Op::KvAppend { pos: 0 }, &ins, &mut self.ctx)?;
        }
        self.len = len;
        Ok(())
    }

    /// Capacity of the KV cache in tokens.
    pub fn capacity(&self) -> usize {
        self.model.max_ctx
    }

    /// Dispatch decisions and op counts, mutable (e.g. to keep per-op records).
    pub fn context_mut(&mut self) -> &mut ExecContext {
        &mut self.ctx
    }

    /// The model this session runs.
    pub fn model(&self) -> &Arc<GraphModel> {
        &self.model
    }

    /// Dispatch decisions and op counts so far.
    pub fn context(&self) -> &ExecContext {
        &self.ctx
    }

    /// Starts (or stops) timing every node by op name; starting clears earlier times.
    pub fn set_profile(&mut self, on: bool) {
        self.profile = on.then(Vec::new);
    }

    /// Per op name: total seconds and node runs since profiling started, slowest first.
    pub fn profile(&self) -> Vec<(&'static str, f64, usize)> {
        let mut p = self.profile.clone().unwrap_or_default();
        p.sort_by(|a, b| b.1.total_cmp(&a.1));
        p
    }

    /// The trace hash chain head (hex) and the number of nodes hashed, when tracing.
    pub fn trace(&self) -> Option<(String, usize)> {
        self.trace.map(|h| {
            let hex = h.iter().map(|b| format!("{b:02x}")).collect();
            (hex, self.traced)
        })
    }

    /// [`GraphSession::forward`] with the caller's execution context (its
    /// frame allocator and dispatch log) instead of the session's own.
    pub fn forward_in(
        &mut self,
        tokens: &[u32],
        ctx: &mut ExecContext,
    ) -> Result<Vec<f32>, ExecutionError> {
        std::mem::swap(&mut self.ctx, ctx);
        let out = self.forward(tokens);
        std::mem::swap(&mut self.ctx, ctx);
        out
    }

    /// Runs `tokens` at the current position and returns the logits of the
    /// last token (the graph's first output, last row).
    pub fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, ExecutionError> {
        let s = tokens.len();
        if s == 0 {
            return Err(ExecutionError::ShapeMismatch {
                op: "graph forward (token count)".into(),
                expected: vec![1],
                got: vec![0],
            });
        }
        let pos = self.len;
        if pos + s > self.model.max_ctx {
            return Err(ExecutionError::ContextOverflow {
                max: self.model.max_ctx,
                requested: pos + s,
            });
        }
        let mut inputs = Vec::new();
        for d in &self.model.graph.input_decls {
            let t = match d.name.as_str() {
                "tokens" => Tensor::from_i32(&[s], tokens.iter().map(|&t| t as i32).collect())?,
                "pos" => {
                    let shape: Vec<usize> = d.shape.iter().map(|_| 1).collect();
                    Tensor::from_i32(&shape, vec![pos as i32])?
                }
                other => return Err(missing(other, "graph forward (tokens, pos)")),
            };
            inputs.push(t);
        }
        let outs = self.run(&inputs, s)?;
        let logits = outs
            .first()
            .ok_or_else(|| missing("logits", "graph forward"))?;
        let values = self.model.dispatcher.primary().try_download_f32(logits)?;
        let v = logits
            .shape()
            .last()
            .copied()
            .unwrap_or(values.len())
            .max(1);
        Ok(values[values.len().saturating_sub(v)..].to_vec())
    }

    /// Runs the graph on `inputs` (one tensor per input declaration) for `s`
    /// new tokens and returns its outputs; the KV cache advances by `s`.
    /// The whole run happens on the cpu worker pool ([`Dispatcher::install`]).
    pub fn run(&mut self, inputs: &[Tensor], s: usize) -> Result<Vec<Tensor>, ExecutionError> {
        let m = self.model.clone();
        m.dispatcher.install(|| self.run_on_pool(inputs, s))
    }

    fn run_on_pool(&mut self, inputs: &[Tensor], s: usize) -> Result<Vec<Tensor>, ExecutionError> {
        let m = self.model.clone();
        let g = &m.graph;
        if inputs.len() != g.inputs.len() {
            return Err(ExecutionError::ShapeMismatch {
                op: "graph inputs".into(),
                expected: vec![g.inputs.len()],
                got: vec![inputs.len()],
            });
        }
        let mut env: Vec<Option<Slot>> = (0..g.values.len()).map(|_| None).collect();
        for (&vi, t) in g.inputs.iter().zip(inputs) {
            env[vi] = Some(Slot {
                tensor: check_value(g, vi, t)?.clone(),
                rows: None,
            });
        }
        self.execute(&m, env, &vec![true; g.nodes.len()], &g.outputs, s)
    }

    /// Computes the values named `wanted` from the values `given` by name
    /// (graph inputs, or node outputs computed by an earlier call, such as an
    /// encoder's output): only the nodes those values need run. `s` is the
    /// number of new tokens the cached state advances by (0 when no
    /// `KvAppend` runs). A needed graph input that is not given is
    /// `MissingTensor`.
    pub fn run_values(
        &mut self,
        given: &[(&str, Tensor)],
        wanted: &[&str],
        s: usize,
    ) -> Result<Vec<Tensor>, ExecutionError> {
        let m = self.model.clone();
        let g = &m.graph;
        let index = |name: &str, by: &str| {
            g.values
                .iter()
                .position(|v| v.name == name)
                .ok_or_else(|| missing(name, by))
        };
        let mut env: Vec<Option<Slot>> = (0..g.values.len()).map(|_| None).collect();
        for (name, t) in given {
            let vi = index(name, "graph run_values (given)")?;
            env[vi] = Some(Slot {
                tensor: check_value(g, vi, t)?.clone(),
                rows: None,
            });
        }
        let wanted = wanted
            .iter()
            .map(|n| index(n, "graph run_values (wanted)"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut needed = vec![false; g.nodes.len()];
        let mut stack = wanted.clone();
        let mut seen = vec![false; g.values.len()];
        while let Some(vi) = stack.pop() {
            if std::mem::replace(&mut seen[vi], true) || env[vi].is_some() {
                continue;
            }
            match g.values[vi].source {
                Source::Node(ni) => {
                    needed[ni] = true;
                    stack.extend(&g.nodes[ni].inputs);
                }
                Source::Input(_) => {
                    return Err(missing(&g.values[vi].name, "graph run_values (an input)"))
                }
                Source::Weight | Source::State(_) => {}
            }
        }
        self.execute(&m, env, &needed, &wanted, s)
    }

    /// Runs the `needed` nodes over `env` and returns the values `wanted`.
    fn execute(
        &mut self,
        m: &Arc<GraphModel>,
        mut env: Vec<Option<Slot>>,
        needed: &[bool],
        wanted: &[usize],
        s: usize,
    ) -> Result<Vec<Tensor>, ExecutionError> {
        let g = &m.graph;
        let pos = self.len;
        self.ctx.begin_forward();
        for (ni, node) in g.nodes.iter().enumerate() {
            if !needed[ni] {
                continue;
            }
            let op_name = node.op.name();
            let mut ins: Vec<Tensor> = Vec::with_capacity(node.inputs.len() + 2);
            let mut rows: Vec<Option<usize>> = Vec::with_capacity(node.inputs.len());
            for &vi in &node.inputs {
                let v = &g.values[vi];
                match v.source {
                    Source::Weight => {
                        ins.push(
                            m.weights[vi]
                                .clone()
                                .ok_or_else(|| missing(&v.name, op_name))?,
                        );
                        rows.push(None);
                    }
                    Source::State(si) => {
                        let (k, val) = &self.kv[si];
                        ins.push(k.clone());
                        ins.push(val.clone());
                        rows.push(None);
                    }
                    _ => {
                        let slot = env[vi].as_ref().ok_or_else(|| missing(&v.name, op_name))?;
                        ins.push(slot.tensor.clone());
                        rows.push(slot.rows);
                    }
                }
            }
            let err = |r: String| node_err(node.id, op_name, r);
            let op = match &node.op {
                GraphOp::Fixed(Op::RandomNormalLike { mean, scale, seed }) => {
                    Op::RandomNormalLike {
                        mean: *mean,
                        scale: *scale,
                        seed: self.noise_seed.map_or(*seed, |s| mix_seed(s, *seed)),
                    }
                }
                GraphOp::Fixed(op) => op.clone(),
                GraphOp::Reshape(shape) => {
                    Op::Reshape(ops::reshape_target(shape, ins[0].numel()).ok_or_else(|| {
                        err(format!("cannot reshape {:?} to {shape:?}", ins[0].shape()))
                    })?)
                }
                GraphOp::Slice { axis, start, end } => {
                    let len = *ins[0]
                        .shape()
                        .get(*axis)
                        .ok_or_else(|| err(format!("axis {axis} out of range")))?;
                    let (start, end) = ops::slice_range(*start, *end, len);
                    Op::Slice {
                        axis: *axis,
                        start,
                        end,
                    }
                }
                GraphOp::Rope {
                    style,
                    rot_dim,
                    freqs,
                } => {
                    let p = ins[1]
                        .as_i32()
                        .and_then(|v| v.first().copied())
                        .and_then(|p| usize::try_from(p).ok())
                        .ok_or_else(|| err("pos must be one non-negative i32".into()))?;
                    let d = ins[0].shape().last().copied().unwrap_or(0);
                    let rot = rot_dim.unwrap_or(d);
                    ins.truncate(1);
                    let base = match freqs {
                        RopeFreqs::Base(b) => *b as f32,
                        RopeFreqs::List(_) => 0.0,
                    };
                    match &m.ropes[ni] {
                        Some((cos, sin)) => {
                            ins.push(cos.clone());
                            ins.push(sin.clone());
                        }
                        None if matches!(freqs, RopeFreqs::List(_)) => {
                            return Err(err("explicit inv_freq needs a static head dim".into()))
                        }
                        None => {}
                    }
                    Op::Rope {
                        style: *style,
                        rot_dim: rot,
                        pos: p,
                        base,
                    }
                }
                GraphOp::Sdpa { scale, mask } => {
                    let kv_len = rows[1].unwrap_or(ins[1].shape()[0]);
                    let sq = ins[0].shape().first().copied().unwrap_or(0);
                    let keep = if *mask == MaskKind::Padding {
                        let m = ins.pop().ok_or_else(|| err("no mask input".into()))?;
                        let values = m
                            .as_i32()
                            .ok_or_else(|| err("the mask input must be host i32".into()))?;
                        ops::padding_keep(values, kv_len).map_err(&err)?
                    } else {
                        Vec::new()
                    };
                    Op::Sdpa {
                        scale: *scale,
                        mask: ops::backend_mask(*mask, keep),
                        q_pos: kv_len
                            .checked_sub(sq)
                            .ok_or_else(|| err(format!("{sq} queries but {kv_len} keys")))?,
                        kv_len: Some(kv_len),
                    }
                }
                GraphOp::KvAppend => Op::KvAppend { pos },
                run_time => {
                    let (op, keep) = super::bind::bind(run_time, &ins).map_err(&err)?;
                    ins.truncate(keep);
                    op
                }
            };
            let started = self.profile.is_some().then(std::time::Instant::now);
            let outs = self
                .dispatch(m, ni, &op, &ins)
                .map_err(|e| at_node(e, &m.labels[ni], op_name))?;
            if let (Some(p), Some(t)) = (self.profile.as_mut(), started) {
                let secs = t.elapsed().as_secs_f64();
                match p.iter_mut().find(|e| e.0 == op.name()) {
                    Some(e) => {
                        e.1 += secs;
                        e.2 += 1;
                    }
                    None => p.push((op.name(), secs, 1)),
                }
            }
            if let Some(t) = outs.first() {
                super::bind::check_dims(&node.op, t.shape()).map_err(&err)?;
            }
            if outs.len() != node.outputs.len() {
                return Err(err(format!(
                    "backend returned {} outputs, expected {}",
                    outs.len(),
                    node.outputs.len()
                )));
            }
            let out_rows = match node.op {
                GraphOp::KvAppend => {
                    let added = ins[2].shape().first().copied().unwrap_or(0);
                    if added != s {
                        return Err(err(format!("{added} new rows, the forward has {s} tokens")));
                    }
                    Some(pos + added)
                }
                _ => None,
            };
            if let Some(h) = self.trace.as_mut() {
                *h = trace_step(h, m, &node.op, &op, &outs, out_rows)?;
                self.traced += 1;
            }
            for (&vi, t) in node.outputs.iter().zip(outs) {
                env[vi] = Some(Slot {
                    tensor: t,
                    rows: out_rows,
                });
            }
            for &vi in node.inputs.iter().chain(&node.outputs) {
                if m.last_use[vi] == ni && !wanted.contains(&vi) {
                    env[vi] = None;
                }
            }
        }
        self.len = pos + s;
        wanted
            .iter()
            .map(|&o| {
                env[o]
                    .take()
                    .map(|slot| slot.tensor)
                    .ok_or_else(|| missing(&g.values[o].name, "graph outputs"))
            })
            .collect()
    }

    fn dispatch(
        &mut self,
        m: &GraphModel,
        ni: usize,
        op: &Op,
        ins: &[Tensor],
    ) -> Result<Vec<Tensor>, ExecutionError> {
        let node = &m.graph.nodes[ni];
        self.ctx.set_label(&m.labels[ni]);
        if let Some(b) = node.backend_hint.as_deref().and_then(|h| m.hints.get(h)) {
            let infos: Vec<TensorInfo> = ins.iter().map(|t| t.info().clone()).collect();
            if b.supports(op, &infos) {
                self.ctx.log.record(DispatchRecord {
                    label: m.labels[ni].clone(),
                    op: op.name(),
                    backend: b.name().to_string(),
                    fallback: None,
                });
                return b.execute(op, ins, &mut self.ctx);
            }
        }
        m.dispatcher.run(op, ins, &mut self.ctx)
    }
}

/// A backend's shape or op error with the node (id, first output) and graph op named.
fn at_node(e: ExecutionError, label: &str, op: &str) -> ExecutionError {
    match e {
        ExecutionError::ShapeMismatch {
            op: inner,
            expected,
            got,
        } => ExecutionError::ShapeMismatch {
            op: format!("graph {label} {op}: {inner}"),
            expected,
            got,
        },
        ExecutionError::UnsupportedOp {
            op: inner,
            backend,
            input_dtype,
        } => ExecutionError::UnsupportedOp {
            op: format!("graph {label} {op}: {inner}"),
            backend,
            input_dtype,
        },
        other => other,
    }
}

/// `t` when it fits value `vi`'s dtype and shape (dynamic dims match anything).
fn check_value<'t>(g: &Graph, vi: usize, t: &'t Tensor) -> Result<&'t Tensor, ExecutionError> {
    let v = &g.values[vi];
    let fits = t.dtype() == v.dtype
        && t.shape().len() == v.shape.len()
        && v.shape
            .iter()
            .zip(t.shape())
            .all(|(d, &n)| d.is_none_or(|d| d == n));
    if !fits {
        return Err(ExecutionError::ShapeMismatch {
            op: format!("graph value `{}` ({})", v.name, v.dtype),
            expected: crate::ir::dims_text(&v.shape)
                .iter()
                .map(|&x| x.max(0) as usize)
                .collect(),
            got: t.shape().to_vec(),
        });
    }
    Ok(t)
}

/// One link of the trace chain.
fn trace_step(
    prev: &[u8; 32],
    m: &GraphModel,
    gop: &GraphOp,
    op: &Op,
    outs: &[Tensor],
    rows: Option<usize>,
) -> Result<[u8; 32], ExecutionError> {
    let mut h = Sha256::new();
    h.update(prev);
    h.update(gop.tag().to_le_bytes());
    let attrs = format!("{op:?}");
    h.update((attrs.len() as u64).to_le_bytes());
    h.update(attrs.as_bytes());
    for t in outs {
        let values = match t.as_i32() {
            Some(ids) => ids.iter().map(|&i| i as f32).collect(),
            None => m.dispatcher.primary().try_download_f32(t)?,
        };
        let n = match (rows, t.shape()) {
            (Some(r), [_, rest @ ..]) => r * rest.iter().product::<usize>(),
            _ => values.len(),
        };
        h.update((n as u64).to_le_bytes());
        let bytes: Vec<u8> = values[..n.min(values.len())]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        h.update(&bytes);
    }
    Ok(h.finalize().into())
}

/// One conversation of a text decoder, as a generation loop drives it: run
/// tokens at the current position and get the last token's logits. The
/// graph path implements it with [`GraphSession`]; a generator written
/// against it runs on either path.
pub trait TextForward {
    /// Runs `ids` at the current position; the logits of the last one.
    fn forward_last(&mut self, ids: &[u32]) -> Result<Vec<f32>, ExecutionError>;
    /// Tokens in the cache.
    fn position(&self) -> usize;
    /// Cache capacity in tokens.
    fn capacity(&self) -> usize;
    /// Keeps the first `len` tokens.
    fn truncate(&mut self, len: usize);
}

impl TextForward for GraphSession {
    fn forward_last(&mut self, ids: &[u32]) -> Result<Vec<f32>, ExecutionError> {
        self.forward(ids)
    }

    fn position(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.model.max_ctx
    }

    fn truncate(&mut self, len: usize) {
        GraphSession::truncate(self, len);
    }
}

/// The generator seed of a `RandomNormalLike` op under the session seed `session`:
/// the session seed spread by the golden-ratio multiplier, xored with the op's own.
fn mix_seed(session: u64, op: u64) -> u64 {
    session.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ op
}
