//! The `cyb-llm` command line (`../shared/spec/cli.md`).

mod cli;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;

/// Where log lines go: a duplicate of stderr taken at start-up, so that they
/// stay visible while the quiet wgpu probe of `--backend auto` captures fd 2
/// (`src/backend/wgpu/quiet.rs`).
fn log_sink() -> Mutex<Box<dyn Write + Send>> {
    #[cfg(unix)]
    if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
        return Mutex::new(Box::new(std::fs::File::from(fd)));
    }
    Mutex::new(Box::new(std::io::stderr()))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CYB_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(log_sink())
        .without_time()
        .with_target(false)
        .init();
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                eprintln!("caused by: {s}");
                source = s.source();
            }
            ExitCode::from(1)
        }
    }
}
