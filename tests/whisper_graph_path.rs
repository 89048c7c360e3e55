//! `transcribe --path graph`: tiny.en's graph section (encoder and decoder on the
//! executor) under the curated decoding rules gives the curated transcript on cpu
//! — the same segments, tokens and times — and matches faster-whisper's fixtures
//! as the curated path does: greedy with timestamps, beam search, and the
//! two-minute long form, and word timestamps (the alignment heads' scores from the
//! graph's cross-attention queries).

mod whisper_util;

use cyb_llm::path::PathChoice;
use cyb_llm::transcribe::{SpeechModel, SpeechOptions, TranscribeOptions, Transcript};
use std::process::Command;
use std::sync::OnceLock;
use whisper_util::*;

fn model(path: PathChoice) -> &'static SpeechModel {
    static CURATED: OnceLock<SpeechModel> = OnceLock::new();
    static GRAPH: OnceLock<SpeechModel> = OnceLock::new();
    let cell = match path {
        PathChoice::Graph => &GRAPH,
        _ => &CURATED,
    };
    cell.get_or_init(|| {
        let opts = SpeechOptions { path, ..cpu() };
        let m = SpeechModel::load(tiny_en_model(), &opts).expect("load");
        assert_eq!(m.path_name(), path.name());
        m
    })
}

fn jfk() -> Vec<f32> {
    cyb_llm::audio::load_16k(&whisper_dir().join("jfk.wav")).unwrap()
}

/// Both paths' transcripts of `samples` under `opts`, checked identical: segment
/// text, tokens, times and temperature; the graph's, then the curated one.
fn both(samples: &[f32], opts: &TranscribeOptions) -> (Transcript, Transcript) {
    let c = model(PathChoice::Curated)
        .transcribe(samples, opts)
        .expect("curated");
    let g = model(PathChoice::Graph)
        .transcribe(samples, opts)
        .expect("graph");
    let view = |t: &Transcript| {
        (t.segments.iter())
            .map(|s| {
                (
                    s.text.clone(),
                    s.tokens.clone(),
                    s.start,
                    s.end,
                    s.temperature,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(view(&g), view(&c), "graph vs curated segments");
    assert_eq!(g.language, c.language);
    for (a, b) in g.segments.iter().zip(&c.segments) {
        let d = (a.avg_logprob - b.avg_logprob).abs();
        assert!(
            d < 1e-2,
            "avg_logprob {} vs {}",
            a.avg_logprob,
            b.avg_logprob
        );
    }
    (g, c)
}

#[test]
fn greedy_jfk_on_the_graph_equals_curated_and_faster_whisper() {
    let (t, _) = both(&jfk(), &TranscribeOptions::default());
    assert_matches_reference(&t, "jfk");
}

#[test]
fn beam_search_on_the_graph_equals_curated_and_faster_whisper() {
    let opts = TranscribeOptions {
        beam_size: 5,
        best_of: 5,
        silence_rms: None,
        ..TranscribeOptions::default()
    };
    let (t, _) = both(&jfk(), &opts);
    assert_matches_reference(&t, "beam_jfk");
}

#[test]
fn two_minutes_on_the_graph_equal_curated() {
    let (t, _) = both(&long_2min(), &TranscribeOptions::default());
    assert!(t.segments.last().unwrap().end > 110.0, "{:#?}", t.segments);
    let want = normalize(reference("long_2min")["text"].as_str().unwrap());
    let e = wer(&want, &normalize(&t.text()));
    assert!(e <= 0.05, "WER {e:.3}");
}

#[test]
fn word_timestamps_on_the_graph_equal_curated() {
    let opts = TranscribeOptions {
        word_timestamps: true,
        ..TranscribeOptions::default()
    };
    let (t, c) = both(&jfk(), &opts);
    let words = |t: &Transcript| {
        (t.segments.iter())
            .flat_map(|s| s.words.iter().map(|w| (w.word.clone(), w.start, w.end)))
            .collect::<Vec<_>>()
    };
    assert!(words(&t).len() > 10, "{:#?}", t.segments);
    assert_eq!(words(&t), words(&c), "graph vs curated words");
    let probs = |t: &Transcript| -> Vec<f64> {
        (t.segments.iter())
            .flat_map(|s| s.words.iter().map(|w| w.probability))
            .collect()
    };
    for (a, b) in probs(&t).iter().zip(probs(&c)) {
        assert!((a - b).abs() < 1e-2, "word probability {a} vs {b}");
    }
}

#[test]
fn cli_path_graph_prints_the_curated_transcript() {
    let run = |path: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
            .arg("transcribe")
            .arg(tiny_en_model())
            .arg(whisper_dir().join("jfk.wav"))
            .args(["--backend", "cpu", "-t", "2", "--format", "srt"])
            .args(["--path", path])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "--path {path}: {err}");
        String::from_utf8(o.stdout).unwrap()
    };
    let graph = run("graph");
    assert!(graph.contains("ask not what your country"), "{graph}");
    assert_eq!(graph, run("curated"));
}
