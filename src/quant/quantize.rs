//! Quantizers f32 -> f32, f16, bf16, q8_0, q4_0, q4_k, q6_k (for `import --quant`).
//!
//! f16, bf16, q8_0 and q4_0 follow gguf-py's `gguf.quants.quantize` bit for bit. gguf-py has
//! no quantizer for q4_k / q6_k, so those follow ggml's reference quantizers
//! `quantize_row_q4_K_ref` / `quantize_row_q6_K_ref` (ggml-quants.c), operation by operation
//! in f32 without fused multiply-adds, which makes them bit-identical to that C code too
//! (checked against it by `tests/quant_gguf_py.rs`).

use super::QuantError;
use crate::dtype::DType;
use half::f16;

/// Encodes `values` (a whole number of blocks) as `dtype`. Block encodings reject
/// non-finite input; f32 / f16 / bf16 take any value.
pub fn quantize(dtype: DType, values: &[f32]) -> Result<Vec<u8>, QuantError> {
    let block_values = dtype.block_values();
    if !values.len().is_multiple_of(block_values) {
        return Err(QuantError::PartialRow {
            dtype,
            values: values.len(),
            block_values,
        });
    }
    let block_fn: fn(&[f32], &mut Vec<u8>) = match dtype {
        DType::F32 => return Ok(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        DType::F16 => {
            return Ok(values
                .iter()
                .flat_map(|&v| f16::from_f32(v).to_le_bytes())
                .collect())
        }
        DType::BF16 => {
            return Ok(values
                .iter()
                .flat_map(|&v| bf16_bits(v).to_le_bytes())
                .collect())
        }
        DType::Q8_0 => q8_0_block,
        DType::Q4_0 => q4_0_block,
        DType::Q4K => q4_k_block,
        DType::Q6K => q6_k_block,
        _ => return Err(QuantError::NoQuantizer { dtype }),
    };
    if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(QuantError::NonFinite {
            dtype,
            index,
            value,
        });
    }
    let mut out = Vec::with_capacity(values.len() / block_values * dtype.block_bytes());
    for block in values.chunks_exact(block_values) {
        block_fn(block, &mut out);
    }
    Ok(out)
}

/// f32 -> bf16 bits, round to nearest even, NaN forced quiet (ggml's `ggml_compute_fp32_to_bf16`).
fn bf16_bits(v: f32) -> u16 {
    let n = v.to_bits();
    if n & 0x7fff_ffff > 0x7f80_0000 {
        return ((n & 0xffff_0000) >> 16) as u16 | 64;
    }
    ((n as u64 + (0x7fff + ((n >> 16) & 1)) as u64) >> 16) as u16
}

/// Round to nearest (ties to even) through the float trick of ggml's `nearest_int`;
/// exact for |v| <= 4194303, which ggml asserts.
#[inline]
fn nearest_int(v: f32) -> i32 {
    let i = (v + 12582912.0f32).to_bits() as i32;
    (i & 0x007f_ffff) - 0x0040_0000
}

fn push_f16(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// q8_0: `d = max|x| / 127`, `q = round(x / d)` (half away from zero).
fn q8_0_block(x: &[f32], out: &mut Vec<u8>) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    push_f16(out, d);
    out.extend(x.iter().map(|&v| (v * id).round() as i8 as u8));
}

