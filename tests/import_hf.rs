//! The Hugging Face folder importer against independent references:
//! - tiny synthetic checkpoints made with transformers / tokenizers by
//!   `scripts/make_hf_fixtures.py` (tests/fixtures/hf/*/model), whose expected canonical
//!   tensors (`expected.safetensors`, f32) were computed there with torch / numpy;
//! - the real all-MiniLM-L6-v2 folder (`scripts/fetch-models.sh minilm`), checked against
//!   SHA-256 sums of its tensors computed by the python safetensors package (`minilm.json`).

mod fs_util;

use cyb_llm::import::{import, ImportOptions, QuantChoice};
use cyb_llm::loader::vocab::token_type;
use cyb_llm::tokenizer::Tokenizer;
use cyb_llm::{load, DType, ImportError, Model};
use fs_util::copy_dir;
use safetensors::SafeTensors;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf")
}

fn models_dir() -> PathBuf {
    match std::env::var_os("CYB_MODELS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"),
    }
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn run_import(src: &Path, quant: QuantChoice) -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.model");
    let opts = ImportOptions {
        quant,
        name: None,
        no_graph: false,
        diffusion: None,
    };
    import(src, &out, &opts).unwrap_or_else(|e| panic!("import of {} failed: {e}", src.display()));
    let model = load(&out).unwrap();
    (dir, model)
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Every tensor of `model` equals `expected.safetensors` bit for bit (after dequantizing to
/// f32), and the two hold the same names.
fn assert_matches_expected(model: &Model, fixture: &str) {
    let bytes = std::fs::read(fixtures().join(fixture).join("expected.safetensors")).unwrap();
    let expected = SafeTensors::deserialize(&bytes).unwrap();
    let want: BTreeSet<String> = expected.names().into_iter().cloned().collect();
    let got: BTreeSet<String> = model
        .tensors
        .entries()
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(got, want, "{fixture}: tensor names differ");
    for (name, view) in expected.tensors() {
        let t = model.tensor(&name).unwrap();
        assert_eq!(t.entry.shape, view.shape(), "{name}: shape");
        let values = t.dequantize().unwrap();
        assert!(
            f32_bytes(&values) == view.data(),
            "{fixture}: tensor `{name}` differs from the reference"
        );
    }
}

fn vocab_of(src: &Path) -> (Value, Vec<(String, u64)>) {
    let tj = json(&src.join("tokenizer.json"));
    let mut pieces: Vec<(String, u64)> = tj["model"]["vocab"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    for t in tj["added_tokens"].as_array().unwrap() {
        pieces.push((
            t["content"].as_str().unwrap().to_string(),
            t["id"].as_u64().unwrap(),
        ));
    }
    (tj, pieces)
}

fn merges_of(tj: &Value) -> Vec<(String, String)> {
    tj["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m[0].as_str().unwrap().to_string(),
                m[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn qwen2_sharded_bf16_imports_exactly() {
    let src = fixtures().join("qwen2/model");
    let (_dir, m) = run_import(&src, QuantChoice::Keep);
    assert_matches_expected(&m, "qwen2");
    assert!(
        m.tensors.entries().iter().all(|e| e.dtype == DType::F32),
        "bf16 must become f32 under keep"
    );
    assert!(m.tensor("model.layers.1.self_attn.q_proj.bias").is_some());

    let cfg = json(&src.join("config.json"));
    let a = &m.config.architecture;
    assert_eq!(m.config.model_type, "qwen2");
    assert_eq!(a.vocab_size, cfg["vocab_size"].as_u64().map(|v| v as usize));
    assert_eq!(a.rope_theta, Some(1e6));
    assert_eq!(a.rope_style.as_deref(), Some("neox"));
    assert_eq!(a.tie_word_embeddings, Some(false));
    assert!(
        !a.extra.contains_key("sliding_window"),
        "use_sliding_window is false"
    );

    let (tj, pieces) = vocab_of(&src);
    let v = m.vocab.as_ref().unwrap();
    assert_eq!(v.tokens.len(), a.vocab_size.unwrap());
    for (piece, id) in &pieces {
        assert_eq!(&v.tokens[*id as usize], piece);
    }
    for id in pieces.len()..v.tokens.len() {
        assert_eq!(v.tokens[id], format!("[PAD{id}]"));
        assert_eq!(v.token_type(id), token_type::UNUSED);
    }
    assert_eq!(v.merges, merges_of(&tj));

    let tc = json(&src.join("tokenizer_config.json"));
    let gc = json(&src.join("generation_config.json"));
    let id_of = |p: &str| pieces.iter().find(|x| x.0 == p).unwrap().1 as u32;
    assert_eq!(
        v.token_type(id_of("<|im_end|>") as usize),
        token_type::CONTROL
    );
    assert_eq!(
        v.token_type(id_of("<tool_call>") as usize),
        token_type::USER_DEFINED
    );
    let t = m.config.tokenizer.as_ref().unwrap();
    assert_eq!((t.kind.as_str(), t.pre.as_deref()), ("bpe", Some("qwen2")));
    let gen_eos: Vec<u32> = gc["eos_token_id"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(t.eos_token_ids, gen_eos);
    assert_eq!(
        t.bos_token_id,
        Some(cfg["bos_token_id"].as_u64().unwrap() as u32)
    );
    assert_eq!(t.pad_token_id, Some(id_of("<|endoftext|>")));
    assert_eq!(t.add_bos, Some(false));

    let chat = m.chat.as_ref().unwrap();
    assert_eq!(chat.template.as_deref(), tc["chat_template"].as_str());
    let s = m.config.sampling.as_ref().unwrap();
    assert_eq!(s.temperature(), gc["temperature"].as_f64());
    assert_eq!(s.top_p(), gc["top_p"].as_f64());
    assert_eq!(s.top_k, gc["top_k"].as_i64());
    assert_eq!(s.repeat_penalty(), gc["repetition_penalty"].as_f64());
}

#[test]
fn gemma3_bf16_stores_one_plus_norm_weights() {
    let src = fixtures().join("gemma3/model");
    let (_dir, m) = run_import(&src, QuantChoice::Keep);
    // expected.safetensors holds np.float32(1) + w for every norm weight.
    assert_matches_expected(&m, "gemma3");
    assert!(m.tensor("lm_head.weight").is_none());
    assert!(m.tensor("model.layers.0.self_attn.q_norm.weight").is_some());

    let a = &m.config.architecture;
    assert_eq!(m.config.model_type, "gemma3");
    assert_eq!(a.tie_word_embeddings, Some(true));
    assert_eq!(a.hidden_act.as_deref(), Some("gelu_pytorch_tanh"));
    assert_eq!(a.head_dim, Some(8));
    assert_eq!(a.rope_theta, Some(1e6));
    assert_eq!(a.extra["rope_local_base_freq"].as_float(), Some(1e4));
    assert_eq!(a.extra["sliding_window"].as_integer(), Some(16));
    assert_eq!(a.extra["query_pre_attn_scalar"].as_float(), Some(256.0));
    let types: Vec<&str> = a.extra["layer_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(types, ["sliding_attention", "full_attention"]);

    let (tj, pieces) = vocab_of(&src);
    let v = m.vocab.as_ref().unwrap();
    for (piece, id) in &pieces {
        assert_eq!(&v.tokens[*id as usize], piece);
    }
    assert_eq!(v.merges, merges_of(&tj));
    let id_of = |p: &str| pieces.iter().find(|x| x.0 == p).unwrap().1 as usize;
    assert_eq!(v.token_type(id_of("<0x41>")), token_type::BYTE);
    assert_eq!(v.token_type(id_of("<unk>")), token_type::UNKNOWN);
    assert_eq!(v.token_type(id_of("<end_of_turn>")), token_type::CONTROL);
    let scores = v.scores.as_ref().unwrap();
    let (a0, b0) = &v.merges[0];
    assert_eq!(
        scores[id_of(&format!("{a0}{b0}"))],
        0.0,
        "rank-0 merge result scores highest"
    );
    let t = m.config.tokenizer.as_ref().unwrap();
    assert_eq!(t.kind, "spm");
    assert_eq!(t.extra["add_space_prefix"].as_bool(), Some(false));
    assert_eq!(t.bos_token_id, Some(id_of("<bos>") as u32));
    assert_eq!(
        t.eos_token_ids,
        [id_of("<eos>") as u32, id_of("<end_of_turn>") as u32]
    );
    assert_eq!((t.pad_token_id, t.unk_token_id), (Some(0), Some(3)));
    assert_eq!(t.add_bos, Some(true));
    let tc = json(&src.join("tokenizer_config.json"));
    assert_eq!(
        m.chat.as_ref().unwrap().template.as_deref(),
        tc["chat_template"].as_str()
    );
}

#[test]
fn qwen3_f32_tied_keeps_norms_as_they_are() {
    let src = fixtures().join("qwen3/model");
    let (_dir, m) = run_import(&src, QuantChoice::Keep);
    // expected.safetensors holds the norm weights unchanged (only Gemma stores 1 + w).
    assert_matches_expected(&m, "qwen3");
    assert!(m.tensors.entries().iter().all(|e| e.dtype == DType::F32));
    assert!(m.tensor("lm_head.weight").is_none());
    let a = &m.config.architecture;
    assert_eq!(m.config.model_type, "qwen3");
    assert_eq!((a.head_dim, a.tie_word_embeddings), (Some(16), Some(true)));
    assert_eq!(a.rope_theta, Some(10000.0), "from rope_parameters");
    let jinja = std::fs::read_to_string(src.join("chat_template.jinja")).unwrap();
    assert_eq!(
        m.chat.as_ref().unwrap().template.as_deref(),
        Some(jinja.as_str())
    );
    let s = m.config.sampling.as_ref().unwrap();
    assert_eq!(
        (s.temperature(), s.top_p()),
        (Some(0.0), None),
        "do_sample = false is greedy"
    );
    let (_, pieces) = vocab_of(&src);
    let id_of = |p: &str| pieces.iter().find(|x| x.0 == p).unwrap().1 as u32;
    let t = m.config.tokenizer.as_ref().unwrap();
    assert_eq!(
        t.eos_token_ids,
        [id_of("<|im_end|>"), id_of("<|endoftext|>")]
    );
    assert_eq!(t.pad_token_id, Some(id_of("<|endoftext|>")));
}

#[test]
fn fused_llama_f16_is_split_and_kept_as_f16() {
    let src = fixtures().join("llama_fused/model");
    let (_dir, m) = run_import(&src, QuantChoice::Keep);
    assert_matches_expected(&m, "llama_fused");
    assert!(
        m.tensors.entries().iter().all(|e| e.dtype == DType::F16),
        "f16 stays f16 under keep"
    );
    assert!(m
        .tensor("model.layers.0.self_attn.qkv_proj.weight")
        .is_none());
    let a = &m.config.architecture;
    let scaling = a.extra["rope_scaling"].as_table().unwrap();
    assert_eq!(scaling["type"].as_str(), Some("llama3"));
    assert_eq!(scaling["factor"].as_float(), Some(8.0));
    assert_eq!(
        scaling["original_max_position_embeddings"].as_integer(),
        Some(128)
    );
    assert_eq!(a.rope_theta, Some(500000.0));
    let t = m.config.tokenizer.as_ref().unwrap();
    assert_eq!(t.pre.as_deref(), Some("llama3"));
    assert_eq!(
        t.add_bos,
        Some(true),
        "the post-processor template starts with bos"
    );
    let cfg = json(&src.join("config.json"));
    assert_eq!(
        t.bos_token_id,
        Some(cfg["bos_token_id"].as_u64().unwrap() as u32)
    );
}

#[test]
fn legacy_llama2_spm_tokenizer_prepends_a_space() {
    let (_dir, m) = run_import(&fixtures().join("llama_spm/model"), QuantChoice::Keep);
    assert_matches_expected(&m, "llama_spm");
    assert_eq!(m.config.architecture.tie_word_embeddings, Some(false));
    let t = m.config.tokenizer.as_ref().unwrap();
    assert_eq!(t.kind, "spm");
    assert_eq!(t.extra["add_space_prefix"].as_bool(), Some(true));
    assert_eq!(
        (t.bos_token_id, t.unk_token_id, t.add_bos),
        (Some(1), Some(0), Some(true))
    );
    assert_eq!(t.eos_token_ids, [2]);
}

#[test]
fn quant_f16_and_q8_0_reencode_matrices_only() {
    let bytes = std::fs::read(fixtures().join("qwen2/expected.safetensors")).unwrap();
    let expected = SafeTensors::deserialize(&bytes).unwrap();
    for (quant, dtype) in [
        (QuantChoice::F16, DType::F16),
        (QuantChoice::Q8_0, DType::Q8_0),
    ] {
        let (_dir, m) = run_import(&fixtures().join("qwen2/model"), quant);
        for (name, view) in expected.tensors() {
            let t = m.tensor(&name).unwrap();
            let values: Vec<f32> = view
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            if view.shape().len() == 1 {
                assert_eq!(t.entry.dtype, DType::F32, "{name}: vectors stay f32");
                assert!(t.bytes == view.data(), "{name}");
            } else {
                assert_eq!(t.entry.dtype, dtype, "{name}");
                let want: Vec<u8> = match dtype {
                    DType::F16 => values
                        .iter()
                        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                        .collect(),
                    _ => cyb_llm::quant::quantize(dtype, &values).unwrap(),
                };
                assert!(t.bytes == want.as_slice(), "{name}: {dtype} bytes");
            }
        }
    }
}

fn sha_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

#[test]
fn minilm_folder_round_trips_bit_for_bit() {
    let src = models_dir().join("minilm");
    assert!(
        src.join("model.safetensors").is_file(),
        "{} is missing: run `scripts/fetch-models.sh minilm` first (or set CYB_MODELS_DIR)",
        src.display()
    );
    let sums = json(&fixtures().join("minilm.json"));
    let sums = sums.as_object().unwrap();
    for quant in [QuantChoice::Keep, QuantChoice::F16] {
        let (_dir, m) = run_import(&src, quant);
        let got: BTreeSet<&str> = m
            .tensors
            .entries()
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        let want: BTreeSet<&str> = sums.keys().map(String::as_str).collect();
        assert_eq!(got, want);
        for (name, s) in sums {
            let t = m.tensor(name).unwrap();
            let shape: Vec<usize> = s["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(t.entry.shape, shape, "{name}");
            let key = match (quant, shape.len()) {
                (QuantChoice::F16, 2) => "f16",
                _ => "f32",
            };
            assert_eq!(t.entry.dtype.name(), key, "{name}");
            assert_eq!(
                sha_hex(t.bytes),
                s[key].as_str().unwrap(),
                "{name} ({key}) differs from safetensors"
            );
        }
        let a = &m.config.architecture;
        assert_eq!(m.config.model_type, "bert");
        assert_eq!(
            (a.hidden_size, a.num_hidden_layers, a.num_attention_heads),
            (Some(384), Some(6), Some(12))
        );
        assert_eq!(
            (a.intermediate_size, a.vocab_size, a.max_position_embeddings),
            (Some(1536), Some(30522), Some(512))
        );
        assert_eq!(a.layer_norm_eps, Some(1e-12));
        assert_eq!(a.hidden_act.as_deref(), Some("gelu"));
        assert_eq!(a.extra["type_vocab_size"].as_integer(), Some(2));
        assert_eq!(a.extra["pooling"].as_str(), Some("mean"));
        assert_eq!(a.extra["normalize"].as_bool(), Some(true));
        let t = m.config.tokenizer.as_ref().unwrap();
        assert_eq!((t.kind.as_str(), t.lowercase), ("wordpiece", Some(true)));
        assert_eq!((t.pad_token_id, t.unk_token_id), (Some(0), Some(100)));
        assert_eq!(t.extra["cls_token_id"].as_integer(), Some(101));
        assert_eq!(t.extra["sep_token_id"].as_integer(), Some(102));
        assert_eq!(m.config.license.as_deref(), Some("apache-2.0"));
        let v = m.vocab.as_ref().unwrap();
        let vocab_txt = std::fs::read_to_string(src.join("vocab.txt")).unwrap();
        assert!(
            v.tokens.iter().map(String::as_str).eq(vocab_txt.lines()),
            "vocab equals vocab.txt line by line"
        );
        assert_encodes_like_hf(&m, &fixtures().join("minilm_encode.json"));
    }
}

/// The imported vocab + `[tokenizer]` encode like the source tokenizer.json does in the
/// `tokenizers` package (ids recorded by scripts/make_hf_fixtures.py).
fn assert_encodes_like_hf(m: &Model, cases: &Path) {
    let tok = Tokenizer::from_model(m).unwrap();
    for case in json(cases).as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let ids = |k: &str| -> Vec<u32> {
            case[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        };
        assert_eq!(
            tok.encode(text, false).unwrap(),
            ids("ids"),
            "{}: {text:?}",
            cases.display()
        );
        assert_eq!(
            tok.encode(text, true).unwrap(),
            ids("ids_special"),
            "{}: {text:?} with specials",
            cases.display()
        );
    }
}

#[test]
fn imported_tokenizers_encode_like_hf() {
    for name in ["qwen2", "qwen3", "gemma3", "llama_fused", "llama_spm"] {
        let (_dir, m) = run_import(&fixtures().join(name).join("model"), QuantChoice::Keep);
        assert_encodes_like_hf(&m, &fixtures().join(name).join("encode.json"));
    }
}

/// The imported tiny models run by the curated LlamaStyle forward (cpu, f32 weights) give
/// transformers' float32 logits (`logits.safetensors`) within 1e-4 of the row's max |logit|
/// (measured: ~5e-7; ops.md allows 1e-3 for a full forward, but a wrong rms_norm_eps alone
/// already shows as ~3e-3 here): config mapping, norm conversion and tensor splitting
/// checked end to end.
#[test]
fn imported_models_match_transformers_logits() {
    use cyb_llm::backend::BackendChoice;
    use cyb_llm::generate::{LoadOptions, TextModel};
    let read_i32 = |v: &safetensors::tensor::TensorView<'_>| -> Vec<u32> {
        v.data()
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as u32)
            .collect()
    };
    for name in ["qwen2", "qwen3", "gemma3", "llama_fused", "llama_spm"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("m.model");
        import(
            &fixtures().join(name).join("model"),
            &out,
            &ImportOptions::default(),
        )
        .unwrap();
        let opts = LoadOptions {
            backend: BackendChoice::Named("cpu".into()),
            threads: 2,
            ctx_size: 64,
            ..LoadOptions::default()
        };
        let tm = TextModel::load(&out, &opts).unwrap();
        let bytes = std::fs::read(fixtures().join(name).join("logits.safetensors")).unwrap();
        let fx = SafeTensors::deserialize(&bytes).unwrap();
        let ids = read_i32(&fx.tensor("ids").unwrap());
        let positions = read_i32(&fx.tensor("positions").unwrap());
        let want = fx.tensor("logits").unwrap();
        let vocab = want.shape()[1];
        let want: Vec<f32> = want
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let got = tm.generator().unwrap().forward_all(&ids).unwrap();
        assert_eq!(got.len(), ids.len() * vocab, "{name}: logits shape");
        for (row, &p) in positions.iter().enumerate() {
            let ours = &got[p as usize * vocab..(p as usize + 1) * vocab];
            let theirs = &want[row * vocab..(row + 1) * vocab];
            let absmax = theirs.iter().fold(0f32, |m, x| m.max(x.abs()));
            let err = ours
                .iter()
                .zip(theirs)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                err <= 1e-4 * absmax,
                "{name} position {p}: max |diff| {err} vs max |logit| {absmax}"
            );
        }
    }
}

/// Copies fixture `name`, lets `edit` break it, imports, and checks that no file is left.
fn import_broken(name: &str, edit: impl FnOnce(&Path)) -> ImportError {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    copy_dir(&fixtures().join(name).join("model"), &src);
    edit(&src);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("x.model");
    let err =
        import(&src, &out, &ImportOptions::default()).expect_err("the broken import must fail");
    let left: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert!(left.is_empty(), "a failed import left {left:?}");
    err
}

/// A way to break a copied fixture folder.
type Edit = Box<dyn FnOnce(&Path)>;

fn edit_json(path: &Path, f: impl FnOnce(&mut Value)) {
    let mut v = json(path);
    f(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn missing_config_key_is_named() {
    let e = import_broken("gemma3", |d| {
        edit_json(&d.join("config.json"), |v| {
            v.as_object_mut().unwrap().remove("hidden_size");
        })
    });
    assert!(
        matches!(&e, ImportError::MissingKey { key, .. } if key == "hidden_size"),
        "{e}"
    );
}

#[test]
fn unknown_model_type_is_named() {
    let e = import_broken("gemma3", |d| {
        edit_json(&d.join("config.json"), |v| v["model_type"] = "mamba".into())
    });
    assert!(
        matches!(e, ImportError::Unsupported { .. }) && e.to_string().contains("`mamba`"),
        "{e}"
    );
}

/// Rewrites a safetensors file with `f` applied to its JSON header.
fn edit_header(path: &Path, f: impl FnOnce(&mut Value)) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    f(&mut header);
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(path, out).unwrap();
}

#[test]
fn lying_safetensors_headers_are_format_errors() {
    let shard = "model-00001-of-00002.safetensors";
    let grow_shape = |h: &mut Value| {
        let (_, info) = h
            .as_object_mut()
            .unwrap()
            .iter_mut()
            .find(|(k, _)| *k != "__metadata__")
            .unwrap();
        let d0 = info["shape"][0].as_u64().unwrap();
        info["shape"][0] = (d0 + 1).into();
    };
    let past_end = |h: &mut Value| {
        for (k, info) in h.as_object_mut().unwrap().iter_mut() {
            if k != "__metadata__" {
                let end = info["data_offsets"][1].as_u64().unwrap();
                info["data_offsets"][1] = (end + 4096).into();
            }
        }
    };
    let cases: Vec<(&str, Edit)> = vec![
        (
            "shape",
            Box::new(move |d: &Path| edit_header(&d.join(shard), grow_shape)),
        ),
        (
            "offsets",
            Box::new(move |d: &Path| edit_header(&d.join(shard), past_end)),
        ),
        (
            "truncated",
            Box::new(move |d: &Path| {
                let p = d.join(shard);
                let len = std::fs::metadata(&p).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_len(len - 10)
                    .unwrap();
            }),
        ),
        (
            "header length",
            Box::new(move |d: &Path| {
                let p = d.join(shard);
                let mut b = std::fs::read(&p).unwrap();
                b[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
                std::fs::write(&p, b).unwrap();
            }),
        ),
    ];
    for (what, edit) in cases {
        let e = import_broken("qwen2", edit);
        match &e {
            ImportError::Format { path, reason } => {
                assert!(path.ends_with(shard), "{what}: {e}");
                assert!(reason.contains("invalid safetensors"), "{what}: {e}");
            }
            _ => panic!("{what}: expected a Format error, got {e}"),
        }
    }
}

#[test]
fn missing_shard_and_index_mismatch_are_format_errors() {
    let shard = "model-00002-of-00002.safetensors";
    let e = import_broken("qwen2", |d| std::fs::remove_file(d.join(shard)).unwrap());
    assert!(
        matches!(&e, ImportError::Format { path, reason } if path.ends_with(shard) && reason.contains("missing")),
        "{e}"
    );
    let e = import_broken("qwen2", |d| {
        edit_json(&d.join("model.safetensors.index.json"), |v| {
            v["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors".into()
        })
    });
    assert!(e.to_string().contains("model.norm.weight"), "{e}");
}

#[test]
fn unknown_pre_tokenizer_regex_is_quoted() {
    let e = import_broken("qwen2", |d| {
        edit_json(&d.join("tokenizer.json"), |v| {
            v["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+".into()
        })
    });
    assert!(
        matches!(e, ImportError::Unsupported { .. }) && e.to_string().contains(r"`\p{L}+|\s+`"),
        "{e}"
    );
}

#[test]
fn ids_beyond_vocab_size_drop_added_tokens_but_fail_for_the_model_vocab() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    copy_dir(&fixtures().join("gemma3/model"), &src);
    let n = json(&src.join("config.json"))["vocab_size"]
        .as_u64()
        .unwrap();
    edit_json(&src.join("tokenizer.json"), |v| {
        let extra = serde_json::json!({"id": n, "content": "<image_soft_token>", "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": false, "special": true});
        v["added_tokens"].as_array_mut().unwrap().push(extra);
    });
    let out = dir.path().join("x.model");
    import(&src, &out, &ImportOptions::default()).unwrap();
    let m = load(&out).unwrap();
    assert_eq!(m.vocab.as_ref().unwrap().tokens.len() as u64, n);
    let e = import_broken("gemma3", |d| {
        let n = json(&d.join("config.json"))["vocab_size"].as_u64().unwrap();
        edit_json(&d.join("tokenizer.json"), |v| {
            v["model"]["vocab"]["zzz"] = n.into()
        })
    });
    assert!(
        e.to_string().contains("beyond config.json vocab_size"),
        "{e}"
    );
}

#[test]
fn other_weight_files_beside_model_safetensors_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    copy_dir(&fixtures().join("gemma3/model"), &src);
    std::fs::copy(
        fixtures().join("gemma3/expected.safetensors"),
        src.join("consolidated.safetensors"),
    )
    .unwrap();
    let out = dir.path().join("x.model");
    import(&src, &out, &ImportOptions::default()).unwrap();
    assert_matches_expected(&load(&out).unwrap(), "gemma3");
}

#[test]
fn missing_tokenizer_json_is_an_error() {
    let e = import_broken("gemma3", |d| {
        std::fs::remove_file(d.join("tokenizer.json")).unwrap()
    });
    assert!(
        matches!(&e, ImportError::Format { path, .. } if path.ends_with("tokenizer.json")),
        "{e}"
    );
}
