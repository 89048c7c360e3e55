//! Image generation: a graph model that denoises, driven by a sampler
//! (the contract's diffusion phase).
//!
//! ```no_run
//! use cyb_llm::diffusion::{DiffusionModel, DiffusionOptions, DiffusionRequest};
//! let model = DiffusionModel::load("terrain.model", &DiffusionOptions::default())?;
//! let request = DiffusionRequest { count: 2, labels: vec![30, 90], seed: 7, ..Default::default() };
//! let samples = model.diffuse(&request)?;
//! assert_eq!(samples.shape, [2, 1, 128, 128]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - `schedule`: the noise levels a sampler visits;
//! - `sampler`: the loop from noise to sample;
//! - `noise`: seeded unit Gaussian noise, the same on every platform;
//! - `image`: samples as PNG files.
//!
//! The model is described by its config's `[diffusion]` section
//! ([`DiffusionSection`]): the sampler, the schedule and which graph input
//! is the sample, the noise level and the condition.

pub mod image;
pub mod noise;
pub mod sampler;
pub mod schedule;

use crate::backend::Tensor;
use crate::error::ExecutionError;
use crate::graph::{GraphModel, GraphOptions, GraphTaskOptions};
use crate::loader::config::{DiffusionSection, LabelEncoding, NoiseLevel, Prediction};
use crate::loader::Model;
use noise::GaussianStream;
use schedule::Level;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// How a [`DiffusionModel`] runs.
pub type DiffusionOptions = GraphTaskOptions;

/// Unit Gaussian noise given by the caller instead of the seeded generator:
/// `[N, C, H, W]` (the starting noise; later draws come from the seed) or
/// `[D, N, C, H, W]` (all D draws the sampler takes).
#[derive(Debug, Clone, Default)]
pub struct NoiseInput {
    /// `[N, C, H, W]` or `[D, N, C, H, W]`.
    pub shape: Vec<usize>,
    /// Values in C order.
    pub data: Vec<f32>,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct DiffusionRequest {
    /// Number of samples.
    pub count: usize,
    /// Class labels: empty (random, from the seed), one for all, or one per sample.
    pub labels: Vec<i64>,
    /// Seed of the noise (and of random labels).
    pub seed: u64,
    /// Noise to start from instead of the seeded generator.
    pub noise: Option<NoiseInput>,
    /// Denoiser calls per sample (default: the model's `steps`).
    pub steps: Option<usize>,
    /// Samples per graph run.
    pub batch: usize,
}

impl Default for DiffusionRequest {
    /// One sample, random label, seed 0, the model's steps, batch 1.
    fn default() -> Self {
        DiffusionRequest {
            count: 1,
            labels: Vec::new(),
            seed: 0,
            noise: None,
            steps: None,
            batch: 1,
        }
    }
}

/// Generated samples in model space.
#[derive(Debug, Clone)]
pub struct Samples {
    /// `[N, C, H, W]`.
    pub shape: [usize; 4],
    /// Values in C order.
    pub data: Vec<f32>,
    /// The label of each sample (empty for an unconditioned model).
    pub labels: Vec<i64>,
    /// The noise levels visited, the largest first.
    pub sigmas: Vec<f64>,
    /// Wall time of the sampling, graph runs included.
    pub run_ms: f64,
    /// Wall time of each batch, in order (the first includes the graph's warm-up).
    pub batch_ms: Vec<f64>,
}

impl Samples {
    /// Sample `i`, `C * H * W` values.
    pub fn sample(&self, i: usize) -> &[f32] {
        let n = self.shape[1] * self.shape[2] * self.shape[3];
        &self.data[i * n..(i + 1) * n]
    }
}

/// Why loading a diffusion model or generating failed.
#[derive(Debug, thiserror::Error)]
pub enum DiffusionError {
    /// The file could not be loaded.
    #[error(transparent)]
    Load(#[from] crate::error::LoadError),
    /// Running the graph failed.
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    /// The request cannot be served; `field` names the request field.
    #[error("{field}: {reason}")]
    Request {
        /// The request field at fault (`labels`, `noise`, `steps`, ...).
        field: &'static str,
        /// What is wrong and what would fix it.
        reason: String,
    },
}

fn request_err(field: &'static str, reason: impl Into<String>) -> DiffusionError {
    DiffusionError::Request {
        field,
        reason: reason.into(),
    }
}

/// A loaded denoiser with its sampler.
pub struct DiffusionModel {
    graph: Arc<GraphModel>,
    config: DiffusionSection,
    /// Position of the sample, noise-level and condition inputs in the graph's inputs.
    slots: [Option<usize>; 3],
    output: usize,
    sample_dims: [usize; 3],
    load_ms: f64,
}

impl std::fmt::Debug for DiffusionModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiffusionModel")
            .field("config", &self.config)
            .field("sample_dims", &self.sample_dims)
            .finish()
    }
}

