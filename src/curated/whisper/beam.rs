//! Beam search at temperature 0 as faster-whisper runs it (CTranslate2's
//! `BeamSearch`), batched over the beams on one encoder output:
//!
//! - one beam at the first step, then `beam_size`; each step scores every beam's
//!   filtered log-softmax row plus the beam's sum of log-probabilities and keeps the
//!   best `2 x beam_size` candidates over all beams (ties: lower beam, lower token);
//! - of the first `beam_size` candidates, one ending in `<|endoftext|>` (or any, at the
//!   last step) is a finished sequence (without `<|endoftext|>`, its log-probability
//!   counted), and its place goes to the next candidate after them that does not end;
//! - the search stops once `round(beam_size x patience)` sequences have finished (or
//!   at the last step); the best finished sequence by
//!   `sum_logprob / len ^ length_penalty` wins.
//!
//! openai-whisper differs: `beam_size + 1` candidates per beam, at most
//! `max_candidates` finished sequences kept, and a `((5 + len) / 6) ^ alpha` length
//! penalty; faster-whisper's rules are followed here.
//!
//! The beams share the window's encoder output and cross-attention K/V
//! ([`Whisper::decode_steps`]); each has its own self-attention cache, moved or copied
//! to the new beams as they are selected ([`reorder`]).

use super::decode::{
    compression_ratio, log_softmax, DecodeCache, DecodeResult, PromptState, WhisperForward,
};
use super::{TranscribeOptions, Whisper};
use crate::backend::ExecContext;
use crate::error::ExecutionError;

/// One live hypothesis.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Beam {
    /// Tokens after the prompt.
    pub tokens: Vec<u32>,
    /// Sum of their log-probabilities.
    pub sum_logprob: f64,
}

/// `sum_logprob / len ^ length_penalty`: the score a finished sequence is ranked by.
pub fn length_normalized(sum_logprob: f64, len: usize, length_penalty: f32) -> f64 {
    sum_logprob / (len as f64).powf(f64::from(length_penalty))
}

/// The best `k` entries of `row`, highest first (ties: the lower index).
fn top_k(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, &v) in row.iter().enumerate() {
        if top.len() == k && !top.last().is_some_and(|&(_, w)| v > w) {
            continue;
        }
        let at = top.partition_point(|&(_, w)| w >= v);
        top.insert(at, (i as u32, v));
        top.truncate(k);
    }
    top
}

/// The bookkeeping of one beam search: live beams and finished sequences.
#[derive(Debug, Clone)]
pub struct BeamSearch {
    beam_size: usize,
    max_candidates: usize,
    length_penalty: f32,
    eot: u32,
    beams: Vec<Beam>,
    finished: Vec<Beam>,
    ended: bool,
}

impl BeamSearch {
    /// A search of `beam_size` beams that stops after `round(beam_size x patience)`
    /// finished sequences; it starts from one empty beam.
    pub fn new(beam_size: usize, patience: f32, length_penalty: f32, eot: u32) -> BeamSearch {
        BeamSearch {
            beam_size,
            max_candidates: (beam_size as f32 * patience).round() as usize,
            length_penalty,
            eot,
            beams: vec![Beam::default()],
            finished: Vec::new(),
            ended: false,
        }
    }

    /// The live beams.
    pub fn beams(&self) -> &[Beam] {
        &self.beams
    }

    /// The finished sequences, in the order they ended.
    pub fn finished(&self) -> &[Beam] {
        &self.finished
    }

    /// One step: `log_probs[i]` is beam `i`'s log-softmax row (after the logit
    /// filters); `last` marks the last step allowed. Returns the parent beam of each
    /// new beam.
    pub fn step(&mut self, log_probs: &[Vec<f32>], last: bool) -> Vec<usize> {
        let n = 2 * self.beam_size;
        let mut cands: Vec<(f64, usize, u32)> = (self.beams.iter().zip(log_probs).enumerate())
            .flat_map(|(i, (b, row))| {
                top_k(row, n)
                    .into_iter()
                    .map(move |(t, lp)| (b.sum_logprob + f64::from(lp), i, t))
            })
            .collect();
        cands.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        cands.truncate(n);
        let extend = |c: (f64, usize, u32), keep_eot: bool| {
            let mut tokens = self.beams[c.1].tokens.clone();
            if keep_eot || c.2 != self.eot {
                tokens.push(c.2);
            }
            Beam {
                tokens,
                sum_logprob: c.0,
            }
        };
        let mut next = Vec::with_capacity(self.beam_size);
        let mut parents = Vec::with_capacity(self.beam_size);
        let mut secondary = self.beam_size;
        for k in 0..self.beam_size.min(cands.len()) {
            let mut chosen = k;
            if cands[k].2 == self.eot || last {
                self.finished.push(extend(cands[k], false));
                if let Some(j) = (secondary..cands.len()).find(|&j| cands[j].2 != self.eot) {
                    chosen = j;
                    secondary = j + 1;
                }
            }
            next.push(extend(cands[chosen], true));
            parents.push(cands[chosen].1);
        }
        self.beams = next;
        self.ended |= last;
        parents
    }

