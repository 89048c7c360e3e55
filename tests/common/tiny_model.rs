//! A tiny but complete LlamaStyle `.model` written through `ModelWriter`, for
//! loader and CLI tests. Weights are seeded random values.

use cyb_llm::loader::config::{Architecture, Config, TokenizerConfig};
use cyb_llm::loader::writer::{ModelWriter, PendingTensor};
use cyb_llm::loader::Vocab;
use cyb_llm::DType;
use rand::{Rng, SeedableRng};
use std::path::Path;

pub const HIDDEN: usize = 32;
pub const INTER: usize = 64;
pub const VOCAB: usize = 8;

/// The config of the tiny model.
pub fn config() -> Config {
    Config {
        model_type: "llama".into(),
        architecture: Architecture {
            hidden_size: Some(HIDDEN),
            num_attention_heads: Some(4),
            num_key_value_heads: Some(2),
            num_hidden_layers: Some(1),
            intermediate_size: Some(INTER),
            vocab_size: Some(VOCAB),
            max_position_embeddings: Some(64),
            rope_theta: Some(10000.0),
            rms_norm_eps: Some(1e-5),
            tie_word_embeddings: Some(true),
            ..Default::default()
        },
        tokenizer: Some(TokenizerConfig {
            kind: "bpe".into(),
            pre: Some("gpt2".into()),
            eos_token_ids: vec![0],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn f32_bytes(rng: &mut rand_chacha::ChaCha8Rng, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| rng.gen_range(-1.0f32..1.0).to_le_bytes())
        .collect()
}

fn q8_0_bytes(rng: &mut rand_chacha::ChaCha8Rng, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n / 32 {
        out.extend(half::f16::from_f32(rng.gen_range(0.001f32..0.01)).to_le_bytes());
        out.extend((0..32).map(|_| rng.gen::<u8>()));
    }
    out
}

/// Tensor list of the tiny model: (name, shape, dtype).
pub fn tensor_specs() -> Vec<(String, Vec<usize>, DType)> {
    let l = "model.layers.0";
    let (q, kv) = (4 * 8, 2 * 8);
    vec![
        (
            "model.embed_tokens.weight".into(),
            vec![VOCAB, HIDDEN],
            DType::F32,
        ),
        (
            format!("{l}.input_layernorm.weight"),
            vec![HIDDEN],
            DType::F32,
        ),
        (
            format!("{l}.self_attn.q_proj.weight"),
            vec![q, HIDDEN],
            DType::F32,
        ),
        (
            format!("{l}.self_attn.k_proj.weight"),
            vec![kv, HIDDEN],
            DType::F32,
        ),
        (
            format!("{l}.self_attn.v_proj.weight"),
            vec![kv, HIDDEN],
            DType::F32,
        ),
        (
            format!("{l}.self_attn.o_proj.weight"),
            vec![HIDDEN, q],
            DType::F32,
        ),
        (
            format!("{l}.post_attention_layernorm.weight"),
            vec![HIDDEN],
            DType::F32,
        ),
        (
            format!("{l}.mlp.gate_proj.weight"),
            vec![INTER, HIDDEN],
            DType::Q8_0,
        ),
        (
            format!("{l}.mlp.up_proj.weight"),
            vec![INTER, HIDDEN],
            DType::Q8_0,
        ),
        (
            format!("{l}.mlp.down_proj.weight"),
            vec![HIDDEN, INTER],
            DType::Q8_0,
        ),
        ("model.norm.weight".into(), vec![HIDDEN], DType::F32),
    ]
}

/// The vocabulary of the tiny model.
pub fn vocab() -> Vocab {
    Vocab {
        tokens: ["<eos>", "a", "b", "ab", "Ġ", "Ġa", "\"q\"", "\\"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        merges: vec![("a".into(), "b".into()), ("Ġ".into(), "a".into())],
        scores: None,
        types: Some(vec![3, 1, 1, 1, 1, 1, 1, 1]),
    }
}

/// Writes the tiny model to `path`.
pub fn write(path: &Path) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut w = ModelWriter::new("tiny-llama");
    w.set_config(&config()).unwrap();
    w.set_section("vocab", vocab().to_toml());
    w.set_section("card", "# tiny\nA test model.\n");
    for (name, shape, dtype) in tensor_specs() {
        let n: usize = shape.iter().product();
        let data = match dtype {
            DType::Q8_0 => q8_0_bytes(&mut rng, n),
            _ => f32_bytes(&mut rng, n),
        };
        w.add_tensor(PendingTensor {
            name,
            shape,
            dtype,
            scale: None,
            data: data.into(),
        })
        .unwrap();
    }
    w.write(path).unwrap();
}
