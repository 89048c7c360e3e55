//! Chat templates (tokenizer.md): the model's own Jinja template rendered with
//! minijinja, or a preset format; and the end-of-turn token of each.

use crate::error::ExecutionError;
use crate::loader::Model;
use serde::Serialize;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message of `role` with `content`.
    pub fn new(role: &str, content: &str) -> Self {
        Message {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// A preset chat format (format.md `chat.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// `<|im_start|>{role}\n{content}<|im_end|>\n`.
    ChatMl,
    /// `<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>`, BOS first.
    Llama3,
    /// `<start_of_turn>{role}\n{content}<end_of_turn>\n`, BOS first, assistant named
    /// `model`, contents trimmed. Gemma has no system role: system texts go in front
    /// of the next user turn, followed by a blank line (Gemma's own template and
    /// llama.cpp's `gemma` do the same).
    Gemma,
    /// `[INST] {content} [/INST]`.
    Mistral,
    /// `<|{role}|>\n{content}<|end|>\n`.
    Phi3,
    /// The prompt unchanged.
    Plain,
}

impl Preset {
    /// Parses a `chat.format` name.
    pub fn parse(name: &str) -> Option<Preset> {
        Some(match name {
            "chatml" => Preset::ChatMl,
            "llama3" => Preset::Llama3,
            "gemma" => Preset::Gemma,
            "mistral" => Preset::Mistral,
            "phi3" => Preset::Phi3,
            "plain" => Preset::Plain,
            _ => return None,
        })
    }

    /// The piece ending an assistant turn (a stop token), if the format has one.
    pub fn end_of_turn(self) -> Option<&'static str> {
        match self {
            Preset::ChatMl => Some("<|im_end|>"),
            Preset::Llama3 => Some("<|eot_id|>"),
            Preset::Gemma => Some("<end_of_turn>"),
            Preset::Phi3 => Some("<|end|>"),
            Preset::Mistral | Preset::Plain => None,
        }
    }

    fn render(self, messages: &[Message], add_generation_prompt: bool, bos: &str) -> String {
        let mut out = String::new();
        match self {
            Preset::ChatMl => {
                for m in messages {
                    out += &format!("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
                }
                if add_generation_prompt {
                    out += "<|im_start|>assistant\n";
                }
            }
            Preset::Llama3 => {
                out += bos;
                for m in messages {
                    out += &format!(
                        "<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>",
                        m.role, m.content
                    );
                }
                if add_generation_prompt {
                    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
                }
            }
            Preset::Gemma => {
                out += bos;
                let mut system = String::new();
                for m in messages {
                    if m.role == "system" {
                        system += m.content.trim();
                        continue;
                    }
                    let role = if m.role == "assistant" {
                        "model"
                    } else {
                        &m.role
                    };
                    out += &format!("<start_of_turn>{role}\n");
                    if role != "model" && !system.is_empty() {
                        out += &system;
                        out += "\n\n";
                        system.clear();
                    }
                    out += &format!("{}<end_of_turn>\n", m.content.trim());
                }
                if add_generation_prompt {
                    out += "<start_of_turn>model\n";
                }
            }
            Preset::Mistral => {
                for m in messages {
                    if m.role == "assistant" {
                        out += &format!(" {}", m.content);
                    } else {
                        out += &format!("[INST] {} [/INST]", m.content);
                    }
                }
            }
            Preset::Phi3 => {
                for m in messages {
                    out += &format!("<|{}|>\n{}<|end|>\n", m.role, m.content);
                }
                if add_generation_prompt {
                    out += "<|assistant|>\n";
                }
            }
            Preset::Plain => {
                let parts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
                out += &parts.join("\n");
            }
        }
        out
    }
}

/// How a conversation becomes prompt text.
#[derive(Debug, Clone)]
pub enum ChatTemplate {
    /// The model's Jinja template (Hugging Face conventions).
    Jinja {
        /// Template source.
        source: String,
        /// Text of the BOS token (`bos_token` in the template).
        bos: String,
        /// Text of the first EOS token (`eos_token`).
        eos: String,
    },
    /// A preset format.
    Preset {
        /// Which format.
        preset: Preset,
        /// Text of the BOS token (formats that start with it).
        bos: String,
    },
}

fn template_error(reason: String) -> ExecutionError {
    ExecutionError::Tokenizer { reason }
}

impl ChatTemplate {
    /// The template of `model`: `chat.template`, else `chat.format`, else a preset
    /// recognised from the vocabulary's turn tokens (`<|im_start|>`,
    /// `<start_of_turn>`, `<|start_header_id|>`), else `plain`. `bos`/`eos` are
    /// the texts of those tokens.
    pub fn for_model(model: &Model, bos: &str, eos: &str) -> Result<ChatTemplate, ExecutionError> {
        let chat = model.chat.as_ref();
        if let Some(source) = chat.and_then(|c| c.template.clone()) {
            return Ok(ChatTemplate::Jinja {
                source,
                bos: bos.to_string(),
                eos: eos.to_string(),
            });
        }
        let preset = match chat.and_then(|c| c.format.as_deref()) {
            Some(name) => Preset::parse(name).ok_or_else(|| {
                template_error(format!(
                    "chat.format '{name}' is not a preset (chatml, llama3, gemma, mistral, phi3, plain)"
                ))
            })?,
            None => {
                let has = |piece: &str| {
                    model
                        .vocab
                        .as_ref()
                        .is_some_and(|v| v.tokens.iter().any(|t| t == piece))
                };
                if has("<|im_start|>") && has("<|im_end|>") {
                    Preset::ChatMl
                } else if has("<start_of_turn>") && has("<end_of_turn>") {
                    Preset::Gemma
                } else if has("<|start_header_id|>") && has("<|eot_id|>") {
                    Preset::Llama3
                } else {
                    Preset::Plain
                }
            }
        };
        Ok(ChatTemplate::Preset {
            preset,
            bos: bos.to_string(),
        })
    }

    /// The piece that ends an assistant turn, if known: the preset's, or for a
    /// Jinja template the first known end-of-turn piece it writes.
    pub fn end_of_turn(&self) -> Option<&'static str> {
        match self {
            ChatTemplate::Preset { preset, .. } => preset.end_of_turn(),
            ChatTemplate::Jinja { source, .. } => [
                "<|im_end|>",
                "<|eot_id|>",
                "<end_of_turn>",
                "<|end|>",
                "<|endoftext|>",
            ]
            .into_iter()
            .find(|p| source.contains(p)),
        }
    }

    /// True for the `plain` preset (no template at all).
    pub fn is_plain(&self) -> bool {
        matches!(
            self,
            ChatTemplate::Preset {
                preset: Preset::Plain,
                ..
            }
        )
    }

    /// Renders `messages`; with `add_generation_prompt` the text ends where the
    /// assistant's answer begins. A Jinja error is `Tokenizer` naming the line.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, ExecutionError> {
        match self {
            ChatTemplate::Preset { preset, bos } => {
                Ok(preset.render(messages, add_generation_prompt, bos))
            }
            ChatTemplate::Jinja { source, bos, eos } => {
                render_jinja(source, messages, add_generation_prompt, bos, eos)
            }
        }
    }
}

