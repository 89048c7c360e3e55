//! The WhisperStyle graph section on tiny.en (imported from the CTranslate2
//! folder, which writes the graph): the encoder and decoder graphs agree with
//! the curated family on jfk.wav — decoder logits, teacher-forced on the
//! curated transcript's tokens, within ops.md's full-forward tolerance and
//! with the same argmax — and a greedy decoding on the graph path (the
//! curated rules at temperature 0 without timestamps: suppressed tokens,
//! blank / eot suppressed first, no timestamps) gives the curated transcript.

mod graph_util;
mod whisper_util;

use cyb_llm::audio::mel::log_mel;
use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher, ExecContext};
use cyb_llm::curated::whisper::{TranscribeOptions, Whisper};
use cyb_llm::graph::{whisper as wg, GraphModel, GraphOptions, GraphSession};
use graph_util::{argmax, rel_err};
use std::sync::Arc;
use whisper_util::{normalize, tiny_en_model, whisper_dir};

const N_SAMPLES: usize = 480_000;

fn curated(model: &Arc<cyb_llm::Model>) -> Whisper {
    let d = Dispatcher::new(
        BackendChoice::Named("cpu".into()),
        &BackendConfig { threads: 2 },
    )
    .unwrap();
    Whisper::new(model.clone(), d).unwrap()
}

fn graph_session(model: &Arc<cyb_llm::Model>, backend: &str) -> GraphSession {
    let opts = GraphOptions {
        ctx_size: 448,
        trace: true,
        ..Default::default()
    };
    let gm = GraphModel::with_backend(model.clone(), BackendChoice::Named(backend.into()), 2, opts)
        .unwrap();
    Arc::new(gm).session().unwrap()
}

/// The first 30 s window of jfk.wav as the curated transcription makes it
/// (the reference's): the log-mel of the audio plus 30 s of zeros, the
/// audio's frames, zeros after them; `[n_mels, 3000]`.
fn jfk_mel(w: &Whisper) -> (Vec<f32>, Vec<f32>) {
    let samples = cyb_llm::audio::load_16k(&whisper_dir().join("jfk.wav")).unwrap();
    let mut padded = samples.clone();
    padded.resize(samples.len() + N_SAMPLES, 0.0);
    let n_mels = w.config.n_mels;
    let mel = log_mel(&padded, w.mel_filters(), n_mels);
    let (total, frames) = (mel.len() / n_mels, 2 * w.config.n_audio_ctx);
    let content = total - frames;
    let mut window = vec![0.0f32; n_mels * frames];
    for m in 0..n_mels {
        window[m * frames..m * frames + content]
            .copy_from_slice(&mel[m * total..m * total + content]);
    }
    (samples, window)
}

#[test]
fn import_writes_a_validated_whisper_graph() {
    let model = cyb_llm::load(tiny_en_model()).unwrap();
    let g = model
        .graph
        .as_ref()
        .expect("tiny.en imported without a graph section");
    let names: Vec<&str> = g.input_decls.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mel", "audio_positions", "tokens", "positions"]);
    assert_eq!(
        g.states.len(),
        4,
        "one self-attention cache per decoder layer"
    );
    let count = |op: &str| g.nodes.iter().filter(|n| n.op.name() == op).count();
    assert_eq!(count("Conv1d"), 2);
    assert_eq!(
        count("Sdpa"),
        4 + 2 * 4,
        "encoder self + decoder self and cross"
    );
    assert_eq!(
        g.outputs.len(),
        1 + 2 * 4,
        "logits + cross K/V per decoder layer"
    );
    let logits = &g.values[g.outputs[0]];
    assert_eq!(logits.shape, [None, Some(51864)]);
}

