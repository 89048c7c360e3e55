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
