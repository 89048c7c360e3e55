//! `cyb-llm speak MODEL [--text T]... [--file F] [stdin] (-o OUT.wav |
//! --output-dir DIR | --output-raw)`: text to speech with a Piper voice, as
//! Piper's own command line does it (each input line one utterance, its
//! sentences joined with `--sentence-silence`).

use super::source::VerifyArg;
use super::{terminal_progress, writable_dir, CmdResult};
use cyb_llm::backend::{BackendChoice, BackendConfig};
use cyb_llm::speak::wav::write_wav;
use cyb_llm::speak::{Speech, SynthesisOptions, Voice, VoiceOptions};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct SpeakArgs {
    /// The voice: a .model file, or a Piper VOICE.onnx with VOICE.onnx.json beside it.
    model: PathBuf,
    #[command(flatten)]
    verify: VerifyArg,
    /// Text to speak (repeatable; each is one utterance). Default: --file, else stdin lines.
    #[arg(long = "text", value_name = "T")]
    texts: Vec<String>,
    /// A file of texts, one utterance per line.
    #[arg(long, value_name = "F")]
    file: Option<PathBuf>,
    /// Write all input as one WAV file.
    #[arg(short = 'o', long = "output-file", value_name = "OUT.wav")]
    output: Option<PathBuf>,
    /// Write one WAV per input line into DIR (0001.wav, 0002.wav, ...).
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// With --output-dir: keep WAV files that already exist (their lines are not spoken).
    #[arg(long)]
    skip_existing: bool,
    /// Write raw 16-bit mono PCM to stdout (e.g. `| aplay -r 22050 -f S16_LE -t raw -`).
    #[arg(long)]
    output_raw: bool,
    /// Scale of the generator noise (default: the voice's, usually 0.667).
    #[arg(long)]
    noise_scale: Option<f32>,
    /// Scale of the phoneme-width noise (default: the voice's, usually 0.8).
    #[arg(long = "noise-w", alias = "noise-w-scale")]
    noise_w: Option<f32>,
    /// Phoneme length: above 1 speaks slower (default: the voice's, usually 1).
    #[arg(long)]
    length_scale: Option<f32>,
    /// Speaker name or id (multi-speaker voices).
    #[arg(long)]
    speaker: Option<String>,
    /// Seed of the noise (default: random, printed on stderr); the same seed gives the same audio.
    #[arg(long)]
    seed: Option<u64>,
    /// Seconds of silence between the sentences of an utterance.
    #[arg(long, default_value_t = 0.0)]
    sentence_silence: f32,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Backend: auto, cpu, reference, wgpu, nox, ...
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Skip the fusion pass.
    #[arg(long)]
    no_fuse: bool,
    /// Print load, frontend and synthesis times and the real-time factor on stderr.
    #[arg(long)]
    timings: bool,
    /// Print one JSON object (files, seconds of audio, times) on stdout.
    #[arg(long)]
    json: bool,
}

/// Where the speech goes.
enum Sink {
    File(PathBuf),
    Dir(PathBuf),
    Raw,
}

fn sink(a: &SpeakArgs) -> Result<Sink, String> {
    let chosen = [a.output.is_some(), a.output_dir.is_some(), a.output_raw];
    match chosen.iter().filter(|&&c| c).count() {
        0 => {
            return Err(
                "choose where the speech goes: -o OUT.wav, --output-dir DIR or --output-raw".into(),
            )
        }
        1 => {}
        _ => return Err("-o, --output-dir and --output-raw exclude each other; give one".into()),
    }
    if a.skip_existing && a.output_dir.is_none() {
        return Err("--skip-existing applies to --output-dir only".into());
    }
    if a.json && a.output_raw {
        return Err("--json and --output-raw both write to stdout; give one".into());
    }
    Ok(match (&a.output, &a.output_dir) {
        (Some(f), _) => Sink::File(f.clone()),
        (_, Some(d)) => Sink::Dir(d.clone()),
        _ => Sink::Raw,
    })
}

/// The utterances: `--text`s, else the lines of `--file`, else of stdin;
/// blank lines are skipped. No utterance at all is an error.
fn utterances(a: &SpeakArgs) -> Result<Vec<String>, String> {
    let lines: Vec<String> = if !a.texts.is_empty() {
        if a.file.is_some() {
            return Err("--text and --file exclude each other; give one".into());
        }
        a.texts.clone()
    } else if let Some(f) = &a.file {
        std::fs::read_to_string(f)
            .map_err(|e| format!("--file {}: {e}", f.display()))?
            .lines()
            .map(str::to_string)
            .collect()
    } else {
        if std::io::stdin().is_terminal() {
            eprintln!("reading text from stdin, one utterance per line (Ctrl-D ends)");
        }
        std::io::stdin()
            .lock()
            .lines()
            .collect::<Result<_, _>>()
            .map_err(|e| format!("stdin: {e}"))?
    };
    let lines: Vec<String> = lines
        .into_iter()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return Err("the text is empty: give --text, --file or lines on stdin".into());
    }
    Ok(lines)
}

