//! Word timestamps (`word_timestamps`, `--word-timestamps`) of Whisper tiny.en against
//! faster-whisper's on the same CTranslate2 weights and audio (fixtures by
//! scripts/make_whisper_word_fixtures.py: faster_whisper_words_*.json): the same
//! segments and words, word starts and ends within a frame or two (the figures are
//! printed), probabilities close; the CLI's json / srt / vtt output and bad input.

mod whisper_util;

use cyb_llm::transcribe::format::{render_with, Format, Layout};
use cyb_llm::transcribe::{SpeechModel, TranscribeOptions, Transcript};
use std::collections::HashMap;
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use whisper_util::*;

fn model() -> &'static SpeechModel {
    static M: OnceLock<SpeechModel> = OnceLock::new();
    M.get_or_init(|| SpeechModel::load(tiny_en_model(), &cpu()).expect("load"))
}

fn clip(name: &str) -> Vec<f32> {
    match name {
        "jfk" => cyb_llm::audio::load_16k(&whisper_dir().join("jfk.wav")).unwrap(),
        "long_2min" => long_2min(),
        other => panic!("unknown clip {other}"),
    }
}

fn multilingual() -> &'static SpeechModel {
    static M: OnceLock<SpeechModel> = OnceLock::new();
    M.get_or_init(|| SpeechModel::load(tiny_multilingual_model(), &cpu()).expect("load"))
}

/// The fixture's faster-whisper options as ours (the reference rules only: no RMS gate).
fn options_of(r: &serde_json::Value) -> TranscribeOptions {
    let o = &r["options"];
    TranscribeOptions {
        translate: o["task"] == "translate",
        beam_size: o["beam_size"].as_u64().unwrap() as usize,
        best_of: o["best_of"].as_u64().unwrap() as usize,
        temperatures: (o["temperature"].as_array().unwrap().iter())
            .map(|v| v.as_f64().unwrap() as f32)
            .collect(),
        silence_rms: None,
        word_timestamps: true,
        ..TranscribeOptions::default()
    }
}

/// Our transcript of the fixture case (with its options), once per test binary.
fn transcript(case: &str) -> Transcript {
    static T: OnceLock<Mutex<HashMap<String, Transcript>>> = OnceLock::new();
    let mut done = T.get_or_init(Default::default).lock().unwrap();
    (done.entry(case.to_string()).or_insert_with(|| {
        let r = reference(&format!("words_{case}"));
        let m = if case.starts_with("multilingual") {
            multilingual()
        } else {
            model()
        };
        m.transcribe(&clip(r["clip"].as_str().unwrap()), &options_of(&r))
            .expect("transcribe")
    }))
    .clone()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Transcribes the case's clip and checks it against the fixture: same segments, texts
/// and words; returns (median |start diff|, median |end diff|, max |start diff|, max
/// |probability diff|) over the words, printed.
fn compare(case: &str) -> (f64, f64, f64, f64) {
    let r = reference(&format!("words_{case}"));
    let t = transcript(case);
    let segs = r["segments"].as_array().unwrap();
    assert_eq!(t.segments.len(), segs.len(), "{case}: segment count");
    let (mut ds, mut de, mut dp) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (got, want)) in t.segments.iter().zip(segs).enumerate() {
        assert_eq!(
            got.text,
            want["text"].as_str().unwrap(),
            "{case}: segment {i}"
        );
        let words = want["words"].as_array().unwrap();
        let got_words: Vec<&str> = got.words.iter().map(|w| w.word.as_str()).collect();
        let want_words: Vec<&str> = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
        assert_eq!(got_words, want_words, "{case}: words of segment {i}");
        for (g, w) in got.words.iter().zip(words) {
            ds.push((g.start - w["start"].as_f64().unwrap()).abs());
            de.push((g.end - w["end"].as_f64().unwrap()).abs());
            dp.push((g.probability - w["probability"].as_f64().unwrap()).abs());
        }
        // Segment times follow the words (faster-whisper moves them).
        assert!(
            (got.start - want["start"].as_f64().unwrap()).abs() <= 0.2
                && (got.end - want["end"].as_f64().unwrap()).abs() <= 0.2,
            "{case}: segment {i} [{}, {}] vs {want}",
            got.start,
            got.end
        );
    }
    let max_start = ds.iter().copied().fold(0.0, f64::max);
    let max_p = dp.iter().copied().fold(0.0, f64::max);
    let within_frame = ds.iter().filter(|&&d| d <= 0.021).count();
    let figures = (median(ds.clone()), median(de), max_start, max_p);
    eprintln!(
        "{case}: {} words; |start diff| median {:.3} s, max {:.3} s, {within_frame} within 0.02 s; \
         |end diff| median {:.3} s; |probability diff| max {:.4}",
        ds.len(),
        figures.0,
        figures.2,
        figures.1,
        figures.3
    );
    figures
}

/// The bound (median |start diff| <= 0.2 s) and, since the algorithm is the
/// reference's, the tighter one it reaches: medians within a frame (0.02 s).
fn assert_close(case: &str) {
    let (start, end, _, p) = compare(case);
    assert!(start <= 0.2, "{case}: median |start diff| {start}");
    assert!(
        start <= 0.02 && end <= 0.02,
        "{case}: medians {start} / {end}"
    );
    assert!(p <= 0.02, "{case}: probability diff {p}");
}

#[test]
fn jfk_words_match_faster_whisper() {
    assert_close("jfk");
}

#[test]
fn two_minutes_words_match_faster_whisper() {
    assert_close("long_2min");
}

#[test]
fn beam5_jfk_words_match_faster_whisper() {
    assert_close("jfk_beam5");
}

#[test]
fn beam5_two_minutes_words_match_faster_whisper() {
    assert_close("long_2min_beam5");
}

