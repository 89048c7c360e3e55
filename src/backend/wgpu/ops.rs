//! Op implementations: inputs to GPU buffers, kernels recorded, device outputs.

use super::alloc::GpuBuf;
use super::gpu::{deq_name, Gpu, Params, Recorder, Weight, WG};
use super::{image, layout, products, reduce};
use crate::backend::{Mask, Op, PendingId, RopeStyle, Storage, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;
use std::sync::Arc;

/// Input rows per mm workgroup (TM in mm.wgsl).
const TM: usize = 8;
/// Weight rows per matvec and mm workgroup (NR in matvec.wgsl, mm.wgsl).
const MV_ROWS: usize = 4;
/// Bytes of one 8-bit activation block of 32 values (shaders/q8_block.wgsl).
const INT8_BLOCK_BYTES: u64 = 48;
/// 8-bit blocks per quant_q8 workgroup (Q8_WG / 8 in shaders/quant_q8.wgsl).
const QUANT_BLOCKS_PER_GROUP: u64 = 8;
/// Weight rows and input rows per workgroup of the matrix-unit product (BN,
/// BM in mm_coop.wgsl).
const COOP_ROWS: usize = 128;
const COOP_INPUT_ROWS: usize = 128;
/// Output columns per workgroup of the matrix-unit SwiGLU (GLU_COLS in
/// mm_coop_glu.wgsl).
const COOP_GLU_COLUMNS: usize = 64;
/// Eight-value chunks per rows_f16 workgroup (its workgroup size).
const F16_CHUNKS_PER_GROUP: u64 = 64;
/// Keys per tile of the attention kernel (TILE in attention.wgsl).
const ATTENTION_TILE: usize = 64;
/// Query rows per workgroup of the prompt attention (BR in
/// shaders/attention_rows.wgsl): the kernel for this many rows and more, with
/// head sizes up to 128.
const PROMPT_ATTENTION_ROWS: usize = 16;
/// Query rows per workgroup of the prompt attention on the matrix units (BR
/// in shaders/attention_coop.wgsl).
const COOP_ATTENTION_ROWS: usize = 64;
/// Attention workgroups wanted when few query rows split their keys.
const ATTENTION_GROUPS: usize = 256;
/// Workgroups from which the grouped split-key attention takes tiles of 64
/// keys instead of 32 (attention_gqa.wgsl).
const GROUPED_ATTENTION_GROUPS: usize = 256;
/// Keys a workgroup of the grouped split-key attention covers at most in
/// one-tile chunks: past this many chunks, chunks hold several tiles.
const GROUPED_ATTENTION_KEYS: usize = 4096;
/// Values per workgroup in the first argmax stage of long rows.
const ARGMAX_CHUNK: usize = 4096;

pub(super) fn unsupported(what: &str, dtype: DType) -> ExecutionError {
    ExecutionError::UnsupportedOp {
        op: what.to_string(),
        backend: "wgpu".into(),
        input_dtype: dtype,
    }
}

fn f(v: f32) -> u32 {
    v.to_bits()
}

/// A GPU handle for an activation input: device tensors as they are, host
/// values uploaded into a frame buffer.
pub(super) fn act(
    gpu: &Gpu,
    rec: &mut Recorder,
    t: &Tensor,
) -> Result<wgpu::Buffer, ExecutionError> {
    match t.storage() {
        Storage::Device(d) => d
            .as_any()
            .downcast_ref::<GpuBuf>()
            .map(|g| g.buffer().clone())
            .ok_or_else(|| unsupported("input on another device", t.dtype())),
        Storage::I32(v) => Ok(gpu
            .upload_frame(rec, bytemuck::cast_slice(v.as_slice()))?
            .buffer()
            .clone()),
        _ => {
            let v = t.read_f32("wgpu upload")?;
            Ok(gpu
                .upload_frame(rec, bytemuck::cast_slice(&v))?
                .buffer()
                .clone())
        }
    }
}

/// How attention of `rows` (query row, head) pairs, each over at most `keys`
/// keys, splits the keys (flash decoding): `(chunks, keys per chunk)` when there
/// are fewer rows than [`ATTENTION_GROUPS`] and at least four tiles of keys
/// (a decode step over a long context), `None` for one pass.
fn key_chunks(rows: usize, keys: usize) -> Option<(usize, usize)> {
    let tiles = keys.div_ceil(ATTENTION_TILE);
    if rows >= ATTENTION_GROUPS || tiles < 4 {
        return None;
    }
    let wanted = ATTENTION_GROUPS.div_ceil(rows).max(2);
    let chunk_len = tiles.div_ceil(wanted) * ATTENTION_TILE;
    Some((keys.div_ceil(chunk_len), chunk_len))
}

/// Tiles and chunks of the grouped split-key attention over `keys` keys of
/// `kv_heads` heads: `(keys a tile, chunks, keys per chunk)`. Tiles of 64 keys
/// once they alone give [`GROUPED_ATTENTION_GROUPS`] workgroups (one a kv
/// head and tile), else of 32 (more workgroups for a shorter context); one
/// tile a chunk up to [`GROUPED_ATTENTION_KEYS`] / tile chunks, longer chunks
/// past that. (H200, 8B shape, 8 kv heads: tiles of 32 decode 2.6 % faster
/// than tiles of 64 at 512 keys, 4.6 % slower at 2048.)
fn grouped_key_chunks(keys: usize, kv_heads: usize) -> (usize, usize, usize) {
    let tile = if kv_heads * keys.div_ceil(64) >= GROUPED_ATTENTION_GROUPS {
        64
    } else {
        32
    };
    let tiles = keys.div_ceil(tile);
    let chunk_len = tiles.div_ceil(GROUPED_ATTENTION_KEYS / tile) * tile;
    (tile, keys.div_ceil(chunk_len), chunk_len)
}

/// The shapes of an attention (Sdpa): `sq` query rows of `heads` heads over
/// `n` keys of `kv_heads` heads, head sizes `d` (queries, keys) and `dv`
/// (values).
#[derive(Debug, Clone, Copy)]
pub(super) struct AttentionShape {
    pub sq: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub n: usize,
    pub d: usize,
    pub dv: usize,
}

impl AttentionShape {
    /// One query row whose heads share key/value heads in groups that
    /// attention_gqa.wgsl takes whole: at most four query heads a key/value
    /// head, their queries together at most 1024 values, d a multiple of 4,
    /// dv at most 256.
    fn grouped_decode(&self) -> bool {
        let group = self.heads / self.kv_heads.max(1);
        self.sq == 1
            && self.kv_heads > 0
            && self.heads.is_multiple_of(self.kv_heads)
            && group <= 4
            && group * self.d <= 1024
            && self.d.is_multiple_of(4)
            && self.dv <= 256
    }
}

/// The kernel that runs an attention (Sdpa) under `mask` (not a padding
/// mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AttentionKernel {
    /// One query row over many keys, its query heads grouped by key/value
    /// head: the keys split in `chunks` of `chunk_len` (attention_gqa.wgsl,
    /// then attention.wgsl's stage 2).
    GroupedSplitKeys {
        tile: usize,
        chunks: usize,
        chunk_len: usize,
    },
    /// Few rows over many keys: the keys split in `chunks` of `chunk_len`
    /// (attention.wgsl, stages 1 and 2).
    SplitKeys { chunks: usize, chunk_len: usize },
    /// A prompt on the matrix units (attention_coop.wgsl).
    PromptOnMatrixUnits,
    /// A prompt on f32 math (attention_rows.wgsl).
    Prompt,
    /// One workgroup a row (attention.wgsl, stage 0).
    PerRow,
}

