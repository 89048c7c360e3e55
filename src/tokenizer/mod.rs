//! Tokenizers built from a `.model` vocab section and `[tokenizer]` config
//! (`../shared/spec/tokenizer.md`), with the `tokenizers` crate doing the work.
//!
//! Encoding follows llama.cpp: special tokens (vocab types control, user-defined and
//! unknown) are split out of the text first, longest first; control and unknown ones
//! only when `parse_special` is set, user-defined ones always. The text between them
//! goes through the type's pipeline ([`build`]): byte-level BPE with a `pre` preset,
//! SentencePiece-style BPE with byte fallback, or BERT WordPiece.
//!
//! Decoding works on bytes: every id has a byte string (its piece), decode joins them,
//! and [`StreamDecoder`] only ever emits whole UTF-8 characters.
//!
//! `[tokenizer]` keys read beyond the typed ones: `add_space_prefix` (spm; default true),
//! `cls_token_id` / `sep_token_id` (wordpiece; default bos / first eos), `strip_accents`
//! (wordpiece; default = lowercase), `rstrip_special_tokens` (phi-3: whitespace after a
//! special token is dropped, as llama.cpp does for phi-3 vocabularies).

pub mod build;
mod stream;

pub use stream::StreamDecoder;

use crate::error::ExecutionError;
use crate::loader::config::TokenizerConfig;
use crate::loader::vocab::{token_type, Vocab};
use crate::loader::Model;

/// The vocabulary type (`[tokenizer] type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Byte-level BPE (GPT-2 byte mapping, merges).
    Bpe,
    /// SentencePiece-style BPE (`▁` for space, scores, byte fallback).
    Spm,
    /// BERT WordPiece (`##` continuations).
    WordPiece,
}

/// A special token matched whole in the input text before tokenization.
#[derive(Debug, Clone)]
struct Special {
    id: u32,
    text: String,
    /// Control / unknown: matched only when parsing specials.
    control: bool,
    /// Whitespace right after it is dropped.
    rstrip: bool,
}

/// A piece of the input: raw text (byte range) or an already-matched special token.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

/// A tokenizer for one model.
pub struct Tokenizer {
    hf: tokenizers::Tokenizer,
    kind: Kind,
    specials: Vec<Special>,
    /// Decoded bytes of every id (wordpiece word starts carry a leading space).
    pieces: Vec<Vec<u8>>,
    /// Type of every id.
    types: Vec<u8>,
    bos: Option<u32>,
    eos: Vec<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    cls: Option<u32>,
    sep: Option<u32>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("kind", &self.kind)
            .field("tokens", &self.pieces.len())
            .field("specials", &self.specials.len())
            .finish()
    }
}

fn err(reason: impl Into<String>) -> ExecutionError {
    ExecutionError::Tokenizer {
        reason: reason.into(),
    }
}

fn extra_bool(config: &TokenizerConfig, key: &str) -> Option<bool> {
    config.extra.get(key).and_then(toml::Value::as_bool)
}

fn extra_id(config: &TokenizerConfig, key: &str) -> Option<u32> {
    config
        .extra
        .get(key)
        .and_then(toml::Value::as_integer)
        .and_then(|v| u32::try_from(v).ok())
}

