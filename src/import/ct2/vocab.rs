//! Whisper's tokenizer from a CTranslate2 folder: `vocabulary.txt` (one byte-level
//! BPE piece per line, id = line number, covering every embedding row including
//! the special and timestamp tokens) or `vocabulary.json` (the same pieces as a
//! JSON array, as CTranslate2 3.x and later write it) and the BPE merges of
//! `tokenizer.json`. Without either, the pieces come from `tokenizer.json` (vocab +
//! added tokens), and ids past them up to the embedding size are Whisper's
//! timestamp tokens `<|0.00|>` .. in 0.02 s steps after `<|notimestamps|>`.
//! Every `<|...|>` piece at or past `<|endoftext|>` is a control token.

use crate::error::ImportError;
use crate::loader::vocab::{token_type, Vocab};
use serde_json::Value;
use std::path::Path;

fn format_err(path: &Path, reason: impl Into<String>) -> ImportError {
    ImportError::Format {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Builds the vocabulary of `n_vocab` ids from the folder `dir`.
/// The pieces of `vocabulary.json` (a JSON array of strings); `None` when the file is absent.
fn json_pieces(dir: &Path) -> Result<Option<Vec<String>>, ImportError> {
    let path = dir.join("vocabulary.json");
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format_err(&path, format!("not a JSON array of strings: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ImportError::Io { path, source }),
    }
}

pub fn read(dir: &Path, n_vocab: usize) -> Result<Vocab, ImportError> {
    let tok_path = dir.join("tokenizer.json");
    let tok: Option<Value> = match std::fs::read(&tok_path) {
        Ok(b) => Some(
            serde_json::from_slice(&b)
                .map_err(|e| format_err(&tok_path, format!("invalid JSON: {e}")))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(ImportError::Io {
                path: tok_path,
                source,
            })
        }
    };
    let vocab_path = dir.join("vocabulary.txt");
    let mut tokens: Vec<String> = match std::fs::read_to_string(&vocab_path) {
        Ok(text) => text.lines().map(str::to_string).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match (&tok, json_pieces(dir)?) {
            (_, Some(pieces)) => pieces,
            (Some(t), None) => pieces_from_tokenizer_json(&tok_path, t)?,
            (None, None) => {
                return Err(ImportError::MissingKey {
                    path: dir.to_path_buf(),
                    key: "vocabulary.txt".into(),
                    hint: " (or vocabulary.json, tokenizer.json): the CTranslate2 folder has no vocabulary"
                        .into(),
                })
            }
        },
        Err(source) => {
            return Err(ImportError::Io {
                path: vocab_path,
                source,
            })
        }
    };
    if tokens.len() > n_vocab {
        return Err(format_err(
            dir,
            format!(
                "the vocabulary has {} pieces but the embedding has {n_vocab} rows",
                tokens.len()
            ),
        ));
    }
    if tokens.len() < n_vocab {
        let no_ts = tokens
            .iter()
            .position(|t| t == "<|notimestamps|>")
            .ok_or_else(|| {
                format_err(
                    dir,
                    format!(
                        "the vocabulary has {} pieces, the embedding {n_vocab} rows, and no \
                         <|notimestamps|> to place the timestamp tokens after",
                        tokens.len()
                    ),
                )
            })?;
        if no_ts + 1 != tokens.len() {
            return Err(format_err(dir, "<|notimestamps|> is not the last piece"));
        }
        let first = tokens.len();
        for i in first..n_vocab {
            tokens.push(format!("<|{:.2}|>", (i - first) as f64 * 0.02));
        }
    }
    let merges = match &tok {
        Some(t) => merges_of(&tok_path, t)?,
        None => Vec::new(),
    };
    let eot = tokens.iter().position(|t| t == "<|endoftext|>");
    let types = tokens
        .iter()
        .enumerate()
        .map(|(id, t)| {
            let special = t.starts_with("<|") && t.ends_with("|>");
            if special && eot.is_some_and(|e| id >= e) {
                token_type::CONTROL
            } else {
                token_type::NORMAL
            }
        })
        .collect();
    Ok(Vocab {
        tokens,
        merges,
        scores: None,
        types: Some(types),
    })
}

fn pieces_from_tokenizer_json(path: &Path, tok: &Value) -> Result<Vec<String>, ImportError> {
    let vocab = tok
        .pointer("/model/vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| format_err(path, "no model.vocab object"))?;
    let mut pairs: Vec<(usize, String)> = vocab
        .iter()
        .filter_map(|(k, v)| Some((v.as_u64()? as usize, k.clone())))
        .collect();
    if let Some(added) = tok.get("added_tokens").and_then(Value::as_array) {
        for a in added {
            if let (Some(id), Some(c)) = (
                a.get("id").and_then(Value::as_u64),
                a.get("content").and_then(Value::as_str),
            ) {
                pairs.push((id as usize, c.to_string()));
            }
        }
    }
    pairs.sort();
    pairs.dedup_by_key(|p| p.0);
    let mut out = Vec::with_capacity(pairs.len());
    for (i, (id, piece)) in pairs.into_iter().enumerate() {
        if id != i {
            return Err(format_err(path, format!("token id {i} has no piece")));
        }
        out.push(piece);
    }
    Ok(out)
}

fn merges_of(path: &Path, tok: &Value) -> Result<Vec<(String, String)>, ImportError> {
    let Some(list) = tok.pointer("/model/merges").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let pair = match m {
                Value::String(s) => s
                    .split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string())),
                Value::Array(a) if a.len() == 2 => a[0]
                    .as_str()
                    .zip(a[1].as_str())
                    .map(|(x, y)| (x.to_string(), y.to_string())),
                _ => None,
            };
            pair.ok_or_else(|| format_err(path, format!("model.merges[{i}] is not a pair")))
        })
        .collect()
}
