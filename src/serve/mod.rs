//! An OpenAI-compatible HTTP server (`cyb-llm serve`) on tokio and axum, for
//! text generators (chat and completions, streamed as server-sent events),
//! sentence encoders (embeddings) and speech models (transcriptions).
//!
//! The server binds first and loads its models on a blocking thread:
//! `GET /health` answers 503 until they are loaded, then 200. Each text model
//! has `parallel` conversations sharing its weights (each with its own KV
//! cache); requests beyond them wait in a bounded queue, then get 503 with
//! `Retry-After`. A client that disconnects stops its generation and frees its
//! slot. On SIGTERM or SIGINT it stops accepting, lets requests in flight
//! finish for the grace period, then cuts them and returns.
//!
//! The server keeps no state between requests but the KV caches, so replicas
//! behind any HTTP load balancer need nothing shared.

mod api;
mod audio;
mod embeddings;
mod error;
mod metrics;
mod models;
mod text;

pub use error::ApiError;
pub use models::{LoadSettings, ModelFile};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, MatchedPath, Multipart, Request, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics::Metrics;
use models::Registry;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Request size limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// JSON bodies, bytes.
    pub max_body_bytes: usize,
    /// Audio uploads (the whole multipart body), bytes.
    pub max_audio_bytes: usize,
}

/// Everything `serve` needs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to bind (`127.0.0.1:8080`; port 0 picks a free one).
    pub addr: SocketAddr,
    /// The models and their ids.
    pub models: Vec<ModelFile>,
    /// How they are loaded.
    pub load: LoadSettings,
    /// Bearer key required on every route but `/health`.
    pub api_key: Option<String>,
    /// Body limits.
    pub limits: Limits,
    /// How long requests in flight may run on after SIGTERM / SIGINT.
    pub grace: Duration,
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source} (pick another --port or --host)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// A model failed to load.
    #[error("{0}")]
    Load(String),
    /// The runtime or the listener failed.
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

/// Shared by every request.
pub(crate) struct App {
    registry: OnceLock<Registry>,
    api_key: Option<String>,
    limits: Limits,
    metrics: Metrics,
    /// Set at the end of the grace period: generations stop at their next token.
    stopping: AtomicBool,
    ids: AtomicU64,
}

impl App {
    /// The loaded models, or 503 while they load.
    fn registry(&self) -> Result<&Registry, ApiError> {
        self.registry
            .get()
            .ok_or_else(|| ApiError::unavailable("the models are still loading", 1))
    }

    /// A fresh response id.
    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }
}

/// Runs the server until SIGTERM / SIGINT (then exits cleanly) or a model fails
/// to load. `on_listening` is called with the bound address.
pub fn run(opts: ServeOptions, on_listening: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(serve(opts, on_listening))
}

async fn serve(
    opts: ServeOptions,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: opts.addr,
            source,
        })?;
    let addr = listener.local_addr()?;
    let app = Arc::new(App {
        registry: OnceLock::new(),
        api_key: opts.api_key.clone(),
        limits: opts.limits,
        metrics: Metrics::default(),
        stopping: AtomicBool::new(false),
        ids: AtomicU64::new(1),
    });
    on_listening(addr);
    let loader = {
        let app = app.clone();
        let (files, settings) = (opts.models.clone(), opts.load.clone());
        tokio::task::spawn_blocking(move || {
            let registry = Registry::load(&files, &settings)?;
            for m in &registry.models {
                let detail = match &m.kind {
                    models::Kind::Text(s) => {
                        // The gauges exist (at 0) before the first request.
                        let label = Metrics::model(&m.id);
                        app.metrics.queue_depth.get_or_create(&label).set(0);
                        app.metrics.busy_slots.get_or_create(&label).set(0);
                        format!(
                            "text, {} slots of {} tokens",
                            s.size(),
                            s.model().ctx_size()
                        )
                    }
                    other => other.name().to_string(),
                };
                tracing::info!("serve: loaded `{}` ({detail})", m.id);
                eprintln!("serve: loaded `{}` ({detail})", m.id);
            }
            let _ = app.registry.set(registry);
            eprintln!("serve: ready");
            Ok::<(), String>(())
        })
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = {
        let mut stop_rx = stop_rx.clone();
        let router = router(app.clone());
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.wait_for(|s| *s).await;
                })
                .await
        })
    };
    tokio::select! {
        loaded = loader => {
            match loaded {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(ServeError::Load(e)),
                Err(e) => return Err(ServeError::Load(format!("the loading thread failed: {e}"))),
            }
            shutdown_signal().await;
        }
        _ = shutdown_signal() => {}
    }
    eprintln!(
        "serve: stopping: no new connections; requests in flight have {:.0} s to finish",
        opts.grace.as_secs_f64()
    );
    let _ = stop_tx.send(true);
    let mut server = server;
    match tokio::time::timeout(opts.grace, &mut server).await {
        Ok(done) => finish(done)?,
        Err(_) => {
            app.stopping.store(true, Ordering::SeqCst);
            eprintln!("serve: grace period over: cutting the requests still running");
            if let Ok(done) = tokio::time::timeout(Duration::from_secs(5), &mut server).await {
                finish(done)?;
            }
        }
    }
    drop(stop_rx);
    eprintln!("serve: stopped");
    Ok(())
}

