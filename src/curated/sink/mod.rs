//! The builder interface a family's forward is written against, once, and its
//! two sinks (the llama.cpp way: one graph builder per architecture, run by
//! every backend):
//!
//! - [`EagerSink`]: dispatches each op at once on a
//!   [`Dispatcher`](crate::backend::Dispatcher), with the hand fusions
//!   (`FusedQkv`, `FusedSkipNorm`, `FusedRopeAppend`, `FusedSwiGlu`): the
//!   curated path's speed.
//! - [`RecordingSink`]: appends each op to a [`GraphDoc`](crate::ir::GraphDoc)
//!   in unfused primitive ops (the fusion pass fuses at load for the chosen
//!   backend): the `graph` section an importer writes.
//!
//! A family binds its weights through a [`WeightSource`] (the file's tensors for
//! the eager sink, their names for the recording sink) and runs its forward
//! against a [`Sink`]; the hand fusions are the sink's helper methods, so the
//! family code never says which sink it runs on.

pub(crate) mod eager;
pub(crate) mod record;

pub(crate) use eager::EagerSink;
pub(crate) use record::RecordingSink;

use super::llama::LogitRows;
use super::WeightBinder;
use crate::backend::{Op, RopeStyle, Tensor};
use crate::error::ExecutionError;
use std::fmt;

/// The name of a value in a recorded graph: `l{layer}.{part}` or `{part}`
/// (made unique there with a counter); the eager sink ignores it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Label {
    layer: Option<usize>,
    part: &'static str,
}

impl Label {
    /// A value of layer `layer`: `l{layer}.{part}`.
    pub(crate) fn layer(layer: usize, part: &'static str) -> Label {
        Label {
            layer: Some(layer),
            part,
        }
    }

    /// A value outside the layers: `{part}`.
    pub(crate) fn top(part: &'static str) -> Label {
        Label { layer: None, part }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.layer {
            Some(i) => write!(f, "l{i}.{}", self.part),
            None => f.write_str(self.part),
        }
    }
}

/// The residual stream `h + pending`: the pending addend is added where the
/// stream is next normalized (one `FusedSkipNorm` on the eager sink).
pub(crate) struct Residual<V> {
    /// The stream so far.
    pub h: V,
    /// An addend not yet added to `h`.
    pub pending: Option<V>,
}

/// The rotary embedding of a cached attention: pairing, rotated dims and which
/// of the sink's rotation tables (`0` global, `1` local/sliding).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RopeSpec {
    /// Pairing of rotated dims.
    pub style: RopeStyle,
    /// Rotated dims of each head.
    pub rot_dim: usize,
    /// Index of the sink's rotation table.
    pub table: usize,
}

/// A causal attention over the conversation's KV cache.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CachedAttention {
    /// The cache's layer.
    pub layer: usize,
    /// Score scale; none = `1/sqrt(d)`.
    pub scale: Option<f32>,
    /// A sliding window of this many keys, else causal over all.
    pub window: Option<usize>,
    /// Key/value heads and their width (the cache's row shape).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
}

