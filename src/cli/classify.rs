//! `cyb-llm classify MODEL [--text T]... [--file F] [--top N]`: labels and
//! scores of a sequence classifier, one text per line, as json / jsonl / tsv.

use super::embed::{finish, print_timings, progress_bar, tsv_field, written, Format, InputArgs};
use super::CmdResult;
use cyb_llm::encode::{Classification, Encoder, ProblemType};
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

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
    let start = Instant::now();
    let tokens = enc.tokenize(&texts)?.tokens;
    let bar = progress_bar(texts.len());
    let results = enc.classify_tokens(&tokens, a.input.batch_size as usize, &mut |done| {
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
    })?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if a.input.timings {
        let count = tokens.iter().map(Vec::len).sum();
        print_timings(load_ms, texts.len(), count, start.elapsed().as_secs_f64());
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match a.input.format() {
        Format::Json => {
            let data: Vec<_> = texts
                .iter()
                .zip(&results)
                .map(|(t, c)| record(t, &ranked(&enc, c, a.top), c))
                .collect();
            let problem = match enc.bert().config.problem_type {
                ProblemType::SingleLabel => "single_label_classification",
                ProblemType::MultiLabel => "multi_label_classification",
                ProblemType::Regression => "regression",
            };
            let labels: Vec<String> = (0..enc.bert().num_labels().unwrap_or(0))
                .map(|i| enc.bert().label(i))
                .collect();
            let doc = json!({
                "model": enc.model().name,
                "problem_type": problem,
                "labels": labels,
                "data": data,
            });
            if !written(serde_json::to_writer(&mut out, &doc).map_err(std::io::Error::from))?
                || !written(writeln!(out))?
            {
                return Ok(ExitCode::SUCCESS);
            }
        }
        Format::Jsonl => {
            for (t, c) in texts.iter().zip(&results) {
                let line = record(t, &ranked(&enc, c, a.top), c);
                let r = serde_json::to_writer(&mut out, &line)
                    .map_err(std::io::Error::from)
                    .and_then(|()| writeln!(out));
                if !written(r)? {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
        Format::Tsv => {
            for (t, c) in texts.iter().zip(&results) {
                let mut line = tsv_field(t);
                for (label, score) in ranked(&enc, c, a.top) {
                    line.push('\t');
                    line.push_str(&tsv_field(&label));
                    line.push('\t');
                    line.push_str(&score.to_string());
                }
                if !written(writeln!(out, "{line}"))? {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
    }
    finish(&mut out)
}
