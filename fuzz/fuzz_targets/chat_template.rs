//! The chat-template renderer (minijinja with the Hugging Face conventions) on
//! an arbitrary template: the input is split at `SEPARATOR` into the template
//! and a message text. Rendering must give text or an `ExecutionError`, never a
//! panic, a hang or an absurd allocation. Seeds: fuzz/seeds/chat_template
//! (scripts/make_fuzz_seeds.py); `scripts/fuzz.sh chat_template`.
#![no_main]

use cyb_llm::generate::chat::{ChatTemplate, Message};
use libfuzzer_sys::fuzz_target;

/// Separates the template from the message text (in fuzz/chat.dict too).
const SEPARATOR: &str = "\n##cyb-messages##\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (source, content) = text.split_once(SEPARATOR).unwrap_or((text, "Hi there"));
    let template = ChatTemplate::Jinja {
        source: source.to_string(),
        bos: "<s>".into(),
        eos: "</s>".into(),
    };
    let messages = [
        Message::new("system", "Be brief."),
        Message::new("user", content),
        Message::new("assistant", content),
        Message::new("user", "And?"),
    ];
    for generation_prompt in [true, false] {
        let _ = template.render(&messages, generation_prompt);
    }
});