fn finish(done: Result<std::io::Result<()>, tokio::task::JoinError>) -> Result<(), ServeError> {
    match done {
        Ok(r) => Ok(r?),
        Err(e) => Err(ServeError::Io(std::io::Error::other(e.to_string()))),
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn router(app: Arc<App>) -> Router {
    let limits = app.limits;
    let json_routes = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/embeddings", post(embeddings))
        .layer(DefaultBodyLimit::max(limits.max_body_bytes));
    let audio_routes = Router::new()
        .route("/v1/audio/transcriptions", post(transcriptions))
        .route("/v1/audio/translations", post(translations))
        .layer(DefaultBodyLimit::max(limits.max_audio_bytes));
    Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(list_models))
        .route("/v1/models/{id}", get(one_model))
        .route("/metrics", get(metrics_text))
        .merge(json_routes)
        .merge(audio_routes)
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(middleware::from_fn_with_state(app.clone(), authorize))
        .layer(middleware::from_fn_with_state(app.clone(), count))
        .with_state(app)
}

/// Checks `Authorization: Bearer KEY` on every route but `/health`.
async fn authorize(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if let Some(key) = &app.api_key {
        if req.uri().path() != "/health" {
            let given = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), key.as_bytes())) {
                return ApiError::unauthorized().into_response();
            }
        }
    }
    next.run(req).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Counts every answered request by route and status, with its latency.
async fn count(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let start = Instant::now();
    let res = next.run(req).await;
    app.metrics
        .request(&route, res.status().as_u16(), start.elapsed().as_secs_f64());
    res
}

async fn health(State(app): State<Arc<App>>) -> Response {
    match app.registry.get() {
        Some(_) => Json(json!({"status": "ok"})).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "loading"})),
        )
            .into_response(),
    }
}

fn model_card(m: &models::Served) -> serde_json::Value {
    json!({
        "id": m.id,
        "object": "model",
        "created": m.created,
        "owned_by": "cyb-llm",
        "kind": m.kind.name(),
    })
}

async fn list_models(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let data: Vec<_> = app.registry()?.models.iter().map(model_card).collect();
    Ok(Json(json!({"object": "list", "data": data})).into_response())
}

async fn one_model(
    State(app): State<Arc<App>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(model_card(app.registry()?.get(&id)?)).into_response())
}

async fn metrics_text(State(app): State<Arc<App>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response()
}

/// The body of a JSON route; over the limit is a 413.
struct JsonBody(Bytes);

impl FromRequest<Arc<App>> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, app: &Arc<App>) -> Result<Self, ApiError> {
        match Bytes::from_request(req, app).await {
            Ok(b) => Ok(JsonBody(b)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::too_large(
                app.limits.max_body_bytes,
                "--max-body-bytes",
            )),
            Err(e) => Err(ApiError::bad_request(
                None,
                format!("cannot read the request body: {}", e.body_text()),
            )),
        }
    }
}

