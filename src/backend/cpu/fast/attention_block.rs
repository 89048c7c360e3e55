//! Attention over long unmasked sequences (an audio encoder's 1500 frames) as
//! small matrix products: per block of queries and per head, scores = Q K^T by
//! a register-tiled AVX2/FMA kernel over keys packed in panels, a row softmax
//! with a vectorized exp, then P V by the same tiling. Other shapes, masks and
//! machines use [`super::attention::sdpa`].

use super::attention::SdpaArgs;
use crate::backend::cpu::reference::image::transpose;
use crate::backend::op::Mask;

/// Query rows per register tile.
#[cfg(target_arch = "x86_64")]
const MR: usize = 6;
/// Query rows per task (a multiple of [`MR`]).
const QB: usize = 24;
/// Key (or value) columns per register tile: two 8-lane vectors.
const NR: usize = 16;

/// Whether [`sdpa`] handles this call: the tiles [`fit`] it, and there are at least one block
/// of queries and one tile of keys (fewer take the row kernels of
/// [`super::attention::sdpa`]).
pub(super) fn applies(a: &SdpaArgs, queries: usize) -> bool {
    fit(a) && queries >= QB && a.kv_len >= NR
}

/// Whether the tiles handle this call at all: no mask, head sizes in whole vectors, and
/// AVX2+FMA present.
fn fit(a: &SdpaArgs) -> bool {
    super::super::simd::has_avx2_fma()
        && matches!(a.mask, Mask::None)
        && a.kv_len > 0
        && a.d > 0
        && a.dv.is_multiple_of(NR)
        && a.dv > 0
        && a.kv_heads > 0
        && a.heads.is_multiple_of(a.kv_heads)
}

