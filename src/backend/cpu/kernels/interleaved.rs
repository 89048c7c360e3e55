//! q4_k and q6_k weights repacked eight rows at a time for the matrix-vector product on
//! AVX-512 VNNI (x86-64, 256-bit vectors).
//!
//! In the file, a q4_k or q6_k row is its blocks end to end, and a matrix-vector kernel that
//! reads rows one at a time spends most of its instructions on per-row work: spreading the
//! block's scales over the products, and a horizontal sum per row. Repacked, the blocks of
//! eight rows at one position lie together as one *group block*, arranged so that the i32
//! lane `r` of every vector belongs to row `r`: four code bytes of each of the eight rows per
//! 32-byte vector, the scales of the eight rows side by side. One `vpdpbusd` then adds four
//! products to each of eight rows against four activation bytes broadcast to every lane, one
//! `vpmulld` applies eight rows' scales, and one vector store writes eight outputs. llama.cpp
//! repacks q4_k rows at load for the same reason (its `block_q4_Kx8`); this layout differs
//! from it, four bytes per row and vector instead of eight, so that no shuffle precedes the
//! products.
//!
//! Group block layouts (each row's block as ggml stores it, `r` = row in the group, 0..8):
//! - **q4_k** (8 x 144 = 1152 bytes): `d` of the rows (8 f16), `dmin` (8 f16); the three u32
//!   words of each row's 12 packed 6-bit scale and min bytes, word `t` of the rows at
//!   `32 + 32 t` (8 u32 each); then the codes, 32 vectors of 32 bytes: vector `8 c + i` holds
//!   bytes `32 c + 4 i .. 32 c + 4 i + 4` of each row's 128 code bytes (low nibbles: values
//!   `64 c + 4 i ..`, high nibbles: values `64 c + 32 + 4 i ..`).
//! - **q6_k** (8 x 210 = 1680 bytes): `d` of the rows (8 f16); the sixteen 8-bit scales,
//!   scale `j` of the rows at `16 + 8 j` (8 i8 each); then for each half `h` of the block and
//!   each `i` in 0..8, three vectors (at `144 + 96 (8 h + i)`): bytes `64 h + 4 i ..` and
//!   `64 h + 32 + 4 i ..` of the rows' low-bit bytes `ql`, and bytes `32 h + 4 i ..` of the
//!   high-bit bytes `qh`.
//!
//! The arithmetic per row is the AVX2 row kernel's (`avx2::q4_k`, `avx2::q6_k`), lane for
//! lane: that kernel sums a block's products into eight i32 lanes, lane `i` taking code bytes
//! `4 i .. 4 i + 4` of every 32-byte chunk, which are exactly the bytes row `r` has in lane `r`
//! of the vectors `i` here; its float accumulators per lane (`acc += (d * d_a) * lane`, fused)
//! and its final horizontal sum are kept per row and lane here in the same order. The outputs
//! equal the AVX2 row kernels' bit for bit, so decoding gives the tokens it gave before.
//!
//! The repacked copy is made once per weight (the cpu backend keeps it next to the model) and
//! costs as many bytes as the weight.

use super::act::{quantize_q8k, Q8KBlock};
use super::avx2::prefetch_block;
use super::KernelPath;
use crate::dtype::DType;
use rayon::prelude::*;
use std::arch::x86_64::*;

/// Rows per group block.
pub const ROWS: usize = 8;

/// A q4_k or q6_k weight `[n, k]` repacked into group blocks of eight rows.
pub struct Interleaved {
    dtype: DType,
    n: usize,
    k: usize,
    /// The group blocks, in anonymous memory advised for transparent huge pages (on Linux):
    /// with 4 KiB pages the products measured 10-20% slower, as the model's own weights do.
    bytes: memmap2::MmapMut,
}

impl Interleaved {
    /// Whether a weight of `dtype` and shape `[n, k]` can be repacked and multiplied on
    /// `path`: q4_k or q6_k, `n` a multiple of eight, on [`KernelPath::Avx512Vnni`].
    pub fn supports(path: KernelPath, dtype: DType, n: usize, k: usize) -> bool {
        path == KernelPath::Avx512Vnni
            && matches!(dtype, DType::Q4K | DType::Q6K)
            && n > 0
            && n.is_multiple_of(ROWS)
            && k > 0
            && k.is_multiple_of(256)
    }

