//! [`Tensor`] and [`TensorInfo`]: what ops consume and produce.
//!
//! A tensor is a shape, an encoding ([`DType`]) and a storage:
//!
//! - host f32 values (activations; shared, cheap to clone, returned to the
//!   [`FrameAllocator`](super::FrameAllocator) pool when the last clone drops);
//! - host i32 values (token ids, argmax / sample results);
//! - host i64 values (dtype `I64`: run-time indices, lengths and shapes of
//!   the graph path; dtype `Bool`: truth values stored as 0 or 1);
//! - encoded bytes borrowed zero-copy from any owner ([`SharedBytes`]: the
//!   model's mmap, or a `Vec<u8>`), for weights in any encoding of quant.md;
//! - mutable state (the KV cache), written in place by `KvAppend`;
//! - a buffer owned by a device backend ([`DeviceBuffer`]).

use super::alloc::HostF32;
use crate::dtype::DType;
use crate::error::ExecutionError;
use std::any::Any;
use std::fmt;
use std::ops::{Deref, Range};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

/// Shape and encoding of a tensor: what `Backend::supports` looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorInfo {
    /// Row-major dimensions, last one contiguous.
    pub shape: Vec<usize>,
    /// Encoding of the values.
    pub dtype: DType,
}

impl TensorInfo {
    /// A new info.
    pub fn new(shape: &[usize], dtype: DType) -> Self {
        TensorInfo {
            shape: shape.to_vec(),
            dtype,
        }
    }

    /// Number of values (1 for a scalar of shape `[]`).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Read-only bytes shared without copying: a range of any owner that derefs to
/// bytes (`memmap2::Mmap`, `Vec<u8>`, ...). Cloning clones the `Arc`.
#[derive(Clone)]
pub struct SharedBytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    range: Range<usize>,
}

impl SharedBytes {
    /// Bytes `range` of `owner`, or `None` when the range lies outside it.
    pub fn new(owner: Arc<dyn AsRef<[u8]> + Send + Sync>, range: Range<usize>) -> Option<Self> {
        let len = (*owner).as_ref().len();
        (range.start <= range.end && range.end <= len).then_some(SharedBytes { owner, range })
    }

    /// All of `bytes`, moved into a new owner.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        let range = 0..bytes.len();
        SharedBytes {
            owner: Arc::new(bytes),
            range,
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.range.clone()]
    }

    /// Identity for caches keyed by weight (device backends upload each weight
    /// once): the owner's address, the byte range, and a weak handle to the
    /// owner that keeps the address from being reused and tells when every
    /// holder (the model) has dropped it.
    pub fn identity(&self) -> (usize, Range<usize>, Weak<dyn AsRef<[u8]> + Send + Sync>) {
        (
            Arc::as_ptr(&self.owner) as *const u8 as usize,
            self.range.clone(),
            Arc::downgrade(&self.owner),
        )
    }
}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedBytes({} bytes)", self.range.len())
    }
}

/// A buffer living in a device backend's memory. The backend that made it
/// downcasts through [`DeviceBuffer::as_any`].
pub trait DeviceBuffer: Any + Send + Sync + fmt::Debug {
    /// Name of the backend that owns the buffer.
    fn backend(&self) -> &str;
    /// For downcasting to the backend's own buffer type.
    fn as_any(&self) -> &dyn Any;
}

/// Where a tensor's values live. See the module doc.
#[derive(Clone)]
pub enum Storage {
    /// Host f32 values (dtype `F32`).
    F32(Arc<HostF32>),
    /// Host i32 values (dtype `I32`).
    I32(Arc<Vec<i32>>),
    /// Host i64 values (dtype `I64`, or `Bool` with every value 0 or 1).
    I64(Arc<Vec<i64>>),
    /// Encoded bytes of the tensor's dtype, shared zero-copy.
    Bytes(SharedBytes),
    /// Mutable host f32 state (dtype `F32`), shared by every clone: the KV cache.
    State(Arc<RwLock<Vec<f32>>>),
    /// A device backend's buffer.
    Device(Arc<dyn DeviceBuffer>),
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Storage::F32(h) => write!(f, "F32({} values)", h.len()),
            Storage::I32(v) => write!(f, "I32({} values)", v.len()),
            Storage::I64(v) => write!(f, "I64({} values)", v.len()),
            Storage::Bytes(b) => b.fmt(f),
            Storage::State(_) => f.write_str("State"),
            Storage::Device(d) => d.fmt(f),
        }
    }
}

