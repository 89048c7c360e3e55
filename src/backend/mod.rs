//! The `Backend` trait of the execution contract, the dispatcher, and the backends.
//!
//! # How model code runs ops
//!
//! A family (or the graph executor) holds a [`Dispatcher`] and one
//! [`ExecContext`] per running forward, and calls [`Dispatcher::run`] with an
//! [`Op`] and its input [`Tensor`]s:
//!
//! ```no_run
//! use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher, ExecContext, Op, Tensor};
//! # fn demo(x: &Tensor, norm_w: &Tensor, wq: &Tensor) -> Result<(), cyb_llm::ExecutionError> {
//! let dispatcher = Dispatcher::new(BackendChoice::Auto, &BackendConfig::default())?;
//! let mut ctx = ExecContext::new(dispatcher.threads());
//! ctx.begin_forward(); // at the start of every forward: recycles last forward's buffers
//! ctx.set_label("layer 0 attention"); // optional, shows up in dispatch records
//! let h = dispatcher.run1(&Op::RmsNorm { eps: 1e-6, add_one: false }, &[x.clone(), norm_w.clone()], &mut ctx)?;
//! let q = dispatcher.run1(&Op::Matmul, &[h, wq.clone()], &mut ctx)?;
//! # let _ = q; Ok(()) }
//! ```
//!
//! - Weights are [`Tensor::from_bytes`] over a [`SharedBytes`] range of the
//!   model's mmap: no copy, any encoding of quant.md; `Matmul` and `Embed`
//!   read them directly.
//! - Activations are host f32 tensors ([`Tensor::from_f32`], or op outputs
//!   from the context's [`FrameAllocator`]); cloning one is cheap (shared).
//! - The KV cache is per conversation: two [`Tensor::state_zeros`]
//!   `[max_ctx, Hkv, d]` buffers per layer. `KvAppend { pos }` writes the new
//!   rows in place (past `max_ctx` is `ContextOverflow`), then
//!   `Sdpa { q_pos: pos, kv_len: Some(pos + s), mask: Mask::Causal, .. }` reads
//!   rows `0..pos + s` of the same buffers.
//! - RoPE: build the cos/sin cache once with [`rope_cache`] and pass it as the
//!   2nd and 3rd inputs of `Rope { pos, .. }`.
//! - Every decision is recorded in [`ExecContext::log`]: which backend ran each
//!   op and why it fell back; [`DispatchLog::summary`] counts ops per backend.
//! - Run each forward (or a whole generation) inside
//!   [`Dispatcher::install`]: the cpu ops then run on the worker pool without
//!   a thread hand-off per op (about a quarter of a small model's decode step).
//! - Ops validate their inputs ([`Op::infer`]); bad shapes, ids or context
//!   overflow come back as [`ExecutionError`] values, never panics.
//!
//! # Adding a backend
//!
//! Implement [`Backend`] and add one [`BackendEntry`] line to [`BACKENDS`],
//! declaring its [`Capabilities`] there: the rest of the crate asks those
//! (deterministic, graph only, widened f32 weights), never the backend's name.

pub mod alloc;
pub mod cpu;
pub mod dispatch;
pub mod honeycrisp;
mod index_shapes;
pub mod nox;
pub mod op;
pub mod tensor;
pub mod wgpu;

pub use alloc::{BufferUsage, FrameAllocator};
pub use dispatch::{
    BackendChoice, BackendConfig, BackendEntry, Capabilities, DispatchLog, DispatchRecord,
    Dispatcher, BACKENDS,
};
pub use op::{
    broadcast_shape, rope_cache, rope_inv_freq, CmpOp, IntOp, LstmSpec, Mask, Op, ReduceKind,
    RnnDirection, RopeStyle, SampleParams,
};
pub use tensor::{DeviceBuffer, SharedBytes, Storage, Tensor, TensorInfo};

use crate::dtype::DType;
use crate::error::ExecutionError;

/// The contract's name for the errors backends return.
pub type BackendError = ExecutionError;

/// A device (or library) that executes ops. See the execution contract.
pub trait Backend: Send + Sync {
    /// Backend identity for logging and dispatch records.
    fn name(&self) -> &str;

    /// What this backend guarantees or prefers: its [`BACKENDS`] row's.
    fn capabilities(&self) -> Capabilities {
        Capabilities::of(self.name())
    }

    /// Return true if this backend implements the op for the given
    /// input dtypes/shapes. If not, caller falls back to CPU reference.
    fn supports(&self, op: &Op, inputs: &[TensorInfo]) -> bool;

