//! `POST /v1/chat/completions` and `POST /v1/completions`: the request's
//! sampling checked, a slot taken, the generation run on a blocking thread
//! that sends each piece through a bounded channel (so a slow reader slows
//! the generation, and a reader that is gone stops it), answered whole or as
//! server-sent events ending with `data: [DONE]`.

use super::api::{self, ChatRequest, CompletionRequest, Content, PromptInput};
use super::error::ApiError;
use super::metrics::Metrics;
use super::models::{wrong_kind, Kind, Slot, TextSlots};
use super::App;
use crate::error::ExecutionError;
use crate::generate::{
    fresh_seed, Finish, GenerateOptions, Message, Prompt, Sampling, TextModel, Timings,
};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Pieces in flight between the generation and the response.
const CHANNEL: usize = 16;

/// What a generation sends its response.
enum GenEvent {
    /// Text now complete.
    Text(String),
    /// The end.
    Done(Outcome),
    /// It failed (or the server is stopping).
    Failed(ApiError),
}

struct Outcome {
    finish: Finish,
    prompt_tokens: usize,
    completion_tokens: usize,
    timings: Timings,
}

/// A checked generation request.
struct Job {
    prompt: Prompt,
    /// The prompt's token ids (rendered and tokenized), to pick the slot.
    ids: Vec<u32>,
    max_tokens: Option<usize>,
    sampling: Sampling,
    options: GenerateOptions,
    /// Start from an empty cache (raw prompts, `cache_prompt: false`).
    fresh: bool,
    stream: bool,
    include_usage: bool,
}

/// Which endpoint shapes the answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Chat,
    Completion,
}

/// `POST /v1/chat/completions`.
pub async fn chat(app: Arc<App>, body: &[u8]) -> Result<Response, ApiError> {
    let req: ChatRequest = api::parse(body)?;
    let slots = text_model(&app, &req.model)?;
    if req.tools.is_some() {
        return Err(ApiError::bad_request(
            Some("tools"),
            "tool calls are not supported by this server",
        ));
    }
    if let Some(f) = &req.response_format {
        if f.get("type").and_then(Value::as_str) != Some("text") {
            return Err(ApiError::bad_request(
                Some("response_format"),
                "only {\"type\": \"text\"} is supported",
            ));
        }
    }
    let messages = messages(&req.messages)?;
    if messages.is_empty() {
        return Err(ApiError::bad_request(
            Some("messages"),
            "the conversation is empty: send at least one message",
        ));
    }
    let prompt = Prompt::Chat(messages);
    let fresh = req.sampling.cache_prompt == Some(false);
    let job = job(slots.model(), prompt, &req.sampling, fresh, "messages")?;
    respond(app, slots, req.model, job, Shape::Chat).await
}

/// `POST /v1/completions`.
pub async fn completions(app: Arc<App>, body: &[u8]) -> Result<Response, ApiError> {
    let req: CompletionRequest = api::parse(body)?;
    let slots = text_model(&app, &req.model)?;
    if req.echo {
        return Err(ApiError::bad_request(Some("echo"), "echo is not supported"));
    }
    if req.suffix.is_some() {
        return Err(ApiError::bad_request(
            Some("suffix"),
            "suffix (fill in the middle) is not supported",
        ));
    }
    let prompt = match req.prompt {
        PromptInput::Text(t) => Prompt::Raw(t),
        PromptInput::Texts(mut v) if v.len() == 1 => Prompt::Raw(v.remove(0)),
        PromptInput::Texts(v) => {
            return Err(ApiError::bad_request(
                Some("prompt"),
                format!(
                    "one prompt per request ({} given); send them as separate requests",
                    v.len()
                ),
            ))
        }
        PromptInput::Tokens(ids) => {
            let vocab = slots.model().vocab();
            if let Some(bad) = ids.iter().find(|&&t| t as usize >= vocab) {
                return Err(ApiError::bad_request(
                    Some("prompt"),
                    format!("token id {bad} is outside the vocabulary (0..{vocab})"),
                ));
            }
            Prompt::Tokens(ids)
        }
    };
    // Raw prompts are appended to a conversation as is, so they start from an empty one.
    let job = job(slots.model(), prompt, &req.sampling, true, "prompt")?;
    respond(app, slots, req.model, job, Shape::Completion).await
}