/// A multipart form upload.
struct Upload(Multipart);

impl FromRequest<Arc<App>> for Upload {
    type Rejection = ApiError;

    async fn from_request(req: Request, app: &Arc<App>) -> Result<Self, ApiError> {
        Multipart::from_request(req, app)
            .await
            .map(Upload)
            .map_err(|e| {
                ApiError::bad_request(
                    None,
                    format!("expected a multipart/form-data upload: {}", e.body_text()),
                )
            })
    }
}

async fn chat(State(app): State<Arc<App>>, JsonBody(b): JsonBody) -> Result<Response, ApiError> {
    text::chat(app, &b).await
}

async fn completions(
    State(app): State<Arc<App>>,
    JsonBody(b): JsonBody,
) -> Result<Response, ApiError> {
    text::completions(app, &b).await
}

async fn embeddings(
    State(app): State<Arc<App>>,
    JsonBody(b): JsonBody,
) -> Result<Response, ApiError> {
    embeddings::embeddings(app, &b).await
}

async fn transcriptions(
    State(app): State<Arc<App>>,
    Upload(m): Upload,
) -> Result<Response, ApiError> {
    audio::transcribe(app, m, false).await
}

async fn translations(
    State(app): State<Arc<App>>,
    Upload(m): Upload,
) -> Result<Response, ApiError> {
    audio::transcribe(app, m, true).await
}

async fn no_route(method: Method, uri: Uri) -> Response {
    ApiError::no_route(method.as_str(), uri.path()).into_response()
}

async fn wrong_method(method: Method, uri: Uri) -> Response {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        ..ApiError::bad_request(None, format!("{} does not take {method}", uri.path()))
    }
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use tower::ServiceExt;

    fn app(api_key: Option<&str>) -> Arc<App> {
        Arc::new(App {
            registry: OnceLock::new(),
            api_key: api_key.map(str::to_string),
            limits: Limits {
                max_body_bytes: 1024,
                max_audio_bytes: 1024,
            },
            metrics: Metrics::default(),
            stopping: AtomicBool::new(false),
            ids: AtomicU64::new(1),
        })
    }

    async fn call(
        app: &Arc<App>,
        method: &str,
        path: &str,
        body: &str,
    ) -> (u16, Option<String>, serde_json::Value) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let res = router(app.clone()).oneshot(req).await.unwrap();
        let status = res.status().as_u16();
        let retry = res
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_string());
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        (
            status,
            retry,
            serde_json::from_slice(&bytes).unwrap_or_default(),
        )
    }

    #[tokio::test]
    async fn health_is_503_while_loading_then_200() {
        let app = app(None);
        let (status, _, body) = call(&app, "GET", "/health", "").await;
        assert_eq!((status, body["status"].as_str()), (503, Some("loading")));
        let (status, retry, body) = call(&app, "GET", "/v1/models", "").await;
        assert_eq!((status, retry.as_deref()), (503, Some("1")));
        assert_eq!(body["error"]["type"], "unavailable_error");
        let _ = app.registry.set(Registry { models: Vec::new() });
        assert_eq!(call(&app, "GET", "/health", "").await.0, 200);
        let (status, _, body) = call(
            &app,
            "POST",
            "/v1/chat/completions",
            r#"{"model": "x", "messages": []}"#,
        )
        .await;
        assert_eq!(status, 404);
        assert_eq!(body["error"]["code"], "model_not_found");
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_413_and_health_needs_no_key() {
        let app = app(Some("k"));
        let _ = app.registry.set(Registry { models: Vec::new() });
        assert_eq!(call(&app, "GET", "/health", "").await.0, 200);
        assert_eq!(call(&app, "GET", "/metrics", "").await.0, 401);
        let open = self::app(None);
        let (status, _, body) = call(&open, "POST", "/v1/embeddings", &"x".repeat(2000)).await;
        assert_eq!(status, 413);
        assert_eq!(body["error"]["code"], "request_too_large");
    }
}
