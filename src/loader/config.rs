//! The `config` section: model type, architecture, tokenizer and sampling defaults.

use serde::{Deserialize, Serialize};

/// The parsed `config` section. Keys a family needs beyond these typed ones are
/// read from [`Architecture::extra`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Config {
    /// Dispatch key of the curated family (families.md).
    pub model_type: String,
    /// Element count of all tensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// The primary (output) tower.
    #[serde(default)]
    pub architecture: Architecture,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<TokenizerConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingDefaults>,
    /// `[diffusion]`: how `cyb-llm diffuse` drives the graph (a denoiser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffusion: Option<DiffusionSection>,
    /// `[tts]`: how `cyb-llm speak` turns text into the graph's inputs (a voice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tts: Option<TtsSection>,
}

/// `[architecture]`: hyper-parameters of the primary tower. All optional here;
/// each family checks the keys it requires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Architecture {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_attention_heads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_key_value_heads: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_hidden_layers: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intermediate_size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab_size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_position_embeddings: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_theta: Option<f64>,
    /// `neox` (halves) or `normal` (adjacent pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_style: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rms_norm_eps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_norm_eps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tie_word_embeddings: Option<bool>,
    /// `silu` | `gelu` | `gelu_pytorch_tanh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_act: Option<String>,
    /// Family-specific keys (sliding_window, layer_types, n_mels, ...), and sub-towers.
    #[serde(flatten)]
    pub extra: toml::Table,
}

impl Architecture {
    /// `rms_norm_eps`, with the inverse-stored convention (`>= 1.0` means `1/x`) undone.
    pub fn rms_norm_eps(&self) -> Option<f64> {
        self.rms_norm_eps
            .map(|e| if e >= 1.0 { 1.0 / e } else { e })
    }

    /// `head_dim`, defaulting to `hidden_size / num_attention_heads`.
    pub fn head_dim(&self) -> Option<usize> {
        self.head_dim.or_else(|| {
            let heads = self.num_attention_heads.filter(|&h| h > 0)?;
            Some(self.hidden_size? / heads)
        })
    }
}

/// `[tokenizer]`: how the `vocab` section becomes a tokenizer (tokenizer.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TokenizerConfig {
    /// `bpe` (byte-level) | `spm` | `wordpiece`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Pre-tokenizer preset for bpe (llama.cpp's `tokenizer.ggml.pre` names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bos_token_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub eos_token_ids: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pad_token_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unk_token_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_bos: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_eos: Option<bool>,
    /// wordpiece: lowercase and strip accents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowercase: Option<bool>,
    /// Other keys (e.g. cls/sep ids, add_space_prefix).
    #[serde(flatten)]
    pub extra: toml::Table,
}

/// `[sampling]` defaults; every CLI flag overrides them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SamplingDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_last_n: Option<i64>,
    /// Older writers store per-mille integers with `scale = 1000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
}

impl SamplingDefaults {
    fn scaled(&self, v: Option<f64>) -> Option<f64> {
        v.map(|x| x / self.scale.unwrap_or(1.0))
    }
    /// Temperature with `scale` applied.
    pub fn temperature(&self) -> Option<f64> {
        self.scaled(self.temperature)
    }
    /// top-p with `scale` applied.
    pub fn top_p(&self) -> Option<f64> {
        self.scaled(self.top_p)
    }
    /// min-p with `scale` applied.
    pub fn min_p(&self) -> Option<f64> {
        self.scaled(self.min_p)
    }
    /// Repetition penalty with `scale` applied.
    pub fn repeat_penalty(&self) -> Option<f64> {
        self.scaled(self.repeat_penalty)
    }
}

/// The optional `chat` section (format.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ChatSection {
    /// Preset: chatml | llama3 | gemma | mistral | phi3 | plain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Jinja source; overrides `format`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_default: Option<String>,
    /// Extra stop strings beside the eos ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
}

