//! `tokenizer.json` (+ `tokenizer_config.json`, `generation_config.json`, `config.json`)
//! → the `vocab` section and `[tokenizer]`; the chat template; sampling defaults.
//!
//! - BPE with a `ByteLevel` pre-tokenizer → `bpe`, its split regex mapped to a preset of
//!   tokenizer.md (an unknown regex is an error that quotes it);
//! - BPE with `▁` for spaces (byte fallback) → `spm`, with the merges and scores that
//!   rank merge results like the merges (`-rank`);
//! - WordPiece → `wordpiece` with `lowercase` from the `BertNormalizer`.

use super::json::Json;
use crate::error::ImportError;
use crate::loader::config::{ChatSection, SamplingDefaults, TokenizerConfig};
use crate::loader::vocab::{token_type, Vocab};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// The vocabulary and `[tokenizer]` of a folder.
#[derive(Debug)]
pub struct TokenizerOut {
    /// The `vocab` section.
    pub vocab: Vocab,
    /// `[tokenizer]` of the config section.
    pub config: TokenizerConfig,
}

const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// DeepSeek LLM's split sequence (llama.cpp `LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM`), before
/// the digits step.
const DEEPSEEK_LLM: [&str; 5] = [
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟\u{3000}-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-\u{d7ff}]+",
];

fn unsupported(path: &Path, reason: String) -> ImportError {
    ImportError::Unsupported {
        path: path.to_path_buf(),
        reason,
    }
}

fn format(path: &Path, reason: String) -> ImportError {
    ImportError::Format {
        path: path.to_path_buf(),
        reason,
    }
}

/// The steps of a (possibly `Sequence`) pre-tokenizer or normalizer; `null` is none.
fn steps<'a>(v: Option<&'a Value>, list_key: &str) -> Vec<&'a Value> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(v) if v.get("type").and_then(Value::as_str) == Some("Sequence") => v
            .get(list_key)
            .and_then(Value::as_array)
            .map(|l| l.iter().collect())
            .unwrap_or_default(),
        Some(v) => vec![v],
    }
}

fn kind(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("?")
}

/// Escapes literal CR / LF so regexes written either way compare equal.
fn canon_regex(r: &str) -> String {
    r.replace('\r', "\\r").replace('\n', "\\n")
}

/// The `pre` preset of a byte-level BPE pre-tokenizer.
fn byte_level_preset(path: &Path, pre: &[&Value]) -> Result<String, ImportError> {
    let Some((last, before)) = pre.split_last() else {
        return Err(unsupported(
            path,
            "byte-level BPE without a ByteLevel pre-tokenizer".into(),
        ));
    };
    if kind(last) != "ByteLevel" {
        return Err(unsupported(
            path,
            format!(
                "pre-tokenizer sequence ending in `{}` (expected ByteLevel last)",
                kind(last)
            ),
        ));
    }
    if last.get("add_prefix_space").and_then(Value::as_bool) == Some(true) {
        return Err(unsupported(
            path,
            "ByteLevel pre-tokenizer with add_prefix_space = true".into(),
        ));
    }
    let digits = |v: &Value, individual: bool| {
        kind(v) == "Digits"
            && v.get("individual_digits").and_then(Value::as_bool) == Some(individual)
    };
    if last
        .get("use_regex")
        .and_then(Value::as_bool)
        .unwrap_or(true)
    {
        return match before {
            [] => Ok("gpt2".into()),
            [d] if digits(d, true) => Ok("smollm".into()),
            [other, ..] => Err(unsupported(
                path,
                format!(
                    "pre-tokenizer `{}` before a regex ByteLevel matches no preset",
                    kind(other)
                ),
            )),
        };
    }
    let mut regexes = Vec::new();
    for (i, step) in before.iter().enumerate() {
        if i + 1 == before.len() && digits(step, false) {
            regexes.push(r"\p{N}+".to_string());
            continue;
        }
        let pattern = step
            .get("pattern")
            .and_then(|p| p.get("Regex"))
            .and_then(Value::as_str);
        let isolated = step.get("behavior").and_then(Value::as_str) == Some("Isolated")
            && step.get("invert").and_then(Value::as_bool) != Some(true);
        match (kind(step), pattern, isolated) {
            ("Split", Some(r), true) => regexes.push(canon_regex(r)),
            _ => {
                return Err(unsupported(
                    path,
                    format!("pre-tokenizer step {step} matches no preset (gpt2, llama3, qwen2, smollm, deepseek-llm)"),
                ))
            }
        }
    }
    let mut deepseek: Vec<String> = DEEPSEEK_LLM.iter().map(|r| canon_regex(r)).collect();
    deepseek.push(r"\p{N}+".into());
    let found = match regexes.as_slice() {
        [r] if r == GPT2 => "gpt2",
        [r] if r == LLAMA3 => "llama3",
        [r] if r == QWEN2 => "qwen2",
        rs if rs == deepseek.as_slice() => "deepseek-llm",
        rs => {
            return Err(unsupported(
                path,
                format!(
                    "pre-tokenizer regex {} matches no preset (gpt2, llama3, qwen2, smollm, deepseek-llm)",
                    rs.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ")
                ),
            ))
        }
    };
    Ok(found.into())
}

