//! ONNX recurrent ops: `LSTM` into [`Op::Lstm`] (absent biases and initial states
//! as zero constants).

use super::sym::Sym;
use super::translate::{OnnxNode, Translator, Val, Why};
use crate::backend::{LstmSpec, Op, RnnDirection};
use std::sync::Arc;

/// The activations `Op::Lstm` computes, per direction (ONNX's defaults).
const LSTM_ACTIVATIONS: [&str; 3] = ["Sigmoid", "Tanh", "Tanh"];

impl Translator {
    /// A zero f32 constant of `shape`, under a new name.
    fn zeros(&mut self, base: &str, shape: Vec<usize>) -> String {
        let name = self.fresh_name(base);
        let n = shape.iter().product();
        self.set(
            &name,
            Val::Floats {
                shape,
                data: Arc::new(vec![0.0; n]),
            },
        );
        name
    }

    /// ONNX `LSTM`: outputs Y, Y_h, Y_c (any of them may be left out).
    pub(super) fn lstm(&mut self, n: &OnnxNode) -> Result<(), Why> {
        let x = n.input(0).ok_or("LSTM needs X")?;
        let w = n.input(1).ok_or("LSTM needs W")?;
        let r = n.input(2).ok_or("LSTM needs R")?;
        let direction = {
            let d = n.string("direction", "forward")?;
            RnnDirection::parse(&d).ok_or_else(|| {
                format!("LSTM direction `{d}` is not forward, reverse or bidirectional")
            })?
        };
        let nd = direction.count();
        if let Some(acts) = n.strings("activations")? {
            let want: Vec<&str> = LSTM_ACTIVATIONS
                .iter()
                .copied()
                .cycle()
                .take(3 * nd)
                .collect();
            if !acts.iter().map(String::as_str).eq(want.iter().copied()) {
                return Err(format!(
                    "LSTM activations {acts:?} are not supported yet (only {want:?}, ONNX's default)"
                ));
            }
        }
        if n.attrs.contains_key("activation_alpha") || n.attrs.contains_key("activation_beta") {
            return Err("LSTM activation_alpha / activation_beta are not supported yet".into());
        }
        if n.int("layout", 0)? != 0 {
            return Err(
                "LSTM layout 1 (batch first) is not supported yet; export with layout 0".into(),
            );
        }
        let hidden = usize::try_from(n.int("hidden_size", 0)?)
            .ok()
            .filter(|&h| h > 0)
            .ok_or("LSTM needs a positive hidden_size")?;
        let known = |s: &[Sym], what: &str| -> Result<Vec<usize>, Why> {
            s.iter()
                .map(|d| {
                    d.dim()
                        .ok_or_else(|| format!("LSTM {what} has a symbolic dim"))
                })
                .collect()
        };
        let ws = known(&self.shape_of(w)?, "W")?;
        if ws.len() != 3 || ws[0] != nd || ws[1] != 4 * hidden {
            return Err(format!(
                "LSTM W has shape {ws:?}; [{nd}, {}, input_size] is needed",
                4 * hidden
            ));
        }
        let xshape = self.shape_of(x)?;
        if xshape.len() != 3 {
            return Err(format!("LSTM X has rank {}; 3 is needed", xshape.len()));
        }
        let batch = xshape[1].dim();
        let b = match n.input(3) {
            Some(b) => b.to_string(),
            None => self.zeros(w, vec![nd, 8 * hidden]),
        };
        let seq_lens = match n.input(4) {
            None => None,
            Some(l) => {
                let lens = self.known_ints(l).map_err(|e| {
                    format!("LSTM sequence_lens known only per call is not supported yet ({e})")
                })?;
                let steps = xshape[0].dim().ok_or(
                    "LSTM sequence_lens with a symbolic sequence length is not supported yet",
                )?;
                let lens = lens
                    .iter()
                    .map(|&v| usize::try_from(v).ok().filter(|&v| v >= 1 && v <= steps))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or_else(|| format!("LSTM sequence_lens {lens:?} outside 1..={steps}"))?;
                (!lens.iter().all(|&v| v == steps)).then_some(lens)
            }
        };
        let mut state = Vec::with_capacity(2);
        for (k, what) in [(5, "initial_h"), (6, "initial_c")] {
            state.push(match n.input(k) {
                Some(s) => s.to_string(),
                None => {
                    let b = batch.ok_or_else(|| {
                        format!("LSTM without {what} on a symbolic batch is not supported yet")
                    })?;
                    self.zeros(w, vec![nd, b, hidden])
                }
            });
        }
        let mut ins = vec![x, w, r, b.as_str(), &state[0], &state[1]];
        if let Some(p) = n.input(7) {
            ins.push(p);
        }
        let op = Op::Lstm(LstmSpec {
            hidden,
            direction,
            clip: n
                .attrs
                .get("clip")
                .map(|_| n.float("clip", 0.0))
                .transpose()?,
            input_forget: n.int("input_forget", 0)? != 0,
            seq_lens,
        });
        // Outputs left out in the ONNX node get names of their own.
        let outs: Vec<String> = (0..3)
            .map(|i| match n.outputs.get(i).filter(|o| !o.is_empty()) {
                Some(o) => o.clone(),
                None => self.fresh_name(&format!("{}::lstm{i}", n.outputs.join(","))),
            })
            .collect();
        let out_refs: Vec<&str> = outs.iter().map(String::as_str).collect();
        self.apply(op, &ins, &out_refs)
    }
}