pub fn run(a: SpeakArgs) -> CmdResult {
    let started = Instant::now();
    cyb_llm::speak::retain_freed_memory();
    let sink = sink(&a)?;
    match &sink {
        Sink::File(f) => writable_dir(
            "-o",
            f.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        )?,
        Sink::Dir(d) => writable_dir("--output-dir", d)?,
        Sink::Raw => {}
    }
    let lines = utterances(&a)?;
    let file = a.verify.resolve(&a.model)?;
    let what = a.model.display().to_string();
    let opts = VoiceOptions {
        backend: BackendChoice::parse(&a.backend)?,
        threads: a
            .threads
            .unwrap_or_else(|| BackendConfig::default().threads),
        fuse: !a.no_fuse,
    };
    let voice = Voice::load(&file, &opts).map_err(|e| format!("{what}: {e}"))?;
    let synth_opts = SynthesisOptions {
        noise_scale: a.noise_scale,
        length_scale: a.length_scale,
        noise_w: a.noise_w,
        speaker: a.speaker.clone(),
        sentence_silence: a.sentence_silence,
        seed: Some(a.seed.unwrap_or_else(rand::random)),
    };
    if a.seed.is_none() {
        eprintln!("seed: {}", synth_opts.seed.unwrap_or_default());
    }
    voice.speaker_id(&synth_opts)?;
    let rate = voice.config().sample_rate;
    let mut warned: Vec<String> = Vec::new();
    let mut warn_unknown = |speech: &Speech| {
        for u in &speech.unknown {
            if !warned.contains(u) {
                eprintln!("warning: phoneme {u:?} is not in the voice's phoneme map; skipped");
                warned.push(u.clone());
            }
        }
    };
    let mut totals = Totals::default();
    let mut files = Vec::new();
    match &sink {
        Sink::File(path) => {
            let mut all = Vec::new();
            for line in &lines {
                let speech = voice
                    .speak(line, &synth_opts)
                    .map_err(|e| format!("{what}: {e}"))?;
                warn_unknown(&speech);
                totals.add(&speech);
                all.extend_from_slice(&speech.samples);
            }
            write_wav(path, &all, rate)?;
            files.push(path.clone());
        }
        Sink::Dir(dir) => {
            let bar = terminal_progress(lines.len(), "{bar:40} {pos}/{len} utterances {elapsed}");
            for (i, line) in lines.iter().enumerate() {
                let path = dir.join(format!("{:04}.wav", i + 1));
                if !(a.skip_existing && path.exists()) {
                    let speech = voice
                        .speak(line, &synth_opts)
                        .map_err(|e| format!("{what}: {e}"))?;
                    warn_unknown(&speech);
                    totals.add(&speech);
                    write_wav(&path, &speech.samples, rate)?;
                    files.push(path);
                }
                if let Some(b) = &bar {
                    b.inc(1);
                }
            }
            if let Some(b) = bar {
                b.finish_and_clear();
            }
        }
        Sink::Raw => {
            let mut out = std::io::stdout().lock();
            for line in &lines {
                let speech = voice
                    .speak(line, &synth_opts)
                    .map_err(|e| format!("{what}: {e}"))?;
                warn_unknown(&speech);
                totals.add(&speech);
                out.write_all(bytemuck::cast_slice(&speech.samples))?;
                out.flush()?;
            }
        }
    }
    let audio_s = totals.samples as f64 / f64::from(rate);
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    let rtf = |ms: f64| {
        if audio_s > 0.0 {
            ms / 1e3 / audio_s
        } else {
            0.0
        }
    };
    if a.timings {
        eprintln!(
            "load {:.0} ms, frontend {:.1} ms, synthesis {:.0} ms for {audio_s:.2} s of audio ({} sentences, {} Hz): real-time factor {:.4} (synthesis), {:.4} (whole command)",
            voice.load_ms(),
            totals.frontend_ms,
            totals.synthesis_ms,
            totals.sentences,
            rate,
            rtf(totals.synthesis_ms),
            rtf(wall_ms)
        );
    }
    if a.json {
        let v = serde_json::json!({
            "files": files,
            "utterances": lines.len(),
            "sentences": totals.sentences,
            "sample_rate": rate,
            "seconds": audio_s,
            "load_ms": voice.load_ms(),
            "frontend_ms": totals.frontend_ms,
            "synthesis_ms": totals.synthesis_ms,
            "rtf": rtf(totals.synthesis_ms),
            "rtf_total": rtf(wall_ms),
            "unknown_phonemes": warned,
            "seed": synth_opts.seed,
            "backend": voice.graph_model().dispatcher().primary().name(),
        });
        println!("{v}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Sums over the utterances spoken.
#[derive(Default)]
struct Totals {
    samples: usize,
    sentences: usize,
    frontend_ms: f64,
    synthesis_ms: f64,
}

impl Totals {
    fn add(&mut self, s: &Speech) {
        self.samples += s.samples.len();
        self.sentences += s.sentences;
        self.frontend_ms += s.frontend_ms;
        self.synthesis_ms += s.synthesis_ms;
    }
}
