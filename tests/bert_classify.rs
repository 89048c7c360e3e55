//! BertStyle classification heads against transformers:
//! - BERT (pooler + classifier): a BertForSequenceClassification at MiniLM's
//!   shape, MiniLM's weights plus the seeded random head of
//!   `tests/fixtures/bert/classifier/`, logits in `classifier_logits.json`;
//! - RoBERTa (classifier.dense + out_proj) and its position offset: the tiny
//!   random RobertaForSequenceClassification of `roberta_tiny/`, last hidden
//!   states and logits in `roberta_tiny.json`.
//!
//! Both fixtures come from `scripts/make_bert_fixtures.py`.

mod bert_util;

use bert_util::{
    assert_hidden_matches, classifier_model, encoder, fixture, fixtures, floats, id_rows,
    minilm_model, rel_err, strings,
};
use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher, ExecContext};
use cyb_llm::curated::bert::Bert;
use cyb_llm::loader::config::{Architecture, Config, TokenizerConfig};
use cyb_llm::loader::writer::{ModelWriter, PendingTensor};
use cyb_llm::loader::Vocab;
use cyb_llm::DType;
use safetensors::SafeTensors;
use std::sync::Arc;

#[test]
fn bert_head_matches_transformers_logits() {
    let fx = fixture("classifier_logits.json");
    let texts = strings(&fx["texts"]);
    let mut enc = encoder(&classifier_model(), 2);
    let labels: Vec<String> = (0..enc.bert().num_labels().unwrap())
        .map(|i| enc.bert().label(i))
        .collect();
    assert_eq!(labels, ["negative", "neutral", "positive"], "id2label");
    for batch_size in [1, 5] {
        let got = enc.classify(&texts, batch_size, &mut |_| {}).unwrap();
        assert_eq!(got.len(), texts.len());
        for (i, c) in got.iter().enumerate() {
            let (want_logits, want_scores) = (floats(&fx["logits"][i]), floats(&fx["softmax"][i]));
            let diff = |a: &[f32], b: &[f32]| {
                a.iter()
                    .zip(b)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0f32, f32::max)
            };
            assert!(
                diff(&c.logits, &want_logits) < 2e-4,
                "batch {batch_size}, text {i}: logits {:?} vs {want_logits:?}",
                c.logits
            );
            assert!(
                diff(&c.scores, &want_scores) < 1e-4,
                "batch {batch_size}, text {i}: softmax {:?} vs {want_scores:?}",
                c.scores
            );
        }
    }
}

#[test]
fn model_without_head_cannot_classify() {
    let mut enc = encoder(&minilm_model(), 1);
    let err = enc.classify(&["text"], 1, &mut |_| {}).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("classifier.weight") && msg.contains("embed"),
        "{msg}"
    );
}

/// Writes the tiny RoBERTa of the fixture as a `.model` (names without the
/// `roberta.` prefix, as the importer would store them).
fn tiny_roberta(dir: &std::path::Path) -> std::path::PathBuf {
    let bytes = std::fs::read(fixtures().join("roberta_tiny/model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let cfg: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("roberta_tiny/config.json")).unwrap(),
    )
    .unwrap();
    let u = |k: &str| cfg[k].as_u64().unwrap() as usize;
    let mut arch = Architecture {
        hidden_size: Some(u("hidden_size")),
        num_attention_heads: Some(u("num_attention_heads")),
        num_hidden_layers: Some(u("num_hidden_layers")),
        intermediate_size: Some(u("intermediate_size")),
        vocab_size: Some(u("vocab_size")),
        max_position_embeddings: Some(u("max_position_embeddings")),
        layer_norm_eps: cfg["layer_norm_eps"].as_f64(),
        hidden_act: Some(cfg["hidden_act"].as_str().unwrap().into()),
        ..Default::default()
    };
    arch.extra.insert(
        "type_vocab_size".into(),
        (u("type_vocab_size") as i64).into(),
    );
    arch.extra
        .insert("pad_token_id".into(), (u("pad_token_id") as i64).into());
    let config = Config {
        model_type: "roberta".into(),
        architecture: arch,
        tokenizer: Some(TokenizerConfig {
            kind: "bpe".into(),
            pre: Some("gpt2".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let n = u("vocab_size");
    let vocab = Vocab {
        tokens: (0..n).map(|i| format!("t{i}")).collect(),
        merges: Vec::new(),
        scores: None,
        types: None,
    };
    let mut w = ModelWriter::new("roberta-tiny");
    w.set_config(&config).unwrap();
    w.set_section("vocab", vocab.to_toml());
    let mut names: Vec<String> = st.names().into_iter().cloned().collect();
    names.sort();
    for name in names {
        let t = st.tensor(&name).unwrap();
        assert_eq!(t.dtype(), safetensors::Dtype::F32, "{name}");
        w.add_tensor(PendingTensor {
            name: name.strip_prefix("roberta.").unwrap_or(&name).to_string(),
            shape: t.shape().to_vec(),
            dtype: DType::F32,
            scale: None,
            data: t.data().to_vec().into(),
        })
        .unwrap();
    }
    let out = dir.join("roberta.model");
    w.write(&out).unwrap();
    out
}

#[test]
fn roberta_positions_padding_and_head_match_transformers() {
    let fx = fixture("roberta_tiny.json");
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(cyb_llm::load(tiny_roberta(dir.path())).unwrap());
    let bert = Bert::new(model).unwrap();
    assert_eq!(bert.config.position_offset, 2, "padding_idx 1 + 1");
    assert_eq!(bert.config.max_tokens, 22, "24 positions minus the offset");
    assert_eq!(bert.num_labels(), Some(2));
    let rows = id_rows(&fx["input_ids"]);
    assert_eq!(
        rows[0].len(),
        22,
        "the longest row fills the position table"
    );
    let dispatcher = Dispatcher::new(
        BackendChoice::Named("cpu".into()),
        &BackendConfig { threads: 2 },
    )
    .unwrap();
    let mut ctx = ExecContext::new(2);
    let batch: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
    let h = bert.encode(&dispatcher, &mut ctx, &batch).unwrap();
    assert_eq!(h.longest(), 22);
    assert_hidden_matches(&h, &rows, &fx["hidden"]);
    let logits = bert.classify(&dispatcher, &mut ctx, &batch).unwrap();
    assert_eq!(logits.shape(), [3, 2]);
    let got = logits.as_f32().unwrap();
    let want: Vec<f32> = (0..3).flat_map(|b| floats(&fx["logits"][b])).collect();
    let e = rel_err(got, &want);
    assert!(e < 1e-4, "logits {got:?} vs {want:?}: relative error {e}");
    let too_long = vec![0u32; 23];
    assert!(bert.encode(&dispatcher, &mut ctx, &[&too_long]).is_err());
}
