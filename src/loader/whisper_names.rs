//! The canonical tensor names of the WhisperStyle family (Hugging Face's),
//! shared by the loader's family requirements, the eager forward and the graph
//! writer. Linear layers and norms are named by prefix (`.weight`, `.bias`).

/// The Slaney mel filter bank `[n_mels, 201]`.
pub const MEL_FILTERS: &str = "model.mel_filters";
/// The encoder's two convolutions (k3; stride 1, then 2).
pub const CONV: [&str; 2] = ["model.encoder.conv1", "model.encoder.conv2"];
/// The encoder's positional table `[n_audio_ctx, d]`.
pub const ENC_POSITIONS: &str = "model.encoder.embed_positions.weight";
/// The encoder's final LayerNorm.
pub const ENC_NORM: &str = "model.encoder.layer_norm";
/// The decoder's token embedding `[vocab, d]` (also the tied output projection).
pub const DEC_EMBED: &str = "model.decoder.embed_tokens.weight";
/// The decoder's positional table `[n_text_ctx, d]`.
pub const DEC_POSITIONS: &str = "model.decoder.embed_positions.weight";
/// The decoder's final LayerNorm.
pub const DEC_NORM: &str = "model.decoder.layer_norm";
/// The untied output projection, when the file has one.
pub const PROJ_OUT: &str = "proj_out.weight";

/// The q, k, v and output projections of the attention block `block`.
pub fn attn_proj(block: &str) -> [String; 4] {
    ["q_proj", "k_proj", "v_proj", "out_proj"].map(|p| format!("{block}.{p}"))
}

/// The prefixes of one layer: self-attention (its norm and block) and the MLP
/// (its norm, fc1 and fc2); a decoder layer's cross-attention is [`cross`].
#[derive(Debug, Clone)]
pub struct LayerNames {
    /// Pre-attention LayerNorm.
    pub attn_norm: String,
    /// Self-attention block.
    pub attn: String,
    /// Pre-MLP LayerNorm.
    pub mlp_norm: String,
    /// The MLP's two linear layers.
    pub fc: [String; 2],
}

impl LayerNames {
    /// Encoder layer `i`.
    pub fn encoder(i: usize) -> LayerNames {
        Self::of(&format!("model.encoder.layers.{i}"))
    }

    /// Decoder layer `i`.
    pub fn decoder(i: usize) -> LayerNames {
        Self::of(&decoder_layer(i))
    }

    fn of(p: &str) -> LayerNames {
        LayerNames {
            attn_norm: format!("{p}.self_attn_layer_norm"),
            attn: format!("{p}.self_attn"),
            mlp_norm: format!("{p}.final_layer_norm"),
            fc: [format!("{p}.fc1"), format!("{p}.fc2")],
        }
    }
}

fn decoder_layer(i: usize) -> String {
    format!("model.decoder.layers.{i}")
}

/// Decoder layer `i`'s pre-cross-attention LayerNorm and cross-attention block.
pub fn cross(i: usize) -> [String; 2] {
    let p = decoder_layer(i);
    [
        format!("{p}.encoder_attn_layer_norm"),
        format!("{p}.encoder_attn"),
    ]
}
