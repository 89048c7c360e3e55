//! Word timestamps from cross-attention alignment, as faster-whisper computes them
//! (CTranslate2's `align`, then `find_alignment` / `add_word_timestamps`):
//!
//! - the decoder runs once more over `sot sequence + <|notimestamps|> + text + <|endoftext|>`
//!   on the window's encoder output; the raw scores `q·k / sqrt(dh)` of the model's
//!   alignment heads are kept, cut to the window's audio frames (`frames / 2`), and
//!   soft-maxed over them;
//! - each head is normalized over the tokens (`(x - mean) / std`, no epsilon), median
//!   filtered over the frames (width 7, reflected edges), and the heads averaged;
//! - DTW on the negated matrix (rows: `<|notimestamps|>` and the text tokens) gives a
//!   monotonic path; a token starts where the path first reaches its row;
//! - tokens are grouped into words (at spaces and punctuation; at whole characters for
//!   zh, ja, th, lo, my, yue), a word's probability is the mean of its tokens'
//!   (soft-maxed over the text vocabulary), punctuation is merged into the neighbouring
//!   words, and the duration heuristics clip words at sentence and segment boundaries.

use super::decode::WhisperForward;
use super::Whisper;
use crate::backend::{Dispatcher, ExecContext, Tensor};
use crate::error::ExecutionError;

/// One word of a segment: its text (with the leading space Whisper writes), start and
/// end in seconds, and probability.
#[derive(Debug, Clone, PartialEq)]
pub struct Word {
    /// The word as decoded, punctuation merged in (` "Hello,`).
    pub word: String,
    /// Start in seconds.
    pub start: f64,
    /// End in seconds.
    pub end: f64,
    /// Mean probability of the word's tokens.
    pub probability: f64,
}

/// Punctuation merged into the following word (faster-whisper's default).
pub const PREPEND_PUNCTUATIONS: &str = "\"'“¿([{-";
/// Punctuation merged into the preceding word (faster-whisper's default).
pub const APPEND_PUNCTUATIONS: &str = "\"'.。,，!！?？:：”)]}、";
/// Width of the median filter over the attention frames.
const MEDIAN_FILTER_WIDTH: usize = 7;
/// Audio frames per second of the encoder output (the time of one DTW column is 1 / 50 s).
const TOKENS_PER_SECOND: f64 = 50.0;
/// Languages written without spaces: words are split at whole characters.
const NO_SPACE_LANGUAGES: [&str; 6] = ["zh", "ja", "th", "lo", "my", "yue"];
/// Python's `string.punctuation`.
const ASCII_PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// The raw cross-attention scores of the alignment heads, collected during one decoder pass.
pub(crate) struct AlignCapture {
    /// `(layer, head)` pairs, in the model's order.
    heads: Vec<(usize, usize)>,
    /// Audio frames kept (the window's content).
    frames: usize,
    /// One `[rows, frames]` matrix per head, in layer order (the heads of a layer in
    /// the listed order).
    scores: Vec<Vec<f32>>,
}

impl AlignCapture {
    /// Adds the scores `q·k / sqrt(dh)` of layer `layer`'s alignment heads, given its
    /// cross-attention queries `q` `[rows, H, dh]` and keys `k` `[n_audio_ctx, H, dh]`,
    /// read back through `d` (the backends that computed them).
    pub(crate) fn take(
        &mut self,
        layer: usize,
        q: &Tensor,
        k: &Tensor,
        d: &Dispatcher,
    ) -> Result<(), ExecutionError> {
        let heads: Vec<usize> = (self.heads.iter())
            .filter(|&&(l, _)| l == layer)
            .map(|&(_, h)| h)
            .collect();
        if heads.is_empty() {
            return Ok(());
        }
        let (rows, nh, dh) = (q.shape()[0], q.shape()[1], q.shape()[2]);
        let frames = self.frames.min(k.shape()[0]);
        let (qv, kv) = (super::host(q, d)?, super::host(k, d)?);
        let scale = 1.0 / (dh as f32).sqrt();
        for h in heads {
            let mut m = vec![0.0f32; rows * frames];
            for (r, row) in m.chunks_mut(frames.max(1)).enumerate().take(rows) {
                let qr = &qv[(r * nh + h) * dh..][..dh];
                for (f, out) in row.iter_mut().enumerate() {
                    let kr = &kv[(f * nh + h) * dh..][..dh];
                    *out = qr.iter().zip(kr).map(|(a, b)| a * b).sum::<f32>() * scale;
                }
            }
            self.scores.push(m);
        }
        Ok(())
    }
}

