//! Typed access to the JSON files of a Hugging Face folder, with errors that name
//! the file and the key.

use crate::error::ImportError;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One JSON object read from a file (or a sub-object of one, such as `text_config`).
#[derive(Debug, Clone)]
pub struct Json {
    /// The file it came from.
    pub path: PathBuf,
    /// Key path of this object inside the file (`""` for the top level, else `text_config.`).
    prefix: String,
    value: Value,
}

impl Json {
    /// Reads and parses `path`, which must hold a JSON object.
    pub fn read(path: &Path) -> Result<Json, ImportError> {
        let text = std::fs::read_to_string(path).map_err(|source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Json::parse(path, &text)
    }

    /// Like [`Json::read`], but `None` when the file does not exist.
    pub fn read_opt(path: &Path) -> Result<Option<Json>, ImportError> {
        if path.is_file() {
            Json::read(path).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Parses `text` (the contents of `path`).
    pub fn parse(path: &Path, text: &str) -> Result<Json, ImportError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ImportError::Format {
            path: path.to_path_buf(),
            reason: format!("invalid JSON: {e}"),
        })?;
        if !value.is_object() {
            return Err(ImportError::Format {
                path: path.to_path_buf(),
                reason: "expected a JSON object at the top level".into(),
            });
        }
        Ok(Json {
            path: path.to_path_buf(),
            prefix: String::new(),
            value,
        })
    }

    /// The value of `key`; JSON `null` counts as absent.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key).filter(|v| !v.is_null())
    }

    /// The sub-object at `key`, if it is an object.
    pub fn object(&self, key: &str) -> Option<Json> {
        let v = self.get(key).filter(|v| v.is_object())?;
        Some(Json {
            path: self.path.clone(),
            prefix: format!("{}{key}.", self.prefix),
            value: v.clone(),
        })
    }

    /// The full key path of `key`, for messages.
    pub fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// A `Format` error about `key`.
    pub fn bad(&self, key: &str, what: &str) -> ImportError {
        let got = self.get(key).map(|v| v.to_string()).unwrap_or_default();
        ImportError::Format {
            path: self.path.clone(),
            reason: format!("`{}` must be {what}, got {got}", self.key(key)),
        }
    }

    /// A `MissingKey` error about `key`.
    pub fn missing(&self, key: &str, hint: &str) -> ImportError {
        ImportError::MissingKey {
            path: self.path.clone(),
            key: self.key(key),
            hint: hint.to_string(),
        }
    }

    /// Optional non-negative integer.
    pub fn usize(&self, key: &str) -> Result<Option<usize>, ImportError> {
        self.get(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|x| usize::try_from(x).ok())
                    .ok_or_else(|| self.bad(key, "a non-negative integer"))
            })
            .transpose()
    }

    /// Required positive integer.
    pub fn req_usize(&self, key: &str) -> Result<usize, ImportError> {
        match self.usize(key)? {
            Some(0) => Err(self.bad(key, "greater than 0")),
            Some(x) => Ok(x),
            None => Err(self.missing(key, " (required in config.json for this model_type)")),
        }
    }

    /// Optional number.
    pub fn f64(&self, key: &str) -> Result<Option<f64>, ImportError> {
        self.get(key)
            .map(|v| v.as_f64().ok_or_else(|| self.bad(key, "a number")))
            .transpose()
    }

    /// Optional boolean.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ImportError> {
        self.get(key)
            .map(|v| v.as_bool().ok_or_else(|| self.bad(key, "true or false")))
            .transpose()
    }

    /// Optional string.
    pub fn str(&self, key: &str) -> Result<Option<&str>, ImportError> {
        self.get(key)
            .map(|v| v.as_str().ok_or_else(|| self.bad(key, "a string")))
            .transpose()
    }

    /// Token ids given as one integer or a list of integers (`eos_token_id`).
    pub fn ids(&self, key: &str) -> Result<Vec<u32>, ImportError> {
        let one = |v: &Value| {
            v.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| self.bad(key, "a token id or a list of token ids"))
        };
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(one).collect(),
            Some(v) => Ok(vec![one(v)?]),
        }
    }

    /// A token given as a string or as an added-token object `{"content": ...}`
    /// (`bos_token` of tokenizer_config.json).
    pub fn token(&self, key: &str) -> Result<Option<&str>, ImportError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => v
                .get("content")
                .and_then(Value::as_str)
                .map(Some)
                .ok_or_else(|| self.bad(key, "a token string or {\"content\": ...}")),
        }
    }

    /// The underlying value.
    pub fn value(&self) -> &Value {
        &self.value
    }
}
