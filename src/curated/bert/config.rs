//! The BertStyle hyper-parameters, read from the `config` section (families.md).

use crate::error::ExecutionError;
use crate::loader::bert_names::Variant;
use crate::loader::Config;

/// The MLP activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: exact erf GELU.
    Gelu,
    /// `gelu_new` / `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    /// `relu`.
    Relu,
}

/// How token states become one vector per text (`--pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's state (`[CLS]` / `<s>`).
    Cls,
    /// The mean over the non-padding tokens.
    Mean,
    /// The element-wise max over the non-padding tokens.
    Max,
}

impl Pooling {
    /// Parses `cls`, `mean` or `max`.
    pub fn parse(s: &str) -> Option<Pooling> {
        match s {
            "cls" => Some(Pooling::Cls),
            "mean" => Some(Pooling::Mean),
            "max" => Some(Pooling::Max),
            _ => None,
        }
    }

    /// The config / CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Cls => "cls",
            Pooling::Mean => "mean",
            Pooling::Max => "max",
        }
    }
}

/// How classification logits become scores (`problem_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemType {
    /// One label per text: softmax over the labels (the default).
    SingleLabel,
    /// Independent labels: a sigmoid per label.
    MultiLabel,
    /// Real-valued outputs: the logits themselves.
    Regression,
}

/// Everything the BertStyle forward and its pooling / classification defaults
/// need from `config`.
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
    /// `model_type`.
    pub model_type: String,
    /// Position-id convention.
    pub variant: Variant,
    /// Residual width.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Encoder layers.
    pub layers: usize,
    /// MLP width.
    pub intermediate: usize,
    /// Rows of the word embedding.
    pub vocab: usize,
    /// Rows of the position embedding.
    pub max_positions: usize,
    /// LayerNorm epsilon.
    pub eps: f32,
    /// MLP activation.
    pub act: Activation,
    /// Id of the padding token (fills the padded rows of a batch).
    pub pad_id: u32,
    /// Position of the first token (`padding_idx + 1` for RoBERTa, else 0).
    pub position_offset: usize,
    /// Longest input in tokens (specials included): `max_seq_length` when the
    /// config has it (sentence-transformers models), else what the position
    /// table holds; longer inputs are truncated.
    pub max_tokens: usize,
    /// Default pooling (`pooling`; mean when absent).
    pub pooling: Pooling,
    /// Default L2 normalization of embeddings (`normalize`).
    pub normalize: bool,
    /// Class names (`labels`), id order; may be empty.
    pub labels: Vec<String>,
    /// How logits become scores.
    pub problem_type: ProblemType,
}

fn invalid(field: &str, reason: impl Into<String>) -> ExecutionError {
    ExecutionError::InvalidConfig {
        field: field.to_string(),
        reason: reason.into(),
    }
}

fn need(v: Option<usize>, field: &str) -> Result<usize, ExecutionError> {
    v.filter(|&x| x > 0)
        .ok_or_else(|| invalid(&format!("architecture.{field}"), "required and must be > 0"))
}

fn extra_usize(config: &Config, key: &str) -> Result<Option<usize>, ExecutionError> {
    match config.architecture.extra.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_integer()
            .and_then(|i| usize::try_from(i).ok())
            .map(Some)
            .ok_or_else(|| invalid(&format!("architecture.{key}"), "must be an integer >= 0")),
    }
}

