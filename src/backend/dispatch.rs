//! Which backend runs an op (`../shared/spec/backends.md`): the registration
//! table, the fallback chain, the `--backend` override, and the dispatch log.

use super::{cpu, honeycrisp, nox, wgpu, Backend, ExecContext, Op, Storage, Tensor, TensorInfo};
use crate::dtype::DType;
use crate::error::ExecutionError;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Settings every backend constructor receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendConfig {
    /// Worker threads (`-t/--threads`).
    pub threads: usize,
}

impl Default for BackendConfig {
    /// Physical cores.
    fn default() -> Self {
        BackendConfig {
            threads: physical_cores(),
        }
    }
}

/// Number of physical CPU cores (Linux sysfs topology; elsewhere the logical count).
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cores = std::collections::BTreeSet::new();
    for cpu in 0..logical {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let read = |f: &str| std::fs::read_to_string(format!("{base}/{f}")).ok();
        match (read("physical_package_id"), read("core_id")) {
            (Some(p), Some(c)) => {
                cores.insert((p.trim().to_string(), c.trim().to_string()));
            }
            _ => return logical,
        }
    }
    cores.len().clamp(1, logical)
}

/// One row of the registration table: adding a backend is one such line.
pub struct BackendEntry {
    /// Name used by `--backend` and in dispatch records.
    pub name: &'static str,
    /// Other accepted `--backend` spellings.
    pub aliases: &'static [&'static str],
    /// Tried in this order when the backend rejects an op (`cpu` ends most chains).
    pub fallback: &'static [&'static str],
    /// Whether `--backend auto` tries it (in table order).
    pub auto: bool,
    /// What the backend guarantees or prefers (asked instead of its name).
    pub capabilities: Capabilities,
    /// Starts the backend, or says why it cannot (`BackendInit`).
    pub init: fn(&BackendConfig) -> Result<Arc<dyn Backend>, ExecutionError>,
}

/// What a backend guarantees or prefers. Code outside `src/backend` decides by
/// these, never by a backend's name; each backend declares them once, in its
/// [`BACKENDS`] row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Every result is bit-identical across runs, thread counts and machines;
    /// constants the caller precomputes for it (RoPE tables) must come from the
    /// backend's own portable math (`nox::math`).
    pub deterministic: bool,
    /// Runs graph sections only: no curated family forward, no fallback chain.
    pub graph_only: bool,
    /// Its matmul is fastest on f32 weights for inputs of many rows, so a family
    /// decodes such matrices to f32 once at load (the Whisper encoder).
    pub widened_f32_weights: bool,
    /// Prepares each weight and kernel at its first use (a device upload,
    /// pipeline creation), so a loader runs one short forward at load (as
    /// llama.cpp's warm-up does) to keep that cost out of the first request.
    pub warm_up_at_load: bool,
}

impl Capabilities {
    /// No guarantee beyond the [`Backend`] contract.
    pub const NONE: Capabilities = Capabilities {
        deterministic: false,
        graph_only: false,
        widened_f32_weights: false,
        warm_up_at_load: false,
    };

    /// The capabilities of the registered backend `name` (or alias); an unknown
    /// name has none.
    pub fn of(name: &str) -> Capabilities {
        entry(name).map(|e| e.capabilities).unwrap_or_default()
    }
}

/// Every backend, in `auto` preference order.
pub const BACKENDS: &[BackendEntry] = &[
    BackendEntry {
        name: "honeycrisp",
        aliases: &[],
        fallback: &["wgpu", "cpu"],
        auto: true,
        capabilities: Capabilities::NONE,
        init: honeycrisp::init,
    },
    BackendEntry {
        name: "wgpu",
        aliases: &["wgpu+rs"],
        fallback: &["cpu"],
        auto: true,
        capabilities: Capabilities {
            warm_up_at_load: true,
            ..Capabilities::NONE
        },
        init: wgpu::init,
    },
    BackendEntry {
        name: "cpu",
        aliases: &[],
        fallback: &[],
        auto: true,
        capabilities: Capabilities {
            widened_f32_weights: true,
            ..Capabilities::NONE
        },
        init: cpu::init,
    },
    BackendEntry {
        name: "nox",
        aliases: &[],
        fallback: &[],
        auto: false,
        capabilities: Capabilities {
            deterministic: true,
            graph_only: true,
            ..Capabilities::NONE
        },
        init: nox::init,
    },
    BackendEntry {
        name: "reference",
        aliases: &["cpu-ref"],
        fallback: &[],
        auto: false,
        capabilities: Capabilities::NONE,
        init: cpu::reference::init,
    },
];

