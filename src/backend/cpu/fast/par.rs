//! Running a loop over output chunks on the backend's thread pool, or inline
//! on the caller's thread when the work is too small to pay for waking the
//! pool (a few microseconds per op, which decode steps of small models feel).

use rayon::prelude::*;
use rayon::ThreadPool;

/// Below this many multiply-adds (about) an op runs on the calling thread.
pub(super) const PAR_MIN_WORK: usize = 64 * 1024;

/// Calls `f(state, index, chunk)` for every `chunk`-sized piece of `y`, with
/// one `init()` state per task; in parallel on `pool` when `work` is large.
pub(super) fn chunks<S, I, F>(
    pool: &ThreadPool,
    work: usize,
    y: &mut [f32],
    chunk: usize,
    init: I,
    f: F,
) where
    I: Fn() -> S + Sync + Send,
    F: Fn(&mut S, usize, &mut [f32]) + Sync + Send,
{
    let chunk = chunk.max(1);
    if work < PAR_MIN_WORK || y.len() <= chunk {
        let mut state = init();
        for (i, c) in y.chunks_mut(chunk).enumerate() {
            f(&mut state, i, c);
        }
    } else {
        pool.install(|| {
            y.par_chunks_mut(chunk)
                .enumerate()
                .for_each_init(&init, |s, (i, c)| f(s, i, c));
        });
    }
}
