//! The ONNX importer: `cyb-llm import MODEL.onnx` writes the graph as the
//! `graph` section (our IR, run by the graph executor), the constants it
//! reads as f32 tensors, and the inputs with their symbolic dimensions.
//!
//! - [`proto`]: the `onnx.proto` messages, decoded with `prost`;
//! - `tensor`: initializer values (raw, typed or external data);
//! - `translate`: node by node into IR nodes, folding shape arithmetic and
//!   constant subgraphs;
//! - `sym`: import-time dimensions (known, or a multiple of a symbolic one);
//! - `runtime`: integer values known only per call, read back at run time;
//! - `shape_ops`: ops whose output shape may be known only per call.
//! - `rnn`: `LSTM` (one recurrent op; absent biases and states as zeros).
//!
//! Opsets 13 to 21 of the default domain are read; any other domain, opset
//! or op is [`ImportError::UnsupportedOp`] naming the node.

mod diffusion;
pub mod proto;
mod rnn;
mod runtime;
mod shape_ops;
mod sym;
mod tensor;
mod translate;
mod voice;

use super::ImportOptions;
use crate::error::ImportError;
use crate::loader::config::{Architecture, Config};
use crate::loader::writer::{ModelWriter, PendingTensor};
use prost::Message;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use sym::Sym;
use translate::{Attr, OnnxNode, Translator, WeightData};

/// The default-domain opsets this importer reads.
pub const OPSETS: std::ops::RangeInclusive<i64> = 13..=21;

