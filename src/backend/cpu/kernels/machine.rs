//! What the float GEMM knows of the machine it runs on: the data-cache sizes the OS reports
//! (the GEMM's blocking is derived from them) and a measured FMA peak (benchmarks report the
//! GEMM as a fraction of it).

use std::sync::OnceLock;
use std::time::Instant;

/// Data-cache sizes of one core, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSizes {
    /// Level-1 data cache.
    pub l1d: usize,
    /// Level-2 cache.
    pub l2: usize,
    /// Level-3 cache (shared), 0 where none is reported.
    pub l3: usize,
    /// Whether the sizes were read from the OS (`false`: the fallbacks).
    pub reported: bool,
}

/// Sizes assumed where the OS reports none: 32 KiB L1d and 512 KiB L2 are at or below what
/// every x86-64 and aarch64 server core of the last decade has.
const FALLBACK: CacheSizes = CacheSizes {
    l1d: 32 << 10,
    l2: 512 << 10,
    l3: 0,
    reported: false,
};

/// The data-cache sizes of CPU 0, from `/sys/devices/system/cpu/cpu0/cache` (Linux), read
/// once; `FALLBACK` values for levels it does not report (other OSes: all of them).
pub fn cache_sizes() -> CacheSizes {
    static SIZES: OnceLock<CacheSizes> = OnceLock::new();
    *SIZES.get_or_init(|| read_sysfs("/sys/devices/system/cpu/cpu0/cache"))
}

/// Cache sizes from a sysfs cache folder (`index*/{level,type,size}`).
fn read_sysfs(dir: &str) -> CacheSizes {
    let mut sizes = FALLBACK;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return sizes;
    };
    for e in entries.flatten() {
        let read = |f: &str| std::fs::read_to_string(e.path().join(f)).unwrap_or_default();
        let (level, kind, size) = (read("level"), read("type"), read("size"));
        let Some(bytes) = parse_size(size.trim()) else {
            continue;
        };
        match (level.trim(), kind.trim()) {
            ("1", "Data" | "Unified") => sizes.l1d = bytes,
            ("2", "Data" | "Unified") => sizes.l2 = bytes,
            ("3", "Data" | "Unified") => sizes.l3 = bytes,
            _ => continue,
        }
        sizes.reported = true;
    }
    sizes
}

/// `"32K"`, `"1024K"`, `"32M"` or a plain byte count.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let v: usize = digits.parse().ok()?;
    let scale = match unit.trim() {
        "" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        _ => return None,
    };
    Some(v * scale).filter(|&b| b > 0)
}

/// The FMA peak of the vector width the float GEMM uses here, measured on the current rayon
/// pool (where the GEMM runs): every worker runs 24 independent fused multiply-add chains of
/// 16 lanes (AVX-512F) or 8 (AVX2 + FMA) for about 2 ms (shorter than one product of an
/// encoder's GEMM, and than a scheduler time slice); the best GFLOP/s (2 flops per lane) of
/// sixty runs, from before the workers start to after the last ends. `None` on CPUs without either.
pub fn fma_peak_gflops() -> Option<f64> {
    let lanes = fma_lanes()?;
    // About 2 ms per run at 4 GHz and one vector FMA per cycle.
    let iters = 300_000usize;
    let mut best = 0.0f64;
    for _ in 0..60 {
        let t = Instant::now();
        let workers = rayon::broadcast(|_| std::hint::black_box(fma_chains(iters))).len();
        let flops = (workers * iters * CHAINS * lanes * 2) as f64;
        best = best.max(flops / t.elapsed().as_secs_f64() / 1e9);
    }
    Some(best)
}

/// Independent FMA chains per thread in [`fma_peak_gflops`] (enough to cover the FMA latency
/// times the FMA units of any current core).
const CHAINS: usize = 24;

/// Lanes of the widest FMA the float GEMM uses on this CPU.
fn fma_lanes() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if super::avx512_detected() {
            return Some(16);
        }
        if super::KernelPath::Avx2.available() {
            return Some(8);
        }
    }
    None
}

/// [`CHAINS`] chains of `iters` FMAs each at [`fma_lanes`] width; returns a value of the
/// chains so that they are not optimized away.
fn fma_chains(iters: usize) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if super::avx512_detected() {
            // SAFETY: AVX-512F was detected.
            return unsafe { x86::chains512(iters) };
        }
        if super::KernelPath::Avx2.available() {
            // SAFETY: AVX2 and FMA were detected.
            return unsafe { x86::chains256(iters) };
        }
    }
    let _ = iters;
    0.0
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::CHAINS;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn chains512(iters: usize) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999), _mm512_set1_ps(0.001));
        let mut c = [_mm512_setzero_ps(); CHAINS];
        for _ in 0..iters {
            for ci in c.iter_mut() {
                *ci = _mm512_fmadd_ps(a, *ci, b);
            }
        }
        let s = c
            .into_iter()
            .fold(_mm512_setzero_ps(), |s, v| _mm512_add_ps(s, v));
        _mm512_reduce_add_ps(s)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn chains256(iters: usize) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999), _mm256_set1_ps(0.001));
        let mut c = [_mm256_setzero_ps(); CHAINS];
        for _ in 0..iters {
            for ci in c.iter_mut() {
                *ci = _mm256_fmadd_ps(a, *ci, b);
            }
        }
        let s = c
            .into_iter()
            .fold(_mm256_setzero_ps(), |s, v| _mm256_add_ps(s, v));
        let mut out = [0.0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), s);
        out.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("1024K"), Some(1 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0K"), None);
        assert_eq!(parse_size("12X"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn a_missing_folder_gives_the_fallbacks() {
        assert_eq!(read_sysfs("/nonexistent/cache"), FALLBACK);
    }

    #[test]
    fn reported_sizes_are_plausible() {
        let s = cache_sizes();
        assert!(s.l1d >= 4 << 10 && s.l2 >= s.l1d, "{s:?}");
    }

    #[test]
    fn the_peak_is_positive_where_measured() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        if let Some(p) = pool.install(fma_peak_gflops) {
            assert!(p > 0.0 && p.is_finite(), "{p}");
        }
    }
}
