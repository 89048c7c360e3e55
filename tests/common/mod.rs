//! Helpers shared by the integration tests. Each test crate uses a different
//! part of them, so unused-item lints do not apply here.
#![allow(dead_code)]

pub mod tiny_model;
