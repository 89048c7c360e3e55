//! Structured errors. Every variant names the file, section, key, tensor, op or
//! backend involved, and says what would fix it where that is not obvious.

use crate::dtype::DType;
use std::path::PathBuf;

/// Why a `.model` file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a .model file: {reason}")]
    NotAModel { path: PathBuf, reason: String },
    #[error("{path}: line {line}: CRLF line ending; .model text must use LF only (convert with `dos2unix`)")]
    CrLf { path: PathBuf, line: usize },
    #[error("{path}: byte {offset}: the text part is not valid UTF-8")]
    InvalidUtf8 { path: PathBuf, offset: usize },
    #[error("{path}: line {line}: bad section header: {reason}")]
    BadSectionHeader {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}: section `{section}` appears twice")]
    DuplicateSection { path: PathBuf, section: String },
    #[error("{path}: section `{section}` is missing{hint}")]
    MissingSection {
        path: PathBuf,
        section: String,
        hint: String,
    },
    #[error("{path}: `~~~weights` must be the last section, but `{section}` follows it")]
    WeightsNotLast { path: PathBuf, section: String },
    #[error("{path}: truncated: the weights section declares {expected} bytes but only {actual} are present (re-download or re-import the model)")]
    Truncated {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("{path}: {extra} trailing bytes after the declared weights size {expected}")]
    TrailingBytes {
        path: PathBuf,
        expected: u64,
        extra: u64,
    },
    #[error("{path}: section `{section}` is damaged: its digest is {actual}, the file records {expected} (re-import the model, or re-download it)")]
    DigestMismatch {
        path: PathBuf,
        section: String,
        expected: String,
        actual: String,
    },
    #[error("{path}: section `{section}` size mismatch: [[files]] says {declared} bytes, the section has {actual}")]
    SectionSize {
        path: PathBuf,
        section: String,
        declared: u64,
        actual: u64,
    },
    #[error("{path}: section `{section}`, line {line}: invalid TOML: {message}")]
    Toml {
        path: PathBuf,
        section: String,
        line: usize,
        message: String,
    },
    #[error("{path}: config: invalid `{field}`: {reason}")]
    InvalidConfig {
        path: PathBuf,
        field: String,
        reason: String,
    },
    #[error(
        "{path}: tensor `{tensor}`: unknown encoding `{encoding}` (see quant.md for the list)"
    )]
    UnknownEncoding {
        path: PathBuf,
        tensor: String,
        encoding: String,
    },
    #[error("{path}: tensor `{tensor}`: {reason}")]
    InvalidTensor {
        path: PathBuf,
        tensor: String,
        reason: String,
    },
    #[error("{path}: tensor `{tensor}`: size {declared} does not match shape {shape:?} as {encoding} ({expected} bytes)")]
    WeightFormatMismatch {
        path: PathBuf,
        tensor: String,
        shape: Vec<usize>,
        encoding: DType,
        declared: u64,
        expected: u64,
    },
    #[error("{path}: tensor `{tensor}`: bytes {offset}..{end} lie outside the weights section ({weights_size} bytes)")]
    TensorOutOfBounds {
        path: PathBuf,
        tensor: String,
        offset: u64,
        end: u64,
        weights_size: u64,
    },
    #[error("{path}: tensors `{first}` and `{second}` overlap in the weights section")]
    TensorOverlap {
        path: PathBuf,
        first: String,
        second: String,
    },
    #[error("{path}: tensor `{name}` is missing (required by {required_by})")]
    MissingTensor {
        path: PathBuf,
        name: String,
        required_by: String,
    },
    #[error("{path}: tensor `{tensor}` has shape {got:?}, but the config implies {expected:?}")]
    ShapeMismatch {
        path: PathBuf,
        tensor: String,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    #[error("{path}: vocab: {reason}")]
    Vocab { path: PathBuf, reason: String },
    #[error("{path}: graph: {}{op}: {reason}", node.map(|n| format!("node {n} ")).unwrap_or_default())]
    Graph {
        path: PathBuf,
        node: Option<usize>,
        op: String,
        reason: String,
    },
    #[error("{path}: graph: node {node}: unsupported op `{op}` (not in this runtime's op table)")]
    UnsupportedOp {
        path: PathBuf,
        node: usize,
        op: String,
    },
}

/// Why an import (`cyb-llm import`) failed. No output file is left behind.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: cannot read or write: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error("{path}: unsupported: {reason}")]
    Unsupported { path: PathBuf, reason: String },
    #[error("{path}: missing `{key}`{hint}")]
    MissingKey {
        path: PathBuf,
        key: String,
        hint: String,
    },
    #[error(
        "{path}: not a .model file, nor a source cyb-llm imports: it looks like {looks}; \
         give a .model file, a GGUF file, a Hugging Face folder (config.json, *.safetensors, \
         tokenizer.json) or a CTranslate2 folder (config.json, model.bin)"
    )]
    NotASource { path: PathBuf, looks: String },
    /// An ONNX node the importer does not translate.
    #[error("{path}: node {index} `{node}` ({op}, opset {opset}): {reason}")]
    UnsupportedOp {
        path: PathBuf,
        /// Position of the node in the graph.
        index: usize,
        /// The node's name (its first output when unnamed).
        node: String,
        /// ONNX op type.
        op: String,
        /// The model's opset of the op's domain.
        opset: i64,
        /// What is not supported, and what would work.
        reason: String,
    },
    #[error("{path}: {field}: {reason}")]
    Diffusion {
        path: PathBuf,
        /// The `[diffusion]` key (or import flag) at fault.
        field: String,
        /// What is wrong and what would fix it.
        reason: String,
    },
    #[error("{path}: {field}: {reason}")]
    Voice {
        /// The voice's JSON config (`VOICE.onnx.json`).
        path: PathBuf,
        /// The JSON key at fault, or `(file)`.
        field: String,
        /// What is wrong and what would fix it.
        reason: String,
    },
    #[error("the written file does not load back: {0}")]
    Verify(#[from] LoadError),
}

/// The contract's runtime error (`../shared/seed/execution-contract.md`), plus `ContextOverflow`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecutionError {
    #[error("op {op} is not supported by backend {backend} for input dtype {input_dtype}")]
    UnsupportedOp {
        op: String,
        backend: String,
        input_dtype: DType,
    },
    #[error("op {op}: shape mismatch: expected {expected:?}, got {got:?}")]
    ShapeMismatch {
        op: String,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    #[error("tensor `{name}` is missing (required by {required_by})")]
    MissingTensor { name: String, required_by: String },
    #[error("tensor `{name}` declared {declared} has {actual_bytes} bytes")]
    WeightFormatMismatch {
        name: String,
        declared: DType,
        actual_bytes: usize,
    },
    #[error("backend {backend}: out of memory allocating {requested_bytes} bytes")]
    OutOfMemory {
        backend: String,
        requested_bytes: usize,
    },
    #[error("backend {backend} cannot start: {reason}")]
    BackendInit { backend: String, reason: String },
    #[error("invalid config `{field}`: {reason}")]
    InvalidConfig { field: String, reason: String },
    #[error("tokenizer: {reason}")]
    Tokenizer { reason: String },
    #[error("context overflow: {requested} tokens requested but the context holds {max} (raise -c/--ctx-size or shorten the prompt)")]
    ContextOverflow { max: usize, requested: usize },
    #[error("op {op}: index {index} is outside 0..{len}")]
    IndexOutOfRange { op: String, index: i64, len: usize },
}
