//! The GPU frame allocator of the execution contract (`llm/src/backend/wgpu/alloc.rs`).
//!
//! Buffers are bucketed by exact byte size and [`BufferUsage`]. A buffer goes
//! back to the allocator when the last tensor using it drops; it becomes
//! reusable once the commands recorded so far have been submitted
//! ([`GpuFrameAllocator::recycle`], called after every submit), so a buffer is
//! never handed out twice within one batch of recorded work. During decode
//! that is once per forward: the pool grows to one forward's working set and
//! then stays flat. Free buffers are handed out lowest creation number first,
//! so a forward that allocates as the previous one did gets the same buffers
//! in the same places (and the recorder's cached bind groups hit).

use crate::backend::{BufferUsage, DeviceBuffer};
use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

/// A pooled buffer: creation number, bytes, usage, the buffer.
type Pooled = (u64, u64, BufferUsage, wgpu::Buffer);
type Returned = Mutex<Vec<Pooled>>;

/// A wgpu buffer owned by a tensor; pooled ones return to their allocator on drop.
pub struct GpuBuf {
    buffer: wgpu::Buffer,
    size: u64,
    usage: BufferUsage,
    /// Creation number within its pool (0 for persistent buffers).
    serial: u64,
    home: Option<Weak<Returned>>,
}

impl GpuBuf {
    /// A buffer not tied to any pool (weights, KV caches): freed on drop.
    pub fn persistent(buffer: wgpu::Buffer) -> Self {
        GpuBuf {
            size: buffer.size(),
            buffer,
            usage: BufferUsage::Storage,
            serial: 0,
            home: None,
        }
    }

    /// The wgpu buffer.
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for GpuBuf {
    fn drop(&mut self) {
        if let Some(home) = self.home.take().and_then(|w| w.upgrade()) {
            home.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push((self.serial, self.size, self.usage, self.buffer.clone()));
        }
    }
}

impl fmt::Debug for GpuBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GpuBuf({} bytes)", self.size)
    }
}

impl DeviceBuffer for GpuBuf {
    fn backend(&self) -> &str {
        "wgpu"
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Pool of wgpu buffers keyed by (byte size, usage). See the module doc.
pub struct GpuFrameAllocator {
    /// Free buffers per (bytes, usage), highest creation number first.
    pool: HashMap<(u64, BufferUsage), Vec<(u64, wgpu::Buffer)>>,
    returned: Arc<Returned>,
    total_bytes: u64,
    total_buffers: usize,
}

impl Default for GpuFrameAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl GpuFrameAllocator {
    /// An empty allocator.
    pub fn new() -> Self {
        GpuFrameAllocator {
            pool: HashMap::new(),
            returned: Arc::new(Mutex::new(Vec::new())),
            total_bytes: 0,
            total_buffers: 0,
        }
    }

    /// A buffer of exactly `size` bytes (at least 4): from the pool when one is
    /// free, else new. Contents are stale.
    pub fn alloc(&mut self, device: &wgpu::Device, size: u64, usage: BufferUsage) -> Arc<GpuBuf> {
        let size = size.max(4).next_multiple_of(4);
        let (serial, buffer) = match self.pool.get_mut(&(size, usage)).and_then(Vec::pop) {
            Some(b) => b,
            None => {
                self.total_bytes += size;
                self.total_buffers += 1;
                let flags = match usage {
                    BufferUsage::Storage => {
                        wgpu::BufferUsages::STORAGE
                            | wgpu::BufferUsages::COPY_SRC
                            | wgpu::BufferUsages::COPY_DST
                    }
                    BufferUsage::Uniform => {
                        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST
                    }
                };
                let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("frame"),
                    size,
                    usage: flags,
                    mapped_at_creation: false,
                });
                (self.total_buffers as u64, buffer)
            }
        };
        Arc::new(GpuBuf {
            buffer,
            size,
            usage,
            serial,
            home: Some(Arc::downgrade(&self.returned)),
        })
    }

    /// After a submit: every buffer released since the last recycle becomes reusable.
    pub fn recycle(&mut self) {
        let released = std::mem::take(
            &mut *self
                .returned
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for (serial, size, usage, buffer) in released {
            let free = self.pool.entry((size, usage)).or_default();
            let at = free.partition_point(|(s, _)| *s > serial);
            free.insert(at, (serial, buffer));
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
