//! The `wgpu` backend (`wgpu+rs`): WGSL kernels from the top-level `shaders/`
//! folder on a Vulkan, Metal or DX12 adapter (never a GL fallback).
//!
//! - Weights stay in their GGUF block layouts on the GPU and are decoded inside
//!   the matmul and embedding kernels; each weight is uploaded once (keyed by
//!   the identity of its bytes) and freed when the model drops it. A weight
//!   larger than one storage binding is split into row chunks.
//! - Activations and KV caches ([`Backend::alloc`]) live on the GPU; op outputs
//!   come from the [`alloc::GpuFrameAllocator`].
//! - Ops are recorded into a command encoder that is submitted without
//!   waiting at the first op boundary after 32 dispatches (the GPU runs the
//!   first layers while the host records the rest) and when the host needs a
//!   value back (the sampled token, or logits for the CPU sampler).
//! - A model is warmed up at load ([`crate::backend::Capabilities::warm_up_at_load`]):
//!   weights are uploaded and kernels built before the first request.
//! - [`Backend::supports`] is exact per op and dtype; everything else falls
//!   back to the CPU through the dispatcher, which records it.

pub mod alloc;
mod gpu;
mod image;
mod layout;
mod ops;
mod products;
mod quiet;
mod reduce;

use super::{Backend, BackendConfig, ExecContext, Op, PendingId, Storage, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;
use alloc::GpuBuf;
use gpu::Gpu;
use std::sync::Arc;

/// The backend: one device and its caches.
pub struct WgpuBackend {
    gpu: Gpu,
}

/// What `cyb-llm backends` prints about the adapter.
#[derive(Debug, Clone)]
pub struct AdapterReport {
    /// Adapter name (e.g. `NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// Discrete / integrated / virtual GPU, or CPU (software).
    pub device_type: String,
    /// Graphics API (Vulkan, Metal, Dx12).
    pub api: String,
    /// Driver name and version.
    pub driver: String,
    /// Limits the device was created with (raised to the adapter's).
    pub limits: Vec<(&'static str, u64)>,
    /// Optional features the adapter has that matter here, and whether the
    /// kernels use them (TIMESTAMP_QUERY: only when profiling, `CYB_WGPU_PROFILE=1`).
    pub features: Vec<(&'static str, bool, bool)>,
}

fn init_error(reason: String) -> ExecutionError {
    ExecutionError::BackendInit {
        backend: "wgpu".into(),
        reason,
    }
}

/// Workgroup memory of shaders/mm_coop.wgsl, the matrix-unit kernel that takes
/// the most (attention_coop.wgsl: 31488 bytes).
const COOP_SHARED_BYTES: u32 = 36864;
/// Threads per workgroup of shaders/mm_coop.wgsl, the matrix-unit kernel with
/// the most.
const COOP_THREADS: u32 = 512;

/// Whether the prefill products and prompt attention can run on the matrix
/// units (shaders/mm_coop.wgsl, shaders/attention_coop.wgsl):
/// the adapter has cooperative matrices of 16x16x16 with f16 operands and f32
/// sums, f16 in shaders, and subgroups of exactly 32 threads (the kernels map
/// threads to subgroups by index) and the workgroup memory of the largest
/// such kernel ([`COOP_SHARED_BYTES`], [`COOP_THREADS`]); `allowed` or `CYB_WGPU_COOP=0` can turn it off.
fn coop_matmul_fits(
    adapter: &wgpu::Adapter,
    info: &wgpu::AdapterInfo,
    allowed: wgpu::Features,
) -> bool {
    use wgpu::CooperativeScalarType::{F16, F32};
    let needed = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
        | wgpu::Features::SHADER_F16
        | wgpu::Features::SUBGROUP;
    adapter.features().contains(needed)
        && allowed.contains(needed)
        && std::env::var("CYB_WGPU_COOP").map_or(true, |v| v != "0")
        && adapter.limits().max_compute_workgroup_storage_size >= COOP_SHARED_BYTES
        && adapter.limits().max_compute_invocations_per_workgroup >= COOP_THREADS
        && info.subgroup_min_size == 32
        && info.subgroup_max_size == 32
        && adapter
            .cooperative_matrix_properties()
            .iter()
            .any(|c| (c.m_size, c.n_size, c.k_size, c.ab_type, c.cr_type) == (16, 16, 16, F16, F32))
}

impl WgpuBackend {
    /// Creates the device on the best Vulkan/Metal/DX12 adapter.
    pub fn new() -> Result<WgpuBackend, ExecutionError> {
        Self::with_features(wgpu::Features::all())
    }

    /// [`WgpuBackend::new`] without the log line (for the quiet `auto` probe).
    fn open() -> Result<WgpuBackend, ExecutionError> {
        Self::open_with(wgpu::Features::all())
    }

    /// [`WgpuBackend::new`] with the SUBGROUP feature left off even when the
    /// adapter has it, so the kernels take their workgroup-memory paths.
    pub fn without_subgroups() -> Result<WgpuBackend, ExecutionError> {
        Self::with_features(wgpu::Features::all() - wgpu::Features::SUBGROUP)
    }

    /// [`WgpuBackend::new`] with every product's activations in f32, also
    /// where the decode matvec would take them as 8-bit blocks: the parity
    /// path against the `reference` backend (as `CYB_WGPU_ACTIVATIONS=f32`).
    pub fn with_f32_activations() -> Result<WgpuBackend, ExecutionError> {
        let mut b = Self::new()?;
        b.gpu.use_f32_activations();
        Ok(b)
    }

    /// Whether a product of one input row with a weight of `dtype` runs on
    /// 8-bit activations (the row quantized per 32 values, integer dot
    /// products; the default for q4_0, q4_1, q5_0, q5_1, q8_0, q4_k and q6_k).
    pub fn int8_matvec(&self, dtype: DType) -> bool {
        self.gpu.int8_matvec(dtype)
    }

    /// Whether `op` on inputs of these shapes is an attention (Sdpa) that runs
    /// on the matrix units (shaders/attention_coop.wgsl: see
    /// [`WgpuBackend::matrix_units`]).
    pub fn attention_on_matrix_units(&self, op: &Op, inputs: &[TensorInfo]) -> bool {
        ops::sdpa_kernel(&self.gpu, op, inputs) == Some(ops::AttentionKernel::PromptOnMatrixUnits)
    }

    /// Whether a product of `rows` input rows with a weight of `dtype` runs on
    /// 8-bit activations: [`WgpuBackend::int8_matvec`] encodings, up to 8 rows
    /// (one row: the decode matvec; 2 to 8: shaders/matvec_q8_cols.wgsl).
    pub fn int8_product(&self, dtype: DType, rows: usize) -> bool {
        self.gpu.int8_product(dtype, rows)
    }

    /// Creates the device enabling the optional features this backend uses
    /// (SHADER_F16, SUBGROUP, TIMESTAMP_QUERY) that are in `allowed`.
    fn with_features(allowed: wgpu::Features) -> Result<WgpuBackend, ExecutionError> {
        let b = Self::open_with(allowed)?;
        b.log_adapter();
        Ok(b)
    }

    /// [`WgpuBackend::with_features`] without the log line.
    fn open_with(allowed: wgpu::Features) -> Result<WgpuBackend, ExecutionError> {
        let backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = backends;
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        }))
        .map_err(|e| {
            init_error(format!(
                "no Vulkan/Metal/DX12 adapter found ({e}) (is a Vulkan driver installed? \
                 on Debian: apt install mesa-vulkan-drivers libvulkan1)"
            ))
        })?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let mut features = adapter.features()
            & allowed
            & (wgpu::Features::SHADER_F16
                | wgpu::Features::SUBGROUP
                | wgpu::Features::TIMESTAMP_QUERY);
        let coop = coop_matmul_fits(&adapter, &info, allowed);
        if coop {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        let experimental_features = if coop {
            // SAFETY: the one experimental feature asked for is cooperative
            // matrices, used only by shaders/mm_coop.wgsl and
            // shaders/attention_coop.wgsl in the one
            // configuration `coop_matmul_fits` found the adapter to list
            // (16x16x16, f16 operands, f32 sums, 32-wide subgroups).
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("cyb-llm"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| {
            init_error(format!(
                "adapter {} ({:?}, driver {} {}) refused a device: {e}",
                info.name, info.backend, info.driver, info.driver_info
            ))
        })?;
        Ok(WgpuBackend {
            gpu: Gpu::new(device, queue, info, limits, features),
        })
    }

    /// The info line naming the adapter and driver.
    fn log_adapter(&self) {
        let info = &self.gpu.info;
        tracing::info!(
            "wgpu: {} ({:?}, {:?}, driver {} {})",
            info.name,
            info.device_type,
            info.backend,
            info.driver,
            info.driver_info
        );
    }

    /// Adapter, driver, limits and features of this backend's device.
    pub fn report(&self) -> AdapterReport {
        let g = &self.gpu;
        let l = &g.limits;
        AdapterReport {
            name: g.info.name.clone(),
            device_type: format!("{:?}", g.info.device_type),
            api: format!("{:?}", g.info.backend),
            driver: format!("{} {}", g.info.driver, g.info.driver_info)
                .trim()
                .to_string(),
            limits: vec![
                (
                    "max_storage_buffer_binding_size",
                    l.max_storage_buffer_binding_size,
                ),
                ("max_buffer_size", l.max_buffer_size),
                (
                    "max_compute_workgroup_storage_size",
                    l.max_compute_workgroup_storage_size as u64,
                ),
                (
                    "max_compute_invocations_per_workgroup",
                    l.max_compute_invocations_per_workgroup as u64,
                ),
                (
                    "max_compute_workgroups_per_dimension",
                    l.max_compute_workgroups_per_dimension as u64,
                ),
                (
                    "max_storage_buffers_per_shader_stage",
                    l.max_storage_buffers_per_shader_stage as u64,
                ),
            ],
            features: vec![
                (
                    "SHADER_F16",
                    g.features.contains(wgpu::Features::SHADER_F16),
                    g.coop_matmul(),
                ),
                (
                    "EXPERIMENTAL_COOPERATIVE_MATRIX (16x16x16 f16 -> f32)",
                    g.coop_matmul(),
                    g.coop_matmul(),
                ),
                (
                    "SUBGROUP",
                    g.features.contains(wgpu::Features::SUBGROUP),
                    g.features.contains(wgpu::Features::SUBGROUP),
                ),
                (
                    "TIMESTAMP_QUERY",
                    g.features.contains(wgpu::Features::TIMESTAMP_QUERY),
                    g.profiling(),
                ),
            ],
        }
    }

    /// Whether products of several input rows (prefill) run on the matrix
    /// units: f16 operands (inputs and decoded weights rounded to f16), f32
    /// sums. Off where the adapter lacks 16x16x16 f16 cooperative matrices or
    /// `CYB_WGPU_COOP=0`. Products that [`WgpuBackend::int8_product`] takes
    /// do not run there; other one-row products take the f32 matvec. The
    /// attention of 16 query rows and more runs there too where its head
    /// sizes are multiples of 16 up to 128: Q, K, V and the probabilities
    /// rounded to f16, scores and sums f32.
    pub fn matrix_units(&self) -> bool {
        self.gpu.coop_matmul()
    }

    /// Command submits since the device was made (about one per 32 dispatches, and
    /// one per read-back).
    pub fn submits(&self) -> u64 {
        self.gpu.submits()
    }

    /// Kernel dispatches recorded since the device was made (a dispatch held
    /// back for the next op to take over counts once it is recorded).
    pub fn dispatches(&self) -> u64 {
        self.gpu.dispatches()
    }

    /// Weights currently held on the GPU.
    pub fn cached_weights(&self) -> usize {
        self.gpu.cached_weights()
    }

    /// GPU memory held for live buffers, in bytes, from the device
    /// allocator's report (after finished work released what it held), or
    /// None where the adapter gives no report.
    pub fn gpu_memory_bytes(&self) -> Option<u64> {
        self.gpu.memory_bytes()
    }

    /// Bytes and count of the buffers the frame allocator has created.
    pub fn frame_pool(&self) -> (u64, usize) {
        let rec = self.gpu.recorder();
        (rec.alloc.pool_bytes(), rec.alloc.pool_buffers())
    }

    /// Per-kernel GPU time so far from timestamp queries: (kernel,
    /// milliseconds, dispatches), longest first. Empty unless the backend was
    /// made with `CYB_WGPU_PROFILE=1` on an adapter with TIMESTAMP_QUERY.
    pub fn profile(&self) -> Vec<(String, f64, u64)> {
        self.gpu.profile()
    }
}

impl Drop for WgpuBackend {
    /// Prints the host times and the per-kernel profile to stderr when profiling.
    fn drop(&mut self) {
        if let Some(h) = self.gpu.host_times() {
            let (sum, median) = h.summary();
            eprintln!(
                "wgpu host: {} batches; recording (first op to submit) {:.3} ms, median {:.3}; \
                 in submits {:.3} ms, median {:.3}; waiting for the GPU in read-backs {:.3} ms, \
                 median {:.3}",
                h.batches.len(),
                sum[0],
                median[0],
                sum[1],
                median[1],
                sum[2],
                median[2]
            );
        }
        let prof = self.gpu.profile();
        if prof.is_empty() {
            return;
        }
        let total: f64 = prof.iter().map(|p| p.1).sum();
        eprintln!(
            "wgpu profile ({} submits, {total:.3} ms GPU time in timestamped dispatches):",
            self.gpu.submits()
        );
        eprintln!(
            "{:>32} {:>10} {:>8} {:>10} {:>6}",
            "kernel", "ms", "calls", "us/call", "%"
        );
        for (k, ms, n) in prof {
            eprintln!(
                "{k:>32} {ms:>10.3} {n:>8} {:>10.2} {:>6.1}",
                ms * 1e3 / n.max(1) as f64,
                100.0 * ms / total.max(1e-12)
            );
        }
    }
}

/// Starts the backend; no Vulkan/Metal/DX12 adapter is `BackendInit` with the
/// driver's words and the fix.
pub fn init(_config: &BackendConfig) -> Result<Arc<dyn Backend>, ExecutionError> {
    Ok(Arc::new(WgpuBackend::new()?))
}

/// [`init`] for `--backend auto`: a software adapter (lavapipe, WARP) is
/// `BackendInit`, since the CPU backend is faster than a GPU emulated on it.
/// The probe is quiet: what the driver writes to stderr meanwhile becomes one
/// debug line (`CYB_LOG=debug`); `--backend wgpu` leaves the driver's words on
/// stderr.
pub fn init_auto(_config: &BackendConfig) -> Result<Arc<dyn Backend>, ExecutionError> {
    let (probe, driver) = quiet::capture_stderr(|| {
        let b = WgpuBackend::open()?;
        if b.gpu.info.device_type == wgpu::DeviceType::Cpu {
            return Err(init_error(format!(
                "only a software adapter ({}) found; `auto` uses the cpu backend \
                 (pass --backend wgpu to use it anyway)",
                b.gpu.info.name
            )));
        }
        Ok(b)
    });
    if !driver.trim().is_empty() {
        tracing::debug!("wgpu probe: the driver wrote: {}", quiet::one_line(&driver));
    }
    let b = probe?;
    b.log_adapter();
    Ok(Arc::new(b))
}

/// Encodings the matmul and embedding kernels decode.
pub fn kernel_dtype(dtype: DType) -> bool {
    gpu::deq_name(dtype).is_some()
}

fn rank4(shape: &[usize]) -> bool {
    shape.len() <= 4
}

impl Backend for WgpuBackend {
    fn name(&self) -> &str {
        "wgpu"
    }

    fn supports(&self, op: &Op, inputs: &[TensorInfo]) -> bool {
        let Ok(outs) = op.infer(inputs) else {
            return false;
        };
        // Run-time integers and truth values stay on the host.
        if inputs
            .iter()
            .any(|i| matches!(i.dtype, DType::I64 | DType::Bool))
        {
            return false;
        }
        let small = |i: usize| !inputs[i].dtype.is_quantized() && inputs[i].dtype != DType::Ternary;
        match op {
            Op::Matmul => kernel_dtype(inputs[1].dtype),
            Op::FusedQkv => inputs[1..].iter().all(|i| kernel_dtype(i.dtype)),
            Op::FusedSwiGlu => inputs[1..].iter().all(|i| kernel_dtype(i.dtype)),
            Op::FusedNormMatmul { .. } => small(1) && kernel_dtype(inputs[2].dtype),
            Op::FusedSkipNorm { .. } => small(2),
            Op::Embed => kernel_dtype(inputs[1].dtype),
            Op::RmsNorm { .. } => small(1),
            Op::LayerNorm { .. } => (1..inputs.len()).all(small),
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::SwiGlu | Op::GeGlu => {
                rank4(&inputs[0].shape) && rank4(&inputs[1].shape)
            }
            Op::Scale(_)
            | Op::Silu
            | Op::Gelu
            | Op::GeluTanh
            | Op::Relu
            | Op::LeakyRelu(_)
            | Op::Sigmoid
            | Op::Tanh
            | Op::Softcap(_)
            | Op::Softmax
            | Op::Reshape(_)
            | Op::Argmax
            | Op::KvAppend { .. } => true,
            Op::Slice { axis, .. } => inputs[0].shape[..*axis].iter().product::<usize>() <= 64,
            Op::Rope { .. } | Op::FusedRopeAppend { .. } => true,
            Op::Sdpa { mask, .. } => {
                !matches!(mask, super::Mask::Padding(_))
                    && inputs[0].shape[2] <= 256
                    && inputs[2].shape[2] <= 256
            }
            Op::Conv2d { .. }
            | Op::ConvTranspose2d { .. }
            | Op::Conv1d { .. }
            | Op::GroupNorm { .. }
            | Op::GroupNormAffine { .. } => image::fits(inputs, &outs, self.gpu.max_binding()),
            Op::Sample(p) => p.temperature <= 0.0 && (p.repeat_penalty == 1.0 || inputs.len() == 1),
            Op::BatchMatmul => products::fits(inputs, &outs, self.gpu.max_binding()),
            Op::Reduce { .. } | Op::AvgPool2d { .. } => {
                reduce::fits(op, inputs, &outs, self.gpu.max_binding())
            }
            // The dims alone, on the host: no read-back of the values.
            Op::Shape => true,
            // Element-wise math, or values moved (Permute, Concat, Split,
            // StridedSlice, Pad, Expand, ResizeNearest).
            _ => {
                ops::unary_code(op).is_some()
                    || layout::fits(op, inputs, &outs, self.gpu.max_binding())
            }
        }
    }

    fn execute(
        &self,
        op: &Op,
        inputs: &[Tensor],
        _ctx: &mut ExecContext,
    ) -> Result<Vec<Tensor>, ExecutionError> {
        let infos: Vec<TensorInfo> = inputs.iter().map(|t| t.info().clone()).collect();
        let outs = op.infer(&infos)?;
        ops::run(&self.gpu, op, inputs, &outs)
    }

    fn alloc(&self, shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        if dtype != DType::F32 {
            return Err(ExecutionError::UnsupportedOp {
                op: "alloc".into(),
                backend: "wgpu".into(),
                input_dtype: dtype,
            });
        }
        let info = TensorInfo::new(shape, dtype);
        let buf = self.gpu.persistent(info.numel() as u64 * 4)?;
        self.gpu.cached_weights();
        Ok(Tensor::from_device(info, Arc::new(buf)))
    }

    fn upload(&self, data: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor, ExecutionError> {
        let info = TensorInfo::new(shape, dtype);
        if dtype.byte_size(shape) != Some(data.len() as u64) {
            return Err(ExecutionError::WeightFormatMismatch {
                name: format!("upload {shape:?}"),
                declared: dtype,
                actual_bytes: data.len(),
            });
        }
        let w = self.gpu.upload_rows(data, data.len().max(1))?;
        let chunk = w
            .chunks
            .into_iter()
            .next()
            .ok_or_else(|| ExecutionError::OutOfMemory {
                backend: "wgpu".into(),
                requested_bytes: data.len(),
            })?;
        Ok(Tensor::from_device(
            info,
            Arc::new(GpuBuf::persistent(chunk.buf)),
        ))
    }

    fn synchronize(&self) -> Result<(), ExecutionError> {
        self.gpu.synchronize()
    }

    fn argmax_on_device(
        &self,
        logits: &Tensor,
    ) -> Option<Result<(Tensor, PendingId), ExecutionError>> {
        Some(ops::argmax_on_device(&self.gpu, logits))
    }

    fn download_f32(&self, t: &Tensor) -> Vec<f32> {
        self.try_download_f32(t).unwrap_or_default()
    }

    fn try_download_f32(&self, t: &Tensor) -> Result<Vec<f32>, ExecutionError> {
        match t.storage() {
            Storage::Device(d) => {
                let g = d.as_any().downcast_ref::<GpuBuf>().ok_or_else(|| {
                    ExecutionError::UnsupportedOp {
                        op: "download (buffer of another backend)".into(),
                        backend: "wgpu".into(),
                        input_dtype: t.dtype(),
                    }
                })?;
                if t.dtype() != DType::F32 {
                    return Err(ExecutionError::UnsupportedOp {
                        op: "download".into(),
                        backend: "wgpu".into(),
                        input_dtype: t.dtype(),
                    });
                }
                let bytes = self.gpu.read(g.buffer(), t.numel() as u64 * 4)?;
                Ok(bytemuck::pod_collect_to_vec(&bytes))
            }
            _ => Ok(t.read_f32("download")?.to_vec()),
        }
    }
}
