//! The graph path of transcription (`--path graph`): the encoder and decoder of
//! the model's graph section ([`crate::graph::whisper`]) on the executor, driven
//! by the same decoding rules as the curated family (`Whisper::transcribe_on`).
//! Each decoding sequence (a beam, a sample) is one [`GraphSession`]; the
//! encoder of a window runs once, in a session of its own. Word timestamps
//! take the alignment heads' scores from the queries of the graph's
//! cross-attention, asked of the executor by name.

use crate::backend::{ExecContext, Tensor};
use crate::curated::whisper::decode::{rows_per_sequence, DecodeCache, WhisperForward};
use crate::curated::whisper::words::AlignCapture;
use crate::error::ExecutionError;
use crate::graph::{whisper as wg, GraphModel, GraphSession};
use crate::ir::GraphOp;
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
        let n = tokens.len();
        let pos: Vec<usize> = caches.iter().map(GraphSession::position).collect();
        let s = rows_per_sequence(n, &pos, self.n_text_ctx)?;
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

    /// The graph's logits plus, per decoder layer, the queries of its
    /// cross-attention (the first input of the `Sdpa` reading `cross_k.{i}`),
    /// asked of one run from an empty session.
    fn align(
        &self,
        enc: &Self::Encoded,
        tokens: &[u32],
        want: &[usize],
        capture: &mut AlignCapture,
        ctx: &mut ExecContext,
    ) -> Result<Vec<Vec<f32>>, ExecutionError> {
        let g = self.graph.graph();
        let named = |v: usize| g.values[v].name.as_str();
        let mut layers = Vec::new();
        for (key, k) in enc {
            let Some(i) = key
                .strip_prefix("cross_k.")
                .and_then(|l| l.parse::<usize>().ok())
            else {
                continue;
            };
            let node = g.nodes.iter().find(|n| {
                matches!(n.op, GraphOp::Sdpa { .. })
                    && n.inputs.get(1).map(|&v| named(v)) == Some(key.as_str())
            });
            let q = node.and_then(|n| n.inputs.first()).ok_or_else(|| {
                ExecutionError::MissingTensor {
                    name: format!("the cross-attention queries of {key}"),
                    required_by: "word timestamps (graph path)".into(),
                }
            })?;
            layers.push((i, named(*q).to_string(), k.clone()));
        }
        let n = tokens.len();
        let ids = Tensor::from_i32(&[n], tokens.iter().map(|&t| t as i32).collect())?;
        let positions = Tensor::from_i32(&[n], (0..n as i32).collect())?;
        let mut given: Vec<(&str, Tensor)> = vec![("tokens", ids), ("positions", positions)];
        given.extend(enc.iter().map(|(name, t)| (name.as_str(), t.clone())));
        let mut wanted = vec!["logits"];
        wanted.extend(layers.iter().map(|(_, q, _)| q.as_str()));
        let mut session = self.graph.session()?;
        let out = with_ctx(&mut session, ctx, |s| s.run_values(&given, &wanted, n))?;
        let d = self.graph.dispatcher();
        for ((layer, _, k), q) in layers.iter().zip(&out[1..]) {
            if q.shape().len() != 3 || k.shape().len() != 3 {
                return Err(ExecutionError::ShapeMismatch {
                    op: format!("whisper graph cross-attention of layer {layer} (word timestamps)"),
                    expected: vec![n, 0, 0],
                    got: q.shape().to_vec(),
                });
            }
            capture.take(*layer, q, k, d)?;
        }
        let logits = d.primary().try_download_f32(&out[0])?;
        let v = out[0].shape().last().copied().unwrap_or(1).max(1);
        let rows: Vec<&[f32]> = logits.chunks(v).collect();
        want.iter()
            .map(|&r| {
                rows.get(r)
                    .map(|row| row.to_vec())
                    .ok_or(ExecutionError::IndexOutOfRange {
                        op: "whisper logits row".into(),
                        index: r as i64,
                        len: n,
                    })
            })
            .collect()
    }
}
