//! Bad input to the ONNX importer and to `cyb-llm eval`: each is a structured
//! error naming what is wrong (file, node, op type, opset, tensor, input,
//! expected and got), never a panic. Small models are built here with the
//! importer's own `onnx.proto` messages (prost); the real UNet gives the
//! truncated and corrupted variants.

mod onnx_util;

use cyb_llm::import::onnx::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TensorTypeProto, TypeProto,
    ValueInfoProto,
};
use cyb_llm::import::{import, ImportOptions};
use onnx_util::{fixture, read_npy, unet_model, unet_onnx, write_npy};
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::Command;

fn value_info(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            dim_value: *d,
            dim_param: d.is_none().then(|| "batch".to_string()),
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: 1,
                shape: Some(TensorShapeProto { dim }),
            }),
        }),
    }
}

/// `y = op(x, w)` with `x [batch, 4]` and the initializer `w [4]`.
fn tiny_model(op_type: &str, opset: i64, w: TensorProto) -> ModelProto {
    ModelProto {
        ir_version: 9,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        producer_name: "cyb-llm tests".into(),
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into(), "w".into()],
                output: vec!["y".into()],
                name: "the_node".into(),
                op_type: op_type.into(),
                ..Default::default()
            }],
            name: "tiny".into(),
            initializer: vec![w],
            input: vec![value_info("x", &[None, Some(4)])],
            output: vec![value_info("y", &[None, Some(4)])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn weight(values: &[f32]) -> TensorProto {
    TensorProto {
        dims: vec![values.len() as i64],
        data_type: 1,
        name: "w".into(),
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

fn write(dir: &Path, name: &str, m: &ModelProto) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    p
}

fn import_err(path: &Path) -> String {
    let out = path.with_extension("model");
    let e = import(path, &out, &ImportOptions::default())
        .expect_err("the import must fail")
        .to_string();
    assert!(!out.exists(), "a failed import left {}", out.display());
    e
}

#[test]
fn an_unknown_op_names_the_node_op_and_opset_at_import() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "unknown.onnx",
        &tiny_model("FrobnicateV2", 17, weight(&[1.0; 4])),
    );
    let e = import_err(&p);
    for part in ["the_node", "FrobnicateV2", "opset 17", "not supported"] {
        assert!(e.contains(part), "`{part}` missing from: {e}");
    }
}

#[test]
fn an_opset_outside_13_to_21_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "old.onnx",
        &tiny_model("Add", 11, weight(&[1.0; 4])),
    );
    let e = import_err(&p);
    assert!(e.contains("opset 11") && e.contains("13-21"), "{e}");
}

#[test]
fn external_data_is_read_beside_the_model_and_its_absence_named() {
    let dir = tempfile::tempdir().unwrap();
    let values = [1.5f32, -2.0, 0.25, 8.0];
    let mut w = weight(&values);
    let bytes = std::mem::take(&mut w.raw_data);
    w.data_location = 1;
    w.external_data = vec![
        StringStringEntryProto {
            key: "location".into(),
            value: "tiny.onnx.data".into(),
        },
        StringStringEntryProto {
            key: "offset".into(),
            value: "16".into(),
        },
        StringStringEntryProto {
            key: "length".into(),
            value: "16".into(),
        },
    ];
    let p = write(dir.path(), "tiny.onnx", &tiny_model("Add", 18, w));
    let e = import_err(&p);
    assert!(e.contains("`w`") && e.contains("tiny.onnx.data"), "{e}");

    let mut data = vec![0u8; 16];
    data.extend(&bytes);
    std::fs::write(dir.path().join("tiny.onnx.data"), data).unwrap();
    let out = dir.path().join("tiny.model");
    import(&p, &out, &ImportOptions::default()).unwrap();
    let x = [0.5f32, 0.5, 0.5, 0.5, 1.0, 2.0, 3.0, 4.0];
    write_npy(&dir.path().join("x.npy"), &[2, 4], &x);
    let run = eval(
        &out,
        &[
            "--input",
            &format!("x={}", dir.path().join("x.npy").display()),
        ],
        dir.path(),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (shape, y) = read_npy(&dir.path().join("y.npy"));
    assert_eq!(shape, [2, 4]);
    // The reference backend's Add of the same values: the external bytes arrived intact.
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, v)| v + values[i % 4])
        .collect();
    assert_eq!(y, want);
}

