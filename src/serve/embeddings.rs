//! `POST /v1/embeddings`: the texts tokenized and embedded in batches with the
//! model's own pooling and normalization (as `cyb-llm embed` does), returned
//! as floats or as base64 of little-endian f32.

use super::api::{self, EmbeddingInput, EmbeddingRequest};
use super::error::ApiError;
use super::models::{wrong_kind, Kind};
use super::App;
use crate::encode::EmbedOptions;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use serde_json::{json, Value};
use std::sync::Arc;

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Array(a) if a.iter().all(Value::is_number) => "a list of numbers",
        Value::Array(_) => "a list of mixed values",
        Value::Number(_) => "a number",
        Value::Object(_) => "an object",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        Value::String(_) => "a text",
    }
}

/// `POST /v1/embeddings`.
pub async fn embeddings(app: Arc<App>, body: &[u8]) -> Result<Response, ApiError> {
    let req: EmbeddingRequest = api::parse(body)?;
    let served = app.registry()?.get(&req.model)?;
    let Kind::Embeddings(encoder) = &served.kind else {
        return Err(wrong_kind(served, "embeddings"));
    };
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                Some("encoding_format"),
                format!("`{other}` is not an encoding format: use float or base64"),
            ))
        }
    };
    let texts = match req.input {
        EmbeddingInput::Text(t) => vec![t],
        EmbeddingInput::Texts(v) if v.is_empty() => {
            return Err(ApiError::bad_request(
                Some("input"),
                "the input list is empty",
            ))
        }
        EmbeddingInput::Texts(v) => v,
        EmbeddingInput::Other(v) => {
            return Err(ApiError::bad_request(
                Some("input"),
                format!(
                    "input must be a text or a list of texts (token ids are not supported), not {}",
                    json_kind(&v)
                ),
            ))
        }
    };
    let encoder = encoder.clone();
    let dimensions = req.dimensions;
    let (vectors, tokens) = tokio::task::spawn_blocking(move || {
        let mut enc = encoder.lock().unwrap_or_else(|p| p.into_inner());
        let hidden = enc.bert().config.hidden;
        if let Some(d) = dimensions.filter(|&d| d != hidden as u64) {
            return Err(ApiError::bad_request(
                Some("dimensions"),
                format!("this model's embeddings have {hidden} dimensions ({d} asked); omit `dimensions`"),
            ));
        }
        let tokens = enc
            .tokenize(&texts)
            .map_err(|e| ApiError::bad_request(Some("input"), e.to_string()))?
            .tokens;
        let opts = EmbedOptions::defaults(enc.bert());
        let vectors = enc
            .embed_tokens(&tokens, &opts, &mut |_| {})
            .map_err(|e| ApiError::internal(format!("the runtime failed on this request: {e}")))?;
        Ok((vectors, tokens.iter().map(Vec::len).sum::<usize>()))
    })
    .await
    .map_err(|e| ApiError::internal(format!("the embedding thread failed: {e}")))??;
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::from(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": req.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response())
}