/// `out [Sq, H, dv]` from `q [Sq, H, d]`, `k [.., Hkv, d]`, `v [.., Hkv, dv]`;
/// callers check [`applies`] first.
pub(super) fn sdpa(
    pool: &rayon::ThreadPool,
    a: &SdpaArgs,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        use rayon::prelude::*;
        let keys = PackedKeys::new(a);
        let mut kt = vec![0.0f32; keys.len(a)];
        pool.install(|| {
            kt.par_chunks_mut(keys.kv_pad * a.d)
                .enumerate()
                .for_each(|(kh, t)| keys.pack_head(a, k, kh, t));
            let queries = out.len() / (a.heads * a.dv);
            let qb = block_rows(queries);
            // Few blocks: one per split, so that an idle thread steals single blocks (each
            // split allocates its scratch, which many blocks do not need).
            let few = queries.div_ceil(qb) <= 8 * rayon::current_num_threads();
            out.par_chunks_mut(qb * a.heads * a.dv)
                .with_max_len(if few { 1 } else { usize::MAX })
                .enumerate()
                .for_each_init(
                    || keys.scratch(a),
                    |(qp, s), (blk, o)| {
                        let bufs = keys.bufs(qp, s, &kt);
                        // SAFETY: `applies` checked AVX2+FMA (and `PackedKeys::new`
                        // AVX-512F for wide tiles); the buffers are sized by `keys`.
                        unsafe { keys.block(a, blk * qb, q, v, o, bufs) }
                    },
                );
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    super::attention::sdpa(pool, a, q, k, v, out);
}

/// [`Op::SdpaBatch`](crate::backend::Op::SdpaBatch): `lengths.len()` sequences of `rows`
/// rows each in `q`, `k`, `v` and `out`; sequence `b`'s queries attend to its first
/// `lengths[b]` keys (`a.kv_len` is not read). The sequences run in parallel, each on one
/// thread through the tiled kernels where they [`fit`] it, else through
/// [`super::attention::sdpa`].
#[allow(clippy::too_many_arguments)]
pub(super) fn sdpa_batch(
    pool: &rayon::ThreadPool,
    a: &SdpaArgs,
    rows: usize,
    lengths: &[usize],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
) {
    use rayon::prelude::*;
    let (q_len, o_len) = (rows * a.heads * a.d, rows * a.heads * a.dv);
    let (k_len, v_len) = (rows * a.kv_heads * a.d, rows * a.kv_heads * a.dv);
    pool.install(|| {
        out.par_chunks_mut(o_len)
            .zip(lengths)
            .enumerate()
            .with_max_len(1)
            .for_each(|(b, (o, &len))| {
                let seq = SdpaArgs { kv_len: len, ..*a };
                let qs = &q[b * q_len..][..q_len];
                let ks = &k[b * k_len..][..len * a.kv_heads * a.d];
                let vs = &v[b * v_len..][..len * a.kv_heads * a.dv];
                #[cfg(target_arch = "x86_64")]
                if fit(&seq) {
                    let keys = PackedKeys::new(&seq);
                    let mut kt = vec![0.0f32; keys.len(&seq)];
                    for (kh, t) in kt.chunks_mut(keys.kv_pad * seq.d).enumerate() {
                        keys.pack_head(&seq, ks, kh, t);
                    }
                    let (mut qp, mut s) = keys.scratch(&seq);
                    for (blk, ob) in o.chunks_mut(QB * seq.heads * seq.dv).enumerate() {
                        let bufs = keys.bufs(&mut qp, &mut s, &kt);
                        // SAFETY: `fit` checked AVX2+FMA (and `PackedKeys::new` AVX-512F
                        // for wide tiles); the buffers are sized by `keys`.
                        unsafe { keys.block(&seq, blk * QB, qs, vs, ob, bufs) }
                    }
                    return;
                }
                super::attention::sdpa(pool, &seq, qs, ks, vs, o);
            });
    });
}

/// [`Op::FusedAttention`](crate::backend::Op::FusedAttention) of `q [n, l, d]`,
/// `kt [n, d, s]` and `v [n, s, e]` into `out [n, l, e]`: per leading index, the keys
/// transposed out of `kt`, then one head of scale 1 without a mask through [`sdpa`] where it
/// [`applies`], else [`super::attention::sdpa`].
pub(super) fn fused_attention(
    pool: &rayon::ThreadPool,
    [n, l, d, s, e]: [usize; 5],
    q: &[f32],
    kt: &[f32],
    v: &[f32],
    out: &mut [f32],
) {
    if s == 0 {
        out.fill(0.0);
        return;
    }
    let unmasked = Mask::None;
    let a = SdpaArgs {
        heads: 1,
        kv_heads: 1,
        d,
        dv: e,
        scale: 1.0,
        mask: &unmasked,
        q_pos: 0,
        kv_len: s,
    };
    let mut k = vec![0.0f32; s * d];
    for i in 0..n {
        transpose(&kt[i * d * s..][..d * s], d, s, &mut k);
        let (qi, vi) = (&q[i * l * d..][..l * d], &v[i * s * e..][..s * e]);
        let oi = &mut out[i * l * e..][..l * e];
        if applies(&a, l) {
            sdpa(pool, &a, qi, &k, vi, oi);
        } else {
            super::attention::sdpa(pool, &a, qi, &k, vi, oi);
        }
    }
}

/// The key panels of one call: the tile width (AVX-512 tiles are twice as wide: keys per
/// panel, value columns per tile) and the keys of each kv head as panels
/// `[panel][d][nr]`, zero padded to `kv_pad` keys.
#[cfg(target_arch = "x86_64")]
struct PackedKeys {
    wide: bool,
    nr: usize,
    kv_pad: usize,
}

#[cfg(target_arch = "x86_64")]
impl PackedKeys {
    fn new(a: &SdpaArgs) -> Self {
        let wide = avx512::applies(a);
        let nr = if wide { avx512::NR } else { NR };
        PackedKeys {
            wide,
            nr,
            kv_pad: a.kv_len.div_ceil(nr) * nr,
        }
    }

    /// Values of the packed keys of all kv heads.
    fn len(&self, a: &SdpaArgs) -> usize {
        a.kv_heads * self.kv_pad * a.d
    }

    /// Packs kv head `kh` of `k` into `t` (`kv_pad * d` values).
    fn pack_head(&self, a: &SdpaArgs, k: &[f32], kh: usize, t: &mut [f32]) {
        let (kv_heads, d, nr) = (a.kv_heads, a.d, self.nr);
        for j in 0..a.kv_len {
            let row = &k[(j * kv_heads + kh) * d..][..d];
            let (panel, c) = (j / nr, j % nr);
            for (p, &x) in row.iter().enumerate() {
                t[(panel * d + p) * nr + c] = x;
            }
        }
    }

    /// Scratch of one task: scaled queries `[QB, d]` and scores `[QB, kv_pad]`.
    fn scratch(&self, a: &SdpaArgs) -> (Vec<f32>, Vec<f32>) {
        (vec![0.0f32; QB * a.d], vec![0.0f32; QB * self.kv_pad])
    }

    fn bufs<'a>(&self, qp: &'a mut [f32], s: &'a mut [f32], kt: &'a [f32]) -> Bufs<'a> {
        Bufs {
            qp,
            s,
            kt,
            kv_pad: self.kv_pad,
        }
    }

    /// [`block`] with the tiles of this width.
    ///
    /// # Safety
    /// The tiles [`fit`] `a` (AVX2+FMA present; AVX-512F where `wide`).
    unsafe fn block(&self, a: &SdpaArgs, i0: usize, q: &[f32], v: &[f32], o: &mut [f32], b: Bufs) {
        if self.wide {
            block::<avx512::Avx512>(a, i0, q, v, o, b)
        } else {
            block::<avx2::Avx2>(a, i0, q, v, o, b)
        }
    }
}

