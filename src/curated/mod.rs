//! Curated, hand-written forward code per model family. No family is implemented yet.