/// [`AttentionKernel`] for the shapes given.
pub(super) fn attention_kernel(gpu: &Gpu, shape: AttentionShape, mask: &Mask) -> AttentionKernel {
    let AttentionShape {
        sq,
        heads,
        n,
        d,
        dv,
        ..
    } = shape;
    // A row attends to at most the window's keys under a sliding mask.
    let span = match mask {
        Mask::Sliding(w) => n.min(*w),
        _ => n,
    };
    let prompt = sq >= PROMPT_ATTENTION_ROWS;
    match key_chunks(sq * heads, span) {
        Some(_) if shape.grouped_decode() => {
            let (tile, chunks, chunk_len) = grouped_key_chunks(span, shape.kv_heads);
            AttentionKernel::GroupedSplitKeys {
                tile,
                chunks,
                chunk_len,
            }
        }
        Some((chunks, chunk_len)) => AttentionKernel::SplitKeys { chunks, chunk_len },
        None if prompt && gpu.coop_matmul() && [d, dv].iter().all(|&n| n % 16 == 0 && n <= 128) => {
            AttentionKernel::PromptOnMatrixUnits
        }
        None if prompt && d <= 128 && dv <= 128 => AttentionKernel::Prompt,
        None => AttentionKernel::PerRow,
    }
}

/// The attention kernel of op `Sdpa` on inputs of these shapes (Q, K, V);
/// `None` for another op or a padding mask.
pub(super) fn sdpa_kernel(gpu: &Gpu, op: &Op, inputs: &[TensorInfo]) -> Option<AttentionKernel> {
    let Op::Sdpa { mask, kv_len, .. } = op else {
        return None;
    };
    let [q, k, v] = inputs else { return None };
    if let Mask::Padding(_) = mask {
        return None;
    }
    let shape = AttentionShape {
        sq: q.shape[0],
        heads: q.shape[1],
        kv_heads: k.shape[1],
        n: kv_len.unwrap_or(k.shape[0]),
        d: q.shape[2],
        dv: v.shape[2],
    };
    Some(attention_kernel(gpu, shape, mask))
}

/// A frame buffer for output `info`, and the device tensor over it.
pub(super) fn out(
    gpu: &Gpu,
    rec: &mut Recorder,
    info: &TensorInfo,
) -> Result<(Tensor, wgpu::Buffer), ExecutionError> {
    let buf = gpu.frame(rec, info.numel() as u64 * 4)?;
    let b = buf.buffer().clone();
    Ok((Tensor::from_device(info.clone(), buf), b))
}

fn matmul(
    gpu: &Gpu,
    rec: &mut Recorder,
    x: &wgpu::Buffer,
    m: usize,
    k: usize,
    wt: &Tensor,
    y: &wgpu::Buffer,
) -> Result<(), ExecutionError> {
    let name = deq_name(wt.dtype()).ok_or_else(|| unsupported("Matmul", wt.dtype()))?;
    let n = wt.shape()[0];
    let decode = if m == 1 {
        Some(decode_operand(gpu, rec, x, k, wt.dtype(), "matvec")?)
    } else {
        None
    };
    with_weight(gpu, rec, wt, k, false, |gpu, rec, w| {
        for c in &w.chunks {
            let mut p: Params = [0; 32];
            p[..6].copy_from_slice(&[
                m as u32,
                c.rows as u32,
                k as u32,
                w.row_bytes as u32,
                c.row0 as u32,
                n as u32,
            ]);
            if let Some((kernel, xd)) = &decode {
                gpu.dispatch(
                    rec,
                    &format!("{kernel}:{name}"),
                    &[&c.buf, xd, y],
                    p,
                    c.rows.div_ceil(MV_ROWS) as u64,
                    1,
                )?;
            } else {
                mm(gpu, rec, wt.dtype(), &[&c.buf, x, y], p, c.rows, m)?;
            }
        }
        Ok(())
    })
}

/// The decode matvec kernel `base` (`matvec`, `matvec_qkv`, `matvec_glu`)
/// for a weight of `dtype` and its x operand: the 8-bit variant (`matvec_q8`,
/// ...) with the row as 8-bit blocks ([`int8_operand`]) where
/// [`Gpu::int8_matvec`] says so, else `base` with `x`.
fn decode_operand(
    gpu: &Gpu,
    rec: &mut Recorder,
    x: &wgpu::Buffer,
    k: usize,
    dtype: DType,
    base: &str,
) -> Result<(String, wgpu::Buffer), ExecutionError> {
    if !gpu.int8_matvec(dtype) {
        return Ok((base.to_string(), x.clone()));
    }
    let kernel = base.replacen("matvec", "matvec_q8", 1);
    Ok((kernel, int8_operand(gpu, rec, x, 1, k)?))
}

/// The `m` rows of `k` values in `x` as 8-bit blocks (shaders/quant_q8.wgsl,
/// one dispatch), or the blocks an earlier op of this batch already wrote
/// for `x` ([`Recorder::int8_rows`]: a one-row norm's output, or the operand
/// quantized for an earlier product of the same rows).
fn int8_operand(
    gpu: &Gpu,
    rec: &mut Recorder,
    x: &wgpu::Buffer,
    m: usize,
    k: usize,
) -> Result<wgpu::Buffer, ExecutionError> {
    if let Some(xq) = rec.int8_rows.get(x) {
        return Ok(xq.clone());
    }
    let blocks = k.div_ceil(32);
    let xq = gpu.frame(rec, (m * blocks) as u64 * INT8_BLOCK_BYTES)?;
    let mut p: Params = [0; 32];
    p[0] = k as u32;
    p[1] = blocks as u32;
    p[2] = m as u32;
    p[24] = f32::NAN.to_bits();
    gpu.dispatch(
        rec,
        "quant_q8",
        &[x, xq.buffer()],
        p,
        ((m * blocks) as u64).div_ceil(QUANT_BLOCKS_PER_GROUP),
        1,
    )?;
    let xq = xq.buffer().clone();
    rec.int8_rows.insert(x.clone(), xq.clone());
    Ok(xq)
}

/// The `m` rows of `k` values in `x` as f16 rows of `k` rounded up to 32
/// values, zero past `k` (shaders/rows_f16.wgsl, one dispatch), the operand of
/// the matrix-unit product; or the rows an earlier product of this batch
/// already converted ([`Recorder::f16_rows`]).
fn f16_operand(
    gpu: &Gpu,
    rec: &mut Recorder,
    x: &wgpu::Buffer,
    m: usize,
    k: usize,
) -> Result<wgpu::Buffer, ExecutionError> {
    if let Some(xh) = rec.f16_rows.get(&(x.clone(), m, k)) {
        return Ok(xh.clone());
    }
    let padded = k.div_ceil(32) * 32;
    let xh = gpu.frame(rec, (m * padded * 2) as u64)?;
    let mut p: Params = [0; 32];
    p[0] = k as u32;
    p[1] = padded as u32;
    p[2] = m as u32;
    let groups = ((m * padded / 8) as u64).div_ceil(F16_CHUNKS_PER_GROUP);
    gpu.dispatch(rec, "rows_f16", &[x, xh.buffer()], p, groups, 1)?;
    let xh = xh.buffer().clone();
    rec.f16_rows.insert((x.clone(), m, k), xh.clone());
    Ok(xh)
}

