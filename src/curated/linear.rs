//! The linear layer the curated families share: `act(x W^T + b)`.

use crate::backend::{Dispatcher, ExecContext, Op, Tensor};
use crate::error::ExecutionError;

/// A linear layer: weight `[out, in]` (any encoding) and an optional f32 bias `[out]`.
pub(super) struct Linear {
    pub w: Tensor,
    pub b: Option<Tensor>,
}

impl Linear {
    /// `act(x W^T + b)`, the bias and the activation (an element-wise op) where given:
    /// one `MatmulBias` where there is a bias and the primary backend has the op, else
    /// its parts (on the primary backend's own tensors, rather than a fallback that
    /// moves them). The values are those of the parts either way.
    pub fn apply(
        &self,
        dispatcher: &Dispatcher,
        x: &Tensor,
        act: Option<&Op>,
        ctx: &mut ExecContext,
    ) -> Result<Tensor, ExecutionError> {
        if let Some(b) = &self.b {
            let args = [x.clone(), self.w.clone(), b.clone()];
            let fused = Op::MatmulBias {
                act: act.map(|a| Box::new(a.clone())),
            };
            if dispatcher.primary_supports(&fused, &args) {
                return dispatcher.run1(&fused, &args, ctx);
            }
        }
        let mut y = dispatcher.run1(&Op::Matmul, &[x.clone(), self.w.clone()], ctx)?;
        if let Some(b) = &self.b {
            y = dispatcher.run1(&Op::Add, &[y, b.clone()], ctx)?;
        }
        match act {
            Some(a) => dispatcher.run1(a, &[y], ctx),
            None => Ok(y),
        }
    }
}
