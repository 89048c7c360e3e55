//! Keeps the adapter probe of `--backend auto` quiet: Vulkan drivers write to
//! the process's stderr themselves (Mesa: `error: XDG_RUNTIME_DIR is invalid or
//! not set in the environment.` where that variable is unset), which reads
//! like a failure of the command. [`capture_stderr`] sends file descriptor 2 to
//! an anonymous temporary file while the probe runs and hands back what was
//! written, for one `tracing` debug line.
//!
//! While the capture runs, every thread's writes to fd 2 land in the file; the
//! probe runs before any model work starts, so only the driver writes then.
//! The binary's log lines go to a duplicate of stderr taken at start-up
//! (`src/main.rs`), so `CYB_LOG=debug` output of the probe stays as it is.

/// Runs `f` with stderr (fd 2) captured; returns its result and what was
/// written meanwhile (lossy UTF-8). When the capture cannot be set up, `f`
/// runs with stderr as it is and the text is empty.
#[cfg(unix)]
pub fn capture_stderr<R>(f: impl FnOnce() -> R) -> (R, String) {
    use std::io::{Read, Seek, Write};
    use std::os::fd::{AsFd, AsRawFd, OwnedFd};

    /// Puts the saved stderr back on fd 2 when dropped (also on a panic in `f`).
    struct Restore(OwnedFd);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: dup2 onto fd 2 from a descriptor this guard owns; no Rust
            // object owns fd 2, std's `Stderr` writes to it by number.
            unsafe { libc::dup2(self.0.as_raw_fd(), 2) };
        }
    }

    let Ok(mut file) = tempfile::tempfile() else {
        return (f(), String::new());
    };
    let _ = std::io::stderr().flush();
    let Ok(saved) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return (f(), String::new());
    };
    // SAFETY: as above; `file` outlives the capture.
    if unsafe { libc::dup2(file.as_raw_fd(), 2) } < 0 {
        return (f(), String::new());
    }
    let guard = Restore(saved);
    let out = f();
    drop(guard);
    let mut bytes = Vec::new();
    if file.rewind().is_ok() {
        let _ = file.read_to_end(&mut bytes);
    }
    (out, String::from_utf8_lossy(&bytes).into_owned())
}

/// Without file descriptors to redirect, `f` runs with stderr as it is.
#[cfg(not(unix))]
pub fn capture_stderr<R>(f: impl FnOnce() -> R) -> (R, String) {
    (f(), String::new())
}

/// The captured text as one line: its non-empty lines joined by ` | `.
pub fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    /// Device and inode of what fd 2 refers to.
    fn stderr_identity() -> (u64, u64) {
        let fd = std::io::stderr().as_fd().try_clone_to_owned().unwrap();
        let m = std::fs::File::from(fd).metadata().unwrap();
        (m.dev(), m.ino())
    }

    #[test]
    fn writes_to_fd_2_are_captured_and_stderr_comes_back() {
        let before = stderr_identity();
        let (v, text) = capture_stderr(|| {
            assert_ne!(stderr_identity(), before);
            // Writes by fd number, as a C driver does.
            let msg = b"error: from the driver\n";
            // SAFETY: writing a valid buffer to fd 2.
            unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
            7
        });
        assert_eq!(v, 7);
        assert_eq!(text, "error: from the driver\n");
        assert_eq!(stderr_identity(), before);
        assert_eq!(one_line("a\n\n b \n"), "a | b");
    }
}
