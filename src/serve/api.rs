//! The OpenAI request bodies the server reads, and the checks that turn a bad
//! value into a 400 naming its field. Unknown fields are ignored, as OpenAI's
//! clients send fields of newer API versions.

use super::error::ApiError;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// Parses a JSON body; a syntax or type error is a 400 naming the field.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let param = (path != "." && path != "?").then_some(path);
        ApiError::bad_request(
            param.as_deref(),
            format!("the request body is not a valid request: {}", e.inner()),
        )
    })
}

/// A string or a list of strings (`stop`, `input`, `prompt`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a text or a list of texts")]
pub enum OneOrMany<T> {
    /// One value.
    One(T),
    /// A list.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// The values as a list.
    pub fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v],
            OneOrMany::Many(v) => v,
        }
    }
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with `usage`.
    #[serde(default)]
    pub include_usage: bool,
}

/// The sampling and length fields shared by chat and completions.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Sampling {
    /// Tokens to generate at most.
    pub max_tokens: Option<u64>,
    /// Newer clients' name for `max_tokens`.
    pub max_completion_tokens: Option<u64>,
    /// 0 = greedy.
    pub temperature: Option<f64>,
    /// Nucleus threshold in (0, 1].
    pub top_p: Option<f64>,
    /// llama-server's extension: keep the K most likely tokens.
    pub top_k: Option<u64>,
    /// llama-server's extension: minimum probability relative to the top token.
    pub min_p: Option<f64>,
    /// llama-server's extension: repetition penalty.
    pub repeat_penalty: Option<f64>,
    /// Sampler seed (reproducible sampling).
    pub seed: Option<i64>,
    /// Stop strings.
    pub stop: Option<OneOrMany<String>>,
    /// Choices per request (only 1).
    pub n: Option<u64>,
    /// Not supported unless 0.
    pub presence_penalty: Option<f64>,
    /// Not supported unless 0.
    pub frequency_penalty: Option<f64>,
    /// Not supported.
    pub logprobs: Option<serde_json::Value>,
    /// Stream server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// `include_usage`.
    pub stream_options: Option<StreamOptions>,
    /// llama-server's extension: reuse the KV cache of the longest cached prefix (default on).
    pub cache_prompt: Option<bool>,
}

/// A chat message's content: text, or a list of parts of which only text is read.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "a text or a list of content parts ({\"type\": \"text\", \"text\": ...})"
)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts (`{"type": "text", "text": ...}`).
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Clone, Deserialize)]
pub struct ContentPart {
    /// `text` (others are refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    pub text: Option<String>,
}

/// One chat message.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// The content (`null` for an assistant turn with tool calls only).
    pub content: Option<Content>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    /// Model id.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Sampling, length and streaming.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Not supported.
    pub tools: Option<serde_json::Value>,
    /// Not supported unless `text`.
    pub response_format: Option<serde_json::Value>,
}

/// A completion prompt: text, or token ids.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "a text, a list of token ids, or a list of one text"
)]
pub enum PromptInput {
    /// One text.
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
    /// A list of texts (only one).
    Texts(Vec<String>),
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct CompletionRequest {
    /// Model id.
    pub model: String,
    /// The prompt, fed as is (no chat template).
    pub prompt: PromptInput,
    /// Sampling, length and streaming.
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Not supported.
    #[serde(default)]
    pub echo: bool,
    /// Not supported.
    pub suffix: Option<String>,
}

/// Embedding input: texts (token arrays are refused).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingInput {
    /// One text.
    Text(String),
    /// Texts.
    Texts(Vec<String>),
    /// Anything else, such as token ids (refused: the server embeds text).
    Other(serde_json::Value),
}

/// `POST /v1/embeddings`.
#[derive(Debug, Clone, Deserialize)]
pub struct EmbeddingRequest {
    /// Model id.
    pub model: String,
    /// The texts.
    pub input: EmbeddingInput,
    /// `float` (default) or `base64` (little-endian f32).
    pub encoding_format: Option<String>,
    /// Only the model's own dimension.
    pub dimensions: Option<u64>,
}
