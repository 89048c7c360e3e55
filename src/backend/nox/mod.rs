//! The `nox` backend. Not implemented yet: nothing here runs ops.