/// A tensor: shape, dtype, storage, and the per-tensor scale of `ternary`.
#[derive(Debug, Clone)]
pub struct Tensor {
    info: TensorInfo,
    scale: Option<f32>,
    storage: Storage,
}

/// Values of a tensor read as f32: borrowed, behind the state lock, or decoded.
pub enum F32Read<'a> {
    /// Host f32 values, borrowed.
    Borrowed(&'a [f32]),
    /// KV-cache state, read-locked.
    Locked(RwLockReadGuard<'a, Vec<f32>>),
    /// Values decoded from another encoding.
    Owned(Vec<f32>),
}

impl Deref for F32Read<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            F32Read::Borrowed(s) => s,
            F32Read::Locked(g) => g,
            F32Read::Owned(v) => v,
        }
    }
}

fn size_mismatch(what: &str, info: &TensorInfo, actual: usize) -> ExecutionError {
    ExecutionError::WeightFormatMismatch {
        name: format!("{what} {:?}", info.shape),
        declared: info.dtype,
        actual_bytes: actual,
    }
}

impl Tensor {
    /// Host f32 tensor; `data.len()` must equal the shape's element count.
    pub fn from_f32(shape: &[usize], data: Vec<f32>) -> Result<Tensor, ExecutionError> {
        Tensor::from_host(shape, HostF32::unpooled(data))
    }

    pub(crate) fn from_host(shape: &[usize], data: HostF32) -> Result<Tensor, ExecutionError> {
        let info = TensorInfo::new(shape, DType::F32);
        if data.len() != info.numel() {
            return Err(size_mismatch("f32 tensor", &info, data.len() * 4));
        }
        Ok(Tensor {
            info,
            scale: None,
            storage: Storage::F32(Arc::new(data)),
        })
    }

    /// Host i32 tensor (token ids); `data.len()` must equal the element count.
    pub fn from_i32(shape: &[usize], data: Vec<i32>) -> Result<Tensor, ExecutionError> {
        let info = TensorInfo::new(shape, DType::I32);
        if data.len() != info.numel() {
            return Err(size_mismatch("i32 tensor", &info, data.len() * 4));
        }
        Ok(Tensor {
            info,
            scale: None,
            storage: Storage::I32(Arc::new(data)),
        })
    }

    /// Host i64 tensor; `data.len()` must equal the element count.
    pub fn from_i64(shape: &[usize], data: Vec<i64>) -> Result<Tensor, ExecutionError> {
        Tensor::host_ints(shape, DType::I64, data)
    }

    /// Host bool tensor (stored as i64 0 or 1); `data.len()` must equal the element count.
    pub fn from_bool(shape: &[usize], data: Vec<bool>) -> Result<Tensor, ExecutionError> {
        Tensor::host_ints(
            shape,
            DType::Bool,
            data.into_iter().map(i64::from).collect(),
        )
    }

    /// Host tensor of `I64` or `Bool` values (for `Bool`, nonzero values are stored as 1).
    pub fn host_ints(
        shape: &[usize],
        dtype: DType,
        data: Vec<i64>,
    ) -> Result<Tensor, ExecutionError> {
        let info = TensorInfo::new(shape, dtype);
        if data.len() != info.numel() || !matches!(dtype, DType::I64 | DType::Bool) {
            return Err(size_mismatch("integer tensor", &info, data.len() * 8));
        }
        let data = if dtype == DType::Bool {
            data.into_iter().map(|v| i64::from(v != 0)).collect()
        } else {
            data
        };
        Ok(Tensor {
            info,
            scale: None,
            storage: Storage::I64(Arc::new(data)),
        })
    }

