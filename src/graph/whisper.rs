//! The graph writer of the WhisperStyle family: encoder and decoder in one
//! `graph` section, generated from the same [`WhisperConfig`] the curated
//! family reads.
//!
//! - Encoder, from input `mel` `[n_mels, 2 n_audio_ctx]`: `Conv1d` (k3 s1 p1),
//!   `Gelu`, `Conv1d` (k3 s2 p1), `Gelu`, `Permute` to `[n_audio_ctx, d]`,
//!   `Add` of the positional table's rows (an `Embed` of input
//!   `audio_positions` = `0..n_audio_ctx`, which decodes the stored encoding), pre-norm layers (`LayerNorm`, attention without mask,
//!   `LayerNorm`, GELU MLP), the final `LayerNorm`, and per decoder layer the
//!   cross-attention keys and values, outputs `cross_k.{i}` / `cross_v.{i}`
//!   `[n_audio_ctx, H, dh]`.
//! - Decoder, from `tokens` and `positions` (absolute, `[S]`): token and
//!   position `Embed`s, pre-norm layers with causal self-attention over the
//!   KV state `kv.{i}` and cross-attention on `cross_k.{i}` / `cross_v.{i}`,
//!   the final `LayerNorm` and the tied projection: output `logits` `[S, vocab]`.
//!
//! One window is two calls of [`super::GraphSession::run_values`]: the cross
//! values from `mel` ([`encode`]), then per decoding step `logits` from the
//! tokens with those values given ([`decode_step`]), so the encoder runs once
//! per window as in the curated family.

use super::exec::GraphSession;
use crate::backend::{Op, Tensor};
use crate::curated::sink::record::{input, Builder};
use crate::curated::whisper::WhisperConfig;
use crate::error::ExecutionError;
use crate::ir::{GraphDoc, GraphOp, MaskKind, StateDecl};
use crate::loader::whisper_names::{self as wn, LayerNames};
use crate::loader::Config;

fn fixed(op: Op) -> GraphOp {
    GraphOp::Fixed(op)
}

/// `x W^T (+ b)`: the bias only when the file has it (Whisper's k projections have none).
fn linear(b: &mut Builder, has: &dyn Fn(&str) -> bool, x: &str, p: &str, name: &str) -> String {
    let y = b.op1(fixed(Op::Matmul), &[x, &format!("{p}.weight")], name);
    let bias = format!("{p}.bias");
    if has(&bias) {
        b.op1(fixed(Op::Add), &[&y, &bias], name)
    } else {
        y
    }
}

/// Attention projections `q`/`k`/`v` of `p` reshaped to heads.
fn heads(
    b: &mut Builder,
    has: &dyn Fn(&str) -> bool,
    x: &str,
    proj: &str,
    shape: &[i64],
    name: &str,
) -> String {
    let y = linear(b, has, x, proj, name);
    b.op1(GraphOp::Reshape(shape.to_vec()), &[&y], name)
}

/// `x + out_proj(Sdpa(q, k, v))` with `mask`, heads merged back to width `d`.
fn attend(
    b: &mut Builder,
    has: &dyn Fn(&str) -> bool,
    x: &str,
    [q, k, v]: [&str; 3],
    mask: MaskKind,
    out_proj: &str,
    d: i64,
) -> String {
    let sdpa = GraphOp::Sdpa { scale: None, mask };
    let a = b.op1(sdpa, &[q, k, v], "attn");
    let a = b.op1(GraphOp::Reshape(vec![-1, d]), &[&a], "attn");
    let o = linear(b, has, &a, out_proj, "attn_out");
    b.op1(fixed(Op::Add), &[x, &o], "x")
}

/// The residual MLP block of layer `n`: `x + fc2(gelu(fc1(LN(x))))`.
fn mlp(b: &mut Builder, has: &dyn Fn(&str) -> bool, x: &str, n: &LayerNames, eps: f32) -> String {
    let h = b.layer_norm(x, &n.mlp_norm, eps, "mlp_in");
    let f = linear(b, has, &h, &n.fc[0], "mlp");
    let f = b.op1(fixed(Op::Gelu), &[&f], "mlp");
    let f = linear(b, has, &f, &n.fc[1], "mlp_out");
    b.op1(fixed(Op::Add), &[x, &f], "x")
}

