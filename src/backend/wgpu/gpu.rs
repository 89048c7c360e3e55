//! Device, queue, pipelines, the command recorder (one encoder and one submit
//! per batch of ops), the weight cache and host <-> GPU transfers.

use super::alloc::{GpuBuf, GpuFrameAllocator};
use crate::backend::alloc::HostF32;
use crate::backend::{BufferUsage, PendingId, SharedBytes, Storage, Tensor};
use crate::dtype::DType;
use crate::error::ExecutionError;
use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Bytes of one kernel parameter block (8 x vec4<u32>).
pub const PARAM_BYTES: u64 = 128;
/// Parameter blocks per batch; a batch that needs more is submitted early.
const PARAM_SLOTS: u64 = 4096;
/// Dispatches recorded before a submit that does not wait, made at the next
/// op boundary while the GPU may be idle ([`Gpu::op_recorder`];
/// `CYB_WGPU_BATCH` overrides). 8B-shaped Q4_0 decode on an H200 with every
/// token waited for, tg128: 131 t/s submitting once per step, 165 at 32, 164
/// at 64, 153 at 128 (BENCHMARKS.md).
const BATCH_DISPATCHES: u64 = 32;
/// Threads per workgroup of the flat-grid kernels.
pub const WG: u64 = 64;

/// Dispatches per batch that get GPU timestamps when profiling.
const PROFILED: usize = 2048;
/// Bind groups kept before the cache is emptied.
const BIND_GROUPS: usize = 16384;

/// Kernel parameters: 32 words, floats bitcast (see shaders/common.wgsl).
pub type Params = [u32; 32];

/// One row-chunk of a weight in its own buffer (rows `row0 .. row0 + rows`).
pub struct Chunk {
    /// The buffer (bytes of whole rows, padded to 4).
    pub buf: wgpu::Buffer,
    /// First row held.
    pub row0: usize,
    /// Rows held.
    pub rows: usize,
}

/// A weight on the GPU: its rows split into chunks no larger than one binding.
pub struct Weight {
    /// Chunks in row order.
    pub chunks: Vec<Chunk>,
    /// Bytes per row.
    pub row_bytes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WeightKey {
    owner: usize,
    start: usize,
    end: usize,
    row_values: usize,
    as_f32: bool,
}

impl WeightKey {
    /// The key of host bytes `b` seen as rows of `row_values` values, and the
    /// handle that tells when their owner is gone.
    fn of_bytes(b: &SharedBytes, row_values: usize, as_f32: bool) -> (WeightKey, Alive) {
        let (owner, range, weak) = b.identity();
        let key = WeightKey {
            owner,
            start: range.start,
            end: range.end,
            row_values,
            as_f32,
        };
        (key, Alive::Bytes(weak))
    }
}

enum Alive {
    Bytes(Weak<dyn AsRef<[u8]> + Send + Sync>),
    Host(Weak<HostF32>),
}

impl Alive {
    fn alive(&self) -> bool {
        match self {
            Alive::Bytes(w) => w.strong_count() > 0,
            Alive::Host(w) => w.strong_count() > 0,
        }
    }
}

/// Work recorded but not yet submitted.
pub struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    /// The open compute pass of `encoder`: consecutive dispatches share one
    /// (a copy or the submit closes it; profiling gives each its own).
    pass: Option<wgpu::ComputePass<'static>>,
    params: Vec<u8>,
    slots: u64,
    /// Frame allocator for activations.
    pub alloc: GpuFrameAllocator,
    submits: u64,
    /// Dispatches recorded since the device was made.
    dispatches: u64,
    /// Kernel of each timestamped dispatch of this batch (profiling only).
    profiled: Vec<String>,
    /// When the first op of this batch was recorded (profiling only).
    started: Option<std::time::Instant>,
    /// Mappable buffer of the read-backs, kept for the next one (grown as needed).
    readback: Option<wgpu::Buffer>,
    /// What the last submit returned, for a read-back that waits for it alone.
    last_submit: Option<wgpu::SubmissionIndex>,
    /// Activation rows of this batch already written as 8-bit blocks too (by
    /// the norm that made them): the f32 buffer's 8-bit twin, for the
    /// products that read it ([`Gpu::int8_activations`]). Emptied at every
    /// submit, when the frame buffers may be handed out again.
    pub int8_rows: HashMap<wgpu::Buffer, wgpu::Buffer>,
    /// Activation rows of this batch already converted to f16 for the
    /// matrix-unit products, by (f32 buffer, rows, values a row): the f16
    /// twin. Emptied at every submit, as `int8_rows`.
    pub f16_rows: HashMap<(wgpu::Buffer, usize, usize), wgpu::Buffer>,
    /// The one dispatch an op held back ([`Gpu::defer`]) so that the next op
    /// may record it together with its own work ([`Gpu::take_deferred`]);
    /// whatever records or submits next records it first, as it was.
    deferred: Option<Deferred>,
}

/// A dispatch held back by [`Gpu::defer`], its pipeline built and its grid
/// checked, so recording it later cannot fail.
pub struct Deferred {
    /// Kernel key (`name` or `name:dtype`).
    pub key: String,
    /// The buffers bound in order (the parameter block follows).
    pub bufs: Vec<wgpu::Buffer>,
    /// Kernel parameters.
    pub params: Params,
    /// Workgroups.
    pub groups: u64,
    pipe: wgpu::ComputePipeline,
}

/// Per-kernel GPU time from timestamp queries (`CYB_WGPU_PROFILE=1` on an
/// adapter with TIMESTAMP_QUERY).
struct Profiler {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    staging: wgpu::Buffer,
    period_ns: f64,
    totals: Mutex<HashMap<String, (f64, u64)>>,
}

/// Host milliseconds per phase of each batch so far (`CYB_WGPU_PROFILE` set):
/// recording (first op to submit), in `queue.submit` (wgpu's command encoding
/// and barrier tracking), waiting for the GPU in its read-back (0 without one).
#[derive(Debug, Clone, Default)]
pub struct HostTimes {
    /// One (record, submit, wait) entry per submitted batch.
    pub batches: Vec<[f64; 3]>,
}

