//! Prometheus metrics of the server (`GET /metrics`, text exposition format),
//! kept with the `prometheus-client` crate: requests by route and status,
//! request latency, tokens in and out, queue depth and busy slots per model.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Route and status of a finished request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteStatus {
    /// The matched route (`/v1/chat/completions`), or `unmatched`.
    pub route: String,
    /// HTTP status code.
    pub status: String,
}

/// A route.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    /// The matched route.
    pub route: String,
}

/// A served model.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabel {
    /// The model id.
    pub model: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_buckets() -> Histogram {
    // 5 ms to ~82 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Every metric the server keeps, and the registry that writes them.
pub struct Metrics {
    registry: Registry,
    /// Requests answered, by route and status.
    pub requests: Family<RouteStatus, Counter>,
    /// Seconds from request to response headers (streams: to the first byte), by route.
    pub latency: HistogramFamily<RouteLabel>,
    /// Seconds from request to the end of generation, by model (text models).
    pub generation: HistogramFamily<ModelLabel>,
    /// Prompt tokens read, by model.
    pub prompt_tokens: Family<ModelLabel, Counter>,
    /// Tokens generated, by model.
    pub generated_tokens: Family<ModelLabel, Counter>,
    /// Generations stopped because the client went away, by model.
    pub cancelled: Family<ModelLabel, Counter>,
    /// Requests waiting for a slot, by model.
    pub queue_depth: Family<ModelLabel, Gauge>,
    /// Slots generating, by model.
    pub busy_slots: Family<ModelLabel, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("cyb_llm");
        let requests = Family::<RouteStatus, Counter>::default();
        let latency = HistogramFamily::<RouteLabel>::new_with_constructor(latency_buckets);
        let generation = HistogramFamily::<ModelLabel>::new_with_constructor(latency_buckets);
        let prompt_tokens = Family::<ModelLabel, Counter>::default();
        let generated_tokens = Family::<ModelLabel, Counter>::default();
        let cancelled = Family::<ModelLabel, Counter>::default();
        let queue_depth = Family::<ModelLabel, Gauge>::default();
        let busy_slots = Family::<ModelLabel, Gauge>::default();
        registry.register("requests", "HTTP requests answered", requests.clone());
        registry.register(
            "request_latency_seconds",
            "Seconds from request to response headers",
            latency.clone(),
        );
        registry.register(
            "generation_seconds",
            "Seconds from request to the end of generation",
            generation.clone(),
        );
        registry.register("prompt_tokens", "Prompt tokens read", prompt_tokens.clone());
        registry.register(
            "generated_tokens",
            "Tokens generated",
            generated_tokens.clone(),
        );
        registry.register(
            "cancelled_generations",
            "Generations stopped because the client went away",
            cancelled.clone(),
        );
        registry.register(
            "queue_depth",
            "Requests waiting for a slot",
            queue_depth.clone(),
        );
        registry.register("busy_slots", "Slots generating", busy_slots.clone());
        Metrics {
            registry,
            requests,
            latency,
            generation,
            prompt_tokens,
            generated_tokens,
            cancelled,
            queue_depth,
            busy_slots,
        }
    }
}

impl Metrics {
    /// The label of `model`.
    pub fn model(model: &str) -> ModelLabel {
        ModelLabel {
            model: model.to_string(),
        }
    }

    /// Records one answered request.
    pub fn request(&self, route: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RouteStatus {
                route: route.to_string(),
                status: status.to_string(),
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabel {
                route: route.to_string(),
            })
            .observe(seconds);
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