/// One `[[benchmarks]]` entry of the optional `eval` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalBenchmark {
    pub name: String,
    pub prompt: String,
    #[serde(default)]
    pub expected_contains: Vec<String>,
    #[serde(default)]
    pub tokens: Option<usize>,
    #[serde(default)]
    pub temperature: Option<f64>,
}

/// The optional `eval` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EvalSection {
    #[serde(default)]
    pub benchmarks: Vec<EvalBenchmark>,
}

/// How a diffusion sampler walks from noise to a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SamplerKind {
    /// Consistency model: one denoiser call per step, re-noising between steps.
    Consistency,
    /// First-order ODE (Karras et al. 2022, Algorithm 1 without churn).
    Euler,
    /// Deterministic DDIM (eta = 0) on the training timesteps, "leading" spacing.
    Ddim,
}

impl SamplerKind {
    /// The name in `[diffusion] sampler` and `--sampler`.
    pub fn name(self) -> &'static str {
        match self {
            SamplerKind::Consistency => "consistency",
            SamplerKind::Euler => "euler",
            SamplerKind::Ddim => "ddim",
        }
    }
}

/// What the graph's output is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prediction {
    /// The clean sample (a denoiser, x0-prediction).
    Sample,
    /// The noise added (epsilon-prediction).
    Epsilon,
    /// The velocity `alpha * eps - sigma * x0` (v-prediction).
    V,
}

/// How the noise-level input is fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoiseLevel {
    /// The standard deviation sigma itself; the sample is fed unscaled
    /// (EDM-style models, the preconditioning inside the graph).
    Sigma,
    /// A training timestep of a variance-preserving schedule; the sample is
    /// fed as `x / sqrt(sigma^2 + 1)` (diffusers-style UNets).
    Timestep,
}

/// How a class label becomes the condition input's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabelEncoding {
    /// `(label - label_min) / (label_max - label_min)`, a value in [0, 1].
    Unit,
    /// The label itself, as a float.
    Value,
}

/// The training noise schedule of a timestep model (`beta_t` for t in 0..T).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BetaSchedule {
    /// `beta_t` evenly spaced from `beta_start` to `beta_end`.
    Linear,
    /// `sqrt(beta_t)` evenly spaced (Stable Diffusion's schedule).
    ScaledLinear,
}

/// `[diffusion]`: the sampler and the roles of the graph's inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffusionSection {
    /// The sampler.
    pub sampler: SamplerKind,
    /// What the graph predicts.
    #[serde(default = "default_prediction")]
    pub prediction: Prediction,
    /// How the noise-level input is fed.
    #[serde(default = "default_noise_level")]
    pub noise_level: NoiseLevel,
    /// Default number of denoiser calls per sample.
    #[serde(default = "default_steps")]
    pub steps: usize,
    /// Smallest noise level (sigma models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma_min: Option<f64>,
    /// Largest noise level, the one the noise starts at (sigma models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma_max: Option<f64>,
    /// Data standard deviation of the EDM parametrization (v-prediction scaling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma_data: Option<f64>,
    /// Exponent of the Karras schedule between `sigma_max` and `sigma_min`.
    #[serde(default = "default_rho")]
    pub rho: f64,
    /// Explicit noise levels, one per step, first the largest (overrides the schedule).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sigmas: Vec<f64>,
    /// Training timesteps T (timestep models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_timesteps: Option<usize>,
    /// `beta_0` of the training schedule (timestep models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_start: Option<f64>,
    /// `beta_{T-1}` of the training schedule (timestep models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_end: Option<f64>,
    /// Shape of the training schedule (timestep models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_schedule: Option<BetaSchedule>,
    /// Added to every DDIM timestep (diffusers' `steps_offset`).
    #[serde(default)]
    pub steps_offset: usize,
    /// The graph input holding the noisy sample `[batch, C, H, W]`.
    pub sample_input: String,
    /// The graph input holding the noise level `[batch]`.
    pub noise_input: String,
    /// The graph input holding the class condition `[batch]`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition_input: Option<String>,
    /// The graph output the sampler reads.
    pub output: String,
    /// Smallest class label (with a condition input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_min: Option<i64>,
    /// Largest class label (with a condition input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_max: Option<i64>,
    /// How a label becomes the condition value.
    #[serde(default = "default_label_encoding")]
    pub label_encoding: LabelEncoding,
    /// Model-space values mapped to black and white in images.
    #[serde(default = "default_value_range")]
    pub value_range: [f64; 2],
}