/// Whether an SPM-style tokenizer prepends `▁` to the input. A `Split` on `" "` (Gemma's
/// tokenizer.json) is accepted after a normalizer that replaced every space with `▁`,
/// where it can no longer split anything.
fn spm_space_prefix(path: &Path, tj: &Json) -> Result<bool, ImportError> {
    let mut prefix = false;
    let mut spaces_replaced = false;
    for n in steps(tj.get("normalizer"), "normalizers") {
        let content = n.get("content").and_then(Value::as_str);
        let pattern = n
            .get("pattern")
            .and_then(|p| p.get("String"))
            .and_then(Value::as_str);
        match (kind(n), pattern, content) {
            ("Replace", Some(" "), Some("▁")) => spaces_replaced = true,
            ("Prepend", _, _) if n.get("prepend").and_then(Value::as_str) == Some("▁") => {
                prefix = true
            }
            _ => return Err(unsupported(path, format!("SPM-style normalizer {n}"))),
        }
    }
    for p in steps(tj.get("pre_tokenizer"), "pretokenizers") {
        let scheme = p.get("prepend_scheme").and_then(Value::as_str);
        let legacy = p.get("add_prefix_space").and_then(Value::as_bool);
        let split_on_space = p
            .get("pattern")
            .and_then(|x| x.get("String"))
            .and_then(Value::as_str)
            == Some(" ");
        match kind(p) {
            "Metaspace" if p.get("split").and_then(Value::as_bool) != Some(true) => {
                prefix |= matches!(scheme, Some("first" | "always")) || legacy == Some(true)
            }
            "Split" if split_on_space && spaces_replaced => {}
            _ => return Err(unsupported(path, format!("SPM-style pre-tokenizer {p}"))),
        }
    }
    Ok(prefix)
}

/// BPE merges in either tokenizer.json form (`"a b"` or `["a", "b"]`).
fn merges(path: &Path, model: &Json) -> Result<Vec<(String, String)>, ImportError> {
    let Some(list) = model.get("merges") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| model.bad("merges", "a list"))?;
    list.iter()
        .enumerate()
        .map(|(rank, m)| {
            let pair = match m {
                Value::String(s) => s.split_once(' ').filter(|(_, b)| !b.contains(' ')),
                Value::Array(a) if a.len() == 2 => a[0].as_str().zip(a[1].as_str()),
                _ => None,
            };
            pair.map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| {
                    format(
                        path,
                        format!("model.merges[{rank}] = {m} is not a pair of pieces"),
                    )
                })
        })
        .collect()
}

