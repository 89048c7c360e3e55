//! Reading the texts of `embed` / `classify`: one text per line from a file or
//! stdin (a final newline ends the last line; `\r\n` endings are accepted).

use std::io::BufRead;
use std::path::PathBuf;

/// Why the input texts could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file or stream could not be read.
    #[error("{source_name}: cannot read: {error}")]
    Io {
        /// The file path, or `stdin`.
        source_name: String,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// A line is not valid UTF-8.
    #[error("{source_name}: line {line}: invalid UTF-8 at byte {byte} of the line (texts must be UTF-8)")]
    InvalidUtf8 {
        /// The file path, or `stdin`.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// 0-based byte offset of the first invalid byte within the line.
        byte: usize,
    },
    /// There is no text at all.
    #[error("{source_name}: no input texts (the input is empty; give one text per line)")]
    Empty {
        /// The file path, `stdin`, or the command line.
        source_name: String,
    },
}

/// Where the texts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextSource {
    /// A file, one text per line.
    File(PathBuf),
    /// Standard input, one text per line.
    Stdin,
}

impl TextSource {
    /// The name used in errors (`stdin` or the path).
    pub fn name(&self) -> String {
        match self {
            TextSource::File(p) => p.display().to_string(),
            TextSource::Stdin => "stdin".into(),
        }
    }

    /// Every line of the source. An empty source is [`InputError::Empty`].
    pub fn read(&self) -> Result<Vec<String>, InputError> {
        let name = self.name();
        let lines = match self {
            TextSource::File(p) => {
                let f = std::fs::File::open(p).map_err(|error| InputError::Io {
                    source_name: name.clone(),
                    error,
                })?;
                read_lines(std::io::BufReader::new(f), &name)?
            }
            TextSource::Stdin => read_lines(std::io::stdin().lock(), &name)?,
        };
        if lines.is_empty() {
            return Err(InputError::Empty { source_name: name });
        }
        Ok(lines)
    }
}

/// Splits `reader` into lines (without `\n` / `\r\n`), checking each is UTF-8.
pub fn read_lines(mut reader: impl BufRead, source_name: &str) -> Result<Vec<String>, InputError> {
    let mut lines = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|error| InputError::Io {
                source_name: source_name.to_string(),
                error,
            })?;
        if n == 0 {
            return Ok(lines);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        }
        let text =
            String::from_utf8(std::mem::take(&mut buf)).map_err(|e| InputError::InvalidUtf8 {
                source_name: source_name.to_string(),
                line: lines.len() + 1,
                byte: e.utf8_error().valid_up_to(),
            })?;
        lines.push(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_crlf_and_final_newline() {
        let got = read_lines(&b"a\r\nb\n\nc"[..], "t").unwrap();
        assert_eq!(got, ["a", "b", "", "c"]);
        let got = read_lines(&b"one\n"[..], "t").unwrap();
        assert_eq!(got, ["one"]);
        assert!(read_lines(&b""[..], "t").unwrap().is_empty());
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let err = read_lines(&b"ok\nfine\nbad \xff here\n"[..], "in.txt").unwrap_err();
        match err {
            InputError::InvalidUtf8 { line, byte, .. } => assert_eq!((line, byte), (3, 4)),
            other => panic!("unexpected {other}"),
        }
    }
}
