//! f32 weights packed for the AVX-512 float GEMM ([`kernels::PackedF32`]), once per weight:
//! the first product with many activation rows packs it, later ones (every batch of an
//! encoder) reuse the packing. Entries are keyed by the weight's bytes
//! ([`SharedBytes::identity`](crate::backend::tensor::SharedBytes::identity)) and dropped
//! once the model that owns them is gone; at most [`BUDGET`] bytes are held (past it,
//! products run on the unpacked GEMM).

use super::super::kernels::PackedF32;
use crate::backend::{Storage, Tensor};
use crate::dtype::DType;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Most bytes of packed weights held at once (an f32 encoder of about 250 M parameters).
const BUDGET: usize = 1 << 30;

/// The owner's address, the byte range, the shape `(n, k)`.
type Key = (usize, Range<usize>, usize, usize);

/// A packing, and the handle that tells whether its weight's owner is alive.
type Entry = (Weak<dyn AsRef<[u8]> + Send + Sync>, Arc<PackedF32>);

/// The packing of the f32 weight `w` (`[n, k]`, host bytes), made on first use; `None` for
/// other weights, or where the packings held would pass [`BUDGET`].
pub(super) fn packed(w: &Tensor) -> Option<Arc<PackedF32>> {
    match *w.shape() {
        [n, k] => packed_rows(w, n, k),
        _ => None,
    }
}

/// [`packed`] for an f32 weight of any shape read as `n` rows of `k` values (a convolution
/// kernel `[Cout, Cin, kh, kw]` as `[Cout, Cin kh kw]`); `None` where `w` does not hold
/// `n k` values.
pub(super) fn packed_rows(w: &Tensor, n: usize, k: usize) -> Option<Arc<PackedF32>> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    let (Storage::Bytes(b), DType::F32) = (w.storage(), w.dtype()) else {
        return None;
    };
    if w.shape().iter().product::<usize>() != n * k || b.as_slice().len() != n * k * 4 {
        return None;
    }
    let (owner, range, alive) = b.identity();
    let key = (owner, range, n, k);
    let cache = CACHE.get_or_init(Default::default);
    let lock = || {
        cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    {
        let mut cache = lock();
        if let Some((_, p)) = cache.get(&key) {
            return Some(p.clone());
        }
        // Entries of dropped models go (their weak handles keep the addresses from reuse
        // until then).
        cache.retain(|_, (owner, _)| owner.strong_count() > 0);
        let held: usize = cache.values().map(|(_, p)| p.bytes()).sum();
        if held + PackedF32::bytes_for(n, k) > BUDGET {
            return None;
        }
    }
    // Packed outside the lock: the packing runs on the pool, whose workers may meanwhile take
    // up another caller's product that asks here too. Of two packings of one weight made at
    // once, the first stored is kept.
    let p = Arc::new(PackedF32::new(b.as_slice(), n, k));
    Some(lock().entry(key).or_insert((alive, p)).1.clone())
}
