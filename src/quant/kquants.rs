//! One-block decoders for the k-quants (super-blocks of 256 values): q2_k, q3_k, q4_k, q5_k,
//! q6_k. Each takes exactly one block of bytes and writes its 256 values; scale products are
//! rounded to f32 first, then applied, as gguf-py does.

use super::f16_at;

/// The 6-bit scale and min of sub-block `j` (0..8) of q4_k / q5_k from the 12 packed bytes.
#[inline]
pub fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// The 16 signed 6-bit scales of q3_k (stored +32) from the 12 packed bytes.
#[inline]
pub fn q3_k_scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (k, o) in out.iter_mut().enumerate() {
        let low = if k < 8 { s[k] & 15 } else { s[k - 8] >> 4 };
        let high = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        *o = (low | (high << 4)) as i8 - 32;
    }
    out
}

/// q2_k `{ scales: [u8; 16], qs: [u8; 64], d: f16, dmin: f16 }`:
/// value `c*128 + s*32 + l` is bits `2s..2s+2` of `qs[32c + l]`; `x = d*sc*q - dmin*mn`.
pub fn q2_k(b: &[u8], y: &mut [f32]) {
    let scales = &b[0..16];
    let qs = &b[16..80];
    let d = f16_at(b, 80);
    let dmin = f16_at(b, 82);
    for (i, v) in y.iter_mut().enumerate() {
        let (c, s, l) = (i / 128, (i / 32) % 4, i % 32);
        let q = (qs[32 * c + l] >> (2 * s)) & 3;
        let sc = scales[i / 16];
        let dl = d * (sc & 15) as f32;
        let ml = dmin * (sc >> 4) as f32;
        *v = dl * q as f32 - ml;
    }
}

/// q3_k `{ hmask: [u8; 32], qs: [u8; 64], scales: [u8; 12], d: f16 }`: the 2-bit field as in
/// q2_k, minus 4 where bit `4c + s` of `hmask[l]` is clear; `x = d * sc * q`.
pub fn q3_k(b: &[u8], y: &mut [f32]) {
    let hmask = &b[0..32];
    let qs = &b[32..96];
    let scales = q3_k_scales(&b[96..108]);
    let d = f16_at(b, 108);
    for (i, v) in y.iter_mut().enumerate() {
        let (c, s, l) = (i / 128, (i / 32) % 4, i % 32);
        let low = ((qs[32 * c + l] >> (2 * s)) & 3) as i32;
        let high = (hmask[l] >> (4 * c + s)) & 1;
        let q = if high == 0 { low - 4 } else { low };
        let dl = d * scales[i / 16] as f32;
        *v = dl * q as f32;
    }
}

/// q4_k `{ d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128] }`: sub-block `j` is the
/// low (even j) or high (odd j) nibbles of `qs[32*(j/2)..][..32]`; `x = d*sc*q - dmin*mn`.
pub fn q4_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (j, yj) in y.chunks_exact_mut(32).enumerate() {
        let (sc, mn) = scale_min_k4(j, scales);
        let dl = d * sc as f32;
        let ml = dmin * mn as f32;
        let shift = 4 * (j % 2);
        for (v, &q) in yj.iter_mut().zip(&qs[32 * (j / 2)..32 * (j / 2) + 32]) {
            *v = dl * ((q >> shift) & 15) as f32 - ml;
        }
    }
}

/// q5_k `{ d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128] }`: q4_k plus a
/// fifth bit, bit `j` of `qh[l]` for value `l` of sub-block `j`.
pub fn q5_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let scales = &b[4..16];
    let qh = &b[16..48];
    let qs = &b[48..176];
    for (j, yj) in y.chunks_exact_mut(32).enumerate() {
        let (sc, mn) = scale_min_k4(j, scales);
        let dl = d * sc as f32;
        let ml = dmin * mn as f32;
        let shift = 4 * (j % 2);
        for (l, v) in yj.iter_mut().enumerate() {
            let q = ((qs[32 * (j / 2) + l] >> shift) & 15) | (((qh[l] >> j) & 1) << 4);
            *v = dl * q as f32 - ml;
        }
    }
}

/// q6_k `{ ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16 }`: for value `h*128 + r`,
/// the low 4 bits are nibble `r/64` of `ql[64h + r%64]`, the high 2 bits are bits
/// `2*(r/32)..` of `qh[32h + r%32]`; `x = d * sc * (q - 32)`.
pub fn q6_k(b: &[u8], y: &mut [f32]) {
    let ql = &b[0..128];
    let qh = &b[128..192];
    let scales = &b[192..208];
    let d = f16_at(b, 208);
    for (i, v) in y.iter_mut().enumerate() {
        let (h, r) = (i / 128, i % 128);
        let low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
        let high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        let q = (low | (high << 4)) as i32 - 32;
        let dl = d * scales[i / 16] as i8 as f32;
        *v = dl * q as f32;
    }
}
