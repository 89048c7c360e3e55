//! OpenAI-shaped error responses: `{"error": {"message", "type", "param", "code"}}`
//! with the HTTP status that says who must act (400/404/413: the request,
//! 401: the credentials, 503: come back later, 500: the server).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// One failed request: status, OpenAI error type and code, the request field at fault.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What went wrong and what would fix it.
    pub message: String,
    /// The request field at fault (`messages[1].content`, `model`, ...).
    pub param: Option<String>,
    /// OpenAI's machine-readable code (`model_not_found`, `context_length_exceeded`, ...).
    pub code: Option<&'static str>,
    /// Seconds a client should wait before retrying (503 only).
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// 400: a malformed request or a bad value of `param`.
    pub fn bad_request(param: Option<&str>, message: impl Into<String>) -> ApiError {
        ApiError {
            param: param.map(str::to_string),
            ..ApiError::new(StatusCode::BAD_REQUEST, message)
        }
    }

    /// 401: a missing or wrong API key.
    pub fn unauthorized() -> ApiError {
        ApiError {
            code: Some("invalid_api_key"),
            ..ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing or wrong API key: send the key the server was started with \
                 (--api-key) as `Authorization: Bearer KEY`",
            )
        }
    }

    /// 404: no such route.
    pub fn no_route(method: &str, path: &str) -> ApiError {
        ApiError {
            code: Some("not_found"),
            ..ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "no route {method} {path}; the server has GET /health, GET /v1/models, \
                     POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings, \
                     POST /v1/audio/transcriptions, POST /v1/audio/translations, GET /metrics"
                ),
            )
        }
    }

    /// 404: `model` names no loaded model; lists the ones there are.
    pub fn unknown_model(model: &str, known: &[&str]) -> ApiError {
        ApiError {
            param: Some("model".into()),
            code: Some("model_not_found"),
            ..ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "the model `{model}` does not exist on this server; it serves: {}",
                    known.join(", ")
                ),
            )
        }
    }

    /// 413: the body is over `limit` bytes.
    pub fn too_large(limit: usize, flag: &str) -> ApiError {
        ApiError {
            code: Some("request_too_large"),
            ..ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is over the server's limit of {limit} bytes (start the server with a larger {flag})"),
            )
        }
    }

    /// 400: the prompt does not fit the context.
    pub fn context_exceeded(requested: usize, max: usize) -> ApiError {
        ApiError {
            param: Some("messages".into()),
            code: Some("context_length_exceeded"),
            ..ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "the prompt is {requested} tokens and the context holds {max}; shorten the \
                     prompt or start the server with a larger -c"
                ),
            )
        }
    }

    /// 503: every slot is busy and the queue is full, or the server is loading / stopping.
    pub fn unavailable(message: impl Into<String>, retry_after: u64) -> ApiError {
        ApiError {
            retry_after: Some(retry_after),
            code: Some("unavailable"),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
        }
    }

    /// 500: the runtime failed on this request (the server goes on).
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// OpenAI's error type for the status.
    fn kind(&self) -> &'static str {
        match self.status {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable_error",
            s if s.is_server_error() => "server_error",
            _ => "invalid_request_error",
        }
    }

    /// The JSON body (also sent as an SSE event when a stream fails midway).
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind(),
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        res
    }
}