fn text_model(app: &App, id: &str) -> Result<Arc<TextSlots>, ApiError> {
    let served = app.registry()?.get(id)?;
    match &served.kind {
        Kind::Text(s) => Ok(s.clone()),
        _ => Err(wrong_kind(served, "text generation")),
    }
}

fn messages(list: &[api::ChatMessage]) -> Result<Vec<Message>, ApiError> {
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let content = match &m.content {
                None => String::new(),
                Some(Content::Text(t)) => t.clone(),
                Some(Content::Parts(parts)) => {
                    let mut text = String::new();
                    for (j, p) in parts.iter().enumerate() {
                        match (p.kind.as_str(), &p.text) {
                            ("text", Some(t)) => text.push_str(t),
                            (kind, _) => {
                                return Err(ApiError::bad_request(
                                    Some(&format!("messages[{i}].content[{j}]")),
                                    format!(
                                    "content parts of type `{kind}` are not supported (text only)"
                                ),
                                ))
                            }
                        }
                    }
                    text
                }
            };
            Ok(Message::new(&m.role, &content))
        })
        .collect()
}

/// Checks the request's sampling fields over the model's defaults (as `cyb-llm run` does).
fn job(
    model: &TextModel,
    prompt: Prompt,
    req: &api::Sampling,
    fresh: bool,
    prompt_param: &str,
) -> Result<Job, ApiError> {
    let bad = |p: &str, m: String| ApiError::bad_request(Some(p), m);
    if let Some(n) = req.n.filter(|&n| n != 1) {
        return Err(bad("n", format!("only n = 1 is supported ({n} given)")));
    }
    for (name, v) in [
        ("presence_penalty", req.presence_penalty),
        ("frequency_penalty", req.frequency_penalty),
    ] {
        if v.is_some_and(|v| v != 0.0) {
            return Err(bad(
                name,
                format!("{name} is not supported; use repeat_penalty (llama.cpp's)"),
            ));
        }
    }
    if req
        .logprobs
        .as_ref()
        .is_some_and(|v| !v.is_null() && v != &Value::Bool(false))
    {
        return Err(bad("logprobs", "logprobs are not supported".into()));
    }
    // Values outside their ranges are refused by `Sampling::validate`, which names the field.
    let mut s = Sampling::for_model(&model.model().config);
    if let Some(t) = req.temperature {
        s.temperature = t as f32;
    }
    if let Some(p) = req.top_p {
        s.top_p = p as f32;
    }
    if let Some(p) = req.min_p {
        s.min_p = p as f32;
    }
    if let Some(k) = req.top_k {
        s.top_k = k as usize;
    }
    if let Some(r) = req.repeat_penalty {
        s.repeat_penalty = r as f32;
    }
    s.seed = req.seed.map_or_else(fresh_seed, |seed| seed as u64);
    s.validate()
        .map_err(|e| ApiError::bad_request(Some(e.field), e.reason))?;
    let max_tokens = match req.max_completion_tokens.or(req.max_tokens) {
        Some(0) => return Err(bad("max_tokens", "max_tokens must be at least 1".into())),
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        None => None,
    };
    let ids = model
        .prompt_ids(&prompt, true)
        .map_err(|e| runtime_error(e, prompt_param))?;
    if ids.len() > model.ctx_size() {
        return Err(ApiError {
            param: Some(prompt_param.into()),
            ..ApiError::context_exceeded(ids.len(), model.ctx_size())
        });
    }
    Ok(Job {
        prompt,
        ids,
        max_tokens,
        sampling: s,
        options: GenerateOptions {
            stop: req.stop.clone().map(|s| s.into_vec()).unwrap_or_default(),
            special: false,
        },
        fresh,
        stream: req.stream,
        include_usage: req.stream_options.as_ref().is_some_and(|o| o.include_usage),
    })
}

/// A runtime error of a request: the caller's fault (400) or the runtime's (500).
fn runtime_error(e: ExecutionError, prompt_param: &str) -> ApiError {
    match e {
        ExecutionError::ContextOverflow { max, requested } => ApiError {
            param: Some(prompt_param.into()),
            ..ApiError::context_exceeded(requested, max)
        },
        ExecutionError::Tokenizer { reason } => {
            ApiError::bad_request(Some(prompt_param), format!("tokenizer: {reason}"))
        }
        ExecutionError::InvalidConfig { field, reason } => {
            ApiError::bad_request(Some(&field), format!("{field}: {reason}"))
        }
        other => ApiError::internal(format!("the runtime failed on this request: {other}")),
    }
}

