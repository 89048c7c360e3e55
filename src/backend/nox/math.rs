//! The transcendental functions of nox, implemented here with fixed
//! polynomials and range reductions in f64 (plain IEEE-754 `+ - * /`, no FMA,
//! no platform libm), so every machine computes the same bits.
//!
//! Each f32 function evaluates in f64 and rounds once to f32; the f64
//! routines are accurate to a few ulp of f64 over the ranges nox uses.

use crate::backend::Tensor;
use crate::error::ExecutionError;

const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
const LOG2E: f64 = std::f64::consts::LOG2_E;

/// `2^k` for k in the normal exponent range, else the nearest representable scale.
fn pow2(k: i64) -> f64 {
    let k = k.clamp(-1022, 1023);
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `floor(x + 0.5)`, exact.
fn round_half_up(x: f64) -> f64 {
    (x + 0.5).floor()
}

/// `1/n!` for n in `0..22` (evaluated at compile time, IEEE-exact steps).
const INV_FACT: [f64; 22] = {
    let mut t = [1.0f64; 22];
    let mut f = 1.0f64;
    let mut n = 1;
    while n < 22 {
        f *= n as f64;
        t[n] = 1.0 / f;
        n += 1;
    }
    t
};

/// `e^r` for `|r| <= ln(2)/2`: Taylor polynomial of degree 13 (Horner).
fn exp_poly(r: f64) -> f64 {
    let mut p = INV_FACT[13];
    for n in (0..13).rev() {
        p = INV_FACT[n] + r * p;
    }
    p
}

/// `e^x` in f64.
pub fn exp64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.782_712_893_384 {
        return f64::INFINITY;
    }
    if x < -745.2 {
        return 0.0;
    }
    let k = round_half_up(x * LOG2E);
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let k = k as i64;
    let e = exp_poly(r);
    // Split the scale so results near the subnormal range stay exact in steps.
    if k < -1000 {
        e * pow2(k + 1000) * pow2(-1000)
    } else if k > 1000 {
        e * pow2(k - 1000) * pow2(1000)
    } else {
        e * pow2(k)
    }
}

/// `e^x - 1` in f64, accurate near 0.
pub fn expm1_64(x: f64) -> f64 {
    if x.abs() < 0.5 {
        let mut term = x;
        let mut sum = x;
        for n in 2..=20 {
            term = term * x / n as f64;
            sum += term;
        }
        sum
    } else {
        exp64(x) - 1.0
    }
}

/// `ln x` in f64 (x > 0; 0 gives -inf, negative or NaN gives NaN).
pub fn ln64(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    let (mut m, mut e) = (x, 0i64);
    if m < f64::MIN_POSITIVE {
        m *= pow2(54);
        e -= 54;
    }
    let bits = m.to_bits();
    e += ((bits >> 52) & 0x7ff) as i64 - 1023;
    m = f64::from_bits((bits & !(0x7ff << 52)) | (1023 << 52));
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    // ln m = 2 atanh(t), t = (m - 1) / (m + 1), |t| <= 0.1716.
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let mut s = 1.0 / 25.0;
    for n in (0..12).rev() {
        s = 1.0 / (2 * n + 1) as f64 + t2 * s;
    }
    let ef = e as f64;
    ef * LN2_HI + (ef * LN2_LO + 2.0 * t * s)
}

/// `x^y` for x > 0, as `e^(y ln x)`.
pub fn powf64(x: f64, y: f64) -> f64 {
    exp64(y * ln64(x))
}

const PIO2_1: f64 = 1.570_796_326_734_125_6;
const PIO2_1T: f64 = 6.077_100_506_506_192e-11;
const TWO_OVER_PI: f64 = std::f64::consts::FRAC_2_PI;

/// `sin r` for `|r| <= pi/4`: Taylor polynomial up to `r^19`.
fn sin_poly(r: f64) -> f64 {
    let r2 = r * r;
    let mut s = -INV_FACT[19];
    for n in (0..9).rev() {
        let c = INV_FACT[2 * n + 1];
        s = (if n % 2 == 1 { -c } else { c }) + r2 * s;
    }
    r * s
}

/// `cos r` for `|r| <= pi/4`: Taylor polynomial up to `r^20`.
fn cos_poly(r: f64) -> f64 {
    let r2 = r * r;
    let mut s = INV_FACT[20];
    for n in (0..10).rev() {
        let c = INV_FACT[2 * n];
        s = (if n % 2 == 1 { -c } else { c }) + r2 * s;
    }
    s
}

/// `(sin x, cos x)` in f64 for `|x| < 2^20` (Cody-Waite reduction by pi/2
/// with a 33-bit head, so `k * PIO2_1` is exact).
pub fn sincos64(x: f64) -> (f64, f64) {
    if !x.is_finite() {
        return (f64::NAN, f64::NAN);
    }
    let k = round_half_up(x * TWO_OVER_PI);
    let r = (x - k * PIO2_1) - k * PIO2_1T;
    let (s, c) = (sin_poly(r), cos_poly(r));
    match (k as i64).rem_euclid(4) {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    }
}

/// `e^x` rounded to f32.
pub fn exp(x: f32) -> f32 {
    exp64(x as f64) as f32
}

/// `tanh x` rounded to f32.
pub fn tanh(x: f32) -> f32 {
    let a = (x as f64).abs();
    let t = if a > 20.0 {
        1.0
    } else {
        let e = expm1_64(2.0 * a);
        e / (e + 2.0)
    };
    (if x < 0.0 { -t } else { t }) as f32
}

/// `erf x` rounded to f32: Maclaurin series for |x| < 4 (f64), ±1 beyond
/// (erfc(4) is below half an f32 ulp of 1).
pub fn erf(x: f32) -> f32 {
    let x = x as f64;
    if x.is_nan() {
        return f32::NAN;
    }
    if x.abs() >= 4.0 {
        return if x > 0.0 { 1.0 } else { -1.0 };
    }
    let x2 = x * x;
    let mut term = x; // (-1)^n x^(2n+1) / n!
    let mut sum = x;
    for n in 1..=120 {
        term = -term * x2 / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    (sum * std::f64::consts::FRAC_2_SQRT_PI) as f32
}

/// `inv_freq[j] = base^(-2j / rot_dim)` with this module's pow.
pub fn rope_inv_freq(rot_dim: usize, base: f64) -> Vec<f64> {
    (0..rot_dim / 2)
        .map(|j| 1.0 / powf64(base, 2.0 * j as f64 / rot_dim as f64))
        .collect()
}

/// The RoPE cos/sin cache (`[max_pos, inv_freq.len()]` f32 each) with this
/// module's sin and cos: the same bits on every machine.
pub fn rope_cache(max_pos: usize, inv_freq: &[f64]) -> Result<(Tensor, Tensor), ExecutionError> {
    let half = inv_freq.len();
    let mut cos = Vec::with_capacity(max_pos * half);
    let mut sin = Vec::with_capacity(max_pos * half);
    for p in 0..max_pos {
        for &f in inv_freq {
            let (s, c) = sincos64(p as f64 * f);
            cos.push(c as f32);
            sin.push(s as f32);
        }
    }
    let shape = [max_pos, half];
    Ok((
        Tensor::from_f32(&shape, cos)?,
        Tensor::from_f32(&shape, sin)?,
    ))
}
