//! Greedy continuations against llama.cpp on the same GGUF:
//! tests/fixtures/llm/<model>/llamacpp.json (scripts/make_llm_fixtures.py; 5
//! prompts, raw and chat-templated, 32 tokens each or up to llama.cpp's
//! end-of-generation token, from llama.cpp built out of the llama-cpp-python
//! 0.3.36 sdist). The prompt ids are llama.cpp's; our tokenizer must give the
//! same ids for the same text.
//!
//! **Teacher-forced**: we feed llama.cpp's own tokens one decode step at a
//! time, and at every step of every prompt (the step that picked the
//! end-of-generation token too) our argmax must be llama.cpp's token. The only
//! exemption is a near-tie of the references: llama.cpp's top-1 minus top-2 gap
//! below 0.1, or transformers' f32 gap (the model's exact definition,
//! `hf_top2`) below 0.1, at that step. Our own gap never excuses a mismatch. A
//! reference with no step to check fails.
//!
//! Why near-ties are excused at all: the fixture's llama.cpp keeps its KV cache
//! in f32 without flash attention, as we do, and both engines quantize
//! activations to 8 bits inside every quantized matmul with ggml's block
//! formats; on the real models a different summation order flips a few 8-bit
//! roundings, which moves logits by about the quantization noise. Where the
//! model itself is undecided (either reference's gap < 0.1) that can pick the
//! other token. The qwen2 test model, whose logits agree with llama.cpp's to
//! the printed digits, gets no exemption: its free-running greedy tokens must
//! equal llama.cpp's on every prompt, and every teacher-forced step must match.

mod generate_util;

use cyb_llm::generate::{Finish, Prompt, Sampling};
use generate_util::{fixture, ids, text_model, top2};
use serde_json::Value;

const NEAR_TIE: f32 = 0.1;

/// One step llama.cpp took: the token it picked, its gap and transformers' gap.
struct Step {
    token: u32,
    llamacpp_gap: f32,
    hf_gap: f32,
}

/// The steps of a fixture case: each generated token, then the eog step if any.
fn steps(case: &Value) -> Vec<Step> {
    let gap = |v: &Value| v.as_f64().unwrap() as f32;
    let mut llamacpp_gaps: Vec<f32> = case["gaps"].as_array().unwrap().iter().map(gap).collect();
    let mut chosen = ids(&case["tokens"]);
    if let Some(eog) = case.get("eog") {
        chosen.push(eog["id"].as_u64().unwrap() as u32);
        llamacpp_gaps.push(gap(&eog["gap"]));
    }
    let hf: Vec<f32> = case["hf_top2"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| gap(&v["gap"]))
        .collect();
    assert_eq!(
        (llamacpp_gaps.len(), hf.len()),
        (chosen.len(), chosen.len()),
        "fixture: one llama.cpp gap and one transformers top-2 per step"
    );
    chosen
        .into_iter()
        .zip(llamacpp_gaps)
        .zip(hf)
        .map(|((token, llamacpp_gap), hf_gap)| Step {
            token,
            llamacpp_gap,
            hf_gap,
        })
        .collect()
}

fn check(model: &str, exemptions: bool) {
    let tm = text_model(model);
    let fx = fixture(model, "llamacpp.json");
    let n_predict = fx["n_predict"].as_u64().unwrap() as usize;
    let (mut failures, mut checked, mut excused) = (Vec::new(), 0, 0);
    for case in fx["cases"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let mode = case["mode"].as_str().unwrap();
        let prompt_ids = ids(&case["prompt_ids"]);
        assert_eq!(
            tm.tokenizer().encode(prompt, true).unwrap(),
            prompt_ids,
            "{model} {mode}: our tokenizer disagrees with llama.cpp on {prompt:?}"
        );
        let steps = steps(case);
        assert!(
            !steps.is_empty(),
            "{model} {mode} {prompt:?}: the reference has no step to check"
        );
        if case.get("eog").is_none() {
            assert_eq!(
                steps.len(),
                n_predict,
                "{model} {mode}: a short reference without its eog step"
            );
        }
        let mut g = tm.generator().unwrap();
        let mut logits = g.forward_rows(&prompt_ids, prompt_ids.len() - 1).unwrap();
        let mut wrong = Vec::new();
        for (s, step) in steps.iter().enumerate() {
            let (ours, our_gap) = top2(&logits);
            checked += 1;
            if ours as u32 != step.token {
                let tie = step.llamacpp_gap < NEAR_TIE || step.hf_gap < NEAR_TIE;
                if exemptions && tie {
                    excused += 1;
                } else {
                    wrong.push(format!(
                        "step {s}: ours {ours} (our gap {our_gap:.3}) vs llama.cpp {} (its gap {:.3}, transformers' {:.3})",
                        step.token, step.llamacpp_gap, step.hf_gap
                    ));
                }
            }
            if s + 1 < steps.len() {
                logits = g.forward_rows(&[step.token], 0).unwrap();
            }
        }
        eprintln!(
            "{model} {mode:4} {:?}: {} steps, {} wrong",
            prompt.chars().take(40).collect::<String>(),
            steps.len(),
            wrong.len()
        );
        if !wrong.is_empty() {
            failures.push(format!("{mode} {prompt:?}: {}", wrong.join("; ")));
        }
        if !exemptions {
            free_running_equals(&tm, model, mode, prompt_ids, case, n_predict, &mut failures);
        }
    }
    eprintln!(
        "{model}: {checked} teacher-forced steps, {excused} mismatches at reference near-ties"
    );
    assert!(failures.is_empty(), "{model}:\n{}", failures.join("\n"));
}

/// Our own greedy continuation equals llama.cpp's, token for token, stopping where it stops.
fn free_running_equals(
    tm: &std::sync::Arc<cyb_llm::generate::TextModel>,
    model: &str,
    mode: &str,
    prompt_ids: Vec<u32>,
    case: &Value,
    n_predict: usize,
    failures: &mut Vec<String>,
) {
    let expected = ids(&case["tokens"]);
    let mut g = tm.generator().unwrap();
    let mut gen = g
        .generate(
            Prompt::Tokens(prompt_ids),
            Some(n_predict),
            &Sampling::greedy(),
        )
        .unwrap();
    let mut ours = Vec::new();
    for piece in gen.by_ref() {
        if let Some(t) = piece.unwrap().token {
            ours.push(t);
        }
    }
    let stopped = gen.finish() == Some(Finish::Stop);
    if ours != expected || stopped != case.get("eog").is_some() {
        failures.push(format!(
            "{model} {mode}: free-running greedy {ours:?} (stopped: {stopped}) vs llama.cpp {expected:?} (eog: {:?})",
            case.get("eog")
        ));
    }
}

#[test]
fn smollm2_teacher_forced_steps_match_llamacpp() {
    check("smollm2", true);
}

#[test]
fn gemma3_teacher_forced_steps_match_llamacpp() {
    check("gemma3", true);
}

#[test]
fn qwen2_matches_llamacpp_on_every_step_without_exemptions() {
    check("qwen2", false);
}
