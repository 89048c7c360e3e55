//! Streaming decode: bytes of each token are buffered until they form whole
//! UTF-8 characters, so a character split across tokens is never printed broken.

use super::Tokenizer;

/// Decodes ids one at a time (see [`Tokenizer::stream`]).
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tok: &'a Tokenizer,
    skip_special: bool,
    /// Bytes not yet emitted (an incomplete character at the end).
    pending: Vec<u8>,
    /// Nothing has been emitted or buffered yet.
    at_start: bool,
}

impl<'a> StreamDecoder<'a> {
    pub(super) fn new(tok: &'a Tokenizer, skip_special: bool) -> Self {
        StreamDecoder {
            tok,
            skip_special,
            pending: Vec::new(),
            at_start: true,
        }
    }

    /// Adds token `id`; returns the text that is now complete (possibly empty).
    /// Bytes that can never become valid UTF-8 are emitted as U+FFFD.
    pub fn push(&mut self, id: u32) -> String {
        if self.skip_special && self.tok.is_special(id) {
            return String::new();
        }
        let mut bytes = self.tok.token_bytes(id);
        if self.at_start && !bytes.is_empty() {
            if self.tok.strips_first_space() && !self.tok.is_special(id) {
                bytes = bytes.strip_prefix(b" ").unwrap_or(bytes);
            }
            self.at_start = false;
        }
        self.pending.extend_from_slice(bytes);
        self.drain(false)
    }

    /// Ends the stream: returns what is left, with an incomplete character as U+FFFD.
    pub fn finish(mut self) -> String {
        self.drain(true)
    }

    fn drain(&mut self, end: bool) -> String {
        let mut out = String::new();
        let mut at = 0;
        loop {
            match std::str::from_utf8(&self.pending[at..]) {
                Ok(s) => {
                    out.push_str(s);
                    at = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The first `valid` bytes were just checked to be UTF-8.
                    out.push_str(
                        std::str::from_utf8(&self.pending[at..at + valid]).unwrap_or_default(),
                    );
                    at += valid;
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            at += bad;
                        }
                        None if end => {
                            out.push('\u{FFFD}');
                            at = self.pending.len();
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
        self.pending.drain(..at);
        out
    }
}