/// Softmax of each row of `m` (`cols` wide), in place.
fn softmax_rows(m: &mut [f32], cols: usize) {
    for row in m.chunks_mut(cols.max(1)) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for v in row.iter_mut() {
            *v = (*v - max).exp();
            sum += *v;
        }
        for v in row.iter_mut() {
            *v /= sum;
        }
    }
}

/// `(x - mean) / std` down each column of `m` (`rows x cols`), population statistics,
/// no epsilon (CTranslate2's `NormalizeAttentionWeights`).
fn normalize_columns(m: &mut [f32], rows: usize, cols: usize) {
    for c in 0..cols {
        let mean = (0..rows).map(|r| m[r * cols + c]).sum::<f32>() / rows as f32;
        let var = (0..rows)
            .map(|r| (m[r * cols + c] - mean).powi(2))
            .sum::<f32>()
            / rows as f32;
        let inv = 1.0 / var.sqrt();
        for r in 0..rows {
            m[r * cols + c] = (m[r * cols + c] - mean) * inv;
        }
    }
}

/// Median filter of width `width` (odd) along each row, edges reflected (`x[-k] = x[k]`);
/// rows no longer than `width / 2` pass through (CTranslate2's `MedianFilter`).
fn median_filter_rows(m: &[f32], cols: usize, width: usize) -> Vec<f32> {
    let rank = width / 2;
    if cols <= rank {
        return m.to_vec();
    }
    let mut out = vec![0.0f32; m.len()];
    let mut window = vec![0.0f32; width];
    for (row, dst) in m.chunks(cols).zip(out.chunks_mut(cols)) {
        for (j, o) in dst.iter_mut().enumerate() {
            for (k, w) in window.iter_mut().enumerate() {
                let mut read = (j as isize + k as isize - rank as isize).unsigned_abs();
                if read >= cols {
                    read = (2 * cols).saturating_sub(read + 2);
                }
                *w = row[read];
            }
            window.sort_by(f32::total_cmp);
            *o = window[rank];
        }
    }
    out
}

/// Dynamic time warping of the negated `x` (`n x m`): the path `(row, column)` from
/// the first cell to the last, ties broken as openai-whisper and CTranslate2 do
/// (diagonal, then up, then left).
fn negative_dtw(x: &[f32], n: usize, m: usize) -> Vec<(usize, usize)> {
    let w = m + 1;
    let mut cost = vec![f32::INFINITY; (n + 1) * w];
    let mut trace = vec![2u8; (n + 1) * w];
    cost[0] = 0.0;
    for j in 1..=m {
        for i in 1..=n {
            let (c0, c1, c2) = (
                cost[(i - 1) * w + j - 1],
                cost[(i - 1) * w + j],
                cost[i * w + j - 1],
            );
            let (c, t) = if c0 < c1 && c0 < c2 {
                (c0, 0)
            } else if c1 < c0 && c1 < c2 {
                (c1, 1)
            } else {
                (c2, 2)
            };
            cost[i * w + j] = -x[(i - 1) * m + j - 1] + c;
            trace[i * w + j] = t;
        }
    }
    // Row 1 always runs left to (1, 1) and column 1 up to it (the other neighbours
    // cost infinity), so the path ends at (1, 1) -> (0, 0) as in the references.
    let (mut i, mut j) = (n, m);
    let mut path = Vec::with_capacity(n + m);
    while i > 0 && j > 0 {
        path.push((i - 1, j - 1));
        match trace[i * w + j] {
            0 => {
                i -= 1;
                j -= 1;
            }
            1 => i -= 1,
            _ => j -= 1,
        }
    }
    path.reverse();
    path
}

