//! One-block decoders for the 32-value encodings (q8_0, q4_0, q4_1, q5_0, q5_1).
//! Each takes exactly one block of bytes and writes its 32 values; the arithmetic (one f32
//! rounding per product, then per sum) matches gguf-py.

use super::f16_at;

/// q8_0 `{ d: f16, qs: [i8; 32] }`: `x = d * qs`.
pub fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for (v, &q) in y.iter_mut().zip(&b[2..34]) {
        *v = q as i8 as f32 * d;
    }
}

/// q4_0 `{ d: f16, qs: [u8; 16] }`: `x = d * (nibble - 8)`, low nibbles first.
pub fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = d * ((qs[j] & 15) as i32 - 8) as f32;
        y[j + 16] = d * ((qs[j] >> 4) as i32 - 8) as f32;
    }
}

/// q4_1 `{ d: f16, m: f16, qs: [u8; 16] }`: `x = d * nibble + m`.
pub fn q4_1(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = d * (qs[j] & 15) as f32 + m;
        y[j + 16] = d * (qs[j] >> 4) as f32 + m;
    }
}

/// The 5-bit values of a q5 block: nibbles of `qs` with the fifth bit from `qh`.
#[inline]
fn q5_values(qh: &[u8], qs: &[u8]) -> [u8; 32] {
    let h = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 15) | ((((h >> j) & 1) as u8) << 4);
        q[j + 16] = (qs[j] >> 4) | ((((h >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

/// q5_0 `{ d: f16, qh: [u8; 4], qs: [u8; 16] }`: `x = d * (q5 - 16)`.
pub fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let q = q5_values(&b[2..6], &b[6..22]);
    for (v, &q) in y.iter_mut().zip(&q) {
        *v = d * (q as i32 - 16) as f32;
    }
}

/// q5_1 `{ d: f16, m: f16, qh: [u8; 4], qs: [u8; 16] }`: `x = d * q5 + m`.
pub fn q5_1(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let q = q5_values(&b[4..8], &b[8..24]);
    for (v, &q) in y.iter_mut().zip(&q) {
        *v = d * q as f32 + m;
    }
}
