//! The `nox` backend (deterministic, verifiable; graph path only). Not
//! implemented yet: [`init`] always reports that.

use super::{Backend, BackendConfig};
use crate::error::ExecutionError;
use std::sync::Arc;

/// Starts the backend; until it exists this is `BackendInit`.
pub fn init(_config: &BackendConfig) -> Result<Arc<dyn Backend>, ExecutionError> {
    Err(ExecutionError::BackendInit {
        backend: "nox".into(),
        reason: "not implemented in this build".into(),
    })
}