    /// Encoded tensor over shared bytes (zero-copy: a model weight straight from
    /// the mmap). The byte count must match `dtype.byte_size(shape)`; `scale` is
    /// the per-tensor scale of `ternary`.
    pub fn from_bytes(
        shape: &[usize],
        dtype: DType,
        bytes: SharedBytes,
        scale: Option<f32>,
    ) -> Result<Tensor, ExecutionError> {
        let info = TensorInfo::new(shape, dtype);
        let got = bytes.as_slice().len();
        if dtype.byte_size(shape) != Some(got as u64) {
            return Err(size_mismatch("tensor", &info, got));
        }
        if dtype == DType::Ternary && scale.is_none() {
            return Err(size_mismatch("ternary tensor without a scale", &info, got));
        }
        Ok(Tensor {
            info,
            scale,
            storage: Storage::Bytes(bytes),
        })
    }

    /// Zero-filled mutable f32 state (a KV-cache buffer).
    pub fn state_zeros(shape: &[usize]) -> Tensor {
        let info = TensorInfo::new(shape, DType::F32);
        let n = info.numel();
        Tensor {
            info,
            scale: None,
            storage: Storage::State(Arc::new(RwLock::new(vec![0.0; n]))),
        }
    }

    /// A tensor over a device backend's buffer.
    pub fn from_device(info: TensorInfo, buffer: Arc<dyn DeviceBuffer>) -> Tensor {
        Tensor {
            info,
            scale: None,
            storage: Storage::Device(buffer),
        }
    }

    /// Shape and dtype.
    pub fn info(&self) -> &TensorInfo {
        &self.info
    }

    /// Dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.info.shape
    }

    /// Encoding.
    pub fn dtype(&self) -> DType {
        self.info.dtype
    }

    /// Element count.
    pub fn numel(&self) -> usize {
        self.info.numel()
    }

    /// Per-tensor scale (`ternary` only).
    pub fn scale(&self) -> Option<f32> {
        self.scale
    }

    /// The storage.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The same storage under another shape with the same element count
    /// (no copy). Encoded tensors must keep their last dimension.
    pub fn reshaped(&self, shape: &[usize]) -> Result<Tensor, ExecutionError> {
        let new = TensorInfo::new(shape, self.info.dtype);
        let keeps_blocks =
            !self.info.dtype.is_quantized() || shape.last() == self.info.shape.last();
        if new.numel() != self.numel() || !keeps_blocks {
            return Err(ExecutionError::ShapeMismatch {
                op: "Reshape".into(),
                expected: self.info.shape.clone(),
                got: shape.to_vec(),
            });
        }
        Ok(Tensor {
            info: new,
            scale: self.scale,
            storage: self.storage.clone(),
        })
    }

    /// Host f32 values without a copy, if this is a host f32 tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.storage {
            Storage::F32(h) => Some(h),
            _ => None,
        }
    }

    /// Host i32 values, if this is an i32 tensor.
    pub fn as_i32(&self) -> Option<&[i32]> {
        match &self.storage {
            Storage::I32(v) => Some(v),
            _ => None,
        }
    }

    /// Host i64 values (0 or 1 for `Bool`), if this is an i64 or bool tensor.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.storage {
            Storage::I64(v) => Some(v),
            _ => None,
        }
    }

    /// Encoded bytes, if this is a byte-backed tensor.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match &self.storage {
            Storage::Bytes(b) => Some(b.as_slice()),
            _ => None,
        }
    }

    /// Every value as f32: borrowed for host f32 (and for plain f32 bytes on a 4-byte
    /// boundary), read-locked for state,
    /// decoded (dequantized, or converted from i32) otherwise. `op` names the
    /// caller in errors; device tensors must be downloaded by their backend first.
    pub fn read_f32(&self, op: &str) -> Result<F32Read<'_>, ExecutionError> {
        match &self.storage {
            Storage::F32(h) => Ok(F32Read::Borrowed(h)),
            Storage::State(s) => Ok(F32Read::Locked(
                s.read().unwrap_or_else(|poisoned| poisoned.into_inner()),
            )),
            Storage::I32(v) => Ok(F32Read::Owned(v.iter().map(|&x| x as f32).collect())),
            Storage::I64(v) => Ok(F32Read::Owned(v.iter().map(|&x| x as f32).collect())),
            Storage::Bytes(b) => {
                // Unscaled little-endian f32 on a 4-byte boundary (weights in a mapped
                // file) are read in place: no copy of a layer's weights per op.
                let plain = self.info.dtype == DType::F32
                    && self.scale.is_none()
                    && cfg!(target_endian = "little")
                    && b.as_slice().len() == self.numel() * 4;
                if let (true, Ok(values)) = (plain, bytemuck::try_cast_slice(b.as_slice())) {
                    return Ok(F32Read::Borrowed(values));
                }
                let mut out = vec![0.0; self.numel()];
                decode_into(self.info.dtype, b.as_slice(), self.scale, &mut out)?;
                Ok(F32Read::Owned(out))
            }
            Storage::Device(d) => Err(ExecutionError::UnsupportedOp {
                op: op.to_string(),
                backend: format!("host (tensor lives on {})", d.backend()),
                input_dtype: self.info.dtype,
            }),
        }
    }

    /// Write access to mutable state (the KV cache); `None` for other storages.
    pub fn write_state(&self) -> Option<RwLockWriteGuard<'_, Vec<f32>>> {
        match &self.storage {
            Storage::State(s) => Some(s.write().unwrap_or_else(|poisoned| poisoned.into_inner())),
            _ => None,
        }
    }
}