/// The alignment matrix of one window from the heads' raw scores (`rows x cols` each):
/// softmax over the frames, normalization over the rows, median filter, mean of the heads.
fn alignment_matrix(scores: &[Vec<f32>], rows: usize, cols: usize) -> Vec<f32> {
    let mut mean = vec![0.0f32; rows * cols];
    for s in scores {
        let mut m = s.clone();
        softmax_rows(&mut m, cols);
        normalize_columns(&mut m, rows, cols);
        let m = median_filter_rows(&m, cols, MEDIAN_FILTER_WIDTH);
        for (a, v) in mean.iter_mut().zip(m) {
            *a += v;
        }
    }
    let k = scores.len().max(1) as f32;
    mean.iter_mut().for_each(|v| *v /= k);
    mean
}

/// A word of the alignment before it is placed in a segment (faster-whisper's timing dict).
#[derive(Debug, Clone, PartialEq)]
struct Timing {
    word: String,
    tokens: Vec<u32>,
    start: f64,
    end: f64,
    probability: f64,
}

/// Splits `tokens` where their text is whole characters: a token whose bytes end inside
/// a character is joined with the next (faster-whisper's `split_tokens_on_unicode`).
fn split_on_unicode(tokens: &[u32], decode: &dyn Fn(&[u32]) -> String) -> Vec<(String, Vec<u32>)> {
    const REPLACEMENT: char = '\u{fffd}';
    let full: Vec<char> = decode(tokens).chars().collect();
    let mut out = Vec::new();
    let mut current = Vec::new();
    let mut offset = 0;
    for &t in tokens {
        current.push(t);
        let decoded = decode(&current);
        let bad = decoded.chars().position(|c| c == REPLACEMENT);
        if bad.is_none_or(|i| full.get(i + offset) == Some(&REPLACEMENT)) {
            offset += decoded.chars().count();
            out.push((decoded, std::mem::take(&mut current)));
        }
    }
    out
}

/// Groups `tokens` into words: a piece starting with a space, a punctuation piece or a
/// special token (>= `eot`) starts a new word; others join the previous one
/// (faster-whisper's `split_tokens_on_spaces`; Python's `in string.punctuation` is a
/// substring test, kept as such).
fn split_to_words(
    tokens: &[u32],
    eot: u32,
    language: &str,
    decode: &dyn Fn(&[u32]) -> String,
) -> Vec<(String, Vec<u32>)> {
    let pieces = split_on_unicode(tokens, decode);
    if NO_SPACE_LANGUAGES.contains(&language) {
        return pieces;
    }
    let mut words: Vec<(String, Vec<u32>)> = Vec::new();
    for (piece, toks) in pieces {
        let special = toks[0] >= eot;
        let punctuation = ASCII_PUNCTUATION.contains(piece.trim());
        match words.last_mut() {
            Some(last) if !(special || piece.starts_with(' ') || punctuation) => {
                last.0.push_str(&piece);
                last.1.extend(toks);
            }
            _ => words.push((piece, toks)),
        }
    }
    words
}

/// Python's `str.strip()` whitespace test on `c`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(char::is_whitespace)
}

