//! The graph path on the real models of ../shared/models.md (imported from
//! their GGUFs, which write a graph section): graph vs curated, fused vs
//! unfused, nox vs cpu, nox bit-exactness across runs and thread counts, a
//! renamed model_type running on the graph alone, `graph --emit`.
//!
//! The curated LlamaStyle family (tested against transformers elsewhere) is
//! the reference; tolerances are ops.md's "full forward, logits" (1e-3).
//! Models come from `$CYB_MODELS_DIR` (default `.cache/models`), which
//! scripts/fetch-models.sh fills.

mod graph_util;

use cyb_llm::backend::BackendChoice;
use cyb_llm::graph::{GraphModel, GraphOptions};
use cyb_llm::import::{import, ImportOptions};
use cyb_llm::loader::{ExecPath, Model};
use cyb_llm::path::{choose, ModelPaths, PathChoice};
use cyb_llm::tokenizer::Tokenizer;
use cyb_llm::ExecutionError;
use graph_util::{argmax, assert_close, curated_greedy, graph_run, GraphRun};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const SMOLLM2: &str = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const GEMMA3: &str = "gemma3/gemma-3-270m-q4_k_m.gguf";
const CTX: usize = 256;

fn model_file(rel: &str) -> PathBuf {
    let dir = std::env::var_os("CYB_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models"));
    let p = dir.join(rel);
    assert!(
        p.is_file(),
        "{} is missing: run scripts/fetch-models.sh (or set CYB_MODELS_DIR) before the tests",
        p.display()
    );
    p
}

fn imported(rel: &str, no_graph: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.model");
    let opts = ImportOptions {
        no_graph,
        ..Default::default()
    };
    import(&model_file(rel), &out, &opts).unwrap();
    (dir, out)
}

fn load(path: &Path) -> Arc<Model> {
    Arc::new(cyb_llm::load(path).unwrap())
}

/// The path `--path choice` resolves to for `model` on the backend `backend`.
fn resolve_path(
    model: &Model,
    choice: PathChoice,
    backend: &str,
) -> Result<ExecPath, ExecutionError> {
    let caps = BackendChoice::parse(backend).unwrap().capabilities();
    choose(ModelPaths::of(model), choice, backend, caps)
}

fn prompt(model: &Model, text: &str) -> Vec<u32> {
    let tok = Tokenizer::from_model(model).unwrap();
    let ids = tok.encode(text, true).unwrap();
    assert!(ids.len() > 2);
    ids
}

fn graph_matches_curated(rel: &str, text: &str) {
    let (_dir, path) = imported(rel, false);
    let model = load(&path);
    let ids = prompt(&model, text);
    let (tokens, reference) = curated_greedy(&model, "cpu", CTX, &ids, 16);
    for fuse in [true, false] {
        let run = graph_run(&model, "cpu", 2, fuse, CTX, &ids, &tokens);
        assert_eq!(run.greedy, tokens, "{rel}: greedy tokens, fuse {fuse}");
        assert_close(
            &format!("{rel} graph (fuse {fuse}) vs curated"),
            &run.logits,
            &reference,
            1e-3,
        );
        if fuse {
            assert!(run.fused > 0, "the fusion pass fused nothing");
        } else {
            assert_eq!(run.fused, 0);
        }
    }
}

#[test]
fn smollm2_graph_matches_curated() {
    graph_matches_curated(SMOLLM2, "The capital of France is");
}

#[test]
fn gemma3_graph_matches_curated() {
    graph_matches_curated(GEMMA3, "The capital of France is");
}

#[test]
fn smollm2_nox_matches_cpu_and_is_bit_exact() {
    let (_dir, path) = imported(SMOLLM2, false);
    let model = load(&path);
    let ids = prompt(&model, "Write a haiku about the sea.");
    let (_, reference) = curated_greedy(&model, "cpu", CTX, &ids, 1);
    // The CPU reference library (f32 activations, dequantized weights) is
    // the arbiter: nox must agree with it to the f32 full-forward tolerance
    // and pick the same greedy tokens. The fast cpu backend takes
    // int8-quantized activations into its quantized dot products, so against
    // it the quantized-weights tolerance of ops.md (5e-2) applies (and its
    // greedy continuation may leave the arbiter's after a few tokens).
    let tokens = {
        let gm = Arc::new(
            GraphModel::with_backend(
                model.clone(),
                BackendChoice::Named("reference".into()),
                2,
                GraphOptions {
                    ctx_size: CTX,
                    ..Default::default()
                },
            )
            .unwrap(),
        );
        let mut s = gm.session().unwrap();
        let mut l = s.forward(&ids).unwrap();
        let mut out = Vec::new();
        for _ in 0..8 {
            out.push(argmax(&l));
            l = s.forward(&[*out.last().unwrap()]).unwrap();
        }
        out
    };
    let arbiter = graph_run(&model, "reference", 2, false, CTX, &ids, &tokens);
    let a = graph_run(&model, "nox", 1, true, CTX, &ids, &tokens);
    let b = graph_run(&model, "nox", 2, true, CTX, &ids, &tokens);
    assert_eq!(
        a.greedy, tokens,
        "nox greedy tokens vs the reference backend's"
    );
    assert_close("nox vs reference backend", &a.logits, &arbiter.logits, 1e-3);
    assert_close(
        "nox vs curated (cpu), prompt",
        &a.logits[..1],
        &reference,
        5e-2,
    );
    let bits =
        |r: &GraphRun| -> Vec<u32> { r.logits.iter().flatten().map(|x| x.to_bits()).collect() };
    assert!(
        bits(&a) == bits(&b),
        "nox logits differ between 1 and 2 threads"
    );
    assert_eq!(
        a.trace, b.trace,
        "nox trace hash differs between 1 and 2 threads"
    );
    let c = graph_run(&model, "nox", 2, true, CTX, &ids, &tokens);
    assert!(bits(&b) == bits(&c), "nox logits differ between two runs");
    assert_eq!(b.trace, c.trace);
    eprintln!(
        "nox trace hash (smollm2, {} prompt + {} tokens): {}",
        ids.len(),
        tokens.len(),
        a.trace.unwrap()
    );
}

