//! The frame allocator of the execution contract, for host activations.
//!
//! Buffers are bucketed by size class (the length rounded up to a power of two, or
//! past 1024 values to an eighth of one, so that the varying lengths of padded
//! batches share buffers) and [`BufferUsage`]. A buffer
//! handed out during forward N goes back to the allocator when the last
//! [`Tensor`](super::Tensor) using it drops, and becomes reusable at the next
//! [`FrameAllocator::reset`] (the start of forward N+1). The pool grows until
//! it covers one forward's allocations and then stays flat.

use std::collections::{BTreeMap, HashMap};
use std::ops::Deref;
use std::sync::{Arc, Mutex, Weak};

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
    pool: HashMap<BufferUsage, BTreeMap<usize, Vec<Vec<f32>>>>,
    returned: Arc<Returned>,
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
            total_bytes: 0,
            total_buffers: 0,
        }
    }

    /// A buffer of `len` f32 values: reused from the pool when one of its size
    /// class, or of a larger class up to twice its size, is free (batches sorted
    /// longest first shrink from one forward to the next), else newly allocated.
    /// Contents are stale unless `zeroed`.
    pub fn alloc(&mut self, len: usize, usage: BufferUsage, zeroed: bool) -> FrameBuf {
        let class = size_class(len);
        let free = self.pool.get_mut(&usage).and_then(|classes| {
            classes
                .range_mut(class..=2 * class)
                .find_map(|(_, buffers)| buffers.pop())
        });
        let data = match free {
            Some(mut d) => {
                if zeroed {
                    d.clear();
                }
                d.resize(len, 0.0);
                d
            }
            None => {
                self.total_bytes += (class * 4) as u64;
                self.total_buffers += 1;
                let mut d = Vec::with_capacity(class);
                d.resize(len, 0.0);
                d
            }
        };
        FrameBuf {
            data,
            usage,
            home: Arc::downgrade(&self.returned),
        }
    }

    /// Start of a new forward: every buffer released since the last reset
    /// becomes reusable.
    pub fn reset(&mut self) {
        let released = std::mem::take(
            &mut *self
                .returned
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for (usage, data) in released {
            // Every buffer was created with the capacity of its class.
            self.pool
                .entry(usage)
                .or_default()
                .entry(size_class(data.capacity()))
                .or_default()
                .push(data);
        }
    }

    /// Bytes of every buffer this allocator has created (free or in use).
    pub fn pool_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Number of buffers this allocator has created (free or in use).
    pub fn pool_buffers(&self) -> usize {
        self.total_buffers
    }
}

/// The capacity of the buffers that hold `len` values: the next power of two up to
/// 1024, then the next multiple of an eighth of the next power of two (at most 12.5%
/// unused).
fn size_class(len: usize) -> usize {
    let p = len.max(1).next_power_of_two();
    if p <= 1024 {
        p
    } else {
        len.next_multiple_of(p / 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_return_on_drop_and_are_reused_after_reset() {
        let mut a = FrameAllocator::new();
        let b = a.alloc(10, BufferUsage::Storage, true).finish();
        drop(b);
        // Not reusable within the same frame.
        let c = a.alloc(10, BufferUsage::Storage, true).finish();
        assert_eq!(a.pool_buffers(), 2);
        drop(c);
        a.reset();
        let _d = a.alloc(10, BufferUsage::Storage, true);
        let _e = a.alloc(10, BufferUsage::Storage, true);
        assert_eq!(a.pool_buffers(), 2);
        // Other usage or size class: new buffers (10 and 11 values share the class of 16).
        let _f = a.alloc(10, BufferUsage::Uniform, true);
        let _g = a.alloc(17, BufferUsage::Storage, true);
        assert_eq!(a.pool_buffers(), 4);
        assert_eq!(a.pool_bytes(), 3 * 64 + 128);
    }

    #[test]
    fn lengths_of_one_class_share_buffers() {
        let mut a = FrameAllocator::new();
        drop(a.alloc(3000, BufferUsage::Storage, false).finish());
        a.reset();
        let mut b = a.alloc(2900, BufferUsage::Storage, true);
        assert_eq!(b.as_mut_slice().len(), 2900);
        assert!(b.as_mut_slice().iter().all(|&v| v == 0.0));
        assert_eq!(
            a.pool_buffers(),
            1,
            "3000 and 2900 values share the class of 3072"
        );
        assert_eq!(a.pool_bytes(), 3072 * 4);
        assert_eq!(
            (size_class(1), size_class(1024), size_class(1025)),
            (1, 1024, 1280)
        );
        // A free buffer of a larger class (up to twice the size) serves a shorter batch.
        drop(b.finish());
        a.reset();
        let mut c = a.alloc(1600, BufferUsage::Storage, false);
        assert_eq!((a.pool_buffers(), c.as_mut_slice().len()), (1, 1600));
        drop(c.finish());
        a.reset();
        let _d = a.alloc(1000, BufferUsage::Storage, false);
        assert_eq!(a.pool_buffers(), 2, "3072 is more than twice 1024");
    }
}
