//! BertStyle on the real all-MiniLM-L6-v2 against sentence-transformers and
//! transformers (`tests/fixtures/bert/minilm_embeddings.json` and
//! `minilm_hidden.safetensors`, written by `scripts/make_bert_fixtures.py` from
//! the same weights). Both computations are f32, so embeddings and hidden
//! states are compared element by element: every element within [`TOL`] of the
//! vector's (or the state matrix's) max |value|.

mod bert_util;

use bert_util::{cosine, encoder, fixture, floats, minilm_hidden, minilm_model, rel_err};
use cyb_llm::encode::{pool, EmbedOptions, Pooling};
use serde_json::Value;

/// Element-wise bound against transformers / sentence-transformers, relative to
/// max |reference| (measured: 6.5e-7 hidden states, 1.4e-6 embeddings).
const TOL: f32 = 1e-5;

fn sentences(fx: &Value) -> Vec<String> {
    fx["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn ids(fx: &Value, i: usize) -> Vec<u32> {
    fx["input_ids"][i]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn config_defaults_come_from_the_sentence_transformers_folder() {
    let enc = encoder(&minilm_model(), 2);
    let c = &enc.bert().config;
    assert_eq!((c.pooling, c.normalize), (Pooling::Mean, true));
    assert_eq!(
        enc.max_tokens(),
        256,
        "sentence_bert_config.json max_seq_length"
    );
    assert_eq!((c.hidden, c.layers, c.heads), (384, 6, 12));
    assert!(enc.bert().num_labels().is_none());
}

#[test]
fn tokens_match_hugging_face_with_truncation_at_256() {
    let fx = fixture("minilm_embeddings.json");
    let texts = sentences(&fx);
    let enc = encoder(&minilm_model(), 2);
    let t = enc.tokenize(&texts).unwrap();
    for (i, got) in t.tokens.iter().enumerate() {
        assert_eq!(got, &ids(&fx, i), "sentence {i} {:?}", texts[i]);
    }
    let counts: Vec<usize> = fx["untruncated_token_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect();
    let want: Vec<(usize, usize)> = counts
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 256)
        .map(|(i, &n)| (i, n))
        .collect();
    assert_eq!(t.truncated, want);
    assert!(
        want.len() >= 2,
        "the fixture has texts over 256 and 512 tokens"
    );
}

/// Every embedding element within [`TOL`] of sentence-transformers', for several batch sizes.
#[test]
fn embeddings_match_sentence_transformers() {
    let fx = fixture("minilm_embeddings.json");
    let texts = sentences(&fx);
    assert_eq!(texts.len(), 20);
    let mut enc = encoder(&minilm_model(), 2);
    for batch_size in [1, 7, 32] {
        let opts = EmbedOptions {
            batch_size,
            ..EmbedOptions::defaults(enc.bert())
        };
        let mut calls = Vec::new();
        let got = enc
            .embed(&texts, &opts, &mut |done| calls.push(done))
            .unwrap();
        assert_eq!(calls.last(), Some(&20), "progress reaches the total");
        assert_eq!(calls.len(), 20usize.div_ceil(batch_size));
        let mut worst = 0f32;
        for (i, e) in got.iter().enumerate() {
            let want = floats(&fx["embeddings"][i]);
            let err = rel_err(e, &want);
            worst = worst.max(err);
            assert!(
                err <= TOL,
                "batch {batch_size}, sentence {i} {:?}: relative error {err:.2e}",
                texts[i]
            );
            let norm: f32 = e.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "normalized: {norm}");
        }
        eprintln!("batch {batch_size}: worst relative error vs sentence-transformers {worst:.2e}");
    }
}

#[test]
fn known_similarities_hold() {
    let fx = fixture("minilm_embeddings.json");
    let texts = sentences(&fx);
    let mut enc = encoder(&minilm_model(), 2);
    let opts = EmbedOptions::defaults(enc.bert());
    let got = enc.embed(&texts, &opts, &mut |_| {}).unwrap();
    let mut sims = Vec::new();
    for p in fx["similarities"].as_array().unwrap() {
        let (a, b) = (
            p["a"].as_u64().unwrap() as usize,
            p["b"].as_u64().unwrap() as usize,
        );
        let want = p["cosine"].as_f64().unwrap();
        let c = cosine(&got[a], &got[b]);
        assert!((c - want).abs() < 2e-4, "{a} vs {b}: {c} vs {want}");
        sims.push(c);
    }
    // "A man is eating food." vs "A man is eating a piece of bread." is 0.755...
    assert!((sims[0] - 0.7553).abs() < 1e-3, "{}", sims[0]);
    // ... and closer than "A man is riding a horse.", closer than the fox.
    assert!(sims[0] > sims[1] && sims[1] > sims[2], "{sims:?}");
}

/// The unpooled states of short, empty, mid-length and 256-token (truncated)
/// sentences, each alone, element by element; and cls / mean / max pooling of
/// them equal the same reductions of transformers' states.
#[test]
fn hidden_states_match_transformers() {
    let fx = fixture("minilm_embeddings.json");
    let mut enc = encoder(&minilm_model(), 2);
    let mut worst = 0f32;
    for i in [0, 2, 9, 14] {
        let (want, n) = minilm_hidden(i);
        let input = ids(&fx, i);
        assert_eq!(input.len(), n, "sentence {i}: fixture rows = tokens");
        let h = enc.encode(&[input]).unwrap();
        let d = 384;
        assert_eq!(h.states.shape(), [1, n, d]);
        let e = rel_err(h.states.as_f32().unwrap(), &want);
        worst = worst.max(e);
        assert!(e <= TOL, "sentence {i}: relative error {e:.2e}");

        let w = &want;
        let col = |j: usize| (0..n).map(move |t| w[t * d + j]);
        let cls: Vec<f32> = want[..d].to_vec();
        let mean: Vec<f32> = (0..d).map(|j| col(j).sum::<f32>() / n as f32).collect();
        let max: Vec<f32> = (0..d)
            .map(|j| col(j).fold(f32::NEG_INFINITY, f32::max))
            .collect();
        for (method, reference) in [
            (Pooling::Cls, cls),
            (Pooling::Mean, mean),
            (Pooling::Max, max),
        ] {
            let p = pool(&h, method).unwrap();
            let e = rel_err(&p[0], &reference);
            assert!(e <= TOL, "sentence {i} {method:?}: relative error {e:.2e}");
        }
    }
    eprintln!("worst relative error of the hidden states vs transformers {worst:.2e}");
}

/// Padding a sequence inside a batch does not change its states: the padded
/// keys are masked out.
#[test]
fn padding_in_a_batch_changes_nothing() {
    let fx = fixture("minilm_embeddings.json");
    let mut enc = encoder(&minilm_model(), 2);
    let seqs: Vec<Vec<u32>> = [0, 2, 3, 9].iter().map(|&i| ids(&fx, i)).collect();
    let batch = enc.encode(&seqs).unwrap();
    let longest = seqs.iter().map(Vec::len).max().unwrap();
    assert_eq!(
        batch.longest(),
        longest,
        "padded to the longest, not a fixed length"
    );
    let real: usize = seqs.iter().map(Vec::len).sum();
    assert_eq!(batch.mask().iter().filter(|&&m| m).count(), real);
    for (b, s) in seqs.iter().enumerate() {
        let alone = enc.encode(std::slice::from_ref(s)).unwrap();
        for i in 0..s.len() {
            let (x, y) = (batch.token(b, i).unwrap(), alone.token(0, i).unwrap());
            let e = rel_err(x, y);
            assert!(e < 1e-4, "sequence {b} token {i}: relative error {e}");
        }
        for method in [Pooling::Cls, Pooling::Mean, Pooling::Max] {
            let (p, q) = (pool(&batch, method).unwrap(), pool(&alone, method).unwrap());
            assert!(rel_err(&p[b], &q[0]) < 1e-4, "{method:?} of sequence {b}");
        }
    }
}

#[test]
fn overlong_or_empty_token_batches_are_errors() {
    let mut enc = encoder(&minilm_model(), 1);
    let long = vec![101u32; 257];
    let err = enc.encode(&[long]).unwrap_err();
    assert!(
        matches!(
            err,
            cyb_llm::ExecutionError::ContextOverflow {
                max: 256,
                requested: 257
            }
        ),
        "{err}"
    );
    assert!(enc.encode(&[]).is_err());
    assert!(enc.encode(&[vec![101], vec![]]).is_err());
    let err = enc.encode(&[vec![101, 40000, 102]]).unwrap_err();
    assert!(err.to_string().contains("40000"), "{err}");
}
