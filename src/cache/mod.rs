//! [`ZkTreeCache`]: a tree of nodes read once and kept up to date from one persistent
//! recursive watch (ZooKeeper 3.6+), as Curator's `CuratorCache` and kazoo's `TreeCache` keep
//! one. This file: the handle, its options and what it shares with its task; `tree.rs` the
//! cached tree as data and the pure logic on it (snapshots, differences, events); `read.rs`
//! the pipelined reads; `task.rs` the task that follows the tree.
//!
//! Memory: each cached node holds its path, its stat (68 bytes), its data in data mode (at
//! most the servers' `jute.maxbuffer`, 1 MiB by default), and about 100 bytes of map and
//! reference counts; a snapshot held while the tree changes keeps one more copy of the map
//! (the nodes' data is shared between copies). A subscriber's stream keeps every event it
//! has not read yet: read it, or drop it.

mod read;
mod task;
mod tree;

pub use tree::{CachedNode, TreeEvent, TreeSnapshot};

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use tokio::sync::{mpsc, watch};
use tracing::{debug, debug_span, Instrument};

use crate::error::{Error, Result};
use crate::path::ZkPath;
use crate::session::Session;

/// How a [`ZkTreeCache`] caches (Curator's `CuratorCache.Options`, kazoo's `TreeCache`).
///
/// ```
/// use zk_recipes::TreeCacheOptions;
///
/// // Stats only, and nothing under any `tmp` node.
/// let options = TreeCacheOptions::new()
///     .stat_only()
///     .filter(|path| !path.ends_with("/tmp"));
/// ```
#[derive(Clone)]
pub struct TreeCacheOptions {
    data: bool,
    filter: Option<Arc<Filter>>,
}

type Filter = dyn Fn(&str) -> bool + Send + Sync;

impl Default for TreeCacheOptions {
    fn default() -> Self {
        TreeCacheOptions::new()
    }
}

impl fmt::Debug for TreeCacheOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TreeCacheOptions")
            .field("data", &self.data)
            .field("filter", &self.filter.is_some())
            .finish()
    }
}

impl TreeCacheOptions {
    /// Data and stats of every node under the root.
    ///
    /// ```
    /// let options = zk_recipes::TreeCacheOptions::new();
    /// ```
    pub fn new() -> TreeCacheOptions {
        TreeCacheOptions {
            data: true,
            filter: None,
        }
    }

    /// Stats only: no data read or kept ([`CachedNode::data`] is `None`); an event tells a
    /// change by the stat's `mzxid`.
    ///
    /// ```
    /// let options = zk_recipes::TreeCacheOptions::new().stat_only();
    /// ```
    pub fn stat_only(mut self) -> TreeCacheOptions {
        self.data = false;
        self
    }

    /// Caches only the paths `keep` accepts: a path it refuses is left out with everything
    /// below it (not read, not reported). It sees full paths (relative to the session's
    /// chroot) and must be quick: it runs for each node read and each event.
    ///
    /// ```
    /// let options = zk_recipes::TreeCacheOptions::new().filter(|path| !path.contains("/locks"));
    /// ```
    pub fn filter(
        mut self,
        keep: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> TreeCacheOptions {
        self.filter = Some(Arc::new(keep));
        self
    }
}

/// Where a cache is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Starting,
    Live,
    Stopped,
}

/// What the cache's handle and its task share.
pub(crate) struct Shared {
    session: Session,
    root: ZkPath,
    data: bool,
    filter: Option<Arc<Filter>>,
    inner: Mutex<Inner>,
    phase: watch::Sender<Phase>,
}

struct Inner {
    tree: Arc<BTreeMap<String, CachedNode>>,
    subscribers: Vec<mpsc::UnboundedSender<TreeEvent>>,
    failed: Option<Error>,
}

