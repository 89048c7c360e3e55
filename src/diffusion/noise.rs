//! Seeded unit Gaussian noise, identical on every platform and thread count.
//!
//! Sample `k` of a request with seed `s` reads ChaCha8 stream `k` of key `s`,
//! so a sample does not depend on the batch it is run in. Values come from
//! the Box–Muller transform computed with `libm` (a pure-Rust libm: the same
//! bits on every target) in f64, then rounded to f32.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The stream random labels are drawn from (no sample index reaches it).
const LABEL_STREAM: u64 = u64::MAX;

/// Unit normal values of one sample, draw after draw.
pub struct GaussianStream {
    rng: ChaCha8Rng,
    spare: Option<f64>,
}

impl GaussianStream {
    /// The stream of sample `index` under `seed`.
    pub fn new(seed: u64, index: u64) -> GaussianStream {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(index);
        GaussianStream { rng, spare: None }
    }

    /// A uniform value in (0, 1] with 53 random bits.
    fn open_unit(&mut self) -> f64 {
        ((self.rng.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// The next standard normal value.
    pub fn next_f64(&mut self) -> f64 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        let r = libm::sqrt(-2.0 * libm::log(self.open_unit()));
        let theta = 2.0 * std::f64::consts::PI * (self.open_unit() - f64::EPSILON / 2.0);
        self.spare = Some(r * libm::sin(theta));
        r * libm::cos(theta)
    }

    /// Fills `out` with standard normal values, rounded to f32.
    pub fn fill(&mut self, out: &mut [f32]) {
        for v in out {
            *v = self.next_f64() as f32;
        }
    }
}

/// `count` labels drawn uniformly from `lo..=hi` under `seed`.
pub fn random_labels(seed: u64, count: usize, lo: i64, hi: i64) -> Vec<i64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(LABEL_STREAM);
    (0..count).map(|_| rng.gen_range(lo..=hi)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_independent_of_each_other_and_repeatable() {
        let mut a = vec![0.0f32; 1000];
        let mut b = vec![0.0f32; 1000];
        GaussianStream::new(7, 3).fill(&mut a);
        GaussianStream::new(7, 3).fill(&mut b);
        assert_eq!(a, b);
        GaussianStream::new(7, 4).fill(&mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn values_have_unit_moments() {
        let mut s = GaussianStream::new(1, 0);
        let n = 200_000;
        let v: Vec<f64> = (0..n).map(|_| s.next_f64()).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        let kurt = v.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / n as f64 / (var * var);
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.01, "variance {var}");
        assert!((kurt - 3.0).abs() < 0.05, "kurtosis {kurt}");
    }

    #[test]
    fn random_labels_stay_in_range() {
        let l = random_labels(5, 500, 1, 100);
        assert!(l.iter().all(|&x| (1..=100).contains(&x)));
        assert!(l.contains(&1) && l.contains(&100));
    }
}