#[test]
fn graph_matches_curated_on_jfk() {
    let model = Arc::new(cyb_llm::load(tiny_en_model()).unwrap());
    let w = curated(&model);
    let (samples, mel) = jfk_mel(&w);
    let opts = TranscribeOptions {
        timestamps: false,
        ..Default::default()
    };
    let transcript = w.transcribe(&samples, &opts).unwrap();
    let text_tokens: Vec<u32> = transcript
        .segments
        .iter()
        .flat_map(|s| s.tokens.clone())
        .collect();
    assert!(text_tokens.len() > 10, "{:?}", transcript.text());
    let sp = &w.config.special;
    let prompt = [sp.sot, sp.no_timestamps];
    let mut fed = prompt.to_vec();
    fed.extend(&text_tokens);

    // Teacher-forced logits, curated vs graph.
    let mut ctx = ExecContext::new(2);
    let enc = w.encode(&mel, &mut ctx).unwrap();
    let mut cache = w.new_cache().unwrap();
    let rows: Vec<usize> = (0..fed.len()).collect();
    let want = w
        .decode_step(&enc, &mut cache, &fed, &rows, &mut ctx)
        .unwrap();
    let mut s = graph_session(&model, "cpu");
    let cross = wg::encode(&mut s, mel.clone(), w.config.n_mels).unwrap();
    let got = wg::decode_step(&mut s, &cross, &fed).unwrap();
    assert_eq!(got.len(), want.len());
    let mut worst = 0.0f32;
    for (i, (g, c)) in got.iter().zip(&want).enumerate() {
        let e = rel_err(g, c);
        assert!(e <= 1e-3, "row {i}: relative error {e}");
        assert_eq!(argmax(g), argmax(c), "row {i}: argmax");
        worst = worst.max(e);
    }
    eprintln!(
        "tiny.en graph vs curated, {} teacher-forced rows: max relative error {worst:.3e}",
        fed.len()
    );

    // Greedy decoding on the graph path, the curated rules at temperature 0
    // without timestamps.
    let cross = wg::encode(&mut s, mel, w.config.n_mels).unwrap();
    let mut logits = wg::decode_step(&mut s, &cross, &prompt)
        .unwrap()
        .pop()
        .unwrap();
    let mut suppress = w.config.suppress.clone();
    suppress.extend([sp.transcribe, sp.translate, sp.sot, sp.sot_prev, sp.sot_lm]);
    suppress.extend(sp.no_speech);
    suppress.push(sp.no_timestamps);
    let mut tokens = Vec::new();
    while tokens.len() < 224 {
        for &t in &suppress {
            logits[t as usize] = f32::NEG_INFINITY;
        }
        if tokens.is_empty() {
            for &t in &w.config.begin_suppress {
                logits[t as usize] = f32::NEG_INFINITY;
            }
        }
        logits[sp.timestamp_begin as usize..].fill(f32::NEG_INFINITY);
        let t = argmax(&logits);
        if t == sp.eot {
            break;
        }
        tokens.push(t);
        logits = wg::decode_step(&mut s, &cross, &[t])
            .unwrap()
            .pop()
            .unwrap();
    }
    let text = w.text_of(&tokens);
    eprintln!("graph transcript: {text:?}");
    assert_eq!(
        tokens, text_tokens,
        "graph greedy tokens vs the curated transcript's"
    );
    assert_eq!(normalize(&text), normalize(&transcript.text()));
    let trace = s.trace().unwrap();
    eprintln!("cpu trace over {} nodes: {}", trace.1, trace.0);
}

#[test]
fn nox_runs_the_whisper_graph_bit_exactly() {
    let model = Arc::new(cyb_llm::load(tiny_en_model()).unwrap());
    let w = curated(&model);
    let (_, mel) = jfk_mel(&w);
    let sp = &w.config.special;
    let prompt = [sp.sot, sp.no_timestamps];
    let mut s = graph_session(&model, "cpu");
    let cross = wg::encode(&mut s, mel.clone(), w.config.n_mels).unwrap();
    let reference = wg::decode_step(&mut s, &cross, &prompt).unwrap();
    let run = |threads: usize| {
        let opts = GraphOptions {
            ctx_size: 448,
            trace: true,
            ..Default::default()
        };
        let gm = GraphModel::with_backend(
            model.clone(),
            BackendChoice::Named("nox".into()),
            threads,
            opts,
        )
        .unwrap();
        let mut s = Arc::new(gm).session().unwrap();
        let cross = wg::encode(&mut s, mel.clone(), w.config.n_mels).unwrap();
        let l = wg::decode_step(&mut s, &cross, &prompt).unwrap();
        (l, s.trace().unwrap().0)
    };
    let (a, ha) = run(1);
    let (b, hb) = run(2);
    let bits =
        |r: &Vec<Vec<f32>>| -> Vec<u32> { r.iter().flatten().map(|x| x.to_bits()).collect() };
    assert!(
        bits(&a) == bits(&b),
        "nox logits differ between 1 and 2 threads"
    );
    assert_eq!(ha, hb, "nox trace differs between 1 and 2 threads");
    for (x, r) in a.iter().zip(&reference) {
        let e = rel_err(x, r);
        assert!(e <= 1e-3, "nox vs cpu graph: relative error {e}");
    }
    eprintln!("tiny.en nox trace (jfk window, 2-token prompt): {ha}");
}