impl Inner {
    /// Sends `events` (already applied) to every subscriber still there.
    fn send(&mut self, events: &[TreeEvent]) {
        if events.is_empty() {
            return;
        }
        self.subscribers.retain(|s| !s.is_closed());
        for subscriber in &self.subscribers {
            for event in events {
                let _ = subscriber.send(event.clone());
            }
        }
        debug!(
            events = events.len(),
            nodes = self.tree.len(),
            "tree cache changed"
        );
    }
}

impl Shared {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `path` is cached: under the root, and it and its ancestors below the root
    /// accepted by the filter.
    pub(crate) fn admits(&self, path: &str) -> bool {
        tree::admitted(self.root.as_str(), self.filter.as_deref(), path)
    }

    /// Computes events against the cached tree, applies them and sends them to every
    /// subscriber, in one step (a subscriber sees a snapshot and exactly the events after it).
    pub(crate) fn publish(
        &self,
        events: impl FnOnce(&BTreeMap<String, CachedNode>) -> Vec<TreeEvent>,
    ) {
        let mut inner = self.inner();
        let events = events(&inner.tree);
        if events.is_empty() {
            return;
        }
        tree::replay(Arc::make_mut(&mut inner.tree), &events);
        inner.send(&events);
    }

    /// After a full read: the differences from the cache published, and the cache replaced by
    /// `fresh` (the same tree, built anew: a map built from sorted entries is packed, about
    /// half the size of one grown by inserts).
    pub(crate) fn replace(&self, fresh: BTreeMap<String, CachedNode>) {
        let mut inner = self.inner();
        let events = tree::diff(&inner.tree, &fresh);
        inner.tree = Arc::new(fresh.into_iter().collect());
        inner.send(&events);
    }

    fn is_initialized(&self) -> bool {
        *self.phase.borrow() != Phase::Starting
    }

    /// After the first full read: `Initialized` to the subscribers so far.
    pub(crate) fn initialize(&self) {
        let inner = self.inner();
        if self.is_initialized() {
            return;
        }
        // Live first: whoever reads `Initialized` sees the cache initialized.
        self.phase.send_replace(Phase::Live);
        for subscriber in &inner.subscribers {
            let _ = subscriber.send(TreeEvent::Initialized);
        }
        debug!(nodes = inner.tree.len(), "tree cache initialized");
    }

    fn fail(&self, e: Error) {
        self.inner().failed = Some(e);
        self.stop();
    }

    /// The task is over: streams end.
    fn stop(&self) {
        // Stopped first: whoever sees its stream end sees the cache stopped.
        self.phase.send_replace(Phase::Stopped);
        self.inner().subscribers.clear();
    }
}

/// A tree of nodes (a root and everything below it) read once and then kept up to date from
/// the server's events (Curator's `CuratorCache`, kazoo's `TreeCache`), by a task of its own.
///
/// - **Read** in pipelined bursts (each level of the tree, 512 nodes at a time, every request
///   sent before the first answer is awaited), after one persistent recursive watch on the
///   root is set, so that no change after the read is missed.
/// - **Kept**: each event is answered by a fresh read of its node, compared with the cache;
///   after a broken connection (whose events ZooKeeper may not deliver, ZOOKEEPER-4698) and
///   in each new session after an expiry, the whole tree is read again and compared. Either
///   way, what differs is applied and reported once: no duplicate, no gap.
/// - **Seen** through [`snapshot`](ZkTreeCache::snapshot) (one consistent view, cheap),
///   [`get`](ZkTreeCache::get), and [`subscribe`](ZkTreeCache::subscribe): a snapshot and a
///   stream ([`TreeEvents`], a `futures_core::Stream`) of exactly the changes after it.
///
/// Needs ZooKeeper 3.6 or later ([`Error::Unsupported`] before). A root that does not exist
/// is cached as empty until it is made. On ZooKeeper 3.8 a persistent watch and a one-shot
/// watch of the same session on the very same path disturb each other (ZOOKEEPER-4466, fixed
/// in 3.9): do not point another recipe of the same session at the cache's root itself.
/// The module docs state the memory it takes.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{Session, SessionOptions, TreeCacheOptions, TreeEvent, ZkTreeCache};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let cache = ZkTreeCache::start(&session, "/config", TreeCacheOptions::new())?;
/// cache.initialized().await?;
/// let (view, mut events) = cache.subscribe();
/// println!("{} nodes", view.len());
/// while let Some(event) = events.recv().await {
///     if let TreeEvent::Changed { path, node, .. } = event {
///         println!("{path} is now {:?}", node.data());
///     }
/// }
/// # Ok(()) }
/// ```
pub struct ZkTreeCache {
    shared: Arc<Shared>,
    phase: watch::Receiver<Phase>,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for ZkTreeCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkTreeCache")
            .field("root", &self.shared.root.as_str())
            .field("phase", &*self.phase.borrow())
            .field("nodes", &self.shared.inner().tree.len())
            .finish()
    }
}

