//! The canonical tensor names of the LlamaStyle family, shared by the loader's
//! family requirements and the family's one definition
//! (the LlamaStyle forward, run eagerly or recorded as a graph).

/// The token embedding table `[vocab, hidden]`.
pub const EMBED: &str = "model.embed_tokens.weight";
/// The final norm's gain `[hidden]`.
pub const FINAL_NORM: &str = "model.norm.weight";
/// The untied output projection `[vocab, hidden]` (else the embedding is used).
pub const LM_HEAD: &str = "lm_head.weight";

/// The tensor names of layer `i`.
#[derive(Debug, Clone)]
pub struct LayerNames {
    /// Pre-attention RmsNorm gain.
    pub input_norm: String,
    /// q, k, v projections.
    pub qkv: [String; 3],
    /// Their optional biases (qwen2): all three or none.
    pub qkv_bias: [String; 3],
    /// Optional per-head q and k norms (qwen3, gemma3): both or none.
    pub qk_norm: [String; 2],
    /// Attention output projection.
    pub o: String,
    /// The post-attention norm: of the attention output with sandwich norms,
    /// else the pre-MLP norm.
    pub post_attn_norm: String,
    /// Sandwich norms only (gemma2/3): before and after the MLP.
    pub ff_norms: [String; 2],
    /// Gated MLP: gate, up and down projections.
    pub mlp: [String; 3],
}

impl LayerNames {
    /// The names of layer `i`.
    pub fn of(i: usize) -> LayerNames {
        let n = |s: &str| format!("model.layers.{i}.{s}");
        LayerNames {
            input_norm: n("input_layernorm.weight"),
            qkv: [
                n("self_attn.q_proj.weight"),
                n("self_attn.k_proj.weight"),
                n("self_attn.v_proj.weight"),
            ],
            qkv_bias: [
                n("self_attn.q_proj.bias"),
                n("self_attn.k_proj.bias"),
                n("self_attn.v_proj.bias"),
            ],
            qk_norm: [n("self_attn.q_norm.weight"), n("self_attn.k_norm.weight")],
            o: n("self_attn.o_proj.weight"),
            post_attn_norm: n("post_attention_layernorm.weight"),
            ff_norms: [
                n("pre_feedforward_layernorm.weight"),
                n("post_feedforward_layernorm.weight"),
            ],
            mlp: [
                n("mlp.gate_proj.weight"),
                n("mlp.up_proj.weight"),
                n("mlp.down_proj.weight"),
            ],
        }
    }
}