fn default_prediction() -> Prediction {
    Prediction::Sample
}
fn default_noise_level() -> NoiseLevel {
    NoiseLevel::Sigma
}
fn default_steps() -> usize {
    1
}
fn default_rho() -> f64 {
    7.0
}
fn default_label_encoding() -> LabelEncoding {
    LabelEncoding::Unit
}
fn default_value_range() -> [f64; 2] {
    [-1.0, 1.0]
}

/// A `[diffusion]` or `[tts]` key that does not fit the graph (or the sampler).
#[derive(Debug, Clone, PartialEq)]
pub struct SectionMismatch {
    /// The key, as `diffusion.KEY`.
    pub field: String,
    /// What is wrong and what would fix it.
    pub reason: String,
}

impl DiffusionSection {
    /// Checks the section against the graph's inputs and outputs and the
    /// sampler's needs: every graph input has exactly one role, the sample is
    /// f32 `[batch, C, H, W]` with C, H, W fixed, the noise level and condition
    /// are f32 `[batch]`, `output` is a graph output, and the schedule keys
    /// the sampler reads are present and ordered.
    pub fn check(
        &self,
        inputs: &[crate::ir::InputDecl],
        outputs: &[String],
    ) -> Result<(), SectionMismatch> {
        let bad = |field: &str, reason: String| SectionMismatch {
            field: format!("diffusion.{field}"),
            reason,
        };
        let names: Vec<&str> = inputs.iter().map(|d| d.name.as_str()).collect();
        let find = |field: &str, name: &str, rank: usize| {
            let d = inputs.iter().find(|d| d.name == name).ok_or_else(|| {
                bad(
                    field,
                    format!(
                        "the graph has no input `{name}`; its inputs: {}",
                        names.join(", ")
                    ),
                )
            })?;
            if d.dtype != "f32" || d.shape.len() != rank {
                return Err(bad(
                    field,
                    format!(
                        "input `{name}` is {} {:?}; this role needs f32 with {rank} dimensions",
                        d.dtype, d.shape
                    ),
                ));
            }
            Ok(d)
        };
        let sample = find("sample_input", &self.sample_input, 4)?;
        if sample.shape[1..].iter().any(|&d| d <= 0) {
            return Err(bad(
                "sample_input",
                format!(
                    "input `{}` has shape {:?}; channels, height and width must be fixed",
                    sample.name, sample.shape
                ),
            ));
        }
        find("noise_input", &self.noise_input, 1)?;
        let mut roles = vec![self.sample_input.as_str(), self.noise_input.as_str()];
        if let Some(c) = &self.condition_input {
            find("condition_input", c, 1)?;
            roles.push(c);
            match (self.label_min, self.label_max) {
                (Some(lo), Some(hi)) if lo < hi => {}
                (Some(lo), Some(hi)) => {
                    return Err(bad(
                        "label_max",
                        format!("the labels {lo}..{hi} are empty; label_max must exceed label_min"),
                    ))
                }
                _ => {
                    return Err(bad(
                        "label_min",
                        format!("the condition input `{c}` needs the label range: set label_min and label_max (--labels MIN..MAX)"),
                    ))
                }
            }
        }
        for (i, r) in roles.iter().enumerate() {
            if roles[..i].contains(r) {
                return Err(bad(
                    "noise_input",
                    format!("input `{r}` is given two roles"),
                ));
            }
        }
        if let Some(extra) = names.iter().find(|n| !roles.contains(n)) {
            return Err(bad(
                "condition_input",
                format!("graph input `{extra}` has no role (sample_input, noise_input or condition_input)"),
            ));
        }
        if !outputs.contains(&self.output) {
            return Err(bad(
                "output",
                format!(
                    "the graph has no output `{}`; its outputs: {}",
                    self.output,
                    outputs.join(", ")
                ),
            ));
        }
        if self.steps == 0 {
            return Err(bad("steps", "steps must be at least 1".into()));
        }
        if self.value_range[0].partial_cmp(&self.value_range[1]) != Some(std::cmp::Ordering::Less) {
            return Err(bad(
                "value_range",
                format!("{:?} is not an increasing pair", self.value_range),
            ));
        }
        match self.noise_level {
            NoiseLevel::Sigma => self.check_sigmas().map_err(|(f, r)| bad(f, r)),
            NoiseLevel::Timestep => self.check_training().map_err(|(f, r)| bad(f, r)),
        }
    }

