//! The `vocab` section: token pieces, BPE merges, SPM scores and token types.
//!
//! Vocabularies reach 262k entries, so the common single-line forms are read by
//! a strict hand-written reader (`super::toml_text`); any line it does not
//! recognise sends the whole section through the `toml` crate instead.

use super::toml_text::{parse_id_key, parse_line, push_basic_string, FastValue};
use crate::error::LoadError;
use std::collections::HashMap;
use std::path::Path;

/// Token type codes of `[types]` (GGUF's numbering).
pub mod token_type {
    /// An ordinary piece.
    pub const NORMAL: u8 = 1;
    /// The unknown token.
    pub const UNKNOWN: u8 = 2;
    /// A control token (bos, eos, im_start, ...).
    pub const CONTROL: u8 = 3;
    /// A user-defined added token.
    pub const USER_DEFINED: u8 = 4;
    /// An unused slot.
    pub const UNUSED: u8 = 5;
    /// A byte-fallback piece `<0xNN>`.
    pub const BYTE: u8 = 6;
}

/// The parsed vocabulary. Every id in `0..tokens.len()` has a piece.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vocab {
    /// Piece of each id.
    pub tokens: Vec<String>,
    /// BPE merges by rank (lower merges first).
    pub merges: Vec<(String, String)>,
    /// SPM log-prob score per id, when the section has `[scores]` (missing ids are 0).
    pub scores: Option<Vec<f32>>,
    /// Token type per id, when the section has `[types]` (missing ids are NORMAL).
    pub types: Option<Vec<u8>>,
}

impl Vocab {
    /// Type of token `id` (NORMAL when the section has no types).
    pub fn token_type(&self, id: usize) -> u8 {
        self.types
            .as_ref()
            .and_then(|t| t.get(id).copied())
            .unwrap_or(token_type::NORMAL)
    }

    /// Serializes to the `vocab` section's TOML text, readable by [`parse`].
    pub fn to_toml(&self) -> String {
        let mut out = String::with_capacity(self.tokens.len() * 16 + self.merges.len() * 20);
        out.push_str("[tokens]\n");
        for (id, piece) in self.tokens.iter().enumerate() {
            out.push_str(&id.to_string());
            out.push_str(" = ");
            push_basic_string(&mut out, piece);
            out.push('\n');
        }
        if !self.merges.is_empty() {
            out.push_str("\n[merges]\n");
            for (rank, (a, b)) in self.merges.iter().enumerate() {
                out.push_str(&rank.to_string());
                out.push_str(" = [");
                push_basic_string(&mut out, a);
                out.push_str(", ");
                push_basic_string(&mut out, b);
                out.push_str("]\n");
            }
        }
        if let Some(scores) = &self.scores {
            out.push_str("\n[scores]\n");
            for (id, s) in scores.iter().enumerate() {
                out.push_str(&format!("{id} = {}\n", toml_float(*s)));
            }
        }
        if let Some(types) = &self.types {
            out.push_str("\n[types]\n");
            for (id, t) in types.iter().enumerate() {
                out.push_str(&format!("{id} = {t}\n"));
            }
        }
        out
    }
}

fn toml_float(x: f32) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        let s = format!("{x:?}");
        if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        }
    }
}

#[derive(Default)]
struct Tables {
    tokens: Vec<(usize, String)>,
    merges: Vec<(usize, (String, String))>,
    scores: Vec<(usize, f64)>,
    types: Vec<(usize, i64)>,
}

/// Reads the common one-line forms; `None` means "use the toml crate".
fn parse_fast(body: &str) -> Option<Tables> {
    let mut t = Tables::default();
    let mut table = "";
    let mut seen: Vec<&str> = Vec::new();
    for line in body.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if seen.contains(&name) || !["tokens", "merges", "scores", "types"].contains(&name) {
                return None;
            }
            seen.push(name);
            table = name;
            continue;
        }
        let (id, value) = parse_line(line)?;
        match (table, value) {
            ("tokens", FastValue::Str(s)) => t.tokens.push((id, s)),
            ("merges", FastValue::Pair(a, b)) => t.merges.push((id, (a, b))),
            ("scores", FastValue::Num(x)) => t.scores.push((id, x)),
            ("types", FastValue::Num(x)) if x.fract() == 0.0 && x.abs() < 1e9 => {
                t.types.push((id, x as i64))
            }
            _ => return None,
        }
    }
    Some(t)
}

#[derive(serde::Deserialize)]
struct RawVocab {
    #[serde(default)]
    tokens: HashMap<String, String>,
    #[serde(default)]
    merges: HashMap<String, (String, String)>,
    #[serde(default)]
    scores: HashMap<String, f64>,
    #[serde(default)]
    types: HashMap<String, i64>,
}

fn parse_slow(path: &Path, body: &str, first_line: usize) -> Result<Tables, LoadError> {
    let raw: RawVocab =
        toml::from_str(body).map_err(|e| super::toml_error(path, "vocab", body, first_line, &e))?;
    fn ids<V>(
        path: &Path,
        table: &str,
        m: HashMap<String, V>,
    ) -> Result<Vec<(usize, V)>, LoadError> {
        m.into_iter()
            .map(|(k, v)| {
                parse_id_key(&k)
                    .map(|id| (id, v))
                    .ok_or_else(|| LoadError::Vocab {
                        path: path.to_path_buf(),
                        reason: format!("[{table}] key `{k}` is not a canonical id (0, 1, 2, ...)"),
                    })
            })
            .collect()
    }
    Ok(Tables {
        tokens: ids(path, "tokens", raw.tokens)?,
        merges: ids(path, "merges", raw.merges)?,
        scores: ids(path, "scores", raw.scores)?,
        types: ids(path, "types", raw.types)?,
    })
}

