//! `cyb-llm transcribe MODEL AUDIO... [--files-from LIST|-] [--format txt,srt,vtt,json]
//! [-o DIR] [--skip-existing] [--path auto|curated|graph] [-l LANG] [--translate] [--no-timestamps] [--beam-size N]
//! [--best-of N] [--patience P] [--length-penalty A] [--temperature T[,T...]]
//! [--initial-prompt TEXT] [--no-condition-on-previous-text] [--seed S] [--word-timestamps
//! [--max-line-width N --max-line-count N | --word-cues]] [--vad --vad-model PATH
//! [--vad-threshold P] [--vad-min-speech-duration-ms MS] [--vad-min-silence-duration-ms MS]
//! [--vad-speech-pad-ms MS]]`: one model
//! load for the whole batch; a bad file is reported and the batch goes on; exit 1
//! if any file failed, after a summary line.

use super::source::VerifyArg;
use super::CmdResult;
use cyb_llm::backend::BackendChoice;
use cyb_llm::transcribe::format::{render_with, Format, Layout};
use cyb_llm::transcribe::{SpeechModel, SpeechOptions, TranscribeOptions};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct TranscribeArgs {
    /// A WhisperStyle .model file, or a CTranslate2 / Hugging Face Whisper folder (imported once into the cache).
    model: PathBuf,
    #[command(flatten)]
    verify: VerifyArg,
    #[command(flatten)]
    words: WordArgs,
    /// Audio files (wav, flac, mp3, ogg; any sample rate and channel count).
    audio: Vec<PathBuf>,
    /// Read more paths from LIST, one per line (`-` = stdin).
    #[arg(long, value_name = "LIST")]
    files_from: Option<String>,
    /// Spoken language (`auto` detects it; English-only models ignore it).
    #[arg(short = 'l', long, default_value = "auto")]
    language: String,
    /// Translate to English (multilingual models).
    #[arg(long)]
    translate: bool,
    /// Do not predict timestamps (one segment per 30 s window).
    #[arg(long)]
    no_timestamps: bool,
    /// Output formats, comma separated: txt, srt, vtt, json.
    #[arg(long, default_value = "txt", value_delimiter = ',', value_parser = parse_format)]
    format: Vec<Format>,
    /// Write STEM.txt / STEM.srt / ... into DIR instead of printing to stdout.
    #[arg(short = 'o', long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Skip inputs whose outputs all exist in the output folder.
    #[arg(long)]
    skip_existing: bool,
    /// Take inputs K, K+N, K+2N, ... of the list only (0-based K; one worker of N).
    #[arg(long, value_name = "K/N", value_parser = super::shard::Shard::parse)]
    shard: Option<super::shard::Shard>,
    /// Worker threads (default: physical cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Backend: auto | cpu | wgpu | ...
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Execution path of the encoder and decoder (graph: the model's graph
    /// section on the executor; word timestamps are curated only).
    #[arg(long, value_enum, default_value = "auto")]
    path: super::run::PathChoice,
    /// Temperature fallback off: temperature 0 only (greedy, or beam search).
    #[arg(long, conflicts_with = "temperature")]
    no_fallback: bool,
    /// Beam search with N beams at temperature 0 (faster-whisper's default is 5);
    /// 1 is greedy decoding.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    beam_size: u32,
    /// Samples drawn per temperature above 0 (the best one is kept).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    best_of: u32,
    /// Beam search stops after round(beam size x P) finished sequences.
    #[arg(long, value_name = "P", default_value_t = 1.0, value_parser = parse_patience)]
    patience: f32,
    /// Sequences are ranked by sum log-prob / length ^ A.
    #[arg(long, value_name = "A", default_value_t = 1.0, value_parser = parse_length_penalty)]
    length_penalty: f32,
    /// Temperatures tried in order when a decoding fails the thresholds, comma
    /// separated (default 0,0.2,0.4,0.6,0.8,1).
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',', value_parser = parse_temperature)]
    temperature: Vec<f32>,
    /// Text that prompts the first window (names, spelling, style); its last 223
    /// tokens are kept.
    #[arg(long, value_name = "TEXT")]
    initial_prompt: Option<String>,
    /// Do not prompt each window with the previous windows' text.
    #[arg(long)]
    no_condition_on_previous_text: bool,
    /// Seed of the sampling at temperatures above 0 (the same seed gives the same
    /// transcript).
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    vad: super::vad::VadArgs,
}