/// Template instructions one render may run (minijinja's fuel): real templates
/// take a few hundred per message, so a conversation of 100 000 messages still fits,
/// while a hostile template's nested loops stop with an error instead of hanging.
pub const TEMPLATE_FUEL: u64 = 50_000_000;

fn render_jinja(
    source: &str,
    messages: &[Message],
    add_generation_prompt: bool,
    bos: &str,
    eos: &str,
) -> Result<String, ExecutionError> {
    let describe = |e: &minijinja::Error| {
        let mut s = match e.line() {
            Some(line) => format!("chat template line {line}: {}", e.kind()),
            None => format!("chat template: {}", e.kind()),
        };
        if let Some(detail) = e.detail() {
            s.push_str(": ");
            s.push_str(detail);
        }
        s
    };
    let mut env = minijinja::Environment::new();
    env.set_fuel(Some(TEMPLATE_FUEL));
    minijinja_contrib::add_to_environment(&mut env);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                format!("raise_exception: {msg}"),
            ))
        },
    );
    env.add_function("strftime_now", |fmt: String| -> String {
        strftime_now(&fmt)
    });
    env.add_template("chat", source)
        .map_err(|e| template_error(describe(&e)))?;
    let tmpl = env
        .get_template("chat")
        .map_err(|e| template_error(describe(&e)))?;
    tmpl.render(minijinja::context! {
        messages => messages,
        add_generation_prompt => add_generation_prompt,
        bos_token => bos,
        eos_token => eos,
        tools => minijinja::Value::from(Vec::<minijinja::Value>::new()),
    })
    .map_err(|e| template_error(describe(&e)))
}