/// Query rows per task for `queries` rows on the current pool: whole register tiles of [`MR`]
/// rows, at most [`QB`], and (where there are enough rows) at least four tasks per thread, so
/// that a few dozen queries (a sentence) spread over the threads instead of one block taking
/// them all.
#[cfg(target_arch = "x86_64")]
fn block_rows(queries: usize) -> usize {
    let tiles = queries.div_ceil(MR);
    let per_task = tiles.div_ceil(4 * rayon::current_num_threads().max(1));
    per_task.clamp(1, QB / MR) * MR
}

/// Per-task scratch and the packed keys.
#[cfg(target_arch = "x86_64")]
struct Bufs<'a> {
    /// Scaled queries of one head, `[QB, d]`.
    qp: &'a mut [f32],
    /// Scores, then probabilities, `[QB, kv_pad]`.
    s: &'a mut [f32],
    /// Keys as panels, `[Hkv][kv_pad / NR][d][NR]`.
    kt: &'a [f32],
    kv_pad: usize,
}

/// The register tiles of one instruction set: keys per panel and value columns per tile
/// ([`Tiles::NR`]), the `Q K^T` tile, the row softmax and the `P V` tile.
#[cfg(target_arch = "x86_64")]
trait Tiles {
    /// Keys per packed panel and value columns per tile.
    const NR: usize;

    /// `s[r, 0..NR] = sum_p qp[r, p] kp[p, 0..NR]` for [`MR`] rows (row stride `lds`).
    ///
    /// # Safety
    /// The CPU has the instruction set.
    unsafe fn qk_tile(qp: &[f32], d: usize, kp: &[f32], s: &mut [f32], lds: usize);

    /// Replaces `x` by `exp(x - max x)` and returns `1 / sum`.
    ///
    /// # Safety
    /// The CPU has the instruction set.
    unsafe fn softmax_row(x: &mut [f32]) -> f32;

    /// `o[r * ldo + c] = t.scale[r] * sum_j t.p[r, j] t.v[j, c]` for `c < NR` and the rows
    /// `r` of `t.scale` (at most [`MR`]).
    ///
    /// # Safety
    /// The CPU has the instruction set.
    unsafe fn pv_tile(t: PvTile, o: &mut [f32], ldo: usize);
}

/// The inputs of one [`Tiles::pv_tile`].
#[cfg(target_arch = "x86_64")]
struct PvTile<'a> {
    /// Probabilities, row stride `ldp`, [`MR`] rows readable.
    p: &'a [f32],
    ldp: usize,
    /// Values from the tile's first column, row stride `ldv`.
    v: &'a [f32],
    ldv: usize,
    /// Keys summed over.
    n: usize,
    /// Per-row output scale (the softmax's `1 / sum`), one per output row.
    scale: &'a [f32],
}

