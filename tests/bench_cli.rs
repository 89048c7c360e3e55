//! `cyb-llm bench` end to end on the tiny model (cpu backend): the depth of
//! llama-bench's `-d` names the test as llama-bench does and starts it at that
//! cache position, and a depth past the model's context is an error naming it.

mod common;

use common::tiny_model;
use std::process::{Command, Output};

fn bench(model: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
        .arg("bench")
        .arg(model)
        .args(["--backend", "cpu", "-t", "1", "-r", "1"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn depth_rows_are_named_and_counted_as_llama_bench_does() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("tiny.model");
    tiny_model::write(&m);
    let o = bench(&m, &["-p", "4", "-n", "3", "-d", "5", "-o", "json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tests: Vec<(&str, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["test"].as_str().unwrap(), r["n_depth"].as_u64().unwrap()))
        .collect();
    assert_eq!(tests, [("pp4 @ d5", 5), ("tg3 @ d5", 5)]);
    let o = bench(&m, &["-p", "0", "-n", "1", "-o", "csv"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("backend,path,test,n_prompt,n_gen,n_depth,"),
        "{out}"
    );
    assert!(out.contains(",tg1,0,1,0,"), "{out}");
}

#[test]
fn depth_past_the_context_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("tiny.model");
    tiny_model::write(&m);
    let o = bench(&m, &["-p", "0", "-n", "2", "-d", "100000"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tiny.model")
            && err.contains("need 100002 positions")
            && err.contains("context holds 64")
            && err.contains("lower -d"),
        "{err}"
    );
}
