//! Curated families known to the loader, and the tensors each requires with the
//! shapes its config implies. Later families add a variant and a table here.

use super::config::Config;
use super::tensors::TensorIndex;

/// A curated family (families.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Decoder-only text generation (llama, qwen2/3, gemma3, ...).
    LlamaStyle,
    /// Encoders: embeddings and classification (bert, roberta).
    BertStyle,
}

impl Family {
    /// The family that claims `model_type`, if any.
    pub fn for_model_type(model_type: &str) -> Option<Family> {
        match model_type {
            "llama" | "mistral" | "qwen2" | "qwen3" | "smollm" | "smollm2" | "gemma" | "gemma2"
            | "gemma3" | "gemma3_text" | "phi3" | "granite" | "olmo2" => Some(Family::LlamaStyle),
            "bert" | "roberta" | "xlm-roberta" => Some(Family::BertStyle),
            _ => None,
        }
    }

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Family::LlamaStyle => "LlamaStyle",
            Family::BertStyle => "BertStyle",
        }
    }
}

/// A tensor a family needs, with the shape the config implies.
#[derive(Debug, Clone, PartialEq)]
pub struct RequiredTensor {
    pub name: String,
    pub shape: Vec<usize>,
    /// False for tensors checked only when present (biases, QK-norm).
    pub mandatory: bool,
}

/// A config key a family needs that is missing or unusable: `(field, reason)`.
pub type ConfigProblem = (String, String);

fn need(v: Option<usize>, field: &str) -> Result<usize, ConfigProblem> {
    v.filter(|&x| x > 0).ok_or_else(|| {
        (
            format!("architecture.{field}"),
            "required by this model family and must be > 0".to_string(),
        )
    })
}

fn push(list: &mut Vec<RequiredTensor>, name: String, shape: Vec<usize>, mandatory: bool) {
    list.push(RequiredTensor {
        name,
        shape,
        mandatory,
    });
}

/// The tensors `family` requires for `config`; optional ones are included with
/// `mandatory = false` and checked only when present in `tensors`.
pub fn required_tensors(
    family: Family,
    config: &Config,
    tensors: &TensorIndex,
) -> Result<Vec<RequiredTensor>, ConfigProblem> {
    match family {
        Family::LlamaStyle => llama_tensors(config, tensors),
        Family::BertStyle => bert_tensors(config),
    }
}

fn llama_tensors(
    config: &Config,
    tensors: &TensorIndex,
) -> Result<Vec<RequiredTensor>, ConfigProblem> {
    let a = &config.architecture;
    let hidden = need(a.hidden_size, "hidden_size")?;
    let heads = need(a.num_attention_heads, "num_attention_heads")?;
    let kv_heads = need(
        a.num_key_value_heads.or(a.num_attention_heads),
        "num_key_value_heads",
    )?;
    if heads % kv_heads != 0 {
        return Err((
            "architecture.num_key_value_heads".into(),
            format!("{kv_heads} does not divide num_attention_heads {heads}"),
        ));
    }
    let head_dim = need(a.head_dim(), "head_dim")?;
    let layers = need(a.num_hidden_layers, "num_hidden_layers")?;
    let inter = need(a.intermediate_size, "intermediate_size")?;
    let vocab = need(a.vocab_size, "vocab_size")?;
    let sandwich =
        config.model_type.starts_with("gemma2") || config.model_type.starts_with("gemma3");
    let (q, kv) = (heads * head_dim, kv_heads * head_dim);
    let mut t = Vec::new();
    push(
        &mut t,
        "model.embed_tokens.weight".into(),
        vec![vocab, hidden],
        true,
    );
    for i in 0..layers {
        let l = format!("model.layers.{i}");
        push(
            &mut t,
            format!("{l}.input_layernorm.weight"),
            vec![hidden],
            true,
        );
        push(
            &mut t,
            format!("{l}.self_attn.q_proj.weight"),
            vec![q, hidden],
            true,
        );
        push(
            &mut t,
            format!("{l}.self_attn.k_proj.weight"),
            vec![kv, hidden],
            true,
        );
        push(
            &mut t,
            format!("{l}.self_attn.v_proj.weight"),
            vec![kv, hidden],
            true,
        );
        push(
            &mut t,
            format!("{l}.self_attn.o_proj.weight"),
            vec![hidden, q],
            true,
        );
        push(&mut t, format!("{l}.self_attn.q_proj.bias"), vec![q], false);
        push(
            &mut t,
            format!("{l}.self_attn.k_proj.bias"),
            vec![kv],
            false,
        );
        push(
            &mut t,
            format!("{l}.self_attn.v_proj.bias"),
            vec![kv],
            false,
        );
        push(
            &mut t,
            format!("{l}.self_attn.q_norm.weight"),
            vec![head_dim],
            false,
        );
        push(
            &mut t,
            format!("{l}.self_attn.k_norm.weight"),
            vec![head_dim],
            false,
        );
        push(
            &mut t,
            format!("{l}.post_attention_layernorm.weight"),
            vec![hidden],
            true,
        );
        push(
            &mut t,
            format!("{l}.pre_feedforward_layernorm.weight"),
            vec![hidden],
            sandwich,
        );
        push(
            &mut t,
            format!("{l}.post_feedforward_layernorm.weight"),
            vec![hidden],
            sandwich,
        );
        push(
            &mut t,
            format!("{l}.mlp.gate_proj.weight"),
            vec![inter, hidden],
            true,
        );
        push(
            &mut t,
            format!("{l}.mlp.up_proj.weight"),
            vec![inter, hidden],
            true,
        );
        push(
            &mut t,
            format!("{l}.mlp.down_proj.weight"),
            vec![hidden, inter],
            true,
        );
    }
    push(&mut t, "model.norm.weight".into(), vec![hidden], true);
    let tied = a
        .tie_word_embeddings
        .unwrap_or(!tensors.contains("lm_head.weight"));
    push(&mut t, "lm_head.weight".into(), vec![vocab, hidden], !tied);
    Ok(t)
}

