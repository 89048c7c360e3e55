//! Builds the `tokenizers` pipeline (normalizer, pre-tokenizer, model) for one
//! vocabulary type. Special tokens are not registered here: [`super::Tokenizer`]
//! splits them out first, as llama.cpp does, and hands the text between them to
//! this pipeline.

use crate::loader::vocab::{token_type, Vocab};
use std::collections::HashMap;
use tokenizers::models::bpe::{BpeBuilder, Vocab as PieceIds};
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::{BertNormalizer, Replace};
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{PreTokenizerWrapper, SplitDelimiterBehavior};

/// GPT-2's split regex (as Hugging Face's ByteLevel pre-tokenizer uses it).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Llama 3's split regex (tokenizer.json).
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split regex (tokenizer.json): Llama 3's with single digits.
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// DeepSeek LLM's split sequence (llama.cpp's llama-vocab.cpp, from tokenizer.json).
/// Non-ASCII characters are escaped so that no editor normalizes them (NFC would
/// turn some range ends into other code points).
const DEEPSEEK_LLM: [&str; 6] = [
    "[\r\n]",
    "\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+",
    "\\s?[!-/:-~\u{FF01}-\u{FF0F}\u{FF1A}-\u{FF5E}\u{2018}-\u{201F}\u{3000}-\u{3002}]+",
    "\\s+$",
    "[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]+",
    "\\p{N}+",
];
/// llama.cpp's regex sequence for `pre = "default"` byte-level BPE.
const DEFAULT: [&str; 4] = [
    r"[\p{P}\$\+<=>\^~\|]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"\p{N}+",
    "[0-9][0-9][0-9]",
];

/// The split regexes of byte-level BPE preset `pre` and whether whole-word vocabulary
/// hits skip the merges (`ignore_merges`), or `None` for an unknown preset.
pub fn bpe_preset(pre: &str) -> Option<(Vec<&'static str>, bool)> {
    Some(match pre {
        "gpt2" | "gpt-2" | "whisper" | "mpt" | "olmo" | "phi-2" => (vec![GPT2], false),
        "llama3" | "llama-bpe" | "llama-v3" => (vec![LLAMA3], true),
        "dbrx" | "smaug-bpe" => (vec![LLAMA3], false),
        "qwen2" | "deepseek-r1-qwen" | "stablelm2" => (vec![QWEN2], false),
        "smollm" | "starcoder" | "refact" | "command-r" => (vec![r"\p{N}", GPT2], false),
        "deepseek-llm" => (DEEPSEEK_LLM.to_vec(), false),
        "default" => (DEFAULT.to_vec(), false),
        _ => return None,
    })
}

fn split(regex: &str) -> Result<PreTokenizerWrapper, String> {
    Split::new(
        SplitPattern::Regex(regex.into()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map(PreTokenizerWrapper::Split)
    .map_err(|e| format!("bad split regex {regex:?}: {e}"))
}

/// Piece → id; on duplicate pieces the first id wins.
fn piece_ids(vocab: &Vocab) -> PieceIds {
    let mut map = PieceIds::default();
    map.reserve(vocab.tokens.len());
    for (id, piece) in vocab.tokens.iter().enumerate() {
        map.entry(piece.clone()).or_insert(id as u32);
    }
    map
}

/// Byte-level BPE: split regexes, then the GPT-2 byte mapping, then merges.
pub fn byte_level_bpe(vocab: &Vocab, pre: &str) -> Result<tokenizers::Tokenizer, String> {
    let (regexes, ignore_merges) = bpe_preset(pre)
        .ok_or_else(|| format!("unknown pre-tokenizer preset `{pre}` (see tokenizer.md)"))?;
    let ids = piece_ids(vocab);
    let merges = known_merges(vocab, &ids);
    let model = BpeBuilder::new()
        .vocab_and_merges(ids, merges)
        .ignore_merges(ignore_merges)
        .build()
        .map_err(|e| format!("cannot build the BPE model: {e}"))?;
    let mut steps = regexes
        .into_iter()
        .map(split)
        .collect::<Result<Vec<_>, _>>()?;
    steps.push(PreTokenizerWrapper::ByteLevel(ByteLevel::new(
        false, false, false,
    )));
    let mut tok = tokenizers::Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Sequence::new(steps)));
    Ok(tok)
}

/// The vocabulary's merges whose parts and result are all pieces.
fn known_merges(vocab: &Vocab, ids: &PieceIds) -> Vec<(String, String)> {
    vocab
        .merges
        .iter()
        .filter(|(a, b)| {
            ids.contains_key(a) && ids.contains_key(b) && ids.contains_key(&format!("{a}{b}"))
        })
        .cloned()
        .collect()
}