impl ZkTreeCache {
    /// Starts caching the tree at `path` (relative to the session's chroot): the task sets
    /// the watch and reads the tree at once. Returns without waiting
    /// ([`initialized`](ZkTreeCache::initialized) waits). Must be called within a Tokio
    /// runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path. Nothing is sent on an error.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// use zk_recipes::{TreeCacheOptions, ZkTreeCache};
    /// let cache = ZkTreeCache::start(session, "/services", TreeCacheOptions::new().stat_only())?;
    /// # Ok(()) }
    /// ```
    pub fn start(session: &Session, path: &str, options: TreeCacheOptions) -> Result<ZkTreeCache> {
        let root = ZkPath::new(path)?;
        let (phase_tx, phase) = watch::channel(Phase::Starting);
        let shared = Arc::new(Shared {
            session: session.clone(),
            root,
            data: options.data,
            filter: options.filter,
            inner: Mutex::new(Inner {
                tree: Arc::new(BTreeMap::new()),
                subscribers: Vec::new(),
                failed: None,
            }),
            phase: phase_tx,
        });
        let (stop, stopped) = watch::channel(false);
        let span = debug_span!("tree_cache", path = %shared.root);
        let task = tokio::spawn(task::follow(shared.clone(), stopped).instrument(span));
        debug!(path = %shared.root, data = shared.data, "tree cache started");
        Ok(ZkTreeCache {
            shared,
            phase,
            stop,
            task: Some(task),
        })
    }

