//! `cyb-llm backends`: which backends can start here, and for wgpu the
//! adapter, driver, limits and features.

use super::CmdResult;
use cyb_llm::backend::wgpu::WgpuBackend;
use cyb_llm::backend::{BackendConfig, BACKENDS};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct BackendsArgs {}

pub fn run(_a: BackendsArgs) -> CmdResult {
    let config = BackendConfig::default();
    for e in BACKENDS {
        let names = std::iter::once(e.name)
            .chain(e.aliases.iter().copied())
            .collect::<Vec<_>>()
            .join(", ");
        if e.name == "wgpu" {
            match WgpuBackend::new() {
                Ok(b) => {
                    let r = b.report();
                    println!("{names}: available");
                    println!("  adapter: {} ({}, {})", r.name, r.device_type, r.api);
                    println!("  driver: {}", r.driver);
                    for (k, v) in &r.limits {
                        println!("  limit {k}: {v}");
                    }
                    for (f, present, used) in &r.features {
                        let state = match (present, used) {
                            (true, true) => "present, used",
                            (true, false) => "present, not used by the kernels yet",
                            _ => "absent",
                        };
                        println!("  feature {f}: {state}");
                    }
                }
                Err(err) => println!("{names}: unavailable: {err}"),
            }
            continue;
        }
        match (e.init)(&config) {
            Ok(_) => println!("{names}: available"),
            Err(err) => println!("{names}: unavailable: {err}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