/// One product of `m > 1` input rows with `rows` weight rows of a chunk
/// (`bufs` = weights of `dtype`, x, y; parameters as shaders/mm.wgsl takes
/// them): on 8-bit activations where [`Gpu::int8_product`] says so
/// (shaders/matvec_q8_cols.wgsl: the weights read once for all rows, as in
/// decode); else on the matrix units where the device has them
/// (shaders/mm_coop.wgsl, f16 operands, f32 sums), else the f32 tiled kernel.
fn mm(
    gpu: &Gpu,
    rec: &mut Recorder,
    dtype: DType,
    bufs: &[&wgpu::Buffer; 3],
    p: Params,
    rows: usize,
    m: usize,
) -> Result<(), ExecutionError> {
    let name = deq_name(dtype).ok_or_else(|| unsupported("Matmul", dtype))?;
    if gpu.int8_product(dtype, m) {
        let xq = int8_operand(gpu, rec, bufs[1], m, p[2] as usize)?;
        let groups = rows.div_ceil(MV_ROWS) as u64;
        let kernel = format!("matvec_q8_cols:{name}");
        return gpu.dispatch(rec, &kernel, &[bufs[0], &xq, bufs[2]], p, groups, 1);
    }
    if gpu.coop_matmul() {
        let kernel = format!("mm_coop:{name}");
        let groups = rows.div_ceil(COOP_ROWS);
        coop_dispatch(
            gpu,
            rec,
            &kernel,
            bufs[0],
            bufs[1],
            &[bufs[2]],
            p,
            m,
            groups,
        )
    } else {
        let groups = rows.div_ceil(MV_ROWS) as u64;
        gpu.dispatch(
            rec,
            &format!("mm:{name}"),
            bufs,
            p,
            groups,
            m.div_ceil(TM) as u32,
        )
    }
}

/// Whether a product of `m` input rows with a weight of `dtype` runs on the
/// matrix units (shaders/mm_coop.wgsl): not on 8-bit activations, and the
/// device has them.
fn coop_product(gpu: &Gpu, dtype: DType, m: usize) -> bool {
    m > 1 && !gpu.int8_product(dtype, m) && gpu.coop_matmul()
}

/// One matrix-unit product dispatch: kernel `kernel` (mm_coop.wgsl with its
/// output file) of weight buffer `w` with the `m` rows of `x` (as f16 rows,
/// [`f16_operand`]) into `outs`; `p` holds M and K at a.x and a.z, and gets
/// the f16 row length in vec4<f16> at c.x; `groups` workgroups of output
/// columns, each for every block of input rows.
#[allow(clippy::too_many_arguments)]
fn coop_dispatch(
    gpu: &Gpu,
    rec: &mut Recorder,
    kernel: &str,
    w: &wgpu::Buffer,
    x: &wgpu::Buffer,
    outs: &[&wgpu::Buffer],
    mut p: Params,
    m: usize,
    groups: usize,
) -> Result<(), ExecutionError> {
    let k = p[2] as usize;
    let xh = f16_operand(gpu, rec, x, m, k)?;
    p[8] = (k.div_ceil(32) * 8) as u32;
    let mut bufs = vec![w, &xh];
    bufs.extend_from_slice(outs);
    let z = m.div_ceil(COOP_INPUT_ROWS) as u32;
    gpu.dispatch(rec, kernel, &bufs, p, groups as u64, z)
}

/// Products of `x` with consecutive row ranges (`rows` each) of the fused
/// weight `w` (one chunk, from [`Gpu::fused_weight`]), range `i` into `ys[i]`:
/// three ranges (Q, K, V) in one dispatch, a matvec for one input row or on
/// the matrix units (shaders/mm_coop_qkv.wgsl) where [`coop_product`] says so;
/// else one mm dispatch per range.
#[allow(clippy::too_many_arguments)]
fn fused_products(
    gpu: &Gpu,
    rec: &mut Recorder,
    x: &wgpu::Buffer,
    m: usize,
    k: usize,
    w: &Weight,
    dtype: DType,
    rows: &[usize],
    ys: &[&wgpu::Buffer],
) -> Result<(), ExecutionError> {
    let name = deq_name(dtype).ok_or_else(|| unsupported("FusedQkv", dtype))?;
    let c = single_chunk(w)?;
    if let ([q, kr, v], [yq, yk, yv], 1) = (rows, ys, m) {
        let n = q + kr + v;
        let mut p: Params = [0; 32];
        p[..4].copy_from_slice(&[1, n as u32, k as u32, w.row_bytes as u32]);
        p[8] = *q as u32;
        p[9] = (q + kr) as u32;
        let (kernel, xd) = decode_operand(gpu, rec, x, k, dtype, "matvec_qkv")?;
        // Held back: a FusedRopeAppend of these outputs next does its work in
        // this dispatch ([`qkv_with_rope`]).
        return gpu.defer(
            rec,
            &format!("{kernel}:{name}"),
            &[&c.buf, &xd, yq, yk, yv],
            p,
            n.div_ceil(MV_ROWS) as u64,
        );
    }
    if let ([q, kr, v], [yq, yk, yv], true) = (rows, ys, coop_product(gpu, dtype, m)) {
        let n = q + kr + v;
        let mut p: Params = [0; 32];
        p[..4].copy_from_slice(&[m as u32, n as u32, k as u32, w.row_bytes as u32]);
        p[9] = *q as u32;
        p[10] = (q + kr) as u32;
        let kernel = format!("mm_coop_qkv:{name}");
        let groups = n.div_ceil(COOP_ROWS);
        return coop_dispatch(gpu, rec, &kernel, &c.buf, x, &[yq, yk, yv], p, m, groups);
    }
    let mut base = 0;
    for (&n, y) in rows.iter().zip(ys) {
        let mut p: Params = [0; 32];
        p[..7].copy_from_slice(&[
            m as u32,
            n as u32,
            k as u32,
            w.row_bytes as u32,
            0,
            n as u32,
            base as u32,
        ]);
        mm(gpu, rec, dtype, &[&c.buf, x, y], p, n, m)?;
        base += n;
    }
    Ok(())
}