/// Merges punctuation into the neighbouring words as faster-whisper's
/// `merge_punctuations` does: a word that is prepend punctuation after a space joins
/// the next word; a word found in `append` joins the previous word unless that one
/// ends with a space. Merged words are left empty (no text, no tokens).
fn merge_punctuations(a: &mut [Timing], prepend: &str, append: &str) {
    if a.len() >= 2 {
        let (mut i, mut j) = (a.len() as isize - 2, a.len() - 1);
        while i >= 0 {
            let iu = i as usize;
            if a[iu].word.starts_with(' ') && prepend.contains(py_strip(&a[iu].word)) {
                let (w, t) = (
                    std::mem::take(&mut a[iu].word),
                    std::mem::take(&mut a[iu].tokens),
                );
                a[j].word = w + &a[j].word;
                a[j].tokens.splice(0..0, t);
            } else {
                j = iu;
            }
            i -= 1;
        }
    }
    let (mut i, mut j) = (0, 1);
    while j < a.len() {
        if !a[i].word.ends_with(' ') && append.contains(a[j].word.as_str()) {
            let (w, t) = (
                std::mem::take(&mut a[j].word),
                std::mem::take(&mut a[j].tokens),
            );
            a[i].word.push_str(&w);
            a[i].tokens.extend(t);
        } else {
            i = j;
        }
        j += 1;
    }
}

/// `np.median` of `v` (the mean of the two middle values for an even count).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Python's `round(x, 2)` (round half to even on the exact binary value).
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// One window's subsegment while words are placed: its times (adjusted by the word
/// heuristics) and text tokens.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Subsegment {
    /// Start in seconds.
    pub(super) start: f64,
    /// End in seconds.
    pub(super) end: f64,
    /// The subsegment's tokens (timestamps included).
    pub(super) tokens: Vec<u32>,
    /// Its words, filled by [`Whisper::add_word_timestamps`].
    pub(super) words: Vec<Word>,
}

/// The word timings of one window: words from the DTW `path` over the rows
/// `<|notimestamps|>, text...` and the text tokens' probabilities (faster-whisper's
/// `find_alignment` after `align`).
fn timings(path: &[(usize, usize)], probs: &[f32], words: Vec<(String, Vec<u32>)>) -> Vec<Timing> {
    if words.len() <= 1 {
        return Vec::new();
    }
    let mut jump_times = Vec::new();
    let mut last_row = None;
    for &(row, col) in path {
        if last_row != Some(row) {
            jump_times.push(col as f64 / TOKENS_PER_SECOND);
        }
        last_row = Some(row);
    }
    let mut boundaries = vec![0usize];
    for (_, toks) in &words[..words.len() - 1] {
        boundaries.push(boundaries[boundaries.len() - 1] + toks.len());
    }
    let at = |i: usize| jump_times.get(i).copied().unwrap_or(0.0);
    (words.into_iter().zip(boundaries.windows(2)))
        .map(|((word, tokens), b)| {
            let p = &probs[b[0].min(probs.len())..b[1].min(probs.len())];
            Timing {
                word,
                tokens,
                start: at(b[0]),
                end: at(b[1]),
                probability: if p.is_empty() {
                    f64::NAN
                } else {
                    p.iter().map(|&v| f64::from(v)).sum::<f64>() / p.len() as f64
                },
            }
        })
        .collect()
}

