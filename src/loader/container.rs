//! The container layer of a `.model` file: frontmatter, section headers, the
//! `[[files]]` list and the weights boundary (format.md, "Layout").

use super::sniff::{self, Looks};
use crate::error::LoadError;
use serde::Deserialize;
use std::ops::Range;
use std::path::Path;

/// How far into the file the text part may reach.
pub const MAX_TEXT_BYTES: usize = 64 << 20;

const WEIGHTS_HEADER: &[u8] = b"~~~weights\n";

/// `[cyb]` of the frontmatter.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CybHeader {
    #[serde(default)]
    pub types: Vec<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub format_version: Option<i64>,
}

/// One `[[files]]` entry of the frontmatter.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FileEntry {
    pub name: String,
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
    /// `ALG:HEX` of the section's bytes (absent in files written before digests).
    #[serde(default)]
    pub digest: Option<String>,
}

#[derive(Deserialize)]
struct Frontmatter {
    cyb: CybHeader,
    #[serde(default)]
    files: Vec<FileEntry>,
}

/// A text section: its name, the line of its header (1-based) and its body's byte range.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub name: String,
    pub header_line: usize,
    pub body: Range<usize>,
}

/// The validated container: text sections and where the weights start.
#[derive(Debug)]
pub struct Container {
    pub header: CybHeader,
    pub files: Vec<FileEntry>,
    pub sections: Vec<Section>,
    /// Byte offset of the first weights byte.
    pub weights_start: usize,
    /// Declared (and checked) weights size.
    pub weights_size: u64,
}