    /// True once enough sequences have finished (or the last step ran).
    pub fn done(&self) -> bool {
        self.ended || self.finished.len() >= self.max_candidates
    }

    /// The best finished sequence by [`length_normalized`] score (the first on ties);
    /// the first live beam when none finished.
    pub fn best(&self) -> Beam {
        let score =
            |b: &Beam| length_normalized(b.sum_logprob, b.tokens.len(), self.length_penalty);
        let mut best: Option<&Beam> = None;
        for b in &self.finished {
            if best.is_none_or(|x| score(b) > score(x)) {
                best = Some(b);
            }
        }
        best.or(self.beams.first()).cloned().unwrap_or_default()
    }
}

/// The caches of the new beams from the old ones: new beam `i` continues old beam
/// `parents[i]`. The first new beam of each parent takes the parent's cache as it is;
/// the others get `copy(parent's cache, a spare)` where the spare is an old cache no
/// new beam continues (None when there is none left).
pub fn reorder<T, E>(
    old: Vec<T>,
    parents: &[usize],
    mut copy: impl FnMut(&T, Option<T>) -> Result<T, E>,
) -> Result<Vec<T>, E> {
    let mut old: Vec<Option<T>> = old.into_iter().map(Some).collect();
    let mut slots: Vec<Option<T>> = parents.iter().map(|_| None).collect();
    let mut owner = vec![usize::MAX; old.len()];
    for (i, &p) in parents.iter().enumerate() {
        if let Some(c) = old.get_mut(p).and_then(Option::take) {
            slots[i] = Some(c);
            owner[p] = i;
        }
    }
    let mut spare = old.into_iter().flatten();
    for i in 0..parents.len() {
        if slots[i].is_none() {
            let dst = spare.next();
            if let Some(src) = owner.get(parents[i]).and_then(|&o| slots.get(o)?.as_ref()) {
                slots[i] = Some(copy(src, dst)?);
            }
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

impl Whisper {
    /// Beam search of one window whose prompt is in `cache` (positions after the
    /// prompt are dropped first; the cache is left holding the prompt).
    pub(super) fn decode_beam<F: WhisperForward>(
        &self,
        f: &F,
        enc: &F::Encoded,
        prompt: &PromptState,
        cache: &mut F::Cache,
        opts: &TranscribeOptions,
        ctx: &mut ExecContext,
    ) -> Result<DecodeResult, ExecutionError> {
        let c = &self.config;
        cache.truncate(prompt.len);
        let filter = self.logit_filter(opts.timestamps);
        // CTranslate2's limit: half the context, and what the prompt leaves of it.
        let max_steps = (c.n_text_ctx / 2).min((c.n_text_ctx + 1).saturating_sub(prompt.len));
        let mut search = BeamSearch::new(
            opts.beam_size,
            opts.patience,
            opts.length_penalty,
            c.special.eot,
        );
        let mut caches = vec![std::mem::replace(cache, f.new_cache()?)];
        let mut logits = vec![prompt.first[1].clone()];
        let mut fed = 0;
        for step in 0..max_steps {
            let rows: Vec<Vec<f32>> = (search.beams().iter().zip(&mut logits))
                .map(|(b, l)| {
                    filter.apply(l, &b.tokens);
                    log_softmax(l)
                })
                .collect();
            let parents = search.step(&rows, step + 1 == max_steps);
            if search.done() {
                break;
            }
            caches = reorder(caches, &parents, |src, spare| {
                let mut dst = match spare {
                    Some(d) => d,
                    None => f.new_cache()?,
                };
                f.copy_cache(src, &mut dst, ctx)?;
                Ok::<F::Cache, ExecutionError>(dst)
            })?;
            let tokens: Vec<u32> = (search.beams().iter())
                .map(|b| b.tokens.last().copied().unwrap_or(c.special.eot))
                .collect();
            let want: Vec<usize> = (0..tokens.len()).collect();
            logits = f.decode_steps(enc, &mut caches, &tokens, &want, ctx)?;
            fed += tokens.len();
        }
        *cache = caches.swap_remove(0);
        cache.truncate(prompt.len);
        let best = search.best();
        let text = self.text_of(&best.tokens);
        Ok(DecodeResult {
            avg_logprob: best.sum_logprob / (best.tokens.len() + 1) as f64,
            compression_ratio: compression_ratio(text.trim()),
            no_speech_prob: self.no_speech_prob(&prompt.first[0]),
            temperature: 0.0,
            fed,
            tokens: best.tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EOT: u32 = 3;

    /// Log-probability rows over 4 tokens (token 3 = eot) from probabilities.
    fn row(p: [f32; 4]) -> Vec<f32> {
        p.iter().map(|x| x.ln()).collect()
    }

    #[test]
    fn length_penalty_forms() {
        // len ^ 1: the average; len ^ 0: the plain sum; len ^ 0.5: between.
        assert_eq!(length_normalized(-6.0, 3, 1.0), -2.0);
        assert_eq!(length_normalized(-6.0, 3, 0.0), -6.0);
        assert!((length_normalized(-6.0, 4, 0.5) - -3.0).abs() < 1e-12);
    }

    #[test]
    fn top_k_prefers_the_lower_index_on_ties() {
        assert_eq!(
            top_k(&[0.5, 2.0, 0.5, 1.0], 3),
            vec![(1, 2.0), (3, 1.0), (0, 0.5)]
        );
    }

    #[test]
    fn eot_candidates_finish_and_are_replaced() {
        // Beam size 2, 4 candidates. Step 1 from one beam: tokens 0 (0.5), 1 (0.3).
        let mut s = BeamSearch::new(2, 1.0, 1.0, EOT);
        let p = s.step(&[row([0.5, 0.3, 0.1, 0.1])], false);
        assert_eq!(p, vec![0, 0]);
        assert_eq!(s.beams()[0].tokens, vec![0]);
        assert_eq!(s.beams()[1].tokens, vec![1]);
        // Step 2: beam 0 ends with probability 0.6 (best candidate: 0.5 * 0.6 = 0.3);
        // next 0.5 * 0.2 = 0.1 (beam 0, token 1), then the tie 0.3 * 0.3 = 0.09 of
        // beam 1's tokens 0 and 2. The finished slot goes to the third candidate
        // (beam 1, token 0); the second candidate keeps its place.
        let p = s.step(
            &[row([0.1, 0.2, 0.1, 0.6]), row([0.3, 0.2, 0.3, 0.2])],
            false,
        );
        assert_eq!(s.finished().len(), 1);
        assert_eq!(s.finished()[0].tokens, vec![0]);
        assert!((s.finished()[0].sum_logprob - (0.5f64 * 0.6).ln()).abs() < 1e-6);
        assert_eq!(p, vec![1, 0]);
        assert_eq!(s.beams()[0].tokens, vec![1, 0]);
        assert_eq!(s.beams()[1].tokens, vec![0, 1]);
        assert!(
            !s.done(),
            "patience 1 x 2 beams waits for a second finished sequence"
        );
        // The last step finishes every kept candidate.
        s.step(
            &[row([0.7, 0.1, 0.1, 0.1]), row([0.1, 0.1, 0.1, 0.7])],
            true,
        );
        assert!(s.done());
        assert_eq!(s.finished().len(), 3);
    }

    #[test]
    fn patience_sets_how_many_sequences_end_the_search() {
        let step_eot = |patience: f32| {
            let mut s = BeamSearch::new(2, patience, 1.0, EOT);
            s.step(&[row([0.4, 0.4, 0.1, 0.1])], false);
            // Both beams end with probability 0.7: two finished sequences at once.
            s.step(
                &[row([0.1, 0.1, 0.1, 0.7]), row([0.1, 0.1, 0.1, 0.7])],
                false,
            );
            s.done()
        };
        assert!(step_eot(0.5), "round(2 x 0.5) = 1");
        assert!(step_eot(1.0), "round(2 x 1) = 2");
        assert!(!step_eot(2.0), "round(2 x 2) = 4");
    }

    #[test]
    fn the_best_sequence_depends_on_the_length_penalty() {
        // A short sequence (1 token, sum -1.2) and a long one (4 tokens, sum -2.0):
        // per token -1.2 vs -0.5, so length normalization picks the long one; with
        // exponent 0 (plain sum) the short one wins.
        let finished = vec![
            Beam {
                tokens: vec![5],
                sum_logprob: -1.2,
            },
            Beam {
                tokens: vec![5, 6, 7, 8],
                sum_logprob: -2.0,
            },
        ];
        for (lp, want) in [(1.0, 4), (0.0, 1)] {
            let mut s = BeamSearch::new(2, 1.0, lp, EOT);
            s.finished = finished.clone();
            assert_eq!(s.best().tokens.len(), want, "length penalty {lp}");
        }
    }

    #[test]
    fn kv_reorder_moves_then_copies_into_spare_caches() {
        // Old caches hold their beam's history; new beams 0, 1 continue old beam 2,
        // new beam 2 continues old beam 0: old beam 1 is dropped and its buffer reused.
        let old = vec![vec![10u32], vec![11], vec![12]];
        let mut copies = Vec::new();
        let new = reorder(
            old,
            &[2, 2, 0],
            |src: &Vec<u32>, spare: Option<Vec<u32>>| {
                copies.push((src.clone(), spare.clone()));
                Ok::<_, ()>(src.clone())
            },
        )
        .unwrap();
        assert_eq!(new, vec![vec![12], vec![12], vec![10]]);
        assert_eq!(copies, vec![(vec![12], Some(vec![11]))]);
        // The first step: one cache, every new beam from it, no spare (a new buffer).
        let mut spares = Vec::new();
        let new = reorder(vec![vec![1u32]], &[0, 0, 0], |src: &Vec<u32>, spare| {
            spares.push(spare);
            Ok::<_, ()>(src.clone())
        })
        .unwrap();
        assert_eq!(new, vec![vec![1]; 3]);
        assert_eq!(spares, vec![None, None]);
    }
}