async fn respond(
    app: Arc<App>,
    slots: Arc<TextSlots>,
    model_id: String,
    job: Job,
    shape: Shape,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let slot = slots.acquire(&job.ids, &app.metrics).await?;
    let (stream, include_usage) = (job.stream, job.include_usage);
    let rx = start(app.clone(), slot, job, model_id.clone(), started);
    let id = format!(
        "{}-{}",
        if shape == Shape::Chat {
            "chatcmpl"
        } else {
            "cmpl"
        },
        app.next_id()
    );
    let created = unix_now();
    let head = Head {
        id,
        created,
        model: model_id,
        shape,
    };
    if stream {
        Ok(stream_response(head, rx, include_usage).into_response())
    } else {
        whole_response(head, rx).await
    }
}

/// Runs `job` on a blocking thread; its pieces come through the receiver.
fn start(
    app: Arc<App>,
    mut slot: Slot,
    job: Job,
    model_id: String,
    started: Instant,
) -> mpsc::Receiver<GenEvent> {
    let (tx, rx) = mpsc::channel(CHANNEL);
    tokio::task::spawn_blocking(move || {
        let result = generate(&app, &mut slot, job, &tx, &model_id);
        drop(slot);
        let event = match result {
            Ok(Some(outcome)) => {
                let label = Metrics::model(&model_id);
                let m = &app.metrics;
                m.prompt_tokens
                    .get_or_create(&label)
                    .inc_by(outcome.prompt_tokens as u64);
                m.generated_tokens
                    .get_or_create(&label)
                    .inc_by(outcome.completion_tokens as u64);
                m.generation
                    .get_or_create(&label)
                    .observe(started.elapsed().as_secs_f64());
                GenEvent::Done(outcome)
            }
            Ok(None) => return,
            Err(e) => GenEvent::Failed(e),
        };
        let _ = tx.blocking_send(event);
    });
    rx
}

/// The generation loop; `Ok(None)` when the reader went away (then the
/// generation stops at once and the slot is freed).
fn generate(
    app: &App,
    slot: &mut Slot,
    job: Job,
    tx: &mpsc::Sender<GenEvent>,
    model_id: &str,
) -> Result<Option<Outcome>, ApiError> {
    let generator = slot.generator();
    if job.fresh {
        generator.reset_kv_cache();
    }
    let param = match job.prompt {
        Prompt::Chat(_) => "messages",
        _ => "prompt",
    };
    let mut generation = generator
        .generate_with(job.prompt, job.max_tokens, &job.sampling, &job.options)
        .map_err(|e| runtime_error(e, param))?;
    for piece in &mut generation {
        let piece = piece.map_err(|e| runtime_error(e, param))?;
        if app.stopping.load(Ordering::SeqCst) {
            return Err(ApiError::unavailable(
                "the server is stopping; the generation was cut at the end of the grace period",
                5,
            ));
        }
        if tx.blocking_send(GenEvent::Text(piece.text)).is_err() {
            let tokens = generation.tokens().len();
            app.metrics
                .cancelled
                .get_or_create(&Metrics::model(model_id))
                .inc();
            eprintln!(
                "serve: `{model_id}`: the client went away after {tokens} generated tokens; \
                 generation stopped, slot freed"
            );
            return Ok(None);
        }
    }
    let finish = generation.finish().unwrap_or(Finish::MaxTokens);
    let completion_tokens = generation.tokens().len();
    drop(generation);
    Ok(Some(Outcome {
        finish,
        prompt_tokens: job.ids.len(),
        completion_tokens,
        timings: generator.timings().clone(),
    }))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// OpenAI's `finish_reason`.
fn finish_reason(f: Finish) -> &'static str {
    match f {
        Finish::Stop | Finish::StopString => "stop",
        Finish::MaxTokens | Finish::Context => "length",
    }
}

fn usage(o: &Outcome) -> Value {
    json!({
        "prompt_tokens": o.prompt_tokens,
        "completion_tokens": o.completion_tokens,
        "total_tokens": o.prompt_tokens + o.completion_tokens,
    })
}