/// Places the window's word `alignment` into `subs` and applies faster-whisper's
/// duration heuristics (`add_word_timestamps` after `find_alignment`): words longer
/// than twice the median word duration (at most 0.7 s) are clipped at sentence ends and
/// after pauses, and each subsegment's start / end moves to its first / last word unless
/// that word runs more than 0.5 s past it. `last_speech` is the end of the speech before.
fn place_words(
    mut alignment: Vec<Timing>,
    subs: &mut [Subsegment],
    time_offset: f64,
    mut last_speech: f64,
    eot: u32,
) {
    let mut durations: Vec<f64> = (alignment.iter())
        .map(|w| w.end - w.start)
        .filter(|&d| d != 0.0)
        .collect();
    let median_duration = median(&mut durations).min(0.7);
    let max_duration = median_duration * 2.0;
    if !durations.is_empty() {
        const SENTENCE_END: &str = ".。!！?？";
        for i in 1..alignment.len() {
            if alignment[i].end - alignment[i].start > max_duration {
                if SENTENCE_END.contains(alignment[i].word.as_str()) {
                    alignment[i].end = alignment[i].start + max_duration;
                } else if SENTENCE_END.contains(alignment[i - 1].word.as_str()) {
                    alignment[i].start = alignment[i].end - max_duration;
                }
            }
        }
    }
    merge_punctuations(&mut alignment, PREPEND_PUNCTUATIONS, APPEND_PUNCTUATIONS);
    let mut index = 0;
    for sub in subs.iter_mut() {
        let text_tokens = sub.tokens.iter().filter(|&&t| t < eot).count();
        let mut saved = 0;
        let mut words = Vec::new();
        while index < alignment.len() && saved < text_tokens {
            let t = &alignment[index];
            if !t.word.is_empty() {
                words.push(Word {
                    word: t.word.clone(),
                    start: round2(time_offset + t.start),
                    end: round2(time_offset + t.end),
                    probability: t.probability,
                });
            }
            saved += t.tokens.len();
            index += 1;
        }
        if let Some(first_end) = words.first().map(|w| w.end) {
            let long = |w: &Word| w.end - w.start > max_duration;
            let two_long = words.len() > 1 && words[1].end - words[0].start > max_duration * 2.0;
            if first_end - last_speech > median_duration * 4.0 && (long(&words[0]) || two_long) {
                if words.len() > 1 && long(&words[1]) {
                    let boundary = (words[1].end / 2.0).max(words[1].end - max_duration);
                    words[0].end = boundary;
                    words[1].start = boundary;
                }
                words[0].start = (words[0].end - max_duration).max(0.0);
            }
            if sub.start < words[0].end && sub.start - 0.5 > words[0].start {
                words[0].start = (words[0].end - median_duration).min(sub.start).max(0.0);
            } else {
                sub.start = words[0].start;
            }
            let last = words.len() - 1;
            if sub.end > words[last].start && sub.end + 0.5 < words[last].end {
                words[last].end = (words[last].start + median_duration).max(sub.end);
            } else {
                sub.end = words[last].end;
            }
            last_speech = sub.end;
        }
        sub.words = words;
    }
}

/// The end of the last word of `subs` (or, with no words, the last subsegment's end).
pub(super) fn last_end(subs: &[Subsegment]) -> Option<f64> {
    (subs.iter().rev())
        .find_map(|s| s.words.last().map(|w| w.end))
        .or_else(|| subs.last().map(|s| s.end))
}

