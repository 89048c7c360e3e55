//! The `honeycrisp` backend (Apple Silicon: Metal + Accelerate). Not
//! implemented yet: [`init`] always reports why it cannot start.

use super::{Backend, BackendConfig};
use crate::error::ExecutionError;
use std::sync::Arc;

/// Starts the backend; on anything but aarch64 macOS this is `BackendInit`.
pub fn init(_config: &BackendConfig) -> Result<Arc<dyn Backend>, ExecutionError> {
    let reason = if cfg!(all(target_os = "macos", target_arch = "aarch64")) {
        "not implemented in this build".to_string()
    } else {
        format!(
            "requires Apple Silicon macOS; this is {}/{}",
            std::env::consts::OS,
            std::env::consts::ARCH
        )
    };
    Err(ExecutionError::BackendInit {
        backend: "honeycrisp".into(),
        reason,
    })
}
