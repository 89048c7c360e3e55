//! LlamaStyle logits against Hugging Face transformers (f32, same GGUF loaded
//! with `gguf_file=`): tests/fixtures/llm/<model>/hf_logits.json, written by
//! scripts/make_llm_fixtures.py. At every recorded position: the same top-1
//! token, and ops.md's "quantized weights, full forward" tolerance (5e-2
//! relative to the row's max |logit|) on the top-k logits and the row's mean and
//! standard deviation.

mod generate_util;

use generate_util::{fixture, ids, text_model, top2};

const TOL: f64 = 5e-2;

fn check(model: &str) {
    let tm = text_model(model);
    let fx = fixture(model, "hf_logits.json");
    let vocab = tm.model().config.architecture.vocab_size.unwrap();
    let mut worst = 0f64;
    for case in fx["cases"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let input = ids(&case["ids"]);
        assert_eq!(
            tm.tokenizer().encode(prompt, true).unwrap(),
            input,
            "{model}: our tokenizer disagrees with transformers on {prompt:?}"
        );
        let mut g = tm.generator().unwrap();
        let logits = g.forward_all(&input).unwrap();
        assert_eq!(logits.len(), input.len() * vocab);
        for row in case["rows"].as_array().unwrap() {
            let p = row["position"].as_u64().unwrap() as usize;
            let ours = &logits[p * vocab..(p + 1) * vocab];
            let absmax = row["absmax"].as_f64().unwrap();
            let top_ids = ids(&row["top_ids"]);
            let top_vals: Vec<f64> = row["top_logits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let (best, gap) = top2(ours);
            assert_eq!(
                best as u32, top_ids[0],
                "{model} {prompt:?} position {p}: top-1 {best} (gap {gap}) but transformers says {} ({} vs {})",
                top_ids[0], top_vals[0], top_vals[1]
            );
            let mut err = 0f64;
            for (&id, &v) in top_ids.iter().zip(&top_vals) {
                err = err.max((ours[id as usize] as f64 - v).abs());
            }
            let n = ours.len() as f64;
            let mean = ours.iter().map(|&v| v as f64).sum::<f64>() / n;
            let std = (ours.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
            err = err
                .max((mean - row["mean"].as_f64().unwrap()).abs())
                .max((std - row["std"].as_f64().unwrap()).abs());
            let rel = err / absmax.max(1e-6);
            worst = worst.max(rel);
            assert!(
                rel <= TOL,
                "{model} {prompt:?} position {p}: relative error {rel:.4} > {TOL}"
            );
        }
    }
    eprintln!("{model}: worst relative logit error vs transformers {worst:.4}");
}

#[test]
fn smollm2_logits_match_transformers() {
    check("smollm2");
}

#[test]
fn gemma3_logits_match_transformers() {
    check("gemma3");
}

#[test]
fn qwen2_logits_match_transformers() {
    check("qwen2");
}