/// Line number (1-based) of byte `offset` in `text`.
pub fn line_of(text: &[u8], offset: usize) -> usize {
    1 + text[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Why a file without the `[cyb]` frontmatter is not a `.model` file, and what to do.
fn not_a_model_reason(path: &Path, head: &[u8]) -> String {
    let head = &head[..head.len().min(sniff::HEAD_BYTES)];
    match sniff::looks_like(path, head) {
        Looks::Gguf => "it looks like a GGUF file; convert it with `cyb-llm import FILE.gguf`, \
                        or pass it to run / chat / bench directly (imported once into the cache)"
            .into(),
        Looks::Onnx => "it looks like an ONNX model; convert it with `cyb-llm import FILE.onnx`, \
                        then run it with `cyb-llm eval`"
            .into(),
        Looks::Other(what) => format!("it looks like {what}, with no `[cyb]` frontmatter"),
        Looks::Model => "it does not start with a `[cyb]` frontmatter".into(),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// Parses and checks the container rules of format.md on the whole file's bytes.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Container, LoadError> {
    let p = || path.to_path_buf();
    let window = &bytes[..bytes.len().min(MAX_TEXT_BYTES)];
    let weights_header = if window.starts_with(WEIGHTS_HEADER) {
        Some(0)
    } else {
        find(window, b"\n~~~weights\n").map(|i| i + 1)
    };
    let Some(header_at) = weights_header else {
        if !sniff::is_model_start(window) {
            return Err(LoadError::NotAModel {
                path: p(),
                reason: not_a_model_reason(path, window),
            });
        }
        if let Some(i) = find(window, b"\r\n") {
            return Err(LoadError::CrLf {
                path: p(),
                line: line_of(window, i),
            });
        }
        return Err(LoadError::MissingSection {
            path: p(),
            section: "weights".into(),
            hint: " (no `~~~weights` line in the first 64 MiB; the file may be truncated)".into(),
        });
    };
    let text_bytes = &bytes[..header_at];
    let weights_start = header_at + WEIGHTS_HEADER.len();
    let text = std::str::from_utf8(text_bytes).map_err(|e| LoadError::InvalidUtf8 {
        path: p(),
        offset: e.valid_up_to(),
    })?;
    if let Some(i) = text.find("\r\n") {
        return Err(LoadError::CrLf {
            path: p(),
            line: line_of(text_bytes, i),
        });
    }

    let mut sections: Vec<Section> = Vec::new();
    let mut frontmatter_end = text.len();
    let mut offset = 0usize;
    let mut line_no = 0usize;
    for line in text.split_inclusive('\n') {
        line_no += 1;
        let start = offset;
        offset += line.len();
        if !line.starts_with("~~~") {
            continue;
        }
        let name = line.trim_end_matches('\n').trim_start_matches("~~~");
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(LoadError::BadSectionHeader {
                path: p(),
                line: line_no,
                reason: format!(
                    "`{}`: a header is `~~~` + a name in [a-z0-9_]+, and no body line may start with `~~~`",
                    line.trim_end()
                ),
            });
        }
        if let Some(last) = sections.last_mut() {
            last.body.end = start;
        } else {
            frontmatter_end = start;
        }
        if sections.iter().any(|s| s.name == name) || name == "weights" {
            return Err(LoadError::DuplicateSection {
                path: p(),
                section: name.to_string(),
            });
        }
        sections.push(Section {
            name: name.to_string(),
            header_line: line_no,
            body: offset..text.len(),
        });
    }
    sections.push(Section {
        name: "weights".into(),
        header_line: line_no + 1,
        body: weights_start..bytes.len(),
    });

    let front: Frontmatter = toml::from_str(&text[..frontmatter_end]).map_err(|e| {
        let line = e.span().map(|s| line_of(text_bytes, s.start)).unwrap_or(1);
        LoadError::Toml {
            path: p(),
            section: "frontmatter".into(),
            line,
            message: e.message().to_string(),
        }
    })?;

    check_files(path, &front.files, &sections, text.len())?;
    verify_text_digests(path, &front.files, &sections, bytes)?;
    let weights_entry = front.files.iter().find(|f| f.name == "weights");
    let declared = weights_entry
        .and_then(|f| f.size)
        .ok_or_else(|| LoadError::InvalidConfig {
            path: p(),
            field: "files.weights.size".into(),
            reason: "the `[[files]]` entry of `weights` must give `size`".into(),
        })?;
    let actual = (bytes.len() - weights_start) as u64;
    if actual < declared {
        return Err(LoadError::Truncated {
            path: p(),
            expected: declared,
            actual,
        });
    }
    if actual > declared {
        return Err(LoadError::TrailingBytes {
            path: p(),
            expected: declared,
            extra: actual - declared,
        });
    }
    Ok(Container {
        header: front.cyb,
        files: front.files,
        sections,
        weights_start,
        weights_size: declared,
    })
}

/// Verifies the digest of every text section that has one; warns once when
/// any entry has none (a file written before digests).
fn verify_text_digests(
    path: &Path,
    files: &[FileEntry],
    sections: &[Section],
    bytes: &[u8],
) -> Result<(), LoadError> {
    for s in sections.iter().filter(|s| s.name != "weights") {
        if let Some(d) = files
            .iter()
            .find(|f| f.name == s.name)
            .and_then(|f| f.digest.as_deref())
        {
            super::digest::verify(path, &s.name, d, &bytes[s.body.clone()])?;
        }
    }
    if files.iter().any(|f| f.digest.is_none()) {
        tracing::warn!(
            "{}: written without section digests, so damage to it may go unnoticed (re-import the model to add them)",
            path.display()
        );
    }
    Ok(())
}

fn check_files(
    path: &Path,
    files: &[FileEntry],
    sections: &[Section],
    text_len: usize,
) -> Result<(), LoadError> {
    let p = || path.to_path_buf();
    for (i, f) in files.iter().enumerate() {
        if files[..i].iter().any(|g| g.name == f.name) {
            return Err(LoadError::DuplicateSection {
                path: p(),
                section: f.name.clone(),
            });
        }
        let Some(section) = sections.iter().find(|s| s.name == f.name) else {
            let weights_pos = files.iter().position(|g| g.name == "weights");
            if weights_pos.is_some_and(|w| w < i) {
                return Err(LoadError::WeightsNotLast {
                    path: p(),
                    section: f.name.clone(),
                });
            }
            return Err(LoadError::MissingSection {
                path: p(),
                section: f.name.clone(),
                hint: " ([[files]] lists it but the file has no such `~~~` header)".into(),
            });
        };
        if let (Some(size), true) = (f.size, section.name != "weights") {
            let actual = (section.body.end.min(text_len) - section.body.start) as u64;
            if size != actual {
                return Err(LoadError::SectionSize {
                    path: p(),
                    section: f.name.clone(),
                    declared: size,
                    actual,
                });
            }
        }
    }
    for s in sections {
        if !files.iter().any(|f| f.name == s.name) {
            return Err(LoadError::MissingSection {
                path: p(),
                section: format!("[[files]] entry for `{}`", s.name),
                hint: " (every section needs a `[[files]]` entry in the frontmatter)".into(),
            });
        }
    }
    Ok(())
}