/// Reads the tokenizer of folder `dir` whose embedding has `vocab_size` rows.
pub fn read(dir: &Path, cfg: &Json, vocab_size: usize) -> Result<TokenizerOut, ImportError> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Err(format(
            &path,
            "missing: the importer needs tokenizer.json (vocab.txt or tokenizer.model alone are not read)".into(),
        ));
    }
    let tj = Json::read(&path)?;
    let tc = Json::read_opt(&dir.join("tokenizer_config.json"))?;
    let gc = Json::read_opt(&dir.join("generation_config.json"))?;
    let model = tj.object("model").ok_or_else(|| tj.missing("model", ""))?;
    let model_type = model.str("type")?.unwrap_or("?").to_string();

    let mut pieces: Vec<Option<String>> = Vec::new();
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut types: Vec<u8> = Vec::new();
    let mut place = |piece: &str, id: u64, ty: u8| -> Result<(), ImportError> {
        let i = usize::try_from(id)
            .ok()
            .filter(|&i| i < vocab_size)
            .ok_or_else(|| {
                format(
                    &path,
                    format!(
                        "token `{piece}` has id {id}, beyond config.json vocab_size {vocab_size}"
                    ),
                )
            })?;
        if i >= pieces.len() {
            pieces.resize(i + 1, None);
            types.resize(i + 1, token_type::NORMAL);
        }
        match &pieces[i] {
            Some(p) if p != piece => {
                return Err(format(
                    &path,
                    format!("id {id} is both `{p}` and `{piece}`"),
                ))
            }
            _ => pieces[i] = Some(piece.to_string()),
        }
        if ty != token_type::NORMAL {
            types[i] = ty;
        }
        ids.entry(piece.to_string()).or_insert(i as u32);
        Ok(())
    };
    let vocab_obj = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| model.missing("vocab", " (an object: piece -> id)"))?;
    for (piece, id) in vocab_obj {
        let id = id
            .as_u64()
            .ok_or_else(|| format(&path, format!("model.vocab[`{piece}`] is not an id")))?;
        place(piece, id, token_type::NORMAL)?;
    }
    for t in tj
        .get("added_tokens")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let content = t.get("content").and_then(Value::as_str);
        let id = t.get("id").and_then(Value::as_u64);
        let (Some(content), Some(id)) = (content, id) else {
            return Err(format(
                &path,
                format!("added_tokens entry {t} needs `id` and `content`"),
            ));
        };
        if id >= vocab_size as u64 {
            tracing::warn!(
                "{}: added token `{content}` (id {id}) lies beyond vocab_size {vocab_size} and has no embedding row: dropped",
                path.display()
            );
            continue;
        }
        let special = t.get("special").and_then(Value::as_bool).unwrap_or(false);
        place(
            content,
            id,
            if special {
                token_type::CONTROL
            } else {
                token_type::USER_DEFINED
            },
        )?;
    }

    let mut config = TokenizerConfig::default();
    let mut vocab = Vocab::default();
    let pre = steps(tj.get("pre_tokenizer"), "pretokenizers");
    match model_type.as_str() {
        "BPE" => {
            for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
                if let Some(v) = model.str(key)?.filter(|v| !v.is_empty()) {
                    return Err(unsupported(&path, format!("BPE with {key} `{v}`")));
                }
            }
            vocab.merges = merges(&path, &model)?;
            let byte_level = pre.iter().any(|p| kind(p) == "ByteLevel")
                || tj.get("decoder").is_some_and(|d| kind(d) == "ByteLevel");
            if byte_level {
                for n in steps(tj.get("normalizer"), "normalizers") {
                    if kind(n) != "NFC" {
                        return Err(unsupported(
                            &path,
                            format!("normalizer `{}` for byte-level BPE", kind(n)),
                        ));
                    }
                }
                config.kind = "bpe".into();
                config.pre = Some(byte_level_preset(&path, &pre)?);
            } else {
                let prefix = spm_space_prefix(&path, &tj)?;
                config.kind = "spm".into();
                config
                    .extra
                    .insert("add_space_prefix".into(), toml::Value::Boolean(prefix));
                if model.bool("byte_fallback")? == Some(true) {
                    for b in 0..=255u8 {
                        if let Some(&id) = ids.get(&format!("<0x{b:02X}>")) {
                            types[id as usize] = token_type::BYTE;
                        }
                    }
                }
            }
        }
        "WordPiece" => {
            let prefix = model.str("continuing_subword_prefix")?.unwrap_or("##");
            if prefix != "##" {
                return Err(unsupported(
                    &path,
                    format!("WordPiece continuing_subword_prefix `{prefix}`"),
                ));
            }
            let norm = steps(tj.get("normalizer"), "normalizers");
            let (lowercase, strip) = match norm.as_slice() {
                [] => (false, false),
                [n] if kind(n) == "BertNormalizer" => {
                    let lower = n.get("lowercase").and_then(Value::as_bool).unwrap_or(true);
                    (
                        lower,
                        n.get("strip_accents")
                            .and_then(Value::as_bool)
                            .unwrap_or(lower),
                    )
                }
                _ => {
                    return Err(unsupported(
                        &path,
                        "WordPiece normalizer other than BertNormalizer".into(),
                    ))
                }
            };
            if strip != lowercase {
                config
                    .extra
                    .insert("strip_accents".into(), toml::Value::Boolean(strip));
            }
            if !matches!(pre.as_slice(), [p] if kind(p) == "BertPreTokenizer") {
                return Err(unsupported(
                    &path,
                    "WordPiece pre-tokenizer other than BertPreTokenizer".into(),
                ));
            }
            config.kind = "wordpiece".into();
            config.lowercase = Some(lowercase);
        }
        other => {
            return Err(unsupported(
                &path,
                format!("tokenizer model type `{other}` (BPE and WordPiece are supported)"),
            ))
        }
    }

    // Special ids.
    let lookup = |j: &Json, key: &str| -> Result<Option<u32>, ImportError> {
        match j.token(key)? {
            None => Ok(None),
            Some(t) => ids.get(t).copied().map(Some).ok_or_else(|| {
                format(&j.path, format!("`{key}` = `{t}` is not in the vocabulary"))
            }),
        }
    };
    let first_id = |key: &str| -> Result<Option<u32>, ImportError> {
        for j in [gc.as_ref(), Some(cfg)].into_iter().flatten() {
            if let Some(&id) = j.ids(key)?.first() {
                return Ok(Some(id));
            }
        }
        Ok(None)
    };
    let from_tc = |key: &str| -> Result<Option<u32>, ImportError> {
        match &tc {
            Some(tc) => lookup(tc, key),
            None => Ok(None),
        }
    };
    config.bos_token_id = match from_tc("bos_token")? {
        Some(id) => Some(id),
        None => first_id("bos_token_id")?,
    };
    let mut eos = Vec::new();
    for j in [gc.as_ref(), Some(cfg)].into_iter().flatten() {
        eos.extend(j.ids("eos_token_id")?);
    }
    eos.extend(from_tc("eos_token")?);
    for id in eos {
        if !config.eos_token_ids.contains(&id) {
            config.eos_token_ids.push(id);
        }
    }
    config.pad_token_id = match from_tc("pad_token")? {
        Some(id) => Some(id),
        None => first_id("pad_token_id")?,
    };
    config.unk_token_id = match from_tc("unk_token")? {
        Some(id) => Some(id),
        None => match model.str("unk_token")? {
            Some(t) => ids.get(t).copied(),
            None => None,
        },
    };
    for (key, out) in [("cls_token", "cls_token_id"), ("sep_token", "sep_token_id")] {
        if let Some(id) = from_tc(key)? {
            config
                .extra
                .insert(out.into(), toml::Value::Integer(id.into()));
        }
    }
    if let Some(tc) = &tc {
        config.add_bos = tc.bool("add_bos_token")?;
        config.add_eos = tc.bool("add_eos_token")?;
    }
    if config.add_bos.is_none() && config.kind != "wordpiece" {
        config.add_bos = Some(post_processor_adds_bos(&tj, &pieces, config.bos_token_id));
    }
    let n = vocab_size;
    let named = [
        config.bos_token_id,
        config.pad_token_id,
        config.unk_token_id,
    ];
    for id in config.eos_token_ids.iter().chain(named.iter().flatten()) {
        if *id as usize >= n {
            return Err(format(
                dir,
                format!("special token id {id} is beyond vocab_size {n}"),
            ));
        }
    }
    pieces.resize(n, None);
    types.resize(n, token_type::NORMAL);
    if let Some(u) = config.unk_token_id {
        types[u as usize] = token_type::UNKNOWN;
    }
    vocab.tokens = pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            p.unwrap_or_else(|| {
                types[i] = token_type::UNUSED;
                format!("[PAD{i}]")
            })
        })
        .collect();
    if config.kind == "spm" {
        vocab.scores = Some(spm_scores(&vocab, &ids));
    }
    if types.iter().any(|&t| t != token_type::NORMAL) {
        vocab.types = Some(types);
    }
    Ok(TokenizerOut { vocab, config })
}

