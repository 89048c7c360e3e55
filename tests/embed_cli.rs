//! `cyb-llm embed` / `cyb-llm classify` end to end: input from --text, --file
//! and stdin; json / jsonl / tsv output checked against the sentence-transformers
//! and transformers fixtures; bad input (a decoder model, an empty file, an
//! invalid UTF-8 line) as one clear error line and exit code 1.

mod bert_util;
mod common;

use bert_util::{
    classifier_model, cosine, fixture, floats, minilm_hidden, minilm_model, rel_err, strings,
};
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs the binary with `--backend cpu` appended (these
/// tests are about the CLI; `auto` may pick a slow software GPU adapter).
fn cyb(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
        .args(args)
        .args(["--backend", "cpu"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // A command that fails before reading stdin closes the pipe early.
    let _ = input.write_all(stdin.unwrap_or_default());
    drop(input);
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "failed: {}", stderr(o));
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// sentence-transformers' embedding of fixture sentence `i`, and the sentence.
fn reference(i: usize) -> (String, Vec<f32>) {
    let fx = fixture("minilm_embeddings.json");
    (
        fx["sentences"][i].as_str().unwrap().to_string(),
        floats(&fx["embeddings"][i]),
    )
}

#[test]
fn jsonl_from_repeated_text_flags_matches_sentence_transformers() {
    let model = minilm_model();
    let (a, ea) = reference(0);
    let (b, eb) = reference(4);
    let o = cyb(&["embed", path(&model), "--text", &a, "--text", &b], None);
    let out = stdout(&o);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for (line, (text, want)) in lines.iter().zip([(a, ea), (b, eb)]) {
        assert_eq!(line["text"], text.as_str());
        let got = floats(&line["embedding"]);
        assert_eq!(got.len(), 384);
        assert!(cosine(&got, &want) >= 0.9999, "{text}");
    }
}

#[test]
fn file_and_stdin_give_the_same_vectors_in_input_order() {
    let model = minilm_model();
    let idx = [3usize, 2, 14, 0];
    let texts: Vec<(String, Vec<f32>)> = idx.iter().map(|&i| reference(i)).collect();
    let body: String = texts.iter().map(|(t, _)| format!("{t}\n")).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.txt");
    std::fs::write(&file, &body).unwrap();

    let o = cyb(
        &[
            "embed",
            path(&model),
            "--file",
            path(&file),
            "--format",
            "json",
        ],
        None,
    );
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(doc["pooling"], "mean");
    assert_eq!(doc["normalized"], true);
    assert_eq!(doc["dimensions"], 384);
    let data = doc["data"].as_array().unwrap();
    assert_eq!(data.len(), texts.len());
    for (d, (t, want)) in data.iter().zip(&texts) {
        assert_eq!(d["text"], t.as_str());
        assert!(cosine(&floats(&d["embedding"]), want) >= 0.9999, "{t:?}");
    }
    assert!(
        stderr(&o).contains("truncated to the model's maximum of 256"),
        "the > 256-token text is truncated with a warning: {}",
        stderr(&o)
    );

    let o = cyb(
        &["embed", path(&model), "--format", "tsv"],
        Some(body.as_bytes()),
    );
    let out = stdout(&o);
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(rows.len(), texts.len());
    for (row, (t, want)) in rows.iter().zip(&texts) {
        let mut fields = row.split('\t');
        assert_eq!(fields.next().unwrap(), t.as_str());
        let got: Vec<f32> = fields.map(|f| f.parse().unwrap()).collect();
        assert!(cosine(&got, want) >= 0.9999, "{t:?}");
    }
}

#[test]
fn pooling_and_normalize_flags_override_the_model_defaults() {
    let model = minilm_model();
    let (a, _) = reference(0);
    let o = cyb(
        &[
            "embed",
            path(&model),
            "--text",
            &a,
            "--pool",
            "cls",
            "--no-normalize",
            "--json",
        ],
        None,
    );
    let doc: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (doc["pooling"].as_str(), doc["normalized"].as_bool()),
        (Some("cls"), Some(false))
    );
    // The unnormalized [CLS] state of transformers' last hidden state.
    let want = &minilm_hidden(0).0[..384];
    let got = floats(&doc["data"][0]["embedding"]);
    let e = rel_err(&got, want);
    assert!(e < 1e-4, "relative error {e}");
}

#[test]
fn embed_on_a_decoder_model_names_the_model_type() {
    let dir = tempfile::tempdir().unwrap();
    let llama = dir.path().join("tiny.model");
    common::tiny_model::write(&llama);
    let o = cyb(&["embed", path(&llama), "--text", "hello"], None);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("`llama` is a LlamaStyle model") && err.contains("BertStyle"),
        "{err}"
    );
    assert!(err.contains("tiny.model"), "names the file: {err}");
    let o = cyb(&["classify", path(&llama), "--text", "hello"], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("LlamaStyle"), "{}", stderr(&o));
}

#[test]
fn empty_inputs_are_errors() {
    let model = minilm_model();
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let o = cyb(&["embed", path(&model), "--file", path(&empty)], None);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("empty.txt") && err.contains("no input texts"),
        "{err}"
    );
    assert!(o.stdout.is_empty());

    let o = cyb(&["embed", path(&model)], Some(b""));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("stdin: no input texts"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn invalid_utf8_is_reported_with_its_line_number() {
    let model = minilm_model();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, b"first line\nsecond\nthird \xc3\x28 broken\nfourth\n").unwrap();
    let o = cyb(&["embed", path(&model), "--file", path(&bad)], None);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("bad.txt: line 3: invalid UTF-8"), "{err}");
    assert!(o.stdout.is_empty(), "nothing is written on bad input");

    let o = cyb(&["classify", path(&model)], Some(b"ok\n\xff\n"));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("stdin: line 2: invalid UTF-8"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn classify_prints_labels_best_first() {
    let fx = fixture("classifier_logits.json");
    let model = classifier_model();
    let texts = strings(&fx["texts"]);
    let labels = ["negative", "neutral", "positive"];
    let body: String = texts.iter().map(|t| format!("{t}\n")).collect();
    let o = cyb(
        &["classify", path(&model), "--top", "2"],
        Some(body.as_bytes()),
    );
    let out = stdout(&o);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), texts.len());
    for (i, line) in lines.iter().enumerate() {
        let want = floats(&fx["softmax"][i]);
        let mut order: Vec<usize> = (0..3).collect();
        order.sort_by(|&a, &b| want[b].total_cmp(&want[a]));
        let got = line["labels"].as_array().unwrap();
        assert_eq!(got.len(), 2);
        for (g, &k) in got.iter().zip(&order) {
            assert_eq!(g["label"], labels[k], "text {i}");
            let s = g["score"].as_f64().unwrap() as f32;
            assert!((s - want[k]).abs() < 1e-4, "text {i}: {s} vs {}", want[k]);
        }
        assert_eq!(floats(&line["logits"]).len(), 3);
    }
    let o = cyb(
        &[
            "classify",
            path(&model),
            "--text",
            texts[0],
            "--format",
            "tsv",
        ],
        None,
    );
    let out = stdout(&o);
    let fields: Vec<&str> = out.trim_end().split('\t').collect();
    assert_eq!(fields.len(), 3, "text, label, score: {out:?}");
    assert_eq!(fields[0], texts[0]);

    let o = cyb(&["classify", path(&minilm_model()), "--text", "x"], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no classification head"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn shards_split_the_input_and_keep_each_text_s_index() {
    let model = minilm_model();
    let texts: Vec<String> = (0..5).map(|i| reference(i).0).collect();
    let mut args = vec!["embed", path(&model), "-b", "1"];
    for t in &texts {
        args.extend(["--text", t.as_str()]);
    }
    let whole: Vec<Value> = stdout(&cyb(&args, None))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut seen = vec![false; texts.len()];
    for k in 0..2 {
        let shard = format!("{k}/2");
        let mut a = args.clone();
        a.extend(["--shard", shard.as_str()]);
        for line in stdout(&cyb(&a, None)).lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let i = v["index"].as_u64().unwrap() as usize;
            assert_eq!(i % 2, k, "{line}");
            assert_eq!(v["text"], whole[i]["text"]);
            assert_eq!(v["embedding"], whole[i]["embedding"]);
            seen[i] = true;
        }
    }
    assert!(seen.iter().all(|&s| s), "{seen:?}");
    let bad = cyb(
        &["embed", path(&model), "--text", "x", "--shard", "2/2"],
        None,
    );
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("must be below N"), "{}", stderr(&bad));
}