    /// Execute one op. Inputs are already on the backend's memory
    /// (or shared via zero-copy for honeycrisp). Output may allocate
    /// or reuse from the frame allocator.
    fn execute(
        &self,
        op: &Op,
        inputs: &[Tensor],
        ctx: &mut ExecContext,
    ) -> Result<Vec<Tensor>, BackendError>;

    /// Allocate a tensor on this backend's memory.
    fn alloc(&self, shape: &[usize], dtype: DType) -> Result<Tensor, BackendError>;

    /// Upload f32/quantized bytes from host memory.
    fn upload(&self, data: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor, BackendError>;

    /// Returns once every op executed so far has finished. A backend that
    /// queues work (a GPU) waits for its queue here; one that runs each op
    /// before `execute` returns has nothing to wait for.
    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }

    /// The greedy pick over the last row of `logits` (argmax, ties to the
    /// lowest id, as [`Op::Sample`] at temperature 0) left on the device: the
    /// id as a `[1]` i32 tensor this backend's Embed reads, and its read-back,
    /// which waits only for the work queued up to the pick. A generator can
    /// so queue the next token's forward before it knows the token. `None`
    /// where the backend has no such path (the caller runs `Op::Sample`).
    fn argmax_on_device(
        &self,
        _logits: &Tensor,
    ) -> Option<Result<(Tensor, PendingId), BackendError>> {
        None
    }

    /// Download to host memory for inspection. A tensor the backend cannot
    /// read gives a vector whose length differs from its element count; use
    /// [`Backend::try_download_f32`] for an error instead.
    fn download_f32(&self, t: &Tensor) -> Vec<f32>;

    /// [`Backend::download_f32`] with a structured error when it fails.
    fn try_download_f32(&self, t: &Tensor) -> Result<Vec<f32>, BackendError> {
        let values = self.download_f32(t);
        if values.len() == t.numel() {
            Ok(values)
        } else {
            Err(ExecutionError::UnsupportedOp {
                op: "download".into(),
                backend: self.name().to_string(),
                input_dtype: t.dtype(),
            })
        }
    }
}

/// A token id a backend is still computing ([`Backend::argmax_on_device`]).
pub struct PendingId(Box<dyn FnOnce() -> Result<i32, BackendError> + Send>);

impl PendingId {
    /// A read-back that `wait` runs.
    pub fn new(wait: impl FnOnce() -> Result<i32, BackendError> + Send + 'static) -> PendingId {
        PendingId(Box::new(wait))
    }

    /// Blocks until the device has computed the id, and returns it.
    pub fn wait(self) -> Result<i32, BackendError> {
        (self.0)()
    }
}

/// Per-forward state handed to backends: thread count, frame allocator,
/// dispatch log, and the label of the model part being run.
pub struct ExecContext {
    /// Threads backends may use.
    pub threads: usize,
    /// Pool for host activations.
    pub alloc: FrameAllocator,
    /// Dispatch decisions and per-backend op counts.
    pub log: DispatchLog,
    label: String,
}

impl ExecContext {
    /// A context for `threads` threads, with an empty pool and log.
    pub fn new(threads: usize) -> Self {
        ExecContext {
            threads: threads.max(1),
            alloc: FrameAllocator::new(),
            log: DispatchLog::default(),
            label: String::new(),
        }
    }

    /// Call at the start of each forward: last forward's released buffers
    /// become reusable and the per-forward decision list starts over.
    pub fn begin_forward(&mut self) {
        self.alloc.reset();
        self.log.begin_forward();
    }

    /// Names the model part the next ops belong to (e.g. `layer 5 attention`).
    pub fn set_label(&mut self, label: &str) {
        self.label.clear();
        self.label.push_str(label);
    }

    /// [`set_label`](Self::set_label) from format arguments, without a
    /// temporary string.
    pub fn set_label_args(&mut self, label: std::fmt::Arguments<'_>) {
        use std::fmt::Write;
        self.label.clear();
        // Writing into a String cannot fail.
        let _ = self.label.write_fmt(label);
    }

    /// The current label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// A host f32 tensor of `shape` from the frame allocator, filled by `fill`
    /// (which sees zeros when `zeroed`, stale values otherwise).
    pub fn tensor_with(
        &mut self,
        shape: &[usize],
        zeroed: bool,
        fill: impl FnOnce(&mut [f32]) -> Result<(), ExecutionError>,
    ) -> Result<Tensor, ExecutionError> {
        let n = shape.iter().product();
        let mut buf = self.alloc.alloc(n, BufferUsage::Storage, zeroed);
        fill(buf.as_mut_slice())?;
        Tensor::from_host(shape, buf.finish())
    }
}
