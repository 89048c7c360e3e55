//! Writing `.model` files: sections in canonical order, the tensor index, and
//! weights aligned to 64 bytes (format.md). Output goes to a temporary file in
//! the target folder, is loaded back and validated, and only then renamed into
//! place, so a failed write leaves no output file.

use super::config::Config;
use super::digest::{self, Digest};
use super::toml_text::push_basic_string;
use crate::dtype::DType;
use crate::error::ImportError;
use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

/// Alignment of the weights start and of every tensor offset.
pub const ALIGN: usize = 64;

const SECTION_ORDER: [&str; 7] = [
    "card", "config", "tensors", "vocab", "chat", "graph", "eval",
];

/// One tensor to be written.
#[derive(Debug, Clone)]
pub struct PendingTensor<'a> {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Per-tensor scale (`ternary` only).
    pub scale: Option<f32>,
    pub data: Cow<'a, [u8]>,
}

/// Builds a `.model` file. Tensor data may borrow from a source mapping.
#[derive(Debug, Default)]
pub struct ModelWriter<'a> {
    name: String,
    sections: Vec<(String, String)>,
    tensors: Vec<PendingTensor<'a>>,
}

fn format_error(out: &Path, reason: String) -> ImportError {
    ImportError::Format {
        path: out.to_path_buf(),
        reason,
    }
}

impl<'a> ModelWriter<'a> {
    /// A writer for a model named `name` (the `[cyb] name`).
    pub fn new(name: impl Into<String>) -> Self {
        ModelWriter {
            name: name.into(),
            ..Default::default()
        }
    }

