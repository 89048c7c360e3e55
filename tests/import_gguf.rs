//! GGUF import of the real models of ../shared/models.md, checked against gguf-py.
//!
//! References: tests/fixtures/gguf/*.json, written by scripts/make_gguf_fixtures.py from
//! gguf-py (`gguf.quants.dequantize` of every source tensor, and the metadata as gguf-py
//! reads it). Models come from `$CYB_MODELS_DIR` (default `.cache/models`), which
//! scripts/fetch-models.sh fills.

use cyb_llm::import::{self, gguf, ImportOptions};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn models_dir() -> PathBuf {
    let dir = std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"));
    dir
}

fn model_file(rel: &str) -> PathBuf {
    let p = models_dir().join(rel);
    assert!(
        p.is_file(),
        "{} is missing: run scripts/fetch-models.sh (or set CYB_MODELS_DIR) before the tests",
        p.display()
    );
    p
}

fn fixture(label: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/gguf/{label}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn encoding_of(ggml: &str) -> &'static str {
    match ggml {
        "F32" => "f32",
        "F16" => "f16",
        "BF16" => "bf16",
        "Q8_0" => "q8_0",
        "Q4_0" => "q4_0",
        "Q4_1" => "q4_1",
        "Q5_0" => "q5_0",
        "Q5_1" => "q5_1",
        "Q2_K" => "q2_k",
        "Q3_K" => "q3_k",
        "Q4_K" => "q4_k",
        "Q5_K" => "q5_k",
        "Q6_K" => "q6_k",
        other => panic!("fixture type {other} not expected"),
    }
}