/// A multilingual model (the seeded-random fixture: its text is nonsense, with
/// multi-byte characters split over tokens): the detected language's sot sequence.
#[test]
fn multilingual_words_match_faster_whisper() {
    assert_close("multilingual_jfk");
}

#[test]
fn multilingual_translated_words_match_faster_whisper() {
    assert_close("multilingual_jfk_translate");
}

/// Without `word_timestamps` every segment has no words and the transcript is the
/// greedy one of the other tests.
#[test]
fn words_are_off_by_default() {
    let opts = TranscribeOptions {
        temperatures: vec![0.0],
        silence_rms: None,
        ..TranscribeOptions::default()
    };
    let t = model().transcribe(&clip("jfk"), &opts).unwrap();
    assert!(!t.segments.is_empty());
    assert!(t.segments.iter().all(|s| s.words.is_empty()));
}

fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
}

fn run_cli(args: &[&str]) -> std::process::Output {
    let out = cli()
        .arg("transcribe")
        .arg(tiny_en_model())
        .arg(whisper_dir().join("jfk.wav"))
        .args(["--backend", "cpu", "--no-fallback"])
        .args(args)
        .output()
        .unwrap();
    out
}

#[test]
fn cli_json_has_the_words() {
    let out = run_cli(&["--word-timestamps", "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = reference("words_jfk");
    let want: Vec<&str> = (r["segments"].as_array().unwrap().iter())
        .flat_map(|s| s["words"].as_array().unwrap().iter())
        .map(|w| w["word"].as_str().unwrap())
        .collect();
    let got: Vec<&str> = (j["segments"].as_array().unwrap().iter())
        .flat_map(|s| s["words"].as_array().unwrap().iter())
        .map(|w| w["word"].as_str().unwrap())
        .collect();
    assert_eq!(got, want);
    let w = &j["segments"][0]["words"][0];
    assert!(w["start"].is_f64() && w["end"].is_f64() && w["probability"].is_f64());
}

#[test]
fn cli_srt_lines_are_laid_out_from_the_words() {
    let out = run_cli(&[
        "--word-timestamps",
        "--max-line-width",
        "20",
        "--max-line-count",
        "2",
        "--format",
        "srt",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read_to_string(fixture("faster_whisper_words_jfk_w20_l2.srt")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    let out = run_cli(&["--word-timestamps", "--word-cues", "--format", "vtt"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read_to_string(fixture("faster_whisper_words_jfk_words.vtt")).unwrap();
    assert_eq!(
        with_hours(&String::from_utf8_lossy(&out.stdout)),
        with_hours(&want)
    );
}

#[test]
fn subtitle_layout_flags_need_word_timestamps() {
    for flags in [
        &["--max-line-width", "20"][..],
        &["--max-line-count", "2"],
        &["--word-cues"],
    ] {
        let out = run_cli(&[&["--format", "srt"], flags].concat());
        assert!(!out.status.success(), "{flags:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--word-timestamps"), "{flags:?}: {err}");
    }
}

/// openai-whisper's VTT leaves out the hours under an hour; ours always writes them.
fn with_hours(vtt: &str) -> String {
    (vtt.lines())
        .map(|l| match l.split_once(" --> ") {
            Some((a, b)) => {
                let h = |t: &str| {
                    if t.matches(':').count() == 1 {
                        format!("00:{t}")
                    } else {
                        t.to_string()
                    }
                };
                format!("{} --> {}", h(a), h(b))
            }
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The layouts of the subtitle fixtures (file suffix, ours).
fn layouts() -> [(&'static str, Layout); 4] {
    let l = |w, c, n| Layout {
        max_line_width: w,
        max_line_count: c,
        max_words_per_line: n,
    };
    [
        ("", l(None, None, None)),
        ("_w20_l2", l(Some(20), Some(2), None)),
        ("_w20", l(Some(20), None, None)),
        ("_words", l(None, None, Some(1))),
    ]
}

/// srt and vtt from our words equal what openai-whisper's subtitle writers make of
/// faster-whisper's words (the fixtures' .srt / .vtt), for each layout.
#[test]
fn subtitles_match_openai_whisper_writers() {
    for case in ["jfk", "long_2min"] {
        let t = transcript(case);
        for (suffix, layout) in layouts() {
            for (ext, f) in [("srt", Format::Srt), ("vtt", Format::Vtt)] {
                let name = format!("faster_whisper_words_{case}{suffix}.{ext}");
                let want = std::fs::read_to_string(fixture(&name)).unwrap();
                let got = render_with(&t, f, "x.wav", &layout);
                assert_eq!(with_hours(&got), with_hours(&want), "{name}");
            }
        }
    }
}

/// A file imported before the alignment heads were stored: word timestamps are a
/// structured error that says to import again; plain transcription still works.
#[test]
fn a_model_without_alignment_heads_says_to_import_again() {
    let mut m = cyb_llm::loader::load(tiny_en_model()).unwrap();
    assert!(m.config.architecture.extra.contains_key("alignment_heads"));
    m.config.architecture.extra.remove("alignment_heads");
    let old = SpeechModel::from_model(std::sync::Arc::new(m), &cpu()).unwrap();
    let opts = TranscribeOptions {
        temperatures: vec![0.0],
        word_timestamps: true,
        ..TranscribeOptions::default()
    };
    let jfk = clip("jfk");
    let err = old.transcribe(&jfk, &opts).unwrap_err().to_string();
    assert!(
        err.contains("alignment_heads") && err.contains("import"),
        "{err}"
    );
    let plain = TranscribeOptions {
        word_timestamps: false,
        ..opts
    };
    assert!(!old.transcribe(&jfk, &plain).unwrap().segments.is_empty());
}