impl HostTimes {
    /// Sums and medians of the three phases over the batches.
    pub fn summary(&self) -> ([f64; 3], [f64; 3]) {
        let mut sum = [0.0; 3];
        let mut median = [0.0; 3];
        for (i, (s, m)) in sum.iter_mut().zip(&mut median).enumerate() {
            let mut v: Vec<f64> = self.batches.iter().map(|b| b[i]).collect();
            *s = v.iter().sum();
            v.sort_by(f64::total_cmp);
            *m = v.get(v.len() / 2).copied().unwrap_or(0.0);
        }
        (sum, median)
    }
}

/// Uploaded weights by the identity of their parts, with the owners' liveness.
type WeightCache = HashMap<Vec<WeightKey>, (Vec<Alive>, Arc<Weight>)>;

/// Bind groups by (kernel, parameter slot, buffers): a decode step records the
/// same dispatches on the same pooled buffers every time, so they are reused.
type BindGroups = HashMap<(String, u64, Vec<wgpu::Buffer>), wgpu::BindGroup>;

/// The device and everything that lives as long as it.
pub struct Gpu {
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// The adapter's description.
    pub info: wgpu::AdapterInfo,
    /// Limits the device was created with (the adapter's).
    pub limits: wgpu::Limits,
    /// Features enabled on the device.
    pub features: wgpu::Features,
    params: wgpu::Buffer,
    /// A small storage buffer bound where a kernel's optional output is unused.
    pub spare: wgpu::Buffer,
    pipelines: Mutex<HashMap<String, wgpu::ComputePipeline>>,
    rec: Mutex<Recorder>,
    /// Uploaded weights by the identity of their parts (one part, or the
    /// weights of a fused op laid end to end).
    weights: Mutex<WeightCache>,
    bind_groups: Mutex<BindGroups>,
    /// Mappable 4-byte buffers of [`Gpu::read_i32_later`], free for reuse.
    id_readbacks: Arc<Mutex<Vec<wgpu::Buffer>>>,
    profiler: Option<Profiler>,
    host_times: Option<Mutex<HostTimes>>,
    /// Dispatches recorded before the batch is submitted without waiting when
    /// `CYB_WGPU_BATCH` fixes it; otherwise [`Gpu::op_recorder`] decides.
    fixed_batch: Option<u64>,
    /// Token-id read-backs of [`Gpu::read_i32_later`] not yet waited for or
    /// dropped: while there is one, the GPU has a queued forward to run.
    ids_in_flight: Arc<AtomicUsize>,
    /// Whether the decode matvecs of the encodings in [`INT8_MATVEC`] take
    /// their activations as 8-bit blocks (the default; `CYB_WGPU_ACTIVATIONS=f32`
    /// or [`Gpu::use_f32_activations`] keeps them in f32).
    int8_activations: bool,
}

/// The most input rows a product takes on 8-bit activations through the
/// matvec-like kernels (MC in shaders/matvec_q8_cols.wgsl); more rows go to
/// the tiled kernels, which read each weight tile once for many rows.
const INT8_PRODUCT_ROWS: usize = 8;

/// Encodings with an integer-dot decode matvec (shaders/dequant_q8.wgsl).
const INT8_MATVEC: [DType; 7] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q4K,
    DType::Q6K,
];

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn oom(bytes: u64) -> ExecutionError {
    ExecutionError::OutOfMemory {
        backend: "wgpu".into(),
        requested_bytes: bytes as usize,
    }
}

/// One count of a counter for as long as it lives (a read-back in flight).
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(counter: &Arc<AtomicUsize>) -> InFlight {
        counter.fetch_add(1, Ordering::Relaxed);
        InFlight(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Checks that `groups` workgroups fit the grid a dispatch spreads them over
/// (at most 65535 x 65535).
fn grid(groups: u64) -> Result<(), ExecutionError> {
    if groups.div_ceil(groups.min(65535)) > 65535 {
        return Err(oom(groups * WG * 4));
    }
    Ok(())
}

const COMMON: &str = include_str!("../../../shaders/common.wgsl");
const DEQUANT: &str = include_str!("../../../shaders/dequant.wgsl");

/// Encodings with a word-wise decoder (`dq_*` in shaders/dequant.wgsl) for the
/// matvec and mm kernels; the others go value by value (`dq_generic`).
const MATVEC_WORDS: [&str; 9] = [
    "f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q6_k",
];

/// WGSL name suffix of the in-kernel decoder for `dtype`, if there is one.
pub fn deq_name(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::Q8_0 => "q8_0",
        DType::Q4_0 => "q4_0",
        DType::Q4_1 => "q4_1",
        DType::Q5_0 => "q5_0",
        DType::Q5_1 => "q5_1",
        DType::Q4K => "q4_k",
        DType::Q5K => "q5_k",
        DType::Q6K => "q6_k",
        _ => return None,
    })
}