/// Scores that make SPM merging by score pick merges in BPE rank order: the result of the
/// merge of rank `r` scores `-r`; every other piece scores below all merges.
fn spm_scores(vocab: &Vocab, ids: &HashMap<String, u32>) -> Vec<f32> {
    let floor = -(vocab.merges.len() as f32) - 1.0;
    let mut scores = vec![floor; vocab.tokens.len()];
    for (rank, (a, b)) in vocab.merges.iter().enumerate() {
        if let Some(&id) = ids.get(&format!("{a}{b}")) {
            let s = &mut scores[id as usize];
            *s = s.max(-(rank as f32));
        }
    }
    scores
}

/// Whether the post-processor's single-sequence template starts with the bos token.
fn post_processor_adds_bos(tj: &Json, pieces: &[Option<String>], bos: Option<u32>) -> bool {
    let Some(bos) = bos.and_then(|b| pieces.get(b as usize).cloned().flatten()) else {
        return false;
    };
    steps(tj.get("post_processor"), "processors")
        .iter()
        .any(|p| {
            kind(p) == "TemplateProcessing"
                && p.get("single")
                    .and_then(Value::as_array)
                    .and_then(|s| s.first())
                    .and_then(|f| f.get("SpecialToken"))
                    .and_then(|t| t.get("id"))
                    .and_then(Value::as_str)
                    == Some(bos.as_str())
        })
}

