//! The `wgpu` backend. Not implemented yet: nothing here runs ops.
