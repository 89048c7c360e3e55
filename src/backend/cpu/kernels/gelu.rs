//! Branch-free `erf` and exact GELU that the compiler vectorizes: a rational approximation
//! on `[-4, 4]` (Eigen's `generic_fast_erf_float` coefficients: an odd degree-13 numerator
//! over an even degree-8 denominator; outside, `erf` is ±1 in f32), maximum absolute error
//! about 4e-7, without the libm call per value of `erff`.

/// Numerator coefficients, `x^1, x^3, ..., x^13`.
const ALPHA: [f32; 7] = [
    -1.609_603_3e-2,
    -2.954_6e-3,
    -7.349_906_4e-4,
    -5.692_506_2e-5,
    -2.101_024e-6,
    2.770_681_5e-8,
    -2.726_142_4e-10,
];

/// Denominator coefficients, `x^0, x^2, ..., x^8`.
const BETA: [f32; 5] = [
    -1.426_473_9e-2,
    -7.373_329_3e-3,
    -1.682_827e-3,
    -2.133_740_5e-4,
    -1.456_607_15e-5,
];

/// `erf(x)`, within about 4e-7 of the exact value (plain multiply-adds: `mul_add` would be a
/// libm call on targets built without FMA).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = ALPHA[6];
    for &a in ALPHA[..6].iter().rev() {
        p = p * x2 + a;
    }
    let mut q = BETA[4];
    for &b in BETA[..4].iter().rev() {
        q = q * x2 + b;
    }
    x * p / q
}

/// Exact GELU, `0.5 x (1 + erf(x / sqrt 2))`, with [`erf`].
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_and_gelu_match_libm() {
        let mut worst = (0.0f64, 0.0f64);
        for i in -200_000..=200_000 {
            let x = i as f32 * 5e-5;
            let e = (erf(x) as f64 - libm::erf(x as f64)).abs();
            let exact = 0.5 * x as f64 * (1.0 + libm::erf(x as f64 / std::f64::consts::SQRT_2));
            // erf's error, times 0.5 |x|, plus rounding.
            let g = (gelu(x) as f64 - exact).abs() / (x as f64).abs().max(1.0);
            worst = (worst.0.max(e), worst.1.max(g));
        }
        assert!(worst.0 < 5e-7, "erf: max abs error {}", worst.0);
        assert!(worst.1 < 3e-7, "gelu: max error / max(|x|, 1) {}", worst.1);
        assert_eq!(erf(f32::INFINITY), erf(4.0));
        assert!(gelu(-30.0).abs() < 1e-5 && (gelu(30.0) - 30.0).abs() < 1e-5);
        assert!(erf(f32::NAN).is_nan());
    }
}
