//! q4_k and q6_k weights repacked eight rows at a time ([`kernels::Interleaved`]) for the
//! matrix-vector products of decoding, once per weight: the first product with one activation
//! row repacks the weight (a model's warm-up or first token), later ones reuse the copy.
//! Products of several rows (prefill) read the weight as stored. The copies are held as
//! [`super::weight_cache`] holds them, at most [`BUDGET`] bytes (past it, products run on the
//! row kernels).

use super::super::kernels::{self, Interleaved};
use super::weight_cache::WeightCache;
use crate::backend::{Storage, Tensor};
use std::sync::Arc;

/// Most bytes of repacked weights held at once (the q4_k / q6_k weights of an 8B model at
/// Q4_K_M).
const BUDGET: usize = 6 << 30;

/// The repacked copy of the weight `w` (`[n, k]`, host bytes of q4_k or q6_k, see
/// [`Interleaved::supports`]) on the active kernel path, made on first use; `None` for other
/// weights and paths, past [`BUDGET`], or where less than four times the copy's bytes is
/// available now (so that the copies stop well before memory runs short).
pub(super) fn interleaved(w: &Tensor) -> Option<Arc<Interleaved>> {
    static CACHE: WeightCache<Interleaved> = WeightCache::new(BUDGET);
    let (Storage::Bytes(b), &[n, k]) = (w.storage(), w.shape()) else {
        return None;
    };
    let dtype = w.dtype();
    let size = b.as_slice().len();
    if !Interleaved::supports(kernels::active_path(), dtype, n, k)
        || size != n * k / 256 * dtype.block_bytes()
    {
        return None;
    }
    // Asked once per weight (the cache remembers a refusal).
    CACHE.get_or_make(b, n, k, size, |bytes| {
        let free = crate::host_memory::available_bytes();
        if free.is_some_and(|free| size as u64 > free / 4) {
            return None;
        }
        Interleaved::new(dtype, bytes, n, k)
    })
}
