//! Whisper tiny.en decoder logits, element by element, against CTranslate2's raw
//! logits on the same weights (float32 compute): the encoder window the transcriber
//! builds for jfk.wav (the committed log-mel, zeros to 3000 frames), the prompt
//! `<|startoftranscript|><|notimestamps|>`, then CTranslate2's own greedy tokens fed
//! back (teacher forcing). Fixtures by scripts/make_whisper_fixtures.py (`logits`).

mod whisper_util;

use cyb_llm::backend::{BackendChoice, ExecContext};
use cyb_llm::transcribe::{SpeechModel, SpeechOptions, Whisper};
use serde_json::Value;
use whisper_util::*;

/// Largest |ours - CTranslate2| over a whole row, as a fraction of the row's
/// largest |logit| (~20 here).
const TOL: f32 = 2e-5;

fn read_f32(name: &str) -> Vec<f32> {
    std::fs::read(fixture(name))
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

struct Reference {
    prompt: Vec<u32>,
    tokens: Vec<u32>,
    rows: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(fixture("jfk_ct2_logits.json")).unwrap()).unwrap();
    let ids = |k: &str| -> Vec<u32> {
        meta[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect()
    };
    let (steps, n_vocab) = (
        meta["steps"].as_u64().unwrap() as usize,
        meta["n_vocab"].as_u64().unwrap() as usize,
    );
    let flat = read_f32("jfk_ct2_logits.f32");
    assert_eq!(flat.len(), steps * n_vocab, "jfk_ct2_logits.f32 size");
    let r = Reference {
        prompt: ids("prompt"),
        tokens: ids("tokens"),
        rows: flat.chunks(n_vocab).map(<[f32]>::to_vec).collect(),
    };
    assert_eq!(r.tokens.len(), steps);
    r
}

/// The encoder input of jfk's only window: the committed log-mel, zeros after it.
fn window(w: &Whisper) -> Vec<f32> {
    let meta: Value =
        serde_json::from_slice(&std::fs::read(fixture("jfk_logmel.json")).unwrap()).unwrap();
    let frames = meta["frames"].as_u64().unwrap() as usize;
    let mel = read_f32("jfk_logmel.f32");
    let (n_mels, n_frames) = (w.config.n_mels, 2 * w.config.n_audio_ctx);
    assert_eq!(mel.len(), n_mels * frames);
    let mut x = vec![0.0f32; n_mels * n_frames];
    for m in 0..n_mels {
        x[m * n_frames..m * n_frames + frames].copy_from_slice(&mel[m * frames..(m + 1) * frames]);
    }
    x
}

fn model(backend: &str) -> SpeechModel {
    let opts = SpeechOptions {
        backend: BackendChoice::Named(backend.into()),
        ..cpu()
    };
    SpeechModel::load(tiny_en_model(), &opts).unwrap_or_else(|e| panic!("{backend}: {e}"))
}

/// Every row within `TOL` x its max |logit| of CTranslate2's, and its argmax
/// CTranslate2's token.
fn assert_rows_match(what: &str, got: &[Vec<f32>], r: &Reference) {
    assert_eq!(got.len(), r.rows.len(), "{what}: row count");
    let mut worst = 0.0f32;
    for (i, (g, want)) in got.iter().zip(&r.rows).enumerate() {
        assert_eq!(g.len(), want.len(), "{what}: step {i} row length");
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let (at, err) = g
            .iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .enumerate()
            .fold((0, 0.0f32), |m, (j, e)| if e > m.1 { (j, e) } else { m });
        let rel = err / scale;
        worst = worst.max(rel);
        eprintln!(
            "{what}: step {i} max |diff| {err:.3e} at token {at} (row max {scale:.2}, {rel:.2e} of it)"
        );
        assert!(
            rel <= TOL,
            "{what}: step {i}: |ours - CTranslate2| = {err} at token {at} ({rel:.2e} of the row max {scale}), above {TOL:e}"
        );
        let top = g
            .iter()
            .enumerate()
            .fold(0, |b, (j, &v)| if v > g[b] { j } else { b });
        assert_eq!(top as u32, r.tokens[i], "{what}: step {i} argmax");
    }
    eprintln!("{what}: worst {worst:.2e} of the row max (bound {TOL:e})");
}

/// The prompt in one step, then one token per step through the KV cache (as the
/// transcriber decodes).
fn teacher_forced(backend: &str) {
    let r = reference();
    let m = model(backend);
    let w = m.whisper();
    let mut ctx = ExecContext::new(w.dispatcher().threads());
    let enc = w.encode(&window(w), &mut ctx).expect("encode");
    let mut cache = w.new_cache().unwrap();
    let last = r.prompt.len() - 1;
    let mut got = w
        .decode_step(&enc, &mut cache, &r.prompt, &[last], &mut ctx)
        .expect("prompt step");
    for &t in &r.tokens[..r.tokens.len() - 1] {
        got.extend(
            w.decode_step(&enc, &mut cache, &[t], &[0], &mut ctx)
                .expect("decode step"),
        );
    }
    assert_rows_match(&format!("{backend}, token by token"), &got, &r);
}

#[test]
fn cpu_decoder_logits_match_ctranslate2_token_by_token() {
    teacher_forced("cpu");
}

#[test]
fn reference_backend_decoder_logits_match_ctranslate2_token_by_token() {
    teacher_forced("reference");
}

#[test]
fn cpu_decoder_logits_match_ctranslate2_in_one_causal_step() {
    let r = reference();
    let m = model("cpu");
    let w = m.whisper();
    let mut ctx = ExecContext::new(w.dispatcher().threads());
    let enc = w.encode(&window(w), &mut ctx).expect("encode");
    let mut cache = w.new_cache().unwrap();
    let mut seq = r.prompt.clone();
    seq.extend_from_slice(&r.tokens[..r.tokens.len() - 1]);
    let want: Vec<usize> = (r.prompt.len() - 1..seq.len()).collect();
    let got = w
        .decode_step(&enc, &mut cache, &seq, &want, &mut ctx)
        .expect("decode");
    assert_rows_match("cpu, whole prefix at once", &got, &r);
}