/// `strftime_now(fmt)` of HF templates, for the common date formats
/// (`%d %b %Y`, `%Y-%m-%d`, ...), from the system clock in UTC.
fn strftime_now(fmt: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86400) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let name = MONTHS[(month - 1) as usize];
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out += &format!("{day:02}"),
            Some('m') => out += &format!("{month:02}"),
            Some('Y') => out += &year.to_string(),
            Some('y') => out += &format!("{:02}", year % 100),
            Some('b') => out += &name[..3],
            Some('B') => out += name,
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jinja(source: &str) -> ChatTemplate {
        ChatTemplate::Jinja {
            source: source.into(),
            bos: "<s>".into(),
            eos: "</s>".into(),
        }
    }

    #[test]
    fn a_template_looping_10_billion_times_runs_out_of_fuel() {
        let t = jinja(
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        );
        let started = std::time::Instant::now();
        let e = t.render(&[Message::new("user", "hi")], true).unwrap_err();
        assert!(e.to_string().contains("fuel"), "{e}");
        assert!(started.elapsed().as_secs() < 20);
        // A long real conversation stays within the fuel.
        let t = jinja("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}</s>{% endfor %}");
        let many = vec![Message::new("user", "hi"); 20_000];
        assert_eq!(
            t.render(&many, false).unwrap().len(),
            20_000 * "<|user|>hi</s>".len()
        );
    }

    #[test]
    fn jinja_renders_messages_and_generation_prompt() {
        let t = jinja(
            "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}:{{ m.content | trim }}]{% endfor %}{% if add_generation_prompt %}>{% endif %}",
        );
        let msgs = [Message::new("user", " hi ")];
        assert_eq!(t.render(&msgs, true).unwrap(), "<s>[user:hi]>");
        assert_eq!(t.render(&msgs, false).unwrap(), "<s>[user:hi]");
    }

    #[test]
    fn failing_template_names_the_line() {
        let t = jinja("line one\n{% for m in messages %}\n{{ raise_exception('no system role') }}\n{% endfor %}");
        let err = t.render(&[Message::new("user", "x")], true).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("line 3"), "{text}");
        assert!(text.contains("no system role"), "{text}");
        let broken = jinja("ok\n{% if %}");
        let text = broken.render(&[], true).unwrap_err().to_string();
        assert!(text.contains("line 2"), "{text}");
    }

    #[test]
    fn presets_follow_tokenizer_md() {
        let msgs = [Message::new("system", "S"), Message::new("user", "U")];
        let chatml = ChatTemplate::Preset {
            preset: Preset::ChatMl,
            bos: String::new(),
        };
        assert_eq!(
            chatml.render(&msgs, true).unwrap(),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
        );
        let gemma = ChatTemplate::Preset {
            preset: Preset::Gemma,
            bos: "<bos>".into(),
        };
        let text = gemma
            .render(
                &[Message::new("user", "U"), Message::new("assistant", "A")],
                true,
            )
            .unwrap();
        assert_eq!(
            text,
            "<bos><start_of_turn>user\nU<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>model\n"
        );
        assert_eq!(gemma.end_of_turn(), Some("<end_of_turn>"));
        let folded = gemma.render(&msgs, false).unwrap();
        assert_eq!(folded, "<bos><start_of_turn>user\nS\n\nU<end_of_turn>\n");
    }
}