#[test]
fn truncated_and_corrupted_onnx_files_are_errors_not_panics() {
    let real = std::fs::read(unet_onnx()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut refused = 0;
    let cases: Vec<(String, Vec<u8>)> = [0usize, 1, 7, 100, 4096, real.len() / 2, real.len() - 1]
        .iter()
        .map(|&n| (format!("truncated at {n}"), real[..n].to_vec()))
        .chain(
            [3usize, 40, 999, 65_537, real.len() / 3, real.len() - 20]
                .iter()
                .map(|&at| {
                    let mut b = real.clone();
                    for (i, v) in b[at..].iter_mut().take(8).enumerate() {
                        *v ^= 0xA5 ^ i as u8;
                    }
                    (format!("8 bytes flipped at {at}"), b)
                }),
        )
        .collect();
    for (what, bytes) in &cases {
        let p = dir.path().join("bad.onnx");
        std::fs::write(&p, bytes).unwrap();
        let out = dir.path().join("bad.model");
        let r = std::panic::catch_unwind(|| import(&p, &out, &ImportOptions::default()));
        match r {
            Err(_) => panic!("{what}: the importer panicked"),
            Ok(Err(e)) => {
                refused += 1;
                assert!(
                    e.to_string().contains("bad.onnx"),
                    "{what}: the error names no file: {e}"
                );
            }
            // A flip inside a weight's bytes is a valid model with other weights.
            Ok(Ok(())) => std::fs::remove_file(&out).unwrap(),
        }
    }
    assert!(
        refused >= 7,
        "only {refused} of {} variants were refused",
        cases.len()
    );
}

fn eval(model: &Path, args: &[&str], out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cyb-llm"))
        .arg("eval")
        .arg(model)
        .args(args)
        .arg("--output-dir")
        .arg(out)
        .output()
        .unwrap()
}

fn input(name: &str, case_file: &str) -> String {
    format!("{name}={}", fixture(&format!("unet/{case_file}")).display())
}

#[test]
fn eval_names_the_input_that_is_missing_unknown_or_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let m = unet_model();
    let (noisy, sigma, diff) = (
        input("noisy", "b1_noisy.npy"),
        input("sigma", "b1_sigma.npy"),
        input("difficulty", "b1_difficulty.npy"),
    );
    let stderr = |args: &[&str]| {
        let r = eval(m, args, dir.path());
        assert!(!r.status.success(), "{args:?} succeeded");
        let e = String::from_utf8_lossy(&r.stderr).into_owned();
        assert!(!e.contains("panicked"), "{args:?}: {e}");
        e
    };
    let e = stderr(&["-i", &noisy, "-i", &sigma]);
    assert!(e.contains("`difficulty`") && e.contains("not given"), "{e}");
    let e = stderr(&[
        "-i",
        &noisy,
        "-i",
        &sigma,
        "-i",
        &diff,
        "-i",
        "temperature=x.npy",
    ]);
    assert!(
        e.contains("no input `temperature`") && e.contains("noisy, sigma, difficulty"),
        "{e}"
    );

    let f64_file = dir.path().join("sigma64.npy");
    write_npy(&f64_file, &[1], &[80.0f64]);
    let e = stderr(&[
        "-i",
        &noisy,
        "-i",
        &format!("sigma={}", f64_file.display()),
        "-i",
        &diff,
    ]);
    assert!(
        e.contains("`sigma`") && e.contains("<f8") && e.contains("f32"),
        "{e}"
    );

    let flat = dir.path().join("flat.npy");
    write_npy(&flat, &[128, 128], &vec![0.0f32; 128 * 128]);
    let e = stderr(&[
        "-i",
        &format!("noisy={}", flat.display()),
        "-i",
        &sigma,
        "-i",
        &diff,
    ]);
    assert!(
        e.contains("`noisy`") && e.contains("[-1, 1, 128, 128]") && e.contains("[128, 128]"),
        "{e}"
    );

    let e = stderr(&[
        "-i",
        &noisy,
        "-i",
        &sigma,
        "-i",
        "difficulty=/nonexistent/d.npy",
    ]);
    assert!(
        e.contains("`difficulty`") && e.contains("/nonexistent/d.npy"),
        "{e}"
    );
}