/// Shader `file` (e.g. `matvec.wgsl`): from the folder named by
/// `CYB_WGPU_SHADERS` when it holds that file (to try kernel variants without
/// rebuilding), else the copy built into the binary.
fn shader(file: &str, embedded: &'static str) -> std::borrow::Cow<'static, str> {
    std::env::var_os("CYB_WGPU_SHADERS")
        .and_then(|dir| std::fs::read_to_string(std::path::Path::new(&dir).join(file)).ok())
        .map_or(
            std::borrow::Cow::Borrowed(embedded),
            std::borrow::Cow::Owned,
        )
}

/// The shader files of kernel `name`, in order (after common.wgsl and, for a
/// kernel with a dtype, dequant.wgsl): its body, then the pieces it is made of.
fn kernel_files(name: &str, subgroups: bool) -> Option<Vec<(&'static str, &'static str)>> {
    macro_rules! file {
        ($n:literal) => {
            ($n, include_str!(concat!("../../../shaders/", $n)))
        };
    }
    let reduce = if subgroups {
        file!("reduce_sg.wgsl")
    } else {
        file!("reduce_wg.wgsl")
    };
    let q8_parts = if subgroups {
        file!("q8_parts_sg.wgsl")
    } else {
        file!("q8_parts.wgsl")
    };
    let mv_reduce = if subgroups {
        file!("matvec_sg.wgsl")
    } else {
        file!("matvec_wg.wgsl")
    };
    Some(match name {
        "mm" => vec![file!("mm.wgsl"), file!("sum_rows.wgsl")],
        "mm_coop" => vec![
            file!("mm_coop.wgsl"),
            file!("mm_coop_cols.wgsl"),
            file!("mm_coop_out.wgsl"),
        ],
        "mm_coop_qkv" => vec![
            file!("mm_coop.wgsl"),
            file!("mm_coop_cols.wgsl"),
            file!("mm_coop_qkv.wgsl"),
        ],
        "mm_coop_glu" => vec![file!("mm_coop.wgsl"), file!("mm_coop_glu.wgsl")],
        "rows_f16" => vec![file!("rows_f16.wgsl")],
        "embed" => vec![file!("embed.wgsl")],
        "elementwise" => vec![file!("elementwise.wgsl")],
        "norm" => vec![file!("norm.wgsl"), file!("q8_block.wgsl"), q8_parts, reduce],
        "group_norm" => vec![file!("group_norm.wgsl"), reduce],
        "conv" => vec![file!("conv.wgsl")],
        "copy_nd" => vec![file!("copy_nd.wgsl")],
        "bmm" => vec![file!("bmm.wgsl")],
        "reduce_axes" => vec![file!("reduce_axes.wgsl")],
        "avg_pool" => vec![file!("avg_pool.wgsl")],
        "softmax" => vec![file!("softmax.wgsl")],
        "argmax" => vec![file!("argmax.wgsl")],
        "rope" => vec![file!("rope.wgsl"), file!("rope_pair.wgsl")],
        "attention" => vec![
            file!("attention.wgsl"),
            file!("attention_keys.wgsl"),
            file!("q8_block.wgsl"),
            q8_parts,
            reduce,
        ],
        "attention_gqa32" => vec![
            file!("attention_gqa.wgsl"),
            file!("attention_gqa_tile32.wgsl"),
            file!("attention_keys.wgsl"),
        ],
        "attention_gqa64" => vec![
            file!("attention_gqa.wgsl"),
            file!("attention_gqa_tile64.wgsl"),
            file!("attention_keys.wgsl"),
        ],
        "attention_rows" => vec![file!("attention_rows.wgsl"), file!("attention_keys.wgsl")],
        "attention_coop" => vec![file!("attention_coop.wgsl"), file!("attention_keys.wgsl")],
        "kv_append" => vec![file!("kv_append.wgsl")],
        "rope_append" => vec![file!("rope_append.wgsl"), file!("rope_pair.wgsl")],
        "matvec" => vec![
            file!("matvec.wgsl"),
            file!("matvec_rows.wgsl"),
            file!("matvec_out.wgsl"),
            mv_reduce,
        ],
        "matvec_qkv" => vec![
            file!("matvec.wgsl"),
            file!("matvec_rows.wgsl"),
            file!("matvec_qkv.wgsl"),
            file!("matvec_qkv_out.wgsl"),
            mv_reduce,
        ],
        "matvec_qkv_rope" => vec![
            file!("matvec.wgsl"),
            file!("matvec_rows.wgsl"),
            file!("matvec_qkv.wgsl"),
            file!("matvec_qkv_rope.wgsl"),
            mv_reduce,
        ],
        "matvec_glu" => vec![file!("matvec.wgsl"), file!("matvec_glu.wgsl"), mv_reduce],
        "quant_q8" => vec![file!("quant_q8.wgsl"), file!("q8_block.wgsl"), q8_parts],
        "matvec_q8" => vec![
            file!("matvec_q8.wgsl"),
            file!("dequant_q8.wgsl"),
            file!("matvec_rows.wgsl"),
            file!("matvec_out.wgsl"),
            mv_reduce,
        ],
        "matvec_q8_qkv" => vec![
            file!("matvec_q8.wgsl"),
            file!("dequant_q8.wgsl"),
            file!("matvec_rows.wgsl"),
            file!("matvec_qkv.wgsl"),
            file!("matvec_qkv_out.wgsl"),
            mv_reduce,
        ],
        "matvec_q8_qkv_rope" => vec![
            file!("matvec_q8.wgsl"),
            file!("dequant_q8.wgsl"),
            file!("matvec_rows.wgsl"),
            file!("matvec_qkv.wgsl"),
            file!("matvec_qkv_rope.wgsl"),
            mv_reduce,
        ],
        "matvec_q8_glu" => vec![
            file!("matvec_q8.wgsl"),
            file!("dequant_q8.wgsl"),
            file!("matvec_glu.wgsl"),
            mv_reduce,
        ],
        "matvec_q8_cols" => vec![
            file!("matvec_q8_cols.wgsl"),
            file!("dequant_q8.wgsl"),
            file!("sum_rows.wgsl"),
        ],
        _ => return None,
    })
}

/// The whole WGSL module of kernel `key` (`name` or `name:dtype`): its enables,
/// common.wgsl, for a dtype dequant.wgsl and the decoder aliases, then the
/// kernel's files; `None` for an unknown kernel.
fn kernel_source(key: &str, subgroups: bool) -> Option<String> {
    let (kernel, dtype) = key.split_once(':').unwrap_or((key, ""));
    let files = kernel_files(kernel, subgroups)?;
    let mut src = String::from(kernel_enables(kernel));
    src.push_str(&shader("common.wgsl", COMMON));
    if !dtype.is_empty() {
        src.push_str(&shader("dequant.wgsl", DEQUANT));
        src.push_str(&format!(
            "fn deq(rb: u32, k: u32) -> f32 {{ return deq_{dtype}(rb, k); }}\n\
             fn blk_sm(rb: u32, sb: u32) -> vec2<f32> {{ return sm_{dtype}(rb, sb); }}\n\
             fn blk_q(rb: u32, sb: u32, i: u32) -> f32 {{ return q_{dtype}(rb, sb, i); }}\n\
             fn mv_dq(rb: u32, sb: u32, qq: u32, kk: u32) -> Dq {{ return dq_{}(rb, sb, qq, kk); }}\n",
            if MATVEC_WORDS.contains(&dtype) {
                dtype
            } else {
                "generic"
            }
        ));
        if kernel.starts_with("matvec_q8") {
            src.push_str(&format!(
                "fn q8_dot(rb: u32, sb: u32, x: Xq) -> f32 {{ return q8dot_{dtype}(rb, sb, x); }}\n"
            ));
        }
    }
    for (file, body) in files {
        src.push_str(&shader(file, body));
    }
    Some(src)
}

/// The WGSL `enable` directives kernel `name` needs (they must open the module).
fn kernel_enables(name: &str) -> &'static str {
    match name {
        "mm_coop" | "mm_coop_qkv" | "mm_coop_glu" | "attention_coop" => {
            "enable f16;\nenable wgpu_cooperative_matrix;\n"
        }
        _ => "",
    }
}

