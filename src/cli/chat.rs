//! `cyb-llm chat MODEL`: interactive multi-turn chat on one KV cache.
//! Each line of stdin is a user turn; `/reset` forgets the conversation,
//! `/exit` (or end of input) quits. Answers stream to stdout.

use super::run::{print_dispatch, print_timings, stream, timings_json, GenArgs};
use super::CmdResult;
use cyb_llm::generate::{Message, Prompt};
use serde_json::json;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

/// `cyb-llm chat` arguments.
#[derive(clap::Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    gen: GenArgs,
}

/// Runs `cyb-llm chat`.
pub fn run(a: ChatArgs) -> CmdResult {
    let g = &a.gen;
    let model = g.load()?;
    let sampling = g.sampling(&model);
    let mut generator = model.generator()?;
    generator.keep_dispatch_records(g.dispatch);
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "chat with {} ({} tokens of context); /reset starts over, /exit quits",
            g.model.display(),
            model.ctx_size()
        );
    }
    let mut history: Vec<Message> = Vec::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut lines = std::io::stdin().lock().lines();
    loop {
        if interactive {
            eprint!("> ");
        }
        let Some(line) = lines.next() else { break };
        let line = line?;
        let user = line.trim_end_matches('\r');
        match user.trim() {
            "" => continue,
            "/exit" | "/quit" => break,
            "/reset" => {
                generator.reset_kv_cache();
                history.clear();
                if interactive {
                    eprintln!("(conversation reset)");
                }
                continue;
            }
            _ => {}
        }
        let prompt = if g.no_chat {
            Prompt::Raw(user.to_string())
        } else {
            Prompt::Chat(g.messages(&history, user))
        };
        let mut generation =
            generator.generate_with(prompt, g.max_tokens, &sampling, &g.options())?;
        let text = stream(&mut generation, &mut out, g.json)?;
        let finish = generation.finish();
        drop(generation);
        if g.json {
            let doc = json!({
                "user": user,
                "text": text,
                "finish": finish,
                "timings": timings_json(generator.timings()),
            });
            writeln!(out, "{doc}")?;
        } else {
            writeln!(out)?;
        }
        out.flush()?;
        if !g.no_chat {
            if history.is_empty() {
                if let Some(s) = &g.system {
                    history.push(Message::new("system", s));
                }
            }
            history.push(Message::new("user", user));
            history.push(Message::new("assistant", &text));
        }
        if g.timings {
            print_timings(generator.timings(), sampling.seed);
        }
    }
    if g.dispatch {
        print_dispatch(generator.dispatch_log());
    }
    Ok(ExitCode::SUCCESS)
}
