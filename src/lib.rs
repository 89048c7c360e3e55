//! cyb-llm: runs self-contained `.model` files.
//!
//! Layers, each a module: [`loader`] (mmap, parse and validate a `.model` file),
//! [`import`] (write `.model` files from GGUF / Hugging Face / CTranslate2 /
//! ONNX sources), [`tokenizer`], [`quant`] (weight encodings), [`backend`] (the
//! `Op` enum, the `Backend` trait, dispatcher and backends), [`curated`]
//! (hand-written model families), [`ir`] (the graph IR: text form, op table,
//! validation), [`graph`] (the graph writers and executor), [`path`] (the
//! curated-or-graph switch), then the tasks on top: [`generate`], [`encode`],
//! [`transcribe`], [`bench`](mod@bench), [`perplexity`], [`diffusion`], [`speak`], [`serve`].
//!
//! Every task with both paths binds its model through [`path::Engine::bind`]:
//! `--path` and the backend's [`backend::Capabilities`] pick the curated family
//! or the graph section, on the task's one [`backend::Dispatcher`].
//!
//! Where new work goes:
//! - a family: its registry row (model types, task) and required tensors in
//!   `loader::family`, its forward written once in [`curated`] against the
//!   builder interface (run eagerly, recorded as the graph section and listed in
//!   [`graph::graph_for`]), its task API binding it through [`path::Engine`];
//! - an op: a [`backend::Op`] variant with its reference math, each backend's
//!   kernel (or `supports` saying no: the dispatcher falls back), and the IR op
//!   table [`ir::ops`] when graphs use it;
//! - a backend: a module in [`backend`] implementing [`backend::Backend`] and a
//!   row of [`backend::BACKENDS`] with its fallbacks and capabilities; code
//!   outside `backend` and `cli` asks the capabilities, never the name.

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
mod host_memory;
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
pub use loader::{load, load_with, Model, WeightPages};