/// The graph of a WhisperStyle model with `config`; `has` tells which
/// optional tensors (biases, `proj_out.weight`) the file holds.
pub fn whisper_graph(
    config: &Config,
    has: &dyn Fn(&str) -> bool,
) -> Result<GraphDoc, ExecutionError> {
    let c = WhisperConfig::from_config(config)?;
    let d = c.d_model as i64;
    let mut b = Builder::new();
    let mut x = "mel".to_string();
    for (stride, (conv, name)) in [1, 2]
        .into_iter()
        .zip(wn::CONV.iter().zip(["conv1", "conv2"]))
    {
        let op = fixed(Op::Conv1d { stride, padding: 1 });
        let (w, bias) = (format!("{conv}.weight"), format!("{conv}.bias"));
        x = b.op1(op, &[&x, &w, &bias], name);
        x = b.op1(fixed(Op::Gelu), &[&x], name);
    }
    let x = b.op1(fixed(Op::Permute(vec![1, 0])), &[&x], "conv2");
    let pos = b.op1(
        fixed(Op::Embed),
        &["audio_positions", wn::ENC_POSITIONS],
        "audio_pos",
    );
    let mut x = b.op1(fixed(Op::Add), &[&x, &pos], "x");
    let eh = c.encoder_heads as i64;
    for i in 0..c.encoder_layers {
        let names = LayerNames::encoder(i);
        let n = b.layer_norm(&x, &names.attn_norm, c.eps, "attn_in");
        let shape = [-1, eh, d / eh];
        let [qp, kp, vp, out] = wn::attn_proj(&names.attn);
        let [q, k, v] = [(qp, "q"), (kp, "k"), (vp, "v")]
            .map(|(proj, t)| heads(&mut b, has, &n, &proj, &shape, t));
        x = attend(&mut b, has, &x, [&q, &k, &v], MaskKind::None, &out, d);
        x = mlp(&mut b, has, &x, &names, c.eps);
    }
    let audio = b.layer_norm(&x, wn::ENC_NORM, c.eps, "audio");
    let dh_n = c.decoder_heads as i64;
    let dshape = [-1, dh_n, d / dh_n];
    let mut outputs = vec!["logits".to_string()];
    for i in 0..c.decoder_layers {
        let [_, ck, cv, _] = wn::attn_proj(&wn::cross(i)[1]);
        for (proj, t) in [(ck, "k"), (cv, "v")] {
            let y = linear(&mut b, has, &audio, &proj, "cross");
            let name = format!("cross_{t}.{i}");
            b.node(GraphOp::Reshape(dshape.to_vec()), &[&y], &[&name]);
            outputs.push(name);
        }
    }
    let e = b.op1(fixed(Op::Embed), &["tokens", wn::DEC_EMBED], "embed");
    let pe = b.op1(fixed(Op::Embed), &["positions", wn::DEC_POSITIONS], "embed");
    let mut y = b.op1(fixed(Op::Add), &[&e, &pe], "y");
    let mut state = Vec::with_capacity(c.decoder_layers);
    for i in 0..c.decoder_layers {
        let names = LayerNames::decoder(i);
        let n = b.layer_norm(&y, &names.attn_norm, c.eps, "attn_in");
        let [qp, kp, vp, out] = wn::attn_proj(&names.attn);
        let [q, k, v] = [(qp, "q"), (kp, "k"), (vp, "v")]
            .map(|(proj, t)| heads(&mut b, has, &n, &proj, &dshape, t));
        let st = format!("kv.{i}");
        state.push(StateDecl {
            name: st.clone(),
            kind: "kv_cache".into(),
            layer: i,
            kv_heads: c.decoder_heads,
            head_dim: c.d_model / c.decoder_heads,
        });
        let (ka, va) = (format!("l{i}.K"), format!("l{i}.V"));
        b.node(GraphOp::KvAppend, &[&st, &k, &v], &[&ka, &va]);
        y = attend(&mut b, has, &y, [&q, &ka, &va], MaskKind::Causal, &out, d);
        let [cross_norm, cross] = wn::cross(i);
        let n = b.layer_norm(&y, &cross_norm, c.eps, "cross_in");
        let [qp, _, _, out] = wn::attn_proj(&cross);
        let q = heads(&mut b, has, &n, &qp, &dshape, "q");
        let (ck, cv) = (format!("cross_k.{i}"), format!("cross_v.{i}"));
        y = attend(&mut b, has, &y, [&q, &ck, &cv], MaskKind::None, &out, d);
        y = mlp(&mut b, has, &y, &names, c.eps);
    }
    let y = b.layer_norm(&y, wn::DEC_NORM, c.eps, "out_norm");
    let head = if has(wn::PROJ_OUT) {
        wn::PROJ_OUT
    } else {
        wn::DEC_EMBED
    };
    b.node(fixed(Op::Matmul), &[&y, head], &["logits"]);
    Ok(GraphDoc {
        version: 1,
        inputs: vec![
            input("mel", "f32", &[c.n_mels as i64, 2 * c.n_audio_ctx as i64]),
            input("audio_positions", "i32", &[c.n_audio_ctx as i64]),
            input("tokens", "i32", &[-1]),
            input("positions", "i32", &[-1]),
        ],
        outputs,
        state,
        nodes: b.nodes,
    })
}

