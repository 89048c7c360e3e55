//! Section digests of the `[[files]]` entries (format.md: `digest = "ALG:HEX"`).
//!
//! The algorithm is XXH3-128 (crate `xxhash-rust`): not cryptographic — the
//! file's SHA-256 identity is for that — but it detects any accidental change
//! of a section's bytes (flipped bits, edited or dropped lines, truncation) at
//! tens of GB/s, so text sections are verified at every load for well under a
//! millisecond and the weights of a multi-GB model in a fraction of a second.

use crate::error::LoadError;
use std::path::Path;
use xxhash_rust::xxh3::Xxh3;

/// The algorithm name written before the `:`.
pub const ALGORITHM: &str = "xxh3-128";

/// Length of every digest string this writer produces (`xxh3-128:` + 32 hex digits).
pub const LEN: usize = ALGORITHM.len() + 1 + 32;

/// The digest string of `bytes`.
pub fn of(bytes: &[u8]) -> String {
    let mut h = Digest::new();
    h.update(bytes);
    h.finish()
}

/// An incremental digest (the writer streams the weights through it).
pub struct Digest(Xxh3);

impl Digest {
    /// An empty digest.
    pub fn new() -> Digest {
        Digest(Xxh3::new())
    }

    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The `ALG:HEX` string of everything added.
    pub fn finish(&self) -> String {
        format!("{ALGORITHM}:{:032x}", self.0.digest128())
    }
}

impl Default for Digest {
    fn default() -> Self {
        Digest::new()
    }
}

/// Checks `bytes` of `section` against its declared digest: an unknown
/// algorithm or a mismatch is a `LoadError` naming the section.
pub fn verify(path: &Path, section: &str, declared: &str, bytes: &[u8]) -> Result<(), LoadError> {
    let alg = declared.split_once(':').map_or(declared, |(a, _)| a);
    if alg != ALGORITHM {
        return Err(LoadError::InvalidConfig {
            path: path.to_path_buf(),
            field: format!("files.{section}.digest"),
            reason: format!("unknown digest algorithm `{alg}` (this runtime knows {ALGORITHM})"),
        });
    }
    let actual = of(bytes);
    if actual != declared {
        return Err(LoadError::DigestMismatch {
            path: path.to_path_buf(),
            section: section.to_string(),
            expected: declared.to_string(),
            actual,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_have_a_fixed_length_and_detect_one_bit() {
        let a = of(b"vocab text");
        assert_eq!(a.len(), LEN);
        assert!(a.starts_with("xxh3-128:"));
        assert_ne!(a, of(b"vocab texu"));
        let mut d = Digest::new();
        d.update(b"vocab ");
        d.update(b"text");
        assert_eq!(d.finish(), a);
        let p = Path::new("m.model");
        assert!(verify(p, "vocab", &a, b"vocab text").is_ok());
        let e = verify(p, "vocab", &a, b"vocab texu")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("section `vocab`") && e.contains("re-import"),
            "{e}"
        );
        let e = verify(p, "vocab", "md5:00", b"x").unwrap_err().to_string();
        assert!(e.contains("unknown digest algorithm `md5`"), "{e}");
    }
}
