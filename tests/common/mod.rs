//! Helpers shared by the integration tests.
pub mod tiny_model;
