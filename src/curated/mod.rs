//! Curated, hand-written forward code per model family (families.md).
//!
//! - [`llama`]: LlamaStyle, decoder-only text generation (llama, mistral,
//!   qwen2/3, gemma/2/3, phi3, granite, olmo2, smollm).
//! - [`bert`]: BertStyle, encoders for embeddings and classification (bert,
//!   roberta, xlm-roberta).
//!
//! Each family is written against the [`Dispatcher`](crate::backend::Dispatcher)
//! so the same code runs on every backend.

pub mod bert;
mod linear;
pub mod llama;
pub(crate) mod sink;
mod weights;
pub mod whisper;

use linear::Linear;
use weights::WeightBinder;