    /// Repacks the row-major weight `w` (`n` rows of `k` values as stored), on the current
    /// rayon pool; `None` where the system refuses the memory for the copy.
    ///
    /// # Panics
    /// If [`supports`](Interleaved::supports) does not hold for the active path, or `w` does
    /// not hold `[n, k]` of `dtype`.
    pub fn new(dtype: DType, w: &[u8], n: usize, k: usize) -> Option<Self> {
        assert!(
            Self::supports(super::active_path(), dtype, n, k),
            "interleaved: {dtype} [{n}, {k}] is not repacked on this CPU"
        );
        let bb = dtype.block_bytes();
        let nb = k / 256;
        let row_bytes = nb * bb;
        assert_eq!(
            w.len(),
            n * row_bytes,
            "interleaved: {dtype} bytes of [{n}, {k}]"
        );
        let mut bytes = huge_page_buffer(n * row_bytes)?;
        let place = if dtype == DType::Q4K {
            place_q4k
        } else {
            place_q6k
        };
        bytes
            .par_chunks_mut(ROWS * row_bytes)
            .enumerate()
            .for_each(|(g, dst)| {
                for (b, group) in dst.chunks_exact_mut(ROWS * bb).enumerate() {
                    for r in 0..ROWS {
                        let at = (g * ROWS + r) * row_bytes + b * bb;
                        place(&w[at..at + bb], r, group);
                    }
                }
            });
        Some(Interleaved { dtype, n, k, bytes })
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// `y[n] = sum_k W[n,k] * x[k]`, equal bit for bit to [`super::matvec`] on the AVX2
    /// path, on the current rayon pool.
    ///
    /// # Panics
    /// If `x` does not hold `k` values or `y` does not hold `n`.
    pub fn matvec(&self, x: &[f32], y: &mut [f32]) {
        assert_eq!(x.len(), self.k, "interleaved: activation length");
        assert_eq!(y.len(), self.n, "interleaved: output length");
        let acts = quantize_q8k(x, self.k, 1);
        let nb = self.k / 256;
        let group_bytes = ROWS * nb * self.dtype.block_bytes();
        let groups = self.n / ROWS;
        let threads = rayon::current_num_threads().max(1);
        let per_task = groups.div_ceil(threads * 4).max(1);
        let run = if self.dtype == DType::Q4K {
            group_q4k
        } else {
            group_q6k
        };
        y.par_chunks_mut(per_task * ROWS)
            .enumerate()
            .for_each(|(t, out)| {
                for (i, ys) in out.chunks_exact_mut(ROWS).enumerate() {
                    let g = t * per_task + i;
                    let w = &self.bytes[g * group_bytes..(g + 1) * group_bytes];
                    // SAFETY: `new` admits only the Avx512Vnni path, detected on this CPU;
                    // `w` holds `nb` group blocks and `acts` `nb` activation blocks.
                    let sums = unsafe { run(w, &acts[..nb]) };
                    ys.copy_from_slice(&sums);
                }
            });
    }
}

/// `len` zero bytes of anonymous memory, advised for transparent huge pages where the system
/// has them (the advice is a hint: refused, the memory stays in small pages); `None` where the
/// system refuses the memory.
fn huge_page_buffer(len: usize) -> Option<memmap2::MmapMut> {
    let map = memmap2::MmapOptions::new().len(len).map_anon().ok()?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    Some(map)
}

/// Copies `src` into `dst` at `to`.
fn put(dst: &mut [u8], to: usize, src: &[u8]) {
    dst[to..to + src.len()].copy_from_slice(src);
}

/// Places the q4_k block `blk` of row `r` into its group block `g`.
fn place_q4k(blk: &[u8], r: usize, g: &mut [u8]) {
    put(g, 2 * r, &blk[0..2]);
    put(g, 16 + 2 * r, &blk[2..4]);
    for t in 0..3 {
        put(g, 32 + 32 * t + 4 * r, &blk[4 + 4 * t..8 + 4 * t]);
    }
    for v in 0..32 {
        put(g, 128 + 32 * v + 4 * r, &blk[16 + 4 * v..20 + 4 * v]);
    }
}

/// Places the q6_k block `blk` of row `r` into its group block `g`.
fn place_q6k(blk: &[u8], r: usize, g: &mut [u8]) {
    put(g, 2 * r, &blk[208..210]);
    for j in 0..16 {
        g[16 + 8 * j + r] = blk[192 + j];
    }
    for h in 0..2 {
        for i in 0..8 {
            let at = 144 + 96 * (8 * h + i) + 4 * r;
            put(g, at, &blk[64 * h + 4 * i..64 * h + 4 * i + 4]);
            put(g, at + 32, &blk[64 * h + 32 + 4 * i..64 * h + 36 + 4 * i]);
            put(g, at + 64, &blk[128 + 32 * h + 4 * i..132 + 32 * h + 4 * i]);
        }
    }
}

#[inline(always)]
unsafe fn load(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

/// Four activation bytes at `p`, broadcast to every i32 lane.
#[inline(always)]
unsafe fn four(p: *const i8) -> __m256i {
    _mm256_set1_epi32((p as *const i32).read_unaligned())
}

/// Byte `j` of each i32 lane of `v`, as i32 (0..256).
#[inline(always)]
unsafe fn byte(v: __m256i, j: usize) -> __m256i {
    _mm256_and_si256(
        _mm256_srlv_epi32(v, _mm256_set1_epi32(8 * j as i32)),
        _mm256_set1_epi32(0xff),
    )
}

/// `a * b` in each i32 lane, exactly, for `a` in the i16 range and `b` in `0..=0xffff` (an
/// i16 in the lane's low half, zero above): one `vpmaddwd`, which multiplies the low halves
/// and adds the high halves' product (zero). Half the cost of `vpmulld` on Intel cores (one
/// micro-op instead of two).
#[inline(always)]
unsafe fn mul16(a: __m256i, b: __m256i) -> __m256i {
    _mm256_madd_epi16(a, b)
}

/// How far ahead of the group block being read its successors are prefetched (a task reads
/// its groups' blocks in one ascending run, and the hardware prefetcher alone leaves the
/// products waiting on memory). Measured on an Intel Xeon (Sapphire Rapids, 2 vCPUs, huge
/// pages), q4_k / q6_k at 2048x8192 and 8192x2048: without prefetch (and with vpmulld) 18 / 14
/// GB/s, 4 KiB ahead 18-21, 2 KiB 21-23, 1 KiB 22-24, 512 B 21-23; the llama-1b shape's decode
/// 19.0 t/s at 4 KiB, 23.6-24.2 at 2 KiB, 24.9-25.0 at 1 KiB. One stream per task (the row
/// kernels read four) needs less lead.
const GROUP_PREFETCH_AHEAD: usize = 1024;

/// The top two bits of each byte of `u`, moved to bits 4..6 (the high part of the q4_k
/// scales and mins 4..8).
#[inline(always)]
unsafe fn top_bits(u: __m256i, lo2: __m256i) -> __m256i {
    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u, 6), lo2), 4)
}

