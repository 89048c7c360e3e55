//! DistilBERT through the Hugging Face importer against transformers: the
//! seeded random 2-layer DistilBertForSequenceClassification (sinusoidal
//! position table, WordPiece tokenizer) of `tests/fixtures/bert/distilbert_tiny/`,
//! token ids, last hidden states of a padded batch and logits in
//! `distilbert_tiny.json` (both from `scripts/make_bert_fixtures.py`).

mod bert_util;

use bert_util::{
    assert_hidden_matches, encoder, fixture, fixtures, floats, id_rows, import_to, rel_err, strings,
};
use cyb_llm::curated::bert::Variant;

#[test]
fn distilbert_names_keys_and_head_match_transformers() {
    let fx = fixture("distilbert_tiny.json");
    let (_dir, path) = import_to(&fixtures().join("distilbert_tiny"), "distilbert.model");
    let mut enc = encoder(&path, 2);
    let c = &enc.bert().config;
    assert_eq!(c.model_type, "distilbert");
    assert_eq!(c.variant, Variant::DistilBert);
    assert_eq!(
        (c.hidden, c.heads, c.layers, c.intermediate),
        (32, 4, 2, 64)
    );
    assert_eq!((c.position_offset, c.max_tokens, c.pad_id), (0, 24, 0));
    let labels: Vec<String> = (0..enc.bert().num_labels().unwrap())
        .map(|i| enc.bert().label(i))
        .collect();
    assert_eq!(labels, ["red", "green", "blue"], "id2label");

    let texts = strings(&fx["texts"]);
    let tokens = enc.tokenize(&texts).unwrap().tokens;
    let want_ids = id_rows(&fx["input_ids"]);
    assert_eq!(tokens, want_ids, "WordPiece ids");

    // One padded batch, as transformers ran it.
    let h = enc.encode(&tokens).unwrap();
    assert_eq!(h.longest(), want_ids[0].len());
    assert_hidden_matches(&h, &want_ids, &fx["hidden"]);
    for batch_size in [1, 4] {
        let got = enc.classify(&texts, batch_size, &mut |_| {}).unwrap();
        for (i, c) in got.iter().enumerate() {
            let want = floats(&fx["logits"][i]);
            let e = rel_err(&c.logits, &want);
            assert!(
                e < 1e-4,
                "batch {batch_size}, text {i}: logits {:?} vs {want:?}",
                c.logits
            );
        }
    }
}