    /// Sets (or replaces) text section `name` (not `tensors` or `weights`, which are generated).
    pub fn set_section(&mut self, name: &str, body: impl Into<String>) {
        let mut body = body.into();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        match self.sections.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = body,
            None => self.sections.push((name.to_string(), body)),
        }
    }

    /// Serializes `config` as the `config` section.
    pub fn set_config(&mut self, config: &Config) -> Result<(), ImportError> {
        let body = toml::to_string(config).map_err(|e| {
            format_error(Path::new("config"), format!("cannot serialize config: {e}"))
        })?;
        self.set_section("config", body);
        Ok(())
    }

    /// Names of the tensors added so far, in order.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.tensors.iter().map(|t| t.name.as_str())
    }

    /// Adds a tensor; its byte length must match `shape` and `dtype`.
    pub fn add_tensor(&mut self, tensor: PendingTensor<'a>) -> Result<(), ImportError> {
        let expected = tensor.dtype.byte_size(&tensor.shape);
        if expected != Some(tensor.data.len() as u64) {
            return Err(format_error(
                Path::new(&tensor.name),
                format!(
                    "tensor `{}`: {} bytes do not match shape {:?} as {} ({expected:?})",
                    tensor.name,
                    tensor.data.len(),
                    tensor.shape,
                    tensor.dtype
                ),
            ));
        }
        if self.tensors.iter().any(|t| t.name == tensor.name) {
            return Err(format_error(
                Path::new(&tensor.name),
                format!("tensor `{}` added twice", tensor.name),
            ));
        }
        self.tensors.push(tensor);
        Ok(())
    }

    fn tensor_index(&self) -> (String, Vec<u64>, u64) {
        let mut text = String::new();
        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut at = 0u64;
        for t in &self.tensors {
            at = at.next_multiple_of(ALIGN as u64);
            offsets.push(at);
            text.push('[');
            push_basic_string(&mut text, &t.name);
            text.push_str("]\n");
            let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
            text.push_str(&format!(
                "shape = [{}]\nencoding = \"{}\"\noffset = {at}\nsize = {}\n",
                dims.join(", "),
                t.dtype.name(),
                t.data.len()
            ));
            if let Some(s) = t.scale {
                text.push_str(&format!("scale = {s:?}\n"));
            }
            text.push('\n');
            at += t.data.len() as u64;
        }
        (text, offsets, at)
    }

    /// The weights section's bytes in order: each tensor after the zeros that align it.
    fn weight_pieces<'s>(&'s self, offsets: &'s [u64]) -> impl Iterator<Item = &'s [u8]> + 's {
        const ZEROS: [u8; ALIGN] = [0; ALIGN];
        let mut at = 0u64;
        self.tensors.iter().zip(offsets).flat_map(move |(t, &off)| {
            let gap = (off - at) as usize;
            at = off + t.data.len() as u64;
            [&ZEROS[..gap], &t.data[..]]
        })
    }

    /// The `[cyb]` frontmatter and one `[[files]]` entry per section, with `digests`
    /// of the text sections in order and the weights' size and digest.
    fn frontmatter(&self, digests: &[String], weights_size: u64, weights_digest: &str) -> String {
        let mut text = String::from("[cyb]\ntypes = [\"model\"]\nname = ");
        push_basic_string(&mut text, &self.name);
        text.push_str("\nformat_version = 2\n");
        for ((name, _), digest) in self.sections.iter().zip(digests) {
            let format = if name == "card" { "markdown" } else { "toml" };
            text.push_str(&format!(
                "\n[[files]]\nname = \"{name}\"\nformat = \"{format}\"\ndigest = \"{digest}\"\n"
            ));
        }
        text.push_str(&format!(
            "\n[[files]]\nname = \"weights\"\nformat = \"tensors\"\nsize = {weights_size}\ndigest = \"{weights_digest}\"\n"
        ));
        text
    }

    /// Writes the file to `out` atomically (temp file, validate by loading, rename).
    pub fn write(mut self, out: &Path) -> Result<(), ImportError> {
        let io = |source| ImportError::Io {
            path: out.to_path_buf(),
            source,
        };
        let (index, offsets, weights_size) = self.tensor_index();
        self.set_section("tensors", index);
        self.sections.sort_by_key(|(name, _)| {
            SECTION_ORDER
                .iter()
                .position(|s| s == name)
                .unwrap_or(SECTION_ORDER.len())
        });
        for (name, body) in &self.sections {
            if body.lines().any(|l| l.starts_with("~~~")) {
                return Err(format_error(
                    out,
                    format!("section `{name}` has a line starting with `~~~`"),
                ));
            }
        }
        let weights_digest = {
            let mut d = Digest::new();
            self.weight_pieces(&offsets).for_each(|b| d.update(b));
            d.finish()
        };
        let header = "~~~weights\n";
        // Digests have a fixed length, so the padding before `~~~weights` (part
        // of the last text section's bytes) is known before that section's digest.
        let bodies_len: usize = self
            .sections
            .iter()
            .map(|(n, b)| 4 + n.len() + b.len())
            .sum();
        let placeholders = vec!["0".repeat(digest::LEN); self.sections.len()];
        let front_len = self
            .frontmatter(&placeholders, weights_size, &weights_digest)
            .len();
        let pad = (ALIGN - (front_len + bodies_len + header.len()) % ALIGN) % ALIGN;
        let last = self.sections.len().saturating_sub(1);
        let digests: Vec<String> = self
            .sections
            .iter()
            .enumerate()
            .map(|(i, (_, body))| {
                let mut d = Digest::new();
                d.update(body.as_bytes());
                if i == last {
                    d.update(&b"\n".repeat(pad));
                }
                d.finish()
            })
            .collect();
        let mut text = self.frontmatter(&digests, weights_size, &weights_digest);
        for (name, body) in &self.sections {
            text.push_str("~~~");
            text.push_str(name);
            text.push('\n');
            text.push_str(body);
        }
        text.extend(std::iter::repeat_n('\n', pad));
        text.push_str(header);

        let dir = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(dir)
            .map_err(io)?;
        {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file());
            w.write_all(text.as_bytes()).map_err(io)?;
            for piece in self.weight_pieces(&offsets) {
                w.write_all(piece).map_err(io)?;
            }
            w.flush().map_err(io)?;
        }
        super::load(tmp.path())?;
        set_readable(tmp.as_file()).map_err(io)?;
        // On disk before the rename, so that a crash never leaves a short file under `out`.
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(out).map_err(|e| io(e.error))?;
        Ok(())
    }
}

/// Name prefix of the temporary file a write goes through before its rename.
pub const TEMP_PREFIX: &str = ".cyb-import-";

/// Temporary files are created owner-only; a model file is readable by everyone (0644).
#[cfg(unix)]
fn set_readable(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
}

/// Temporary files keep the platform's default permissions elsewhere.
#[cfg(not(unix))]
fn set_readable(_file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}