/// The q, k, v projections of a decoder layer: `x W^T` with each weight, plus
/// its bias where there are biases, viewed as `[-1, heads[j], head_dim]`.
pub(crate) struct QkvProjections<'w, V> {
    /// The q, k, v weights.
    pub w: [&'w V; 3],
    /// Their biases (all three or none).
    pub bias: Option<[&'w V; 3]>,
    /// Heads of q, k and v.
    pub heads: [usize; 3],
    /// Width of one head.
    pub head_dim: usize,
    /// The layer (names in a recorded graph).
    pub layer: usize,
}

/// Where a family's weights come from: `V` is the sink's value type.
pub(crate) trait WeightSource {
    /// A bound weight.
    type V: Clone;
    /// Tensor `name` (decoded to f32 once when `decode`: norm gains and
    /// biases), `None` when the model has none.
    fn get(&self, name: &str, decode: bool) -> Result<Option<Self::V>, ExecutionError>;
    /// Like [`get`](Self::get), but a missing tensor is `MissingTensor`.
    fn need(&self, name: &str, decode: bool) -> Result<Self::V, ExecutionError>;
    /// Tensor `name` as stored, viewed as the matrix `[shape[0], rest]` where
    /// the sink multiplies it as one (a convolution kernel against im2col rows).
    fn need_matrix(&self, name: &str) -> Result<Self::V, ExecutionError>;
}

impl WeightSource for WeightBinder {
    type V = Tensor;
    fn get(&self, name: &str, decode: bool) -> Result<Option<Tensor>, ExecutionError> {
        WeightBinder::get(self, name, decode)
    }
    fn need(&self, name: &str, decode: bool) -> Result<Tensor, ExecutionError> {
        WeightBinder::need(self, name, decode)
    }
    fn need_matrix(&self, name: &str) -> Result<Tensor, ExecutionError> {
        WeightBinder::need_matrix(self, name)
    }
}

/// The weights of a graph being recorded: each is its tensor's name, present
/// when `has` says the file holds it.
pub(crate) struct GraphWeights<'a> {
    /// Whether the file holds a tensor of this name.
    pub has: &'a dyn Fn(&str) -> bool,
    /// The family, named in missing-tensor errors.
    pub family: &'static str,
}

impl WeightSource for GraphWeights<'_> {
    type V = String;
    fn get(&self, name: &str, _decode: bool) -> Result<Option<String>, ExecutionError> {
        Ok((self.has)(name).then(|| name.to_string()))
    }
    fn need(&self, name: &str, decode: bool) -> Result<String, ExecutionError> {
        self.get(name, decode)?
            .ok_or_else(|| ExecutionError::MissingTensor {
                name: name.to_string(),
                required_by: self.family.into(),
            })
    }
    fn need_matrix(&self, name: &str) -> Result<String, ExecutionError> {
        self.need(name, false)
    }
}

/// The builder interface: each method emits one op (or one hand fusion) and
/// returns its value. Results are the same on both sinks (the recorded graph
/// computes what the eager sink dispatches, up to the fusion pass).
pub(crate) trait Sink {
    /// A value: a tensor (eager) or a graph value name (recording).
    type V: Clone;