/// One block of queries starting at row `i0`, all heads, with the tiles of `T`; `o` is
/// its output rows.
///
/// # Safety
/// The CPU has `T`'s instruction set.
#[cfg(target_arch = "x86_64")]
unsafe fn block<T: Tiles>(a: &SdpaArgs, i0: usize, q: &[f32], v: &[f32], o: &mut [f32], b: Bufs) {
    let (d, dv, kv_pad) = (a.d, a.dv, b.kv_pad);
    let rows = o.len() / (a.heads * dv);
    let rows_pad = rows.div_ceil(MR) * MR;
    let group = a.heads / a.kv_heads;
    let mut inv = [0.0f32; QB];
    for h in 0..a.heads {
        let kh = h / group;
        for r in 0..rows_pad {
            let dst = &mut b.qp[r * d..][..d];
            if r < rows {
                let src = &q[((i0 + r) * a.heads + h) * d..][..d];
                for (x, &y) in dst.iter_mut().zip(src) {
                    *x = y * a.scale;
                }
            } else {
                dst.fill(0.0);
            }
        }
        let kth = &b.kt[kh * kv_pad * d..][..kv_pad * d];
        for r0 in (0..rows_pad).step_by(MR) {
            for panel in 0..kv_pad / T::NR {
                T::qk_tile(
                    &b.qp[r0 * d..][..MR * d],
                    d,
                    &kth[panel * d * T::NR..][..d * T::NR],
                    &mut b.s[r0 * kv_pad + panel * T::NR..],
                    kv_pad,
                );
            }
        }
        for (r, iv) in inv.iter_mut().enumerate().take(rows) {
            *iv = T::softmax_row(&mut b.s[r * kv_pad..][..a.kv_len]);
        }
        let vh = &v[kh * dv..];
        let (ldv, ldo) = (a.kv_heads * dv, a.heads * dv);
        for r0 in (0..rows).step_by(MR) {
            let scale = &inv[r0..rows.min(r0 + MR)];
            for c0 in (0..dv).step_by(T::NR) {
                let t = PvTile {
                    p: &b.s[r0 * kv_pad..],
                    ldp: kv_pad,
                    v: &vh[c0..],
                    ldv,
                    n: a.kv_len,
                    scale,
                };
                T::pv_tile(t, &mut o[(r0 * a.heads + h) * dv + c0..], ldo);
            }
        }
    }
}