/// `y = ConstantOfShape(shape)` with the i64 `shape [3]` a graph input (its
/// values known only from the data `eval` is given), or an initializer holding
/// `dims` (folded or kept by the importer).
fn constant_of_shape_model(dims: Option<[i64; 3]>) -> ModelProto {
    let mut shape = value_info("shape", &[Some(3)]);
    if let Some(t) = shape.r#type.as_mut().and_then(|t| t.tensor_type.as_mut()) {
        t.elem_type = 7;
    }
    let initializer: Vec<TensorProto> = dims
        .iter()
        .map(|d| TensorProto {
            dims: vec![3],
            data_type: 7,
            name: "shape".into(),
            raw_data: d.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ..Default::default()
        })
        .collect();
    ModelProto {
        ir_version: 9,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["shape".into()],
                output: vec!["y".into()],
                name: "fill".into(),
                op_type: "ConstantOfShape".into(),
                ..Default::default()
            }],
            name: "fill".into(),
            input: if dims.is_some() {
                Vec::new()
            } else {
                vec![shape]
            },
            initializer,
            output: vec![value_info("y", &[None, None, None])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Shapes that ask for terabytes: from the data at run time, a named error
/// before anything is allocated (the run-time shape limit); from the file, an
/// import error or `OutOfMemory` with the bytes requested at run time, never
/// an abort. A small shape runs.
#[test]
fn a_shape_claiming_terabytes_is_a_named_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let onnx = write(dir.path(), "fill.onnx", &constant_of_shape_model(None));
    let model = dir.path().join("fill.model");
    import(&onnx, &model, &ImportOptions::default()).unwrap();
    let run = |model: &Path, dims: Option<[i64; 3]>| {
        let mut args = vec!["--backend".to_string(), "cpu".to_string()];
        if let Some(dims) = dims {
            let npy = dir.path().join("shape.npy");
            write_npy(&npy, &[3], &dims);
            args.extend(["-i".to_string(), format!("shape={}", npy.display())]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = eval(model, &args, dir.path());
        let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{dims:?}: {stderr}");
        (r.status.success(), stderr)
    };
    let (ok, e) = run(&model, Some([2, 3, 4]));
    assert!(ok, "{e}");
    assert_eq!(
        read_npy(&dir.path().join("y.npy")),
        (vec![2, 3, 4], vec![0.0; 24])
    );
    for dims in [[1 << 20, 1 << 20, 4], [1 << 40, 1 << 40, 1 << 40]] {
        let (ok, e) = run(&model, Some(dims));
        assert!(
            !ok && e.contains("ConstantOfShape") && e.contains("elements"),
            "{e}"
        );
    }
    let fixed = write(
        dir.path(),
        "fixed.onnx",
        &constant_of_shape_model(Some([1 << 20, 1 << 20, 4])),
    );
    let fixed_model = dir.path().join("fixed.model");
    match import(&fixed, &fixed_model, &ImportOptions::default()) {
        Err(e) => {
            eprintln!("refused at import: {e}");
            assert!(e.to_string().contains("fixed.onnx"), "{e}");
        }
        Ok(()) => {
            let (ok, e) = run(&fixed_model, None);
            eprintln!("refused at run time: {e}");
            assert!(!ok);
            assert!(
                e.contains("out of memory allocating 17592186044416 bytes"),
                "{e}"
            );
        }
    }
}

fn attr(name: &str, r#type: i32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type,
        ..Default::default()
    }
}

/// `node_op` over `x [batch, 1, 4]` with `W [1, 8, 4]`, `R [1, 8, 2]` (an LSTM of
/// hidden size 2) and `attrs` added.
fn lstm_model(node_op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> ModelProto {
    let mut m = tiny_model(node_op, 18, weight(&[0.5; 32]));
    let g = m.graph.as_mut().unwrap();
    g.initializer[0].dims = vec![1, 8, 4];
    g.initializer.push(TensorProto {
        dims: vec![1, 8, 2],
        name: "r".into(),
        ..weight(&[0.25; 16])
    });
    g.input = vec![value_info("x", &[None, Some(1), Some(4)])];
    g.output = vec![value_info("y", &[None])];
    g.node[0].input = inputs.iter().map(|s| s.to_string()).collect();
    g.node[0].attribute = attrs;
    m
}

#[test]
fn lstm_and_pad_forms_not_run_are_refused_naming_the_node_and_the_form() {
    let dir = tempfile::tempdir().unwrap();
    let hidden = AttributeProto {
        i: 2,
        ..attr("hidden_size", 2)
    };
    let activations = AttributeProto {
        strings: ["Relu", "Tanh", "Tanh"]
            .map(|s| s.as_bytes().to_vec())
            .to_vec(),
        ..attr("activations", 8)
    };
    let layout = AttributeProto {
        i: 1,
        ..attr("layout", 2)
    };
    let reflect = AttributeProto {
        s: b"reflect".to_vec(),
        ..attr("mode", 3)
    };
    let mut pad = lstm_model("Pad", &["x", "pads"], vec![reflect]);
    pad.graph.as_mut().unwrap().initializer.push(TensorProto {
        dims: vec![6],
        data_type: 7,
        name: "pads".into(),
        int64_data: vec![0, 0, 4, 0, 0, 0],
        ..Default::default()
    });
    // scripts/fuzz.sh onnx_import: wrap Pads of 2^35 and of 12.5 million values
    // ran the import for minutes building their source positions.
    let wrap = AttributeProto {
        s: b"wrap".to_vec(),
        ..attr("mode", 3)
    };
    let mut huge_wrap = lstm_model("Pad", &["x", "pads"], vec![wrap]);
    huge_wrap
        .graph
        .as_mut()
        .unwrap()
        .initializer
        .push(TensorProto {
            dims: vec![6],
            data_type: 7,
            name: "pads".into(),
            int64_data: vec![0, 0, 1 << 35, 0, 0, 0],
            ..Default::default()
        });
    let xwr = ["x", "w", "r"];
    let mut lens_from_input =
        lstm_model("LSTM", &["x", "w", "r", "", "lens"], vec![hidden.clone()]);
    (lens_from_input.graph.as_mut().unwrap().input).push(value_info("lens", &[Some(1)]));
    let cases = [
        (
            lstm_model("LSTM", &xwr, vec![hidden.clone(), activations]),
            "activations",
        ),
        (lstm_model("LSTM", &xwr, vec![hidden, layout]), "layout 1"),
        (lstm_model("LSTM", &xwr, vec![]), "hidden_size"),
        (lens_from_input, "sequence_lens known only per call"),
        (pad, "reflect needs pads < the dim"),
        (huge_wrap, "at most 1048576 padded values in all"),
    ];
    for (i, (m, why)) in cases.iter().enumerate() {
        let e = import_err(&write(dir.path(), &format!("case{i}.onnx"), m));
        for part in ["the_node", why] {
            assert!(e.contains(part), "case {i}: `{part}` missing from: {e}");
        }
    }
}