#[test]
fn renamed_model_type_runs_on_the_graph_path() {
    let (dir, path) = imported(SMOLLM2, false);
    let original = load(&path);
    // The same file with a model_type no family claims.
    let renamed = dir.path().join("renamed.model");
    let mut w = cyb_llm::loader::writer::ModelWriter::new(original.name.clone());
    for s in &original.sections {
        if let Some(text) = original.section_text(&s.name) {
            if s.name == "tensors" {
                continue;
            }
            let text = if s.name == "config" {
                text.replace(
                    "model_type = \"llama\"",
                    "model_type = \"my_llama_variant\"",
                )
            } else {
                text.to_string()
            };
            w.set_section(&s.name, text);
        }
    }
    for e in original.tensors.entries() {
        w.add_tensor(cyb_llm::loader::writer::PendingTensor {
            name: e.name.clone(),
            shape: e.shape.clone(),
            dtype: e.dtype,
            scale: e.scale,
            data: std::borrow::Cow::Borrowed(original.tensor_of(e).bytes),
        })
        .unwrap();
    }
    w.write(&renamed).unwrap();
    let model = load(&renamed);
    assert_eq!(model.config.model_type, "my_llama_variant");
    assert_eq!(model.exec_path, ExecPath::Graph);
    assert_eq!(
        resolve_path(&model, PathChoice::Auto, "auto").unwrap(),
        ExecPath::Graph
    );
    assert!(resolve_path(&model, PathChoice::Curated, "auto").is_err());
    let ids = prompt(&original, "The capital of France is");
    let (tokens, reference) = curated_greedy(&original, "cpu", CTX, &ids, 8);
    let run = graph_run(&model, "cpu", 2, true, CTX, &ids, &tokens);
    assert_eq!(run.greedy, tokens);
    assert_close(
        "renamed model (graph) vs curated",
        &run.logits,
        &reference,
        1e-3,
    );
}

#[test]
fn emit_adds_the_same_graph_and_nox_needs_one() {
    let (dir, path) = imported(SMOLLM2, true);
    let bare = cyb_llm::load(&path).unwrap();
    assert!(bare.graph.is_none(), "--no-graph wrote a graph section");
    let err = resolve_path(&bare, PathChoice::Auto, "nox").unwrap_err();
    assert_eq!(
        err,
        ExecutionError::BackendInit {
            backend: "nox".into(),
            reason: "model has no graph section".into()
        }
    );
    let out = dir.path().join("emitted.model");
    cyb_llm::graph::emit_graph(&bare, &out).unwrap();
    let emitted = cyb_llm::load(&out).unwrap();
    let (_d2, with_graph) = imported(SMOLLM2, false);
    let imported = cyb_llm::load(&with_graph).unwrap();
    assert!(
        emitted.section_text("graph").unwrap().trim_end()
            == imported.section_text("graph").unwrap().trim_end(),
        "emitted and imported graph sections differ"
    );
    assert_eq!(emitted.graph, imported.graph);
    // Every tensor kept byte for byte.
    for e in bare.tensors.entries() {
        assert_eq!(
            emitted.tensor(&e.name).unwrap().bytes,
            bare.tensor_of(e).bytes
        );
    }
    // Emitting in place replaces the section (temp file + rename).
    drop(emitted);
    cyb_llm::graph::emit_graph(&cyb_llm::load(&out).unwrap(), &out).unwrap();
    assert_eq!(cyb_llm::load(&out).unwrap().graph, imported.graph);
    assert_eq!(
        resolve_path(&imported, PathChoice::Auto, "nox").unwrap(),
        ExecPath::Graph
    );
}
