//! `cyb-llm run` and `chat` end to end, and their bad inputs: a missing or
//! non-.model file, a non-text model, a prompt longer than the context,
//! invalid sampling values (usage error, exit 2), a chat template that fails to
//! render (the error names its line).

mod common;
mod generate_util;

use common::tiny_model;
use cyb_llm::import::{import, ImportOptions};
use cyb_llm::loader::writer::{ModelWriter, PendingTensor};
use cyb_llm::DType;
use generate_util::{model_path, models_dir};
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs the binary on the cpu backend.
fn cyb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
        .args(args)
        .args(["--backend", "cpu"])
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn run_answers_a_chat_question() {
    let m = model_path("smollm2");
    let o = cyb(&[
        "run",
        m.to_str().unwrap(),
        "--prompt",
        "What is the capital of France?",
        "--temp",
        "0",
        "-n",
        "24",
        "-t",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let text = doc["text"].as_str().unwrap();
    assert!(!text.trim().is_empty());
    assert!(!text.contains("<|im_end|>"), "stop token printed: {text:?}");
    for key in [
        "load_ms",
        "prefill_ms",
        "prefill_tok_s",
        "decode_tok_s",
        "step_ms",
    ] {
        assert!(
            !doc["timings"][key].is_null(),
            "timings.{key} missing: {doc}"
        );
    }
    // The same greedy run through the library gives the same text.
    let tm = generate_util::text_model("smollm2");
    let mut g = tm.generator().unwrap();
    let lib: String = g
        .generate(
            "What is the capital of France?",
            Some(24),
            &cyb_llm::generate::Sampling::greedy(),
        )
        .unwrap()
        .map(|p| p.unwrap().text)
        .collect();
    assert_eq!(text, lib);
}

#[test]
fn chat_keeps_one_conversation_and_resets() {
    let m = model_path("smollm2");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
        .args([
            "chat",
            m.to_str().unwrap(),
            "--temp",
            "0",
            "-n",
            "8",
            "-t",
            "2",
            "--json",
            "--backend",
            "cpu",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What is the capital of France?\nAnd of Germany?\n/reset\nWhat is the capital of France?\n/exit\nignored\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let turns: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(turns.len(), 3, "one JSON line per turn, none after /exit");
    // The second turn reuses the cached first turn: only the new tokens are prefilled.
    let prefill = |i: usize| turns[i]["timings"]["prefill_tokens"].as_u64().unwrap();
    assert!(prefill(1) < prefill(0) + 10, "{turns:?}");
    // After /reset the same question gives the same greedy answer.
    assert_eq!(turns[0]["text"], turns[2]["text"]);
}

#[test]
fn missing_and_non_model_files_are_clear_errors() {
    let o = cyb(&["run", "/nonexistent/dir/x.model", "-p", "hi"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("/nonexistent/dir/x.model"),
        "{}",
        stderr(&o)
    );
    let dir = tempfile::tempdir().unwrap();
    let txt = dir.path().join("notes.txt");
    std::fs::write(&txt, "just some text\n").unwrap();
    let o = cyb(&["run", txt.to_str().unwrap(), "-p", "hi"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("notes.txt") && e.contains("not a .model file"),
        "{e}"
    );
}

#[test]
fn non_text_model_names_its_type_and_the_command() {
    let src = models_dir().join("minilm");
    assert!(
        src.join("model.safetensors").is_file(),
        "{} is missing: run scripts/fetch-models.sh minilm",
        src.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("minilm.model");
    import(&src, &out, &ImportOptions::default()).unwrap();
    for cmd in ["run", "chat"] {
        let o = cyb(&[cmd, out.to_str().unwrap(), "-p", "hi"][..if cmd == "run" { 4 } else { 2 }]);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        let e = stderr(&o);
        assert!(
            e.contains("'bert'") && e.contains("cyb-llm embed"),
            "{cmd}: {e}"
        );
    }
}

#[test]
fn prompt_longer_than_the_context_reports_both_numbers() {
    let m = model_path("smollm2");
    let prompt = "one two three four five six seven eight nine ten ".repeat(4);
    let o = cyb(&[
        "run",
        m.to_str().unwrap(),
        "-c",
        "16",
        "--no-chat",
        "-p",
        &prompt,
        "-t",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("context overflow") && e.contains("holds 16"),
        "{e}"
    );
    let n = generate_util::text_model("smollm2")
        .prompt_ids(&cyb_llm::generate::Prompt::Raw(prompt.clone()), true)
        .unwrap()
        .len();
    assert!(e.contains(&format!("{n} tokens requested")), "{e}");
}

#[test]
fn invalid_sampling_values_are_usage_errors() {
    let m = model_path("smollm2");
    let m = m.to_str().unwrap();
    for bad in [
        ["--temp", "-1"],
        ["--temp", "abc"],
        ["--top-p", "0"],
        ["--top-p", "1.5"],
        ["--min-p", "2"],
        ["--repeat-penalty", "0"],
        ["--top-k", "-3"],
        ["--ctx-size", "0"],
    ] {
        let flag = format!("{}={}", bad[0], bad[1]);
        let o = cyb(&["run", m, "-p", "hi", &flag]);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(bad[0]), "{bad:?}: {}", stderr(&o));
    }
}

/// The tiny LlamaStyle model of tests/common with a chat template that fails on line 3.
fn tiny_with_template(path: &Path, template: &str) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut w = ModelWriter::new("tiny-chat");
    w.set_config(&tiny_model::config()).unwrap();
    w.set_section("vocab", tiny_model::vocab().to_toml());
    let chat = cyb_llm::loader::ChatSection {
        template: Some(template.into()),
        ..Default::default()
    };
    w.set_section("chat", toml::to_string(&chat).unwrap());
    for (name, shape, dtype) in tiny_model::tensor_specs() {
        let n: usize = shape.iter().product();
        let data: Vec<u8> = match dtype {
            DType::Q8_0 => (0..n / 32)
                .flat_map(|_| {
                    let mut b = half::f16::from_f32(0.01).to_le_bytes().to_vec();
                    b.extend((0..32).map(|_| rng.gen::<u8>()));
                    b
                })
                .collect(),
            _ => (0..n)
                .flat_map(|_| rng.gen_range(-1.0f32..1.0).to_le_bytes())
                .collect(),
        };
        w.add_tensor(PendingTensor {
            name,
            shape,
            dtype,
            scale: None,
            data: data.into(),
        })
        .unwrap();
    }
    w.write(path).unwrap();
}

#[test]
fn failing_chat_template_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.model");
    tiny_with_template(
        &path,
        "{% for m in messages %}\n{{ m.content }}\n{{ raise_exception('roles must alternate') }}\n{% endfor %}",
    );
    let o = cyb(&["run", path.to_str().unwrap(), "-p", "ab", "-n", "2"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("chat template line 3") && e.contains("roles must alternate"),
        "{e}"
    );
    // --no-chat skips the template and runs.
    let o = cyb(&[
        "run",
        path.to_str().unwrap(),
        "-p",
        "ab",
        "-n",
        "2",
        "--no-chat",
        "--temp",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}
