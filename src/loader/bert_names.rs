//! The canonical tensor names of the BertStyle family's layers (BERT / RoBERTa
//! and DistilBERT spell them differently), shared by the loader's family
//! requirements, the curated encoder and the graph writer.

/// The BertStyle variant: the position-id convention the checkpoint was trained
/// with and the spelling of its tensor names ([`layer_names`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `bert` (MiniLM, bge, e5, gte): positions `0..len`.
    Bert,
    /// `roberta` / `xlm-roberta`: positions start at `padding_idx + 1`.
    Roberta,
    /// `distilbert`: positions `0..len`, no token types, its own tensor names
    /// (`transformer.layer.N.attention.q_lin`, `sa_layer_norm`, `ffn.lin1`, ...).
    DistilBert,
}

impl Variant {
    /// The variant of a BertStyle `model_type`, `None` for any other type.
    pub fn for_model_type(model_type: &str) -> Option<Variant> {
        match model_type {
            "bert" => Some(Variant::Bert),
            "roberta" | "xlm-roberta" => Some(Variant::Roberta),
            "distilbert" => Some(Variant::DistilBert),
            _ => None,
        }
    }
}

/// Per-layer tensor names (without `.weight` / `.bias`) of `variant`: the layer
/// stack prefix (`{stack}.{i}.{name}`), then query, key, value, attention output,
/// attention norm, MLP in, MLP out and MLP norm.
pub fn layer_names(variant: Variant) -> (&'static str, [&'static str; 8]) {
    match variant {
        Variant::DistilBert => (
            "transformer.layer",
            [
                "attention.q_lin",
                "attention.k_lin",
                "attention.v_lin",
                "attention.out_lin",
                "sa_layer_norm",
                "ffn.lin1",
                "ffn.lin2",
                "output_layer_norm",
            ],
        ),
        Variant::Bert | Variant::Roberta => (
            "encoder.layer",
            [
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
                "attention.output.LayerNorm",
                "intermediate.dense",
                "output.dense",
                "output.LayerNorm",
            ],
        ),
    }
}

/// The word embedding table `[vocab, hidden]`.
pub const WORD_EMBEDDINGS: &str = "embeddings.word_embeddings.weight";
/// The position embedding table `[max_positions, hidden]`.
pub const POSITION_EMBEDDINGS: &str = "embeddings.position_embeddings.weight";
/// The optional token-type table `[type_vocab, hidden]` (not in DistilBERT).
pub const TOKEN_TYPE_EMBEDDINGS: &str = "embeddings.token_type_embeddings.weight";
/// The embeddings' LayerNorm (`.weight`, `.bias`).
pub const EMBED_NORM: &str = "embeddings.LayerNorm";
