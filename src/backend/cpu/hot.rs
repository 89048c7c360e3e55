//! Running a whole forward on the worker pool with the other workers kept hot: while it
//! runs they poll for work instead of parking, so a parallel op that follows a stretch of
//! serial ones starts on every thread at once rather than after a wake-up (a futex call
//! and, on a virtual machine, an idle vCPU's wake latency: tens of microseconds per op).
//! onnxruntime's intra-op threads and llama.cpp's thread pool spin the same way.

use rayon::{ThreadPool, Yield};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a worker polls without finding work before it goes back to rayon's own idle
/// loop (and parks): a bound on what a long serial stretch costs in spinning, and on the
/// stall when a poller was picked up by a worker in the middle of a job that the forward
/// waits for.
const IDLE_LIMIT: Duration = Duration::from_millis(2);

/// Runs `f` on `pool` as [`ThreadPool::install`] does; until `f` returns, every other
/// worker of the pool executes the pool's jobs as they appear, polling between them, and
/// stops polling after 2 ms without a job. The result and the work done are
/// those of `pool.install(f)`; only the idle workers' waiting differs.
pub fn install_hot<R: Send>(pool: &ThreadPool, f: impl FnOnce() -> R + Send) -> R {
    if pool.current_num_threads() < 2 {
        return pool.install(f);
    }
    pool.install(|| {
        let running = Arc::new(AtomicBool::new(true));
        let owner = rayon::current_thread_index();
        let flag = running.clone();
        pool.spawn_broadcast(move |ctx| {
            if Some(ctx.index()) != owner {
                poll(&flag);
            }
        });
        /// Ends the polling when `f` returns or unwinds.
        struct Stop(Arc<AtomicBool>);
        impl Drop for Stop {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _stop = Stop(running);
        f()
    })
}

/// Executes the pool's jobs while `running` holds and a job came within [`IDLE_LIMIT`].
fn poll(running: &AtomicBool) {
    let mut last_job = Instant::now();
    while running.load(Ordering::Acquire) {
        match rayon::yield_now() {
            Some(Yield::Executed) => last_job = Instant::now(),
            _ if last_job.elapsed() > IDLE_LIMIT => return,
            _ => {
                for _ in 0..16 {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn results_equal_install_and_pollers_stop() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let plain: Vec<u64> =
            pool.install(|| (0..10_000u64).into_par_iter().map(|i| i * i).collect());
        for _ in 0..50 {
            let hot: Vec<u64> = install_hot(&pool, || {
                (0..10_000u64).into_par_iter().map(|i| i * i).collect()
            });
            assert_eq!(hot, plain);
        }
        // Nested inside a forward, and concurrently from two outside threads.
        let nested = install_hot(&pool, || install_hot(&pool, || pool.current_num_threads()));
        assert_eq!(nested, 3);
        std::thread::scope(|s| {
            let a = s.spawn(|| install_hot(&pool, || (0..1000u32).into_par_iter().sum::<u32>()));
            let b = s.spawn(|| install_hot(&pool, || (0..1000u32).into_par_iter().sum::<u32>()));
            assert_eq!(a.join().unwrap(), 499_500);
            assert_eq!(b.join().unwrap(), 499_500);
        });
        // Once the forwards are over the pollers stop: a job that needs every worker idle
        // enough to take a broadcast completes.
        let seen: Vec<usize> = pool.broadcast(|ctx| ctx.index());
        assert_eq!(seen, vec![0, 1, 2]);
    }
}
