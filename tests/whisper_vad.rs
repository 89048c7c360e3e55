//! `transcribe --vad`: Silero VAD v6 (faster-whisper's silero_vad_v6.onnx, imported
//! through the ONNX importer) against faster-whisper 1.2.1 on the same audio
//! (fixture by scripts/make_whisper_vad_fixtures.py: faster_whisper_vad.json):
//! per-window speech probabilities, speech regions of get_speech_timestamps under
//! three option sets, the padded-silence clip transcribed with `--vad`, and the
//! errors for a model that is not a VAD.

mod whisper_util;

use cyb_llm::transcribe::vad::{speech_timestamps, SpeechChunk, Vad, VadOptions};
use cyb_llm::transcribe::{SpeechModel, TranscribeOptions};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use whisper_util::*;

/// The ONNX file fetch-models.sh's `silero` target writes.
fn silero_onnx() -> PathBuf {
    let f = models_dir().join("silero/silero_vad_v6.onnx");
    assert!(
        f.is_file(),
        "{} is missing: run scripts/fetch-models.sh silero (or set CYB_MODELS_DIR) before the tests",
        f.display()
    );
    f
}

fn vad() -> &'static Vad {
    static V: OnceLock<Vad> = OnceLock::new();
    V.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("silero.model");
        cyb_llm::import::import(&silero_onnx(), &out, &Default::default()).expect("import Silero");
        Vad::load(&out, &cpu()).expect("load Silero")
    })
}

fn fixture_json() -> &'static serde_json::Value {
    static R: OnceLock<serde_json::Value> = OnceLock::new();
    R.get_or_init(|| reference("vad"))
}

/// The fixture's clip, built as the script builds it.
fn clip(name: &str) -> Vec<f32> {
    let jfk = || cyb_llm::audio::load_16k(&whisper_dir().join("jfk.wav")).unwrap();
    match name {
        "jfk" => jfk(),
        "padded_8s" => {
            let mut x = vec![0.0; 8 * 16_000];
            x.extend(jfk());
            x
        }
        "long_2min" => long_2min(),
        "silence_30s" => vec![0.0; 30 * 16_000],
        other => panic!("unknown clip {other}"),
    }
}

/// faster-whisper's `VadOptions` keywords as ours.
fn options(o: &serde_json::Value) -> VadOptions {
    let d = VadOptions::default();
    let ms = |k: &str, v: u32| o[k].as_u64().map_or(v, |x| x as u32);
    VadOptions {
        threshold: o["threshold"].as_f64().unwrap_or(d.threshold),
        neg_threshold: o["neg_threshold"].as_f64(),
        min_speech_duration_ms: ms("min_speech_duration_ms", d.min_speech_duration_ms),
        max_speech_duration_s: o["max_speech_duration_s"]
            .as_f64()
            .unwrap_or(d.max_speech_duration_s),
        min_silence_duration_ms: ms("min_silence_duration_ms", d.min_silence_duration_ms),
        speech_pad_ms: ms("speech_pad_ms", d.speech_pad_ms),
    }
}

fn regions(v: &serde_json::Value) -> Vec<SpeechChunk> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| SpeechChunk {
            start: r[0].as_u64().unwrap() as usize,
            end: r[1].as_u64().unwrap() as usize,
        })
        .collect()
}

fn clips() -> Vec<(String, &'static serde_json::Value)> {
    let c = fixture_json()["clips"].as_object().unwrap();
    assert_eq!(c.len(), 4, "clips in the fixture");
    c.iter().map(|(k, v)| (k.clone(), v)).collect()
}

#[test]
fn speech_probabilities_match_faster_whisper() {
    for (name, c) in clips() {
        let samples = clip(&name);
        assert_eq!(
            samples.len() as u64,
            c["samples"].as_u64().unwrap(),
            "{name}"
        );
        let want: Vec<f32> = (c["speech_probs"].as_array().unwrap().iter())
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let got = vad().speech_probs(&samples).expect("speech_probs");
        assert_eq!(got.len(), want.len(), "{name}: windows");
        let d = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        eprintln!("{name}: {} windows, max |diff| {d:e}", got.len());
        assert!(d <= 1e-4, "{name}: max |diff| {d:e} vs faster-whisper");
    }
}

/// Our get_speech_timestamps on faster-whisper's own probabilities gives its
/// regions exactly; on our probabilities, within 30 ms.
#[test]
fn speech_regions_match_get_speech_timestamps() {
    let opts = fixture_json()["options"].as_object().unwrap();
    assert_eq!(opts.len(), 3, "option sets in the fixture");
    let mut checked = 0;
    for (name, c) in clips() {
        let samples = clip(&name);
        let theirs: Vec<f32> = (c["speech_probs"].as_array().unwrap().iter())
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        for (key, o) in opts {
            let want = regions(&c["regions"][key]);
            let vo = options(o);
            let exact = speech_timestamps(&theirs, samples.len(), &vo);
            assert_eq!(
                exact, want,
                "{name}/{key}: regions from faster-whisper's probabilities"
            );
            let got = vad().speech_chunks(&samples, &vo).expect("speech_chunks");
            assert_eq!(got.len(), want.len(), "{name}/{key}: {got:?} vs {want:?}");
            for (g, w) in got.iter().zip(&want) {
                let off = g.start.abs_diff(w.start).max(g.end.abs_diff(w.end));
                assert!(off <= 480, "{name}/{key}: {g:?} vs {w:?} (more than 30 ms)");
            }
            checked += want.len();
        }
    }
    eprintln!("{checked} regions within 30 ms");
    assert!(checked >= 20, "only {checked} regions in the fixture");
}

