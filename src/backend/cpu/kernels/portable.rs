//! Plain-Rust row kernels: the dot product of one encoded weight row with one activation row.
//! Integer sums per (sub-)block, then one f32 multiply-add per block, as the AVX2 versions.

use super::act::{Q8Block, Q8KBlock};
use crate::quant::kquants::{q3_k_scales, scale_min_k4};

#[inline]
fn f16(b: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Eight independent partial sums of `f(i) * x[i]`, so the compiler can vectorize.
#[inline]
fn dot8(n: usize, x: &[f32], f: impl Fn(usize) -> f32) -> f32 {
    let mut acc = [0.0f32; 8];
    let full = n / 8 * 8;
    for i in (0..full).step_by(8) {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += f(i + l) * x[i + l];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (i, &xi) in x.iter().enumerate().take(n).skip(full) {
        s += f(i) * xi;
    }
    s
}

/// f32 weights.
pub fn f32_row(w: &[u8], x: &[f32]) -> f32 {
    dot8(x.len(), x, |i| {
        f32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]])
    })
}

/// f16 weights.
pub fn f16_row(w: &[u8], x: &[f32]) -> f32 {
    dot8(x.len(), x, |i| f16(w, 2 * i))
}

/// bf16 weights.
pub fn bf16_row(w: &[u8], x: &[f32]) -> f32 {
    dot8(x.len(), x, |i| {
        f32::from_bits((u16::from_le_bytes([w[2 * i], w[2 * i + 1]]) as u32) << 16)
    })
}

/// `sum q[i] * a[i]` in integers.
#[inline]
fn idot(q: &[u8], a: &[i8]) -> i32 {
    q.iter().zip(a).map(|(&q, &a)| q as i32 * a as i32).sum()
}

/// q8_0 weights.
pub fn q8_0(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(34).zip(a) {
        let s: i32 = b[2..34]
            .iter()
            .zip(&q.qs)
            .map(|(&w, &a)| w as i8 as i32 * a as i32)
            .sum();
        acc += f16(b, 0) * q.d * s as f32;
    }
    acc
}

/// The 32 nibbles of a 16-byte run, low nibbles first.
#[inline]
fn nibbles(qs: &[u8]) -> [u8; 32] {
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = qs[j] & 15;
        q[j + 16] = qs[j] >> 4;
    }
    q
}

/// The 32 five-bit values of a q5 block.
#[inline]
fn fives(qh: &[u8], qs: &[u8]) -> [u8; 32] {
    let h = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut q = nibbles(qs);
    for (j, v) in q.iter_mut().enumerate() {
        *v |= (((h >> j) & 1) as u8) << 4;
    }
    q
}

/// q4_0 weights: `d * (q - 8)`.
pub fn q4_0(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(18).zip(a) {
        let s = idot(&nibbles(&b[2..18]), &q.qs) - 8 * q.sum;
        acc += f16(b, 0) * q.d * s as f32;
    }
    acc
}

/// q4_1 weights: `d * q + m`.
pub fn q4_1(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(20).zip(a) {
        let s = idot(&nibbles(&b[4..20]), &q.qs);
        acc += f16(b, 0) * q.d * s as f32 + f16(b, 2) * q.s;
    }
    acc
}

/// q5_0 weights: `d * (q - 16)`.
pub fn q5_0(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(22).zip(a) {
        let s = idot(&fives(&b[2..6], &b[6..22]), &q.qs) - 16 * q.sum;
        acc += f16(b, 0) * q.d * s as f32;
    }
    acc
}

/// q5_1 weights: `d * q + m`.
pub fn q5_1(w: &[u8], a: &[Q8Block]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(24).zip(a) {
        let s = idot(&fives(&b[4..8], &b[8..24]), &q.qs);
        acc += f16(b, 0) * q.d * s as f32 + f16(b, 2) * q.s;
    }
    acc
}

/// `sum_j sc[j] * sum(q * a over sub-block j)` for sub-blocks of `len` values.
#[inline]
fn scaled_idot(q: &[u8; 256], a: &[i8; 256], sc: &[i32], len: usize) -> i32 {
    sc.iter()
        .enumerate()
        .map(|(j, &s)| s * idot(&q[len * j..len * (j + 1)], &a[len * j..len * (j + 1)]))
        .sum()
}

/// The 2-bit fields of q2_k / q3_k in value order: value `c*128 + s*32 + l` is bits
/// `2s..2s+2` of `qs[32c + l]`.
#[inline]
fn twos(qs: &[u8]) -> [u8; 256] {
    let mut q = [0u8; 256];
    for (i, v) in q.iter_mut().enumerate() {
        let (c, s, l) = (i / 128, (i / 32) % 4, i % 32);
        *v = (qs[32 * c + l] >> (2 * s)) & 3;
    }
    q
}

