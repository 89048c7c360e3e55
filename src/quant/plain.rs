//! Plain encodings (f32, f16, bf16, i32, i8, u8) and BitNet ternary. Callers check lengths:
//! `out` holds exactly one value per encoded value.

use half::slice::HalfFloatSliceExt;

/// Little-endian f32, bit for bit (NaN payloads kept).
pub fn f32s(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(4).zip(out.iter_mut()) {
        *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

/// Little-endian IEEE half to f32 (exact).
pub fn f16s(bytes: &[u8], out: &mut [f32]) {
    const CHUNK: usize = 256;
    let mut halves = [half::f16::ZERO; CHUNK];
    for (b, y) in bytes.chunks(2 * CHUNK).zip(out.chunks_mut(CHUNK)) {
        let n = y.len();
        for (h, p) in halves[..n].iter_mut().zip(b.chunks_exact(2)) {
            *h = half::f16::from_bits(u16::from_le_bytes([p[0], p[1]]));
        }
        halves[..n].convert_to_f32_slice(y);
    }
}

/// Little-endian bf16: the top half of an f32.
pub fn bf16s(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(2).zip(out.iter_mut()) {
        *y = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
    }
}

/// Little-endian i32 to the nearest f32.
pub fn i32s(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(4).zip(out.iter_mut()) {
        *y = i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32;
    }
}

/// Little-endian i64 to the nearest f32.
pub fn i64s(bytes: &[u8], out: &mut [f32]) {
    for (b, y) in bytes.chunks_exact(8).zip(out.iter_mut()) {
        let mut v = [0u8; 8];
        v.copy_from_slice(b);
        *y = i64::from_le_bytes(v) as f32;
    }
}

/// i8 by value.
pub fn i8s(bytes: &[u8], out: &mut [f32]) {
    for (&b, y) in bytes.iter().zip(out.iter_mut()) {
        *y = b as i8 as f32;
    }
}

/// u8 by value.
pub fn u8s(bytes: &[u8], out: &mut [f32]) {
    for (&b, y) in bytes.iter().zip(out.iter_mut()) {
        *y = b as f32;
    }
}

/// The ternary value of a 2-bit code: `00 -> -1, 01 -> 0, 10 -> +1, 11 -> 0`.
#[inline]
pub fn ternary_value(code: u8) -> f32 {
    match code & 3 {
        0 => -1.0,
        2 => 1.0,
        _ => 0.0,
    }
}

/// Ternary: four values per byte (value i in bits `2i..2i+2`), times the tensor's `scale`.
pub fn ternary(bytes: &[u8], scale: f32, out: &mut [f32]) {
    for (&b, y) in bytes.iter().zip(out.chunks_exact_mut(4)) {
        for (i, v) in y.iter_mut().enumerate() {
            *v = scale * ternary_value(b >> (2 * i));
        }
    }
}