/// Decodes `bytes` of encoding `dtype` into `out`. f32/f16/bf16 are converted
/// here; every other encoding goes through [`crate::quant::dequantize_into`].
pub fn decode_into(
    dtype: DType,
    bytes: &[u8],
    scale: Option<f32>,
    out: &mut [f32],
) -> Result<(), ExecutionError> {
    let values = out.len();
    let bad = || ExecutionError::WeightFormatMismatch {
        name: format!("{values} values"),
        declared: dtype,
        actual_bytes: bytes.len(),
    };
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            let width = dtype.block_bytes();
            if bytes.len() != out.len() * width {
                return Err(bad());
            }
            // Aligned little-endian input converts in bulk (SIMD where the CPU has it).
            let bulk = cfg!(target_endian = "little");
            match dtype {
                DType::F32 if bulk => {
                    if let Ok(v) = bytemuck::try_cast_slice::<u8, f32>(bytes) {
                        out.copy_from_slice(v);
                        return Ok(());
                    }
                }
                DType::F16 if bulk => {
                    if let Ok(v) = bytemuck::try_cast_slice::<u8, half::f16>(bytes) {
                        half::slice::HalfFloatSliceExt::convert_to_f32_slice(v, out);
                        return Ok(());
                    }
                }
                DType::BF16 if bulk => {
                    if let Ok(v) = bytemuck::try_cast_slice::<u8, half::bf16>(bytes) {
                        half::slice::HalfFloatSliceExt::convert_to_f32_slice(v, out);
                        return Ok(());
                    }
                }
                _ => {}
            }
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(width)) {
                *o = match dtype {
                    DType::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                    DType::F16 => half::f16::from_le_bytes([c[0], c[1]]).to_f32(),
                    _ => half::bf16::from_le_bytes([c[0], c[1]]).to_f32(),
                };
            }
            Ok(())
        }
        _ => crate::quant::dequantize_into(dtype, bytes, scale, out).map_err(|_| bad()),
    }
}
