//! Fast RoPE and attention tiled over keys with an online softmax (no cap on
//! the context length; memory per query head is one tile of scores).

use super::super::reference::visible;
use super::super::simd;
#[cfg(target_arch = "x86_64")]
use super::attention_rows;
use super::par::chunks;
use crate::backend::op::{Mask, RopeStyle};
use rayon::ThreadPool;

/// Keys per tile of the online softmax.
const TILE: usize = 64;

/// Cos/sin source of one Rope call.
pub(super) struct RopeArgs<'a> {
    pub style: RopeStyle,
    pub rot: usize,
    pub pos: usize,
    pub base: f32,
    pub cache: Option<(&'a [f32], &'a [f32])>,
}

/// Rotates `y` (a copy of `x [S, H, d]`) in place.
pub(super) fn rope(pool: &ThreadPool, y: &mut [f32], heads: usize, d: usize, a: &RopeArgs) {
    let half = a.rot / 2;
    let inv: Vec<f64> = (0..half)
        .map(|j| 1.0 / (a.base as f64).powf(2.0 * j as f64 / a.rot as f64))
        .collect();
    let rows = y.len() / (heads * d).max(1);
    let work = rows * (heads * a.rot * 3 + if a.cache.is_some() { 0 } else { half * 40 });
    chunks(
        pool,
        work,
        y,
        heads * d,
        || (vec![0.0f32; half], vec![0.0f32; half]),
        |(cos, sin), s, row| {
            let p = a.pos + s;
            match a.cache {
                Some((c, sn)) => {
                    cos.copy_from_slice(&c[p * half..(p + 1) * half]);
                    sin.copy_from_slice(&sn[p * half..(p + 1) * half]);
                }
                None => {
                    for j in 0..half {
                        let angle = p as f64 * inv[j];
                        cos[j] = angle.cos() as f32;
                        sin[j] = angle.sin() as f32;
                    }
                }
            }
            for head in row.chunks_mut(d) {
                match a.style {
                    RopeStyle::Neox => {
                        let (x1, rest) = head.split_at_mut(half);
                        let x2 = &mut rest[..half];
                        for j in 0..half {
                            let (u, v) = (x1[j], x2[j]);
                            x1[j] = u * cos[j] - v * sin[j];
                            x2[j] = u * sin[j] + v * cos[j];
                        }
                    }
                    RopeStyle::Normal => {
                        for (j, pair) in head[..a.rot].chunks_exact_mut(2).enumerate() {
                            let (u, v) = (pair[0], pair[1]);
                            pair[0] = u * cos[j] - v * sin[j];
                            pair[1] = u * sin[j] + v * cos[j];
                        }
                    }
                }
            }
        },
    );
}

/// Shapes and settings of one attention call.
#[derive(Clone, Copy)]
pub(super) struct SdpaArgs<'a> {
    pub heads: usize,
    pub kv_heads: usize,
    pub d: usize,
    pub dv: usize,
    pub scale: f32,
    pub mask: &'a Mask,
    pub q_pos: usize,
    pub kv_len: usize,
}

/// Keys a query at position `p` can see, as a range (the mask is still
/// checked per key for padding masks).
fn key_range(mask: &Mask, p: usize, kv_len: usize) -> (usize, usize) {
    match mask {
        Mask::None | Mask::Padding(_) => (0, kv_len),
        Mask::Causal => (0, (p + 1).min(kv_len)),
        Mask::Sliding(w) => ((p + 1).saturating_sub(*w), (p + 1).min(kv_len)),
    }
}