/// The [`Tiles`] implementation and the vector `exp` of one instruction set, written once
/// over the names each module binds: the vector type `V`, its `LANES`, [`Tiles::NR`] = two
/// vectors, the intrinsics aliased as `setzero`, `loadu`, `storeu`, `set1`, `fmadd`,
/// `fnmadd`, `mul`, `add`, `sub`, `max`, `min`, `cvt`, `add_epi32`, `set1_epi32`, `cast`,
/// and the helpers `round`, `shl23`, `hmax`, `hsum`. `$feature` is the `target_feature` list.
#[cfg(target_arch = "x86_64")]
macro_rules! tiles {
    ($feature:literal, $name:ident) => {
        /// This instruction set's [`Tiles`].
        pub(super) struct $name;

        impl Tiles for $name {
            const NR: usize = 2 * LANES;

            #[target_feature(enable = $feature)]
            unsafe fn qk_tile(qp: &[f32], d: usize, kp: &[f32], s: &mut [f32], lds: usize) {
                const NR: usize = 2 * LANES;
                assert!(qp.len() >= MR * d && kp.len() >= d * NR && s.len() >= (MR - 1) * lds + NR);
                let mut acc = [[setzero(); 2]; MR];
                let (qptr, kptr) = (qp.as_ptr(), kp.as_ptr());
                for p in 0..d {
                    let k0 = loadu(kptr.add(p * NR));
                    let k1 = loadu(kptr.add(p * NR + LANES));
                    for (r, lanes) in acc.iter_mut().enumerate() {
                        let x = set1(*qptr.add(r * d + p));
                        lanes[0] = fmadd(x, k0, lanes[0]);
                        lanes[1] = fmadd(x, k1, lanes[1]);
                    }
                }
                for (r, lanes) in acc.iter().enumerate() {
                    let dst = s[r * lds..][..NR].as_mut_ptr();
                    storeu(dst, lanes[0]);
                    storeu(dst.add(LANES), lanes[1]);
                }
            }

            #[target_feature(enable = $feature)]
            unsafe fn softmax_row(x: &mut [f32]) -> f32 {
                let chunks = x.len() / LANES;
                let mut mv = set1(f32::NEG_INFINITY);
                for c in 0..chunks {
                    mv = max(mv, loadu(x.as_ptr().add(c * LANES)));
                }
                let m = x[chunks * LANES..].iter().fold(hmax(mv), |a, &b| a.max(b));
                let mv = set1(m);
                let mut sv = setzero();
                for c in 0..chunks {
                    let ptr = x.as_mut_ptr().add(c * LANES);
                    let e = exp(sub(loadu(ptr), mv));
                    storeu(ptr, e);
                    sv = add(sv, e);
                }
                let mut sum = hsum(sv);
                for t in &mut x[chunks * LANES..] {
                    *t = (*t - m).exp();
                    sum += *t;
                }
                1.0 / sum
            }

            #[target_feature(enable = $feature)]
            unsafe fn pv_tile(t: PvTile, o: &mut [f32], ldo: usize) {
                const NR: usize = 2 * LANES;
                let PvTile {
                    p,
                    ldp,
                    v,
                    ldv,
                    n,
                    scale,
                } = t;
                let mut acc = [[setzero(); 2]; MR];
                assert!(p.len() >= (MR - 1) * ldp + n && v.len() >= (n - 1) * ldv + NR);
                assert!(scale.len() <= MR && o.len() >= scale.len().saturating_sub(1) * ldo + NR);
                let (pptr, vptr) = (p.as_ptr(), v.as_ptr());
                for j in 0..n {
                    let v0 = loadu(vptr.add(j * ldv));
                    let v1 = loadu(vptr.add(j * ldv + LANES));
                    for (r, lanes) in acc.iter_mut().enumerate() {
                        let x = set1(*pptr.add(r * ldp + j));
                        lanes[0] = fmadd(x, v0, lanes[0]);
                        lanes[1] = fmadd(x, v1, lanes[1]);
                    }
                }
                for (r, (lanes, &w)) in acc.iter().zip(scale).enumerate() {
                    let dst = o[r * ldo..][..NR].as_mut_ptr();
                    let w = set1(w);
                    storeu(dst, mul(lanes[0], w));
                    storeu(dst.add(LANES), mul(lanes[1], w));
                }
            }
        }

        /// `exp(x)` to about 2 ulp (Cephes' range reduction and polynomial);
        /// inputs below -87.3 give about 1e-38, not 0.
        #[target_feature(enable = $feature)]
        pub(in crate::backend::cpu) unsafe fn exp(x: V) -> V {
            let x = min(max(x, set1(-87.336_55)), set1(88.376_26));
            let n = round(mul(x, set1(std::f32::consts::LOG2_E)));
            let r = fnmadd(n, set1(0.693_359_4), x);
            let r = fnmadd(n, set1(-2.121_944_4e-4), r);
            let mut p = set1(1.987_569_1e-4);
            for c in [
                1.398_199_9e-3,
                8.333_452e-3,
                4.166_579_6e-2,
                0.166_666_65,
                0.5,
            ] {
                p = fmadd(p, r, set1(c));
            }
            let y = add(fmadd(p, mul(r, r), r), set1(1.0));
            let e = shl23(add_epi32(cvt(n), set1_epi32(127)));
            mul(y, cast(e))
        }
    };
}

