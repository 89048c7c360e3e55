//! `cyb-llm classify MODEL [--text T]... [--file F] [--top N]`: labels and
//! scores of a sequence classifier, one text per line, as json / jsonl / tsv.

use super::embed::{run_batches, tsv_field, write_results, InputArgs};
use super::CmdResult;
use cyb_llm::encode::{Classification, Encoder, ProblemType};
use serde_json::json;

/// Arguments of `cyb-llm classify`.
#[derive(clap::Args, Debug)]
pub struct ClassifyArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Labels shown per text, best first (default 1; 0 = all).
    #[arg(long, default_value_t = 1)]
    top: usize,
}

/// The `top` best `(label, score)` pairs of one classification.
fn ranked(enc: &Encoder, c: &Classification, top: usize) -> Vec<(String, f32)> {
    let mut order: Vec<usize> = (0..c.scores.len()).collect();
    order.sort_by(|&a, &b| c.scores[b].total_cmp(&c.scores[a]).then(a.cmp(&b)));
    let n = if top == 0 { order.len() } else { top };
    order
        .into_iter()
        .take(n)
        .map(|i| (enc.bert().label(i), c.scores[i]))
        .collect()
}

fn record(text: &str, labels: &[(String, f32)], c: &Classification) -> serde_json::Value {
    let labels: Vec<_> = labels
        .iter()
        .map(|(l, s)| json!({"label": l, "score": s}))
        .collect();
    json!({"text": text, "labels": labels, "logits": c.logits})
}

/// Runs `cyb-llm classify`.
pub fn run(a: ClassifyArgs) -> CmdResult {
    let (mut enc, load_ms) = a.input.encoder()?;
    let texts = a.input.texts()?;
    if enc.bert().num_labels().is_none() {
        return Err(format!(
            "{}: this {} model has no classification head (classifier.weight); use `cyb-llm embed`",
            a.input.model.display(),
            enc.bert().config.model_type
        )
        .into());
    }
    let top = a.top;
    let results = run_batches(
        &a.input,
        &mut enc,
        load_ms,
        &texts,
        |enc, tokens, progress| enc.classify_tokens(tokens, a.input.batch_size as usize, progress),
    )?;
    let problem = match enc.bert().config.problem_type {
        ProblemType::SingleLabel => "single_label_classification",
        ProblemType::MultiLabel => "multi_label_classification",
        ProblemType::Regression => "regression",
    };
    let labels: Vec<String> = (0..enc.bert().num_labels().unwrap_or(0))
        .map(|i| enc.bert().label(i))
        .collect();
    let header = json!({
        "model": enc.model().name,
        "problem_type": problem,
        "labels": labels,
    });
    write_results(
        &a.input,
        header,
        &texts,
        &results,
        |t, c| record(t, &ranked(&enc, c, top), c),
        |c| {
            ranked(&enc, c, top)
                .into_iter()
                .flat_map(|(label, score)| [tsv_field(&label), score.to_string()])
                .collect()
        },
    )
}