impl Whisper {
    /// Word timestamps of one window: aligns the text tokens of `subs` (decoded from the
    /// window whose encoder output is `enc`, `frames` mel frames of content, starting at
    /// `time_offset` s) and fills their words, adjusting their times (see [`place_words`]).
    /// `sot_sequence` is `<|startoftranscript|>` with the language and task tokens of
    /// multilingual models; `last_speech` is the end of the previous speech. Errors when
    /// the model has no alignment heads (files imported before they were stored).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_word_timestamps<F: WhisperForward>(
        &self,
        f: &F,
        enc: &F::Encoded,
        sot_sequence: &[u32],
        language: &str,
        subs: &mut [Subsegment],
        frames: usize,
        time_offset: f64,
        last_speech: f64,
        ctx: &mut ExecContext,
    ) -> Result<(), ExecutionError> {
        let sp = &self.config.special;
        let text: Vec<u32> = (subs.iter())
            .flat_map(|s| s.tokens.iter().copied().filter(|&t| t < sp.eot))
            .collect();
        if text.is_empty() {
            return Ok(());
        }
        let heads =
            self.config
                .alignment_heads
                .clone()
                .ok_or_else(|| ExecutionError::InvalidConfig {
                    field: "architecture.alignment_heads".into(),
                    reason: "word timestamps need the model's alignment heads, which this file \
                         lacks (imported by an older cyb-llm): import the CTranslate2 folder \
                         again"
                        .into(),
                })?;
        let mut tokens = sot_sequence.to_vec();
        tokens.push(sp.no_timestamps);
        let offset = tokens.len();
        tokens.extend_from_slice(&text);
        tokens.push(sp.eot);
        let n = tokens.len();
        let cols = (frames / 2).min(self.config.n_audio_ctx);
        let mut capture = AlignCapture {
            heads,
            frames: cols,
            scores: Vec::new(),
        };
        let want: Vec<usize> = (offset - 1..offset - 1 + text.len()).collect();
        let logits = f.align(enc, &tokens, &want, &mut capture, ctx)?;
        // The text tokens' probabilities, soft-maxed over the text vocabulary (< eot).
        let probs: Vec<f32> = (logits.iter().zip(&text))
            .map(|(l, &t)| {
                let lp = super::decode::log_softmax(&l[..(sp.eot as usize).min(l.len())]);
                lp.get(t as usize).map_or(0.0, |v| v.exp())
            })
            .collect();
        let mut path = Vec::new();
        if cols > 0 && !capture.scores.is_empty() {
            let matrix = alignment_matrix(&capture.scores, n, cols);
            let rows = n - offset;
            path = negative_dtw(&matrix[(offset - 1) * cols..][..rows * cols], rows, cols);
        }
        let mut with_eot = text;
        with_eot.push(sp.eot);
        let decode = |t: &[u32]| self.decode_with_specials(t);
        let words = split_to_words(&with_eot, sp.eot, language, &decode);
        let alignment = timings(&path, &probs, words);
        place_words(alignment, subs, time_offset, last_speech, sp.eot);
        Ok(())
    }

    /// Text of `tokens` with special tokens spelled out (`<|endoftext|>`), as the
    /// reference's `decode_with_timestamps` gives it for text and special tokens.
    fn decode_with_specials(&self, tokens: &[u32]) -> String {
        let eot = self.config.special.eot;
        let mut out = String::new();
        let mut bytes = Vec::new();
        for &t in tokens {
            if t < eot {
                bytes.extend_from_slice(self.tokenizer.token_bytes(t));
            } else {
                out.push_str(&String::from_utf8_lossy(&std::mem::take(&mut bytes)));
                out.push_str(&self.tokenizer.token_to_piece(t));
            }
        }
        out.push_str(&String::from_utf8_lossy(&bytes));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(word: &str, start: f64, end: f64) -> Timing {
        Timing {
            word: word.into(),
            tokens: vec![0; word.len().max(1)],
            start,
            end,
            probability: 1.0,
        }
    }

    #[test]
    fn median_filter_reflects_at_the_edges() {
        // Width 3 over [5, 1, 4, 2]: windows (1,5,1), (5,1,4), (1,4,2), (4,2,4).
        let out = median_filter_rows(&[5.0, 1.0, 4.0, 2.0], 4, 3);
        assert_eq!(out, vec![1.0, 4.0, 2.0, 4.0]);
        // Rows no longer than width / 2 pass through.
        assert_eq!(median_filter_rows(&[3.0, 1.0], 2, 7), vec![3.0, 1.0]);
    }

    #[test]
    fn columns_are_standardized() {
        let mut m = vec![1.0, 10.0, 3.0, 30.0];
        normalize_columns(&mut m, 2, 2);
        assert_eq!(m, vec![-1.0, -1.0, 1.0, 1.0]);
    }

    #[test]
    fn dtw_follows_the_largest_values() {
        // Row 0 is strongest at columns 0-1, row 1 at columns 2-3. Worked by hand: the
        // cost at (row 1, column 1) ties the step from (0, 1) with the diagonal from
        // (0, 0) and the tie goes up, so row 1 starts at column 1.
        let x = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        let path = vec![(0, 0), (0, 1), (1, 1), (1, 2), (1, 3)];
        assert_eq!(negative_dtw(&x, 2, 4), path);
        // A clear diagonal (off-diagonal cells cost more than a diagonal step).
        let x = [1.0, -1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -1.0, 1.0];
        assert_eq!(negative_dtw(&x, 3, 3), vec![(0, 0), (1, 1), (2, 2)]);
    }

    #[test]
    fn punctuation_joins_its_neighbours() {
        let mut a = vec![
            timing(" \"", 0.0, 0.1),
            timing("Hello", 0.1, 0.5),
            timing(",", 0.5, 0.5),
            timing(" world", 0.5, 0.9),
            timing(".\"", 0.9, 1.0),
        ];
        merge_punctuations(&mut a, PREPEND_PUNCTUATIONS, APPEND_PUNCTUATIONS);
        let words: Vec<&str> = a.iter().map(|t| t.word.as_str()).collect();
        // `."` is not one of the append marks (a substring test), so it stays.
        assert_eq!(words, vec!["", " \"Hello,", "", " world", ".\""]);
        assert_eq!(a[1].tokens.len(), 2 + 5 + 1);
    }

    #[test]
    fn words_split_at_spaces_and_punctuation() {
        let pieces = ["And", " so", " my", ",", " fell", "ow", "<|endoftext|>"];
        let decode = |t: &[u32]| t.iter().map(|&i| pieces[i as usize]).collect::<String>();
        let toks: Vec<u32> = (0..7).collect();
        let w = split_to_words(&toks, 6, "en", &decode);
        let words: Vec<&str> = w.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            words,
            vec!["And", " so", " my", ",", " fellow", "<|endoftext|>"]
        );
        assert_eq!(w[4].1, vec![4, 5]);
        // Without spaces: every whole piece is a word.
        assert_eq!(split_to_words(&toks, 6, "ja", &decode).len(), 7);
    }

    #[test]
    fn a_token_ending_inside_a_character_joins_the_next() {
        // "é" is two bytes split over two tokens.
        let bytes: [&[u8]; 3] = [b" caf", &[0xc3], &[0xa9]];
        let decode = |t: &[u32]| {
            let b: Vec<u8> = t.iter().flat_map(|&i| bytes[i as usize].to_vec()).collect();
            String::from_utf8_lossy(&b).into_owned()
        };
        let w = split_on_unicode(&[0, 1, 2], &decode);
        assert_eq!(w, vec![(" caf".into(), vec![0]), ("é".into(), vec![1, 2])]);
    }

    #[test]
    fn jump_times_give_word_starts_and_ends() {
        // Rows: <|notimestamps|>, " a", " b"; the path reaches them at columns 0, 5, 10.
        let path = [(0, 0), (0, 4), (1, 5), (1, 9), (2, 10), (2, 12)];
        let words = vec![
            (" a".to_string(), vec![1]),
            (" b".to_string(), vec![2]),
            ("<|endoftext|>".to_string(), vec![9]),
        ];
        let t = timings(&path, &[0.5, 1.0], words);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].start, t[0].end), (0.0, 0.1));
        assert_eq!((t[1].start, t[1].end), (0.1, 0.2));
        assert_eq!(t[1].probability, 1.0);
    }

    #[test]
    fn segment_times_follow_their_words() {
        let mut alignment = vec![timing(" a", 0.0, 0.3), timing(" b", 0.3, 0.6)];
        alignment[0].tokens = vec![1];
        alignment[1].tokens = vec![2];
        let mut subs = vec![Subsegment {
            start: 10.0,
            end: 11.0,
            tokens: vec![1, 2, 50],
            words: vec![],
        }];
        place_words(alignment, &mut subs, 10.0, 9.9, 50);
        assert_eq!((subs[0].start, subs[0].end), (10.0, 10.6));
        assert_eq!(subs[0].words[1].word, " b");
        assert_eq!(last_end(&subs), Some(10.6));
    }
}
