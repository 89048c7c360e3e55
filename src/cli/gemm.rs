//! `cyb-llm gemm`: this CPU's cache sizes and measured FMA peak, and the float GEMM's
//! throughput at encoder shapes as a fraction of that peak (what `scripts/bench-embed.sh`
//! prints next to its table).

use super::CmdResult;
use cyb_llm::backend::cpu::{kernels, worker_pool};
use cyb_llm::backend::dispatch::physical_cores;
use cyb_llm::DType;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct GemmArgs {
    /// Worker threads (default: physical cores).
    #[arg(short, long)]
    threads: Option<usize>,
    /// Activation rows of the products (the default: a batch of 32 sentences of 32 tokens).
    #[arg(short, long, default_value_t = 1024)]
    m: usize,
    /// Hidden size of the encoder (the products are 4 of hidden x hidden, one hidden x ffn
    /// and one ffn x hidden per layer; the defaults are all-MiniLM-L6-v2's).
    #[arg(long, default_value_t = 384)]
    hidden: usize,
    /// Feed-forward size of the encoder.
    #[arg(long, default_value_t = 1536)]
    ffn: usize,
}

/// Seconds of one product: the fastest of at least 7 calls and 0.2 s (the peak is the
/// best of its runs too, so that background load lowers both alike).
fn seconds(mut call: impl FnMut()) -> f64 {
    call();
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut calls = 0;
    while calls < 7 || start.elapsed().as_secs_f64() < 0.2 {
        let t = Instant::now();
        call();
        best = best.min(t.elapsed().as_secs_f64());
        calls += 1;
    }
    best
}

pub fn run(a: GemmArgs) -> CmdResult {
    let threads = a.threads.unwrap_or_else(physical_cores).max(1);
    let pool = worker_pool(threads)?;
    let c = kernels::machine::cache_sizes();
    let source = if c.reported { "reported" } else { "fallbacks" };
    println!(
        "caches: L1d {} KiB, L2 {} KiB (per core), L3 {} KiB ({source}); kernel path {:?}",
        c.l1d >> 10,
        c.l2 >> 10,
        c.l3 >> 10,
        kernels::active_path()
    );
    // The peak is measured on the GEMM's pool before every product and after the last; each
    // product is set against the better of the two measured next to it (background load
    // comes and goes), the layer against the work those peaks allow in the products' times.
    let peak = || pool.install(kernels::machine::fma_peak_gflops);
    let mut peaks = vec![peak()];
    let (m, h, f) = (a.m, a.hidden, a.ffn);
    let mut state = 0x9E37_79B9u32;
    let mut value = || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5
    };
    let mut rows = Vec::new();
    let mut times = Vec::new();
    for (n, k, count) in [(h, h, 4), (f, h, 1), (h, f, 1)] {
        let w: Vec<u8> = (0..n * k).flat_map(|_| value().to_le_bytes()).collect();
        let x: Vec<f32> = (0..m * k).map(|_| value()).collect();
        let mut y = vec![0.0f32; m * n];
        #[cfg(target_arch = "x86_64")]
        let t = if kernels::packed_pays(kernels::active_path(), m, threads) {
            let p = kernels::PackedF32::new(&w, n, k);
            seconds(|| pool.install(|| kernels::matmul_packed(&p, &x, m, None, &mut y)))
        } else {
            seconds(|| pool.install(|| kernels::matmul(DType::F32, &w, n, k, &x, m, &mut y)))
        };
        #[cfg(not(target_arch = "x86_64"))]
        let t = seconds(|| pool.install(|| kernels::matmul(DType::F32, &w, n, k, &x, m, &mut y)));
        let flops = 2.0 * (m * n * k) as f64;
        rows.push((format!("GEMM {m}x{n}x{k} (f32)"), flops / t / 1e9));
        times.push((count as f64 * flops, count as f64 * t));
        peaks.push(peak());
    }
    let best = |p: &[Option<f64>]| p.iter().flatten().copied().reduce(f64::max);
    let near: Vec<Option<f64>> = (0..rows.len()).map(|i| best(&peaks[i..i + 2])).collect();
    match best(&peaks) {
        Some(p) => println!("FMA peak, {threads} threads: {p:.1} GFLOP/s (measured, best)"),
        None => println!("FMA peak: not measured on this CPU"),
    }
    for ((what, g), p) in rows.iter().zip(&near) {
        let frac = p.map_or(String::new(), |p| {
            format!(", {:.0} % of peak ({p:.1})", 100.0 * g / p)
        });
        println!("{what}: {g:.1} GFLOP/s{frac}");
    }
    let (flops, secs) = times
        .iter()
        .fold((0.0, 0.0), |(f, s), &(fi, si)| (f + fi, s + si));
    let possible: Option<f64> = times
        .iter()
        .zip(&near)
        .map(|(&(_, s), p)| p.map(|p| s * p * 1e9))
        .sum();
    let frac = possible.map_or(String::new(), |w| {
        format!(
            ", {:.0} % of the peaks next to its products",
            100.0 * flops / w
        )
    });
    println!(
        "GEMM, encoder layer ({m} rows, 4 x {h}x{h}, {f}x{h}, {h}x{f}): {:.1} GFLOP/s{frac}",
        flops / secs / 1e9
    );
    Ok(ExitCode::SUCCESS)
}
