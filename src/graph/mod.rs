//! The graph path (`../shared/spec/graph.md`): the graph writers, the fusion
//! pass and the executor of the validated graph IR ([`crate::ir`]).
//!
//! - [`writers`]: the graph of a model of any family ([`graph_for`]), added at
//!   import and by `cyb-llm graph --emit`.
//! - [`bert`]: the BertStyle encoder call on the executor.
//! - [`whisper`]: the two calls that run a WhisperStyle graph (encoder, decoder step).
//! - [`fuse`]: the fusion pass.
//! - [`exec`]: the executor, one [`exec::GraphSession`] (KV cache) per conversation.
//! - [`text`]: [`text::TextEngine`] / [`text::TextCache`], the text
//!   generator's forward on either side of the switch ([`crate::path`]).
//!
//! A new op goes to [`crate::backend::Op`] (every backend, the reference
//! first) and to the IR's op table ([`crate::ir::ops`]); a new family's graph
//! is its one definition recorded (`crate::curated`) and is listed in
//! [`graph_for`].

pub mod bert;
mod bind;
pub mod exec;
pub mod fuse;
pub mod text;
pub mod whisper;
pub mod writers;

pub use exec::{GraphModel, GraphOptions, GraphSession, GraphTaskOptions, TextForward};
pub use writers::{emit_graph, graph_for, write_graph_section};
