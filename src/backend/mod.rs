//! The `Backend` trait of the execution contract, the dispatcher, and the backends.
pub mod cpu;
pub mod honeycrisp;
pub mod nox;
pub mod wgpu;
