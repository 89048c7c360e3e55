//! Property: `decode(encode(s)) == s` for byte-level BPE on random Unicode text, and
//! streaming decode emits the same text in whole characters. Uses the SmolLM2 GGUF's
//! vocabulary (`$CYB_MODELS_DIR`, default `.cache/models`; scripts/fetch-models.sh).

use cyb_llm::import::gguf;
use cyb_llm::tokenizer::Tokenizer;
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn smollm2() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        let path: PathBuf = std::env::var_os("CYB_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"))
            .join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
        assert!(
            path.is_file(),
            "{} is missing: run scripts/fetch-models.sh (or set CYB_MODELS_DIR) before the tests",
            path.display()
        );
        let v = gguf::read_vocab(&path).unwrap();
        Tokenizer::new(&v.vocab, &v.tokenizer).unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bpe_decode_inverts_encode(s in any::<String>()) {
        let tok = smollm2();
        let ids = tok.encode_with(&s, false, false).unwrap();
        prop_assert_eq!(tok.decode(&ids, false), s.clone());
        let mut stream = tok.stream(false);
        let mut streamed = String::new();
        for &id in &ids {
            streamed.push_str(&stream.push(id));
        }
        streamed.push_str(&stream.finish());
        prop_assert_eq!(streamed, s);
    }

    #[test]
    fn bpe_round_trips_text_with_special_tokens(a in "\\PC{0,20}", b in "\\PC{0,20}") {
        let tok = smollm2();
        let s = format!("{a}<|im_start|>{b}<|im_end|>");
        let ids = tok.encode(&s, false).unwrap();
        prop_assert_eq!(tok.decode(&ids, false), s);
    }
}

#[test]
fn special_tokens_are_single_ids_and_skippable() {
    let tok = smollm2();
    let ids = tok.encode("<|im_start|>user\nhi<|im_end|>", false).unwrap();
    let start = ids[0];
    assert!(tok.is_special(start));
    assert_eq!(tok.token_to_piece(start), "<|im_start|>");
    assert_eq!(tok.decode(&ids, true), "user\nhi");
    let literal = tok.encode_with("<|im_start|>", false, false).unwrap();
    assert!(literal.len() > 1, "not parsed as special: {literal:?}");
}
