//! The graph path of transcription (`--path graph`): the encoder and decoder of
//! the model's graph section ([`crate::graph::whisper`]) on the executor, driven
//! by the same decoding rules as the curated family (`Whisper::transcribe_on`).
//! Each decoding sequence (a beam, a sample) is one [`GraphSession`]; the
//! encoder of a window runs once, in a session of its own.

use crate::backend::{ExecContext, Tensor};
use crate::curated::whisper::decode::{DecodeCache, WhisperForward};
use crate::curated::whisper::words::AlignCapture;
use crate::error::ExecutionError;
use crate::graph::{whisper as wg, GraphModel, GraphSession};
use std::sync::Arc;

/// The graph section of a WhisperStyle model as the decoding rules' forward.
pub(crate) struct GraphForward {
    graph: Arc<GraphModel>,
    n_mels: usize,
    n_text_ctx: usize,
}

impl GraphForward {
    /// `graph` bound for a model of `n_mels` mel bins and `n_text_ctx` decoder positions.
    pub(crate) fn new(graph: Arc<GraphModel>, n_mels: usize, n_text_ctx: usize) -> GraphForward {
        GraphForward {
            graph,
            n_mels,
            n_text_ctx,
        }
    }
}

/// Why word timestamps do not run on the graph path.
pub(crate) fn no_word_timestamps() -> ExecutionError {
    ExecutionError::InvalidConfig {
        field: "word_timestamps".into(),
        reason: "word timestamps need the alignment heads' cross-attention scores, which the \
                 graph section does not output; use --path curated (or auto)"
            .into(),
    }
}

impl DecodeCache for GraphSession {
    fn positions(&self) -> usize {
        self.position()
    }

    fn truncate(&mut self, len: usize) {
        GraphSession::truncate(self, len);
    }
}

/// Runs `f` on `session` with the caller's execution context (its dispatch log).
fn with_ctx<T>(
    session: &mut GraphSession,
    ctx: &mut ExecContext,
    f: impl FnOnce(&mut GraphSession) -> Result<T, ExecutionError>,
) -> Result<T, ExecutionError> {
    std::mem::swap(session.context_mut(), ctx);
    let out = f(session);
    std::mem::swap(session.context_mut(), ctx);
    out
}

impl WhisperForward for GraphForward {
    type Encoded = Vec<(String, Tensor)>;
    type Cache = GraphSession;

    fn encode(&self, mel: &[f32], ctx: &mut ExecContext) -> Result<Self::Encoded, ExecutionError> {
        let mut session = self.graph.session()?;
        with_ctx(&mut session, ctx, |s| {
            wg::encode(s, mel.to_vec(), self.n_mels)
        })
    }

    fn new_cache(&self) -> Result<GraphSession, ExecutionError> {
        self.graph.session()
    }

    fn decode_steps(
        &self,
        enc: &Self::Encoded,
        caches: &mut [GraphSession],
        tokens: &[u32],
        want: &[usize],
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        let (n, groups) = (tokens.len(), caches.len());
        if groups == 0 || n % groups != 0 {
            return Err(ExecutionError::ShapeMismatch {
                op: "whisper decoder tokens per sequence".into(),
                expected: vec![groups, n / groups.max(1)],
                got: vec![n],
            });
        }
        let s = n / groups;
        if let Some(over) = caches.iter().find(|k| k.position() + s > self.n_text_ctx) {
            return Err(ExecutionError::ContextOverflow {
                max: self.n_text_ctx,
                requested: over.position() + s,
            });
        }
        let mut rows = Vec::with_capacity(n);
        for (cache, part) in caches.iter_mut().zip(tokens.chunks(s.max(1))) {
            rows.extend(with_ctx(cache, ctx, |c| wg::decode_step(c, enc, part))?);
        }
        want.iter()
            .map(|&r| {
                rows.get(r).cloned().ok_or(ExecutionError::IndexOutOfRange {
                    op: "whisper logits row".into(),
                    index: r as i64,
                    len: n,
                })
            })
            .collect()
    }

    fn copy_cache(
        &self,
        src: &GraphSession,
        dst: &mut GraphSession,
        _ctx: &mut ExecContext,
    ) -> Result<(), ExecutionError> {
        dst.copy_from(src)
    }

    fn align(
        &self,
        _enc: &Self::Encoded,
        _tokens: &[u32],
        _want: &[usize],
        _capture: &mut AlignCapture,
        _ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        Err(no_word_timestamps())
    }
}
