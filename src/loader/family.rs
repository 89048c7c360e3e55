//! The family registry: which curated family claims a model type, what task
//! its models do (and so which commands run them), and the tensors each family
//! requires with the shapes its config implies. A new family adds a [`Family`]
//! variant, one [`FAMILIES`] row and its tensor table here.

use super::bert_names::{self, layer_names, Variant};
use super::config::Config;
use super::llama_names::{self, LayerNames};
use super::tensors::TensorIndex;
use super::whisper_names as wn;

/// A curated family (families.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Decoder-only text generation (llama, qwen2/3, gemma3, ...).
    LlamaStyle,
    /// Encoders: embeddings and classification (bert, roberta).
    BertStyle,
    /// Speech recognition, encoder-decoder (whisper).
    WhisperStyle,
}

/// What a model does, which decides the commands that run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// Text generation: `run`, `chat`, `bench`, `perplexity`, `serve`.
    Generate,
    /// Sentence embeddings and classification: `embed`, `classify`.
    Encode,
    /// Speech recognition: `transcribe`.
    Transcribe,
    /// Text to speech (a Piper voice): `speak`.
    Speak,
    /// Image generation (a denoiser): `diffuse`.
    Diffuse,
    /// A graph of no known task: `eval`.
    Eval,
}

impl Task {
    /// The advice naming the commands for this task.
    pub fn commands(self) -> &'static str {
        match self {
            Task::Generate => "use `cyb-llm run` or `cyb-llm chat`",
            Task::Encode => "use `cyb-llm embed` or `cyb-llm classify`",
            Task::Transcribe => "use `cyb-llm transcribe`",
            Task::Speak => "use `cyb-llm speak`",
            Task::Diffuse => "use `cyb-llm diffuse`",
            Task::Eval => "run its graph with `cyb-llm eval`, or re-import the ONNX file with `cyb-llm import MODEL.onnx --sampler consistency|euler|ddim ...` (a denoiser) or with its Piper `MODEL.onnx.json` beside it (a voice)",
        }
    }
}

/// One row of the registry: a family and the `model_type`s it claims.
#[derive(Debug)]
pub struct FamilyEntry {
    /// The family.
    pub family: Family,
    /// The `model_type`s it claims.
    pub model_types: &'static [&'static str],
}

/// The registry of curated families: which family claims which model types
/// (each family's name and task are [`Family::name`] and [`Family::task`]).
pub const FAMILIES: &[FamilyEntry] = &[
    FamilyEntry {
        family: Family::LlamaStyle,
        model_types: &[
            "llama",
            "mistral",
            "qwen2",
            "qwen3",
            "smollm",
            "smollm2",
            "gemma",
            "gemma2",
            "gemma3",
            "gemma3_text",
            "phi3",
            "granite",
            "olmo2",
        ],
    },
    FamilyEntry {
        family: Family::BertStyle,
        model_types: &["bert", "roberta", "xlm-roberta", "distilbert"],
    },
    FamilyEntry {
        family: Family::WhisperStyle,
        model_types: &["whisper"],
    },
];

