//! `cyb-llm serve` driven by the official `openai` Python client (PyPI, pinned in
//! scripts/fetch-models.sh's `openai` target): every answer is compared with
//! what the CLI gives for the same input (`run` greedy, `embed`, `transcribe`),
//! and every error path, auth, the queue, disconnects, SIGTERM during a stream
//! and a mixed load of 200 requests are checked from a real client.

// The three model helpers each include the scratch-folder module.
#![allow(clippy::duplicate_mod)]

mod bert_util;
mod generate_util;
mod whisper_util;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn cyb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
}

/// The venv with the `openai` client; fails (never skips) when it is missing.
fn python() -> PathBuf {
    let p = match std::env::var_os("CYB_OPENAI_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/openai-venv/bin/python"),
    };
    assert!(
        p.is_file(),
        "{} is missing: run scripts/fetch-models.sh openai (or set CYB_OPENAI_PYTHON)",
        p.display()
    );
    p
}

/// A running `cyb-llm serve`, killed when dropped.
struct Server {
    child: Child,
    base: String,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// Starts a server on a free port with `models` and `extra` flags; waits until it is ready.
    fn start(models: &[&Path], extra: &[&str]) -> Server {
        let mut cmd = cyb();
        cmd.arg("serve")
            .args(models)
            .args(["--port", "0", "-t", "2", "--backend", "cpu"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        Server::spawn(cmd)
    }

    /// Spawns `cmd` (a `serve` command with stderr piped) and waits until it is ready.
    fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .env_remove("CYB_LLM_API_KEY")
            .spawn()
            .expect("start cyb-llm serve");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    log.lock().unwrap().push_str(&format!("{line}\n"));
                    let _ = tx.send(line);
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut base = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(url) = line
                        .strip_prefix("serve: listening on ")
                        .and_then(|r| r.split_whitespace().next())
                    {
                        base = Some(url.to_string());
                    }
                    if line == "serve: ready" {
                        break;
                    }
                }
                Err(_) => panic!("the server did not become ready:\n{}", log.lock().unwrap()),
            }
        }
        Server {
            child,
            base: base.expect("a listening line before ready"),
            log,
        }
    }

    /// Runs a scenario of tests/serve/client.py against this server.
    fn client(&self, scenario: &str, args: Value) -> Value {
        client(&self.base, scenario, args, |_| {})
    }

    /// `GET path` over a plain socket: status and body.
    fn get(&self, path: &str) -> (u16, String) {
        let addr = self.base.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let status = text[9..12].parse().unwrap();
        let body = text
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        (status, body)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `client.py SCENARIO BASE` with `args` on stdin; `on_stderr` sees each
/// stderr line as it comes. Panics with the output when it fails.
fn client(base: &str, scenario: &str, args: Value, mut on_stderr: impl FnMut(&str)) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/client.py");
    let mut child = Command::new(python())
        .arg(script)
        .args([scenario, base])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python client");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(args.to_string().as_bytes())
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        BufReader::new(stdout).read_to_string(&mut s).unwrap();
        s
    });
    let mut err = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        on_stderr(&line);
        err.push_str(&line);
        err.push('\n');
    }
    let status = child.wait().unwrap();
    let out = reader.join().unwrap();
    assert!(
        status.success(),
        "client.py {scenario} failed:\n{err}\n{out}"
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("client.py {scenario}: {e}: {out}"))
}

fn smollm2() -> PathBuf {
    generate_util::model_path("smollm2")
}

/// `cyb-llm run` greedy on the same backend and threads as the server: text, finish, tokens.
fn run_greedy(model: &Path, prompt: &str, n: usize, no_chat: bool) -> Value {
    let mut cmd = cyb();
    cmd.arg("run")
        .arg(model)
        .args([
            "-p",
            prompt,
            "--temp",
            "0",
            "-t",
            "2",
            "--backend",
            "cpu",
            "--json",
        ])
        .args(["-n", &n.to_string()]);
    if no_chat {
        cmd.arg("--no-chat");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// OpenAI's finish_reason for `run --json`'s `finish`.
fn openai_finish(run: &Value) -> &'static str {
    match run["finish"].as_str().unwrap() {
        "stop" | "stop_string" => "stop",
        _ => "length",
    }
}

const PROMPTS: [&str; 8] = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three primary colors.",
    "What is 12 times 12?",
    "Name a planet in the solar system.",
    "Translate 'good morning' into Spanish.",
    "Give me a synonym for happy.",
    "What language is spoken in Brazil?",
];