/// `(a0 + a4) + (a2 + a6) + ((a1 + a5) + (a3 + a7))` lane by lane: the order in which the AVX2
/// row kernels' `hsum` adds the eight lanes of one row's accumulator.
#[inline(always)]
unsafe fn lane_tree(a: &[__m256; 8]) -> __m256 {
    let t: [__m256; 4] = [
        _mm256_add_ps(a[0], a[4]),
        _mm256_add_ps(a[1], a[5]),
        _mm256_add_ps(a[2], a[6]),
        _mm256_add_ps(a[3], a[7]),
    ];
    _mm256_add_ps(_mm256_add_ps(t[0], t[2]), _mm256_add_ps(t[1], t[3]))
}

/// The eight rows of one q4_k row group (`w`: its group blocks) against `a`. `sums[i]` holds,
/// per row, lane `i` of the AVX2 row kernel's block sum (the products of code bytes `4 i ..
/// 4 i + 4` of each 32-byte chunk, scaled), `acc[i]` and `acc_m[i]` that kernel's float
/// lanes.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn group_q4k(w: &[u8], a: &[Q8KBlock]) -> [f32; ROWS] {
    let m4 = _mm256_set1_epi8(15);
    let (lo6, lo4, lo2) = (
        _mm256_set1_epi32(0x3f3f_3f3f),
        _mm256_set1_epi32(0x0f0f_0f0f),
        _mm256_set1_epi32(0x0303_0303),
    );
    let zero = _mm256_setzero_si256();
    let mut acc = [_mm256_setzero_ps(); 8];
    let mut acc_m = [_mm256_setzero_ps(); 8];
    for (g, q) in w.chunks_exact(ROWS * 144).zip(a) {
        let p = g.as_ptr();
        prefetch_block(p, GROUP_PREFETCH_AHEAD, ROWS * 144);
        let (u0, u1, u2) = (load(p.add(32)), load(p.add(64)), load(p.add(96)));
        // Scales 0..4 and 4..8, mins 0..4 and 4..8: one byte per scale in each row's lane.
        let sc = [
            _mm256_and_si256(u0, lo6),
            _mm256_or_si256(_mm256_and_si256(u2, lo4), top_bits(u0, lo2)),
        ];
        let mn = [
            _mm256_and_si256(u1, lo6),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi32(u2, 4), lo4),
                top_bits(u1, lo2),
            ),
        ];
        let qa = q.qs.as_ptr();
        let mut sums = [zero; 8];
        for c in 0..4 {
            let (j0, j1) = (2 * c, 2 * c + 1);
            let (s0, s1) = (byte(sc[j0 / 4], j0 % 4), byte(sc[j1 / 4], j1 % 4));
            for (i, sum) in sums.iter_mut().enumerate() {
                let v = load(p.add(128 + 32 * (8 * c + i)));
                let codes_lo = _mm256_and_si256(v, m4);
                let codes_hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                let lo = _mm256_dpbusd_epi32(zero, codes_lo, four(qa.add(64 * c + 4 * i)));
                let hi = _mm256_dpbusd_epi32(zero, codes_hi, four(qa.add(64 * c + 32 + 4 * i)));
                // |lo|, |hi| <= 4 * 15 * 128 and the scales are 6-bit: exact in mul16.
                *sum = _mm256_add_epi32(*sum, mul16(lo, s0));
                *sum = _mm256_add_epi32(*sum, mul16(hi, s1));
            }
        }
        let da = _mm256_set1_ps(q.d);
        let d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)), da);
        let dmin = _mm256_mul_ps(
            _mm256_cvtph_ps(_mm_loadu_si128(p.add(16) as *const __m128i)),
            da,
        );
        for i in 0..8 {
            acc[i] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums[i]), acc[i]);
            let bs = _mm256_set1_epi32(q.bsums32[i]);
            // |bsums32| <= 32 * 128, the mins 6-bit.
            let m = mul16(bs, byte(mn[i / 4], i % 4));
            acc_m[i] = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(m), acc_m[i]);
        }
    }
    let mut out = [0.0f32; ROWS];
    _mm256_storeu_ps(
        out.as_mut_ptr(),
        _mm256_sub_ps(lane_tree(&acc), lane_tree(&acc_m)),
    );
    out
}