    fn check_sigmas(&self) -> Result<(), (&'static str, String)> {
        if self.sampler == SamplerKind::Ddim {
            return Err((
                "sampler",
                "ddim walks a timestep model's training schedule (noise_level = \"timestep\"); use euler or consistency for a sigma model".into(),
            ));
        }
        if !self.sigmas.is_empty() {
            let ordered = self.sigmas.windows(2).all(|w| w[0] > w[1]);
            if !ordered || self.sigmas.iter().any(|s| !s.is_finite() || *s <= 0.0) {
                return Err((
                    "sigmas",
                    format!("{:?} must be positive and decreasing", self.sigmas),
                ));
            }
            return Ok(());
        }
        match (self.sigma_min, self.sigma_max) {
            (Some(lo), Some(hi)) if lo > 0.0 && lo < hi && hi.is_finite() => Ok(()),
            (Some(lo), Some(hi)) => Err((
                "sigma_max",
                format!("sigma_min {lo} and sigma_max {hi} must satisfy 0 < sigma_min < sigma_max"),
            )),
            _ => Err((
                "sigma_max",
                "a sigma model needs sigma_min and sigma_max (--sigma-min, --sigma-max) or explicit sigmas".into(),
            )),
        }
    }

    fn check_training(&self) -> Result<(), (&'static str, String)> {
        if self.sampler == SamplerKind::Consistency {
            return Err((
                "sampler",
                "a consistency sampler feeds noise levels as sigma (noise_level = \"sigma\")"
                    .into(),
            ));
        }
        if !self.sigmas.is_empty() {
            return Err((
                "sigmas",
                "explicit sigmas are for sigma models; a timestep model's levels come from its training schedule".into(),
            ));
        }
        match (
            self.train_timesteps,
            self.beta_start,
            self.beta_end,
            self.beta_schedule,
        ) {
            (Some(t), Some(b0), Some(b1), Some(_))
                if t >= 2 && 0.0 < b0 && b0 <= b1 && b1 < 1.0 =>
            {
                Ok(())
            }
            (Some(_), Some(b0), Some(b1), Some(_)) => Err((
                "beta_end",
                format!(
                    "train_timesteps >= 2 and 0 < beta_start {b0} <= beta_end {b1} < 1 are needed"
                ),
            )),
            _ => Err((
                "train_timesteps",
                "a timestep model needs train_timesteps, beta_start, beta_end and beta_schedule"
                    .into(),
            )),
        }
    }
}