    /// Names the model part the next ops belong to (the profile's label).
    fn section(&mut self, label: fmt::Arguments<'_>);

    /// `op(inputs)`, one output.
    fn op(&mut self, op: Op, inputs: &[&Self::V], label: Label) -> Result<Self::V, ExecutionError>;

    /// `op(inputs)` as the graph output (or named value) `name`.
    fn output(
        &mut self,
        op: Op,
        inputs: &[&Self::V],
        name: &str,
    ) -> Result<Self::V, ExecutionError>;

    /// `x` viewed as `[-1, dims...]` (the row count from the element count).
    fn rows_of(
        &mut self,
        x: Self::V,
        dims: &[usize],
        label: Label,
    ) -> Result<Self::V, ExecutionError>;

    /// The stream normalized by `norm` (an `RmsNorm`) with gain `g`, after the
    /// pending addend is added to it.
    fn residual_norm(
        &mut self,
        r: &mut Residual<Self::V>,
        norm: &Op,
        g: &Self::V,
        label: Label,
    ) -> Result<Self::V, ExecutionError>;

    /// Keeps the stream's rows that [`LogitRows`] asks for (with the pending
    /// addend): the last row only, on the recording sink.
    fn select_rows(
        &mut self,
        r: &mut Residual<Self::V>,
        rows: LogitRows,
    ) -> Result<(), ExecutionError>;

    /// The q, k, v projections of `x` ([`QkvProjections`]).
    fn qkv(
        &mut self,
        x: &Self::V,
        p: QkvProjections<'_, Self::V>,
    ) -> Result<[Self::V; 3], ExecutionError>;

    /// Rotates q and k (`rope`, where given), appends k and v to the layer's KV
    /// cache and returns the attention of q over the cache `[-1, heads, head_dim]`.
    /// On several sequences' caches (the eager sink of a beam search) the rows
    /// are split evenly between them, each attending over its own cache.
    fn cached_attention(
        &mut self,
        qkv: [Self::V; 3],
        rope: Option<RopeSpec>,
        attn: CachedAttention,
    ) -> Result<Self::V, ExecutionError>;

    /// Attention without a mask, `softmax(q k^T / sqrt(head_dim)) v` per head,
    /// of q `[Sq, H, dh]` over k, v `[Skv, H, dh]`.
    fn attention(&mut self, qkv: [&Self::V; 3], label: Label) -> Result<Self::V, ExecutionError>;

    /// The gated MLP's hidden `act(x gate^T) * (x up^T)` with `gate_up =
    /// (gate, up)` (`act`: `Silu`, `Gelu` or `GeluTanh`).
    fn gated_mlp(
        &mut self,
        x: &Self::V,
        gate_up: [&Self::V; 2],
        act: Op,
        layer: usize,
    ) -> Result<Self::V, ExecutionError>;

    /// `act(x W^T + b)`, the bias `b` and the activation `act` (an element-wise
    /// op) where given.
    fn linear(
        &mut self,
        x: &Self::V,
        w: &Self::V,
        b: Option<&Self::V>,
        act: Option<Op>,
        label: Label,
    ) -> Result<Self::V, ExecutionError>;

    /// The post-norm end of an encoder sub-block:
    /// `LayerNorm(h + (x W^T + b); gain, bias)` with `lin = (W, b)` and
    /// `norm = (gain, bias)`.
    fn linear_add_norm(
        &mut self,
        x: &Self::V,
        lin: [&Self::V; 2],
        h: Self::V,
        norm: [&Self::V; 2],
        eps: f32,
        label: Label,
    ) -> Result<Self::V, ExecutionError>;

    /// The encoder's self-attention over a padded batch: the q/k/v linear
    /// layers `lin[j] = (W, b)` of `x`, split into `heads` of `head_dim`, each
    /// query attending to the real (non-padding) keys of its own sequence;
    /// returns `[-1, heads * head_dim]`.
    fn padded_self_attention(
        &mut self,
        x: &Self::V,
        lin: [[&Self::V; 2]; 3],
        heads: usize,
        head_dim: usize,
        layer: usize,
    ) -> Result<Self::V, ExecutionError>;

    /// The position table that the forward's position ids index: `table`
    /// itself where the ids carry the `offset` (eager), else its rows from
    /// `offset` on.
    fn position_table(&mut self, table: &Self::V, offset: usize)
        -> Result<Self::V, ExecutionError>;

    /// `x` viewed as `[-1, dims...]`, as the graph value (output or input of a
    /// later run) `name`.
    fn named_rows_of(
        &mut self,
        x: Self::V,
        dims: &[usize],
        name: &str,
    ) -> Result<Self::V, ExecutionError>;

    /// The rows `rows` of `x` `[S, d]`, in that order (a recorded graph keeps
    /// every row: its caller picks them from the output).
    fn gather_rows(&mut self, x: &Self::V, rows: &[usize]) -> Result<Self::V, ExecutionError>;

    /// The audio stem of an encoder, rows `[T/2, C]` of
    /// `Gelu(Conv1d(Gelu(Conv1d(mel; W1, b1, k3 s1 p1)); W2, b2, k3 s2 p1))`
    /// transposed, for `mel` `[n_mels, T]` and `convs[j] = (W, b)`, each `W`
    /// a `[C, Cin, 3]` kernel bound with [`WeightSource::need_matrix`].
    fn audio_conv_stem(
        &mut self,
        mel: &Self::V,
        convs: [[&Self::V; 2]; 2],
    ) -> Result<Self::V, ExecutionError>;

    /// Starts a new allocator frame for a layer whose shapes repeat the last
    /// one's (values from before stay valid).
    fn reuse_buffers(&mut self);
}
