//! A scratch folder per test binary, under Cargo's `CARGO_TARGET_TMPDIR`
//! (`target/tmp/<test binary>/`). Models imported once per binary are written
//! there under fixed names, so each run replaces the last run's files instead
//! of leaving a new temporary directory behind (a `TempDir` held by a
//! `static` is never dropped, so never removed).

use std::path::PathBuf;

/// This test binary's scratch folder (created if missing).
pub fn scratch_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(env!("CARGO_CRATE_NAME"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