/// AVX2 + FMA tiles: 16 keys (value columns) per tile in two 8-lane vectors.
#[cfg(target_arch = "x86_64")]
pub(in crate::backend::cpu) mod avx2 {
    use super::{PvTile, Tiles, MR};
    use std::arch::x86_64::{
        __m256 as V, __m256i, _mm256_add_epi32 as add_epi32, _mm256_add_ps as add,
        _mm256_castsi256_ps as cast, _mm256_cvtps_epi32 as cvt, _mm256_fmadd_ps as fmadd,
        _mm256_fnmadd_ps as fnmadd, _mm256_loadu_ps as loadu, _mm256_max_ps as max,
        _mm256_min_ps as min, _mm256_mul_ps as mul, _mm256_round_ps,
        _mm256_set1_epi32 as set1_epi32, _mm256_set1_ps as set1, _mm256_setzero_ps as setzero,
        _mm256_slli_epi32, _mm256_storeu_ps as storeu, _mm256_sub_ps as sub, _MM_FROUND_NO_EXC,
        _MM_FROUND_TO_NEAREST_INT,
    };

    const LANES: usize = 8;

    #[target_feature(enable = "avx2,fma")]
    fn round(x: V) -> V {
        _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x)
    }

    #[target_feature(enable = "avx2,fma")]
    fn shl23(x: __m256i) -> __m256i {
        _mm256_slli_epi32::<23>(x)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn hmax(x: V) -> f32 {
        let mut lanes = [0.0f32; LANES];
        storeu(lanes.as_mut_ptr(), x);
        lanes.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b))
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn hsum(x: V) -> f32 {
        let mut lanes = [0.0f32; LANES];
        storeu(lanes.as_mut_ptr(), x);
        lanes.iter().sum()
    }

    tiles!("avx2,fma", Avx2);
}

/// AVX-512F tiles: 32 keys (value columns) per tile in two 16-lane vectors.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use super::{PvTile, SdpaArgs, Tiles, MR};
    use std::arch::x86_64::{
        __m512 as V, __m512i, _mm512_add_epi32 as add_epi32, _mm512_add_ps as add,
        _mm512_castsi512_ps as cast, _mm512_cvtps_epi32 as cvt, _mm512_fmadd_ps as fmadd,
        _mm512_fnmadd_ps as fnmadd, _mm512_loadu_ps as loadu, _mm512_max_ps as max,
        _mm512_min_ps as min, _mm512_mul_ps as mul, _mm512_reduce_add_ps as hsum,
        _mm512_reduce_max_ps as hmax, _mm512_roundscale_ps, _mm512_set1_epi32 as set1_epi32,
        _mm512_set1_ps as set1, _mm512_setzero_ps as setzero, _mm512_slli_epi32,
        _mm512_storeu_ps as storeu, _mm512_sub_ps as sub, _MM_FROUND_NO_EXC,
        _MM_FROUND_TO_NEAREST_INT,
    };

    const LANES: usize = 16;

    /// Keys (or value columns) per register tile: two 16-lane vectors.
    pub(super) const NR: usize = 2 * LANES;

    /// Whether the call runs on these tiles: AVX-512F present and value heads in whole tiles.
    pub(super) fn applies(a: &SdpaArgs) -> bool {
        crate::backend::cpu::kernels::avx512_detected() && a.dv.is_multiple_of(NR)
    }

    #[target_feature(enable = "avx512f")]
    fn round(x: V) -> V {
        _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x)
    }

    #[target_feature(enable = "avx512f")]
    fn shl23(x: __m512i) -> __m512i {
        _mm512_slli_epi32::<23>(x)
    }

    tiles!("avx512f", Avx512);
}