/// The `--backend` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendChoice {
    /// Platform default, then its fallbacks, then cpu.
    Auto,
    /// One named backend (and its fallback chain).
    Named(String),
}

impl BackendChoice {
    /// The capabilities of the named backend; `auto` promises none.
    pub fn capabilities(&self) -> Capabilities {
        match self {
            BackendChoice::Auto => Capabilities::NONE,
            BackendChoice::Named(n) => Capabilities::of(n),
        }
    }

    /// Parses `auto` or a registered name or alias.
    pub fn parse(s: &str) -> Result<BackendChoice, ExecutionError> {
        if s == "auto" {
            return Ok(BackendChoice::Auto);
        }
        entry(s)
            .map(|e| BackendChoice::Named(e.name.to_string()))
            .ok_or_else(|| ExecutionError::BackendInit {
                backend: s.to_string(),
                reason: format!(
                    "unknown backend; choose auto, {}",
                    BACKENDS
                        .iter()
                        .flat_map(|e| std::iter::once(e.name).chain(e.aliases.iter().copied()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

fn entry(name: &str) -> Option<&'static BackendEntry> {
    BACKENDS
        .iter()
        .find(|e| e.name == name || e.aliases.contains(&name))
}

/// One dispatch decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchRecord {
    /// Model part (from [`ExecContext::set_label`]); may be empty.
    pub label: String,
    /// Op name.
    pub op: &'static str,
    /// Backend that ran it.
    pub backend: String,
    /// Why earlier backends of the chain were skipped; `None` when the first one ran it.
    pub fallback: Option<String>,
}

impl fmt::Display for DispatchRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.label.is_empty() {
            write!(f, "{} ", self.label)?;
        }
        write!(f, "{}: {}", self.op, self.backend)?;
        if let Some(reason) = &self.fallback {
            write!(f, " (fallback: {reason})")?;
        }
        Ok(())
    }
}

/// Dispatch decisions and op counts.
///
/// Counts per backend and every distinct fallback (with how often it
/// happened) are always kept; the full per-op list of the current forward is
/// kept when [`DispatchLog::keep_records`] is on (`--dispatch`).
#[derive(Debug, Default, Clone)]
pub struct DispatchLog {
    keep: bool,
    records: Vec<DispatchRecord>,
    counts: BTreeMap<String, usize>,
    fallbacks: BTreeMap<String, usize>,
}

impl DispatchLog {
    /// Turns the per-op list on or off.
    pub fn keep_records(&mut self, on: bool) {
        self.keep = on;
    }

    /// Starts a new forward's per-op list (counts keep accumulating).
    pub fn begin_forward(&mut self) {
        self.records.clear();
    }

    /// Records one decision.
    pub fn record(&mut self, record: DispatchRecord) {
        *self.counts.entry(record.backend.clone()).or_default() += 1;
        if record.fallback.is_some() {
            tracing::debug!("dispatch: {record}");
            let key = DispatchRecord {
                label: String::new(),
                ..record.clone()
            };
            let seen = self.fallbacks.entry(key.to_string()).or_default();
            if *seen == 0 {
                tracing::info!("dispatch fallback: {key}");
            }
            *seen += 1;
        } else {
            tracing::trace!("dispatch: {record}");
        }
        if self.keep {
            self.records.push(record);
        }
    }

    /// This forward's decisions, in order (when kept).
    pub fn records(&self) -> &[DispatchRecord] {
        &self.records
    }

    /// Ops run per backend since the context was made.
    pub fn counts(&self) -> &BTreeMap<String, usize> {
        &self.counts
    }

    /// Every distinct fallback decision and how many times it happened.
    pub fn fallbacks(&self) -> &BTreeMap<String, usize> {
        &self.fallbacks
    }

    /// One line for the run summary, e.g. `ops: cpu 1210, wgpu 3400 (fallbacks: 1210)`.
    pub fn summary(&self) -> String {
        let per: Vec<String> = self
            .counts
            .iter()
            .map(|(b, n)| format!("{b} {n}"))
            .collect();
        let fell: usize = self.fallbacks.values().sum();
        format!("ops: {} (fallbacks: {fell})", per.join(", "))
    }
}

/// Picks a backend per op along a fallback chain and runs it there. A clone
/// is a handle to the same backends (nothing is started again).
#[derive(Clone)]
pub struct Dispatcher {
    chain: Vec<Arc<dyn Backend>>,
    notes: Vec<String>,
    threads: usize,
}

impl Dispatcher {
    /// Builds the chain for `choice`. An explicitly named backend that cannot
    /// start is `BackendInit`; `auto` moves on to the next one and notes why.
    /// Fallback backends that cannot start are skipped (noted).
    pub fn new(
        choice: BackendChoice,
        config: &BackendConfig,
    ) -> Result<Dispatcher, ExecutionError> {
        let mut notes = Vec::new();
        let first = match &choice {
            BackendChoice::Named(name) => {
                let e = entry(name).ok_or_else(|| ExecutionError::BackendInit {
                    backend: name.clone(),
                    reason: "unknown backend".into(),
                })?;
                ((e.init)(config)?, e)
            }
            BackendChoice::Auto => {
                let mut found = None;
                for e in BACKENDS.iter().filter(|e| e.auto) {
                    // `auto` takes wgpu only on a hardware adapter (backends.md).
                    let init = if e.name == "wgpu" {
                        wgpu::init_auto
                    } else {
                        e.init
                    };
                    match init(config) {
                        Ok(b) => {
                            found = Some((b, e));
                            break;
                        }
                        Err(err) => {
                            tracing::info!("backend auto: skipping {}: {err}", e.name);
                            notes.push(format!("auto: skipped {}: {err}", e.name));
                        }
                    }
                }
                found.ok_or_else(|| ExecutionError::BackendInit {
                    backend: "auto".into(),
                    reason: notes.join("; "),
                })?
            }
        };
        let (backend, e) = first;
        let mut chain = vec![backend];
        for name in e.fallback {
            let Some(fe) = entry(name) else { continue };
            match (fe.init)(config) {
                Ok(b) => chain.push(b),
                Err(err) => notes.push(format!("fallback {name} unavailable: {err}")),
            }
        }
        Ok(Dispatcher {
            chain,
            notes,
            threads: config.threads.max(1),
        })
    }

    /// A dispatcher over an explicit chain (tests, embedders). The chain is
    /// used as given: end it with a backend that supports every op.
    pub fn with_chain(chain: Vec<Arc<dyn Backend>>, threads: usize) -> Dispatcher {
        Dispatcher {
            chain,
            notes: Vec::new(),
            threads: threads.max(1),
        }
    }

    /// The chain, first choice first.
    pub fn chain(&self) -> &[Arc<dyn Backend>] {
        &self.chain
    }

    /// Backends skipped while building the chain, and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Thread count the backends were built for.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` on the cpu worker pool (of [`Dispatcher::threads`] threads).
    /// Wrap a whole forward (or a whole generation) in it: ops then start
    /// their parallel loops from a worker instead of handing each op over to
    /// the pool and waiting, which costs tens of microseconds per op; the other workers
    /// poll for work while `f` runs ([`cpu::install_hot`]) instead of parking between ops.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match cpu::worker_pool(self.threads) {
            Ok(pool) => cpu::install_hot(&pool, f),
            Err(_) => f(),
        }
    }

    /// Whether the primary backend runs `op` on `inputs`: callers use fused ops only
    /// there (else their parts, on the primary backend's own tensors, rather than a
    /// fallback that moves them).
    pub fn primary_supports(&self, op: &Op, inputs: &[Tensor]) -> bool {
        let infos: Vec<TensorInfo> = inputs.iter().map(|t| t.info().clone()).collect();
        self.primary().supports(op, &infos)
    }

    /// The first backend of the chain (weights and KV caches live there).
    pub fn primary(&self) -> &dyn Backend {
        &*self.chain[0]
    }

    /// Runs `op` on the first backend of the chain that supports it and
    /// records the decision. No backend supporting it is `UnsupportedOp`.
    pub fn run(
        &self,
        op: &Op,
        inputs: &[Tensor],
        ctx: &mut ExecContext,
    ) -> Result<Vec<Tensor>, ExecutionError> {
        let infos: Vec<TensorInfo> = inputs.iter().map(|t| t.info().clone()).collect();
        let mut rejected: Vec<String> = Vec::new();
        for backend in &self.chain {
            if !backend.supports(op, &infos) {
                rejected.push(format!(
                    "{} does not support {} for {}",
                    backend.name(),
                    op.name(),
                    describe(&infos)
                ));
                continue;
            }
            ctx.log.record(DispatchRecord {
                label: ctx.label().to_string(),
                op: op.name(),
                backend: backend.name().to_string(),
                fallback: (!rejected.is_empty()).then(|| rejected.join("; ")),
            });
            let local = self.localize(backend.name(), inputs)?;
            return backend.execute(op, local.as_deref().unwrap_or(inputs), ctx);
        }
        Err(ExecutionError::UnsupportedOp {
            op: format!("{} ({})", op.name(), rejected.join("; ")),
            backend: self
                .chain
                .first()
                .map_or("none".into(), |b| b.name().to_string()),
            input_dtype: infos.first().map_or(DType::F32, |i| i.dtype),
        })
    }

    /// [`Dispatcher::run`] for ops with one output.
    pub fn run1(
        &self,
        op: &Op,
        inputs: &[Tensor],
        ctx: &mut ExecContext,
    ) -> Result<Tensor, ExecutionError> {
        let mut out = self.run(op, inputs, ctx)?;
        if out.len() != 1 {
            return Err(ExecutionError::ShapeMismatch {
                op: format!("{} (outputs)", op.name()),
                expected: vec![1],
                got: vec![out.len()],
            });
        }
        Ok(out.remove(0))
    }

    /// Device tensors owned by another backend are downloaded to host f32
    /// before running on `target`; `None` when nothing needs moving.
    fn localize(
        &self,
        target: &str,
        inputs: &[Tensor],
    ) -> Result<Option<Vec<Tensor>>, ExecutionError> {
        let foreign =
            |t: &Tensor| matches!(t.storage(), Storage::Device(d) if d.backend() != target);
        if !inputs.iter().any(foreign) {
            return Ok(None);
        }
        inputs
            .iter()
            .map(|t| match t.storage() {
                Storage::Device(d) if d.backend() != target => {
                    let owner = self
                        .chain
                        .iter()
                        .find(|b| b.name() == d.backend())
                        .ok_or_else(|| ExecutionError::UnsupportedOp {
                            op: "move tensor between backends".into(),
                            backend: d.backend().to_string(),
                            input_dtype: t.dtype(),
                        })?;
                    Tensor::from_f32(t.shape(), owner.try_download_f32(t)?)
                }
                _ => Ok(t.clone()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

fn describe(infos: &[TensorInfo]) -> String {
    let parts: Vec<String> = infos
        .iter()
        .map(|i| format!("{}{:?}", i.dtype, i.shape))
        .collect();
    format!("inputs [{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_looked_up_by_name_or_alias() {
        let nox = Capabilities::of("nox");
        assert!(nox.deterministic && nox.graph_only && !nox.widened_f32_weights);
        assert!(Capabilities::of("cpu").widened_f32_weights);
        assert_eq!(Capabilities::of("cpu-ref"), Capabilities::of("reference"));
        assert_eq!(Capabilities::of("reference"), Capabilities::NONE);
        assert_eq!(Capabilities::of("no-such-backend"), Capabilities::NONE);
        assert_eq!(BackendChoice::Auto.capabilities(), Capabilities::NONE);
        assert_eq!(BackendChoice::parse("nox").unwrap().capabilities(), nox);
    }
}
