//! The sampling loop: from scaled unit noise to a sample, one denoiser call
//! per planned level (the contract's `for t in schedule: latent = step(...)`).
//!
//! The loop works in the variance-exploding form `x = x0 + sigma * eps` and
//! sees the model only as a denoiser `D(x, level) = x0` (the caller turns an
//! epsilon or v prediction into x0).
//!
//! - consistency (Song et al. 2023, Algorithm 1): `x0 = D(x, tau_i)`, then
//!   `x = x0 + sqrt(tau_{i+1}^2 - sigma_min^2) * z` before the next step;
//! - euler and ddim (eta = 0): `x = x0 + (sigma_next / sigma) * (x - x0)`,
//!   the first-order step of the probability-flow ODE; DDIM is this step on
//!   its own timestep schedule (Karras et al. 2022, section 3).

use super::schedule::{Level, Plan};
use crate::loader::config::SamplerKind;

/// Runs `plan`. `noise(d)` is unit Gaussian draw `d` of the batch (draw 0
/// starts the run; a consistency run takes one more per step after the
/// first); `denoise(x, level, step)` is `x0` for every sample of `x`.
pub fn run<E>(
    sampler: SamplerKind,
    plan: &Plan,
    sigma_min: f64,
    mut noise: impl FnMut(usize) -> Vec<f32>,
    mut denoise: impl FnMut(&[f32], Level, usize) -> Result<Vec<f32>, E>,
) -> Result<Vec<f32>, E> {
    let scale = plan.start_scale as f32;
    let mut x: Vec<f32> = noise(0).iter().map(|&z| z * scale).collect();
    for (i, (&level, &next)) in plan.steps.iter().zip(&plan.next).enumerate() {
        let x0 = denoise(&x, level, i)?;
        let last = i + 1 == plan.steps.len();
        match sampler {
            SamplerKind::Consistency => {
                if last {
                    x = x0;
                } else {
                    let k = (next * next - sigma_min * sigma_min).max(0.0).sqrt() as f32;
                    let z = noise(i + 1);
                    x = x0.iter().zip(&z).map(|(&a, &z)| a + k * z).collect();
                }
            }
            SamplerKind::Euler | SamplerKind::Ddim => {
                if next == 0.0 {
                    x = x0;
                } else {
                    let r = (next / level.sigma) as f32;
                    for (v, &d) in x.iter_mut().zip(&x0) {
                        *v = d + r * (*v - d);
                    }
                }
            }
        }
    }
    Ok(x)
}