/// The chat template: `chat_template` of tokenizer_config.json (a string, or a list of
/// named templates: `default`), else `chat_template.jinja`, else `chat_template.json`.
pub fn chat(dir: &Path) -> Result<Option<ChatSection>, ImportError> {
    let template = |t: String| {
        Some(ChatSection {
            template: Some(t),
            ..Default::default()
        })
    };
    if let Some(tc) = Json::read_opt(&dir.join("tokenizer_config.json"))? {
        match tc.get("chat_template") {
            None => {}
            Some(Value::String(s)) => return Ok(template(s.clone())),
            Some(Value::Array(list)) => {
                let named = |n: &str| {
                    list.iter()
                        .find(|e| e.get("name").and_then(Value::as_str) == Some(n))
                        .and_then(|e| e.get("template"))
                        .and_then(Value::as_str)
                };
                let t = named("default")
                    .or_else(|| {
                        list.first()
                            .and_then(|e| e.get("template"))
                            .and_then(Value::as_str)
                    })
                    .ok_or_else(|| {
                        tc.bad(
                            "chat_template",
                            "a template string or a list of {name, template}",
                        )
                    })?;
                return Ok(template(t.to_string()));
            }
            Some(_) => {
                return Err(tc.bad(
                    "chat_template",
                    "a template string or a list of {name, template}",
                ))
            }
        }
    }
    let jinja = dir.join("chat_template.jinja");
    if jinja.is_file() {
        let t = std::fs::read_to_string(&jinja).map_err(|source| ImportError::Io {
            path: jinja,
            source,
        })?;
        return Ok(template(t));
    }
    if let Some(j) = Json::read_opt(&dir.join("chat_template.json"))? {
        if let Some(t) = j.str("chat_template")? {
            return Ok(template(t.to_string()));
        }
    }
    Ok(None)
}