impl Family {
    /// The family that claims `model_type`, if any.
    pub fn for_model_type(model_type: &str) -> Option<Family> {
        FAMILIES
            .iter()
            .find(|e| e.model_types.contains(&model_type))
            .map(|e| e.family)
    }

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Family::LlamaStyle => "LlamaStyle",
            Family::BertStyle => "BertStyle",
            Family::WhisperStyle => "WhisperStyle",
        }
    }

    /// What its models do.
    pub fn task(self) -> Task {
        match self {
            Family::LlamaStyle => Task::Generate,
            Family::BertStyle => Task::Encode,
            Family::WhisperStyle => Task::Transcribe,
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

/// A layer count of the config (`field`), required > 0 and at most the number of
/// tensors the file holds (every layer needs several), so a config that claims
/// billions of layers is an error before the list of required tensors is built.
fn layer_count(
    v: Option<usize>,
    field: &str,
    tensors: &TensorIndex,
) -> Result<usize, ConfigProblem> {
    let n = need(v, field)?;
    if n > tensors.len() {
        return Err((
            format!("architecture.{field}"),
            format!(
                "{n} layers, but the file holds only {} tensors (each layer needs several); re-import the model",
                tensors.len()
            ),
        ));
    }
    Ok(n)
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
        Family::BertStyle => bert_tensors(config, tensors),
        Family::WhisperStyle => whisper_tensors(config, tensors),
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
    let layers = layer_count(a.num_hidden_layers, "num_hidden_layers", tensors)?;
    let inter = need(a.intermediate_size, "intermediate_size")?;
    let vocab = need(a.vocab_size, "vocab_size")?;
    let sandwich =
        config.model_type.starts_with("gemma2") || config.model_type.starts_with("gemma3");
    let (q, kv) = (heads * head_dim, kv_heads * head_dim);
    let mut t = Vec::new();
    push(&mut t, llama_names::EMBED.into(), vec![vocab, hidden], true);
    for i in 0..layers {
        let n = LayerNames::of(i);
        let [wq, wk, wv] = n.qkv;
        let [bq, bk, bv] = n.qkv_bias;
        let [qn, kn] = n.qk_norm;
        let [pre_ff, post_ff] = n.ff_norms;
        let [gate, up, down] = n.mlp;
        push(&mut t, n.input_norm, vec![hidden], true);
        push(&mut t, wq, vec![q, hidden], true);
        push(&mut t, wk, vec![kv, hidden], true);
        push(&mut t, wv, vec![kv, hidden], true);
        push(&mut t, n.o, vec![hidden, q], true);
        push(&mut t, bq, vec![q], false);
        push(&mut t, bk, vec![kv], false);
        push(&mut t, bv, vec![kv], false);
        push(&mut t, qn, vec![head_dim], false);
        push(&mut t, kn, vec![head_dim], false);
        push(&mut t, n.post_attn_norm, vec![hidden], true);
        push(&mut t, pre_ff, vec![hidden], sandwich);
        push(&mut t, post_ff, vec![hidden], sandwich);
        push(&mut t, gate, vec![inter, hidden], true);
        push(&mut t, up, vec![inter, hidden], true);
        push(&mut t, down, vec![hidden, inter], true);
    }
    push(&mut t, llama_names::FINAL_NORM.into(), vec![hidden], true);
    let tied = a
        .tie_word_embeddings
        .unwrap_or(!tensors.contains(llama_names::LM_HEAD));
    push(
        &mut t,
        llama_names::LM_HEAD.into(),
        vec![vocab, hidden],
        !tied,
    );
    Ok(t)
}

/// BERT names (DistilBERT's for `distilbert`, see [`layer_names`]).
fn bert_tensors(
    config: &Config,
    tensors: &TensorIndex,
) -> Result<Vec<RequiredTensor>, ConfigProblem> {
    let a = &config.architecture;
    let hidden = need(a.hidden_size, "hidden_size")?;
    need(a.num_attention_heads, "num_attention_heads")?;
    let layers = layer_count(a.num_hidden_layers, "num_hidden_layers", tensors)?;
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
        bert_names::WORD_EMBEDDINGS.into(),
        vec![vocab, hidden],
        true,
    );
    push(
        &mut t,
        bert_names::POSITION_EMBEDDINGS.into(),
        vec![max_pos, hidden],
        true,
    );
    if let Some(tv) = type_vocab.filter(|&v| v > 0) {
        push(
            &mut t,
            bert_names::TOKEN_TYPE_EMBEDDINGS.into(),
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
    norm(&mut t, bert_names::EMBED_NORM.into());
    let variant = Variant::for_model_type(&config.model_type).unwrap_or(Variant::Bert);
    let (stack, [q, k, v, o, on, fi, fo, fon]) = layer_names(variant);
    for i in 0..layers {
        let l = format!("{stack}.{i}");
        for proj in [q, k, v, o] {
            linear(&mut t, format!("{l}.{proj}"), hidden, hidden);
        }
        norm(&mut t, format!("{l}.{on}"));
        linear(&mut t, format!("{l}.{fi}"), inter, hidden);
        linear(&mut t, format!("{l}.{fo}"), hidden, inter);
        norm(&mut t, format!("{l}.{fon}"));
    }
    Ok(t)
}

fn extra_usize(config: &Config, key: &str) -> Option<usize> {
    config
        .architecture
        .extra
        .get(key)
        .and_then(|v| v.as_integer())
        .and_then(|v| usize::try_from(v).ok())
}

/// Hugging Face Whisper names; the `k_proj` biases are optional (Whisper has none;
/// CTranslate2 imports carry its zero filler).
fn whisper_tensors(
    config: &Config,
    tensors: &TensorIndex,
) -> Result<Vec<RequiredTensor>, ConfigProblem> {
    let a = &config.architecture;
    let d = need(a.hidden_size, "hidden_size")?;
    need(a.num_attention_heads, "num_attention_heads")?;
    let layers = layer_count(a.num_hidden_layers, "num_hidden_layers", tensors)?;
    let ffn = need(a.intermediate_size, "intermediate_size")?;
    let vocab = need(a.vocab_size, "vocab_size")?;
    let text_ctx = need(a.max_position_embeddings, "max_position_embeddings")?;
    let n_mels = need(extra_usize(config, "n_mels"), "n_mels")?;
    let enc_layers = layer_count(
        extra_usize(config, "encoder_layers"),
        "encoder_layers",
        tensors,
    )?;
    need(
        extra_usize(config, "encoder_attention_heads"),
        "encoder_attention_heads",
    )?;
    let enc_ffn = need(extra_usize(config, "encoder_ffn_dim"), "encoder_ffn_dim")?;
    let audio_ctx = need(
        extra_usize(config, "max_source_positions"),
        "max_source_positions",
    )?;
    let mut t = Vec::new();
    let linear = |t: &mut Vec<RequiredTensor>, p: String, out: usize, inp: usize, bias: bool| {
        push(t, format!("{p}.weight"), vec![out, inp], true);
        push(t, format!("{p}.bias"), vec![out], bias);
    };
    let norm = |t: &mut Vec<RequiredTensor>, p: String| {
        push(t, format!("{p}.weight"), vec![d], true);
        push(t, format!("{p}.bias"), vec![d], true);
    };
    let attn = |t: &mut Vec<RequiredTensor>, block: &str| {
        let [q, k, v, o] = wn::attn_proj(block);
        linear(t, q, d, d, true);
        linear(t, k, d, d, false);
        linear(t, v, d, d, true);
        linear(t, o, d, d, true);
    };
    let layer = |t: &mut Vec<RequiredTensor>, n: wn::LayerNames, cross: Option<usize>, ffn| {
        norm(t, n.attn_norm);
        attn(t, &n.attn);
        if let Some([cross_norm, block]) = cross.map(wn::cross) {
            norm(t, cross_norm);
            attn(t, &block);
        }
        norm(t, n.mlp_norm);
        let [fc1, fc2] = n.fc;
        linear(t, fc1, ffn, d, true);
        linear(t, fc2, d, ffn, true);
    };
    push(&mut t, wn::MEL_FILTERS.into(), vec![n_mels, 201], true);
    for (conv, cin) in wn::CONV.into_iter().zip([n_mels, d]) {
        push(&mut t, format!("{conv}.weight"), vec![d, cin, 3], true);
        push(&mut t, format!("{conv}.bias"), vec![d], true);
    }
    push(&mut t, wn::ENC_POSITIONS.into(), vec![audio_ctx, d], true);
    for i in 0..enc_layers {
        layer(&mut t, wn::LayerNames::encoder(i), None, enc_ffn);
    }
    norm(&mut t, wn::ENC_NORM.into());
    push(&mut t, wn::DEC_EMBED.into(), vec![vocab, d], true);
    push(&mut t, wn::DEC_POSITIONS.into(), vec![text_ctx, d], true);
    for i in 0..layers {
        layer(&mut t, wn::LayerNames::decoder(i), Some(i), ffn);
    }
    norm(&mut t, wn::DEC_NORM.into());
    let tied = a.tie_word_embeddings.unwrap_or(true);
    push(&mut t, wn::PROJ_OUT.into(), vec![vocab, d], !tied);
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_one_row_and_model_types_are_claimed_once() {
        for f in [Family::LlamaStyle, Family::BertStyle, Family::WhisperStyle] {
            assert_eq!(
                FAMILIES.iter().filter(|e| e.family == f).count(),
                1,
                "{f:?}"
            );
        }
        let mut types: Vec<&str> = FAMILIES
            .iter()
            .flat_map(|e| e.model_types.iter().copied())
            .collect();
        let n = types.len();
        types.sort_unstable();
        types.dedup();
        assert_eq!(types.len(), n, "a model type claimed by two families");
        assert_eq!(Family::for_model_type("qwen3"), Some(Family::LlamaStyle));
        assert_eq!(
            Family::for_model_type("roberta").map(Family::task),
            Some(Task::Encode)
        );
        assert_eq!(Family::for_model_type("vits"), None);
    }
}
