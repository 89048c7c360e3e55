//! Noise schedules: which noise levels a sampler visits, step by step.
//!
//! Every level is written in the variance-exploding form `x = x0 + sigma * eps`
//! whatever the model was trained with; a timestep model's `sigma_t` is
//! `sqrt((1 - alphabar_t) / alphabar_t)` of its training schedule, and the
//! value fed to its noise-level input is the timestep `t`.

use crate::loader::config::{BetaSchedule, DiffusionSection, NoiseLevel, SamplerKind};

/// One denoiser call: the noise level of the sample and the value fed to the
/// graph's noise-level input (sigma itself, or a timestep).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// Standard deviation of the noise in the sample.
    pub sigma: f64,
    /// What the noise-level input receives.
    pub input: f64,
}

/// The levels of one sampling run: `steps[i]` is denoised, then the sample
/// moves to `next[i]` (0 after the last ODE step; the re-noising level for a
/// consistency step).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// One entry per denoiser call, the largest noise first.
    pub steps: Vec<Level>,
    /// The noise level reached after each step.
    pub next: Vec<f64>,
    /// Standard deviation of the starting sample (the unit noise is scaled by it).
    pub start_scale: f64,
}

/// Karras et al. (2022), eq. 5: `n` levels from `sigma_max` down to
/// `sigma_min`, evenly spaced in `sigma^(1/rho)`.
pub fn karras(n: usize, sigma_min: f64, sigma_max: f64, rho: f64) -> Vec<f64> {
    let (lo, hi) = (sigma_min.powf(1.0 / rho), sigma_max.powf(1.0 / rho));
    (0..n)
        .map(|i| {
            let f = if n > 1 {
                i as f64 / (n - 1) as f64
            } else {
                0.0
            };
            (hi + f * (lo - hi)).powf(rho)
        })
        .collect()
}

/// `sigma_t` for t in 0..T of a variance-preserving training schedule.
pub fn training_sigmas(
    timesteps: usize,
    beta_start: f64,
    beta_end: f64,
    kind: BetaSchedule,
) -> Vec<f64> {
    let last = (timesteps.max(2) - 1) as f64;
    let mut alphabar = 1.0f64;
    (0..timesteps)
        .map(|t| {
            let f = t as f64 / last;
            let beta = match kind {
                BetaSchedule::Linear => beta_start + f * (beta_end - beta_start),
                BetaSchedule::ScaledLinear => {
                    let r = beta_start.sqrt() + f * (beta_end.sqrt() - beta_start.sqrt());
                    r * r
                }
            };
            alphabar *= 1.0 - beta;
            ((1.0 - alphabar) / alphabar).sqrt()
        })
        .collect()
}

/// `sigmas` linearly interpolated at the fractional timestep `t`.
fn interpolate(sigmas: &[f64], t: f64) -> f64 {
    let i = (t.floor() as usize).min(sigmas.len() - 1);
    let j = (i + 1).min(sigmas.len() - 1);
    let f = t - i as f64;
    sigmas[i] + f * (sigmas[j] - sigmas[i])
}