/// `out [Sq, H, dv]` from `q [Sq, H, d]`, `k [.., Hkv, d]`, `v [.., Hkv, dv]`,
/// parallel over (query, KV head): the query heads that share a KV head are run
/// together, so each key and value row is read once per group (from L1 for all
/// but the first head) instead of once per head.
pub(super) fn sdpa(
    pool: &ThreadPool,
    a: &SdpaArgs,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
) {
    let group = (a.heads / a.kv_heads.max(1)).max(1);
    // Keys the queries see: a causal query at position p reads p + 1 of them.
    let queries = out.len() / (a.heads * a.dv).max(1);
    let keys = match a.mask {
        Mask::Causal | Mask::Sliding(_) => a.kv_len.min(a.q_pos + queries),
        Mask::None | Mask::Padding(_) => a.kv_len,
    };
    let work = (out.len() / a.dv.max(1)) * keys * (a.d + a.dv);
    #[cfg(target_arch = "x86_64")]
    let rows_kernel = attention_rows::applies(a);
    #[cfg(target_arch = "x86_64")]
    if rows_kernel && matches!(a.mask, Mask::None) && a.kv_len > 0 && out.len() > group * a.dv {
        shared_keys(pool, a, (work, queries, group), q, k, v, out);
        return;
    }
    chunks(
        pool,
        work,
        out,
        group * a.dv,
        || (vec![0.0f32; group * TILE], vec![0.0f32; 2 * group]),
        |(scores, ml), row, o| {
            let (i, kh) = (row / a.kv_heads, row % a.kv_heads);
            let p = a.q_pos + i;
            let q0 = (i * a.heads + kh * group) * a.d;
            let qrows = &q[q0..q0 + group * a.d];
            let (start, end) = key_range(a.mask, p, a.kv_len);
            #[cfg(target_arch = "x86_64")]
            if rows_kernel && start < end {
                attention_rows::attend(a, qrows, k, v, kh, start..end, scores, o);
                return;
            }
            o.fill(0.0);
            let (m, l) = ml.split_at_mut(group);
            m.fill(f32::NEG_INFINITY);
            l.fill(0.0);
            let mut t0 = start;
            while t0 < end {
                let t1 = (t0 + TILE).min(end);
                let n = t1 - t0;
                let mut any = false;
                for (c, j) in (t0..t1).enumerate() {
                    if visible(a.mask, p, j) {
                        any = true;
                        let kr = &k[(j * a.kv_heads + kh) * a.d..][..a.d];
                        for (g, qr) in qrows.chunks_exact(a.d).enumerate() {
                            scores[g * TILE + c] = simd::dot(qr, kr) * a.scale;
                        }
                    } else {
                        for g in 0..group {
                            scores[g * TILE + c] = f32::NEG_INFINITY;
                        }
                    }
                }
                if any {
                    for (g, og) in o.chunks_exact_mut(a.dv).enumerate() {
                        let sg = &mut scores[g * TILE..g * TILE + n];
                        let tile_max = sg.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        if tile_max == f32::NEG_INFINITY {
                            sg.fill(0.0);
                            continue;
                        }
                        let new_m = m[g].max(tile_max);
                        let correction = (m[g] - new_m).exp();
                        if correction != 1.0 {
                            og.iter_mut().for_each(|x| *x *= correction);
                            l[g] *= correction;
                        }
                        m[g] = new_m;
                        for s in sg.iter_mut() {
                            // Masked keys (-inf) get weight 0.
                            *s = if *s > f32::NEG_INFINITY {
                                (*s - new_m).exp()
                            } else {
                                0.0
                            };
                            l[g] += *s;
                        }
                    }
                    for (c, j) in (t0..t1).enumerate() {
                        if !visible(a.mask, p, j) {
                            continue;
                        }
                        let vr = &v[(j * a.kv_heads + kh) * a.dv..][..a.dv];
                        for (g, og) in o.chunks_exact_mut(a.dv).enumerate() {
                            simd::axpy(scores[g * TILE + c], vr, og);
                        }
                    }
                }
                t0 = t1;
            }
            for (g, og) in o.chunks_exact_mut(a.dv).enumerate() {
                if l[g] > 0.0 {
                    let inv = 1.0 / l[g];
                    og.iter_mut().for_each(|x| *x *= inv);
                }
            }
        },
    );
}

/// [`sdpa`] without a mask for several queries: one task per KV head runs every query's
/// heads of its group through [`attention_rows::attend_many`], so that head's keys and
/// values come from memory once per call (a decoder step of several sequences against one
/// encoder output), instead of once per query. `work`, `queries` and `group` are
/// [`sdpa`]'s: the call's multiply-adds, its query rows and query heads per KV head.
#[cfg(target_arch = "x86_64")]
fn shared_keys(
    pool: &ThreadPool,
    a: &SdpaArgs,
    (work, queries, group): (usize, usize, usize),
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
) {
    let per = group * a.dv;
    // [Hkv, queries, group * dv]: one contiguous piece per task, its queries gathered.
    let mut by_head = vec![0.0f32; out.len()];
    chunks(
        pool,
        work,
        &mut by_head,
        queries * per,
        Vec::new,
        |qs, kh, o| {
            qs.clear();
            for i in 0..queries {
                let q0 = (i * a.heads + kh * group) * a.d;
                qs.extend_from_slice(&q[q0..q0 + group * a.d]);
            }
            attention_rows::attend_many(a, qs, k, v, kh, 0..a.kv_len, o);
        },
    );
    for (kh, o) in by_head.chunks_exact(queries * per).enumerate() {
        for (i, oi) in o.chunks_exact(per).enumerate() {
            let at = (i * a.heads + kh * group) * a.dv;
            out[at..at + per].copy_from_slice(oi);
        }
    }
}
