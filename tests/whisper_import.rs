//! CTranslate2 Whisper import of the real tiny.en folder, checked against an
//! independent reading of `model.bin` (the documented QKV / KV split) and against
//! whisper.cpp's weightless `for-tests-ggml-tiny.en.bin` (hparams, mel filters, vocab).

mod whisper_util;

use cyb_llm::loader::Family;
use std::collections::HashMap;
use whisper_util::*;

/// ggml header: hparams, mel filters and vocab of for-tests-ggml-tiny.en.bin.
struct Ggml {
    hparams: Vec<i32>,
    filters: (usize, usize, Vec<f32>),
    vocab: Vec<Vec<u8>>,
}

fn read_ggml() -> Ggml {
    let b = std::fs::read(whisper_dir().join("for-tests-ggml-tiny.en.bin")).unwrap();
    let i32_at = |o: usize| i32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!(i32_at(0) as u32, 0x6767_6d6c, "ggml magic");
    let hparams: Vec<i32> = (0..11).map(|i| i32_at(4 + 4 * i)).collect();
    let mut at = 48;
    let (n_mel, n_fft) = (i32_at(at) as usize, i32_at(at + 4) as usize);
    at += 8;
    let filters = (0..n_mel * n_fft)
        .map(|i| f32::from_le_bytes(b[at + 4 * i..at + 4 * i + 4].try_into().unwrap()))
        .collect();
    at += 4 * n_mel * n_fft;
    let n_vocab = i32_at(at) as usize;
    at += 4;
    let mut vocab = Vec::with_capacity(n_vocab);
    for _ in 0..n_vocab {
        let len = i32_at(at) as usize;
        vocab.push(b[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
    Ggml {
        hparams,
        filters: (n_mel, n_fft, filters),
        vocab,
    }
}

/// An independent minimal reader of CTranslate2 model.bin (v6): name -> (shape, bytes).
fn read_ct2() -> HashMap<String, (Vec<usize>, Vec<u8>)> {
    let b = std::fs::read(whisper_dir().join("tiny.en-ct2/model.bin")).unwrap();
    let mut at = 0usize;
    let u32_ = |at: &mut usize| {
        let v = u32::from_le_bytes(b[*at..*at + 4].try_into().unwrap());
        *at += 4;
        v as usize
    };
    let string = |at: &mut usize| {
        let n = u16::from_le_bytes([b[*at], b[*at + 1]]) as usize;
        let s = String::from_utf8(b[*at + 2..*at + 2 + n - 1].to_vec()).unwrap();
        *at += 2 + n;
        s
    };
    assert_eq!(u32_(&mut at), 6);
    assert_eq!(string(&mut at), "WhisperSpec");
    u32_(&mut at);
    let n = u32_(&mut at);
    let mut out = HashMap::new();
    for _ in 0..n {
        let name = string(&mut at);
        let rank = b[at] as usize;
        at += 1;
        let shape: Vec<usize> = (0..rank).map(|_| u32_(&mut at)).collect();
        at += 1;
        let nbytes = u32_(&mut at);
        out.insert(name, (shape, b[at..at + nbytes].to_vec()));
        at += nbytes;
    }
    out
}

#[test]
fn config_matches_whisper_cpp_hparams() {
    let m = cyb_llm::load(tiny_en_model()).unwrap();
    assert_eq!(m.family, Some(Family::WhisperStyle));
    assert_eq!(m.config.model_type, "whisper");
    let g = read_ggml();
    let a = &m.config.architecture;
    let x = |k: &str| a.extra.get(k).and_then(|v| v.as_integer()).unwrap() as i32;
    // n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
    // n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels
    let ours = [
        a.vocab_size.unwrap() as i32,
        x("max_source_positions"),
        a.hidden_size.unwrap() as i32,
        x("encoder_attention_heads"),
        x("encoder_layers"),
        a.max_position_embeddings.unwrap() as i32,
        a.hidden_size.unwrap() as i32,
        a.num_attention_heads.unwrap() as i32,
        a.num_hidden_layers.unwrap() as i32,
        x("n_mels"),
    ];
    assert_eq!(&ours[..], &g.hparams[..10]);
    assert_eq!(x("eot_token_id"), 50256);
    assert_eq!(x("sot_token_id"), 50257);
    assert_eq!(x("timestamp_begin"), 50363);
    assert_eq!(a.extra.get("multilingual").unwrap().as_bool(), Some(false));
}

#[test]
fn mel_filters_match_whisper_cpp() {
    let m = cyb_llm::load(tiny_en_model()).unwrap();
    let t = m.tensor("model.mel_filters").unwrap();
    let g = read_ggml();
    assert_eq!(t.entry.shape, vec![g.filters.0, g.filters.1]);
    let ours = t.dequantize().unwrap();
    let max = ours
        .iter()
        .zip(&g.filters.2)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(max < 1e-6, "max abs diff {max}");
}

#[test]
fn vocabulary_matches_whisper_cpp() {
    let m = cyb_llm::load(tiny_en_model()).unwrap();
    let tok = cyb_llm::tokenizer::Tokenizer::from_model(&m).unwrap();
    let g = read_ggml();
    assert!(g.vocab.len() >= 50_000);
    for (id, bytes) in g.vocab.iter().enumerate() {
        // whisper.cpp's converter stores each piece as UTF-8 text, with U+FFFD for
        // pieces that are not valid UTF-8 on their own; compare the same way.
        let ours = String::from_utf8_lossy(tok.token_bytes(id as u32));
        assert_eq!(ours.as_bytes(), &bytes[..], "token {id}");
    }
}

#[test]
fn every_tensor_equals_its_ct2_rows() {
    let m = cyb_llm::load(tiny_en_model()).unwrap();
    let ct2 = read_ct2();
    let mut checked = 0;
    for e in m.tensors.entries() {
        if e.name == "model.mel_filters" {
            continue;
        }
        let (src, part, parts) = ct2_source(&e.name);
        let (shape, bytes) = ct2.get(&src).unwrap_or_else(|| panic!("{src}"));
        let n = bytes.len() / parts;
        assert_eq!(
            m.tensor_of(e).bytes,
            &bytes[part * n..(part + 1) * n],
            "{}",
            e.name
        );
        assert_eq!(e.shape[0] * parts, shape[0], "{}", e.name);
        checked += 1;
    }
    // Fused variables add parts: self-attention QKV (8 layers, weight + bias, +2 each)
    // and cross-attention KV (4 decoder layers, weight + bias, +1 each).
    assert_eq!(
        checked,
        ct2.values().filter(|(s, _)| !s.is_empty()).count() + 8 * 2 * 2 + 4 * 2
    );
}

/// The documented mapping (src/import/ct2.rs), written independently: CT2 variable,
/// part index and part count of a canonical tensor name.
fn ct2_source(name: &str) -> (String, usize, usize) {
    let (base, param) = name.rsplit_once('.').unwrap();
    let norm = |p: &str| {
        if param == "weight" {
            format!("{p}/gamma")
        } else {
            format!("{p}/beta")
        }
    };
    let lin = |p: &str| format!("{p}/{param}");
    let fixed = match base {
        "model.encoder.conv1" => Some(lin("encoder/conv1")),
        "model.encoder.conv2" => Some(lin("encoder/conv2")),
        "model.encoder.embed_positions" => Some("encoder/position_encodings/encodings".into()),
        "model.decoder.embed_positions" => Some("decoder/position_encodings/encodings".into()),
        "model.decoder.embed_tokens" => Some("decoder/embeddings/weight".into()),
        "model.encoder.layer_norm" => Some(norm("encoder/layer_norm")),
        "model.decoder.layer_norm" => Some(norm("decoder/layer_norm")),
        _ => None,
    };
    if let Some(f) = fixed {
        return (f, 0, 1);
    }
    let rest = base.strip_prefix("model.").unwrap();
    let (tower, rest) = rest.split_once(".layers.").unwrap();
    let (i, sub) = rest.split_once('.').unwrap();
    let l = format!("{tower}/layer_{i}");
    match sub {
        "self_attn_layer_norm" => (norm(&format!("{l}/self_attention/layer_norm")), 0, 1),
        "encoder_attn_layer_norm" => (norm(&format!("{l}/attention/layer_norm")), 0, 1),
        "final_layer_norm" => (norm(&format!("{l}/ffn/layer_norm")), 0, 1),
        "fc1" => (lin(&format!("{l}/ffn/linear_0")), 0, 1),
        "fc2" => (lin(&format!("{l}/ffn/linear_1")), 0, 1),
        "self_attn.q_proj" => (lin(&format!("{l}/self_attention/linear_0")), 0, 3),
        "self_attn.k_proj" => (lin(&format!("{l}/self_attention/linear_0")), 1, 3),
        "self_attn.v_proj" => (lin(&format!("{l}/self_attention/linear_0")), 2, 3),
        "self_attn.out_proj" => (lin(&format!("{l}/self_attention/linear_1")), 0, 1),
        "encoder_attn.q_proj" => (lin(&format!("{l}/attention/linear_0")), 0, 1),
        "encoder_attn.k_proj" => (lin(&format!("{l}/attention/linear_1")), 0, 2),
        "encoder_attn.v_proj" => (lin(&format!("{l}/attention/linear_1")), 1, 2),
        "encoder_attn.out_proj" => (lin(&format!("{l}/attention/linear_2")), 0, 1),
        other => panic!("unexpected tensor {name} ({other})"),
    }
}

#[test]
fn truncated_model_bin_is_an_error_and_leaves_no_output() {
    let src = whisper_dir().join("tiny.en-ct2");
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("broken-ct2");
    std::fs::create_dir_all(&folder).unwrap();
    for f in ["config.json", "tokenizer.json", "vocabulary.txt"] {
        std::fs::copy(src.join(f), folder.join(f)).unwrap();
    }
    let bin = std::fs::read(src.join("model.bin")).unwrap();
    std::fs::write(folder.join("model.bin"), &bin[..bin.len() / 2]).unwrap();
    let out = dir.path().join("out.model");
    let e = cyb_llm::import::import(&folder, &out, &Default::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("model.bin") && msg.contains("truncated"),
        "{msg}"
    );
    assert!(!out.exists());
}
