//! Chat templates of the real models against transformers' `apply_chat_template`
//! (tests/fixtures/chat/templates.json, written by scripts/make_chat_fixtures.py):
//! SmolLM2's and the qwen2 test model's GGUF templates through the whole runtime
//! (import, `TextModel::chat_template` and `TextModel::render_chat`), Gemma-3's
//! missing template (the runtime's gemma preset, against llama.cpp's built-in
//! `gemma` template, which folds a system text into the first user turn as
//! Gemma's own template does), and the real templates of the
//! llama.cpp vocabulary GGUFs (phi-3, qwen2, command-r; gemma-4's, whose
//! tokenizer the runtime does not load, from the fixture) on our minijinja
//! renderer with those files' BOS/EOS texts. Every conversation with
//! and without the generation prompt must equal transformers' text exactly, and
//! where the template raises, ours must fail too.

mod generate_util;

use cyb_llm::generate::{ChatTemplate, Message, Preset, TextModel};
use cyb_llm::import::gguf;
use cyb_llm::tokenizer::Tokenizer;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn fixture() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat/templates.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/make_chat_fixtures.py)", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn conversations(fx: &Value) -> BTreeMap<String, Vec<Message>> {
    fx["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let messages = c["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
                .collect();
            (c["name"].as_str().unwrap().to_string(), messages)
        })
        .collect()
}

fn entry<'a>(fx: &'a Value, name: &str) -> &'a Value {
    fx["templates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name}: not in the fixture"))
}

/// Compares every render of `entry` with `template` (and, for a loaded model, with
/// `render_chat`, which renders with the generation prompt); returns the row count.
fn check_renders(
    name: &str,
    entry: &Value,
    template: &ChatTemplate,
    model: Option<&TextModel>,
    convs: &BTreeMap<String, Vec<Message>>,
) -> usize {
    let rows = entry["renders"].as_array().unwrap();
    assert!(!rows.is_empty(), "{name}: no renders in the fixture");
    let mut failed = Vec::new();
    for row in rows {
        let conv = row["conversation"].as_str().unwrap();
        let messages = &convs[conv];
        let gen = row["add_generation_prompt"].as_bool().unwrap();
        let ours = template.render(messages, gen);
        let what = format!("{name} {conv} (add_generation_prompt {gen})");
        match (row["text"].as_str(), &ours) {
            (Some(want), Ok(got)) if got == want => {}
            (Some(want), _) => failed.push(format!("{what}: expected {want:?}, got {ours:?}")),
            (None, Err(_)) => {}
            (None, Ok(got)) => failed.push(format!(
                "{what}: transformers raised {}, we rendered {got:?}",
                row["error"]
            )),
        }
        if let (Some(tm), Some(want), true) = (model, row["text"].as_str(), gen) {
            match tm.render_chat(messages) {
                Ok(got) if got == want => {}
                other => failed.push(format!(
                    "{what}: render_chat gave {other:?}, expected {want:?}"
                )),
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    rows.len()
}

#[test]
fn real_model_templates_equal_transformers() {
    let fx = fixture();
    let convs = conversations(&fx);
    for name in ["smollm2", "qwen2", "gemma3"] {
        let e = entry(&fx, name);
        let tm = generate_util::text_model(name);
        let template = tm.chat_template();
        match (e["template"].as_str(), template) {
            (Some(want), ChatTemplate::Jinja { source, .. }) => {
                assert_eq!(source, want, "{name}: imported template is not the GGUF's")
            }
            // The GGUF has no template (transformers has none either): the
            // runtime falls back to the preset its vocabulary's turn tokens name.
            (None, ChatTemplate::Preset { preset, .. }) => {
                assert_eq!(name, "gemma3", "{name}: no template in the fixture");
                assert_eq!(*preset, Preset::Gemma, "{name}: fallback preset");
            }
            (want, got) => panic!("{name}: fixture template {want:?}, ours {got:?}"),
        }
        let n = check_renders(name, e, template, Some(&tm), &convs);
        eprintln!("{name}: {n} renders equal transformers'");
    }
}

/// The fixture's template entries of one `kind` ("model", "vocab" or "template").
fn entries<'a>(fx: &'a Value, kind: &str) -> Vec<&'a Value> {
    fx["templates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == kind)
        .collect()
}

#[test]
fn llamacpp_vocab_templates_equal_transformers() {
    let fx = fixture();
    let convs = conversations(&fx);
    let vocabs: Vec<&Value> = entries(&fx, "vocab");
    assert!(vocabs.len() >= 3, "{} vocabulary templates", vocabs.len());
    for e in vocabs {
        let name = e["name"].as_str().unwrap();
        let path = generate_util::models_dir().join(e["gguf"].as_str().unwrap());
        assert!(
            path.is_file(),
            "{} is missing: run scripts/fetch-models.sh first",
            path.display()
        );
        let v = gguf::read_vocab(&path).unwrap();
        let source = v.chat_template.clone().expect("the GGUF has a template");
        assert_eq!(
            Some(source.as_str()),
            e["template"].as_str(),
            "{name}: template"
        );
        // BOS/EOS texts as TextModel::from_model takes them.
        let tok = Tokenizer::new(&v.vocab, &v.tokenizer).unwrap();
        let piece = |id: Option<u32>| id.map(|i| tok.token_to_piece(i)).unwrap_or_default();
        let bos = piece(tok.bos_id());
        let eos = piece(tok.eos_ids().first().copied());
        assert_eq!(Some(bos.as_str()), e["bos_token"].as_str(), "{name}: bos");
        assert_eq!(Some(eos.as_str()), e["eos_token"].as_str(), "{name}: eos");
        let template = ChatTemplate::Jinja { source, bos, eos };
        let n = check_renders(name, e, &template, None, &convs);
        eprintln!("{name}: {n} renders equal transformers'");
    }
}

/// Templates of vocabularies the runtime does not load (gemma-4's tokenizer):
/// our renderer alone, on the template and BOS/EOS texts transformers used.
#[test]
fn template_only_renders_equal_transformers() {
    let fx = fixture();
    let convs = conversations(&fx);
    let only: Vec<&Value> = entries(&fx, "template");
    assert!(!only.is_empty(), "no template-only entries");
    for e in only {
        let name = e["name"].as_str().unwrap();
        let text = |k: &str| e[k].as_str().unwrap().to_string();
        let template = ChatTemplate::Jinja {
            source: text("template"),
            bos: text("bos_token"),
            eos: text("eos_token"),
        };
        let n = check_renders(name, e, &template, None, &convs);
        eprintln!("{name}: {n} renders equal transformers'");
    }
}