/// q4_0: `d = max / -8` with max the value of largest magnitude (first one on ties),
/// `q = min(15, trunc(x / d + 8.5))`.
fn q4_0_block(x: &[f32], out: &mut Vec<u8>) {
    let mut max = x[0];
    for &v in &x[1..] {
        if v.abs() > max.abs() {
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    push_f16(out, d);
    let q = |v: f32| ((v * id + 8.5) as i32).clamp(0, 15) as u8;
    out.extend((0..16).map(|j| q(x[j]) | (q(x[j + 16]) << 4)));
}

/// ggml's `make_qkx2_quants`: an asymmetric `nmax`-level fit of `x` with weights, trying
/// `nstep + 1` scales around the min/max one; returns (scale, -min) and fills `l`.
fn make_qkx2_quants(
    x: &[f32],
    weights: &[f32],
    nmax: i32,
    l: &mut [u8],
    laux: &mut [u8],
    (rmin, rdelta, nstep): (f32, f32, i32),
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = q as u8;
            let w = weights[i];
            let lf = q as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * (diff * diff);
            }
            if cur_error < best_error {
                l.copy_from_slice(laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// q4_k as ggml's `quantize_row_q4_K_ref`: per sub-block of 32 a weighted asymmetric fit,
/// then 6-bit scales and mins relative to the block's largest, then the 4-bit values again.
fn q4_k_block(x: &[f32], out: &mut Vec<u8>) {
    let mut l = [0u8; 256];
    let mut laux = [0u8; 32];
    let mut weights = [0.0f32; 32];
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let lj = &mut l[32 * j..32 * j + 32];
        (scales[j], mins[j]) = make_qkx2_quants(xs, &weights, 15, lj, &mut laux, (-1.0, 0.1, 20));
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d16 = f16::from_f32(max_scale / 63.0);
    let dmin16 = f16::from_f32(max_min / 63.0);
    for j in 0..8 {
        let (sc, m) = super::kquants::scale_min_k4(j, &packed);
        let d = d16.to_f32() * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin16.to_f32() * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / d).clamp(0, 15) as u8;
        }
    }
    out.extend_from_slice(&d16.to_le_bytes());
    out.extend_from_slice(&dmin16.to_le_bytes());
    out.extend_from_slice(&packed);
    for chunk in l.chunks_exact(64) {
        out.extend((0..32).map(|i| chunk[i] | (chunk[i + 32] << 4)));
    }
}

/// ggml's `make_qx_quants` with `rmse_type = 1` and no importance weights: a symmetric
/// `2*nmax`-level fit weighted by `x^2`, trying 18 scales around `max / -nmax`. Fills `l`
/// with values offset by `nmax` and returns the scale.
fn make_qx_quants(x: &[f32], nmax: i32, l: &mut [i8]) -> f32 {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < 1e-15 {
        l.fill(0);
        return 0.0;
    }
    let fit = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        (sumlx, suml2)
    };
    let fill = |iscale: f32, l: &mut [i8]| {
        for (o, &v) in l.iter_mut().zip(x) {
            *o = (nmax + nearest_int(iscale * v).clamp(-nmax, nmax - 1)) as i8;
        }
    };
    let iscale = -(nmax as f32) / max;
    fill(iscale, l);
    let (sumlx, suml2) = fit(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        let iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = fit(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            fill(iscale, l);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// q6_k as ggml's `quantize_row_q6_K_ref`: per sub-block of 16 a symmetric fit, 8-bit scales
/// relative to the largest, then the 6-bit values again.
fn q6_k_block(x: &[f32], out: &mut Vec<u8>) {
    let mut l = [0i8; 256];
    let mut scales = [0.0f32; 16];
    let mut max_scale = 0.0f32;
    let mut max_abs_scale = 0.0f32;
    for ib in 0..16 {
        let scale = make_qx_quants(&x[16 * ib..16 * ib + 16], 32, &mut l[16 * ib..16 * ib + 16]);
        scales[ib] = scale;
        if scale.abs() > max_abs_scale {
            max_abs_scale = scale.abs();
            max_scale = scale;
        }
    }
    if max_abs_scale < 1e-15 {
        out.extend_from_slice(&[0u8; 210]);
        return;
    }
    let iscale = -128.0f32 / max_scale;
    let d16 = f16::from_f32(1.0 / iscale);
    let mut sc = [0i8; 16];
    for (s, &scale) in sc.iter_mut().zip(&scales) {
        *s = nearest_int(iscale * scale).min(127) as i8;
    }
    for j in 0..16 {
        let d = d16.to_f32() * sc[j] as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let q = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
            l[16 * j + ii] = (q + 32) as i8;
        }
    }
    let mut ql = [0u8; 128];
    let mut qh = [0u8; 64];
    for h in 0..2 {
        let lh = &l[128 * h..128 * h + 128];
        for i in 0..32 {
            let q = |k: usize| lh[i + 32 * k] as u8;
            ql[64 * h + i] = (q(0) & 0xF) | ((q(2) & 0xF) << 4);
            ql[64 * h + i + 32] = (q(1) & 0xF) | ((q(3) & 0xF) << 4);
            qh[32 * h + i] =
                (q(0) >> 4) | ((q(1) >> 4) << 2) | ((q(2) >> 4) << 4) | ((q(3) >> 4) << 6);
        }
    }
    out.extend_from_slice(&ql);
    out.extend_from_slice(&qh);
    out.extend(sc.iter().map(|&s| s as u8));
    out.extend_from_slice(&d16.to_le_bytes());
}