impl Gpu {
    /// Whether the prefill products and prompt attention run on the matrix
    /// units (shaders/mm_coop.wgsl, shaders/attention_coop.wgsl; the device was
    /// created with cooperative matrices).
    pub fn coop_matmul(&self) -> bool {
        self.features
            .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
    }

    /// Whether a one-row product with a weight of `dtype` runs on 8-bit
    /// activations (shaders/quant_q8.wgsl, shaders/matvec_q8.wgsl).
    pub fn int8_matvec(&self, dtype: DType) -> bool {
        self.int8_activations && INT8_MATVEC.contains(&dtype)
    }

    /// Whether a product of `rows` input rows with a weight of `dtype` runs on
    /// 8-bit activations: [`Gpu::int8_matvec`] encodings, up to
    /// [`INT8_PRODUCT_ROWS`] rows (one: the decode matvec; more:
    /// shaders/matvec_q8_cols.wgsl).
    pub fn int8_product(&self, dtype: DType, rows: usize) -> bool {
        rows <= INT8_PRODUCT_ROWS && self.int8_matvec(dtype)
    }

    /// Whether the one-row products of [`Gpu::int8_matvec`] encodings take
    /// 8-bit activations (so a one-row norm writes them too).
    pub fn int8_activations(&self) -> bool {
        self.int8_activations
    }

    /// Keeps every product's activations in f32 (the parity path).
    pub fn use_f32_activations(&mut self) {
        self.int8_activations = false;
    }

    /// Wraps a created device.
    pub fn new(
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: wgpu::AdapterInfo,
        limits: wgpu::Limits,
        features: wgpu::Features,
    ) -> Gpu {
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: PARAM_SLOTS * 256,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let spare = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("spare"),
            size: 64,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        // CYB_WGPU_PROFILE=1: GPU timestamps per dispatch and host times;
        // CYB_WGPU_PROFILE=host: host times only (dispatches keep sharing passes).
        let profile = std::env::var("CYB_WGPU_PROFILE").unwrap_or_default();
        let host_times = (!profile.is_empty() && profile != "0").then(Mutex::default);
        let profiler = (host_times.is_some()
            && profile != "host"
            && features.contains(wgpu::Features::TIMESTAMP_QUERY))
        .then(|| Profiler {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("profile"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * PROFILED as u32,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("profile resolve"),
                size: 16 * PROFILED as u64,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            staging: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("profile staging"),
                size: 16 * PROFILED as u64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            period_ns: queue.get_timestamp_period() as f64,
            totals: Mutex::new(HashMap::new()),
        });
        let batch = std::env::var("CYB_WGPU_BATCH")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&n| n > 0);
        Gpu {
            device,
            queue,
            info,
            limits,
            features,
            params,
            spare,
            pipelines: Mutex::new(HashMap::new()),
            rec: Mutex::new(Recorder {
                encoder: None,
                pass: None,
                params: Vec::new(),
                slots: 0,
                alloc: GpuFrameAllocator::new(),
                submits: 0,
                dispatches: 0,
                profiled: Vec::new(),
                started: None,
                readback: None,
                last_submit: None,
                int8_rows: HashMap::new(),
                f16_rows: HashMap::new(),
                deferred: None,
            }),
            weights: Mutex::new(HashMap::new()),
            bind_groups: Mutex::new(HashMap::new()),
            id_readbacks: Arc::default(),
            profiler,
            host_times,
            int8_activations: std::env::var("CYB_WGPU_ACTIVATIONS").map_or(true, |v| v != "f32"),
            fixed_batch: batch.map(|n| n.min(PARAM_SLOTS)),
            ids_in_flight: Arc::default(),
        }
    }

    /// Per-kernel GPU time so far: (kernel, milliseconds, dispatches), longest
    /// first; empty unless profiling (`CYB_WGPU_PROFILE=1`, TIMESTAMP_QUERY).
    pub fn profile(&self) -> Vec<(String, f64, u64)> {
        let Some(pr) = &self.profiler else {
            return Vec::new();
        };
        let mut v: Vec<_> = lock(&pr.totals)
            .iter()
            .map(|(k, (ns, n))| (k.clone(), ns / 1e6, *n))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v
    }

    /// Whether dispatches are timestamped (`CYB_WGPU_PROFILE=1` and TIMESTAMP_QUERY).
    pub fn profiling(&self) -> bool {
        self.profiler.is_some()
    }

    /// Host times so far, when profiling (`CYB_WGPU_PROFILE` set).
    pub fn host_times(&self) -> Option<HostTimes> {
        self.host_times.as_ref().map(|h| lock(h).clone())
    }

    /// Bytes of GPU memory the allocator holds for live resources, after
    /// finished work has released what it kept alive (None when the adapter's
    /// allocator gives no report).
    pub fn memory_bytes(&self) -> Option<u64> {
        self.evict_dead();
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
        self.device
            .generate_allocator_report()
            .map(|r| r.total_allocated_bytes)
    }

    /// Forgets weights whose owner dropped them, and with them every cached
    /// bind group (which would keep their buffers alive).
    fn evict_dead(&self) -> usize {
        let mut map = lock(&self.weights);
        let before = map.len();
        map.retain(|_, (alive, _)| alive.iter().all(Alive::alive));
        if map.len() < before {
            lock(&self.bind_groups).clear();
        }
        map.len()
    }

