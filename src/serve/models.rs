//! The served models: loading each file by its family (text generator, sentence
//! encoder, speech recognizer), and the slots of a text model: `parallel`
//! conversations sharing its weights, each with its own KV cache, and a bounded
//! queue of requests waiting for one.

use super::error::ApiError;
use super::metrics::Metrics;
use crate::backend::{BackendChoice, BackendConfig, Dispatcher};
use crate::encode::Encoder;
use crate::generate::{Generator, LoadOptions, TextModel};
use crate::loader::Task;
use crate::transcribe::{SpeechModel, SpeechOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A file to serve under an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    /// The id clients name in `model`.
    pub id: String,
    /// The `.model` file.
    pub path: PathBuf,
}

/// How the models are loaded and shared.
#[derive(Debug, Clone)]
pub struct LoadSettings {
    /// Backend choice for every model.
    pub backend: BackendChoice,
    /// Worker threads of each model's backend.
    pub threads: usize,
    /// Context (tokens) of each conversation of a text model.
    pub ctx_size: usize,
    /// Conversations (slots) per text model.
    pub parallel: usize,
    /// Requests that may wait for a slot, per text model; more get 503.
    pub queue: usize,
}

/// What a loaded model serves.
pub enum Kind {
    /// Chat and completions.
    Text(Arc<TextSlots>),
    /// Embeddings (one batch at a time).
    Embeddings(Arc<Mutex<Encoder>>),
    /// Transcriptions and translations.
    Speech(Arc<SpeechModel>),
}

impl Kind {
    /// The kind in words, for errors and `/v1/models`.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Text(_) => "text",
            Kind::Embeddings(_) => "embeddings",
            Kind::Speech(_) => "speech",
        }
    }

    /// The endpoint this kind is served on.
    pub fn endpoint(&self) -> &'static str {
        match self {
            Kind::Text(_) => "/v1/chat/completions or /v1/completions",
            Kind::Embeddings(_) => "/v1/embeddings",
            Kind::Speech(_) => "/v1/audio/transcriptions",
        }
    }
}

/// One loaded model.
pub struct Served {
    /// Its id.
    pub id: String,
    /// Unix time it was loaded.
    pub created: u64,
    /// What it serves.
    pub kind: Kind,
}

/// Every loaded model, by id.
pub struct Registry {
    /// In command-line order.
    pub models: Vec<Served>,
}

impl Registry {
    /// Loads every file; the first failure names its file.
    pub fn load(files: &[ModelFile], settings: &LoadSettings) -> Result<Registry, String> {
        let mut models = Vec::with_capacity(files.len());
        for f in files {
            let kind = load_one(f, settings).map_err(|e| format!("{}: {e}", f.path.display()))?;
            let created = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            models.push(Served {
                id: f.id.clone(),
                created,
                kind,
            });
        }
        Ok(Registry { models })
    }

    /// The model `id`, or a 404 listing the ids there are.
    pub fn get(&self, id: &str) -> Result<&Served, ApiError> {
        self.models.iter().find(|m| m.id == id).ok_or_else(|| {
            let ids: Vec<&str> = self.models.iter().map(|m| m.id.as_str()).collect();
            ApiError::unknown_model(id, &ids)
        })
    }
}

/// A 400 for a model of the wrong kind on an endpoint.
pub fn wrong_kind(served: &Served, wanted: &str) -> ApiError {
    ApiError::bad_request(
        Some("model"),
        format!(
            "`{}` is a {} model and cannot serve {wanted}; use {}",
            served.id,
            served.kind.name(),
            served.kind.endpoint()
        ),
    )
}

fn load_one(f: &ModelFile, s: &LoadSettings) -> Result<Kind, Box<dyn std::error::Error>> {
    let model = Arc::new(crate::loader::load(&f.path)?);
    let threads = s.threads.max(1);
    Ok(match model.task() {
        Some(Task::Generate) => {
            let opts = LoadOptions {
                backend: s.backend.clone(),
                threads,
                ctx_size: s.ctx_size,
                ..LoadOptions::default()
            };
            let text = Arc::new(TextModel::from_model(model, &opts)?);
            Kind::Text(Arc::new(TextSlots::new(&f.id, text, s.parallel, s.queue)?))
        }
        Some(Task::Encode) => {
            let dispatcher = Dispatcher::new(s.backend.clone(), &BackendConfig { threads })?;
            Kind::Embeddings(Arc::new(Mutex::new(Encoder::new(model, dispatcher)?)))
        }
        Some(Task::Transcribe) => {
            let opts = SpeechOptions {
                backend: s.backend.clone(),
                threads,
                ..SpeechOptions::default()
            };
            Kind::Speech(Arc::new(SpeechModel::from_model(model, &opts)?))
        }
        other => {
            return Err(format!(
                "model_type '{}' (task {other:?}) is not one the server runs: it serves text \
                 generators (LlamaStyle), sentence encoders (BertStyle) and speech models \
                 (WhisperStyle)",
                model.config.model_type
            )
            .into())
        }
    })
}