/// The plan for `steps` denoiser calls, or why the sampler cannot take that
/// many. Assumes `cfg` passed [`DiffusionSection::check`].
///
/// - consistency: `steps` levels of the Karras schedule of `steps + 1` levels
///   (the last, `sigma_min`, is not visited), re-noising to the next one;
/// - euler on a sigma model: the Karras schedule of `steps` levels, then 0;
/// - euler on a timestep model: timesteps evenly spaced over `0..=T-1`, from the top;
/// - ddim: timesteps `i * (T / steps) + steps_offset`, from the top, each
///   step moving to the timestep `T / steps` lower (0 below timestep 0).
pub fn plan(cfg: &DiffusionSection, steps: usize) -> Result<Plan, String> {
    if steps == 0 {
        return Err("steps must be at least 1".into());
    }
    if !cfg.sigmas.is_empty() && steps != cfg.sigmas.len() {
        return Err(format!(
            "the model lists {} noise levels (diffusion.sigmas), so it takes exactly {} steps",
            cfg.sigmas.len(),
            cfg.sigmas.len()
        ));
    }
    match cfg.noise_level {
        NoiseLevel::Sigma => {
            let levels = if !cfg.sigmas.is_empty() {
                cfg.sigmas.clone()
            } else {
                let (lo, hi) = (cfg.sigma_min.unwrap_or(0.0), cfg.sigma_max.unwrap_or(0.0));
                match cfg.sampler {
                    SamplerKind::Consistency => {
                        let mut k = karras(steps + 1, lo, hi, cfg.rho);
                        k.truncate(steps);
                        k
                    }
                    _ => karras(steps, lo, hi, cfg.rho),
                }
            };
            let mut next: Vec<f64> = levels[1..].to_vec();
            next.push(0.0);
            Ok(Plan {
                start_scale: levels[0],
                steps: levels
                    .iter()
                    .map(|&s| Level { sigma: s, input: s })
                    .collect(),
                next,
            })
        }
        NoiseLevel::Timestep => {
            let t_count = cfg.train_timesteps.unwrap_or(0);
            if steps > t_count {
                return Err(format!(
                    "{steps} steps exceed the model's {t_count} training timesteps"
                ));
            }
            let sigmas = training_sigmas(
                t_count,
                cfg.beta_start.unwrap_or(0.0),
                cfg.beta_end.unwrap_or(0.0),
                cfg.beta_schedule.unwrap_or(BetaSchedule::Linear),
            );
            let (steps, next): (Vec<Level>, Vec<f64>) = match cfg.sampler {
                SamplerKind::Ddim => {
                    let ratio = t_count / steps;
                    let top = (steps - 1) * ratio + cfg.steps_offset;
                    if top >= t_count {
                        return Err(format!(
                            "steps_offset {} puts the first timestep at {top}, beyond the {t_count} training timesteps",
                            cfg.steps_offset
                        ));
                    }
                    (0..steps)
                        .rev()
                        .map(|i| {
                            let t = i * ratio + cfg.steps_offset;
                            let level = Level {
                                sigma: sigmas[t],
                                input: t as f64,
                            };
                            let next = t.checked_sub(ratio).map_or(0.0, |p| sigmas[p]);
                            (level, next)
                        })
                        .unzip()
                }
                _ => {
                    let last = (t_count - 1) as f64;
                    let levels: Vec<Level> = (0..steps)
                        .rev()
                        .map(|i| {
                            let t = if steps > 1 {
                                last * i as f64 / (steps - 1) as f64
                            } else {
                                last
                            };
                            Level {
                                sigma: interpolate(&sigmas, t),
                                input: t,
                            }
                        })
                        .collect();
                    let mut next: Vec<f64> = levels[1..].iter().map(|l| l.sigma).collect();
                    next.push(0.0);
                    (levels, next)
                }
            };
            Ok(Plan {
                start_scale: (steps[0].sigma * steps[0].sigma + 1.0).sqrt(),
                steps,
                next,
            })
        }
    }
}

/// Unit noise draws a sampler needs per sample (consistency re-noises each step).
pub fn noise_draws(sampler: SamplerKind, steps: usize) -> usize {
    match sampler {
        SamplerKind::Consistency => steps,
        SamplerKind::Euler | SamplerKind::Ddim => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn karras_runs_from_max_to_min() {
        let k = karras(5, 0.002, 80.0, 7.0);
        assert!((k[0] - 80.0).abs() < 1e-9 && (k[4] - 0.002).abs() < 1e-12);
        assert!(k.windows(2).all(|w| w[0] > w[1]));
        assert_eq!(karras(1, 0.002, 80.0, 7.0), vec![80.0]);
    }

    #[test]
    fn training_sigmas_grow_and_match_the_closed_form_of_a_linear_schedule() {
        let s = training_sigmas(1000, 1e-4, 0.02, BetaSchedule::Linear);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        let alphabar0: f64 = 1.0 - 1e-4;
        assert!((s[0] - ((1.0 - alphabar0) / alphabar0).sqrt()).abs() < 1e-12);
    }
}