/// `[sampling]` from generation_config.json (`do_sample = false` means greedy: temperature 0).
pub fn sampling(dir: &Path) -> Result<Option<SamplingDefaults>, ImportError> {
    let Some(gc) = Json::read_opt(&dir.join("generation_config.json"))? else {
        return Ok(None);
    };
    let mut s = SamplingDefaults::default();
    if gc.bool("do_sample")? == Some(false) {
        s.temperature = Some(0.0);
    } else {
        s.temperature = gc.f64("temperature")?;
        s.top_k = gc.usize("top_k")?.map(|k| k as i64);
        s.top_p = gc.f64("top_p")?;
        s.min_p = gc.f64("min_p")?;
        s.repeat_penalty = gc.f64("repetition_penalty")?;
    }
    Ok((s != SamplingDefaults::default()).then_some(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn preset(pre: Value) -> Result<String, ImportError> {
        byte_level_preset(
            Path::new("tokenizer.json"),
            &steps(Some(&pre), "pretokenizers"),
        )
    }

    fn byte_level(use_regex: bool) -> Value {
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex})
    }

    fn split(r: &str) -> Value {
        json!({"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": false})
    }

    #[test]
    fn byte_level_presets_are_recognised() {
        assert_eq!(preset(byte_level(true)).unwrap(), "gpt2");
        let digits = json!({"type": "Digits", "individual_digits": true});
        let smol = json!({"type": "Sequence", "pretokenizers": [digits, byte_level(true)]});
        assert_eq!(preset(smol).unwrap(), "smollm");
        for (r, want) in [(QWEN2, "qwen2"), (LLAMA3, "llama3"), (GPT2, "gpt2")] {
            let seq = json!({"type": "Sequence", "pretokenizers": [split(r), byte_level(false)]});
            assert_eq!(preset(seq).unwrap(), want);
        }
        let mut list: Vec<Value> = DEEPSEEK_LLM.iter().map(|r| split(r)).collect();
        list.push(json!({"type": "Digits", "individual_digits": false}));
        list.push(byte_level(false));
        let deepseek = json!({"type": "Sequence", "pretokenizers": list});
        assert_eq!(preset(deepseek).unwrap(), "deepseek-llm");
        // The first DeepSeek regex written with escapes instead of literal CR / LF.
        list = DEEPSEEK_LLM.iter().map(|r| split(r)).collect();
        list[0] = split("[\\r\\n]");
        list.push(split("\\p{N}+"));
        list.push(byte_level(false));
        let deepseek = json!({"type": "Sequence", "pretokenizers": list});
        assert_eq!(preset(deepseek).unwrap(), "deepseek-llm");
    }

    #[test]
    fn unknown_pre_tokenizers_are_errors_that_name_them() {
        let seq = json!({"type": "Sequence", "pretokenizers": [split("\\w+"), byte_level(false)]});
        let e = preset(seq).unwrap_err();
        assert!(
            matches!(e, ImportError::Unsupported { .. }) && e.to_string().contains("`\\w+`"),
            "{e}"
        );
        let e = preset(json!({"type": "Whitespace"})).unwrap_err();
        assert!(e.to_string().contains("Whitespace"), "{e}");
        let prefix = json!({"type": "ByteLevel", "add_prefix_space": true});
        assert!(preset(prefix)
            .unwrap_err()
            .to_string()
            .contains("add_prefix_space"));
    }

    #[test]
    fn spm_space_prefix_follows_prepend_and_metaspace() {
        let read = |v: Value| {
            spm_space_prefix(
                Path::new("t"),
                &Json::parse(Path::new("t"), &v.to_string()).unwrap(),
            )
        };
        let llama2 = json!({"normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}, "pre_tokenizer": null});
        assert!(read(llama2).unwrap());
        let meta = json!({"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}});
        assert!(read(meta).unwrap());
        let never = json!({"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": false}});
        assert!(!read(never).unwrap());
        let gemma = json!({"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
            "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false}});
        assert!(!read(gemma).unwrap());
        let split_only = json!({"pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated"}});
        assert!(
            read(split_only).is_err(),
            "a Split on spaces that still sees spaces changes tokenization"
        );
        let nfkc = json!({"normalizer": {"type": "NFKC"}});
        assert!(read(nfkc).is_err());
    }
}