fn parse_temperature(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        Ok(t) => Err(format!("temperature {t} is outside [0, inf)")),
        Err(_) => Err(format!("temperature `{s}` is not a number")),
    }
}

fn parse_patience(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(p) if p.is_finite() && p > 0.0 => Ok(p),
        _ => Err(format!("patience `{s}` is not a number above 0")),
    }
}

fn parse_length_penalty(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(a) if a.is_finite() => Ok(a),
        _ => Err(format!("length penalty `{s}` is not a finite number")),
    }
}

fn parse_format(s: &str) -> Result<Format, String> {
    Format::parse(s).ok_or_else(|| format!("unknown format `{s}` (txt|srt|vtt|json)"))
}

fn inputs(a: &TranscribeArgs) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let mut files = a.audio.clone();
    if let Some(list) = &a.files_from {
        let lines: Vec<String> = if list == "-" {
            std::io::stdin().lock().lines().collect::<Result<_, _>>()?
        } else {
            let f = std::fs::File::open(list).map_err(|e| format!("{list}: cannot read: {e}"))?;
            std::io::BufReader::new(f)
                .lines()
                .collect::<Result<_, _>>()?
        };
        files.extend(
            lines
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty())
                .map(PathBuf::from),
        );
    }
    if files.is_empty() {
        return Err("no audio files given (pass paths or --files-from LIST)".into());
    }
    Ok(match a.shard {
        Some(s) => s.select(files),
        None => files,
    })
}

fn output_path(dir: &Path, input: &Path, f: Format) -> PathBuf {
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "audio".into());
    dir.join(format!("{stem}.{}", f.extension()))
}

