//! matvec per weight encoding at LLM shapes, next to the machine's read bandwidth.
//!
//! `cargo bench --bench matvec`. Settings: `CYB_BENCH_THREADS` (default 2),
//! `CYB_BENCH_DTYPES=q4_0,q8_0` (default all), `CYB_BENCH_SHAPES=4096x4096,...` (n x k),
//! `CYB_LLM_PORTABLE_KERNELS=1` (portable path), `CYB_BENCH_CACHED=1` (one copy of the
//! weights, so they stay in cache: the kernels' compute rate), `CYB_BENCH_ROWS=512` (prefill
//! instead: `matmul` of that many activation rows, the panel kernels on and off alternately,
//! see [`prefill`]).
//!
//! First prints a table: weight bytes / time (median) as GB/s and as a share of the read
//! bandwidth measured in the same run (a parallel sum over 512 MiB in 16 MiB arrays, median,
//! plain and prefetching, before and after the cases; the largest counts); then the
//! criterion measurements (throughput = weight bytes). Each case cycles through copies of its
//! weights totalling at least 256 MiB, so that the weights come from memory as in a real
//! forward pass (a model's layers do not fit in the last-level cache), not from the cache.
//! Weights and bandwidth arrays lie in memory advised for transparent huge pages, as `run` and
//! `bench` hold a model (with 4 KiB pages both rates are about a third lower here). Where the
//! CPU repacks an encoding for decoding (q4_k, q6_k on AVX-512 VNNI), a row `q4_k x8` times
//! that path too.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cyb_llm::backend::cpu::kernels::{active_path, matmul, matvec, set_panels};
use cyb_llm::DType;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::time::{Duration, Instant};

/// (n, k): output rows, values per row.
const SHAPES: [(usize, usize); 4] = [(576, 1536), (896, 4864), (4096, 4096), (4096, 14336)];

fn threads() -> usize {
    std::env::var("CYB_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

fn dtypes() -> Vec<DType> {
    match std::env::var("CYB_BENCH_DTYPES") {
        Ok(list) => list.split(',').filter_map(DType::from_name).collect(),
        Err(_) => DType::MATMUL_WEIGHTS.to_vec(),
    }
}

/// Random weights: random payload bytes with small finite f16 scales (floats: small values).
fn weights(dtype: DType, n: usize, k: usize) -> Vec<u8> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let bb = dtype.block_bytes();
    let mut w = vec![0u8; n * k / dtype.block_values() * bb];
    rng.fill(&mut w[..]);
    let small = |rng: &mut rand_chacha::ChaCha8Rng| rng.gen_range(-0.01f32..0.01);
    match dtype {
        DType::F32 => w
            .chunks_exact_mut(4)
            .for_each(|c| c.copy_from_slice(&small(&mut rng).to_le_bytes())),
        DType::F16 | DType::BF16 => w.chunks_exact_mut(2).for_each(|c| {
            let h = half::f16::from_f32(small(&mut rng)).to_bits();
            let b = (small(&mut rng).to_bits() >> 16) as u16;
            let bits = if dtype == DType::F16 { h } else { b };
            c.copy_from_slice(&bits.to_le_bytes());
        }),
        _ => {
            for b in w.chunks_exact_mut(bb) {
                for &o in dtype.f16_scale_offsets() {
                    b[o..o + 2]
                        .copy_from_slice(&half::f16::from_f32(small(&mut rng)).to_le_bytes());
                }
            }
        }
    }
    w
}

/// Wrapping sum of `c`, 64 bytes at a time, with the line 4 KiB ahead prefetched (as the
/// kernels do) where the CPU has a prefetch instruction.
fn sum_prefetched(c: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    for (j, line) in c.chunks(8).enumerate() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching has no effect on memory and does not fault on any address.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(c.as_ptr().wrapping_add(8 * j + 512) as *const i8);
        }
        for (a, &v) in acc.iter_mut().zip(line) {
            *a = a.wrapping_add(v);
        }
    }
    acc.iter().fold(0, |a, &v| a.wrapping_add(v))
}