/// llama-server's `timings` object.
fn timings(o: &Outcome) -> Value {
    let t = &o.timings;
    json!({
        "prompt_n": t.prefill_tokens,
        "prompt_ms": t.prefill_ms,
        "prompt_per_second": t.prefill_tok_s(),
        "predicted_n": t.decode_tokens,
        "predicted_ms": t.decode_ms,
        "predicted_per_second": t.decode_tok_s(),
    })
}

/// The fields every response and chunk starts with.
struct Head {
    id: String,
    created: u64,
    model: String,
    shape: Shape,
}

impl Head {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.shape, chunk) {
            (Shape::Chat, false) => "chat.completion",
            (Shape::Chat, true) => "chat.completion.chunk",
            (Shape::Completion, _) => "text_completion",
        }
    }

    fn doc(&self, chunk: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": concat!("cyb-llm-", env!("CARGO_PKG_VERSION")),
            "choices": choices,
        })
    }

    /// A streamed piece (`delta` for chat, `text` for completions).
    fn piece(&self, text: Option<&str>, role: bool, finish: Option<Finish>) -> Value {
        let reason = finish.map(finish_reason);
        let choice = match self.shape {
            Shape::Chat => {
                let mut delta = serde_json::Map::new();
                if role {
                    delta.insert("role".into(), "assistant".into());
                }
                if let Some(t) = text {
                    delta.insert("content".into(), t.into());
                }
                json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": reason})
            }
            Shape::Completion => {
                json!({"index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": reason})
            }
        };
        self.doc(true, json!([choice]))
    }
}

async fn whole_response(
    head: Head,
    mut rx: mpsc::Receiver<GenEvent>,
) -> Result<Response, ApiError> {
    let mut text = String::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            GenEvent::Text(t) => text.push_str(&t),
            GenEvent::Failed(e) => return Err(e),
            GenEvent::Done(o) => {
                let reason = finish_reason(o.finish);
                let choice = match head.shape {
                    Shape::Chat => json!({
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "logprobs": null,
                        "finish_reason": reason,
                    }),
                    Shape::Completion => json!({
                        "index": 0, "text": text, "logprobs": null, "finish_reason": reason,
                    }),
                };
                let mut doc = head.doc(false, json!([choice]));
                doc["usage"] = usage(&o);
                doc["timings"] = timings(&o);
                return Ok(Json(doc).into_response());
            }
        }
    }
    Err(ApiError::internal(
        "the generation ended without a result (its thread stopped)",
    ))
}

fn stream_response(
    head: Head,
    mut rx: mpsc::Receiver<GenEvent>,
    include_usage: bool,
) -> Sse<ReceiverStream<Result<Event, Infallible>>> {
    let (out, events) = mpsc::channel::<Result<Event, Infallible>>(CHANNEL);
    let data = |v: Value| Ok(Event::default().data(v.to_string()));
    tokio::spawn(async move {
        if head.shape == Shape::Chat
            && out
                .send(data(head.piece(Some(""), true, None)))
                .await
                .is_err()
        {
            return;
        }
        let mut ended = false;
        while let Some(ev) = rx.recv().await {
            let sent = match ev {
                GenEvent::Text(t) if t.is_empty() => Ok(()),
                GenEvent::Text(t) => out.send(data(head.piece(Some(&t), false, None))).await,
                GenEvent::Done(o) => {
                    ended = true;
                    let mut last = head.piece(None, false, Some(o.finish));
                    last["timings"] = timings(&o);
                    let mut r = out.send(data(last)).await;
                    if include_usage && r.is_ok() {
                        let mut u = head.doc(true, json!([]));
                        u["usage"] = usage(&o);
                        r = out.send(data(u)).await;
                    }
                    r
                }
                GenEvent::Failed(e) => {
                    ended = true;
                    out.send(data(e.body())).await
                }
            };
            if sent.is_err() {
                return;
            }
        }
        if !ended {
            let e =
                ApiError::internal("the generation ended without a result (its thread stopped)");
            if out.send(data(e.body())).await.is_err() {
                return;
            }
        }
        let _ = out.send(Ok(Event::default().data("[DONE]"))).await;
    });
    Sse::new(ReceiverStream::new(events))
}
