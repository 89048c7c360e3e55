//! The `honeycrisp` backend. Not implemented yet: nothing here runs ops.
