//! The graph-IR path. Not implemented yet: a model with only a graph section fails to load with a clear error.