#[cfg(test)]
mod tests {
    use super::super::attention::{self, SdpaArgs};
    use super::{applies, sdpa};
    use crate::backend::op::Mask;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 4.0 - 2.0
            })
            .collect()
    }

    /// Queries, keys and values (seeds `seed..seed + 3`) and unmasked arguments for `sq`
    /// queries, `kv` keys, `(heads, kv_heads)` and head sizes `(d, dv)`.
    fn case(
        sq: usize,
        kv: usize,
        (heads, kv_heads): (usize, usize),
        (d, dv): (usize, usize),
        seed: u32,
    ) -> ([Vec<f32>; 3], SdpaArgs<'static>) {
        let qkv = [
            values(sq * heads * d, seed),
            values(kv * kv_heads * d, seed + 1),
            values(kv * kv_heads * dv, seed + 2),
        ];
        let args = SdpaArgs {
            heads,
            kv_heads,
            d,
            dv,
            scale: 1.0 / (d as f32).sqrt(),
            mask: &Mask::None,
            q_pos: 0,
            kv_len: kv,
        };
        (qkv, args)
    }

    #[test]
    fn blocked_attention_matches_the_online_softmax_kernel() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool");
        // Ragged sizes: 53 queries (a partial block), 37 keys (a partial tile), GQA 4/2.
        for (sq, kv, heads, kv_heads, d, dv) in [(53, 37, 4, 2, 12, 16), (30, 70, 2, 2, 64, 32)] {
            let ([q, k, v], args) = case(sq, kv, (heads, kv_heads), (d, dv), 1);
            assert_eq!(
                applies(&args, sq),
                crate::backend::cpu::simd::has_avx2_fma()
            );
            let mut want = vec![0.0f32; sq * heads * dv];
            attention::sdpa(&pool, &args, &q, &k, &v, &mut want);
            let mut got = vec![f32::NAN; sq * heads * dv];
            sdpa(&pool, &args, &q, &k, &v, &mut got);
            let worst = want
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "max abs diff {worst}");
        }
    }

    /// Blocks of queries per task depend on the pool's threads (a sentence's few dozen queries
    /// split into blocks of a few register tiles); every query row is computed alike in any
    /// block, so the results are bitwise equal across pool sizes.
    #[test]
    fn results_do_not_depend_on_the_block_size() {
        let (heads, dv) = (4, 32);
        for sq in [24, 30, 53, 200] {
            let ([q, k, v], args) = case(sq, 29, (heads, heads), (32, dv), 4);
            if !applies(&args, sq) {
                eprintln!("no AVX2+FMA: the blocked attention is not tested here");
                return;
            }
            let outs: Vec<Vec<f32>> = [1, 2, 8]
                .iter()
                .map(|&threads| {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .expect("pool");
                    let mut out = vec![f32::NAN; sq * heads * dv];
                    sdpa(&pool, &args, &q, &k, &v, &mut out);
                    out
                })
                .collect();
            assert!(outs[0].iter().all(|x| x.is_finite()), "sq={sq}");
            for other in &outs[1..] {
                let same = outs[0]
                    .iter()
                    .zip(other)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "sq={sq}");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_exp_is_within_a_few_ulp() {
        assert!(
            crate::backend::cpu::simd::has_avx2_fma(),
            "x86-64 test machines have AVX2+FMA"
        );
        use std::arch::x86_64::*;
        for i in -870..=0 {
            let x = i as f32 / 10.0 + 0.037;
            let mut out = [0.0f32; 8];
            // SAFETY: AVX2+FMA checked above.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), super::avx2::exp(_mm256_set1_ps(x))) };
            let want = (x as f64).exp();
            let rel = ((out[0] as f64 - want) / want).abs();
            assert!(rel < 5e-7, "exp({x}) = {} want {want}", out[0]);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wide_vector_exp_equals_the_avx2_one() {
        if !crate::backend::cpu::kernels::avx512_detected() {
            eprintln!("AVX-512F not detected: the 16-lane exp is not tested here");
            return;
        }
        use std::arch::x86_64::*;
        for i in -870..=0 {
            let x = i as f32 / 10.0 + 0.037;
            let (mut narrow, mut wide) = ([0.0f32; 8], [0.0f32; 16]);
            // SAFETY: AVX2+FMA and AVX-512F checked above (the first by the test before).
            unsafe {
                _mm256_storeu_ps(narrow.as_mut_ptr(), super::avx2::exp(_mm256_set1_ps(x)));
                _mm512_storeu_ps(wide.as_mut_ptr(), super::avx512::exp(_mm512_set1_ps(x)));
            }
            assert!(wide.iter().all(|&w| w == narrow[0]), "exp({x})");
        }
    }
}