fn bert_tensors(config: &Config) -> Result<Vec<RequiredTensor>, ConfigProblem> {
    let a = &config.architecture;
    let hidden = need(a.hidden_size, "hidden_size")?;
    need(a.num_attention_heads, "num_attention_heads")?;
    let layers = need(a.num_hidden_layers, "num_hidden_layers")?;
    let inter = need(a.intermediate_size, "intermediate_size")?;
    let vocab = need(a.vocab_size, "vocab_size")?;
    let max_pos = need(a.max_position_embeddings, "max_position_embeddings")?;
    let type_vocab = a
        .extra
        .get("type_vocab_size")
        .and_then(|v| v.as_integer())
        .and_then(|v| usize::try_from(v).ok());
    let mut t = Vec::new();
    push(
        &mut t,
        "embeddings.word_embeddings.weight".into(),
        vec![vocab, hidden],
        true,
    );
    push(
        &mut t,
        "embeddings.position_embeddings.weight".into(),
        vec![max_pos, hidden],
        true,
    );
    if let Some(tv) = type_vocab.filter(|&v| v > 0) {
        push(
            &mut t,
            "embeddings.token_type_embeddings.weight".into(),
            vec![tv, hidden],
            true,
        );
    }
    let norm = |t: &mut Vec<RequiredTensor>, p: String| {
        push(t, format!("{p}.weight"), vec![hidden], true);
        push(t, format!("{p}.bias"), vec![hidden], true);
    };
    let linear = |t: &mut Vec<RequiredTensor>, p: String, out: usize, inp: usize| {
        push(t, format!("{p}.weight"), vec![out, inp], true);
        push(t, format!("{p}.bias"), vec![out], true);
    };
    norm(&mut t, "embeddings.LayerNorm".into());
    for i in 0..layers {
        let l = format!("encoder.layer.{i}");
        for proj in ["query", "key", "value"] {
            linear(&mut t, format!("{l}.attention.self.{proj}"), hidden, hidden);
        }
        linear(
            &mut t,
            format!("{l}.attention.output.dense"),
            hidden,
            hidden,
        );
        norm(&mut t, format!("{l}.attention.output.LayerNorm"));
        linear(&mut t, format!("{l}.intermediate.dense"), inter, hidden);
        linear(&mut t, format!("{l}.output.dense"), hidden, inter);
        norm(&mut t, format!("{l}.output.LayerNorm"));
    }
    Ok(t)
}
