//! The CPU reference library (and the cpu backend) against PyTorch float64
//! outputs stored by `scripts/make_ops_fixtures.py` in `tests/fixtures/ops/ops.json`.

mod backend_util;

use backend_util::rel_err;
use cyb_llm::backend::cpu::{reference, CpuBackend};
use cyb_llm::backend::{Backend, ExecContext, Mask, Op, RopeStyle, Tensor};
use serde_json::Value;

/// ops.md one-op f32 tolerance.
const TOL: f32 = 1e-5;

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f32> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    Tensor::from_f32(&shape, data).unwrap()
}

fn f(a: &Value, key: &str) -> f32 {
    a[key].as_f64().unwrap_or_else(|| panic!("attr {key}")) as f32
}

fn u(a: &Value, key: &str) -> usize {
    a[key].as_u64().unwrap_or_else(|| panic!("attr {key}")) as usize
}

fn op_of(name: &str, a: &Value) -> Op {
    match name {
        "Matmul" => Op::Matmul,
        "RmsNorm" => Op::RmsNorm {
            eps: f(a, "eps"),
            add_one: a["add_one"].as_bool().unwrap(),
        },
        "LayerNorm" => Op::LayerNorm { eps: f(a, "eps") },
        "GroupNorm" => Op::GroupNorm {
            groups: u(a, "groups"),
            eps: f(a, "eps"),
        },
        "Silu" => Op::Silu,
        "Gelu" => Op::Gelu,
        "GeluTanh" => Op::GeluTanh,
        "Sigmoid" => Op::Sigmoid,
        "Tanh" => Op::Tanh,
        "Softcap" => Op::Softcap(f(a, "cap")),
        "Softmax" => Op::Softmax,
        "SwiGlu" => Op::SwiGlu,
        "GeGlu" => Op::GeGlu,
        "Rope" => Op::Rope {
            style: if a["style"] == "neox" {
                RopeStyle::Neox
            } else {
                RopeStyle::Normal
            },
            rot_dim: u(a, "rot_dim"),
            pos: u(a, "pos"),
            base: f(a, "base"),
        },
        "Sdpa" => {
            let m = &a["mask"];
            let mask = match m["kind"].as_str().unwrap() {
                "none" => Mask::None,
                "causal" => Mask::Causal,
                "sliding" => Mask::Sliding(u(m, "window")),
                _ => Mask::Padding(
                    m["keep"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|b| b.as_bool().unwrap())
                        .collect(),
                ),
            };
            Op::Sdpa {
                scale: None,
                mask,
                q_pos: u(a, "q_pos"),
                kv_len: None,
            }
        }
        "Conv1d" => Op::Conv1d {
            stride: u(a, "stride"),
            padding: u(a, "padding"),
        },
        other => panic!("fixture op {other} not mapped"),
    }
}

#[test]
fn reference_and_cpu_match_pytorch() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ops/ops.json");
    let text =
        std::fs::read_to_string(path).expect("fixture present (scripts/make_ops_fixtures.py)");
    let root: Value = serde_json::from_str(&text).unwrap();
    let cases = root["cases"].as_array().unwrap();
    assert!(cases.len() >= 30, "fixture has {} cases", cases.len());
    let cpu = CpuBackend::new(2).unwrap();
    let mut ctx = ExecContext::new(2);
    let mut seen = std::collections::BTreeSet::new();
    for case in cases {
        let name = case["op"].as_str().unwrap();
        let op = op_of(name, &case["attrs"]);
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        let want: Vec<Tensor> = case["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        assert!(!want.is_empty(), "{op:?}: fixture case without outputs");
        let by_ref = reference::execute(&op, &inputs).unwrap();
        let by_cpu = cpu.execute(&op, &inputs, &mut ctx).unwrap();
        for (who, outs) in [("reference", &by_ref), ("cpu", &by_cpu)] {
            assert_eq!(
                outs.len(),
                want.len(),
                "{op:?}: {who} gave {} outputs, PyTorch {}",
                outs.len(),
                want.len()
            );
            for (got, w) in outs.iter().zip(&want) {
                assert_eq!(got.shape(), w.shape(), "{op:?} on {who}");
                let e = rel_err(got.as_f32().unwrap(), w.as_f32().unwrap());
                assert!(
                    e <= TOL,
                    "{op:?} on {who}: relative error {e} against PyTorch"
                );
            }
        }
        seen.insert(name);
    }
    assert!(seen.len() >= 16, "ops covered: {seen:?}");
}
