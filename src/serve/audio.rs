//! `POST /v1/audio/transcriptions` and `/v1/audio/translations`: a multipart
//! upload (`file`, `model`, `language`, `response_format`, `temperature`)
//! decoded in memory and transcribed with the rules of `cyb-llm transcribe`,
//! answered as json, text, srt, vtt or verbose_json.

use super::error::ApiError;
use super::models::{wrong_kind, Kind};
use super::App;
use crate::transcribe::format::{render, Format};
use crate::transcribe::{TranscribeOptions, Transcript};
use axum::extract::multipart::{Multipart, MultipartError};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// The form of one request.
#[derive(Default)]
struct Form {
    file: Option<(String, Vec<u8>)>,
    model: Option<String>,
    language: Option<String>,
    prompt: Option<String>,
    response_format: Option<String>,
    temperature: Option<String>,
    granularities: Vec<String>,
}

fn form_error(e: MultipartError, limit: usize) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(limit, "--max-audio-bytes")
    } else {
        ApiError::bad_request(
            None,
            format!(
                "the request is not a valid multipart form: {}",
                e.body_text()
            ),
        )
    }
}

async fn read_form(mut multipart: Multipart, limit: usize) -> Result<Form, ApiError> {
    let mut form = Form::default();
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| form_error(e, limit))?
    {
        let name = field.name().unwrap_or("").to_string();
        if name == "file" {
            let file_name = field.file_name().unwrap_or("upload").to_string();
            let bytes = field.bytes().await.map_err(|e| form_error(e, limit))?;
            form.file = Some((file_name, bytes.to_vec()));
            continue;
        }
        let text = field.text().await.map_err(|e| form_error(e, limit))?;
        match name.as_str() {
            "model" => form.model = Some(text),
            "language" => form.language = Some(text),
            "prompt" => form.prompt = Some(text),
            "response_format" => form.response_format = Some(text),
            "temperature" => form.temperature = Some(text),
            "timestamp_granularities[]" | "timestamp_granularities" => {
                form.granularities.push(text)
            }
            _ => {}
        }
    }
    Ok(form)
}

/// OpenAI's response formats.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    Json,
    Text,
    Srt,
    Vtt,
    VerboseJson,
}

/// `POST /v1/audio/transcriptions` (`translate` false) and `/v1/audio/translations`.
pub async fn transcribe(
    app: Arc<App>,
    multipart: Multipart,
    translate: bool,
) -> Result<Response, ApiError> {
    let form = read_form(multipart, app.limits.max_audio_bytes).await?;
    let model_id = form
        .model
        .ok_or_else(|| ApiError::bad_request(Some("model"), "the form has no `model` field"))?;
    let served = app.registry()?.get(&model_id)?;
    let Kind::Speech(model) = &served.kind else {
        return Err(wrong_kind(served, "transcriptions"));
    };
    let (file_name, bytes) = form
        .file
        .ok_or_else(|| ApiError::bad_request(Some("file"), "the form has no `file` field"))?;
    let answer = match form.response_format.as_deref().unwrap_or("json") {
        "json" => Answer::Json,
        "text" => Answer::Text,
        "srt" => Answer::Srt,
        "vtt" => Answer::Vtt,
        "verbose_json" => Answer::VerboseJson,
        other => {
            return Err(ApiError::bad_request(
                Some("response_format"),
                format!("`{other}` is not a response format: json, text, srt, vtt or verbose_json"),
            ))
        }
    };
    if form.prompt.as_deref().is_some_and(|p| !p.is_empty()) {
        return Err(ApiError::bad_request(
            Some("prompt"),
            "an initial prompt is not supported yet",
        ));
    }
    if let Some(g) = form.granularities.iter().find(|g| g.as_str() != "segment") {
        return Err(ApiError::bad_request(
            Some("timestamp_granularities"),
            format!("`{g}` timestamps are not supported (segment only)"),
        ));
    }
    let mut opts = TranscribeOptions {
        language: form.language.filter(|l| !l.is_empty() && l != "auto"),
        translate,
        ..TranscribeOptions::default()
    };
    if let Some(t) = &form.temperature {
        let t: f32 = t
            .trim()
            .parse()
            .ok()
            .filter(|t: &f32| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| {
                ApiError::bad_request(
                    Some("temperature"),
                    format!("`{t}` is not a temperature (a number >= 0)"),
                )
            })?;
        if t > 0.0 {
            // Fallback goes on from the given temperature, as Whisper's does.
            let mut ts: Vec<f32> = opts
                .temperatures
                .iter()
                .copied()
                .filter(|&x| x > t)
                .collect();
            ts.insert(0, t);
            opts.temperatures = ts;
        }
    }
    let model = model.clone();
    let name = PathBuf::from(&file_name);
    let transcript = tokio::task::spawn_blocking(move || -> Result<Transcript, ApiError> {
        let samples = crate::audio::bytes_16k(bytes, &name)
            .map_err(|e| ApiError::bad_request(Some("file"), e.to_string()))?;
        model
            .transcribe(&samples, &opts)
            .map_err(|e| ApiError::internal(format!("the runtime failed on this request: {e}")))
    })
    .await
    .map_err(|e| ApiError::internal(format!("the transcription thread failed: {e}")))??;
    let text = transcript.text().trim().to_string();
    let plain = |body: String| {
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
    };
    Ok(match answer {
        Answer::Json => Json(json!({"text": text})).into_response(),
        Answer::Text => plain(format!("{text}\n")),
        Answer::Srt => plain(render(&transcript, Format::Srt, &file_name)),
        Answer::Vtt => plain(render(&transcript, Format::Vtt, &file_name)),
        Answer::VerboseJson => Json(verbose(&transcript, &text, translate)).into_response(),
    })
}

/// OpenAI's `verbose_json`: task, language, duration, text and segments.
fn verbose(t: &Transcript, text: &str, translate: bool) -> Value {
    let segments: Vec<Value> = t
        .segments
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "id": i,
                "seek": (s.start * 100.0).round() as u64,
                "start": s.start,
                "end": s.end,
                "text": s.text,
                "tokens": s.tokens,
                "temperature": s.temperature,
                "avg_logprob": s.avg_logprob,
                "compression_ratio": s.compression_ratio,
                "no_speech_prob": s.no_speech_prob,
            })
        })
        .collect();
    json!({
        "task": if translate { "translate" } else { "transcribe" },
        "language": t.language,
        "duration": t.duration,
        "text": text,
        "segments": segments,
    })
}