/// `[tts]`: a Piper voice's frontend and synthesis defaults (its `VOICE.onnx.json`),
/// stored beside the network's graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TtsSection {
    /// Output sample rate in Hz.
    pub sample_rate: u32,
    /// `espeak` (espeak-ng IPA) or `text` (the text's code points after NFD).
    pub phoneme_type: String,
    /// espeak-ng voice name (`en-us`); empty for `text` voices.
    #[serde(default)]
    pub espeak_voice: String,
    /// Phoneme symbol to its ids (usually one).
    pub phoneme_id_map: std::collections::BTreeMap<String, Vec<i64>>,
    /// Symbol runs merged into one symbol before the id lookup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vowel_clusters: Vec<Vec<String>>,
    /// Speakers the network was trained on.
    pub num_speakers: u32,
    /// Speaker name to id (empty for one-speaker voices).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub speaker_id_map: std::collections::BTreeMap<String, u32>,
    /// Default scale of the prior's noise.
    pub noise_scale: f32,
    /// Default phoneme duration multiplier (above 1 is slower).
    pub length_scale: f32,
    /// Default scale of the duration predictor's noise.
    pub noise_w: f32,
}

/// The phoneme-id input of a Piper voice's network (i64 `[batch, ids]`).
pub const TTS_IDS_INPUT: &str = "input";
/// The id-count input (i64 `[batch]`).
pub const TTS_LENGTHS_INPUT: &str = "input_lengths";
/// The scales input (f32 `[3]`: noise, length, noise_w).
pub const TTS_SCALES_INPUT: &str = "scales";
/// The graph inputs a Piper voice's network reads, with dtype and rank: phoneme
/// ids, their count and the three scales; a multi-speaker voice also reads
/// [`TTS_SPEAKER_INPUT`].
pub const TTS_INPUTS: [(&str, &str, usize); 3] = [
    (TTS_IDS_INPUT, "i64", 2),
    (TTS_LENGTHS_INPUT, "i64", 1),
    (TTS_SCALES_INPUT, "f32", 1),
];
/// The speaker-id input of a multi-speaker voice (i64 `[batch]`).
pub const TTS_SPEAKER_INPUT: &str = "sid";
/// The graph output holding the audio (`[batch, 1, 1, samples]` or alike).
pub const TTS_OUTPUT: &str = "output";

impl TtsSection {
    /// Checks the section against the graph: the inputs of [`TTS_INPUTS`]
    /// with their dtypes and ranks, `sid` exactly when the voice has several
    /// speakers, no other input, and the output [`TTS_OUTPUT`].
    pub fn check(
        &self,
        inputs: &[crate::ir::InputDecl],
        outputs: &[String],
    ) -> Result<(), SectionMismatch> {
        let bad = |field: &str, reason: String| SectionMismatch {
            field: format!("tts.{field}"),
            reason,
        };
        let names: Vec<&str> = inputs.iter().map(|d| d.name.as_str()).collect();
        let speaker = (self.num_speakers > 1).then_some((TTS_SPEAKER_INPUT, "i64", 1));
        for (name, dtype, rank) in TTS_INPUTS.into_iter().chain(speaker) {
            let Some(d) = inputs.iter().find(|d| d.name == name) else {
                return Err(bad(
                    "inputs",
                    format!(
                        "a Piper voice's graph reads `{name}`; this graph's inputs: {}",
                        names.join(", ")
                    ),
                ));
            };
            if d.dtype != dtype || d.shape.len() != rank {
                return Err(bad(
                    "inputs",
                    format!(
                        "input `{name}` is {} {:?}; a Piper voice feeds it {dtype} with {rank} dimensions",
                        d.dtype, d.shape
                    ),
                ));
            }
        }
        let known = |n: &str| {
            TTS_INPUTS.iter().any(|(k, _, _)| *k == n)
                || (self.num_speakers > 1 && n == TTS_SPEAKER_INPUT)
        };
        if let Some(extra) = names.iter().find(|n| !known(n)) {
            return Err(bad(
                "num_speakers",
                format!(
                    "graph input `{extra}` is not one a {}-speaker Piper voice feeds",
                    self.num_speakers
                ),
            ));
        }
        if !outputs.iter().any(|o| o == TTS_OUTPUT) {
            return Err(bad(
                "output",
                format!(
                    "a Piper voice's graph returns `{TTS_OUTPUT}`; this graph's outputs: {}",
                    outputs.join(", ")
                ),
            ));
        }
        Ok(())
    }
}