/// The bytes a piece stands for.
fn piece_bytes(
    kind: Kind,
    piece: &str,
    ty: u8,
    bytes: &std::collections::HashMap<char, u8>,
) -> Vec<u8> {
    if ty == token_type::CONTROL || ty == token_type::USER_DEFINED && kind != Kind::Spm {
        return piece.as_bytes().to_vec();
    }
    match kind {
        Kind::Bpe => {
            let mut out = Vec::with_capacity(piece.len());
            for c in piece.chars() {
                match bytes.get(&c) {
                    Some(&b) => out.push(b),
                    None => out.extend(c.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
            out
        }
        Kind::Spm => {
            let byte = piece
                .strip_prefix("<0x")
                .and_then(|h| h.strip_suffix('>'))
                .filter(|h| h.len() == 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match byte {
                Some(b) if ty == token_type::BYTE => vec![b],
                _ => piece.replace('\u{2581}', " ").into_bytes(),
            }
        }
        Kind::WordPiece => match piece.strip_prefix("##") {
            Some(rest) => rest.as_bytes().to_vec(),
            None => format!(" {piece}").into_bytes(),
        },
    }
}

impl Tokenizer {
    /// Builds the tokenizer of a loaded model (its `vocab` section and `[tokenizer]`).
    pub fn from_model(model: &Model) -> Result<Tokenizer, ExecutionError> {
        let vocab = model
            .vocab
            .as_ref()
            .ok_or_else(|| err("the model has no vocab section"))?;
        let config = model
            .config
            .tokenizer
            .as_ref()
            .ok_or_else(|| err("the config has no [tokenizer] table"))?;
        Tokenizer::new(vocab, config)
    }

    /// Builds a tokenizer from a vocabulary and its `[tokenizer]` config.
    pub fn new(vocab: &Vocab, config: &TokenizerConfig) -> Result<Tokenizer, ExecutionError> {
        let n = vocab.tokens.len();
        let check = |what: &str, id: Option<u32>| match id {
            Some(i) if i as usize >= n => Err(err(format!(
                "{what} {i} is outside the vocabulary ({n} tokens)"
            ))),
            _ => Ok(id),
        };
        let bos = check("bos_token_id", config.bos_token_id)?;
        let unk = check("unk_token_id", config.unk_token_id)?;
        for &e in &config.eos_token_ids {
            check("eos_token_ids entry", Some(e))?;
        }
        let (kind, hf) = match config.kind.as_str() {
            "bpe" => {
                let pre = config.pre.as_deref().unwrap_or("gpt2");
                (Kind::Bpe, build::byte_level_bpe(vocab, pre))
            }
            "spm" => (Kind::Spm, build::spm(vocab, unk)),
            "wordpiece" => {
                let lowercase = config.lowercase.unwrap_or(true);
                let strip = extra_bool(config, "strip_accents").unwrap_or(lowercase);
                (
                    Kind::WordPiece,
                    build::wordpiece(vocab, unk, lowercase, strip),
                )
            }
            other => {
                return Err(err(format!(
                    "unknown tokenizer type `{other}` (bpe | spm | wordpiece)"
                )))
            }
        };
        let hf = hf.map_err(err)?;
        let types: Vec<u8> = (0..n).map(|i| vocab.token_type(i)).collect();
        let rstrip_all = extra_bool(config, "rstrip_special_tokens").unwrap_or(false);
        let mut specials: Vec<Special> = Vec::new();
        for (id, piece) in vocab.tokens.iter().enumerate() {
            let ty = types[id];
            let control = ty == token_type::CONTROL || ty == token_type::UNKNOWN;
            if (control || ty == token_type::USER_DEFINED) && !piece.is_empty() {
                let keep_space = ["<unk>", "<s>", "<|endoftext|>"].contains(&piece.as_str());
                specials.push(Special {
                    id: id as u32,
                    text: piece.clone(),
                    control,
                    rstrip: rstrip_all && !keep_space,
                });
            }
        }
        specials.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then(a.id.cmp(&b.id)));
        let byte_map = build::byte_decoder();
        let pieces = vocab
            .tokens
            .iter()
            .zip(&types)
            .map(|(p, &t)| piece_bytes(kind, p, t, &byte_map))
            .collect();
        let wordpiece = kind == Kind::WordPiece;
        Ok(Tokenizer {
            hf,
            kind,
            specials,
            pieces,
            types,
            bos,
            eos: config.eos_token_ids.clone(),
            add_bos: config.add_bos.unwrap_or(kind != Kind::Bpe),
            add_eos: config.add_eos.unwrap_or(false),
            add_space_prefix: extra_bool(config, "add_space_prefix").unwrap_or(kind == Kind::Spm),
            cls: check(
                "cls_token_id",
                extra_id(config, "cls_token_id").or(if wordpiece { bos } else { None }),
            )?,
            sep: check(
                "sep_token_id",
                extra_id(config, "sep_token_id").or(if wordpiece {
                    config.eos_token_ids.first().copied()
                } else {
                    None
                }),
            )?,
        })
    }

    /// The vocabulary type.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Number of ids.
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The beginning-of-sequence id, if the vocabulary has one.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// True when encoding with special tokens puts BOS first (llama.cpp's `add_bos`).
    pub fn adds_bos(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }

    /// The end-of-sequence ids (generation stops at any of them).
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    /// True for control tokens (bos, eos, `<|im_end|>`, ...): skipped by `decode(.., true)`.
    pub fn is_special(&self, id: u32) -> bool {
        self.types.get(id as usize) == Some(&token_type::CONTROL)
    }

    /// The bytes token `id` stands for (empty for an unknown id).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.pieces
            .get(id as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The text of token `id` (lossy for pieces that are part of a UTF-8 character).
    pub fn token_to_piece(&self, id: u32) -> String {
        String::from_utf8_lossy(self.token_bytes(id)).into_owned()
    }

    /// Encodes `text`, matching special tokens written in it (as chat templates need).
    /// `add_special` adds bos/eos (or `[CLS]`/`[SEP]`) as the config says.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, ExecutionError> {
        self.encode_with(text, add_special, true)
    }

    /// Encodes `text`; control tokens written in it are matched only when `parse_special`
    /// is set (user-defined tokens always are), as llama.cpp's `llama_tokenize`.
    pub fn encode_with(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, ExecutionError> {
        let fragments = self.partition(text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        let wrap = add_special && self.kind == Kind::WordPiece;
        if wrap {
            out.extend(self.cls);
        } else if add_special && self.add_bos {
            out.extend(self.bos);
        }
        let mut prev_special = true;
        for f in fragments {
            match f {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(a, b) => {
                    let piece = &text[a..b];
                    let encoding =
                        if self.kind == Kind::Spm && self.add_space_prefix && prev_special {
                            self.hf.encode_fast(format!(" {piece}"), false)
                        } else {
                            self.hf.encode_fast(piece, false)
                        };
                    out.extend(
                        encoding
                            .map_err(|e| err(format!("encode failed: {e}")))?
                            .get_ids(),
                    );
                    prev_special = false;
                }
            }
        }
        if wrap {
            out.extend(self.sep);
        } else if add_special && self.add_eos {
            out.extend(self.eos.first());
        }
        Ok(out)
    }

    /// Splits special tokens out of `text`, longest first, as llama.cpp does.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        let mut frags = vec![Fragment::Text(0, text.len())];
        if text.is_empty() {
            return Vec::new();
        }
        for s in &self.specials {
            if s.control && !parse_special {
                continue;
            }
            if !text.contains(s.text.as_str()) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(mut a, b) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(pos) = text[a..b].find(s.text.as_str()) {
                    let start = a + pos;
                    if start > a {
                        next.push(Fragment::Text(a, start));
                    }
                    next.push(Fragment::Token(s.id));
                    a = start + s.text.len();
                    if s.rstrip {
                        while a < b && text.as_bytes()[a].is_ascii_whitespace() {
                            a += 1;
                        }
                    }
                }
                if a < b {
                    next.push(Fragment::Text(a, b));
                }
            }
            frags = next;
        }
        frags
    }

    /// Decodes `ids` to text; `skip_special` drops control tokens. Invalid UTF-8 (an
    /// incomplete byte sequence) becomes U+FFFD.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        let mut stream = self.stream(skip_special);
        let mut out = String::new();
        for &id in ids {
            out.push_str(&stream.push(id));
        }
        out.push_str(&stream.finish());
        out
    }

    /// A streaming decoder: feed ids one at a time, get only whole characters back.
    pub fn stream(&self, skip_special: bool) -> StreamDecoder<'_> {
        StreamDecoder::new(self, skip_special)
    }

    /// Whether decode drops one leading space of the first token (spm with a space
    /// prefix, wordpiece word starts).
    fn strips_first_space(&self) -> bool {
        match self.kind {
            Kind::Spm => self.add_space_prefix,
            Kind::WordPiece => true,
            Kind::Bpe => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spm_vocab() -> (Vocab, TokenizerConfig) {
        let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
        tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
        for p in ["▁", "h", "i", "▁h", "▁hi", "!"] {
            tokens.push(p.into());
        }
        let n = tokens.len();
        let mut types = vec![token_type::NORMAL; n];
        types[0] = token_type::UNKNOWN;
        types[1] = token_type::CONTROL;
        types[2] = token_type::CONTROL;
        for t in types.iter_mut().skip(3).take(256) {
            *t = token_type::BYTE;
        }
        let scores = (0..n).map(|i| -(i as f32)).collect();
        let vocab = Vocab {
            tokens,
            merges: vec![],
            scores: Some(scores),
            types: Some(types),
        };
        let config = TokenizerConfig {
            kind: "spm".into(),
            bos_token_id: Some(1),
            eos_token_ids: vec![2],
            unk_token_id: Some(0),
            add_bos: Some(true),
            ..Default::default()
        };
        (vocab, config)
    }

    #[test]
    fn spm_merges_by_score_and_falls_back_to_bytes() {
        let (vocab, config) = spm_vocab();
        let t = Tokenizer::new(&vocab, &config).unwrap();
        let hi = vocab.tokens.iter().position(|p| p == "▁hi").unwrap() as u32;
        let bang = vocab.tokens.iter().position(|p| p == "!").unwrap() as u32;
        let ids = t.encode("hi!é", true).unwrap();
        // é = C3 A9, by byte fallback.
        assert_eq!(ids, vec![1, hi, bang, 3 + 0xC3, 3 + 0xA9]);
        assert_eq!(t.decode(&ids, true), "hi!é");
        // As llama.cpp: only the very first piece loses its space prefix.
        assert_eq!(t.decode(&ids, false), "<s> hi!é");
        let with_special = t.encode("hi</s>hi", false).unwrap();
        assert_eq!(with_special, vec![hi, 2, hi]);
        assert_ne!(t.encode_with("hi</s>", false, false).unwrap(), vec![hi, 2]);
    }

    #[test]
    fn stream_holds_back_partial_characters() {
        let (vocab, config) = spm_vocab();
        let t = Tokenizer::new(&vocab, &config).unwrap();
        let mut s = t.stream(true);
        assert_eq!(s.push(3 + 0xC3), "");
        assert_eq!(s.push(3 + 0xA9), "é");
        assert_eq!(s.push(3 + 0xE2), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }

    #[test]
    fn bad_config_is_an_error() {
        let (vocab, mut config) = spm_vocab();
        config.bos_token_id = Some(100_000);
        assert!(matches!(
            Tokenizer::new(&vocab, &config),
            Err(ExecutionError::Tokenizer { .. })
        ));
        config.bos_token_id = None;
        config.kind = "ugm".into();
        assert!(Tokenizer::new(&vocab, &config).is_err());
    }
}
