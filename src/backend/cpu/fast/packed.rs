//! f32 weights packed for the AVX-512 float GEMM ([`kernels::PackedF32`]), once per weight:
//! the first product with many activation rows packs it, later ones (every batch of an
//! encoder) reuse the packing. Entries are keyed by the weight's bytes
//! ([`SharedBytes::identity`](crate::backend::tensor::SharedBytes::identity)) and dropped
//! once the model that owns them is gone; at most [`BUDGET`] bytes are held (past it,
//! products run on the unpacked GEMM).

use super::super::kernels::PackedF32;
use super::weight_cache::WeightCache;
use crate::backend::{Storage, Tensor};
use crate::dtype::DType;
use std::sync::Arc;

/// Most bytes of packed weights held at once (an f32 encoder of about 250 M parameters).
const BUDGET: usize = 1 << 30;

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
    static CACHE: WeightCache<PackedF32> = WeightCache::new(BUDGET);
    let (Storage::Bytes(b), DType::F32) = (w.storage(), w.dtype()) else {
        return None;
    };
    if w.shape().iter().product::<usize>() != n * k || b.as_slice().len() != n * k * 4 {
        return None;
    }
    CACHE.get_or_make(b, n, k, PackedF32::bytes_for(n, k), |bytes| {
        Some(PackedF32::new(bytes, n, k))
    })
}