fn sha256_f32(values: &[f32]) -> String {
    let mut h = Sha256::new();
    for v in values {
        h.update(v.to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_text(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Imports fixture `label`'s model and checks every tensor and the metadata.
fn round_trip(label: &str) -> cyb_llm::Model {
    let fx = fixture(label);
    let src = model_file(fx["file"].as_str().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.model");
    import::import(&src, &out, &ImportOptions::default()).unwrap();
    let model = cyb_llm::load(&out).unwrap();

    let tensors = fx["tensors"].as_array().unwrap();
    assert_eq!(model.tensors.len(), tensors.len(), "tensor count");
    for t in tensors {
        let name = t["name"].as_str().unwrap();
        let r = model
            .tensor(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        let shape: Vec<usize> = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(r.entry.shape, shape, "{name} shape");
        assert_eq!(
            r.entry.dtype.name(),
            encoding_of(t["ggml_type"].as_str().unwrap()),
            "{name} encoding"
        );
        let values = r.dequantize().unwrap();
        for s in t["samples"].as_array().unwrap() {
            let (i, v) = (
                s[0].as_u64().unwrap() as usize,
                s[1].as_f64().unwrap() as f32,
            );
            assert_eq!(values[i].to_bits(), v.to_bits(), "{name}[{i}]");
        }
        assert_eq!(
            sha256_f32(&values),
            t["sha256_f32"].as_str().unwrap(),
            "{name} values"
        );
    }

    let m = &fx["metadata"];
    let a = &model.config.architecture;
    let u = |k: &str| m[k].as_u64().map(|v| v as usize);
    assert_eq!(a.num_hidden_layers, u("block_count"));
    assert_eq!(a.hidden_size, u("embedding_length"));
    assert_eq!(a.intermediate_size, u("feed_forward_length"));
    assert_eq!(a.num_attention_heads, u("head_count"));
    assert_eq!(a.num_key_value_heads, u("head_count_kv"));
    assert_eq!(a.max_position_embeddings, u("context_length"));
    // GGUF stores these as f32.
    let f = |v: Option<f64>| v.map(|x| x as f32);
    assert_eq!(f(a.rope_theta), f(m["rope_freq_base"].as_f64()));
    assert_eq!(f(a.rms_norm_eps), f(m["rms_eps"].as_f64()));
    let embed = model.tensor("model.embed_tokens.weight").unwrap();
    assert_eq!(a.vocab_size, Some(embed.entry.shape[0]));
    assert_eq!(
        a.tie_word_embeddings,
        Some(model.tensor("lm_head.weight").is_none())
    );

    let tok = model.config.tokenizer.as_ref().unwrap();
    let kind = match m["tokenizer_model"].as_str().unwrap() {
        "gpt2" => "bpe",
        "llama" => "spm",
        other => panic!("{other}"),
    };
    assert_eq!(tok.kind, kind);
    assert_eq!(tok.pre.as_deref(), m["tokenizer_pre"].as_str());
    assert_eq!(tok.bos_token_id.map(u64::from), m["bos_token_id"].as_u64());
    assert_eq!(
        tok.eos_token_ids.first().copied().map(u64::from),
        m["eos_token_id"].as_u64()
    );
    assert_eq!(tok.add_bos, m["add_bos_token"].as_bool());
    let vocab = model.vocab.as_ref().unwrap();
    assert_eq!(vocab.tokens.len() as u64, m["n_tokens"].as_u64().unwrap());
    assert_eq!(
        sha256_text(&vocab.tokens.join("\n")),
        m["tokens_sha256"].as_str().unwrap()
    );
    let merges: Vec<String> = vocab
        .merges
        .iter()
        .map(|(l, r)| format!("{l} {r}"))
        .collect();
    assert_eq!(merges.len() as u64, m["n_merges"].as_u64().unwrap());
    assert_eq!(
        sha256_text(&merges.join("\n")),
        m["merges_sha256"].as_str().unwrap()
    );
    let template = model.chat.as_ref().and_then(|c| c.template.as_deref());
    assert_eq!(
        template.map(sha256_text).as_deref(),
        m["chat_template_sha256"].as_str()
    );
    model
}

#[test]
fn smollm2_q4_1_round_trips_bit_identically() {
    let model = round_trip("smollm2-q4_1");
    let a = &model.config.architecture;
    assert_eq!(model.config.model_type, "llama");
    assert_eq!(a.rope_style.as_deref(), Some("normal"));
    assert_eq!(a.hidden_act.as_deref(), Some("silu"));
    assert_eq!(a.head_dim, Some(64));
}

#[test]
fn gemma3_270m_q4_k_m_round_trips_bit_identically() {
    let model = round_trip("gemma3-270m-q4_k_m");
    let a = &model.config.architecture;
    assert_eq!(model.config.model_type, "gemma3");
    assert_eq!(a.rope_style.as_deref(), Some("neox"));
    assert_eq!(a.hidden_act.as_deref(), Some("gelu_pytorch_tanh"));
    assert_eq!(a.head_dim, Some(256));
    assert_eq!(a.extra["sliding_window"].as_integer(), Some(512));
    assert_eq!(a.extra["query_pre_attn_scalar"].as_integer(), Some(256));
    assert_eq!(a.extra["rope_local_base_freq"].as_float(), Some(10000.0));
    let types = a.extra["layer_types"].as_array().unwrap();
    let full: Vec<usize> = (0..types.len())
        .filter(|&i| types[i].as_str() == Some("full_attention"))
        .collect();
    assert_eq!(full, vec![5, 11, 17]);
}

/// Asserts importing `bytes` (written as a .gguf) fails without leaving files behind.
fn assert_rejected(bytes: &[u8], what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("bad.gguf");
    std::fs::write(&src, bytes).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("bad.model");
    let r = std::panic::catch_unwind(|| import::import(&src, &out, &ImportOptions::default()));
    let r = r.unwrap_or_else(|_| panic!("{what}: import panicked"));
    assert!(r.is_err(), "{what}: import succeeded");
    let left: Vec<_> = std::fs::read_dir(out_dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{what}: files left behind: {left:?}");
}

#[test]
fn truncated_and_garbage_gguf_are_errors_not_panics() {
    let src = model_file("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    let bytes = std::fs::read(&src).unwrap();
    for cut in [
        0,
        3,
        4,
        7,
        8,
        20,
        24,
        100,
        1000,
        50_000,
        1_000_000,
        2_000_000,
        bytes.len() - 1,
    ] {
        assert_rejected(&bytes[..cut], &format!("truncated at {cut}"));
    }
    // Counts and lengths replaced by huge values: the tensor count, the KV count, the first key's length.
    for (at, what) in [
        (8, "tensor count"),
        (16, "kv count"),
        (24, "first key length"),
    ] {
        let mut b = bytes[..4096].to_vec();
        b[at..at + 8].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        assert_rejected(&b, what);
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for i in 0..64 {
        let mut b = b"GGUF\x03\x00\x00\x00".to_vec();
        for _ in 0..(64 + i * 97) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b.push(state as u8);
        }
        assert_rejected(&b, &format!("garbage #{i}"));
    }
}

#[test]
fn unsupported_tensor_type_is_named() {
    // A minimal GGUF: one tensor of type 39 (MXFP4), 32 values.
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    let push_str = |b: &mut Vec<u8>, s: &str| {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    };
    push_str(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    push_str(&mut b, "llama");
    push_str(&mut b, "blk.0.attn_q.weight");
    b.extend(1u32.to_le_bytes());
    b.extend(32u64.to_le_bytes());
    b.extend(39u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.resize(b.len().next_multiple_of(32) + 17, 0);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("t.gguf");
    std::fs::write(&src, &b).unwrap();
    let err =
        import::import(&src, &dir.path().join("t.model"), &ImportOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("unsupported GGUF tensor type 39 (MXFP4) for blk.0.attn_q.weight"),
        "{msg}"
    );
    assert!(!dir.path().join("t.model").exists());
}

#[test]
fn quant_q8_0_requantizes_matrices_and_keeps_vectors() {
    let src = model_file("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    let dir = tempfile::tempdir().unwrap();
    let (keep, q8) = (dir.path().join("keep.model"), dir.path().join("q8.model"));
    import::import(&src, &keep, &ImportOptions::default()).unwrap();
    let opts = ImportOptions {
        quant: import::QuantChoice::Q8_0,
        ..Default::default()
    };
    import::import(&src, &q8, &opts).unwrap();
    let (keep, q8) = (cyb_llm::load(&keep).unwrap(), cyb_llm::load(&q8).unwrap());
    assert_eq!(keep.tensors.len(), q8.tensors.len());
    for entry in keep.tensors.entries() {
        let a = keep.tensor_of(entry);
        let b = q8.tensor(&entry.name).unwrap();
        assert_eq!(a.entry.shape, b.entry.shape, "{}", entry.name);
        let (x, y) = (a.dequantize().unwrap(), b.dequantize().unwrap());
        if entry.shape.len() == 1 {
            assert_eq!(
                b.entry.dtype, a.entry.dtype,
                "{} must stay as it is",
                entry.name
            );
            assert_eq!(x, y, "{}", entry.name);
            continue;
        }
        assert_eq!(b.entry.dtype.name(), "q8_0", "{}", entry.name);
        // q8_0 rounds each value to the nearest step amax/127 of its 32-value block.
        for (bx, by) in x.chunks(32).zip(y.chunks(32)) {
            let amax = bx.iter().fold(0f32, |m, v| m.max(v.abs()));
            let tol = amax / 127.0 * 0.5 + amax * 1e-3 + 1e-7;
            for (u, v) in bx.iter().zip(by) {
                assert!(
                    (u - v).abs() <= tol,
                    "{}: {u} vs {v} (tol {tol})",
                    entry.name
                );
            }
        }
    }
}

/// Serializes a GGUF v3 file (integers as u64/i64, floats as f64; alignment 32).
fn write_gguf(
    kv: &[(String, gguf::reader::Value)],
    tensors: &[(String, Vec<usize>, u32, &[u8])],
) -> Vec<u8> {
    use gguf::reader::Value;
    fn str_(b: &mut Vec<u8>, s: &str) {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    }
    fn type_of(v: &Value) -> u32 {
        match v {
            Value::UInt(_) => 10,
            Value::Int(_) => 11,
            Value::Float(_) => 12,
            Value::Bool(_) => 7,
            Value::Str(_) => 8,
            Value::Array(_) => 9,
        }
    }
    fn value(b: &mut Vec<u8>, v: &Value) {
        match v {
            Value::UInt(x) => b.extend(x.to_le_bytes()),
            Value::Int(x) => b.extend(x.to_le_bytes()),
            Value::Float(x) => b.extend(x.to_le_bytes()),
            Value::Bool(x) => b.push(*x as u8),
            Value::Str(s) => str_(b, s),
            Value::Array(a) => {
                b.extend(a.first().map(type_of).unwrap_or(0).to_le_bytes());
                b.extend((a.len() as u64).to_le_bytes());
                for x in a {
                    value(b, x);
                }
            }
        }
    }
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((kv.len() as u64).to_le_bytes());
    for (k, v) in kv {
        str_(&mut b, k);
        b.extend(type_of(v).to_le_bytes());
        value(&mut b, v);
    }
    let mut offset = 0u64;
    for (name, shape, ty, data) in tensors {
        str_(&mut b, name);
        b.extend((shape.len() as u32).to_le_bytes());
        for d in shape.iter().rev() {
            b.extend((*d as u64).to_le_bytes());
        }
        b.extend(ty.to_le_bytes());
        b.extend(offset.to_le_bytes());
        offset = (offset + data.len() as u64).next_multiple_of(32);
    }
    for (_, _, _, data) in tensors {
        b.resize(b.len().next_multiple_of(32), 0);
        b.extend(*data);
    }
    b
}

#[test]
fn split_gguf_imports_like_the_single_file() {
    use gguf::reader::Value;
    let src = model_file("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    let bytes = std::fs::read(&src).unwrap();
    let header = gguf::reader::parse(&bytes).unwrap();
    let tensors: Vec<_> = header
        .tensors
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.shape.clone(),
                t.ggml_type,
                &bytes[t.start..t.start + t.len],
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let n = 3;
    let per = tensors.len().div_ceil(n);
    for (i, chunk) in tensors.chunks(per).enumerate() {
        let mut kv: Vec<(String, Value)> = if i == 0 {
            header
                .kv
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        } else {
            Vec::new()
        };
        kv.push(("split.no".into(), Value::UInt(i as u64)));
        kv.push(("split.count".into(), Value::UInt(n as u64)));
        kv.push((
            "split.tensors.count".into(),
            Value::UInt(tensors.len() as u64),
        ));
        let path = dir.path().join(format!("smol-{:05}-of-{n:05}.gguf", i + 1));
        std::fs::write(path, write_gguf(&kv, chunk)).unwrap();
    }
    let (single, split) = (
        dir.path().join("single.model"),
        dir.path().join("split.model"),
    );
    import::import(&src, &single, &ImportOptions::default()).unwrap();
    let second = dir.path().join(format!("smol-00002-of-{n:05}.gguf"));
    import::import(&second, &split, &ImportOptions::default()).unwrap();
    let (a, b) = (
        cyb_llm::load(&single).unwrap(),
        cyb_llm::load(&split).unwrap(),
    );
    assert_eq!(a.config, b.config);
    assert_eq!(a.vocab, b.vocab);
    assert_eq!(a.tensors.len(), b.tensors.len());
    for e in a.tensors.entries() {
        let (x, y) = (a.tensor_of(e), b.tensor(&e.name).unwrap());
        assert_eq!(
            (x.entry.shape.clone(), x.entry.dtype),
            (y.entry.shape.clone(), y.entry.dtype)
        );
        assert!(x.bytes == y.bytes, "{} differs", e.name);
    }
    assert_eq!(b.name, "smol");
    std::fs::remove_file(dir.path().join(format!("smol-00003-of-{n:05}.gguf"))).unwrap();
    let err = import::import(
        &second,
        &dir.path().join("x.model"),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn phi3_fused_qkv_and_gate_up_are_split_by_rows() {
    use gguf::reader::Value;
    let (hidden, inter, vocab) = (32usize, 32usize, 8usize);
    let f32s = |n: usize, base: f32| -> Vec<u8> {
        (0..n)
            .flat_map(|i| (base + i as f32).to_le_bytes())
            .collect()
    };
    let qkv = f32s(64 * hidden, 0.0);
    let up = f32s(2 * inter * hidden, 10_000.0);
    let down = f32s(hidden * inter, 20_000.0);
    let o = f32s(hidden * hidden, 30_000.0);
    let embd = f32s(vocab * hidden, 40_000.0);
    let norm = f32s(hidden, 1.0);
    let tensors: Vec<(String, Vec<usize>, u32, &[u8])> = vec![
        ("token_embd.weight".into(), vec![vocab, hidden], 0, &embd),
        ("output_norm.weight".into(), vec![hidden], 0, &norm),
        ("blk.0.attn_norm.weight".into(), vec![hidden], 0, &norm),
        ("blk.0.ffn_norm.weight".into(), vec![hidden], 0, &norm),
        ("blk.0.attn_qkv.weight".into(), vec![64, hidden], 0, &qkv),
        (
            "blk.0.attn_output.weight".into(),
            vec![hidden, hidden],
            0,
            &o,
        ),
        (
            "blk.0.ffn_up.weight".into(),
            vec![2 * inter, hidden],
            0,
            &up,
        ),
        (
            "blk.0.ffn_down.weight".into(),
            vec![hidden, inter],
            0,
            &down,
        ),
    ];
    let s = |v: &str| Value::Str(v.into());
    let u = |v: u64| Value::UInt(v);
    let kv: Vec<(String, Value)> = vec![
        ("general.architecture".into(), s("phi3")),
        ("phi3.embedding_length".into(), u(hidden as u64)),
        ("phi3.block_count".into(), u(1)),
        ("phi3.attention.head_count".into(), u(2)),
        ("phi3.attention.head_count_kv".into(), u(1)),
        ("phi3.feed_forward_length".into(), u(inter as u64)),
        ("phi3.context_length".into(), u(64)),
        ("tokenizer.ggml.model".into(), s("gpt2")),
        ("tokenizer.ggml.pre".into(), s("gpt2")),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(["a", "b", "c", "d", "e", "f", "g", "ab"].map(s).to_vec()),
        ),
        ("tokenizer.ggml.merges".into(), Value::Array(vec![s("a b")])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("phi.gguf");
    std::fs::write(&src, write_gguf(&kv, &tensors)).unwrap();
    let out = dir.path().join("phi.model");
    import::import(&src, &out, &ImportOptions::default()).unwrap();
    let m = cyb_llm::load(&out).unwrap();
    assert_eq!(m.config.model_type, "phi3");
    assert_eq!(m.config.architecture.rope_style.as_deref(), Some("neox"));
    let rows = |name: &str| {
        let t = m.tensor(name).unwrap_or_else(|| panic!("{name}"));
        (t.entry.shape.clone(), t.dequantize().unwrap()[0])
    };
    // q: rows 0..32, k: 32..48, v: 48..64 of the fused tensor (first value = row * hidden).
    assert_eq!(
        rows("model.layers.0.self_attn.q_proj.weight"),
        (vec![32, hidden], 0.0)
    );
    assert_eq!(
        rows("model.layers.0.self_attn.k_proj.weight"),
        (vec![16, hidden], (32 * hidden) as f32)
    );
    assert_eq!(
        rows("model.layers.0.self_attn.v_proj.weight"),
        (vec![16, hidden], (48 * hidden) as f32)
    );
    assert_eq!(
        rows("model.layers.0.mlp.gate_proj.weight"),
        (vec![inter, hidden], 10_000.0)
    );
    assert_eq!(
        rows("model.layers.0.mlp.up_proj.weight"),
        (vec![inter, hidden], 10_000.0 + (inter * hidden) as f32)
    );
    assert_eq!(
        rows("model.layers.0.post_attention_layernorm.weight"),
        (vec![hidden], 1.0)
    );
    assert!(m.tensor("lm_head.weight").is_none());
}