    /// The cached tree's root, as given.
    ///
    /// ```no_run
    /// # fn demo(cache: zk_recipes::ZkTreeCache) {
    /// assert_eq!(cache.path(), "/config");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.shared.root.as_str()
    }

    /// Waits until the first full view is in the cache; at once if it is.
    ///
    /// # Errors
    ///
    /// What stopped the cache before its first view: [`Error::Unsupported`] (a server older
    /// than 3.6), [`Error::NoAuth`] on the root, or [`Error::SessionClosed`] (the session, or
    /// the cache, closed). Retryable errors (an
    /// unreachable server, an expiry) are retried (a WARN event each time): bound the wait
    /// with `tokio::time::timeout` if a server may be out of reach.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// ```no_run
    /// # async fn demo(cache: zk_recipes::ZkTreeCache) -> Result<(), zk_recipes::Error> {
    /// cache.initialized().await?;
    /// # Ok(()) }
    /// ```
    pub async fn initialized(&self) -> Result<()> {
        let mut phase = self.phase.clone();
        let seen = phase
            .wait_for(|p| *p != Phase::Starting)
            .await
            .map(|p| p.clone());
        match seen {
            Ok(Phase::Live) => Ok(()),
            _ => Err(self
                .shared
                .inner()
                .failed
                .clone()
                .unwrap_or(Error::SessionClosed)),
        }
    }

    /// Whether the first full view is in (and the cache not stopped).
    ///
    /// ```no_run
    /// # fn demo(cache: zk_recipes::ZkTreeCache) {
    /// if !cache.is_initialized() { println!("still reading"); }
    /// # }
    /// ```
    pub fn is_initialized(&self) -> bool {
        *self.phase.borrow() == Phase::Live
    }

    /// The cached tree now: one consistent view (cheap: shared until the cache changes).
    ///
    /// ```no_run
    /// # fn demo(cache: zk_recipes::ZkTreeCache) {
    /// let view = cache.snapshot();
    /// println!("{} nodes", view.len());
    /// # }
    /// ```
    pub fn snapshot(&self) -> TreeSnapshot {
        TreeSnapshot(self.shared.inner().tree.clone())
    }

    /// The cached node at `path`.
    ///
    /// ```no_run
    /// # fn demo(cache: zk_recipes::ZkTreeCache) {
    /// let flags = cache.get("/config/flags").and_then(|n| n.data().map(<[u8]>::to_vec));
    /// # }
    /// ```
    pub fn get(&self, path: &str) -> Option<CachedNode> {
        self.shared.inner().tree.get(path).cloned()
    }

    /// The cached tree now and a stream of every change after it, taken together: the events
    /// replayed over the snapshot give the cache's tree at any later point. Subscribed before
    /// the first view, the snapshot is empty and the stream starts with a `Created` for each
    /// node of that view, then [`TreeEvent::Initialized`]. The stream ends when the cache
    /// stops.
    ///
    /// ```no_run
    /// # async fn demo(cache: zk_recipes::ZkTreeCache) {
    /// let (view, mut events) = cache.subscribe();
    /// while let Some(event) = events.recv().await {
    ///     println!("{event:?}");
    /// }
    /// # }
    /// ```
    pub fn subscribe(&self) -> (TreeSnapshot, TreeEvents) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = self.shared.inner();
        if *self.phase.borrow() != Phase::Stopped {
            inner.subscribers.push(tx);
        }
        (TreeSnapshot(inner.tree.clone()), TreeEvents { rx })
    }

    /// Stops the cache: the watch is removed and every stream ends. Dropping the handle does
    /// the same in the background.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the task is already told to stop.
    ///
    /// ```no_run
    /// # async fn demo(cache: zk_recipes::ZkTreeCache) {
    /// cache.close().await;
    /// # }
    /// ```
    pub async fn close(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ZkTreeCache {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// The changes of a [`ZkTreeCache`] after the snapshot it came with
/// ([`ZkTreeCache::subscribe`]): a `futures_core::Stream` of [`TreeEvent`]s, or
/// [`recv`](TreeEvents::recv) them. Unread events wait in it (unbounded): read them, or drop
/// the stream.
///
/// ```no_run
/// # async fn demo(cache: zk_recipes::ZkTreeCache) {
/// let (_, mut events) = cache.subscribe();
/// if let Some(event) = events.recv().await {
///     println!("{event:?}");
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct TreeEvents {
    rx: mpsc::UnboundedReceiver<TreeEvent>,
}

impl TreeEvents {
    /// The next change; `None` once the cache has stopped and every change was read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an event is taken only when this returns it.
    ///
    /// ```no_run
    /// # async fn demo(mut events: zk_recipes::TreeEvents) {
    /// while let Some(event) = events.recv().await {}
    /// # }
    /// ```
    pub async fn recv(&mut self) -> Option<TreeEvent> {
        self.rx.recv().await
    }

    /// A change already there, without waiting.
    ///
    /// ```no_run
    /// # fn demo(mut events: zk_recipes::TreeEvents) {
    /// while let Some(event) = events.try_recv() {}
    /// # }
    /// ```
    pub fn try_recv(&mut self) -> Option<TreeEvent> {
        self.rx.try_recv().ok()
    }
}

impl futures_core::Stream for TreeEvents {
    type Item = TreeEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TreeEvent>> {
        self.rx.poll_recv(cx)
    }
}