fn tiny_en() -> &'static SpeechModel {
    static M: OnceLock<SpeechModel> = OnceLock::new();
    M.get_or_init(|| SpeechModel::load(tiny_en_model(), &cpu()).expect("load tiny.en"))
}

#[test]
fn silence_gives_no_segments_and_keeps_the_duration() {
    let t = vad()
        .transcribe(
            tiny_en(),
            &clip("silence_30s"),
            &TranscribeOptions::default(),
            &VadOptions::default(),
        )
        .expect("transcribe");
    assert!(t.segments.is_empty(), "{:?}", t.segments);
    assert_eq!(t.duration, 30.0);
}

fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
}

/// 8 s of silence before jfk.wav, transcribed by the CLI with `--vad` (the ONNX file
/// given directly): the text of the unpadded clip, and segments where faster-whisper's
/// vad_filter puts them (within 0.6 s), all after the silence.
#[test]
fn padded_silence_clip_with_vad_starts_at_the_speech() {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("padded_8s.wav");
    write_wav(&wav, 16_000, 1, &clip("padded_8s"));
    let cache = dir.path().join("cache");
    let out = cli()
        .env("XDG_CACHE_HOME", &cache)
        .arg("transcribe")
        .arg(tiny_en_model())
        .arg(&wav)
        .args([
            "--backend",
            "cpu",
            "--format",
            "json",
            "--vad",
            "--vad-model",
        ])
        .arg(silero_onnx())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &fixture_json()["transcripts"];
    let unpadded = tiny_en()
        .transcribe(&clip("jfk"), &TranscribeOptions::default())
        .expect("transcribe jfk");
    let text = normalize(got["text"].as_str().unwrap());
    assert_eq!(text, normalize(&unpadded.text()), "our unpadded transcript");
    assert_eq!(
        text,
        normalize(r["jfk"]["text"].as_str().unwrap()),
        "faster-whisper's unpadded transcript"
    );
    assert_eq!(got["duration"].as_f64(), Some(19.0));
    let want = r["padded_8s_vad"]["segments"].as_array().unwrap();
    let segs = got["segments"].as_array().unwrap();
    assert_eq!(segs.len(), want.len(), "{segs:?}");
    for (g, w) in segs.iter().zip(want) {
        for key in ["start", "end"] {
            let (a, b) = (g[key].as_f64().unwrap(), w[key].as_f64().unwrap());
            assert!((a - b).abs() <= 0.6, "{key} {a} vs faster-whisper's {b}");
        }
        assert!(g["start"].as_f64().unwrap() >= 7.4, "{g}");
    }
    eprintln!(
        "segments {:?}",
        segs.iter()
            .map(|s| (s["start"].as_f64().unwrap(), s["end"].as_f64().unwrap()))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_model_that_is_not_a_vad_is_refused_naming_it_and_what_to_use() {
    let err = Vad::load(tiny_en_model(), &cpu()).unwrap_err().to_string();
    assert!(
        err.contains(&tiny_en_model().display().to_string()),
        "{err}"
    );
    assert!(
        err.contains("not a voice activity detection model"),
        "{err}"
    );
    assert!(err.contains("silero_vad_v6.onnx"), "{err}");

    let out = cli()
        .arg("transcribe")
        .arg(tiny_en_model())
        .arg(whisper_dir().join("jfk.wav"))
        .args(["--backend", "cpu", "--vad", "--vad-model"])
        .arg(tiny_en_model())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("not a voice activity detection model"),
        "{stderr}"
    );
    assert!(
        stderr.contains("scripts/fetch-models.sh silero"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    // --vad needs a model; the VAD options need --vad.
    for args in [
        &["--vad"][..],
        &["--vad-threshold", "0.3"],
        &["--vad", "--vad-model", "x.onnx", "--vad-threshold", "2"],
    ] {
        let out = cli()
            .arg("transcribe")
            .arg(tiny_en_model())
            .arg(whisper_dir().join("jfk.wav"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// `--vad` with word timestamps: the padded-silence clip's words are mapped back
/// through the chunk of each word's middle (faster-whisper's
/// restore_speech_timestamps), so they match faster-whisper's words on the
/// original timeline, and each segment spans its words.
#[test]
fn word_timestamps_with_vad_are_on_the_original_timeline() {
    let opts = TranscribeOptions {
        word_timestamps: true,
        ..Default::default()
    };
    let got = vad()
        .transcribe(tiny_en(), &clip("padded_8s"), &opts, &VadOptions::default())
        .expect("transcribe with vad and words");
    let want = fixture_json()["transcripts"]["padded_8s_vad_words"]["segments"]
        .as_array()
        .unwrap();
    let want_words: Vec<&serde_json::Value> = want
        .iter()
        .flat_map(|s| s["words"].as_array().unwrap())
        .collect();
    let got_words: Vec<_> = got.segments.iter().flat_map(|s| &s.words).collect();
    assert_eq!(got_words.len(), want_words.len(), "{got_words:?}");
    let mut worst = 0.0f64;
    for (g, w) in got_words.iter().zip(&want_words) {
        assert_eq!(g.word, w["word"].as_str().unwrap());
        for (a, b) in [(g.start, &w["start"]), (g.end, &w["end"])] {
            worst = worst.max((a - b.as_f64().unwrap()).abs());
        }
        assert!(g.start >= 7.4, "{g:?} is inside the leading silence");
    }
    for s in &got.segments {
        assert_eq!(s.start, s.words[0].start);
        assert_eq!(s.end, s.words[s.words.len() - 1].end);
    }
    eprintln!("{} words, max |time diff| {worst:.3} s", got_words.len());
    assert!(
        worst <= 0.02,
        "a word time is {worst:.3} s from faster-whisper's"
    );
}
