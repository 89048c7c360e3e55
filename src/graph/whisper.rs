//! Running the WhisperStyle graph section (recorded by
//! [`crate::curated::whisper::whisper_graph`]) on the executor: one window is
//! two calls of [`GraphSession::run_values`], the cross values from `mel`
//! ([`encode`]), then per decoding step `logits` from the tokens with those
//! values given ([`decode_step`]), so the encoder runs once per window as on
//! the eager path.

use super::exec::GraphSession;
use crate::backend::Tensor;
use crate::error::ExecutionError;

/// The names of the cross-attention values, `cross_k.{i}` and `cross_v.{i}` per layer.
fn cross_names(session: &GraphSession) -> Vec<String> {
    let mut names = session.model().graph().output_names();
    names.retain(|n| n.starts_with("cross_"));
    names
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
