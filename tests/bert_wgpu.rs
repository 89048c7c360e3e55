//! BertStyle on the wgpu backend (lavapipe in CI): all-MiniLM-L6-v2 embeddings
//! of the 20 fixture sentences against sentence-transformers'
//! (`tests/fixtures/bert/minilm_embeddings.json`), and the dispatch record
//! showing the encoder's ops ran on wgpu (what falls back is recorded).
//! No Vulkan adapter fails the test (`BackendInit`), it never skips.

mod bert_util;

use bert_util::{cosine, fixture, floats, minilm_model};
use cyb_llm::backend::{BackendChoice, BackendConfig, Dispatcher};
use cyb_llm::encode::{EmbedOptions, Encoder};
use std::sync::Arc;

#[test]
fn minilm_on_wgpu_matches_sentence_transformers() {
    std::env::set_var("NODEVICE_SELECT", "1");
    let fx = fixture("minilm_embeddings.json");
    let texts: Vec<String> = fx["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let model = cyb_llm::load(minilm_model()).unwrap();
    let dispatcher = Dispatcher::new(
        BackendChoice::Named("wgpu".into()),
        &BackendConfig { threads: 2 },
    )
    .unwrap_or_else(|e| panic!("wgpu backend: {e}"));
    let mut enc = Encoder::new(Arc::new(model), dispatcher).unwrap();
    for batch_size in [1, 32] {
        let opts = EmbedOptions {
            batch_size,
            ..EmbedOptions::defaults(enc.bert())
        };
        let got = enc.embed(&texts, &opts, &mut |_| {}).unwrap();
        for (i, e) in got.iter().enumerate() {
            let c = cosine(e, &floats(&fx["embeddings"][i]));
            assert!(
                c >= 0.9999,
                "wgpu, batch {batch_size}, sentence {i} {:?}: cosine {c}",
                texts[i]
            );
        }
    }
    let log = &enc.context().log;
    let on_gpu = log.counts().get("wgpu").copied().unwrap_or(0);
    let total: usize = log.counts().values().sum();
    eprintln!("dispatch: {}", log.summary());
    assert!(
        on_gpu * 2 > total,
        "most encoder ops must run on wgpu: {}",
        log.summary()
    );
}