impl DiffusionModel {
    /// Loads the `.model` file at `path` for sampling.
    pub fn load(
        path: impl AsRef<Path>,
        opts: &DiffusionOptions,
    ) -> Result<DiffusionModel, DiffusionError> {
        let start = Instant::now();
        let model = crate::loader::load(path)?;
        let mut dm = DiffusionModel::from_model(Arc::new(model), opts)?;
        dm.load_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(dm)
    }

    /// Prepares an already loaded model. A model without a `[diffusion]`
    /// section is `InvalidConfig` naming its type and the command to use; a
    /// section that does not fit the graph names the key.
    pub fn from_model(
        model: Arc<Model>,
        opts: &DiffusionOptions,
    ) -> Result<DiffusionModel, ExecutionError> {
        let start = Instant::now();
        let Some(config) = model.config.diffusion.clone() else {
            return Err(ExecutionError::InvalidConfig {
                field: "diffusion".into(),
                reason: format!(
                    "'{}' is not a diffusion model (its config has no [diffusion] section); {}",
                    model.config.model_type,
                    model.commands()
                ),
            });
        };
        let graph = model
            .graph
            .as_ref()
            .ok_or_else(|| ExecutionError::InvalidConfig {
                field: "graph".into(),
                reason: "a diffusion model needs a graph section (import the denoiser from ONNX)"
                    .into(),
            })?;
        let outputs = graph.output_names();
        config
            .check(&graph.input_decls, &outputs)
            .map_err(|m| ExecutionError::InvalidConfig {
                field: m.field,
                reason: m.reason,
            })?;
        let slot = |name: Option<&String>| {
            name.and_then(|n| graph.input_decls.iter().position(|d| &d.name == n))
        };
        let slots = [
            slot(Some(&config.sample_input)),
            slot(Some(&config.noise_input)),
            slot(config.condition_input.as_ref()),
        ];
        let output = outputs
            .iter()
            .position(|o| *o == config.output)
            .unwrap_or(0);
        let s = &graph.input_decls[slots[0].unwrap_or(0)].shape;
        let sample_dims = [s[1] as usize, s[2] as usize, s[3] as usize];
        let gopts = GraphOptions {
            fuse: opts.fuse,
            ..GraphOptions::default()
        };
        let graph = crate::path::bind_graph(model, opts.backend.clone(), opts.threads, gopts)?;
        Ok(DiffusionModel {
            graph,
            config,
            slots,
            output,
            sample_dims,
            load_ms: start.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The `[diffusion]` section.
    pub fn config(&self) -> &DiffusionSection {
        &self.config
    }

    /// The graph model (backend, dispatch records, fused node count).
    pub fn graph_model(&self) -> &Arc<GraphModel> {
        &self.graph
    }

    /// `[C, H, W]` of one sample.
    pub fn sample_dims(&self) -> [usize; 3] {
        self.sample_dims
    }

    /// Milliseconds [`DiffusionModel::load`] took.
    pub fn load_ms(&self) -> f64 {
        self.load_ms
    }

    /// Generates `request.count` samples.
    pub fn diffuse(&self, request: &DiffusionRequest) -> Result<Samples, DiffusionError> {
        self.diffuse_with(request, &mut |_, _| {})
    }

    /// As [`DiffusionModel::diffuse`], calling `progress(done, total)` after
    /// every denoiser call (total = batches × steps).
    pub fn diffuse_with(
        &self,
        request: &DiffusionRequest,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Samples, DiffusionError> {
        let started = Instant::now();
        let cfg = &self.config;
        let n = request.count;
        if n == 0 {
            return Err(request_err("count", "at least one sample is needed"));
        }
        if request.batch == 0 {
            return Err(request_err("batch", "the batch size must be at least 1"));
        }
        let steps = request.steps.unwrap_or(cfg.steps);
        let plan = schedule::plan(cfg, steps).map_err(|r| {
            request_err(
                "steps",
                format!(
                    "{r} (sampler {}, model default {})",
                    cfg.sampler.name(),
                    cfg.steps
                ),
            )
        })?;
        let labels = self.labels(request)?;
        let per = self.sample_dims.iter().product::<usize>();
        let draws = schedule::noise_draws(cfg.sampler, steps);
        let given = self.check_noise(request, draws)?;
        let batches = n.div_ceil(request.batch);
        let total = batches * steps;
        let mut session = self.graph.session()?;
        let backend = self.graph.dispatcher().primary();
        let mut data = Vec::with_capacity(n * per);
        let sigma_min = cfg.sigma_min.unwrap_or(0.0);
        let mut batch_ms = Vec::with_capacity(batches);
        for b in 0..batches {
            let batch_start = Instant::now();
            let lo = b * request.batch;
            let hi = (lo + request.batch).min(n);
            let size = hi - lo;
            let conditions: Vec<f32> = labels[lo.min(labels.len())..hi.min(labels.len())]
                .iter()
                .map(|&l| self.condition_value(l))
                .collect();
            let mut streams: Vec<GaussianStream> = (lo..hi)
                .map(|k| GaussianStream::new(request.seed, k as u64))
                .collect();
            let noise = |d: usize| -> Vec<f32> {
                let mut out = vec![0.0f32; size * per];
                match given {
                    Some((noise, from_file)) if d < from_file => {
                        let base = d * n * per;
                        out.copy_from_slice(&noise.data[base + lo * per..base + hi * per]);
                    }
                    _ => {
                        for (s, chunk) in streams.iter_mut().zip(out.chunks_mut(per)) {
                            s.fill(chunk);
                        }
                    }
                }
                out
            };
            let denoise = |x: &[f32], level: Level, i: usize| -> Result<Vec<f32>, DiffusionError> {
                let x0 = self.denoise(&mut session, &*backend, x, size, level, &conditions)?;
                progress(b * steps + i + 1, total);
                Ok(x0)
            };
            let out = sampler::run(cfg.sampler, &plan, sigma_min, noise, denoise)?;
            data.extend_from_slice(&out);
            batch_ms.push(batch_start.elapsed().as_secs_f64() * 1e3);
        }
        Ok(Samples {
            shape: [
                n,
                self.sample_dims[0],
                self.sample_dims[1],
                self.sample_dims[2],
            ],
            data,
            labels,
            sigmas: plan.steps.iter().map(|l| l.sigma).collect(),
            run_ms: started.elapsed().as_secs_f64() * 1e3,
            batch_ms,
        })
    }

    /// The labels of a request, checked against the model's classes.
    fn labels(&self, request: &DiffusionRequest) -> Result<Vec<i64>, DiffusionError> {
        let cfg = &self.config;
        let Some(cond) = &cfg.condition_input else {
            if !request.labels.is_empty() {
                return Err(request_err(
                    "labels",
                    "the model takes no condition (its [diffusion] section has no condition_input); drop the labels",
                ));
            }
            return Ok(Vec::new());
        };
        let (lo, hi) = (cfg.label_min.unwrap_or(0), cfg.label_max.unwrap_or(0));
        let labels = match request.labels.len() {
            0 => noise::random_labels(request.seed, request.count, lo, hi),
            1 => vec![request.labels[0]; request.count],
            k if k == request.count => request.labels.clone(),
            k => {
                return Err(request_err(
                    "labels",
                    format!(
                        "{k} labels for {} samples: give one label for all or one per sample",
                        request.count
                    ),
                ))
            }
        };
        if let Some(bad) = labels.iter().find(|l| !(lo..=hi).contains(*l)) {
            return Err(request_err(
                "labels",
                format!("label {bad} is outside the model's classes {lo}..{hi} (condition input `{cond}`)"),
            ));
        }
        Ok(labels)
    }

    /// The condition input's value for `label`.
    fn condition_value(&self, label: i64) -> f32 {
        let cfg = &self.config;
        match cfg.label_encoding {
            LabelEncoding::Value => label as f32,
            LabelEncoding::Unit => {
                let (lo, hi) = (cfg.label_min.unwrap_or(0), cfg.label_max.unwrap_or(1));
                ((label - lo) as f64 / (hi - lo) as f64) as f32
            }
        }
    }

    /// Checks caller-given noise; returns it with the number of draws it holds.
    fn check_noise<'a>(
        &self,
        request: &'a DiffusionRequest,
        draws: usize,
    ) -> Result<Option<(&'a NoiseInput, usize)>, DiffusionError> {
        let Some(noise) = &request.noise else {
            return Ok(None);
        };
        let [c, h, w] = self.sample_dims;
        let n = request.count;
        let held = match noise.shape.as_slice() {
            [a, b, cc, hh, ww] if [*b, *cc, *hh, *ww] == [n, c, h, w] && *a == draws => draws,
            [b, cc, hh, ww] if [*b, *cc, *hh, *ww] == [n, c, h, w] => 1,
            _ => {
                return Err(request_err(
                    "noise",
                    format!(
                        "the noise has shape {:?}; {n} samples need [{n}, {c}, {h}, {w}] (the starting noise) or [{draws}, {n}, {c}, {h}, {w}] (every draw of {draws} the sampler takes)",
                        noise.shape
                    ),
                ))
            }
        };
        if noise.data.len() != noise.shape.iter().product::<usize>() {
            return Err(request_err(
                "noise",
                format!("{} values for shape {:?}", noise.data.len(), noise.shape),
            ));
        }
        if let Some(i) = noise.data.iter().position(|v| !v.is_finite()) {
            return Err(request_err(
                "noise",
                format!("value {i} is {}; noise must be finite", noise.data[i]),
            ));
        }
        Ok(Some((noise, held)))
    }

    /// One graph run: `x0` for the `size` samples of `x` at `level`.
    fn denoise(
        &self,
        session: &mut crate::graph::GraphSession,
        backend: &dyn crate::backend::Backend,
        x: &[f32],
        size: usize,
        level: Level,
        conditions: &[f32],
    ) -> Result<Vec<f32>, DiffusionError> {
        let cfg = &self.config;
        let sigma = level.sigma;
        let fed: Vec<f32> = match cfg.noise_level {
            NoiseLevel::Sigma => x.to_vec(),
            NoiseLevel::Timestep => {
                let c_in = (1.0 / (sigma * sigma + 1.0).sqrt()) as f32;
                x.iter().map(|v| v * c_in).collect()
            }
        };
        let [c, h, w] = self.sample_dims;
        let decls = &self.graph.graph().input_decls;
        let mut inputs: Vec<Option<Tensor>> = (0..decls.len()).map(|_| None).collect();
        let mut put =
            |slot: Option<usize>, shape: &[usize], data: Vec<f32>| -> Result<(), DiffusionError> {
                if let Some(i) = slot {
                    inputs[i] = Some(Tensor::from_f32(shape, data)?);
                }
                Ok(())
            };
        put(self.slots[0], &[size, c, h, w], fed)?;
        put(self.slots[1], &[size], vec![level.input as f32; size])?;
        put(self.slots[2], &[size], conditions.to_vec())?;
        let inputs: Vec<Tensor> = inputs.into_iter().flatten().collect();
        let outs = session.run(&inputs, 0)?;
        let out = outs
            .get(self.output)
            .ok_or_else(|| ExecutionError::InvalidConfig {
                field: "diffusion.output".into(),
                reason: "the graph returned fewer outputs than it declares".into(),
            })?;
        if out.shape() != [size, c, h, w] {
            return Err(ExecutionError::ShapeMismatch {
                op: format!("diffusion output `{}`", cfg.output),
                expected: vec![size, c, h, w],
                got: out.shape().to_vec(),
            }
            .into());
        }
        let y = backend.try_download_f32(out)?;
        Ok(match cfg.prediction {
            Prediction::Sample => y,
            Prediction::Epsilon => {
                let s = sigma as f32;
                x.iter().zip(&y).map(|(&x, &e)| x - s * e).collect()
            }
            Prediction::V => {
                let sd = match cfg.noise_level {
                    NoiseLevel::Sigma => cfg.sigma_data.unwrap_or(1.0),
                    NoiseLevel::Timestep => 1.0,
                };
                let d = sigma * sigma + sd * sd;
                let c_skip = (sd * sd / d) as f32;
                let c_out = (-sigma * sd / d.sqrt()) as f32;
                x.iter()
                    .zip(&y)
                    .map(|(&x, &v)| c_skip * x + c_out * v)
                    .collect()
            }
        })
    }
}
