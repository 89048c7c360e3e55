//! What a file looks like from its first bytes: a `.model` file (format.md,
//! "Layout"), a GGUF file, or something else named for an error message
//! ("a ZIP archive", "text"), so that a wrong file gets the right advice.

use std::io::Read;
use std::path::Path;

/// Bytes read from the start of a file to judge it.
pub const HEAD_BYTES: usize = 4096;

/// What the start of a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Looks {
    /// The `[cyb]` frontmatter of a `.model` file (after optional `#` comment lines).
    Model,
    /// The `GGUF` magic.
    Gguf,
    /// A file named `*.onnx` (an ONNX protobuf model).
    Onnx,
    /// Anything else, described in a few words ("a ZIP archive", "text").
    Other(&'static str),
}

/// Reads up to [`HEAD_BYTES`] from the start of the file at `path`.
pub fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(HEAD_BYTES);
    std::fs::File::open(path)?
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// True when `head` starts like a `.model` file: its first line that is
/// neither empty nor a `#` comment is `[cyb]` (a CR before the LF still counts,
/// so that a CRLF `.model` file gets the CRLF error, not "not a model").
pub fn is_model_start(head: &[u8]) -> bool {
    if head.starts_with(b"~~~weights\n") {
        return true;
    }
    for line in head.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        return line == b"[cyb]";
    }
    false
}

/// Magic numbers of formats people hand over by mistake, and their names.
const MAGICS: &[(usize, &[u8], &str)] = &[
    (
        0,
        b"PK\x03\x04",
        "a ZIP archive (a wheel or a PyTorch checkpoint?)",
    ),
    (0, b"\x1f\x8b", "a gzip archive"),
    (0, b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (0, b"\xfd7zXZ\x00", "an xz archive"),
    (257, b"ustar", "a tar archive"),
    (0, b"\x7fELF", "an executable (ELF)"),
    (
        0,
        b"lmgg",
        "a ggml file (whisper.cpp .bin), which cyb-llm does not import yet",
    ),
    (0, b"RIFF", "a RIFF file (WAV audio?)"),
    (0, b"fLaC", "FLAC audio"),
    (0, b"OggS", "an Ogg file (audio?)"),
    (0, b"ID3", "MP3 audio"),
    (0, b"\x93NUMPY", "a NumPy .npy array"),
];

/// Judges the start of a file; `path` only lends its extension to formats
/// without a magic number (ONNX).
pub fn looks_like(path: &Path, head: &[u8]) -> Looks {
    if head.starts_with(b"GGUF") {
        return Looks::Gguf;
    }
    if is_model_start(head) {
        return Looks::Model;
    }
    if head.is_empty() {
        return Looks::Other("an empty file");
    }
    for &(at, magic, what) in MAGICS {
        if head.len() >= at + magic.len() && &head[at..at + magic.len()] == magic {
            return Looks::Other(what);
        }
    }
    if is_safetensors(head) {
        return Looks::Other(
            "a safetensors file (import the Hugging Face folder that holds it, \
             with its config.json and tokenizer.json)",
        );
    }
    if head[0] == 0x80 && head.len() > 1 && (2..=5).contains(&head[1]) {
        return Looks::Other("a Python pickle (a PyTorch checkpoint?)");
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ext.eq_ignore_ascii_case("onnx") {
        return Looks::Onnx;
    }
    if is_text(head) {
        let first = head.iter().find(|b| !b.is_ascii_whitespace());
        return Looks::Other(match first {
            Some(b'{') | Some(b'[') => "JSON text",
            _ => "text",
        });
    }
    Looks::Other("binary data of no format cyb-llm knows")
}

/// A safetensors file: a little-endian u64 header length, then a JSON object.
fn is_safetensors(head: &[u8]) -> bool {
    if head.len() < 9 {
        return false;
    }
    let n = u64::from_le_bytes(head[..8].try_into().unwrap_or([0; 8]));
    n > 1 && n < (100 << 20) && head[8] == b'{'
}

/// Valid UTF-8 without NUL bytes (a character cut by the end of `head` is allowed).
fn is_text(head: &[u8]) -> bool {
    if head.contains(&0) {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && head.len() == HEAD_BYTES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn looks(head: &[u8]) -> Looks {
        looks_like(Path::new("x"), head)
    }

    #[test]
    fn models_and_ggufs() {
        assert_eq!(looks(b"[cyb]\ntypes = []\n"), Looks::Model);
        assert_eq!(looks(b"# comment\n\n[cyb]\r\n"), Looks::Model);
        assert_eq!(looks(b"GGUF\x03\x00\x00\x00"), Looks::Gguf);
        assert_eq!(looks(b"# a markdown title\n\ntext\n"), Looks::Other("text"));
    }

    #[test]
    fn other_formats_are_named() {
        assert_eq!(looks(b"PK\x03\x04rest"), Looks::Other(MAGICS[0].2));
        assert_eq!(looks(b""), Looks::Other("an empty file"));
        assert_eq!(looks(b"{\"a\": 1}"), Looks::Other("JSON text"));
        assert_eq!(looks(b"hello\n"), Looks::Other("text"));
        let mut st = 20u64.to_le_bytes().to_vec();
        st.extend_from_slice(b"{\"__metadata__\":{}}");
        assert!(matches!(looks(&st), Looks::Other(s) if s.starts_with("a safetensors")));
        assert!(matches!(looks(&[0, 1, 2, 0xff]), Looks::Other(s) if s.starts_with("binary")));
        assert_eq!(looks_like(Path::new("m.onnx"), &[8, 7, 0x12]), Looks::Onnx);
    }
}