/// SPM merges derived from scores: every split of a normal piece into two normal pieces,
/// ordered by the score of the merged piece (highest first, as llama.cpp's SPM tokenizer
/// picks them).
fn merges_from_scores(vocab: &Vocab, ids: &PieceIds) -> Vec<(String, String)> {
    let scores = vocab.scores.as_deref();
    let score = |id: usize| scores.and_then(|s| s.get(id).copied()).unwrap_or(0.0);
    let normal = |p: &str| {
        ids.get(p)
            .is_some_and(|&i| vocab.token_type(i as usize) == token_type::NORMAL)
    };
    let mut ranked: Vec<(f32, u32, usize, &str, &str)> = Vec::new();
    for (id, piece) in vocab.tokens.iter().enumerate() {
        if vocab.token_type(id) != token_type::NORMAL || ids.get(piece) != Some(&(id as u32)) {
            continue;
        }
        for (at, _) in piece.char_indices().skip(1) {
            let (l, r) = piece.split_at(at);
            if normal(l) && normal(r) {
                ranked.push((score(id), id as u32, at, l, r));
            }
        }
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    ranked
        .into_iter()
        .map(|(_, _, _, l, r)| (l.to_string(), r.to_string()))
        .collect()
}

/// SentencePiece-style BPE: `" "` → `"▁"`, byte fallback; the vocabulary's own merges
/// when it has them (Hugging Face imports), else merges derived from the scores.
pub fn spm(vocab: &Vocab, unk: Option<u32>) -> Result<tokenizers::Tokenizer, String> {
    let ids = piece_ids(vocab);
    let merges = if vocab.merges.is_empty() {
        merges_from_scores(vocab, &ids)
    } else {
        known_merges(vocab, &ids)
    };
    let mut builder = BpeBuilder::new()
        .vocab_and_merges(ids, merges)
        .byte_fallback(true);
    if let Some(piece) = unk.and_then(|u| vocab.tokens.get(u as usize)) {
        builder = builder.unk_token(piece.clone()).fuse_unk(true);
    }
    let model = builder
        .build()
        .map_err(|e| format!("cannot build the SPM model: {e}"))?;
    let mut tok = tokenizers::Tokenizer::new(model);
    let replace = Replace::new(" ", "\u{2581}").map_err(|e| e.to_string())?;
    tok.with_normalizer(Some(replace))
        .map_err(|e| e.to_string())?;
    Ok(tok)
}

/// BERT WordPiece: Bert normalizer and pre-tokenizer, `##` continuations.
pub fn wordpiece(
    vocab: &Vocab,
    unk: Option<u32>,
    lowercase: bool,
    strip_accents: bool,
) -> Result<tokenizers::Tokenizer, String> {
    let unk = unk
        .and_then(|u| vocab.tokens.get(u as usize).cloned())
        .unwrap_or_else(|| "[UNK]".into());
    let model = WordPiece::builder()
        .vocab(piece_ids(vocab))
        .unk_token(unk)
        .continuing_subword_prefix("##".into())
        .build()
        .map_err(|e| format!("cannot build the WordPiece model: {e}"))?;
    let mut tok = tokenizers::Tokenizer::new(model);
    tok.with_normalizer(Some(BertNormalizer::new(
        true,
        true,
        Some(strip_accents),
        lowercase,
    )))
    .map_err(|e| e.to_string())?;
    tok.with_pre_tokenizer(Some(BertPreTokenizer));
    Ok(tok)
}

/// GPT-2's byte → char map, inverted: char → byte.
pub fn byte_decoder() -> HashMap<char, u8> {
    let mut printable: Vec<u8> = (b'!'..=b'~').collect();
    printable.extend(0xA1u8..=0xAC);
    printable.extend(0xAEu8..=0xFF);
    let mut map = HashMap::with_capacity(256);
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let c = if printable.contains(&b) {
            char::from(b)
        } else {
            extra += 1;
            char::from_u32(255 + extra).unwrap_or('\u{FFFD}')
        };
        map.insert(c, b);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_covers_every_byte_once() {
        let m = byte_decoder();
        assert_eq!(m.len(), 256);
        assert_eq!(m[&'\u{120}'], b' ');
        assert_eq!(m[&'\u{10A}'], b'\n');
        assert_eq!(m[&'a'], b'a');
    }

    #[test]
    fn every_preset_compiles() {
        for pre in [
            "gpt2",
            "llama3",
            "qwen2",
            "smollm",
            "deepseek-llm",
            "starcoder",
            "whisper",
            "default",
        ] {
            let (regexes, _) = bpe_preset(pre).unwrap();
            for r in regexes {
                split(r).unwrap();
            }
        }
        assert!(bpe_preset("nope").is_none());
    }
}