pub fn run(a: TranscribeArgs) -> CmdResult {
    let files = inputs(&a)?;
    if let Some(dir) = &a.output_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    }
    let file = a.verify.resolve(&a.model)?;
    let started = Instant::now();
    let mut opts = SpeechOptions {
        backend: BackendChoice::parse(&a.backend)?,
        path: a.path.into(),
        ..Default::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t.max(1);
    }
    let model = SpeechModel::load(file, &opts)?;
    let vad = a.vad.load(&opts)?;
    let load_s = started.elapsed().as_secs_f64();
    let topts = TranscribeOptions {
        language: (a.language != "auto").then(|| a.language.clone()),
        translate: a.translate,
        timestamps: !a.no_timestamps,
        temperatures: if a.no_fallback {
            vec![0.0]
        } else if a.temperature.is_empty() {
            TranscribeOptions::default().temperatures
        } else {
            a.temperature.clone()
        },
        beam_size: a.beam_size as usize,
        best_of: a.best_of as usize,
        patience: a.patience,
        length_penalty: a.length_penalty,
        initial_prompt: a.initial_prompt.clone(),
        condition_on_previous_text: !a.no_condition_on_previous_text,
        word_timestamps: a.words.word_timestamps,
        seed: a.seed,
        ..Default::default()
    };
    let layout = a.words.layout();
    let bar = super::terminal_progress(files.len(), "{bar:30} {pos}/{len} files {msg}");
    let report = |msg: String| match &bar {
        Some(b) => b.println(msg),
        None => eprintln!("{msg}"),
    };
    let (mut done, mut skipped, mut failed) = (0usize, 0usize, 0usize);
    let (mut audio_s, mut work_s) = (0.0f64, 0.0f64);
    let mut stages = cyb_llm::transcribe::Timings::default();
    let stdout = std::io::stdout();
    for file in &files {
        if let Some(b) = &bar {
            b.set_message(file.display().to_string());
        }
        if let (true, Some(dir)) = (a.skip_existing, &a.output_dir) {
            if a.format
                .iter()
                .all(|&f| output_path(dir, file, f).is_file())
            {
                skipped += 1;
                if let Some(b) = &bar {
                    b.inc(1);
                }
                continue;
            }
        }
        let t0 = Instant::now();
        let result = match &vad {
            Some((v, vopts)) => v.transcribe_file(&model, file, &topts, vopts),
            None => model.transcribe_file(file, &topts),
        }
        .map_err(|e| e.to_string())
        .and_then(|t| {
            let name = file.display().to_string();
            match &a.output_dir {
                Some(dir) => {
                    for &f in &a.format {
                        let path = output_path(dir, file, f);
                        write_atomic(&path, &render_with(&t, f, &name, &layout))?;
                    }
                }
                None => {
                    let mut out = stdout.lock();
                    for &f in &a.format {
                        out.write_all(render_with(&t, f, &name, &layout).as_bytes())
                            .map_err(|e| format!("stdout: {e}"))?;
                    }
                    out.flush().map_err(|e| format!("stdout: {e}"))?;
                }
            }
            Ok(t)
        });
        match result {
            Ok(t) => {
                done += 1;
                audio_s += t.duration;
                work_s += t0.elapsed().as_secs_f64();
                stages.mel_s += t.timings.mel_s;
                stages.encode_s += t.timings.encode_s;
                stages.decode_s += t.timings.decode_s;
                stages.windows += t.timings.windows;
                stages.decodes += t.timings.decodes;
                stages.tokens += t.timings.tokens;
            }
            Err(e) => {
                failed += 1;
                report(format!("error: {e}"));
            }
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let rtf = if audio_s > 0.0 { work_s / audio_s } else { 0.0 };
    eprintln!(
        "transcribed {done} of {} files ({skipped} skipped, {failed} failed); audio {audio_s:.1} s in {work_s:.2} s (RTF {rtf:.3}); model load {load_s:.2} s",
        files.len()
    );
    if done > 0 {
        eprintln!(
            "stages: mel {:.2} s, encoder {:.2} s ({} windows), decoder {:.2} s ({} passes, {} tokens)",
            stages.mel_s, stages.encode_s, stages.windows, stages.decode_s, stages.decodes, stages.tokens
        );
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Writes `text` to `path` through a temp file in the same folder, then renames.
fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let err = |e: std::io::Error| format!("{}: cannot write: {e}", path.display());
    let mut tmp = tempfile::Builder::new()
        .prefix(".cyb-transcribe-")
        .tempfile_in(dir)
        .map_err(err)?;
    tmp.write_all(text.as_bytes()).map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

/// The word-timestamp flags: per-word times in json, and the srt / vtt cue layout built
/// from them (openai-whisper's `--max_line_width`, `--max_line_count` and
/// `--max_words_per_line 1`), which need `--word-timestamps` as there.
#[derive(clap::Args, Debug)]
struct WordArgs {
    /// Per-word start, end and probability (cross-attention alignment, as faster-whisper's
    /// word_timestamps): `words` in json; srt / vtt cues from the words.
    #[arg(long)]
    word_timestamps: bool,
    /// Subtitle lines of at most N characters (srt, vtt); with --max-line-count, cues
    /// are filled across segments.
    #[arg(long, value_name = "N", requires = "word_timestamps",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_line_width: Option<u32>,
    /// At most N lines per subtitle cue (with --max-line-width).
    #[arg(long, value_name = "N", requires = "word_timestamps", requires = "max_line_width",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_line_count: Option<u32>,
    /// One subtitle cue per word (srt, vtt).
    #[arg(long, requires = "word_timestamps", conflicts_with_all = ["max_line_width", "max_line_count"])]
    word_cues: bool,
}

impl WordArgs {
    /// The srt / vtt cue layout the flags ask for.
    fn layout(&self) -> Layout {
        Layout {
            max_line_width: self.max_line_width.map(|n| n as usize),
            max_line_count: self.max_line_count.map(|n| n as usize),
            max_words_per_line: self.word_cues.then_some(1),
        }
    }
}