/// The names of the cross-attention values, `cross_k.{i}` and `cross_v.{i}` per layer.
fn cross_names(session: &GraphSession) -> Vec<String> {
    let g = session.model().graph();
    g.outputs
        .iter()
        .map(|&o| g.values[o].name.clone())
        .filter(|n| n.starts_with("cross_"))
        .collect()
}

/// The encoder of one window: `mel` `[n_mels, frames]` row-major in, the
/// cross-attention values out (by name, to give to [`decode_step`]). Resets
/// the session's self-attention state.
pub fn encode(
    session: &mut GraphSession,
    mel: Vec<f32>,
    n_mels: usize,
) -> Result<Vec<(String, Tensor)>, ExecutionError> {
    session.reset();
    let frames = mel.len() / n_mels.max(1);
    let mel = Tensor::from_f32(&[n_mels, frames], mel)?;
    let audio_ctx = frames / 2;
    let positions = Tensor::from_i32(&[audio_ctx], (0..audio_ctx as i32).collect())?;
    let names = cross_names(session);
    let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
    let given = [("mel", mel), ("audio_positions", positions)];
    let values = session.run_values(&given, &wanted, 0)?;
    Ok(names.into_iter().zip(values).collect())
}

/// Feeds `tokens` at the session's position with the window's cross values
/// and returns the logits of every token, `[S][vocab]`.
pub fn decode_step(
    session: &mut GraphSession,
    cross: &[(String, Tensor)],
    tokens: &[u32],
) -> Result<Vec<Vec<f32>>, ExecutionError> {
    let s = tokens.len();
    let pos = session.position();
    let ids = Tensor::from_i32(&[s], tokens.iter().map(|&t| t as i32).collect())?;
    let positions = Tensor::from_i32(&[s], (pos..pos + s).map(|p| p as i32).collect())?;
    let mut given: Vec<(&str, Tensor)> = vec![("tokens", ids), ("positions", positions)];
    given.extend(cross.iter().map(|(n, t)| (n.as_str(), t.clone())));
    let out = session.run_values(&given, &["logits"], s)?;
    let logits = &out[0];
    let values = session
        .model()
        .dispatcher()
        .primary()
        .try_download_f32(logits)?;
    let v = logits.shape().last().copied().unwrap_or(1).max(1);
    Ok(values.chunks(v).map(<[f32]>::to_vec).collect())
}