#[test]
fn models_chat_and_completions_equal_cyb_llm_run() {
    let model = smollm2();
    let minilm = bert_util::minilm_model();
    let server = Server::start(&[&model, &minilm], &[]);
    let ids = server.client("models", json!({}));
    assert_eq!(ids["ids"], json!(["smollm2", "minilm"]));
    let n = 24;
    let prompts = &PROMPTS[..3];
    let raw_prompt = "The three largest cities in Japan are";
    let got = server.client(
        "chat",
        json!({"model": "smollm2", "prompts": prompts, "max_tokens": n, "raw_prompt": raw_prompt}),
    );
    for (i, p) in prompts.iter().enumerate() {
        let want = run_greedy(&model, p, n, false);
        for way in ["plain", "stream"] {
            let g = &got[way][i];
            assert_eq!(g["text"], want["text"], "{way} chat of {p:?}");
            assert_eq!(g["finish_reason"], openai_finish(&want), "{way} {p:?}");
            assert_eq!(
                g["usage"]["completion_tokens"], want["tokens"],
                "{way} {p:?}"
            );
        }
        assert_eq!(got["plain"][i]["usage"], got["stream"][i]["usage"]);
        assert_eq!(got["plain"][i]["role"], "assistant");
        assert_eq!(got["plain"][i]["object"], "chat.completion");
        assert!(got["stream"][i]["chunks"].as_u64().unwrap() >= 3);
    }
    let want = run_greedy(&model, raw_prompt, n, true);
    assert_eq!(got["completion"]["text"], want["text"]);
    assert_eq!(got["completion"]["finish_reason"], openai_finish(&want));
    // Metrics: requests by route and status, tokens by model.
    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"cyb_llm_requests_total{route="/v1/chat/completions",status="200"} 6"#),
        "{metrics}"
    );
    let generated: u64 = (0..3)
        .map(|i| {
            2 * got["plain"][i]["usage"]["completion_tokens"]
                .as_u64()
                .unwrap()
        })
        .sum::<u64>()
        + got["completion"]["usage"]["completion_tokens"]
            .as_u64()
            .unwrap();
    assert!(
        metrics.contains(&format!(
            r#"cyb_llm_generated_tokens_total{{model="smollm2"}} {generated}"#
        )),
        "{metrics}"
    );
    assert!(metrics.contains("cyb_llm_request_latency_seconds_bucket"));
    assert!(metrics.contains(r#"cyb_llm_queue_depth{model="smollm2"} 0"#));
}

#[test]
fn a_gguf_source_is_imported_once_and_served_under_its_stem() {
    let cache = tempfile::tempdir().unwrap();
    let gguf = generate_util::gguf("smollm2");
    let start = || {
        let mut cmd = cyb();
        cmd.arg("serve")
            .arg(&gguf)
            .args(["--port", "0", "-t", "2", "--backend", "cpu"])
            .env("XDG_CACHE_HOME", cache.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        Server::spawn(cmd)
    };
    let first = start();
    assert!(first.log().contains("import:"), "{}", first.log());
    let ids = first.client("models", json!({}));
    assert_eq!(ids["ids"], json!(["SmolLM2-135M-Instruct.Q4_1"]));
    drop(first);
    let second = start();
    assert!(!second.log().contains("import:"), "{}", second.log());
}

#[test]
fn eight_concurrent_streams_equal_their_sequential_results() {
    let model = smollm2();
    let n = 16;
    let want: Vec<Value> = PROMPTS
        .iter()
        .map(|p| run_greedy(&model, p, n, false)["text"].clone())
        .collect();
    // 4 slots: half the streams wait in the queue, then reuse a slot's cache.
    let server = Server::start(&[&model], &["--parallel", "4"]);
    let got = server.client(
        "concurrent",
        json!({"model": "smollm2", "prompts": PROMPTS, "max_tokens": n}),
    );
    assert_eq!(got["texts"], json!(want));
}

#[test]
fn embeddings_equal_cyb_llm_embed() {
    let minilm = bert_util::minilm_model();
    let texts = [
        "A man is eating food.",
        "A cheetah is running behind its prey.",
        "The new movie is awesome.",
    ];
    let embed = |texts: &[&str]| -> Vec<Value> {
        let mut cmd = cyb();
        cmd.arg("embed")
            .arg(&minilm)
            .args(["-t", "2", "--backend", "cpu", "--format", "jsonl"]);
        for t in texts {
            cmd.args(["--text", t]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["embedding"].clone())
            .collect()
    };
    let want = embed(&texts);
    let server = Server::start(&[&minilm], &[]);
    let got = server.client("embeddings", json!({"model": "minilm", "texts": texts}));
    // Same batch, same kernels: the same f32 values, through JSON floats and through base64.
    assert_eq!(got["float"], json!(want));
    assert_eq!(got["default"], json!(want));
    assert_eq!(got["one"], embed(&texts[..1])[0]);
    assert!(got["usage"]["prompt_tokens"].as_u64().unwrap() > 10);
}

#[test]
fn transcriptions_equal_cyb_llm_transcribe() {
    let whisper = whisper_util::tiny_en_model();
    let audio = whisper_util::whisper_dir().join("jfk.wav");
    let transcribe = |format: &str| -> String {
        let out = cyb()
            .arg("transcribe")
            .arg(whisper)
            .arg(&audio)
            .args(["-t", "2", "--backend", "cpu", "--format", format])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let json_out: Value = serde_json::from_str(&transcribe("json")).unwrap();
    let server = Server::start(
        &[whisper],
        &["--alias", &format!("whisper-1={}", whisper.display())],
    );
    let got = server.client(
        "transcribe",
        json!({"model": "whisper-1", "file": audio.display().to_string()}),
    );
    let text = json_out["text"].as_str().unwrap().trim();
    assert!(
        text.contains("ask not what your country can do for you"),
        "{text}"
    );
    assert_eq!(got["json"], text);
    assert_eq!(got["text"].as_str().unwrap().trim(), text);
    assert_eq!(got["srt"], transcribe("srt"));
    assert_eq!(got["vtt"], transcribe("vtt"));
    let v = &got["verbose"];
    assert_eq!(v["language"], "en");
    assert_eq!(v["duration"], json_out["duration"]);
    let segments = v["segments"].as_array().unwrap();
    let want = json_out["segments"].as_array().unwrap();
    assert_eq!(segments.len(), want.len());
    for (g, w) in segments.iter().zip(want) {
        assert_eq!(
            (&g["start"], &g["end"], &g["text"]),
            (&w["start"], &w["end"], &w["text"])
        );
    }
}

fn error_of(v: &Value) -> &Value {
    let body = &v["body"];
    // The openai client hands `e.body` as the `error` object; raw requests give the whole body.
    if body.get("error").is_some() {
        &body["error"]
    } else {
        body
    }
}

fn assert_error(v: &Value, status: u64, param: Option<&str>, words: &str) {
    assert_eq!(v["status"], status, "{v}");
    let e = error_of(v);
    assert!(e["type"].is_string(), "{v}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains(words), "`{words}` not in {v}");
    if let Some(p) = param {
        assert_eq!(e["param"], p, "{v}");
    }
}

#[test]
fn every_error_path_is_an_openai_error_and_the_server_lives_on() {
    let model = smollm2();
    let whisper = whisper_util::tiny_en_model();
    let server = Server::start(
        &[&model, whisper],
        &["-c", "256", "--max-body-bytes", "4096"],
    );
    let got = server.client(
        "errors",
        json!({"model": "smollm2", "speech_model": "tiny.en", "long_words": 400, "too_large": 5000}),
    );
    assert_error(
        &got["unknown_model"],
        404,
        Some("model"),
        "`nope` does not exist",
    );
    assert_eq!(error_of(&got["unknown_model"])["code"], "model_not_found");
    assert_error(&got["wrong_kind"], 400, Some("model"), "text model");
    assert_error(&got["bad_temperature"], 400, Some("temperature"), ">= 0");
    assert_error(&got["bad_top_p"], 400, Some("top_p"), "(0, 1]");
    assert_error(&got["n_2"], 400, Some("n"), "only n = 1");
    assert_error(
        &got["long_prompt"],
        400,
        Some("messages"),
        "context holds 256",
    );
    let long = error_of(&got["long_prompt"]);
    assert_eq!(long["code"], "context_length_exceeded");
    assert!(
        long["message"]
            .as_str()
            .unwrap()
            .starts_with("the prompt is 4"),
        "{long}"
    );
    assert_error(&got["malformed"], 400, None, "not a valid request");
    assert_error(&got["missing_field"], 400, None, "missing field `messages`");
    assert_error(&got["wrong_type"], 400, Some("messages"), "invalid type");
    assert_error(&got["no_route"], 404, None, "no route GET /v1/nothing");
    assert_error(&got["wrong_method"], 405, None, "does not take GET");
    assert_error(&got["too_large"], 413, None, "limit of 4096 bytes");
    assert_error(&got["bad_audio"], 400, Some("file"), "noise.wav");
    assert_error(&got["no_file"], 400, Some("file"), "no `file` field");
    assert_eq!(got["after"]["finish_reason"], "length");
    assert_eq!(server.get("/health").0, 200);
}

#[test]
fn an_api_key_guards_every_route_but_health() {
    let minilm = bert_util::minilm_model();
    let server = Server::start(&[&minilm], &["--api-key", "sk-test-123"]);
    let got = server.client("auth", json!({"api_key": "sk-test-123"}));
    assert_eq!(got["health"]["status"], 200);
    for case in ["no_key", "wrong_key", "metrics_no_key"] {
        assert_error(&got[case], 401, None, "Authorization: Bearer");
        assert_eq!(error_of(&got[case])["code"], "invalid_api_key");
    }
    assert_eq!(got["with_key"], json!(["minilm"]));
    // Without a key the same routes are open.
    let open = Server::start(&[&minilm], &[]);
    assert_eq!(open.get("/v1/models").0, 200);
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let model = smollm2();
    let server = Server::start(&[&model], &["--parallel", "1", "--queue", "1"]);
    let got = server.client(
        "busy",
        json!({"model": "smollm2", "requests": 6, "max_tokens": 48}),
    );
    let results = got["results"].as_array().unwrap();
    let ok = results.iter().filter(|r| r["status"] == 200).count();
    let busy: Vec<&Value> = results.iter().filter(|r| r["status"] == 503).collect();
    assert_eq!(ok + busy.len(), 6, "{got}");
    assert!(ok >= 2, "one running and one queued must succeed: {got}");
    assert!(!busy.is_empty(), "{got}");
    for b in busy {
        assert_eq!(b["retry_after"], "1", "{b}");
        assert!(error_of(b)["message"]
            .as_str()
            .unwrap()
            .contains("all 1 slots of `smollm2` are busy"));
    }
}

#[test]
fn a_client_that_gives_up_while_queued_leaves_no_place_taken() {
    let model = smollm2();
    let server = Server::start(&[&model], &["--parallel", "1", "--queue", "1"]);
    let got = server.client(
        "give_up_in_queue",
        json!({"model": "smollm2", "max_tokens": 400}),
    );
    assert_eq!(got["impatient"], "timed out", "{got}");
    // With the impatient request still counted, the queue (1) would be full: 503.
    assert_eq!(got["queued_after"]["status"], 200, "{got}");
    assert!(got["first_chunks"].as_u64().unwrap() > 3, "{got}");
    let (_, metrics) = server.get("/metrics");
    assert!(
        metrics.contains(r#"cyb_llm_queue_depth{model="smollm2"} 0"#),
        "{metrics}"
    );
}

#[test]
fn a_client_that_disconnects_stops_its_generation_and_frees_its_slot() {
    let model = smollm2();
    let server = Server::start(&[&model], &["--parallel", "1"]);
    let max = 2000;
    let got = server.client("disconnect", json!({"model": "smollm2", "max_tokens": max}));
    assert_eq!(got["read_chunks"], 3);
    assert_eq!(got["next"]["finish_reason"], "length");
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("the client went away after"))
        .unwrap_or_else(|| panic!("no disconnect line in the server log:\n{log}"));
    let tokens: usize = line
        .split("after ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(tokens < max / 4, "{line}");
    let (_, metrics) = server.get("/metrics");
    assert!(
        metrics.contains(r#"cyb_llm_cancelled_generations_total{model="smollm2"} 1"#),
        "{metrics}"
    );
}

#[test]
fn sigterm_during_a_stream_lets_it_finish_then_exits_0() {
    let model = smollm2();
    let n = 48;
    let prompt = PROMPTS[1];
    let want = run_greedy(&model, prompt, n, false);
    let mut server = Server::start(&[&model], &["--grace", "60"]);
    let pid = server.child.id() as libc::pid_t;
    let got = client(
        &server.base,
        "stream_until_signal",
        json!({"model": "smollm2", "prompt": prompt, "max_tokens": n}),
        |line| {
            if line == "started" {
                // SAFETY: plain kill(2) of the server child this test started.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        },
    );
    assert_eq!(got["text"], want["text"], "the stream in flight finishes");
    assert_eq!(got["finish_reason"], openai_finish(&want));
    assert_eq!(got["after"], "refused", "no new connections after SIGTERM");
    let status = server.child.wait().unwrap();
    assert!(status.success(), "exit {status:?}\n{}", server.log());
    assert!(server.log().contains("serve: stopped"));
}

#[test]
fn two_hundred_mixed_requests_at_concurrency_16_all_answer() {
    let model = smollm2();
    let minilm = bert_util::minilm_model();
    let whisper = whisper_util::tiny_en_model();
    let audio = whisper_util::whisper_dir().join("jfk.wav");
    let server = Server::start(&[&model, &minilm, whisper], &["--parallel", "4"]);
    let got = server.client(
        "load",
        json!({
            "model": "smollm2", "embed_model": "minilm", "speech_model": "tiny.en",
            "file": audio.display().to_string(), "requests": 200, "concurrency": 16, "max_tokens": 4,
        }),
    );
    let results = got["results"].as_array().unwrap();
    assert_eq!(results.len(), 200);
    let failed: Vec<&Value> = results.iter().filter(|r| r["ok"] != true).collect();
    assert!(failed.is_empty(), "{} failed: {failed:?}", failed.len());
    for kind in ["chat", "stream", "embed", "transcribe"] {
        assert!(
            results.iter().any(|r| r["kind"] == kind),
            "no {kind} request"
        );
    }
    let (_, metrics) = server.get("/metrics");
    assert!(!metrics.contains(r#"status="5"#), "{metrics}");
}

#[test]
fn after_a_short_grace_period_a_stream_is_cut_with_an_error_and_the_server_exits_0() {
    let model = smollm2();
    let mut server = Server::start(&[&model], &["--grace", "0.2"]);
    let pid = server.child.id() as libc::pid_t;
    let got = client(
        &server.base,
        "stream_until_signal",
        json!({"model": "smollm2", "prompt": "Tell a long story.", "max_tokens": 3000}),
        |line| {
            if line == "started" {
                // SAFETY: plain kill(2) of the server child this test started.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        },
    );
    assert!(got["finish_reason"].is_null(), "{got}");
    let error = got["error"].as_str().unwrap_or_default();
    assert!(error.contains("the server is stopping"), "{got}");
    let status = server.child.wait().unwrap();
    assert!(status.success(), "exit {status:?}\n{}", server.log());
    assert!(
        server.log().contains("grace period over"),
        "{}",
        server.log()
    );
}
