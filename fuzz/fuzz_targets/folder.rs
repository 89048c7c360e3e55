//! Inputs of the folder-importer targets (hf_import, ct2_import): one input is
//! several files joined by [`SEPARATOR`].

use std::path::Path;

/// Separates the files of one input (in the targets' dictionaries too).
pub const SEPARATOR: &[u8] = b"\n##cyb-file##\n";

/// Writes the parts of `data` as the files `names` of a fresh folder `dir`: the
/// last name takes the rest of the input; names past the last part are absent.
pub fn write(dir: &Path, data: &[u8], names: &[&str]) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut rest = data;
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        let (part, next) = match memchr::memmem::find(rest, SEPARATOR) {
            Some(at) if !last => (&rest[..at], &rest[at + SEPARATOR.len()..]),
            _ => (rest, &rest[rest.len()..]),
        };
        std::fs::write(dir.join(name), part).unwrap();
        if next.is_empty() {
            break;
        }
        rest = next;
    }
}