/// Places `(id, value)` pairs into a dense vector; ids must be exactly `0..len`.
fn dense<V>(path: &Path, table: &str, mut pairs: Vec<(usize, V)>) -> Result<Vec<V>, LoadError> {
    let err = |reason: String| LoadError::Vocab {
        path: path.to_path_buf(),
        reason,
    };
    pairs.sort_by_key(|p| p.0);
    for (i, (id, _)) in pairs.iter().enumerate() {
        if *id != i {
            return Err(err(if *id < i {
                format!("[{table}] id {id} appears twice")
            } else {
                format!(
                    "[{table}] has no id {i} (ids must run 0..{} without gaps)",
                    pairs.len()
                )
            }));
        }
    }
    Ok(pairs.into_iter().map(|p| p.1).collect())
}

/// Places sparse per-token values; every id must be `< n_tokens` and unique.
fn sparse<V: Clone>(
    path: &Path,
    table: &str,
    mut pairs: Vec<(usize, V)>,
    n_tokens: usize,
    default: V,
) -> Result<Vec<V>, LoadError> {
    pairs.sort_by_key(|p| p.0);
    let mut out = vec![default; n_tokens];
    let mut last = None;
    for (id, v) in pairs {
        if id >= n_tokens || last == Some(id) {
            return Err(LoadError::Vocab {
                path: path.to_path_buf(),
                reason: format!(
                    "[{table}] id {id} is {} ",
                    if id >= n_tokens {
                        format!("out of range (the vocabulary has {n_tokens} tokens)")
                    } else {
                        "listed twice".to_string()
                    }
                ),
            });
        }
        last = Some(id);
        out[id] = v;
    }
    Ok(out)
}

/// Parses and validates the `vocab` section body.
pub fn parse(path: &Path, body: &str, first_line: usize) -> Result<Vocab, LoadError> {
    let tables = match parse_fast(body) {
        Some(t) => t,
        None => parse_slow(path, body, first_line)?,
    };
    let tokens = dense(path, "tokens", tables.tokens)?;
    if tokens.is_empty() {
        return Err(LoadError::Vocab {
            path: path.to_path_buf(),
            reason: "[tokens] is empty".into(),
        });
    }
    let merges = dense(path, "merges", tables.merges)?;
    let n = tokens.len();
    let scores = (!tables.scores.is_empty())
        .then(|| {
            let pairs = tables
                .scores
                .into_iter()
                .map(|(i, s)| (i, s as f32))
                .collect();
            sparse(path, "scores", pairs, n, 0.0f32)
        })
        .transpose()?;
    let types = (!tables.types.is_empty())
        .then(|| {
            let mut pairs = Vec::with_capacity(tables.types.len());
            for (i, t) in tables.types {
                let t = u8::try_from(t)
                    .ok()
                    .filter(|t| (1..=6).contains(t))
                    .ok_or_else(|| LoadError::Vocab {
                        path: path.to_path_buf(),
                        reason: format!("[types] id {i}: type {t} is not one of 1..=6"),
                    })?;
                pairs.push((i, t));
            }
            sparse(path, "types", pairs, n, token_type::NORMAL)
        })
        .transpose()?;
    Ok(Vocab {
        tokens,
        merges,
        scores,
        types,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vocab {
        Vocab {
            tokens: vec!["<s>".into(), "Ġthe".into(), "a\"b\\c".into(), "\n".into()],
            merges: vec![("Ġ".into(), "t".into()), ("h".into(), "e".into())],
            scores: Some(vec![0.0, -1.5, -2.25, -1e-7]),
            types: Some(vec![3, 1, 1, 6]),
        }
    }

    #[test]
    fn round_trips_through_fast_and_slow_readers() {
        let v = sample();
        let text = v.to_toml();
        assert!(
            parse_fast(&text).is_some(),
            "writer output must take the fast path"
        );
        assert_eq!(parse(Path::new("x"), &text, 1).unwrap(), v);
        let slow = parse_slow(Path::new("x"), &text, 1).unwrap();
        assert_eq!(slow.tokens.len(), 4);
        let multi_line = text.replace("[tokens]\n", "[tokens]\n# comment\n\"4\" = '''x'''\n");
        assert!(parse_fast(&multi_line).is_none());
        let read = parse(Path::new("x"), &multi_line, 1).unwrap();
        assert_eq!(read.tokens.len(), 5);
        assert_eq!(read.tokens[4], "x");
        let non_canonical = text.replace("[tokens]\n", "[tokens]\n\"04\" = 'x'\n");
        let err = parse(Path::new("x"), &non_canonical, 1).unwrap_err();
        assert!(matches!(err, LoadError::Vocab { .. }), "{err}");
    }

    #[test]
    fn gaps_duplicates_and_bad_types_are_errors() {
        let gap = "[tokens]\n0 = \"a\"\n2 = \"b\"\n";
        assert!(matches!(
            parse(Path::new("x"), gap, 1),
            Err(LoadError::Vocab { .. })
        ));
        let dup = "[tokens]\n0 = \"a\"\n0 = \"b\"\n";
        assert!(parse(Path::new("x"), dup, 1).is_err());
        let ty = "[tokens]\n0 = \"a\"\n[types]\n0 = 9\n";
        assert!(parse(Path::new("x"), ty, 1).is_err());
        let oob = "[tokens]\n0 = \"a\"\n[scores]\n5 = 1.0\n";
        assert!(parse(Path::new("x"), oob, 1).is_err());
    }
}
