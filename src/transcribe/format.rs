//! Transcript writers: `txt` (one segment per line), `srt`, `vtt` (WebVTT) and `json`.

use super::Transcript;

/// An output format of `cyb-llm transcribe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain text, one segment per line.
    Txt,
    /// SubRip subtitles.
    Srt,
    /// WebVTT subtitles.
    Vtt,
    /// JSON: language, duration, text and segments.
    Json,
}

impl Format {
    /// Parses `txt|srt|vtt|json`.
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "txt" => Format::Txt,
            "srt" => Format::Srt,
            "vtt" => Format::Vtt,
            "json" => Format::Json,
            _ => return None,
        })
    }

    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Txt => "txt",
            Format::Srt => "srt",
            Format::Vtt => "vtt",
            Format::Json => "json",
        }
    }
}

/// `HH:MM:SS{sep}mmm` for `seconds`.
pub fn timestamp(seconds: f64, sep: char) -> String {
    let ms = (seconds.max(0.0) * 1000.0).round() as u64;
    let (h, m, s, ms) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    format!("{h:02}:{m:02}:{s:02}{sep}{ms:03}")
}

/// How srt / vtt cues are laid out when the segments have words (openai-whisper's
/// subtitle writer options). The default keeps one cue per segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    /// Characters per line; with `max_line_count`, cues are filled line by line across
    /// segments (a pause of more than 3 s starts a new cue).
    pub max_line_width: Option<usize>,
    /// Lines per cue (with `max_line_width`).
    pub max_line_count: Option<usize>,
    /// Words per cue when segments are kept (1: one cue per word).
    pub max_words_per_line: Option<usize>,
}

/// One subtitle cue.
#[derive(Debug, Clone, PartialEq)]
struct Cue {
    start: f64,
    end: f64,
    text: String,
}

/// The cues of `t`: one per segment, or, when its segments have words, the words laid
/// out as openai-whisper's `SubtitlesWriter.iterate_result` does. A word continues the
/// line while the line has room (its length counted with its leading space); otherwise
/// it starts a new line (leading space dropped), and a new cue when the cue has
/// `max_line_count` lines or after a pause of more than 3 s (both only with width and
/// count given), or at each segment's start (segments kept: width or count not given;
/// there at most `max_words_per_line` words per cue).
fn cues(t: &Transcript, layout: &Layout) -> Vec<Cue> {
    if t.segments.iter().all(|s| s.words.is_empty()) {
        return (t.segments.iter())
            .map(|s| Cue {
                start: s.start,
                end: s.end,
                text: s.text.trim().to_string(),
            })
            .collect();
    }
    let preserve = layout.max_line_count.is_none() || layout.max_line_width.is_none();
    let width = layout.max_line_width.unwrap_or(1000);
    let per_line = layout.max_words_per_line.unwrap_or(1000).max(1);
    let mut out = Vec::new();
    let mut cue: Vec<(String, f64, f64)> = Vec::new();
    let flush = |cue: &mut Vec<(String, f64, f64)>, out: &mut Vec<Cue>| {
        if let (Some(first), Some(last)) = (cue.first(), cue.last()) {
            out.push(Cue {
                start: first.1,
                end: last.2,
                text: cue.iter().map(|w| w.0.as_str()).collect(),
            });
        }
        cue.clear();
    };
    let (mut line_len, mut line_count) = (0usize, 1usize);
    let mut last = (t.segments.iter())
        .find_map(|s| s.words.first().map(|w| w.start))
        .unwrap_or_else(|| t.segments.first().map_or(0.0, |s| s.start));
    for s in &t.segments {
        for chunk in s.words.chunks(per_line) {
            for (i, w) in chunk.iter().enumerate() {
                let mut word = w.word.clone();
                let long_pause = !preserve && w.start - last > 3.0;
                let has_room = line_len + word.chars().count() <= width;
                let seg_break = i == 0 && !cue.is_empty() && preserve;
                if line_len > 0 && has_room && !long_pause && !seg_break {
                    line_len += word.chars().count();
                } else {
                    word = word.trim().to_string();
                    let full =
                        (layout.max_line_count).is_some_and(|c| long_pause || line_count >= c);
                    if (!cue.is_empty() && full) || seg_break {
                        flush(&mut cue, &mut out);
                        line_count = 1;
                    } else if line_len > 0 {
                        line_count += 1;
                        word.insert(0, '\n');
                    }
                    line_len = word.trim().chars().count();
                }
                cue.push((word, w.start, w.end));
                last = w.start;
            }
        }
    }
    flush(&mut cue, &mut out);
    out
}

/// Renders `t` as `format`; `source` names the input in the JSON output.
pub fn render(t: &Transcript, format: Format, source: &str) -> String {
    render_with(t, format, source, &Layout::default())
}