/// FusedRopeAppend of one token's q, k and v, for [`qkv_with_rope`].
struct TokenRope<'a> {
    /// Query and key/value heads.
    heads: [usize; 2],
    /// Head sizes of q/k and of v, and the rotated dims.
    dims: [usize; 3],
    /// The token's position: its cos/sin table row and cache slot.
    pos: usize,
    /// The cos and sin tables (rotated / 2 values a row).
    tables: [&'a wgpu::Buffer; 2],
    /// The rotated q, the key cache, the value cache.
    outs: [&'a wgpu::Buffer; 3],
}

/// Storage buffers one stage of shaders/matvec_qkv_rope.wgsl binds.
const QKV_ROPE_STORAGE_BUFFERS: u32 = 10;

/// FusedRopeAppend (RoPE style normal, one token) done by the one-row Q/K/V
/// product that [`fused_products`] held back, where its outputs are `qkv`:
/// that dispatch becomes shaders/matvec_qkv_rope.wgsl, which also writes the
/// rotated q and the cache rows (same sums, same rotation). False, with
/// nothing recorded, where there is no such product to take over.
fn qkv_with_rope(
    gpu: &Gpu,
    rec: &mut Recorder,
    qkv: [&wgpu::Buffer; 3],
    r: TokenRope<'_>,
) -> Result<bool, ExecutionError> {
    let ([heads, kv_heads], [d, dv, rot]) = (r.heads, r.dims);
    let rows = [
        heads * d,
        (heads + kv_heads) * d,
        (heads + kv_heads) * d + kv_heads * dv,
    ];
    let fits = gpu.limits.max_storage_buffers_per_shader_stage >= QKV_ROPE_STORAGE_BUFFERS
        && d % 2 == 0
        && rot % 2 == 0
        && rot <= d;
    let taken = gpu.take_deferred(rec, |p| {
        let base = p.key.split(':').next();
        fits && matches!(base, Some("matvec_qkv" | "matvec_q8_qkv"))
            && p.bufs.len() == 5
            && p.bufs[2..].iter().zip(qkv).all(|(a, b)| a == b)
            && [p.params[8], p.params[9], p.params[1]] == rows.map(|n| n as u32)
    });
    let Some(p) = taken else {
        return Ok(false);
    };
    let key = p.key.replacen("qkv", "qkv_rope", 1);
    let mut params = p.params;
    params[12..15].copy_from_slice(&[d as u32, rot as u32, r.pos as u32]);
    params[16] = (r.pos * kv_heads * d) as u32;
    params[17] = (r.pos * kv_heads * dv) as u32;
    let mut bufs: Vec<&wgpu::Buffer> = p.bufs.iter().collect();
    bufs.extend(r.tables);
    bufs.extend(r.outs);
    gpu.dispatch(rec, &key, &bufs, params, p.groups, 1)?;
    Ok(true)
}

/// SwiGLU of `m` input rows against the fused gate-then-up weight `w` (`n`
/// rows each): silu(gate) * up into `y` ([m, n]) in one dispatch, a matvec
/// for one row (shaders/matvec_glu.wgsl), else on the matrix units
/// (shaders/mm_coop_glu.wgsl; the caller checked [`coop_product`]).
#[allow(clippy::too_many_arguments)]
fn fused_glu(
    gpu: &Gpu,
    rec: &mut Recorder,
    x: &wgpu::Buffer,
    m: usize,
    k: usize,
    w: &Weight,
    dtype: DType,
    n: usize,
    y: &wgpu::Buffer,
) -> Result<(), ExecutionError> {
    let name = deq_name(dtype).ok_or_else(|| unsupported("FusedSwiGlu", dtype))?;
    let c = single_chunk(w)?;
    let mut p: Params = [0; 32];
    p[..4].copy_from_slice(&[m as u32, (2 * n) as u32, k as u32, w.row_bytes as u32]);
    if m > 1 {
        p[5] = n as u32;
        p[9] = n as u32;
        let kernel = format!("mm_coop_glu:{name}");
        let groups = n.div_ceil(COOP_GLU_COLUMNS);
        return coop_dispatch(gpu, rec, &kernel, &c.buf, x, &[y], p, m, groups);
    }
    p[8] = n as u32;
    let (kernel, xd) = decode_operand(gpu, rec, x, k, dtype, "matvec_glu")?;
    gpu.dispatch(
        rec,
        &format!("{kernel}:{name}"),
        &[&c.buf, &xd, y],
        p,
        n.div_ceil(2) as u64,
        1,
    )
}

/// The one chunk of a fused weight.
fn single_chunk(w: &Weight) -> Result<&super::gpu::Chunk, ExecutionError> {
    match w.chunks.as_slice() {
        [c] => Ok(c),
        _ => Err(unsupported(
            "fused weight larger than one binding",
            DType::F32,
        )),
    }
}

/// The wgpu buffer of a tensor held on this backend.
fn device_buf(t: &Tensor) -> Option<&GpuBuf> {
    match t.storage() {
        Storage::Device(d) => d.as_any().downcast_ref::<GpuBuf>(),
        _ => None,
    }
}

/// Fetches (uploading once) weight `t` and runs `body` with it.
fn with_weight(
    gpu: &Gpu,
    rec: &mut Recorder,
    t: &Tensor,
    row_values: usize,
    as_f32: bool,
    body: impl FnOnce(&Gpu, &mut Recorder, &Weight) -> Result<(), ExecutionError>,
) -> Result<(), ExecutionError> {
    let w = gpu.weight(t, row_values, as_f32)?;
    body(gpu, rec, &w)
}

/// A small vector weight (norm gain, bias) decoded to f32, one buffer.
pub(super) fn vector(gpu: &Gpu, t: &Tensor) -> Result<wgpu::Buffer, ExecutionError> {
    let w: Arc<Weight> = gpu.weight(t, t.numel().max(1), true)?;
    w.chunks
        .first()
        .map(|c| c.buf.clone())
        .ok_or_else(|| unsupported("empty vector weight", t.dtype()))
}

/// A table weight (rows of `row_values` f32 values) in one buffer.
pub(super) fn vector_rows(
    gpu: &Gpu,
    t: &Tensor,
    row_values: usize,
) -> Result<wgpu::Buffer, ExecutionError> {
    let w: Arc<Weight> = gpu.weight(t, row_values.max(1), true)?;
    match w.chunks.as_slice() {
        [c] => Ok(c.buf.clone()),
        _ => Err(unsupported("table larger than one binding", t.dtype())),
    }
}

fn elementwise(
    gpu: &Gpu,
    rec: &mut Recorder,
    code: u32,
    a: (&wgpu::Buffer, &[usize]),
    b: Option<(&wgpu::Buffer, &[usize])>,
    scalars: [f32; 2],
    y: (&wgpu::Buffer, &[usize]),
) -> Result<(), ExecutionError> {
    let pad = |s: &[usize]| -> [usize; 4] {
        let mut d = [1; 4];
        for (i, &v) in s.iter().rev().enumerate().take(4) {
            d[3 - i] = v;
        }
        d
    };
    let od = pad(y.1);
    let strides = |s: &[usize]| -> [u32; 4] {
        let d = pad(s);
        let mut st = [0u32; 4];
        let mut acc = 1usize;
        for i in (0..4).rev() {
            st[i] = if d[i] == 1 && od[i] != 1 {
                0
            } else {
                acc as u32
            };
            acc *= d[i];
        }
        st
    };
    let count: usize = y.1.iter().product();
    let mut p: Params = [0; 32];
    p[0] = count as u32;
    p[1] = code;
    for i in 0..4 {
        p[4 + i] = od[i] as u32;
    }
    p[8..12].copy_from_slice(&strides(a.1));
    let bb = match b {
        Some((buf, s)) => {
            p[12..16].copy_from_slice(&strides(s));
            buf
        }
        None => a.0,
    };
    p[16] = f(scalars[0]);
    p[17] = f(scalars[1]);
    gpu.dispatch(
        rec,
        "elementwise",
        &[a.0, bb, y.0],
        p,
        (count as u64).div_ceil(WG),
        1,
    )
}

/// A row-wise norm of `x` (or of `x + skip.0`, written to `skip.1`) into `y`.
#[allow(clippy::too_many_arguments)]
fn norm(
    gpu: &Gpu,
    rec: &mut Recorder,
    x: &wgpu::Buffer,
    rows: usize,
    d: usize,
    mode: u32,
    eps: f32,
    g: &wgpu::Buffer,
    bias: Option<&wgpu::Buffer>,
    skip: Option<(&wgpu::Buffer, &wgpu::Buffer)>,
    y: &wgpu::Buffer,
) -> Result<(), ExecutionError> {
    let mut p: Params = [0; 32];
    p[0] = rows as u32;
    p[1] = d as u32;
    p[2] = mode | if skip.is_some() { 4 } else { 0 };
    p[4] = f(eps);
    // Without a residual, `r` and `s` are bound to buffers the kernel leaves
    // alone; so is `xq` without the 8-bit copy.
    let (r, s) = skip.unwrap_or((g, y));
    let mut xq = gpu.spare.clone();
    if rows == 1 && d.is_multiple_of(32) && gpu.int8_activations() {
        xq = gpu
            .frame(rec, (d / 32) as u64 * INT8_BLOCK_BYTES)?
            .buffer()
            .clone();
        p[2] |= 8;
        p[24] = f32::NAN.to_bits();
    }
    gpu.dispatch(
        rec,
        "norm",
        &[x, r, g, bias.unwrap_or(g), y, s, &xq],
        p,
        rows as u64,
        1,
    )?;
    if p[2] & 8 != 0 {
        rec.int8_rows.insert(y.clone(), xq);
    }
    Ok(())
}

/// The elementwise.wgsl code and scalar parameters of a one-input
/// element-wise op; None for other ops.
pub(super) fn unary_code(op: &Op) -> Option<(u32, [f32; 2])> {
    let one = |code: u32, s: f32| Some((code, [s, 0.0]));
    match *op {
        Op::Scale(s) => one(10, s),
        Op::Silu => one(11, 0.0),
        Op::Gelu => one(12, 0.0),
        Op::GeluTanh => one(13, 0.0),
        Op::Relu => one(14, 0.0),
        Op::Sigmoid => one(15, 0.0),
        Op::Tanh => one(16, 0.0),
        Op::Softcap(c) => one(17, c),
        Op::LeakyRelu(s) => one(18, s),
        Op::Sqrt => one(20, 0.0),
        Op::Log => one(21, 0.0),
        Op::Exp => one(22, 0.0),
        Op::Cos => one(23, 0.0),
        Op::Sin => one(24, 0.0),
        Op::Reciprocal => one(25, 0.0),
        Op::Neg => one(26, 0.0),
        Op::Erf => one(27, 0.0),
        Op::PowScalar(e) => one(28, e),
        Op::Softplus => one(29, 0.0),
        Op::Ceil => one(30, 0.0),
        Op::Clamp { lo, hi } => Some((31, [lo, hi])),
        _ => None,
    }
}

fn rms_mode(add_one: bool) -> u32 {
    u32::from(add_one)
}

/// Runs `op` (already checked by `Op::infer`, giving `outs`).
pub fn run(
    gpu: &Gpu,
    op: &Op,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    match op {
        Op::Reshape(shape) => return Ok(vec![inputs[0].reshaped(shape)?]),
        Op::Shape => {
            let dims = inputs[0].shape().iter().map(|&d| d as i64).collect();
            return Ok(vec![Tensor::from_i64(&[inputs[0].shape().len()], dims)?]);
        }
        Op::Argmax | Op::Sample(_) => return argmax(gpu, op, inputs),
        Op::FusedRopeAppend { pos, .. }
            if device_buf(&inputs[5]).is_none() || device_buf(&inputs[6]).is_none() =>
        {
            return rope_append_parts(gpu, op, *pos, inputs, outs)
        }
        _ => {}
    }
    let mut rec = gpu.op_recorder();
    let rec = &mut *rec;
    let last = |t: &Tensor| t.shape().last().copied().unwrap_or(1);
    if let Some((code, scalars)) = unary_code(op) {
        let a = act(gpu, rec, &inputs[0])?;
        let (t, y) = out(gpu, rec, &outs[0])?;
        let s = outs[0].shape.as_slice();
        elementwise(gpu, rec, code, (&a, s), None, scalars, (&y, s))?;
        return Ok(vec![t]);
    }
    match op {
        Op::Matmul => {
            let k = last(&inputs[0]);
            let m = inputs[0].numel() / k.max(1);
            let x = act(gpu, rec, &inputs[0])?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            matmul(gpu, rec, &x, m, k, &inputs[1], &y)?;
            Ok(vec![t])
        }
        Op::FusedQkv => {
            let k = last(&inputs[0]);
            let m = inputs[0].numel() / k.max(1);
            let x = act(gpu, rec, &inputs[0])?;
            let mut res = Vec::new();
            let mut ys = Vec::new();
            for info in outs {
                let (t, y) = out(gpu, rec, info)?;
                res.push(t);
                ys.push(y);
            }
            let parts: Vec<&Tensor> = inputs[1..].iter().collect();
            match gpu.fused_weight(&parts, k)? {
                Some(w) => {
                    let rows: Vec<usize> = parts.iter().map(|t| t.shape()[0]).collect();
                    let ys: Vec<&wgpu::Buffer> = ys.iter().collect();
                    fused_products(gpu, rec, &x, m, k, &w, parts[0].dtype(), &rows, &ys)?;
                }
                None => {
                    for (w, y) in parts.iter().zip(&ys) {
                        matmul(gpu, rec, &x, m, k, w, y)?;
                    }
                }
            }
            Ok(res)
        }
        Op::FusedSwiGlu => {
            let k = last(&inputs[0]);
            let m = inputs[0].numel() / k.max(1);
            let x = act(gpu, rec, &inputs[0])?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            let n = inputs[1].shape()[0];
            let s = outs[0].shape.as_slice();
            let fused = gpu.fused_weight(&[&inputs[1], &inputs[2]], k)?;
            match fused {
                Some(w) if m == 1 || coop_product(gpu, inputs[1].dtype(), m) => {
                    fused_glu(gpu, rec, &x, m, k, &w, inputs[1].dtype(), n, &y)?
                }
                _ => {
                    let (_tg, g) = out(gpu, rec, &outs[0])?;
                    let (_tu, u) = out(gpu, rec, &outs[0])?;
                    match &fused {
                        Some(w) => fused_products(
                            gpu,
                            rec,
                            &x,
                            m,
                            k,
                            w,
                            inputs[1].dtype(),
                            &[n, n],
                            &[&g, &u],
                        )?,
                        None => {
                            matmul(gpu, rec, &x, m, k, &inputs[1], &g)?;
                            matmul(gpu, rec, &x, m, k, &inputs[2], &u)?;
                        }
                    }
                    elementwise(gpu, rec, 4, (&g, s), Some((&u, s)), [0.0; 2], (&y, s))?;
                }
            }
            Ok(vec![t])
        }
        Op::FusedNormMatmul { eps, add_one } => {
            let k = last(&inputs[0]);
            let m = inputs[0].numel() / k.max(1);
            let x = act(gpu, rec, &inputs[0])?;
            let g = vector(gpu, &inputs[1])?;
            let (_tn, normed) = out(gpu, rec, inputs[0].info())?;
            norm(
                gpu,
                rec,
                &x,
                m,
                k,
                rms_mode(*add_one),
                *eps,
                &g,
                None,
                None,
                &normed,
            )?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            matmul(gpu, rec, &normed, m, k, &inputs[2], &y)?;
            Ok(vec![t])
        }
        Op::FusedSkipNorm { eps, add_one } => {
            let d = last(&inputs[0]);
            let rows = inputs[0].numel() / d.max(1);
            let a = act(gpu, rec, &inputs[0])?;
            let b = act(gpu, rec, &inputs[1])?;
            let g = vector(gpu, &inputs[2])?;
            let (tsum, sum) = out(gpu, rec, &outs[1])?;
            let (tn, y) = out(gpu, rec, &outs[0])?;
            norm(
                gpu,
                rec,
                &a,
                rows,
                d,
                rms_mode(*add_one),
                *eps,
                &g,
                None,
                Some((&b, &sum)),
                &y,
            )?;
            Ok(vec![tn, tsum])
        }
        Op::RmsNorm { eps, add_one } => {
            let d = last(&inputs[0]);
            let rows = inputs[0].numel() / d.max(1);
            let x = act(gpu, rec, &inputs[0])?;
            let g = vector(gpu, &inputs[1])?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            norm(
                gpu,
                rec,
                &x,
                rows,
                d,
                rms_mode(*add_one),
                *eps,
                &g,
                None,
                None,
                &y,
            )?;
            Ok(vec![t])
        }
        Op::LayerNorm { eps } => {
            let d = last(&inputs[0]);
            let rows = inputs[0].numel() / d.max(1);
            let x = act(gpu, rec, &inputs[0])?;
            let g = vector(gpu, &inputs[1])?;
            let b = inputs.get(2).map(|b| vector(gpu, b)).transpose()?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            let mode = if b.is_some() { 2 } else { 3 };
            norm(gpu, rec, &x, rows, d, mode, *eps, &g, b.as_ref(), None, &y)?;
            Ok(vec![t])
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::SwiGlu | Op::GeGlu => {
            let code = match op {
                Op::Add => 0,
                Op::Sub => 1,
                Op::Mul => 2,
                Op::Div => 3,
                Op::SwiGlu => 4,
                _ => 5,
            };
            let a = act(gpu, rec, &inputs[0])?;
            let b = act(gpu, rec, &inputs[1])?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            elementwise(
                gpu,
                rec,
                code,
                (&a, inputs[0].shape()),
                Some((&b, inputs[1].shape())),
                [0.0; 2],
                (&y, &outs[0].shape),
            )?;
            Ok(vec![t])
        }
        Op::Softmax => {
            let d = last(&inputs[0]);
            let rows = inputs[0].numel() / d.max(1);
            let x = act(gpu, rec, &inputs[0])?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            let mut p: Params = [0; 32];
            p[0] = rows as u32;
            p[1] = d as u32;
            gpu.dispatch(rec, "softmax", &[&x, &y], p, rows as u64, 1)?;
            Ok(vec![t])
        }
        Op::Slice { axis, start, end } => {
            let shape = inputs[0].shape();
            let outer: usize = shape[..*axis].iter().product();
            let inner: usize = shape[axis + 1..].iter().product();
            let x = act(gpu, rec, &inputs[0])?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            let (len, n) = (shape[*axis], end - start);
            for o in 0..outer {
                let src = ((o * len + start) * inner * 4) as u64;
                let dst = (o * n * inner * 4) as u64;
                gpu.copy(rec, &x, src, &y, dst, (n * inner * 4) as u64);
            }
            Ok(vec![t])
        }
        Op::Rope {
            style,
            rot_dim,
            pos,
            base,
        } => {
            let (s, heads, d) = (
                inputs[0].shape()[0],
                inputs[0].shape()[1],
                inputs[0].shape()[2],
            );
            let half = rot_dim / 2;
            let x = act(gpu, rec, &inputs[0])?;
            // Tables: uploaded once (weights keyed by identity), row `pos` on.
            let (cb, sb, row0) = if inputs.len() == 3 {
                (
                    vector_rows(gpu, &inputs[1], half)?,
                    vector_rows(gpu, &inputs[2], half)?,
                    *pos,
                )
            } else {
                let mut c = Vec::with_capacity(s * half);
                let mut sn = Vec::with_capacity(s * half);
                for r in 0..s {
                    for j in 0..half {
                        let angle = (pos + r) as f64
                            / (*base as f64).powf(2.0 * j as f64 / *rot_dim as f64);
                        c.push(angle.cos() as f32);
                        sn.push(angle.sin() as f32);
                    }
                }
                (
                    gpu.upload_frame(rec, bytemuck::cast_slice(&c))?
                        .buffer()
                        .clone(),
                    gpu.upload_frame(rec, bytemuck::cast_slice(&sn))?
                        .buffer()
                        .clone(),
                    0,
                )
            };
            let (t, y) = out(gpu, rec, &outs[0])?;
            let mut p: Params = [0; 32];
            p[..8].copy_from_slice(&[
                s as u32,
                heads as u32,
                0,
                d as u32,
                0,
                *rot_dim as u32,
                u32::from(*style == RopeStyle::Normal),
                row0 as u32,
            ]);
            gpu.dispatch(
                rec,
                "rope",
                &[&x, &cb, &sb, &y],
                p,
                ((s * heads * d) as u64).div_ceil(WG),
                1,
            )?;
            Ok(vec![t])
        }
        Op::FusedRopeAppend {
            style,
            rot_dim,
            pos,
        } => {
            let (q_info, kc, vc) = (&outs[0], &inputs[5], &inputs[6]);
            let (Some(kcb), Some(vcb)) = (device_buf(kc), device_buf(vc)) else {
                return Err(unsupported(
                    "FusedRopeAppend caches on the host",
                    kc.dtype(),
                ));
            };
            let (s, heads, d) = (q_info.shape[0], q_info.shape[1], q_info.shape[2]);
            let (kv_heads, dv) = (inputs[1].shape()[1], inputs[2].shape()[2]);
            let half = rot_dim / 2;
            let qb = act(gpu, rec, &inputs[0])?;
            let kb = act(gpu, rec, &inputs[1])?;
            let vb = act(gpu, rec, &inputs[2])?;
            let cb = vector_rows(gpu, &inputs[3], half)?;
            let sb = vector_rows(gpu, &inputs[4], half)?;
            let (t, y) = out(gpu, rec, q_info)?;
            let rope = TokenRope {
                heads: [heads, kv_heads],
                dims: [d, dv, *rot_dim],
                pos: *pos,
                tables: [&cb, &sb],
                outs: [&y, kcb.buffer(), vcb.buffer()],
            };
            if s == 1
                && *style == RopeStyle::Normal
                && qkv_with_rope(gpu, rec, [&qb, &kb, &vb], rope)?
            {
                return Ok(vec![t, kc.clone(), vc.clone()]);
            }
            let mut p: Params = [0; 32];
            p[..10].copy_from_slice(&[
                s as u32,
                heads as u32,
                kv_heads as u32,
                d as u32,
                dv as u32,
                *rot_dim as u32,
                u32::from(*style == RopeStyle::Normal),
                *pos as u32,
                (pos * kv_heads * d) as u32,
                (pos * kv_heads * dv) as u32,
            ]);
            let threads = s * (heads * d).max(kv_heads * d.max(dv));
            gpu.dispatch(
                rec,
                "rope_append",
                &[&qb, &kb, &vb, &cb, &sb, &y, kcb.buffer(), vcb.buffer()],
                p,
                (threads as u64).div_ceil(WG),
                1,
            )?;
            Ok(vec![t, kc.clone(), vc.clone()])
        }
        Op::KvAppend { pos } => {
            let row = inputs[2].numel() / inputs[2].shape()[0].max(1);
            let vrow = inputs[3].numel() / inputs[3].shape()[0].max(1);
            if let (Some(kc), Some(vc)) = (device_buf(&inputs[0]), device_buf(&inputs[1])) {
                let (k, v) = (act(gpu, rec, &inputs[2])?, act(gpu, rec, &inputs[3])?);
                let (kn, vn) = (inputs[2].numel(), inputs[3].numel());
                let mut p: Params = [0; 32];
                p[..4].copy_from_slice(&[
                    kn as u32,
                    vn as u32,
                    (pos * row) as u32,
                    (pos * vrow) as u32,
                ]);
                gpu.dispatch(
                    rec,
                    "kv_append",
                    &[&k, &v, kc.buffer(), vc.buffer()],
                    p,
                    (kn.max(vn) as u64).div_ceil(WG),
                    1,
                )?;
                return Ok(vec![inputs[0].clone(), inputs[1].clone()]);
            }
            for (cache, new, width) in [
                (&inputs[0], &inputs[2], row),
                (&inputs[1], &inputs[3], vrow),
            ] {
                match cache.storage() {
                    Storage::Device(d) => {
                        let g = d.as_any().downcast_ref::<GpuBuf>().ok_or_else(|| {
                            unsupported("KvAppend cache of another device", cache.dtype())
                        })?;
                        let src = act(gpu, rec, new)?;
                        gpu.copy(
                            rec,
                            &src,
                            0,
                            g.buffer(),
                            (pos * width * 4) as u64,
                            (new.numel() * 4) as u64,
                        );
                    }
                    _ => {
                        let values = match new.storage() {
                            Storage::Device(d) => {
                                let g = d.as_any().downcast_ref::<GpuBuf>().ok_or_else(|| {
                                    unsupported("KvAppend input of another device", new.dtype())
                                })?;
                                bytemuck::pod_collect_to_vec(&gpu.read_unlocked(
                                    rec,
                                    g.buffer(),
                                    new.numel() as u64 * 4,
                                )?)
                            }
                            _ => new.read_f32("KvAppend")?.to_vec(),
                        };
                        let mut st = cache.write_state().ok_or_else(|| {
                            unsupported("KvAppend into a read-only cache", cache.dtype())
                        })?;
                        st[pos * width..pos * width + values.len()].copy_from_slice(&values);
                    }
                }
            }
            Ok(vec![inputs[0].clone(), inputs[1].clone()])
        }
        Op::Sdpa {
            scale,
            mask,
            q_pos,
            kv_len,
        } => {
            let (sq, heads, d) = (
                inputs[0].shape()[0],
                inputs[0].shape()[1],
                inputs[0].shape()[2],
            );
            let kv_heads = inputs[1].shape()[1];
            let dv = inputs[2].shape()[2];
            let n = kv_len.unwrap_or(inputs[1].shape()[0]);
            let (kind, window) = match mask {
                Mask::None => (0, 0),
                Mask::Causal => (1, 0),
                Mask::Sliding(w) => (2, *w),
                Mask::Padding(_) => {
                    return Err(unsupported("Sdpa with a padding mask", DType::F32))
                }
            };
            let q = act(gpu, rec, &inputs[0])?;
            let k = act(gpu, rec, &inputs[1])?;
            let v = act(gpu, rec, &inputs[2])?;
            let (t, o) = out(gpu, rec, &outs[0])?;
            let mut p: Params = [0; 32];
            p[..10].copy_from_slice(&[
                sq as u32,
                heads as u32,
                kv_heads as u32,
                d as u32,
                dv as u32,
                n as u32,
                *q_pos as u32,
                kind,
                window as u32,
                0,
            ]);
            p[12] = f(scale.unwrap_or(1.0 / (d as f32).sqrt()));
            let rows = sq * heads;
            // One query row: the output also as 8-bit blocks, for the
            // output projection's integer-dot matvec.
            let xq = if sq == 1 && dv.is_multiple_of(32) && gpu.int8_activations() {
                p[13] = 1;
                p[24] = f32::NAN.to_bits();
                let blocks = (heads * dv / 32) as u64;
                gpu.frame(rec, blocks * INT8_BLOCK_BYTES)?.buffer().clone()
            } else {
                gpu.spare.clone()
            };
            let shape = AttentionShape {
                sq,
                heads,
                kv_heads,
                n,
                d,
                dv,
            };
            match attention_kernel(gpu, shape, mask) {
                kernel @ (AttentionKernel::GroupedSplitKeys {
                    chunks, chunk_len, ..
                }
                | AttentionKernel::SplitKeys { chunks, chunk_len }) => {
                    // Stage 1 writes each chunk's sums into `part`, stage 2
                    // (attention.wgsl) merges them into O.
                    let part = gpu.frame(rec, (rows * chunks * (dv + 2) * 4) as u64)?;
                    let bufs = [&q, &k, &v, &o, part.buffer(), &xq];
                    p[9] = 1;
                    p[10] = chunks as u32;
                    p[11] = chunk_len as u32;
                    if let AttentionKernel::GroupedSplitKeys { tile, .. } = kernel {
                        let grouped = if tile == 64 {
                            "attention_gqa64"
                        } else {
                            "attention_gqa32"
                        };
                        let stage_1 = [&q, &k, &v, part.buffer()];
                        gpu.dispatch(rec, grouped, &stage_1, p, (kv_heads * chunks) as u64, 1)?;
                    } else {
                        gpu.dispatch(rec, "attention", &bufs, p, (rows * chunks) as u64, 1)?;
                    }
                    p[9] = 2;
                    gpu.dispatch(rec, "attention", &bufs, p, rows as u64, 1)?;
                }
                AttentionKernel::PromptOnMatrixUnits => {
                    let groups = sq.div_ceil(COOP_ATTENTION_ROWS) * heads;
                    let bufs = [&q, &k, &v, &o];
                    gpu.dispatch(rec, "attention_coop", &bufs, p, groups as u64, 1)?
                }
                AttentionKernel::Prompt => {
                    let groups = sq.div_ceil(PROMPT_ATTENTION_ROWS) * heads;
                    let bufs = [&q, &k, &v, &o];
                    gpu.dispatch(rec, "attention_rows", &bufs, p, groups as u64, 1)?
                }
                AttentionKernel::PerRow => {
                    let bufs = [&q, &k, &v, &o, &o, &xq];
                    gpu.dispatch(rec, "attention", &bufs, p, rows as u64, 1)?
                }
            }
            if p[13] == 1 {
                rec.int8_rows.insert(o, xq);
            }
            Ok(vec![t])
        }
        Op::Embed => {
            // Host ids are checked here. Ids on the device come from this
            // backend's argmax over logits of the same vocabulary, so each is
            // a row of the table.
            let (vocab, d) = (inputs[1].shape()[0], inputs[1].shape()[1]);
            if let Some(&bad) = inputs[0]
                .as_i32()
                .and_then(|ids| ids.iter().find(|&&i| i < 0 || i as usize >= vocab))
            {
                return Err(ExecutionError::IndexOutOfRange {
                    op: "Embed".into(),
                    index: bad as i64,
                    len: vocab,
                });
            }
            let ids = inputs[0].numel();
            let name = deq_name(inputs[1].dtype())
                .ok_or_else(|| unsupported("Embed", inputs[1].dtype()))?;
            let idb = act(gpu, rec, &inputs[0])?;
            let (t, y) = out(gpu, rec, &outs[0])?;
            let w = gpu.weight(&inputs[1], d, false)?;
            for c in &w.chunks {
                let mut p: Params = [0; 32];
                p[..5].copy_from_slice(&[
                    ids as u32,
                    d as u32,
                    w.row_bytes as u32,
                    c.row0 as u32,
                    c.rows as u32,
                ]);
                gpu.dispatch(
                    rec,
                    &format!("embed:{name}"),
                    &[&c.buf, &idb, &y],
                    p,
                    ((ids * d) as u64).div_ceil(WG),
                    1,
                )?;
            }
            Ok(vec![t])
        }
        Op::Conv2d { .. } | Op::ConvTranspose2d { .. } | Op::Conv1d { .. } => {
            image::conv(gpu, rec, op, inputs, outs)
        }
        Op::GroupNorm { groups, eps } | Op::GroupNormAffine { groups, eps } => {
            image::group_norm(gpu, rec, *groups, *eps, inputs, outs)
        }
        Op::BatchMatmul => products::batch_matmul(gpu, rec, inputs, outs),
        Op::Reduce { .. } | Op::AvgPool2d { .. } => reduce::run(gpu, rec, op, inputs, outs),
        // The ops that move values; any other is UnsupportedOp there.
        _ => layout::run(gpu, rec, op, inputs, outs),
    }
}

/// FusedRopeAppend with caches on the host: the two ropes on the GPU, then
/// the host append.
fn rope_append_parts(
    gpu: &Gpu,
    op: &Op,
    pos: usize,
    inputs: &[Tensor],
    outs: &[TensorInfo],
) -> Result<Vec<Tensor>, ExecutionError> {
    let rope = op
        .rope_part()
        .ok_or_else(|| unsupported(op.name(), DType::F32))?;
    let tables = [inputs[3].clone(), inputs[4].clone()];
    let q = run(gpu, &rope, &[&inputs[..1], &tables].concat(), &outs[..1])?;
    let k_info = [inputs[1].info().clone()];
    let k = run(gpu, &rope, &[&inputs[1..2], &tables].concat(), &k_info)?;
    let append = [
        inputs[5].clone(),
        inputs[6].clone(),
        k[0].clone(),
        inputs[2].clone(),
    ];
    let caches = run(gpu, &Op::KvAppend { pos }, &append, &outs[1..])?;
    Ok(q.into_iter().chain(caches).collect())
}

/// Argmax of every row (Argmax) or of the last row (greedy Sample) on the
/// GPU; only the indices are read back.
fn argmax(gpu: &Gpu, op: &Op, inputs: &[Tensor]) -> Result<Vec<Tensor>, ExecutionError> {
    let x = &inputs[0];
    let d = x.shape().last().copied().unwrap_or(1);
    let rows = x.numel() / d.max(1);
    let (first, n) = match op {
        Op::Sample(_) => (rows - 1, 1),
        _ => (0, rows),
    };
    let ids = {
        let mut rec = gpu.op_recorder();
        let rec = &mut *rec;
        let y = argmax_rows(gpu, rec, x, first, n)?;
        gpu.read_unlocked(rec, y.buffer(), (n * 4) as u64)?
    };
    let ids: Vec<i32> = bytemuck::pod_collect_to_vec(&ids);
    let shape = match op {
        Op::Sample(_) => vec![1],
        _ => x.shape()[..x.shape().len() - 1].to_vec(),
    };
    Ok(vec![Tensor::from_i32(&shape, ids)?])
}

/// The greedy pick over the last row of `logits`, left on the device (see
/// `Backend::argmax_on_device`): a `[1]` i32 device tensor and its read-back.
pub(super) fn argmax_on_device(
    gpu: &Gpu,
    logits: &Tensor,
) -> Result<(Tensor, PendingId), ExecutionError> {
    let d = logits.shape().last().copied().unwrap_or(1);
    let rows = logits.numel() / d.max(1);
    let mut rec = gpu.op_recorder();
    let rec = &mut *rec;
    let y = argmax_rows(gpu, rec, logits, rows.saturating_sub(1), 1)?;
    let pending = gpu.read_i32_later(rec, y.buffer())?;
    let id = Tensor::from_device(TensorInfo::new(&[1], DType::I32), y);
    Ok((id, pending))
}

/// Argmax (ties to the lowest index) of rows `first .. first + n` of `x`
/// (rows of its last dimension) into a frame buffer of `n` i32.
fn argmax_rows(
    gpu: &Gpu,
    rec: &mut Recorder,
    x: &Tensor,
    first: usize,
    n: usize,
) -> Result<Arc<GpuBuf>, ExecutionError> {
    let d = x.shape().last().copied().unwrap_or(1);
    let xb = act(gpu, rec, x)?;
    let src = if first > 0 {
        let b = gpu.frame(rec, (n * d * 4) as u64)?;
        gpu.copy(
            rec,
            &xb,
            (first * d * 4) as u64,
            b.buffer(),
            0,
            (n * d * 4) as u64,
        );
        b.buffer().clone()
    } else {
        xb
    };
    let y = gpu.frame(rec, (n * 4) as u64)?;
    let mut p: Params = [0; 32];
    p[0] = n as u32;
    p[1] = d as u32;
    if d > 2 * ARGMAX_CHUNK {
        // Long rows (vocabularies): chunks in parallel, then their best.
        let chunks = d.div_ceil(ARGMAX_CHUNK);
        let part = gpu.frame(rec, (n * chunks * 8) as u64)?;
        p[2] = 1;
        p[3] = chunks as u32;
        p[4] = ARGMAX_CHUNK as u32;
        let bufs = [&src, part.buffer(), y.buffer()];
        gpu.dispatch(rec, "argmax", &bufs, p, (n * chunks) as u64, 1)?;
        p[2] = 2;
        gpu.dispatch(rec, "argmax", &bufs, p, n as u64, 1)?;
    } else {
        gpu.dispatch(
            rec,
            "argmax",
            &[&src, y.buffer(), y.buffer()],
            p,
            n as u64,
            1,
        )?;
    }
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::grouped_key_chunks;

    /// Tiles of 32 keys while tiles of 64 give fewer than 256 workgroups,
    /// one tile a chunk up to 4096 keys' worth of chunks, the last chunk
    /// partial.
    #[test]
    fn grouped_attention_tiles_and_chunks() {
        // (keys, kv heads) -> (tile, chunks, keys a chunk)
        for (case, want) in [
            ((640, 8), (32, 20, 32)),
            ((513, 8), (32, 17, 32)),
            ((1984, 8), (32, 62, 32)),
            ((1985, 8), (64, 32, 64)),
            ((2049, 8), (64, 33, 64)),
            ((4096, 8), (64, 64, 64)),
            ((4100, 8), (64, 33, 128)),
            ((4500, 1), (32, 71, 64)),
        ] {
            assert_eq!(grouped_key_chunks(case.0, case.1), want, "{case:?}");
        }
    }
}