/// Read bandwidth in GB/s, measured the way the cases read their weights: a wrapping sum of
/// u64 over 32 arrays of 16 MiB taken in turn, each split over the pool like a matvec's rows;
/// the median over three rounds, plain and with software prefetch, whichever is faster.
fn read_bandwidth(pool: &rayon::ThreadPool) -> f64 {
    let len = 2usize << 20;
    let arrays: Vec<memmap2::MmapMut> = (0..32u64)
        .map(|a| {
            let values: Vec<u8> = (0..len as u64)
                .flat_map(|i| (i ^ a).to_le_bytes())
                .collect();
            huge_copy(&values)
        })
        .collect();
    let part = len.div_ceil(4 * pool.current_num_threads());
    let plain = |c: &[u64]| c.iter().fold(0u64, |a, &v| a.wrapping_add(v));
    let rate = |sum: &(dyn Fn(&[u64]) -> u64 + Sync)| {
        let mut times: Vec<f64> = (0..3 * arrays.len())
            .map(|r| {
                let bytes = &arrays[r % arrays.len()];
                // SAFETY: the mapping is page-aligned and holds `len` u64 values.
                let data = unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const u64, len) };
                let t = Instant::now();
                let s: u64 = pool.install(|| {
                    data.par_chunks(part)
                        .map(sum)
                        .reduce(|| 0, u64::wrapping_add)
                });
                std::hint::black_box(s);
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        (len * 8) as f64 / times[times.len() / 2] / 1e9
    };
    rate(&plain).max(rate(&sum_prefetched))
}

/// `CYB_BENCH_SHAPES` (`NxK,NxK`) or [`SHAPES`].
fn shapes() -> Vec<(usize, usize)> {
    let parse = |s: &str| {
        let (n, k) = s.split_once('x')?;
        Some((n.parse().ok()?, k.parse().ok()?))
    };
    match std::env::var("CYB_BENCH_SHAPES") {
        Ok(list) => list.split(',').filter_map(parse).collect(),
        Err(_) => SHAPES.to_vec(),
    }
}

/// `bytes` copied into anonymous memory advised for transparent huge pages (on Linux), where
/// `run` and `bench` hold a model's weights.
fn huge_copy(bytes: &[u8]) -> memmap2::MmapMut {
    let mut map = memmap2::MmapOptions::new()
        .len(bytes.len())
        .map_anon()
        .expect("matvec bench: anonymous memory");
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    map.copy_from_slice(bytes);
    map
}

/// Copies of one weight matrix totalling at least 256 MiB (at least two; one when cached), in
/// huge pages as [`huge_copy`] makes them.
fn copies(dtype: DType, n: usize, k: usize) -> Vec<memmap2::MmapMut> {
    let w = weights(dtype, n, k);
    let count = if std::env::var("CYB_BENCH_CACHED").is_ok_and(|v| v == "1") {
        1
    } else {
        (256usize << 20).div_ceil(w.len()).max(2)
    };
    (0..count).map(|_| huge_copy(&w)).collect()
}

/// The activation row of the cases.
fn activations(k: usize) -> Vec<f32> {
    (0..k)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
        .collect()
}

/// Median seconds of `product(i)` (`i` cycling through `copies` copies of the weights) over
/// about 0.3 s of runs, on the pool.
fn median_secs(pool: &rayon::ThreadPool, copies: usize, product: impl Fn(usize) + Sync) -> f64 {
    let mut next = 0;
    let mut run = || {
        let i = next % copies;
        next += 1;
        let t = Instant::now();
        pool.install(|| product(i));
        t.elapsed().as_secs_f64()
    };
    run();
    let once = run().max(1e-6);
    let reps = ((0.3 / once) as usize).clamp(5, 2000);
    let mut times: Vec<f64> = (0..reps).map(|_| run()).collect();
    times.sort_by(f64::total_cmp);
    times[reps / 2]
}

/// Median seconds of one matvec (cycling through the copies).
fn time_matvec(
    pool: &rayon::ThreadPool,
    dtype: DType,
    ws: &[memmap2::MmapMut],
    n: usize,
    k: usize,
) -> f64 {
    let x = activations(k);
    let y = std::sync::Mutex::new(vec![0.0f32; n]);
    median_secs(pool, ws.len(), |i| {
        matvec(dtype, &ws[i], n, k, &x, &mut y.lock().unwrap())
    })
}

/// Median seconds of one product over the copies repacked eight rows at a time (the decode
/// path of q4_k / q6_k on CPUs with AVX-512 VNNI), where the weight is repacked there.
fn time_interleaved(
    pool: &rayon::ThreadPool,
    dtype: DType,
    ws: &[memmap2::MmapMut],
    n: usize,
    k: usize,
) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        use cyb_llm::backend::cpu::kernels::Interleaved;
        if !Interleaved::supports(active_path(), dtype, n, k) {
            return None;
        }
        let packed: Vec<Interleaved> = ws
            .iter()
            .map(|w| pool.install(|| Interleaved::new(dtype, w, n, k)))
            .collect::<Option<_>>()?;
        let x = activations(k);
        let y = std::sync::Mutex::new(vec![0.0f32; n]);
        Some(median_secs(pool, packed.len(), |i| {
            packed[i].matvec(&x, &mut y.lock().unwrap())
        }))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (pool, dtype, ws, n, k);
        None
    }
}

