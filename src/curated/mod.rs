//! Curated, hand-written forward code per model family (families.md).
//!
//! - [`llama`]: LlamaStyle, decoder-only text generation (llama, mistral,
//!   qwen2/3, gemma/2/3, phi3, granite, olmo2, smollm).
//! - [`bert`]: BertStyle, encoders for embeddings and classification (bert,
//!   roberta, xlm-roberta, distilbert).
//! - [`whisper`]: WhisperStyle, speech recognition.
//!
//! Each family is written once, in its `forward.rs`, against
//! the builder interface of `sink`: run eagerly on the
//! [`Dispatcher`](crate::backend::Dispatcher) (every backend, with the hand
//! fusions) and recorded as the model's `graph` section (their `graph.rs`).
//! A new family adds its registry row in `loader/family.rs`, its tensor names
//! in `loader/<family>_names.rs`, and here a folder with `config.rs`,
//! `forward.rs` (bind + forward against `Sink`) and `graph.rs`; a fusion
//! the family needs becomes a `Sink` method implemented by both sinks.

pub mod bert;
mod linear;
pub mod llama;
pub(crate) mod sink;
mod weights;
pub mod whisper;

use linear::Linear;
use weights::WeightBinder;
