//! The `[diffusion]` section of an imported denoiser: the keys given on the
//! command line or in a TOML file, with the inputs' roles that were left out
//! found from the graph, then checked against it.

use crate::ir::GraphDoc;
use crate::loader::config::DiffusionSection;

/// A `(field, reason)` pair for `ImportError::Diffusion`.
pub type Mismatch = (String, String);

/// Names that mark a rank-1 input as the noise level.
fn names_a_noise_level(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["sigma", "timestep", "noise_level"]
        .iter()
        .any(|k| n.contains(k))
        || n == "t"
}

fn set(keys: &mut toml::Table, key: &str, value: &str) {
    keys.insert(key.to_string(), toml::Value::String(value.to_string()));
}

/// Fills the role keys missing from `keys` from the graph:
/// `sample_input` = the one rank-4 input; `noise_input` = the rank-1 input
/// named like a noise level (sigma, timestep, noise_level, t), or the only
/// rank-1 input; `condition_input` = the other rank-1 input; `output` = the
/// only output.
fn fill_roles(keys: &mut toml::Table, graph: &GraphDoc) -> Result<(), Mismatch> {
    let rank = |r: usize| -> Vec<&str> {
        graph
            .inputs
            .iter()
            .filter(|d| d.shape.len() == r)
            .map(|d| d.name.as_str())
            .collect()
    };
    let ask = |field: &str, why: String| (format!("diffusion.{field}"), why);
    if !keys.contains_key("sample_input") {
        match rank(4).as_slice() {
            [one] => set(keys, "sample_input", one),
            many => {
                return Err(ask(
                    "sample_input",
                    format!(
                        "{} inputs have 4 dimensions ({}); name the sample with --sample-input",
                        many.len(),
                        many.join(", ")
                    ),
                ))
            }
        }
    }
    let vectors = rank(1);
    if !keys.contains_key("noise_input") {
        let named: Vec<&str> = vectors
            .iter()
            .copied()
            .filter(|n| names_a_noise_level(n))
            .collect();
        match (named.as_slice(), vectors.as_slice()) {
            ([one], _) | ([], [one]) => set(keys, "noise_input", one),
            _ => {
                return Err(ask(
                    "noise_input",
                    format!(
                        "cannot tell which of the inputs {} is the noise level; name it with --noise-input",
                        vectors.join(", ")
                    ),
                ))
            }
        }
    }
    if !keys.contains_key("condition_input") {
        let noise = keys
            .get("noise_input")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let rest: Vec<&str> = vectors.iter().copied().filter(|n| *n != noise).collect();
        match rest.as_slice() {
            [] => {}
            [one] => set(keys, "condition_input", one),
            many => {
                return Err(ask(
                    "condition_input",
                    format!(
                        "inputs {} could each be the condition; name it with --condition-input",
                        many.join(", ")
                    ),
                ))
            }
        }
    }
    if !keys.contains_key("output") {
        match graph.outputs.as_slice() {
            [one] => set(keys, "output", one),
            many => {
                return Err(ask(
                    "output",
                    format!(
                        "the graph has {} outputs ({}); name the denoised one with output = \"...\" in --config",
                        many.len(),
                        many.join(", ")
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// The checked `[diffusion]` section for `graph` from the given `keys`.
pub fn section(mut keys: toml::Table, graph: &GraphDoc) -> Result<DiffusionSection, Mismatch> {
    fill_roles(&mut keys, graph)?;
    let section: DiffusionSection = toml::Value::Table(keys)
        .try_into()
        .map_err(|e: toml::de::Error| ("diffusion".to_string(), e.message().to_string()))?;
    section
        .check(&graph.inputs, &graph.outputs)
        .map_err(|m| (m.field, m.reason))?;
    Ok(section)
}
