//! File helpers shared by the end-to-end tests.

use std::path::Path;

/// Copies the files of folder `from` (not its subfolders) into `to`, created if missing.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}
