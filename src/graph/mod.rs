//! The graph path (`../shared/spec/graph.md`): the graph writers, the fusion
//! pass and the executor of the validated graph IR ([`crate::ir`]).
//!
//! - [`llama`]: the graph writer of the LlamaStyle family (and [`llama::graph_for`],
//!   the writer of any family).
//! - [`bert`]: the BertStyle graph writer and the encoder call.
//! - [`whisper`]: the WhisperStyle graph writer (encoder and decoder) and its two calls.
//! - [`fuse`]: the fusion pass.
//! - [`exec`]: the executor, one [`exec::GraphSession`] (KV cache) per conversation.
//! - [`text`]: [`text::TextEngine`] / [`text::TextCache`], the text
//!   generator's forward on either side of the switch ([`crate::path`]).
//!
//! A new op goes to [`crate::backend::Op`] (every backend, the reference
//! first) and to the IR's op table ([`crate::ir::ops`]); a graph writer of a
//! new family goes next to [`llama`] and is listed in [`llama::graph_for`].

pub mod bert;
mod bind;
mod build;
pub mod exec;
pub mod fuse;
pub mod llama;
pub mod text;
pub mod whisper;

pub use exec::{GraphModel, GraphOptions, GraphSession, TextForward};
