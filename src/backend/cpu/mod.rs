//! The `cpu` backend. Not implemented yet: nothing here runs ops.
