//! The frame allocator of the execution contract, for host activations.
//!
//! Buffers are bucketed by exact byte size and [`BufferUsage`]. A buffer
//! handed out during forward N goes back to the allocator when the last
//! [`Tensor`](super::Tensor) using it drops, and is reusable from the next
//! allocation of its size on — within forward N too: host memory has no
//! pending device work, and a buffer written again while it is still in cache
//! spares an op the trip to memory (a chain of element-wise ops over tensors
//! larger than L2 ran 3-4x slower on fresh buffers). So every buffer of forward
//! N is free again at [`FrameAllocator::reset`] (the start of forward N+1), as
//! the execution contract asks, and the pool grows until it covers the largest
//! set of tensors alive at once, then stays flat. Buckets that the last forward
//! did not use are freed at reset, so that forwards of changing shapes (encoder
//! batches padded to each batch's longest text, prefill then decode) hold one
//! forward's worth of buffers instead of every shape's.

use super::TensorInfo;
use crate::error::ExecutionError;
use std::collections::{HashMap, HashSet};
use std::ops::Deref;
use std::sync::{Arc, Mutex, Weak};

/// Output sizes above which [`check_host_room`] asks the system first.
const PROBE_BYTES: u64 = 1 << 30;

/// Checks, before an op allocates its outputs on the host, that their bytes can
/// be had: above 1 GiB the allocation is tried (and released) first, so a graph
/// or input that claims a huge tensor is `OutOfMemory` naming `backend` and the
/// bytes requested instead of an abort in the middle of the op.
pub fn check_host_room(backend: &str, outputs: &[TensorInfo]) -> Result<(), ExecutionError> {
    let bytes = outputs.iter().try_fold(0u64, |total, o| {
        total.checked_add(o.dtype.byte_size(&o.shape)?)
    });
    let too_big = |requested: u64| ExecutionError::OutOfMemory {
        backend: backend.to_string(),
        requested_bytes: usize::try_from(requested).unwrap_or(usize::MAX),
    };
    match bytes {
        None => Err(too_big(u64::MAX)),
        Some(b) if b > PROBE_BYTES => {
            let len = usize::try_from(b).map_err(|_| too_big(b))?;
            Vec::<u8>::new()
                .try_reserve_exact(len)
                .map_err(|_| too_big(b))
        }
        Some(_) => Ok(()),
    }
}

/// What a buffer is used for; pools are separate per usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferUsage {
    /// Activations and other op outputs.
    Storage,
    /// Small parameter blocks (GPU uniforms).
    Uniform,
}

type Returned = Mutex<Vec<(BufferUsage, Vec<f32>)>>;

/// Host f32 values owned by a tensor. When it came from a [`FrameAllocator`]
/// it returns there on drop.
pub struct HostF32 {
    data: Vec<f32>,
    usage: BufferUsage,
    home: Option<Weak<Returned>>,
}

impl HostF32 {
    /// Values not tied to any allocator.
    pub fn unpooled(data: Vec<f32>) -> Self {
        HostF32 {
            data,
            usage: BufferUsage::Storage,
            home: None,
        }
    }
}

impl Deref for HostF32 {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.data
    }
}

impl Drop for HostF32 {
    fn drop(&mut self) {
        if let Some(home) = self.home.take().and_then(|w| w.upgrade()) {
            let data = std::mem::take(&mut self.data);
            home.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push((self.usage, data));
        }
    }
}

/// A buffer being filled by an op; [`FrameBuf::finish`] turns it into tensor storage.
pub struct FrameBuf {
    data: Vec<f32>,
    usage: BufferUsage,
    home: Weak<Returned>,
}

impl FrameBuf {
    /// The values (stale contents from an earlier frame unless zeroed on request).
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data
    }

    /// Storage that returns to the allocator when its last tensor drops.
    pub fn finish(self) -> HostF32 {
        HostF32 {
            data: self.data,
            usage: self.usage,
            home: Some(self.home),
        }
    }
}

/// Pool of host buffers keyed by (byte size, usage). See the module doc.
pub struct FrameAllocator {
    pool: HashMap<(u64, BufferUsage), Vec<Vec<f32>>>,
    returned: Arc<Returned>,
    /// Buckets handed out since the last reset.
    used: HashSet<(u64, BufferUsage)>,
    total_bytes: u64,
    total_buffers: usize,
}

impl Default for FrameAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameAllocator {
    /// An empty allocator.
    pub fn new() -> Self {
        FrameAllocator {
            pool: HashMap::new(),
            returned: Arc::new(Mutex::new(Vec::new())),
            used: HashSet::new(),
            total_bytes: 0,
            total_buffers: 0,
        }
    }

