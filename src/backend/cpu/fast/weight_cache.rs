//! Copies derived from a model's weights (packings, repackings), made on first use and kept
//! while the model that owns the weight is alive. Entries are keyed by the weight's bytes
//! ([`SharedBytes::identity`]) and the shape they are read as; a cache holds at most its
//! budget of bytes (past it, the caller runs without the copy).

use crate::backend::tensor::SharedBytes;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The owner's address, the byte range, the shape `(n, k)`.
type Key = (usize, Range<usize>, usize, usize);

/// A copy (`None`: its making gave none, which is not tried again), its size in bytes, and the
/// handle that tells whether its weight's owner is alive.
type Entry<T> = (Weak<dyn AsRef<[u8]> + Send + Sync>, Option<Arc<T>>, usize);

/// Derived copies of weights, at most `budget` bytes of them.
pub(super) struct WeightCache<T> {
    entries: OnceLock<Mutex<HashMap<Key, Entry<T>>>>,
    budget: usize,
}

impl<T> WeightCache<T> {
    /// An empty cache that holds at most `budget` bytes.
    pub(super) const fn new(budget: usize) -> Self {
        WeightCache {
            entries: OnceLock::new(),
            budget,
        }
    }

    /// The copy of the weight bytes `b` read as `[n, k]`: the one held, or `make(b)` (of
    /// `size` bytes), kept; `None` where keeping it would pass the budget or `make` gives none
    /// (remembered: `make` runs at most once per weight, so it may ask what the system allows).
    pub(super) fn get_or_make(
        &self,
        b: &SharedBytes,
        n: usize,
        k: usize,
        size: usize,
        make: impl FnOnce(&[u8]) -> Option<T>,
    ) -> Option<Arc<T>> {
        let (owner, range, alive) = b.identity();
        let key = (owner, range, n, k);
        let entries = self.entries.get_or_init(Default::default);
        let lock = || {
            entries
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        };
        {
            let mut entries = lock();
            if let Some((_, copy, _)) = entries.get(&key) {
                return copy.clone();
            }
            // Entries of dropped models go (their weak handles keep the addresses from reuse
            // until then).
            entries.retain(|_, (owner, _, _)| owner.strong_count() > 0);
            let held: usize = entries.values().map(|(_, _, size)| size).sum();
            if held + size > self.budget {
                return None;
            }
        }
        // Made outside the lock: making may run on the pool, whose workers may meanwhile take
        // up another caller's product that asks here too. Of two copies of one weight made at
        // once, the first stored is kept.
        let copy = make(b.as_slice()).map(Arc::new);
        let size = if copy.is_some() { size } else { 0 };
        lock().entry(key).or_insert((alive, copy, size)).1.clone()
    }
}
