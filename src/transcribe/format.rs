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

/// Renders `t` as `format`; `source` names the input in the JSON output.
pub fn render(t: &Transcript, format: Format, source: &str) -> String {
    let mut out = String::new();
    match format {
        Format::Txt => {
            for s in &t.segments {
                out.push_str(s.text.trim());
                out.push('\n');
            }
        }
        Format::Srt => {
            for (i, s) in t.segments.iter().enumerate() {
                out.push_str(&format!(
                    "{}\n{} --> {}\n{}\n\n",
                    i + 1,
                    timestamp(s.start, ','),
                    timestamp(s.end, ','),
                    s.text.trim()
                ));
            }
        }
        Format::Vtt => {
            out.push_str("WEBVTT\n\n");
            for s in &t.segments {
                out.push_str(&format!(
                    "{} --> {}\n{}\n\n",
                    timestamp(s.start, '.'),
                    timestamp(s.end, '.'),
                    s.text.trim()
                ));
            }
        }
        Format::Json => {
            let segments: Vec<serde_json::Value> = t
                .segments
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    serde_json::json!({
                        "id": i,
                        "start": s.start,
                        "end": s.end,
                        "text": s.text,
                        "tokens": s.tokens,
                        "avg_logprob": s.avg_logprob,
                        "no_speech_prob": s.no_speech_prob,
                        "temperature": s.temperature,
                        "compression_ratio": s.compression_ratio,
                    })
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
