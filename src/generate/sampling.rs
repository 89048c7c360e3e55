//! Sampling settings (ops.md `Sample`): defaults from the model's `[sampling]`,
//! then llama.cpp's; checks of user values; the seeded draw.

use crate::backend::SampleParams;
use crate::loader::Config;
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// A sampling value out of its range: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSampling {
    /// `temperature`, `top_p`, `min_p` or `repeat_penalty`.
    pub field: &'static str,
    /// The value and its allowed range.
    pub reason: String,
}

/// A seed from the clock, different for each call in a process (llama.cpp's
/// default is a random seed too).
pub fn fresh_seed() -> u64 {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// How the next token is picked.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// 0 = greedy argmax (ties to the lowest id).
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = off).
    pub top_k: usize,
    /// Nucleus: smallest set with cumulative probability >= top_p (1 = off).
    pub top_p: f32,
    /// Drop tokens below `min_p` times the top probability (0 = off).
    pub min_p: f32,
    /// Repetition penalty (1 = off).
    pub repeat_penalty: f32,
    /// How many recent tokens the penalty looks at.
    pub repeat_last_n: usize,
    /// Seed of the ChaCha20 generator: the same seed gives the same tokens on every platform.
    pub seed: u64,
}

impl Default for Sampling {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,
    /// repeat penalty 1.0 over the last 64 tokens; seed 0.
    fn default() -> Self {
        Sampling {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 0,
        }
    }
}

impl Sampling {
    /// Greedy decoding (temperature 0, no penalty).
    pub fn greedy() -> Self {
        Sampling {
            temperature: 0.0,
            repeat_penalty: 1.0,
            ..Sampling::default()
        }
    }

    /// The model's `[sampling]` values over llama.cpp's defaults.
    pub fn for_model(config: &Config) -> Self {
        let mut s = Sampling::default();
        if let Some(d) = &config.sampling {
            if let Some(t) = d.temperature() {
                s.temperature = t as f32;
            }
            if let Some(k) = d.top_k {
                s.top_k = usize::try_from(k).unwrap_or(0);
            }
            if let Some(p) = d.top_p() {
                s.top_p = p as f32;
            }
            if let Some(p) = d.min_p() {
                s.min_p = p as f32;
            }
            if let Some(r) = d.repeat_penalty() {
                s.repeat_penalty = r as f32;
            }
            if let Some(n) = d.repeat_last_n {
                s.repeat_last_n = usize::try_from(n).unwrap_or(0);
            }
        }
        s
    }

    /// Checks the ranges: temperature >= 0, top-p in (0, 1], min-p in [0, 1],
    /// repeat penalty > 0; all finite. The error names the field and the bad value.
    pub fn validate(&self) -> Result<(), InvalidSampling> {
        let bad = |field: &'static str, reason: String| Err(InvalidSampling { field, reason });
        let finite = [
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("min_p", self.min_p),
            ("repeat_penalty", self.repeat_penalty),
        ];
        for (name, v) in finite {
            if !v.is_finite() {
                return bad(name, format!("{name} = {v} is not a finite number"));
            }
        }
        if self.temperature < 0.0 {
            return bad(
                "temperature",
                format!("temperature = {} must be >= 0", self.temperature),
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", format!("top_p = {} must be in (0, 1]", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p", format!("min_p = {} must be in [0, 1]", self.min_p));
        }
        if self.repeat_penalty <= 0.0 {
            return bad(
                "repeat_penalty",
                format!("repeat_penalty = {} must be > 0", self.repeat_penalty),
            );
        }
        Ok(())
    }

    /// True when the pick is a plain argmax.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// True when the pick is the argmax of the logits themselves: greedy
    /// with no repeat penalty (a backend can then pick on the device).
    pub fn is_argmax_of_logits(&self) -> bool {
        self.is_greedy() && self.repeat_penalty == 1.0
    }

    /// The op parameters for one draw `u` in [0, 1).
    pub fn params(&self, u: f32) -> SampleParams {
        SampleParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            u,
        }
    }
}

/// The seeded generator of the draws (ChaCha20: platform independent).
#[derive(Debug, Clone)]
pub struct Draws(ChaCha20Rng);

impl Draws {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Draws(ChaCha20Rng::seed_from_u64(seed))
    }

    /// The next uniform draw in [0, 1).
    pub fn next_u(&mut self) -> f32 {
        self.0.gen::<f32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_rejects_out_of_range_values() {
        assert!(Sampling::default().validate().is_ok());
        let bad = [
            Sampling {
                temperature: -0.1,
                ..Sampling::default()
            },
            Sampling {
                top_p: 0.0,
                ..Sampling::default()
            },
            Sampling {
                top_p: 1.5,
                ..Sampling::default()
            },
            Sampling {
                min_p: -1.0,
                ..Sampling::default()
            },
            Sampling {
                repeat_penalty: 0.0,
                ..Sampling::default()
            },
            Sampling {
                temperature: f32::NAN,
                ..Sampling::default()
            },
        ];
        for s in bad {
            assert!(s.validate().is_err(), "{s:?}");
        }
    }

    #[test]
    fn draws_repeat_for_a_seed() {
        let a: Vec<f32> = {
            let mut d = Draws::new(42);
            (0..8).map(|_| d.next_u()).collect()
        };
        let mut d = Draws::new(42);
        let b: Vec<f32> = (0..8).map(|_| d.next_u()).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|u| (0.0..1.0).contains(u)));
        let mut other = Draws::new(43);
        assert_ne!(a[0], other.next_u());
    }
}