/// The eight rows of one q6_k row group (`w`: its group blocks) against `a`, lane `i` of the
/// AVX2 row kernel in `sums[i]` and `acc[i]` as in [`group_q4k`].
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn group_q6k(w: &[u8], a: &[Q8KBlock]) -> [f32; ROWS] {
    let m4 = _mm256_set1_epi8(15);
    let m2 = _mm256_set1_epi8(3);
    let zero = _mm256_setzero_si256();
    let mut acc = [_mm256_setzero_ps(); 8];
    let low_half = _mm256_set1_epi32(0xffff);
    for (g, q) in w.chunks_exact(ROWS * 210).zip(a) {
        let p = g.as_ptr();
        prefetch_block(p, GROUP_PREFETCH_AHEAD, ROWS * 210);
        // Scale j of the eight rows as i16 in the low half of i32 lanes (for mul16).
        let mut sc = [zero; 16];
        for (j, s) in sc.iter_mut().enumerate() {
            let wide = _mm256_cvtepi8_epi32(_mm_loadl_epi64(p.add(16 + 8 * j) as *const __m128i));
            *s = _mm256_and_si256(wide, low_half);
        }
        // Lane i starts at -32 (sc[i] bsums[i] + sc[i + 8] bsums[i + 8]); |bsums| <= 16 * 128.
        let mut sums = [zero; 8];
        for (i, sum) in sums.iter_mut().enumerate() {
            let off = _mm256_add_epi32(
                mul16(_mm256_set1_epi32(q.bsums[i]), sc[i]),
                mul16(_mm256_set1_epi32(q.bsums[i + 8]), sc[i + 8]),
            );
            *sum = _mm256_sub_epi32(zero, _mm256_slli_epi32(off, 5));
        }
        let qa = q.qs.as_ptr();
        for h in 0..2 {
            for (i, sum) in sums.iter_mut().enumerate() {
                let v = p.add(144 + 96 * (8 * h + i));
                let (ql0, ql1, qh) = (load(v), load(v.add(32)), load(v.add(64)));
                let codes = [
                    _mm256_or_si256(
                        _mm256_and_si256(ql0, m4),
                        _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(ql1, m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4),
                    ),
                ];
                for (t, c) in codes.into_iter().enumerate() {
                    let dot = _mm256_dpbusd_epi32(zero, c, four(qa.add(128 * h + 32 * t + 4 * i)));
                    let scale = sc[8 * h + 2 * t + i / 4];
                    // |dot| <= 4 * 63 * 128 < 2^15: exact in mul16.
                    *sum = _mm256_add_epi32(*sum, mul16(dot, scale));
                }
            }
        }
        let d = _mm256_mul_ps(
            _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
            _mm256_set1_ps(q.d),
        );
        for i in 0..8 {
            acc[i] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums[i]), acc[i]);
        }
    }
    let mut out = [0.0f32; ROWS];
    _mm256_storeu_ps(out.as_mut_ptr(), lane_tree(&acc));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Random q4_k / q6_k rows with finite f16 scales.
    fn weights(dtype: DType, n: usize, k: usize, seed: u64) -> Vec<u8> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let bb = dtype.block_bytes();
        let mut w = vec![0u8; n * k / 256 * bb];
        rng.fill(&mut w[..]);
        for b in w.chunks_exact_mut(bb) {
            for &o in dtype.f16_scale_offsets() {
                let s = half::f16::from_f32(rng.gen_range(-1.0..1.0));
                b[o..o + 2].copy_from_slice(&s.to_le_bytes());
            }
        }
        w
    }

    #[test]
    fn equals_the_avx2_row_kernel_bit_for_bit() {
        if !KernelPath::Avx512Vnni.available() {
            eprintln!("interleaved: this CPU lacks AVX-512 VNNI; the kernels are not run");
            return;
        }
        for dtype in [DType::Q4K, DType::Q6K] {
            for (n, k, seed) in [(8, 256, 1), (64, 512, 2), (40, 2048, 3)] {
                let w = weights(dtype, n, k, seed);
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 10);
                let x: Vec<f32> = (0..k).map(|_| rng.gen_range(-2.0..2.0)).collect();
                let mut want = vec![0.0f32; n];
                super::super::matmul_with(
                    KernelPath::Avx2,
                    dtype,
                    &w,
                    n,
                    k,
                    &x,
                    1,
                    None,
                    &mut want,
                );
                let packed = Interleaved::new(dtype, &w, n, k).unwrap();
                let mut got = vec![f32::NAN; n];
                packed.matvec(&x, &mut got);
                for (r, (g, e)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        e.to_bits(),
                        "{dtype} [{n}, {k}] row {r}: {g} vs {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn supports_only_whole_groups_of_k_quants() {
        let p = KernelPath::Avx512Vnni;
        assert!(Interleaved::supports(p, DType::Q4K, 16, 512));
        assert!(!Interleaved::supports(p, DType::Q4K, 12, 512));
        assert!(!Interleaved::supports(p, DType::Q5K, 16, 512));
        assert!(!Interleaved::supports(
            KernelPath::Avx2,
            DType::Q6K,
            16,
            512
        ));
    }
}
