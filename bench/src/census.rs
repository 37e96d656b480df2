//! Tracing: the INFO subscriber every measured run pays for, as a service would have one, and
//! the census, a layer of its own that logs the library's events and spans with their time,
//! only while switched on (its short runs need DEBUG events such as `"watch fired"`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::span::{Attributes, Id};
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use crate::measure::now_ns;

/// Logs `zk_recipes` events (by message) and span creations (as `span:{name}`) at every level
/// with their time, plus the benchmark's own marks, only while switched on: when off, its
/// filter turns the library's events away before anything is recorded.
#[derive(Clone, Default)]
pub struct Census {
    on: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<(u64, String)>>>,
    /// Child names returned by the library's listings (its `"listed"` events' `children`).
    listed: Arc<AtomicU64>,
}

/// The census's own filter: `zk_recipes`' events and spans of any level, while it is on.
struct CensusFilter {
    on: Arc<AtomicBool>,
}

impl Census {
    /// Starts a fresh log.
    pub fn start(&self) {
        self.log.lock().unwrap().clear();
        self.listed.store(0, Ordering::SeqCst);
        self.on.store(true, Ordering::SeqCst);
    }

    /// Stops logging and returns the log.
    pub fn stop(&self) -> Vec<(u64, String)> {
        self.on.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// Logs one of the benchmark's own moments (e.g. `"release"`), when on.
    /// Stops and returns how many child names the library's listings returned meanwhile.
    pub fn stop_listed(&self) -> u64 {
        self.stop();
        self.listed.swap(0, Ordering::SeqCst)
    }

    pub fn mark(&self, label: &str) {
        if self.on.load(Ordering::Relaxed) {
            self.add(label.to_owned());
        }
    }

    fn add(&self, key: String) {
        let t = now_ns();
        self.log.lock().unwrap().push((t, key));
    }

    /// Installs the global subscriber: a `fmt` layer at INFO writing to a sink (what a service
    /// logging at INFO pays for every event and span, formatting included), and the census
    /// with its own filter. Neither layer's filter affects the other's.
    pub fn install(&self) {
        let info = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(LevelFilter::INFO);
        let census = self.clone().with_filter(CensusFilter {
            on: self.on.clone(),
        });
        let _ = tracing_subscriber::registry()
            .with(info)
            .with(census)
            .try_init();
    }
}

/// How many times each label occurs in a log.
pub fn counts(log: &[(u64, String)]) -> HashMap<String, u64> {
    let mut counts = HashMap::new();
    for (_, label) in log {
        *counts.entry(label.clone()).or_default() += 1;
    }
    counts
}

/// Takes the `message` field of an event.
struct MessageVisitor(Option<String>, Option<u64>);

impl tracing::field::Visit for MessageVisitor {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "children" {
            self.1 = Some(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: Subscriber> Filter<S> for CensusFilter {
    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.target().starts_with("zk_recipes") {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        self.on.load(Ordering::Relaxed) && meta.target().starts_with("zk_recipes")
    }
}

impl<S: Subscriber> Layer<S> for Census {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        self.add(format!("span:{}", attrs.metadata().name()));
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut visitor = MessageVisitor(None, None);
        event.record(&mut visitor);
        if let (Some("listed"), Some(n)) = (visitor.0.as_deref(), visitor.1) {
            self.listed.fetch_add(n, Ordering::Relaxed);
        }
        if let Some(message) = visitor.0 {
            self.add(message);
        }
    }
}