/// The conversations of one text model and the queue in front of them.
pub struct TextSlots {
    id: String,
    model: Arc<TextModel>,
    free: Mutex<Vec<Generator>>,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    queue: usize,
    size: usize,
}

impl TextSlots {
    fn new(
        id: &str,
        model: Arc<TextModel>,
        parallel: usize,
        queue: usize,
    ) -> Result<TextSlots, crate::error::ExecutionError> {
        let size = parallel.max(1);
        let free = (0..size)
            .map(|_| model.generator())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TextSlots {
            id: id.to_string(),
            model,
            free: Mutex::new(free),
            permits: Arc::new(Semaphore::new(size)),
            waiting: AtomicUsize::new(0),
            queue,
            size,
        })
    }

    /// The shared model.
    pub fn model(&self) -> &Arc<TextModel> {
        &self.model
    }

    /// Slots (conversations generated at once).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits for a free slot, preferring the one whose cache holds the longest
    /// prefix of `ids`. With every slot busy and `queue` requests already
    /// waiting it is a 503 with `Retry-After`.
    pub async fn acquire(
        self: &Arc<Self>,
        ids: &[u32],
        metrics: &Metrics,
    ) -> Result<Slot, ApiError> {
        let label = Metrics::model(&self.id);
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.queue {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    return Err(ApiError::unavailable(
                        format!(
                            "all {} slots of `{}` are busy and {} requests are waiting; retry later \
                             (or start the server with a larger --parallel or --queue)",
                            self.size, self.id, self.queue
                        ),
                        1,
                    ));
                }
                let queued = Queued::new(
                    &self.waiting,
                    metrics.queue_depth.get_or_create(&label).clone(),
                );
                let waited = self.permits.clone().acquire_owned().await;
                drop(queued);
                waited.map_err(|_| ApiError::unavailable("the server is stopping", 5))?
            }
        };
        let generator = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            let best = (0..free.len())
                .max_by_key(|&i| common_prefix(free[i].history(), ids))
                .ok_or_else(|| ApiError::internal("no free slot behind a free permit"))?;
            free.swap_remove(best)
        };
        metrics.busy_slots.get_or_create(&label).inc();
        Ok(Slot {
            generator: Some(generator),
            slots: self.clone(),
            busy: metrics.busy_slots.get_or_create(&label).clone(),
            _permit: permit,
        })
    }
}

/// A request in the queue: counted while it waits, and uncounted when it stops
/// waiting — with a slot, or because its client went away meanwhile (the
/// request's future is dropped mid-wait).
struct Queued<'a> {
    waiting: &'a AtomicUsize,
    depth: prometheus_client::metrics::gauge::Gauge,
}

impl<'a> Queued<'a> {
    /// Counts one more waiting request (the caller has already added it to `waiting`).
    fn new(waiting: &'a AtomicUsize, depth: prometheus_client::metrics::gauge::Gauge) -> Self {
        depth.inc();
        Queued { waiting, depth }
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        self.depth.dec();
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A conversation lent to one request; returned to its model when dropped
/// (its cache forgotten if the request panicked).
pub struct Slot {
    generator: Option<Generator>,
    slots: Arc<TextSlots>,
    busy: prometheus_client::metrics::gauge::Gauge,
    _permit: OwnedSemaphorePermit,
}

impl Slot {
    /// The conversation.
    pub fn generator(&mut self) -> &mut Generator {
        self.generator
            .as_mut()
            .expect("a slot holds its generator until dropped")
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(mut g) = self.generator.take() {
            if std::thread::panicking() {
                g.reset_kv_cache();
            }
            let mut free = self.slots.free.lock().unwrap_or_else(|p| p.into_inner());
            free.push(g);
        }
        self.busy.dec();
    }
}