impl BertConfig {
    /// Reads and checks the BertStyle keys of `config`.
    pub fn from_config(config: &Config) -> Result<BertConfig, ExecutionError> {
        let a = &config.architecture;
        let mt = config.model_type.as_str();
        let variant = Variant::for_model_type(mt).ok_or_else(|| {
            invalid(
                "model_type",
                format!(
                    "'{mt}' is not a BertStyle model type (bert, roberta, xlm-roberta, distilbert)"
                ),
            )
        })?;
        let hidden = need(a.hidden_size, "hidden_size")?;
        let heads = need(a.num_attention_heads, "num_attention_heads")?;
        if hidden % heads != 0 {
            return Err(invalid(
                "architecture.num_attention_heads",
                format!("{heads} does not divide hidden_size {hidden}"),
            ));
        }
        let layers = need(a.num_hidden_layers, "num_hidden_layers")?;
        let intermediate = need(a.intermediate_size, "intermediate_size")?;
        let vocab = need(a.vocab_size, "vocab_size")?;
        let max_positions = need(a.max_position_embeddings, "max_position_embeddings")?;
        let eps = a.layer_norm_eps.unwrap_or(1e-12);
        if !(eps > 0.0 && eps.is_finite()) {
            return Err(invalid("architecture.layer_norm_eps", "must be > 0"));
        }
        let act = match a.hidden_act.as_deref() {
            None | Some("gelu") => Activation::Gelu,
            Some("gelu_new" | "gelu_pytorch_tanh" | "gelu_tanh") => Activation::GeluTanh,
            Some("relu") => Activation::Relu,
            Some(other) => {
                return Err(invalid(
                    "architecture.hidden_act",
                    format!("'{other}' is not supported (gelu, gelu_new, relu)"),
                ))
            }
        };
        let pad_id = match extra_usize(config, "pad_token_id")? {
            Some(p) => p as u32,
            None => config
                .tokenizer
                .as_ref()
                .and_then(|t| t.pad_token_id)
                .unwrap_or(match variant {
                    Variant::Bert | Variant::DistilBert => 0,
                    Variant::Roberta => 1,
                }),
        };
        let position_offset = match variant {
            Variant::Bert | Variant::DistilBert => 0,
            Variant::Roberta => pad_id as usize + 1,
        };
        if position_offset >= max_positions {
            return Err(invalid(
                "architecture.pad_token_id",
                format!(
                    "positions start at {position_offset}, past max_position_embeddings {max_positions}"
                ),
            ));
        }
        let table_max = max_positions - position_offset;
        let max_tokens = match extra_usize(config, "max_seq_length")? {
            Some(0) => return Err(invalid("architecture.max_seq_length", "must be > 0")),
            Some(m) => m.min(table_max),
            None => table_max,
        };
        let pooling = match a.extra.get("pooling") {
            None => Pooling::Mean,
            Some(v) => v.as_str().and_then(Pooling::parse).ok_or_else(|| {
                invalid(
                    "architecture.pooling",
                    format!("{v} is not \"cls\", \"mean\" or \"max\""),
                )
            })?,
        };
        let normalize = match a.extra.get("normalize") {
            None => false,
            Some(v) => v
                .as_bool()
                .ok_or_else(|| invalid("architecture.normalize", "must be true or false"))?,
        };
        let labels = match a.extra.get("labels") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .and_then(|l| {
                    l.iter()
                        .map(|x| x.as_str().map(String::from))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| invalid("architecture.labels", "must be an array of strings"))?,
        };
        let problem_type = match a.extra.get("problem_type").map(|v| v.as_str()) {
            None | Some(Some("single_label_classification")) => ProblemType::SingleLabel,
            Some(Some("multi_label_classification")) => ProblemType::MultiLabel,
            Some(Some("regression")) => ProblemType::Regression,
            Some(other) => {
                return Err(invalid(
                    "architecture.problem_type",
                    format!(
                        "{other:?} is not single_label_classification, multi_label_classification or regression"
                    ),
                ))
            }
        };
        Ok(BertConfig {
            model_type: mt.to_string(),
            variant,
            hidden,
            heads,
            head_dim: hidden / heads,
            layers,
            intermediate,
            vocab,
            max_positions,
            eps: eps as f32,
            act,
            pad_id,
            position_offset,
            max_tokens,
            pooling,
            normalize,
            labels,
            problem_type,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(model_type: &str, extra: &str) -> Config {
        let text = format!(
            "model_type = \"{model_type}\"\n[architecture]\nhidden_size = 8\nnum_attention_heads = 2\n\
             num_hidden_layers = 1\nintermediate_size = 16\nvocab_size = 10\n\
             max_position_embeddings = 20\n{extra}"
        );
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn bert_defaults() {
        let c = BertConfig::from_config(&config("bert", "")).unwrap();
        assert_eq!(
            (c.variant, c.position_offset, c.max_tokens),
            (Variant::Bert, 0, 20)
        );
        assert_eq!(
            (c.pooling, c.normalize, c.pad_id),
            (Pooling::Mean, false, 0)
        );
        assert_eq!((c.head_dim, c.eps, c.act), (4, 1e-12, Activation::Gelu));
        assert_eq!(c.problem_type, ProblemType::SingleLabel);
    }

    #[test]
    fn roberta_positions_start_after_padding_idx() {
        let c = BertConfig::from_config(&config("xlm-roberta", "")).unwrap();
        assert_eq!((c.pad_id, c.position_offset, c.max_tokens), (1, 2, 18));
        let c = BertConfig::from_config(&config("roberta", "pad_token_id = 3\n")).unwrap();
        assert_eq!((c.position_offset, c.max_tokens), (4, 16));
        let e = BertConfig::from_config(&config("roberta", "pad_token_id = 19\n")).unwrap_err();
        assert!(e.to_string().contains("pad_token_id"), "{e}");
    }

    #[test]
    fn sentence_transformers_keys() {
        let extra = "max_seq_length = 12\npooling = \"cls\"\nnormalize = true\n\
                     labels = [\"no\", \"yes\"]\nproblem_type = \"multi_label_classification\"\n";
        let c = BertConfig::from_config(&config("bert", extra)).unwrap();
        assert_eq!(
            (c.max_tokens, c.pooling, c.normalize),
            (12, Pooling::Cls, true)
        );
        assert_eq!(c.labels, ["no", "yes"]);
        assert_eq!(c.problem_type, ProblemType::MultiLabel);
        let c = BertConfig::from_config(&config("bert", "max_seq_length = 512\n")).unwrap();
        assert_eq!(c.max_tokens, 20, "never past the position table");
    }

    #[test]
    fn bad_keys_name_the_field() {
        for (extra, field) in [
            ("pooling = \"sum\"\n", "architecture.pooling"),
            ("normalize = 1\n", "architecture.normalize"),
            ("hidden_act = \"swish\"\n", "architecture.hidden_act"),
            ("labels = [1, 2]\n", "architecture.labels"),
            ("max_seq_length = 0\n", "architecture.max_seq_length"),
            ("problem_type = \"ranking\"\n", "architecture.problem_type"),
        ] {
            match BertConfig::from_config(&config("bert", extra)) {
                Err(ExecutionError::InvalidConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{extra}: {other:?}"),
            }
        }
        let c = BertConfig::from_config(&config("distilbert", "")).unwrap();
        assert_eq!(
            (c.variant, c.position_offset, c.pad_id),
            (Variant::DistilBert, 0, 0)
        );
        let e = BertConfig::from_config(&config("llama", "")).unwrap_err();
        assert!(e.to_string().contains("not a BertStyle model type"), "{e}");
    }
}