    /// A buffer of `len` f32 values: reused from the pool when one of exactly
    /// that size is free (its last tensor dropped, in this forward or before), else
    /// newly allocated. Contents are stale unless `zeroed`.
    pub fn alloc(&mut self, len: usize, usage: BufferUsage, zeroed: bool) -> FrameBuf {
        let key = ((len * 4) as u64, usage);
        self.used.insert(key);
        self.take_returned();
        let data = match self.pool.get_mut(&key).and_then(Vec::pop) {
            Some(mut d) => {
                if zeroed {
                    d.fill(0.0);
                }
                d
            }
            None => {
                self.total_bytes += key.0;
                self.total_buffers += 1;
                vec![0.0; len]
            }
        };
        FrameBuf {
            data,
            usage,
            home: Arc::downgrade(&self.returned),
        }
    }

    /// Start of a new forward: every buffer released since the last reset
    /// becomes reusable, and the free buffers of buckets that the last
    /// forward did not use are freed.
    pub fn reset(&mut self) {
        let used = std::mem::take(&mut self.used);
        let (mut freed_bytes, mut freed_buffers) = (0, 0);
        self.pool.retain(|key, free| {
            let keep = used.contains(key);
            if !keep {
                freed_bytes += key.0 * free.len() as u64;
                freed_buffers += free.len();
            }
            keep
        });
        self.total_bytes -= freed_bytes;
        self.total_buffers -= freed_buffers;
        self.take_returned();
    }

    /// Moves the buffers whose last tensor has dropped into the pool.
    fn take_returned(&mut self) {
        let mut returned = self
            .returned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for (usage, data) in returned.drain(..) {
            self.pool
                .entry(((data.len() * 4) as u64, usage))
                .or_default()
                .push(data);
        }
    }

    /// Bytes of every buffer this allocator has created and not freed (free or in use).
    pub fn pool_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Number of buffers this allocator has created and not freed (free or in use).
    pub fn pool_buffers(&self) -> usize {
        self.total_buffers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_beyond_the_machine_are_out_of_memory_with_their_bytes() {
        use crate::dtype::DType;
        let huge = [TensorInfo::new(&[1 << 20, 1 << 20, 1 << 10], DType::F32)];
        assert_eq!(
            check_host_room("cpu", &huge),
            Err(ExecutionError::OutOfMemory {
                backend: "cpu".into(),
                requested_bytes: 1 << 52,
            })
        );
        let overflowing = [TensorInfo::new(&[1 << 40, 1 << 40], DType::I64)];
        assert!(matches!(
            check_host_room("nox", &overflowing),
            Err(ExecutionError::OutOfMemory {
                requested_bytes: usize::MAX,
                ..
            })
        ));
        let small = [TensorInfo::new(&[1024, 1024], DType::F32)];
        assert_eq!(check_host_room("cpu", &small), Ok(()));
    }

    #[test]
    fn buffers_return_on_drop_and_are_reused_after_reset() {
        let mut a = FrameAllocator::new();
        let b = a.alloc(10, BufferUsage::Storage, true).finish();
        let held = a.alloc(10, BufferUsage::Storage, true).finish();
        assert_eq!(a.pool_buffers(), 2);
        drop(b);
        // Reusable within the same frame once its last tensor has dropped (still cache-warm),
        // and handed out zeroed on request.
        let mut c = a.alloc(10, BufferUsage::Storage, false);
        c.as_mut_slice().fill(7.0);
        let c = c.finish();
        assert_eq!(a.pool_buffers(), 2);
        drop(c);
        let zeroed = a.alloc(10, BufferUsage::Storage, true).finish();
        assert!(zeroed.iter().all(|&v| v == 0.0));
        assert_eq!(a.pool_buffers(), 2);
        drop((zeroed, held));
        a.reset();
        let _d = a.alloc(10, BufferUsage::Storage, true);
        let _e = a.alloc(10, BufferUsage::Storage, true);
        assert_eq!(a.pool_buffers(), 2);
        // Other size or usage: new buffers.
        let _f = a.alloc(10, BufferUsage::Uniform, true);
        let _g = a.alloc(11, BufferUsage::Storage, true);
        assert_eq!(a.pool_buffers(), 4);
        assert_eq!(a.pool_bytes(), 3 * 40 + 44);
    }

    #[test]
    fn buckets_the_last_forward_did_not_use_are_freed() {
        let mut a = FrameAllocator::new();
        // Forwards of changing shapes (length 10, 20, ..., 100): the pool
        // holds at most the last two forwards' buffers, not all ten shapes'.
        for step in 1..=10 {
            a.reset();
            drop(a.alloc(10 * step, BufferUsage::Storage, false).finish());
            drop(a.alloc(1000 * step, BufferUsage::Storage, false).finish());
            assert!(
                a.pool_buffers() <= 4,
                "step {step}: {} buffers",
                a.pool_buffers()
            );
        }
        assert_eq!(a.pool_bytes(), 4 * (90 + 9000 + 100 + 10_000));
        // A steady shape keeps its buffers.
        for _ in 0..3 {
            a.reset();
            drop(a.alloc(100, BufferUsage::Storage, false).finish());
        }
        assert_eq!(a.pool_buffers(), 1);
    }
}