fn format_err(path: &Path, reason: impl Into<String>) -> ImportError {
    ImportError::Format {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn attrs(node: &proto::NodeProto, dir: &Path) -> Result<HashMap<String, Attr>, String> {
    node.attribute
        .iter()
        .map(|a| {
            let v = match a.r#type {
                1 => Attr::Float(a.f),
                2 => Attr::Int(a.i),
                3 => Attr::Str(String::from_utf8_lossy(&a.s).into_owned()),
                4 => Attr::Tensor(tensor::value(
                    a.t.as_ref()
                        .ok_or_else(|| format!("attribute `{}` has no tensor", a.name))?,
                    dir,
                )?),
                6 => Attr::Floats(a.floats.clone()),
                7 => Attr::Ints(a.ints.clone()),
                8 => Attr::Strings(
                    a.strings
                        .iter()
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                        .collect(),
                ),
                t => {
                    return Err(format!(
                        "attribute `{}` has type {t} (graphs and tensor lists are not read)",
                        a.name
                    ))
                }
            };
            Ok((a.name.clone(), v))
        })
        .collect()
}

/// An ONNX model translated: the graph section and the tensors it reads.
pub struct Converted {
    /// The graph section.
    pub graph: crate::ir::GraphDoc,
    /// The `config` section.
    pub config: Config,
    weights: Vec<translate::WeightOut>,
}

/// Imports the ONNX model `source` into the `.model` file `out`.
pub fn import(source: &Path, out: &Path, opts: &ImportOptions) -> Result<(), ImportError> {
    let bytes = std::fs::read(source).map_err(|e| ImportError::Io {
        path: source.to_path_buf(),
        source: e,
    })?;
    let mut done = convert(source, &bytes)?;
    if let Some(keys) = &opts.diffusion {
        let section =
            diffusion::section(keys.clone(), &done.graph).map_err(|(field, reason)| {
                ImportError::Diffusion {
                    path: source.to_path_buf(),
                    field,
                    reason,
                }
            })?;
        done.config.diffusion = Some(section);
    }
    done.config.tts = voice::section(source, &done.graph)?;
    let name = opts.name.clone().unwrap_or_else(|| {
        source
            .file_stem()
            .map_or("model".into(), |s| s.to_string_lossy().into_owned())
    });
    let mut writer = ModelWriter::new(name);
    for w in &done.weights {
        let (dtype, bytes) = match &w.data {
            WeightData::F32(v) => (
                crate::dtype::DType::F32,
                bytemuck::cast_slice(v.as_slice()).to_vec(),
            ),
            WeightData::Ints(d, v) if *d == crate::dtype::DType::Bool => {
                (*d, v.iter().map(|&x| u8::from(x != 0)).collect())
            }
            WeightData::Ints(d, v) => (*d, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        };
        writer.add_tensor(PendingTensor {
            name: w.name.clone(),
            shape: w.shape.clone(),
            dtype,
            scale: None,
            data: Cow::Owned(bytes),
        })?;
    }
    writer.set_config(&done.config)?;
    writer.set_section("graph", done.graph.to_toml());
    writer.write(out)
}

/// Translates the ONNX model in `bytes` (read from `source`; external data is looked up
/// beside it) without writing anything.
pub fn convert(source: &Path, bytes: &[u8]) -> Result<Converted, ImportError> {
    let model = proto::ModelProto::decode(bytes).map_err(|e| {
        format_err(
            source,
            format!("not a valid ONNX model (protobuf decode failed: {e}); the file may be truncated or corrupt"),
        )
    })?;
    let dir = source.parent().unwrap_or(Path::new("."));
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| format_err(source, "the model imports no default-domain opset"))?;
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| format_err(source, "the model has no graph"))?;
    let mut initializers = Vec::with_capacity(graph.initializer.len());
    for t in &graph.initializer {
        let v = tensor::value(t, dir).map_err(|r| format_err(source, r))?;
        initializers.push((t.name.clone(), v));
    }
    let init_names: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let mut tr = Translator::new(initializers);
    for (i, input) in graph.input.iter().enumerate() {
        if init_names.contains(input.name.as_str()) {
            continue;
        }
        let tt = input
            .r#type
            .as_ref()
            .and_then(|t| t.tensor_type.as_ref())
            .ok_or_else(|| {
                format_err(
                    source,
                    format!("graph input `{}` is not a tensor", input.name),
                )
            })?;
        let dtype = match tt.elem_type {
            1 => crate::dtype::DType::F32,
            7 => crate::dtype::DType::I64,
            9 => crate::dtype::DType::Bool,
            t => {
                return Err(ImportError::Unsupported {
                    path: source.to_path_buf(),
                    reason: format!(
                        "graph input `{}` has ONNX data type {t}; f32, i64 and bool inputs are supported",
                        input.name
                    ),
                })
            }
        };
        let dims = tt
            .shape
            .as_ref()
            .map(|s| s.dim.as_slice())
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(d, dim)| match (&dim.dim_value, &dim.dim_param) {
                (Some(v), _) if *v >= 0 => Sym::known(*v),
                (_, Some(p)) if !p.is_empty() => Sym::var(p),
                _ => Sym::var(&format!("{}_dim{d}_{i}", input.name)),
            })
            .collect();
        tr.input(&input.name, dims, dtype);
    }
    for (index, node) in graph.node.iter().enumerate() {
        let unsupported = |reason: String| ImportError::UnsupportedOp {
            path: source.to_path_buf(),
            index,
            node: if node.name.is_empty() {
                node.output.first().cloned().unwrap_or_default()
            } else {
                node.name.clone()
            },
            op: node.op_type.clone(),
            opset,
            reason,
        };
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(unsupported(format!(
                "domain `{}` is not supported",
                node.domain
            )));
        }
        if !OPSETS.contains(&opset) {
            return Err(unsupported(format!(
                "opset {opset} is not supported (opsets {}-{} are)",
                OPSETS.start(),
                OPSETS.end()
            )));
        }
        let decoded = OnnxNode {
            op_type: &node.op_type,
            inputs: &node.input,
            outputs: &node.output,
            attrs: attrs(node, dir).map_err(&unsupported)?,
        };
        tr.node(&decoded).map_err(&unsupported)?;
    }
    let outputs: Vec<String> = graph.output.iter().map(|o| o.name.clone()).collect();
    let done = tr.finish(&outputs).map_err(|r| format_err(source, r))?;

    let parameters = done
        .weights
        .iter()
        .map(|w| match &w.data {
            WeightData::F32(v) => v.len() as u64,
            WeightData::Ints(_, v) => v.len() as u64,
        })
        .sum();
    let mut extra = toml::Table::new();
    let mut onnx = toml::Table::new();
    onnx.insert("opset".into(), toml::Value::Integer(opset));
    onnx.insert("ir_version".into(), toml::Value::Integer(model.ir_version));
    onnx.insert(
        "producer".into(),
        toml::Value::String(
            format!("{} {}", model.producer_name, model.producer_version)
                .trim()
                .to_string(),
        ),
    );
    extra.insert("onnx".into(), toml::Value::Table(onnx));
    let config = Config {
        model_type: "onnx".into(),
        parameters: Some(parameters),
        architecture: Architecture {
            extra,
            ..Default::default()
        },
        ..Default::default()
    };
    Ok(Converted {
        graph: done.doc,
        config,
        weights: done.weights,
    })
}
