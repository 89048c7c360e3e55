//! Float GEMM (`Y[m, n] = X W^T`, f32 weights) at encoder shapes: MiniLM's batch-32
//! projections and the Whisper tiny encoder's, in GFLOP/s on the worker pool.
//!
//! `cargo bench --bench gemm`. Settings: `CYB_BENCH_THREADS` (default 2),
//! `CYB_LLM_PORTABLE_KERNELS=1` (portable path). Prints the cache sizes and the measured FMA
//! peak, a table (median of 15 calls as GFLOP/s and as a fraction of the peak; on AVX-512
//! also over the weights packed once, the encoders' path), then the criterion measurements.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cyb_llm::backend::cpu::kernels::{self, active_path, machine, matmul};
use cyb_llm::DType;
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// (m, n, k): activation rows, output columns, values per row.
const SHAPES: [(usize, usize, usize); 4] = [
    (1024, 384, 384),
    (1024, 1536, 384),
    (1024, 384, 1536),
    (1500, 1536, 384),
];

fn threads() -> usize {
    std::env::var("CYB_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

fn bench(c: &mut Criterion) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads())
        .build()
        .expect("thread pool");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    println!("path {:?}, {} threads", active_path(), threads());
    println!("caches {:?}", machine::cache_sizes());
    let peak = pool.install(machine::fma_peak_gflops).unwrap_or(f64::NAN);
    println!("FMA peak {peak:.1} GFLOP/s");
    println!("| m | n | k | GFLOP/s | of peak | packed GFLOP/s | of peak |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut group = c.benchmark_group("gemm_f32");
    for &(m, n, k) in &SHAPES {
        let w: Vec<u8> = (0..n * k)
            .flat_map(|_| rng.gen_range(-1.0f32..1.0).to_le_bytes())
            .collect();
        let x: Vec<f32> = (0..m * k).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let mut y = vec![0.0f32; m * n];
        let flops = 2.0 * (m * n * k) as f64;
        let median = |call: &mut dyn FnMut()| {
            let mut times: Vec<f64> = (0..15)
                .map(|_| {
                    let t = Instant::now();
                    call();
                    t.elapsed().as_secs_f64()
                })
                .collect();
            times.sort_by(f64::total_cmp);
            flops / times[7] / 1e9
        };
        let plain = median(&mut || pool.install(|| matmul(DType::F32, &w, n, k, &x, m, &mut y)));
        #[cfg(target_arch = "x86_64")]
        let packed = kernels::packed_pays(active_path(), m, threads()).then(|| {
            let p = kernels::PackedF32::new(&w, n, k);
            median(&mut || pool.install(|| kernels::matmul_packed(&p, &x, m, None, &mut y)))
        });
        #[cfg(not(target_arch = "x86_64"))]
        let packed: Option<f64> = None;
        let packed = packed.map_or("- | -".into(), |g| {
            format!("{g:.1} | {:.0} %", 100.0 * g / peak)
        });
        println!(
            "| {m} | {n} | {k} | {plain:.1} | {:.0} % | {packed} |",
            100.0 * plain / peak
        );
        group.throughput(Throughput::Elements(flops as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{m}x{n}x{k}")),
            &(),
            |b, _| b.iter(|| pool.install(|| matmul(DType::F32, &w, n, k, &x, m, &mut y))),
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_millis(300)).measurement_time(std::time::Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
