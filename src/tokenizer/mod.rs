//! Tokenizers built from a `.model` vocab section.