/// Prefill: `matmul` of `m` activation rows per encoding and shape, with the panel kernels
/// (where the encoding has one) and with the four-row kernels, alternating, 7 runs each after
/// a warm-up. Prints the median and the range of each in GOP/s (2 m n k / time) and the ratio
/// of the medians.
fn prefill(pool: &rayon::ThreadPool, m: usize) {
    println!(
        "matmul, {m} activation rows, {} threads, {:?} kernels",
        pool.current_num_threads(),
        active_path()
    );
    println!("| dtype | n x k | panels GOP/s (median, min-max) | four-row GOP/s | ratio |");
    println!("|---|---|---|---|---|");
    for dtype in dtypes() {
        for (n, k) in shapes() {
            if !k.is_multiple_of(dtype.block_values()) {
                continue;
            }
            let w = weights(dtype, n, k);
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
                .collect();
            let mut y = vec![0.0f32; m * n];
            let mut run = |panels: bool| {
                set_panels(panels);
                let t = Instant::now();
                pool.install(|| matmul(dtype, &w, n, k, &x, m, &mut y));
                t.elapsed().as_secs_f64()
            };
            run(true);
            run(false);
            let (mut on, mut off) = (Vec::new(), Vec::new());
            for _ in 0..7 {
                on.push(run(true));
                off.push(run(false));
            }
            set_panels(true);
            let ops = 2.0 * (m * n * k) as f64 / 1e9;
            let stats = |t: &mut Vec<f64>| {
                t.sort_by(f64::total_cmp);
                (ops / t[t.len() / 2], ops / t[t.len() - 1], ops / t[0])
            };
            let ((a, a0, a1), (b, b0, b1)) = (stats(&mut on), stats(&mut off));
            println!(
                "| {} | {n}x{k} | {a:.1} ({a0:.1}-{a1:.1}) | {b:.1} ({b0:.1}-{b1:.1}) | {:.2} |",
                dtype.name(),
                a / b
            );
        }
    }
}

fn bench(c: &mut Criterion) {
    let threads = threads();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    if let Some(m) = std::env::var("CYB_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        prefill(&pool, m);
        return;
    }
    let bw_before = read_bandwidth(&pool);
    let dtypes = dtypes();
    let shapes = shapes();
    let mut rows = Vec::new();
    for &dtype in &dtypes {
        for &(n, k) in &shapes {
            let ws = copies(dtype, n, k);
            let t = time_matvec(&pool, dtype, &ws, n, k);
            rows.push((
                dtype.name().to_string(),
                n,
                k,
                t,
                ws[0].len() as f64 / t / 1e9,
            ));
            if let Some(t) = time_interleaved(&pool, dtype, &ws, n, k) {
                let name = format!("{} x8", dtype.name());
                rows.push((name, n, k, t, ws[0].len() as f64 / t / 1e9));
            }
        }
    }
    let bw = bw_before.max(read_bandwidth(&pool));
    println!(
        "matvec, {threads} threads, {:?} kernels; read bandwidth {bw:.1} GB/s",
        active_path()
    );
    println!(
        "{:<8} {:>12} {:>10} {:>9} {:>8}",
        "dtype", "n x k", "time", "GB/s", "% of bw"
    );
    for (name, n, k, t, gbs) in rows {
        println!(
            "{:<8} {:>12} {:>8.1}us {gbs:>9.1} {:>7.0}%",
            name,
            format!("{n}x{k}"),
            t * 1e6,
            100.0 * gbs / bw
        );
    }
    let mut group = c.benchmark_group("matvec");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(1));
    for &dtype in &dtypes {
        for &(n, k) in &shapes {
            let ws = copies(dtype, n, k);
            let x = vec![0.25f32; k];
            let mut y = vec![0.0f32; n];
            let mut next = 0;
            group.throughput(Throughput::Bytes(ws[0].len() as u64));
            group.bench_function(BenchmarkId::new(dtype.name(), format!("{n}x{k}")), |b| {
                b.iter(|| {
                    let w = &ws[next % ws.len()];
                    next += 1;
                    pool.install(|| matvec(dtype, w, n, k, &x, &mut y))
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
