//! Binding a model's tensors for the curated families: zero-copy views of the
//! mapped file (any encoding), or values decoded to f32 once at load.

use crate::backend::{SharedBytes, Tensor};
use crate::error::ExecutionError;
use crate::loader::Model;
use std::sync::Arc;

/// The file's bytes kept alive by the weights, as a [`SharedBytes`] owner.
struct ModelBytes(Arc<Model>);

impl AsRef<[u8]> for ModelBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.file_bytes()
    }
}

/// Binds tensors of one model for one family (named in missing-tensor errors).
pub(crate) struct WeightBinder {
    model: Arc<Model>,
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    family: &'static str,
}

impl WeightBinder {
    /// A binder over `model`'s tensors on behalf of `family`.
    pub(crate) fn new(model: Arc<Model>, family: &'static str) -> WeightBinder {
        WeightBinder {
            owner: Arc::new(ModelBytes(model.clone())),
            model,
            family,
        }
    }

    /// Whether the model has a tensor named `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.model.tensors.contains(name)
    }

    /// Tensor `name` viewed with `shape` (default: its own), zero-copy or decoded
    /// to f32 when `decode`; `None` when the model has no such tensor.
    pub(crate) fn get_as(
        &self,
        name: &str,
        decode: bool,
        shape: Option<&[usize]>,
    ) -> Result<Option<Tensor>, ExecutionError> {
        let Some(t) = self.model.tensor(name) else {
            return Ok(None);
        };
        let bad = || ExecutionError::WeightFormatMismatch {
            name: name.to_string(),
            declared: t.entry.dtype,
            actual_bytes: t.bytes.len(),
        };
        let shape = shape.unwrap_or(&t.entry.shape);
        if decode {
            let values = t.dequantize().map_err(|_| bad())?;
            return Tensor::from_f32(shape, values).map(Some);
        }
        let start = t.bytes.as_ptr() as usize - self.model.file_bytes().as_ptr() as usize;
        let bytes =
            SharedBytes::new(self.owner.clone(), start..start + t.bytes.len()).ok_or_else(bad)?;
        Tensor::from_bytes(shape, t.entry.dtype, bytes, t.entry.scale).map(Some)
    }

    /// [`get_as`](Self::get_as) with the tensor's own shape.
    pub(crate) fn get(&self, name: &str, decode: bool) -> Result<Option<Tensor>, ExecutionError> {
        self.get_as(name, decode, None)
    }

    /// Like [`get_as`](Self::get_as), but a missing tensor is `MissingTensor`.
    pub(crate) fn need_as(
        &self,
        name: &str,
        decode: bool,
        shape: Option<&[usize]>,
    ) -> Result<Tensor, ExecutionError> {
        self.get_as(name, decode, shape)?
            .ok_or_else(|| ExecutionError::MissingTensor {
                name: name.to_string(),
                required_by: self.family.into(),
            })
    }

    /// [`need_as`](Self::need_as) with the tensor's own shape.
    pub(crate) fn need(&self, name: &str, decode: bool) -> Result<Tensor, ExecutionError> {
        self.need_as(name, decode, None)
    }

    /// Tensor `name` as stored, viewed as the matrix `[shape[0], rest]`.
    pub(crate) fn need_matrix(&self, name: &str) -> Result<Tensor, ExecutionError> {
        let shape = self.model.tensor(name).map(|t| {
            let rows = t.entry.shape.first().copied().unwrap_or(1);
            let rest: usize = t.entry.shape.iter().skip(1).product();
            [rows, rest]
        });
        self.need_as(name, false, shape.as_ref().map(|s| &s[..]))
    }
}