/// q2_k weights: `d * sc * q - dmin * mn` per sub-block of 16.
pub fn q2_k(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(84).zip(a) {
        let scales = &b[0..16];
        let sc: [i32; 16] = std::array::from_fn(|j| (scales[j] & 15) as i32);
        let mins: i32 = scales
            .iter()
            .zip(&q.bsums)
            .map(|(&s, &bs)| (s >> 4) as i32 * bs)
            .sum();
        let s = scaled_idot(&twos(&b[16..80]), &q.qs, &sc, 16);
        acc += f16(b, 80) * q.d * s as f32 - f16(b, 82) * q.d * mins as f32;
    }
    acc
}

/// q3_k weights: `d * sc * (q - 4 * !hbit)` per sub-block of 16.
pub fn q3_k(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(110).zip(a) {
        let hmask = &b[0..32];
        let mut vals = twos(&b[32..96]);
        for (i, v) in vals.iter_mut().enumerate() {
            let (c, s, l) = (i / 128, (i / 32) % 4, i % 32);
            *v |= ((hmask[l] >> (4 * c + s)) & 1) << 2;
        }
        let packed = q3_k_scales(&b[96..108]);
        let sc: [i32; 16] = std::array::from_fn(|j| packed[j] as i32);
        let offset: i32 = sc.iter().zip(&q.bsums).map(|(&s, &bs)| s * bs).sum();
        let s = scaled_idot(&vals, &q.qs, &sc, 16) - 4 * offset;
        acc += f16(b, 108) * q.d * s as f32;
    }
    acc
}

/// The 4-bit values of q4_k / q5_k in value order (sub-block j: nibble j%2 of `qs[32*(j/2)..]`).
#[inline]
fn k_nibbles(qs: &[u8]) -> [u8; 256] {
    let mut q = [0u8; 256];
    for (j, sub) in q.chunks_exact_mut(32).enumerate() {
        for (l, v) in sub.iter_mut().enumerate() {
            *v = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
        }
    }
    q
}

/// The scales and the min term `sum_j mn[j] * (bsum of sub-block j)` of q4_k / q5_k.
#[inline]
fn k4_scales(scales: &[u8], q: &Q8KBlock) -> ([i32; 8], i32) {
    let mut sc = [0i32; 8];
    let mut mins = 0;
    for (j, s) in sc.iter_mut().enumerate() {
        let (d, m) = scale_min_k4(j, scales);
        *s = d as i32;
        mins += m as i32 * (q.bsums[2 * j] + q.bsums[2 * j + 1]);
    }
    (sc, mins)
}

/// q4_k weights: `d * sc * q - dmin * mn` per sub-block of 32.
pub fn q4_k(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(144).zip(a) {
        let (sc, mins) = k4_scales(&b[4..16], q);
        let s = scaled_idot(&k_nibbles(&b[16..144]), &q.qs, &sc, 32);
        acc += f16(b, 0) * q.d * s as f32 - f16(b, 2) * q.d * mins as f32;
    }
    acc
}

/// q5_k weights: q4_k with a fifth bit from `qh`.
pub fn q5_k(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(176).zip(a) {
        let (sc, mins) = k4_scales(&b[4..16], q);
        let qh = &b[16..48];
        let mut vals = k_nibbles(&b[48..176]);
        for (j, sub) in vals.chunks_exact_mut(32).enumerate() {
            for (l, v) in sub.iter_mut().enumerate() {
                *v |= ((qh[l] >> j) & 1) << 4;
            }
        }
        let s = scaled_idot(&vals, &q.qs, &sc, 32);
        acc += f16(b, 0) * q.d * s as f32 - f16(b, 2) * q.d * mins as f32;
    }
    acc
}

/// q6_k weights: `d * sc * (q - 32)` per sub-block of 16.
pub fn q6_k(w: &[u8], a: &[Q8KBlock]) -> f32 {
    let mut acc = 0.0f32;
    for (b, q) in w.chunks_exact(210).zip(a) {
        let (ql, qh) = (&b[0..128], &b[128..192]);
        let mut vals = [0u8; 256];
        for (i, v) in vals.iter_mut().enumerate() {
            let (h, r) = (i / 128, i % 128);
            let low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
            let high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            *v = low | (high << 4);
        }
        let sc: [i32; 16] = std::array::from_fn(|j| b[192 + j] as i8 as i32);
        let offset: i32 = sc.iter().zip(&q.bsums).map(|(&s, &bs)| s * bs).sum();
        let s = scaled_idot(&vals, &q.qs, &sc, 16) - 32 * offset;
        acc += f16(b, 208) * q.d * s as f32;
    }
    acc
}
