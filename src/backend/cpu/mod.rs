//! The `cpu` backend: fast multi-threaded ops (rayon, SIMD with runtime
//! detection) for the hot paths, the reference loops for the rest, so it
//! supports every op. Its activations come from the context's frame allocator.

pub mod fast;
mod hot;
pub mod kernels;
pub mod reference;
pub mod simd;

use super::{Backend, BackendConfig, ExecContext, Op, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use hot::install_hot;

/// The `cpu` backend, running on the shared worker pool of its thread count.
pub struct CpuBackend {
    pool: Arc<rayon::ThreadPool>,
    threads: usize,
}

impl CpuBackend {
    /// A backend running on `threads` worker threads.
    pub fn new(threads: usize) -> Result<CpuBackend, ExecutionError> {
        let threads = threads.max(1);
        Ok(CpuBackend {
            pool: worker_pool(threads)?,
            threads,
        })
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }
}

/// The process-wide rayon pool of `threads` workers, made on first use and
/// shared by every cpu backend of that size and by
/// [`Dispatcher::install`](crate::backend::Dispatcher::install).
pub fn worker_pool(threads: usize) -> Result<Arc<rayon::ThreadPool>, ExecutionError> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let threads = threads.max(1);
    let mut pools = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(p) = pools.get(&threads) {
        return Ok(p.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("cyb-cpu-{i}"))
        .build()
        .map_err(|e| ExecutionError::BackendInit {
            backend: "cpu".into(),
            reason: format!("cannot start {threads} threads: {e}"),
        })?;
    let pool = Arc::new(pool);
    pools.insert(threads, pool.clone());
    Ok(pool)
}

/// Starts the cpu backend with `config.threads` threads.
pub fn init(config: &BackendConfig) -> Result<Arc<dyn Backend>, ExecutionError> {
    Ok(Arc::new(CpuBackend::new(config.threads)?))
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn supports(&self, _op: &Op, _inputs: &[TensorInfo]) -> bool {
        true
    }

    fn execute(
        &self,
        op: &Op,
        inputs: &[Tensor],
        ctx: &mut ExecContext,
    ) -> Result<Vec<Tensor>, ExecutionError> {
        fast::execute(&self.pool, op, inputs, ctx)
    }

    fn alloc(&self, shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        host_alloc(self.name(), shape, dtype)
    }

    fn upload(&self, data: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        host_upload(data, shape, dtype)
    }

    fn download_f32(&self, t: &Tensor) -> Vec<f32> {
        t.read_f32("download")
            .map_or_else(|_| Vec::new(), |v| v.to_vec())
    }
}

/// Host backends allocate zeroed mutable f32 state (KV caches) or i32 buffers.
pub(crate) fn host_alloc(
    backend: &str,
    shape: &[usize],
    dtype: DType,
) -> Result<Tensor, ExecutionError> {
    match dtype {
        DType::F32 => Ok(Tensor::state_zeros(shape)),
        DType::I32 => Tensor::from_i32(shape, vec![0; shape.iter().product()]),
        other => Err(ExecutionError::UnsupportedOp {
            op: "alloc".into(),
            backend: backend.to_string(),
            input_dtype: other,
        }),
    }
}

/// Host backends keep uploaded bytes as an encoded tensor (f32 is decoded to host f32).
pub(crate) fn host_upload(
    data: &[u8],
    shape: &[usize],
    dtype: DType,
) -> Result<Tensor, ExecutionError> {
    let bytes = super::SharedBytes::from_vec(data.to_vec());
    let t = Tensor::from_bytes(shape, dtype, bytes, None)?;
    if dtype == DType::F32 {
        let values = t.read_f32("upload")?.to_vec();
        return Tensor::from_f32(shape, values);
    }
    Ok(t)
}
