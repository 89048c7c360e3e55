//! `cyb-llm validate MODEL [--deep]`: load-time checks (text-section digests
//! included), and with `--deep` the weights checked against their digest and
//! every tensor decoded and checked for non-finite values.

use super::CmdResult;
use rayon::prelude::*;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    model: PathBuf,
    /// Check the weights' digest, decode every tensor and report non-finite values by tensor name.
    #[arg(long)]
    deep: bool,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// A tensor that failed the deep check.
#[derive(serde::Serialize)]
struct Problem {
    tensor: String,
    reason: String,
}

pub fn run(a: ValidateArgs) -> CmdResult {
    let m = cyb_llm::load(&a.model)?;
    let weights_digest = match (a.deep, a.deep && m.verify_weights()?) {
        (false, _) => "not checked",
        (true, true) => "verified",
        (true, false) => "absent",
    };
    let problems: Vec<Problem> = if a.deep {
        m.tensors
            .entries()
            .par_iter()
            .filter_map(|e| {
                let values = match m.tensor_of(e).dequantize() {
                    Ok(v) => v,
                    Err(err) => {
                        return Some(Problem {
                            tensor: e.name.clone(),
                            reason: err.to_string(),
                        })
                    }
                };
                let nan = values.iter().filter(|x| x.is_nan()).count();
                let inf = values.iter().filter(|x| x.is_infinite()).count();
                (nan + inf > 0).then(|| Problem {
                    tensor: e.name.clone(),
                    reason: format!("{nan} NaN and {inf} infinite values"),
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    if a.json {
        let v = serde_json::json!({"file": a.model.display().to_string(), "deep": a.deep,
            "tensors": m.tensors.len(), "weights_digest": weights_digest,
            "ok": problems.is_empty(), "problems": problems});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for p in &problems {
            println!("{}: {}", p.tensor, p.reason);
        }
        let what = match weights_digest {
            "verified" => "loaded, weights digest verified, decoded",
            "absent" => "loaded and decoded; no weights digest recorded, re-import to add one",
            _ => "loaded",
        };
        if problems.is_empty() {
            println!(
                "ok: {} ({} tensors {what})",
                a.model.display(),
                m.tensors.len()
            );
        } else {
            println!(
                "FAILED: {} tensors of {} have problems",
                problems.len(),
                m.tensors.len()
            );
        }
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
