//! cyb-llm: runs self-contained `.model` files.
//!
//! Layers, each a module: [`loader`] (mmap, parse and validate a `.model` file),
//! [`import`] (write `.model` files from GGUF / Hugging Face sources),
//! [`tokenizer`], [`quant`] (weight encodings), [`backend`] (the `Backend`
//! trait, dispatcher and backends), [`curated`] (hand-written model families),
//! [`ir`] (the graph IR: text form, op table, validation), [`graph`] (the
//! graph writers and executor), [`speak`] (the text-to-speech frontend).

pub mod audio;
pub mod backend;
pub mod bench;
pub mod curated;
pub mod diffusion;
pub mod dtype;
pub mod encode;
pub mod error;
pub mod generate;
pub mod graph;
pub mod import;
pub mod ir;
pub mod loader;
pub mod path;
pub mod perplexity;
pub mod quant;
pub mod serve;
pub mod speak;
pub mod tokenizer;
pub mod transcribe;

pub use dtype::DType;
pub use error::{ExecutionError, ImportError, LoadError};
pub use loader::{load, Model};