    /// The largest buffer one binding may cover.
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// Locks the recorder.
    pub fn recorder(&self) -> MutexGuard<'_, Recorder> {
        lock(&self.rec)
    }

    /// Locks the recorder for the next op, first submitting the batch (without
    /// waiting) once it holds [`BATCH_DISPATCHES`] dispatches. Only here, between ops: an
    /// op's uploaded inputs are released as soon as they are bound, so a
    /// submit inside an op would let the rest of its dispatches read buffers
    /// the next batch already reuses.
    ///
    /// While a token-id read-back is in flight the GPU has a queued forward
    /// to run, so an early submit would not start it sooner: the batch then
    /// grows to the whole forward (one submit, at the read-back), unless
    /// `CYB_WGPU_BATCH` fixed it. 8B-shaped Q4_0 decode on an H100, tg128:
    /// 262 t/s submitting every 32 dispatches, 279 once a forward (BENCHMARKS.md).
    pub fn op_recorder(&self) -> MutexGuard<'_, Recorder> {
        let mut rec = lock(&self.rec);
        let batch = self.fixed_batch.unwrap_or_else(|| {
            if self.ids_in_flight.load(Ordering::Relaxed) > 0 {
                PARAM_SLOTS
            } else {
                BATCH_DISPATCHES
            }
        });
        if rec.slots >= batch {
            self.flush(&mut rec);
        }
        rec
    }

    /// Submits everything recorded so far (one submit) and lets released
    /// buffers be reused.
    pub fn flush(&self, rec: &mut Recorder) {
        self.record_deferred(rec);
        rec.pass = None;
        if let Some(mut enc) = rec.encoder.take() {
            if rec.slots > 0 {
                self.queue.write_buffer(&self.params, 0, &rec.params);
            }
            let n = rec.profiled.len() as u64;
            if let (Some(pr), true) = (&self.profiler, n > 0) {
                enc.resolve_query_set(&pr.set, 0..2 * n as u32, &pr.resolve, 0);
                enc.copy_buffer_to_buffer(&pr.resolve, 0, &pr.staging, 0, 16 * n);
            }
            let submit = std::time::Instant::now();
            rec.last_submit = Some(self.queue.submit([enc.finish()]));
            rec.submits += 1;
            if let (Some(h), Some(t0)) = (&self.host_times, rec.started.take()) {
                let mut h = lock(h);
                h.batches.push([
                    (submit - t0).as_secs_f64() * 1e3,
                    submit.elapsed().as_secs_f64() * 1e3,
                    0.0,
                ]);
            }
            if let (Some(pr), true) = (&self.profiler, n > 0) {
                self.collect_profile(pr, &std::mem::take(&mut rec.profiled));
            }
        }
        rec.params.clear();
        rec.slots = 0;
        rec.alloc.recycle();
        rec.int8_rows.clear();
        rec.f16_rows.clear();
        self.evict_dead();
    }

    /// Waits for the batch and adds its timestamped dispatches to the totals.
    fn collect_profile(&self, pr: &Profiler, kernels: &[String]) {
        let slice = pr.staging.slice(..16 * kernels.len() as u64);
        slice.map_async(wgpu::MapMode::Read, |_| {});
        if self
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .is_err()
        {
            return;
        }
        if let Ok(view) = slice.get_mapped_range() {
            let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&view);
            let mut totals = lock(&pr.totals);
            for (k, t) in kernels.iter().zip(ticks.chunks_exact(2)) {
                let e = totals.entry(k.clone()).or_default();
                e.0 += t[1].saturating_sub(t[0]) as f64 * pr.period_ns;
                e.1 += 1;
            }
        }
        pr.staging.unmap();
    }

    /// Submits recorded so far since the device was made.
    pub fn submits(&self) -> u64 {
        self.recorder().submits
    }

    /// Dispatches recorded since the device was made.
    pub fn dispatches(&self) -> u64 {
        self.recorder().dispatches
    }

    fn pipeline(&self, key: &str) -> Result<wgpu::ComputePipeline, ExecutionError> {
        let mut cache = lock(&self.pipelines);
        if let Some(p) = cache.get(key) {
            return Ok(p.clone());
        }
        let subgroups = self.features.contains(wgpu::Features::SUBGROUP);
        let src = kernel_source(key, subgroups).ok_or_else(|| ExecutionError::UnsupportedOp {
            op: format!("kernel {key}"),
            backend: "wgpu".into(),
            input_dtype: DType::F32,
        })?;
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(key),
            source: wgpu::ShaderSource::Wgsl(src.into()),
        };
        let module = if std::env::var_os("CYB_WGPU_CHECKED").is_some() {
            self.device.create_shader_module(desc)
        } else {
            let checks = wgpu::ShaderRuntimeChecks {
                force_loop_bounding: false,
                int_div_checks: false,
                ..wgpu::ShaderRuntimeChecks::checked()
            };
            // SAFETY: these are our own kernels (shaders/), not user code.
            // Every loop is bounded by a parameter the host computed from
            // validated shapes (counts far below u32::MAX, so no counter
            // wraps), and every divisor in them is non-zero by the same
            // validation (head counts, row lengths, chunk counts), so neither
            // naga's loop counters nor its division guards are needed. Buffer
            // bounds checks stay on.
            unsafe { self.device.create_shader_module_trusted(desc, checks) }
        };
        let pipe = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(key),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
        cache.insert(key.to_string(), pipe.clone());
        Ok(pipe)
    }

    /// Records one dispatch of kernel `key` over `groups` workgroups (spread
    /// over x/y, `z` layers) with `bufs` bound in order and `params` last.
    pub fn dispatch(
        &self,
        rec: &mut Recorder,
        key: &str,
        bufs: &[&wgpu::Buffer],
        params: Params,
        groups: u64,
        z: u32,
    ) -> Result<(), ExecutionError> {
        if let Some(pipe) = self.prepare(rec, key, groups, z)? {
            self.record(rec, &pipe, key, bufs, params, groups, z);
        }
        Ok(())
    }

    /// What [`Gpu::dispatch`] and [`Gpu::defer`] do first: records the
    /// dispatch held back before, then gives kernel `key`'s pipeline where
    /// `groups` workgroups fit the grid (none where `groups` or the `z`
    /// layers are none).
    fn prepare(
        &self,
        rec: &mut Recorder,
        key: &str,
        groups: u64,
        z: u32,
    ) -> Result<Option<wgpu::ComputePipeline>, ExecutionError> {
        self.record_deferred(rec);
        if groups == 0 || z == 0 {
            return Ok(None);
        }
        let pipe = self.pipeline(key)?;
        grid(groups)?;
        Ok(Some(pipe))
    }

    /// Holds back one dispatch (as [`Gpu::dispatch`] would record it) for the
    /// next op, which may take it over ([`Gpu::take_deferred`]); any other
    /// recording or submit records it first. A dispatch held back before is
    /// recorded now.
    pub fn defer(
        &self,
        rec: &mut Recorder,
        key: &str,
        bufs: &[&wgpu::Buffer],
        params: Params,
        groups: u64,
    ) -> Result<(), ExecutionError> {
        let Some(pipe) = self.prepare(rec, key, groups, 1)? else {
            return Ok(());
        };
        rec.deferred = Some(Deferred {
            key: key.to_string(),
            bufs: bufs.iter().map(|b| (*b).clone()).collect(),
            params,
            groups,
            pipe,
        });
        Ok(())
    }

    /// The dispatch held back by [`Gpu::defer`], taken over by the caller
    /// (which records it, or work that includes it), if `accept` takes it;
    /// otherwise it stays held back.
    pub fn take_deferred(
        &self,
        rec: &mut Recorder,
        accept: impl FnOnce(&Deferred) -> bool,
    ) -> Option<Deferred> {
        rec.deferred.take_if(|d| accept(d))
    }

    /// Records the dispatch held back by [`Gpu::defer`], if any.
    fn record_deferred(&self, rec: &mut Recorder) {
        if let Some(d) = rec.deferred.take() {
            let bufs: Vec<&wgpu::Buffer> = d.bufs.iter().collect();
            self.record(rec, &d.pipe, &d.key, &bufs, d.params, d.groups, 1);
        }
    }

    /// Records one dispatch whose grid [`grid`] accepted.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        rec: &mut Recorder,
        pipe: &wgpu::ComputePipeline,
        key: &str,
        bufs: &[&wgpu::Buffer],
        mut params: Params,
        groups: u64,
        z: u32,
    ) {
        if rec.slots == PARAM_SLOTS {
            self.flush(rec);
        }
        let (gx, gy) = (groups.min(65535), groups.div_ceil(groups.min(65535)));
        params[30] = gx as u32;
        params[31] = (gx * WG) as u32;
        let slot = rec.slots;
        rec.slots += 1;
        rec.dispatches += 1;
        rec.params.resize((slot * 256) as usize, 0);
        rec.params
            .extend(params.iter().flat_map(|w| w.to_le_bytes()));
        let bg = self.bind_group(pipe, key, slot, bufs);
        let timestamps = match &self.profiler {
            Some(pr) if rec.profiled.len() < PROFILED => {
                let i = 2 * rec.profiled.len() as u32;
                rec.profiled.push(key.to_string());
                Some(wgpu::ComputePassTimestampWrites {
                    query_set: &pr.set,
                    beginning_of_pass_write_index: Some(i),
                    end_of_pass_write_index: Some(i + 1),
                })
            }
            _ => None,
        };
        let own_pass = timestamps.is_some();
        if self.host_times.is_some() && rec.started.is_none() {
            rec.started = Some(std::time::Instant::now());
        }
        if own_pass {
            rec.pass = None;
        }
        let device = &self.device;
        let pass = match rec.pass.as_mut() {
            Some(pass) => pass,
            None => {
                let enc = rec
                    .encoder
                    .get_or_insert_with(|| device.create_command_encoder(&Default::default()));
                let pass = enc
                    .begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: timestamps,
                    })
                    .forget_lifetime();
                rec.pass.insert(pass)
            }
        };
        pass.set_pipeline(pipe);
        pass.set_bind_group(0, &bg, &[]);
        pass.dispatch_workgroups(gx as u32, gy as u32, z);
        if own_pass {
            rec.pass = None;
        }
    }

    /// The bind group of `bufs` and parameter slot `slot` for kernel `key`
    /// (cached; see [`BindGroups`]).
    fn bind_group(
        &self,
        pipe: &wgpu::ComputePipeline,
        key: &str,
        slot: u64,
        bufs: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let id = (
            key.to_string(),
            slot,
            bufs.iter().map(|b| (*b).clone()).collect::<Vec<_>>(),
        );
        let mut cache = lock(&self.bind_groups);
        if let Some(bg) = cache.get(&id) {
            return bg.clone();
        }
        let layout = pipe.get_bind_group_layout(0);
        let mut entries: Vec<wgpu::BindGroupEntry> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: bufs.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.params,
                offset: slot * 256,
                size: NonZeroU64::new(PARAM_BYTES),
            }),
        });
        let bg = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &entries,
        });
        if cache.len() >= BIND_GROUPS {
            cache.clear();
        }
        cache.insert(id, bg.clone());
        bg
    }

    /// Records a buffer-to-buffer copy.
    pub fn copy(
        &self,
        rec: &mut Recorder,
        src: &wgpu::Buffer,
        src_off: u64,
        dst: &wgpu::Buffer,
        dst_off: u64,
        bytes: u64,
    ) {
        self.record_deferred(rec);
        if bytes == 0 {
            return;
        }
        rec.pass = None;
        let device = &self.device;
        rec.encoder
            .get_or_insert_with(|| device.create_command_encoder(&Default::default()))
            .copy_buffer_to_buffer(src, src_off, dst, dst_off, bytes);
    }

    /// A frame buffer of `bytes` bytes for an op output.
    pub fn frame(&self, rec: &mut Recorder, bytes: u64) -> Result<Arc<GpuBuf>, ExecutionError> {
        if bytes > self.max_binding() {
            return Err(oom(bytes));
        }
        Ok(rec.alloc.alloc(&self.device, bytes, BufferUsage::Storage))
    }

    /// A frame buffer holding `data` (written before the next submit).
    pub fn upload_frame(
        &self,
        rec: &mut Recorder,
        data: &[u8],
    ) -> Result<Arc<GpuBuf>, ExecutionError> {
        let buf = self.frame(rec, data.len() as u64)?;
        self.write_padded(buf.buffer(), data);
        Ok(buf)
    }

    fn write_padded(&self, buf: &wgpu::Buffer, data: &[u8]) {
        if data.len().is_multiple_of(4) {
            if !data.is_empty() {
                self.queue.write_buffer(buf, 0, data);
            }
        } else {
            let mut v = data.to_vec();
            v.resize(data.len().next_multiple_of(4), 0);
            self.queue.write_buffer(buf, 0, &v);
        }
    }

    /// A persistent zero-filled buffer (KV caches).
    pub fn persistent(&self, bytes: u64) -> Result<GpuBuf, ExecutionError> {
        let size = bytes.max(4).next_multiple_of(4);
        if size > self.max_binding() {
            return Err(oom(bytes));
        }
        Ok(GpuBuf::persistent(self.device.create_buffer(
            &wgpu::BufferDescriptor {
                label: Some("state"),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            },
        )))
    }

    /// Uploads `bytes` (rows of `row_bytes`) in chunks no larger than one binding.
    pub fn upload_rows(&self, bytes: &[u8], row_bytes: usize) -> Result<Weight, ExecutionError> {
        let row_bytes = row_bytes.max(1);
        let rows = bytes.len() / row_bytes;
        let per = (self.max_binding().saturating_sub(4) as usize) / row_bytes;
        if per == 0 {
            return Err(oom(row_bytes as u64));
        }
        let mut chunks = Vec::new();
        let mut row0 = 0;
        while row0 < rows.max(1) {
            let n = per.min(rows - row0).max(if rows == 0 { 0 } else { 1 });
            let data = &bytes[row0 * row_bytes..(row0 + n) * row_bytes];
            let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("weight"),
                size: (data.len() as u64).max(4).next_multiple_of(4),
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            self.write_padded(&buf, data);
            chunks.push(Chunk { buf, row0, rows: n });
            if n == 0 {
                break;
            }
            row0 += n;
        }
        Ok(Weight { chunks, row_bytes })
    }

    /// The GPU copy of weight `t` seen as rows of `row_values` values: its raw
    /// encoding, or decoded to f32 when `as_f32`. Uploaded once per weight
    /// (keyed by the identity of its bytes) and kept while the model holds it.
    pub fn weight(
        &self,
        t: &Tensor,
        row_values: usize,
        as_f32: bool,
    ) -> Result<Arc<Weight>, ExecutionError> {
        let dtype = if as_f32 { DType::F32 } else { t.dtype() };
        let row_bytes = dtype.byte_size(&[row_values]).unwrap_or(0) as usize;
        let (key, alive) = match t.storage() {
            Storage::Device(d) => {
                let g = d.as_any().downcast_ref::<GpuBuf>().ok_or_else(|| {
                    ExecutionError::UnsupportedOp {
                        op: "weight from another device".into(),
                        backend: "wgpu".into(),
                        input_dtype: t.dtype(),
                    }
                })?;
                if as_f32 && t.dtype() != DType::F32 {
                    return Err(ExecutionError::UnsupportedOp {
                        op: "decode a device weight".into(),
                        backend: "wgpu".into(),
                        input_dtype: t.dtype(),
                    });
                }
                return Ok(Arc::new(Weight {
                    chunks: vec![Chunk {
                        buf: g.buffer().clone(),
                        row0: 0,
                        rows: t.numel() / row_values.max(1),
                    }],
                    row_bytes,
                }));
            }
            Storage::Bytes(b) => {
                let (key, alive) = WeightKey::of_bytes(b, row_values, as_f32);
                (Some(key), Some(alive))
            }
            Storage::F32(h) => (
                Some(WeightKey {
                    owner: Arc::as_ptr(h) as *const u8 as usize,
                    start: 0,
                    end: h.len(),
                    row_values,
                    as_f32,
                }),
                Some(Alive::Host(Arc::downgrade(h))),
            ),
            _ => (None, None),
        };
        if let Some(k) = &key {
            if let Some((_, w)) = lock(&self.weights).get(std::slice::from_ref(k)) {
                return Ok(w.clone());
            }
        }
        let w = if as_f32
            || matches!(
                t.storage(),
                Storage::State(_) | Storage::I32(_) | Storage::F32(_)
            ) {
            let v = t.read_f32("wgpu weight upload")?;
            self.upload_rows(bytemuck::cast_slice(&v), row_values * 4)?
        } else {
            let bytes = t.as_bytes().ok_or_else(|| ExecutionError::UnsupportedOp {
                op: "weight upload".into(),
                backend: "wgpu".into(),
                input_dtype: t.dtype(),
            })?;
            self.upload_rows(bytes, row_bytes)?
        };
        let w = Arc::new(w);
        if let (Some(k), Some(a)) = (key, alive) {
            self.evict_dead();
            lock(&self.weights).insert(vec![k], (vec![a], w.clone()));
        }
        Ok(w)
    }

    /// The rows of `parts` (host weights of one encoding, `row_values` values
    /// per row) laid end to end in one buffer, uploaded once, as the fused
    /// kernels read them; None when they differ in encoding, are not raw host
    /// bytes, or together exceed one binding (callers then use the parts).
    pub fn fused_weight(
        &self,
        parts: &[&Tensor],
        row_values: usize,
    ) -> Result<Option<Arc<Weight>>, ExecutionError> {
        let Some(dtype) = parts.first().map(|t| t.dtype()) else {
            return Ok(None);
        };
        let row_bytes = dtype.byte_size(&[row_values]).unwrap_or(0) as usize;
        let mut keys = Vec::new();
        let mut alive = Vec::new();
        let mut total = 0;
        for t in parts {
            let Storage::Bytes(b) = t.storage() else {
                return Ok(None);
            };
            if t.dtype() != dtype {
                return Ok(None);
            }
            let (key, owner) = WeightKey::of_bytes(b, row_values, false);
            total += key.end - key.start;
            keys.push(key);
            alive.push(owner);
        }
        if row_bytes == 0 || total % row_bytes != 0 || total as u64 + 4 > self.max_binding() {
            return Ok(None);
        }
        if let Some((_, w)) = lock(&self.weights).get(&keys) {
            return Ok(Some(w.clone()));
        }
        let mut bytes = Vec::with_capacity(total);
        for t in parts {
            bytes.extend_from_slice(t.as_bytes().unwrap_or_default());
        }
        let w = Arc::new(self.upload_rows(&bytes, row_bytes)?);
        self.evict_dead();
        lock(&self.weights).insert(keys, (alive, w.clone()));
        Ok(Some(w))
    }

    /// Weights currently cached (for tests of the lifecycle).
    pub fn cached_weights(&self) -> usize {
        self.evict_dead()
    }

    /// Submits pending work and reads `bytes` bytes of `buf` back.
    pub fn read(&self, buf: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>, ExecutionError> {
        let mut rec = self.recorder();
        self.read_unlocked(&mut rec, buf, bytes)
    }

    /// Submits what is recorded and waits until the GPU has run all of it.
    pub fn synchronize(&self) -> Result<(), ExecutionError> {
        let mut rec = self.recorder();
        self.flush(&mut rec);
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| ExecutionError::BackendInit {
                backend: "wgpu".into(),
                reason: format!("waiting for the GPU failed: {e}"),
            })?;
        Ok(())
    }

    /// Submits what is recorded with a copy of the i32 at the start of `buf`
    /// after it, and returns that value's read-back: it waits for this submit
    /// only, so work recorded and submitted later keeps the GPU busy.
    pub fn read_i32_later(
        &self,
        rec: &mut Recorder,
        buf: &wgpu::Buffer,
    ) -> Result<PendingId, ExecutionError> {
        let staging = lock(&self.id_readbacks).pop().unwrap_or_else(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("id readback"),
                size: 4,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        self.copy(rec, buf, 0, &staging, 0, 4);
        self.flush(rec);
        let submit = rec.last_submit.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let device = self.device.clone();
        let free = self.id_readbacks.clone();
        let in_flight = InFlight::new(&self.ids_in_flight);
        Ok(PendingId::new(move || {
            let _in_flight = in_flight;
            let fail = |what: String| ExecutionError::BackendInit {
                backend: "wgpu".into(),
                reason: format!("reading a token id back failed: {what}"),
            };
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: submit,
                    timeout: None,
                })
                .map_err(|e| fail(e.to_string()))?;
            rx.recv()
                .map_err(|e| fail(e.to_string()))?
                .map_err(|e| fail(e.to_string()))?;
            let id = {
                let view = staging
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| fail(e.to_string()))?;
                i32::from_le_bytes([view[0], view[1], view[2], view[3]])
            };
            staging.unmap();
            lock(&free).push(staging);
            Ok(id)
        }))
    }

    /// [`Gpu::read`] with the recorder already locked by the caller.
    pub fn read_unlocked(
        &self,
        rec: &mut Recorder,
        buf: &wgpu::Buffer,
        bytes: u64,
    ) -> Result<Vec<u8>, ExecutionError> {
        let size = bytes.max(4).next_multiple_of(4);
        let staging = match rec.readback.take() {
            Some(b) if b.size() >= size => b,
            _ => self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        self.copy(rec, buf, 0, &staging, 0, size);
        self.flush(rec);
        let slice = staging.slice(..size);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let fail = |what: String| ExecutionError::BackendInit {
            backend: "wgpu".into(),
            reason: format!("reading a buffer back failed: {what}"),
        };
        let waiting = std::time::Instant::now();
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| fail(e.to_string()))?;
        if let Some(h) = &self.host_times {
            if let Some(last) = lock(h).batches.last_mut() {
                last[2] = waiting.elapsed().as_secs_f64() * 1e3;
            }
        }
        rx.recv()
            .map_err(|e| fail(e.to_string()))?
            .map_err(|e| fail(e.to_string()))?;
        let out = {
            let view = slice.get_mapped_range().map_err(|e| fail(e.to_string()))?;
            view[..bytes as usize].to_vec()
        };
        staging.unmap();
        rec.readback = Some(staging);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wgpu::naga;

    /// Every kernel, for every encoding its dispatches name, parses,
    /// validates and translates to SPIR-V with naga (no adapter needed: the
    /// matrix-unit kernels are checked here even where no device runs them).
    #[test]
    fn every_kernel_translates_to_spirv() {
        let with_dtype = [
            "mm",
            "mm_coop",
            "mm_coop_qkv",
            "mm_coop_glu",
            "matvec",
            "matvec_qkv",
            "matvec_qkv_rope",
            "matvec_glu",
            "embed",
        ];
        let plain = [
            "elementwise",
            "norm",
            "group_norm",
            "conv",
            "copy_nd",
            "bmm",
            "reduce_axes",
            "avg_pool",
            "softmax",
            "argmax",
            "rope",
            "attention",
            "attention_gqa32",
            "attention_gqa64",
            "kv_append",
            "rope_append",
            "quant_q8",
            "attention_rows",
            "attention_coop",
            "rows_f16",
        ];
        let mut keys: Vec<String> = plain.iter().map(|k| k.to_string()).collect();
        for k in with_dtype {
            for name in DType::MATMUL_WEIGHTS.into_iter().filter_map(deq_name) {
                keys.push(format!("{k}:{name}"));
            }
        }
        for k in [
            "matvec_q8",
            "matvec_q8_qkv",
            "matvec_q8_qkv_rope",
            "matvec_q8_glu",
            "matvec_q8_cols",
        ] {
            for name in INT8_MATVEC.into_iter().filter_map(deq_name) {
                keys.push(format!("{k}:{name}"));
            }
        }
        for subgroups in [false, true] {
            for key in &keys {
                let src = kernel_source(key, subgroups).unwrap();
                let module = naga::front::wgsl::parse_str(&src)
                    .unwrap_or_else(|e| panic!("{key}: {}", e.emit_to_string(&src)));
                let info = naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::all(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("{key}: {}", e.emit_to_string(&src)));
                naga::back::spv::write_vec(&module, &info, &Default::default(), None)
                    .unwrap_or_else(|e| panic!("{key}: {e}"));
            }
        }
    }
}