/// [`render`] with the cue `layout` of srt and vtt (used when the segments have words).
pub fn render_with(t: &Transcript, format: Format, source: &str, layout: &Layout) -> String {
    let mut out = String::new();
    match format {
        Format::Txt => {
            for s in &t.segments {
                out.push_str(s.text.trim());
                out.push('\n');
            }
        }
        Format::Srt => {
            for (i, c) in cues(t, layout).iter().enumerate() {
                out.push_str(&format!(
                    "{}\n{} --> {}\n{}\n\n",
                    i + 1,
                    timestamp(c.start, ','),
                    timestamp(c.end, ','),
                    c.text
                ));
            }
        }
        Format::Vtt => {
            out.push_str("WEBVTT\n\n");
            for c in cues(t, layout) {
                out.push_str(&format!(
                    "{} --> {}\n{}\n\n",
                    timestamp(c.start, '.'),
                    timestamp(c.end, '.'),
                    c.text
                ));
            }
        }
        Format::Json => {
            let with_words = t.segments.iter().any(|s| !s.words.is_empty());
            let segments: Vec<serde_json::Value> = t
                .segments
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut v = serde_json::json!({
                        "id": i,
                        "start": s.start,
                        "end": s.end,
                        "text": s.text,
                        "tokens": s.tokens,
                        "avg_logprob": s.avg_logprob,
                        "no_speech_prob": s.no_speech_prob,
                        "temperature": s.temperature,
                        "compression_ratio": s.compression_ratio,
                    });
                    if with_words {
                        v["words"] = (s.words.iter())
                            .map(|w| {
                                serde_json::json!({
                                    "word": w.word,
                                    "start": w.start,
                                    "end": w.end,
                                    "probability": w.probability,
                                })
                            })
                            .collect();
                    }
                    v
                })
                .collect();
            let v = serde_json::json!({
                "file": source,
                "language": t.language,
                "duration": t.duration,
                "text": t.text(),
                "segments": segments,
            });
            out.push_str(&v.to_string());
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcribe::Segment;

    fn seg(start: f64, end: f64, text: &str) -> Segment {
        Segment {
            start,
            end,
            text: text.into(),
            tokens: vec![],
            avg_logprob: 0.0,
            no_speech_prob: 0.0,
            temperature: 0.0,
            compression_ratio: 1.0,
            words: vec![],
        }
    }

    fn worded(start: f64, words: &[(&str, f64, f64)]) -> Segment {
        let mut s = seg(start, words.last().map_or(start, |w| w.2), "");
        s.text = words.iter().map(|w| w.0).collect();
        s.words = (words.iter())
            .map(|&(word, start, end)| crate::transcribe::Word {
                word: word.into(),
                start,
                end,
                probability: 1.0,
            })
            .collect();
        s
    }

    /// The line rules: a word goes on the line while the line (leading spaces counted)
    /// stays within the width; a new line drops the word's leading space; a cue ends
    /// after `max_line_count` lines or before a pause over 3 s; segments are kept (one
    /// cue each, lines still wrapped) unless both width and count are given.
    #[test]
    fn word_cues_follow_the_line_rules() {
        let t = Transcript {
            segments: vec![
                worded(
                    0.0,
                    &[(" Ask", 0.0, 0.5), (" not", 0.5, 1.0), (" what", 1.0, 1.5)],
                ),
                worded(1.5, &[(" your", 1.5, 2.0), (" country", 2.0, 2.5)]),
                worded(9.0, &[(" can", 9.0, 9.5)]),
            ],
            ..Default::default()
        };
        let srt = |w, c, n| {
            let layout = Layout {
                max_line_width: w,
                max_line_count: c,
                max_words_per_line: n,
            };
            render_with(&t, Format::Srt, "a.wav", &layout)
        };
        // " Ask not" is 8 wide: " what" no longer fits in 10; 2 lines per cue; the
        // pause before "can" (9.0 - 2.0 > 3 s) starts a cue.
        assert_eq!(
            srt(Some(10), Some(2), None),
            "1\n00:00:00,000 --> 00:00:02,000\nAsk not\nwhat your\n\n\
             2\n00:00:02,000 --> 00:00:02,500\ncountry\n\n\
             3\n00:00:09,000 --> 00:00:09,500\ncan\n\n"
        );
        // Width alone: one cue per segment, lines wrapped.
        assert!(srt(Some(10), None, None)
            .starts_with("1\n00:00:00,000 --> 00:00:01,500\nAsk not\nwhat\n\n"));
        // One word per cue.
        let one = srt(None, None, Some(1));
        assert_eq!(one.matches(" --> ").count(), 6);
        assert!(one.contains("2\n00:00:00,500 --> 00:00:01,000\nnot\n"));
    }

    #[test]
    fn subtitles() {
        let t = Transcript {
            segments: vec![seg(0.0, 2.5, " Hello."), seg(3661.2, 3662.0, " Bye.")],
            language: "en".into(),
            duration: 3662.0,
            ..Default::default()
        };
        assert_eq!(
            render(&t, Format::Srt, "a.wav"),
            "1\n00:00:00,000 --> 00:00:02,500\nHello.\n\n2\n01:01:01,200 --> 01:01:02,000\nBye.\n\n"
        );
        assert!(render(&t, Format::Vtt, "a.wav")
            .starts_with("WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nHello.\n"));
        assert_eq!(render(&t, Format::Txt, "a.wav"), "Hello.\nBye.\n");
        let j: serde_json::Value =
            serde_json::from_str(&render(&t, Format::Json, "a.wav")).unwrap();
        assert_eq!(j["segments"][1]["start"], 3661.2);
        assert_eq!(j["text"], " Hello. Bye.");
    }
}
