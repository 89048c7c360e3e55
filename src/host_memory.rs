//! What the host's memory allows: read by the loader (whether a model is copied into huge
//! pages) and by the cpu backend (whether a weight is repacked).

/// `MemAvailable` of `/proc/meminfo` in bytes; `None` off Linux or where it cannot be read.
pub(crate) fn available_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
