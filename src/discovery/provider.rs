//! [`ZkServiceProvider`]: one service's instances cached on watches (the directory's listing
//! and each instance's data), read again when one fires or a new session begins, and an
//! instance picked from the cache by a [`Strategy`] (Curator's `ServiceProvider`).

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, debug_span, warn, Instrument};

use super::{read_service, ServiceInstance, Watches};
use crate::error::{Error, Result};
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

/// How a [`ZkServiceProvider`] picks an instance (Curator's `RoundRobinStrategy` and
/// `RandomStrategy`).
///
/// ```
/// let strategy = zk_recipes::discovery::Strategy::RoundRobin;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Strategy {
    /// Each instance in turn (in id order).
    RoundRobin,
    /// Any instance, at random.
    Random,
}

/// The instances of one service as last read, kept up to date on watches by a task of its
/// own (stopped when the provider is dropped), and one of them picked by its [`Strategy`].
/// An instance whose session ends (an ephemeral node) leaves the cache once the server has
/// deleted its node.
///
/// ```no_run
/// # async fn demo(discovery: zk_recipes::discovery::ZkServiceDiscovery) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::discovery::Strategy;
/// let provider = discovery.provider("billing", Strategy::RoundRobin).await?;
/// let mut changes = provider.watch();
/// while changes.changed().await.is_ok() {
///     println!("{} instances", provider.instances().len());
/// }
/// # Ok(()) }
/// ```
pub struct ZkServiceProvider {
    dir: ZkPath,
    strategy: Strategy,
    next: AtomicUsize,
    view: watch::Receiver<Arc<Vec<ServiceInstance>>>,
    /// Dropped: the task stops.
    _stop: watch::Sender<()>,
}

impl fmt::Debug for ZkServiceProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkServiceProvider")
            .field("service", &self.dir.as_str())
            .field("strategy", &self.strategy)
            .field("instances", &self.view.borrow().len())
            .finish()
    }
}

/// Reads the first view, then follows the service in a task.
pub(super) async fn start(
    session: &Session,
    dir: ZkPath,
    strategy: Strategy,
) -> Result<ZkServiceProvider> {
    let span = debug_span!("service_provider", path = %dir);
    let (epoch, first, watches) = async {
        let epoch = session.epoch().await?;
        let (first, watches) = read_service(&epoch, &dir, true).await?;
        Ok::<_, Error>((epoch, first, watches))
    }
    .instrument(span.clone())
    .await?;
    let (view_tx, view) = watch::channel(Arc::new(first));
    let (stop, stopped) = watch::channel(());
    let follow = follow(
        session.clone(),
        dir.clone(),
        epoch,
        watches,
        view_tx,
        stopped,
    );
    tokio::spawn(follow.instrument(span));
    Ok(ZkServiceProvider {
        dir,
        strategy,
        next: AtomicUsize::new(0),
        view,
        _stop: stop,
    })
}

/// Waits on the watches and reads the service again when one fires (or in a new session),
/// until the provider is dropped or the session closed.
async fn follow(
    session: Session,
    dir: ZkPath,
    mut epoch: Arc<Epoch>,
    mut watches: Watches,
    view: watch::Sender<Arc<Vec<ServiceInstance>>>,
    mut stopped: watch::Receiver<()>,
) {
    let mut pause = Duration::from_millis(100);
    let mut wait = true;
    loop {
        if wait {
            tokio::select! {
                fired = watches.fired() => debug!(event = ?fired, "service watch fired"),
                _ = epoch.ended() => {}
                _ = stopped.changed() => return,
            }
        }
        let read = async {
            if epoch.is_lost() {
                epoch = session.epoch().await?;
            }
            read_service(&epoch, &dir, true).await
        };
        let read = tokio::select! {
            read = read => read,
            _ = stopped.changed() => return,
        };
        match read {
            Ok((instances, next)) => {
                (watches, wait) = (next, true);
                pause = Duration::from_millis(100);
                view.send_if_modified(|v| {
                    let changed = **v != instances;
                    if changed {
                        *v = Arc::new(instances);
                    }
                    changed
                });
            }
            Err(Error::SessionClosed) => return,
            Err(e) => {
                // No watch is left: read again after a pause.
                warn!(error = %e, "cannot read the service; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = stopped.changed() => return,
                }
                (pause, wait) = ((pause * 2).min(Duration::from_secs(10)), false);
            }
        }
    }
}

impl ZkServiceProvider {
    /// The instances as last read, in id order.
    ///
    /// ```no_run
    /// # fn demo(provider: zk_recipes::discovery::ZkServiceProvider) {
    /// for instance in provider.instances().iter() { println!("{}", instance.id); }
    /// # }
    /// ```
    pub fn instances(&self) -> Arc<Vec<ServiceInstance>> {
        self.view.borrow().clone()
    }

    /// One instance, picked by the strategy; `None` when there is none.
    ///
    /// ```no_run
    /// # fn demo(provider: zk_recipes::discovery::ZkServiceProvider) {
    /// if let Some(instance) = provider.instance() { println!("{}", instance.uri()); }
    /// # }
    /// ```
    pub fn instance(&self) -> Option<ServiceInstance> {
        let instances = self.instances();
        if instances.is_empty() {
            return None;
        }
        let index = match self.strategy {
            Strategy::RoundRobin => self.next.fetch_add(1, Ordering::Relaxed),
            Strategy::Random => random() as usize,
        };
        instances.get(index % instances.len()).cloned()
    }

    /// A receiver that sees every change of the cached instances.
    ///
    /// ```no_run
    /// # async fn demo(provider: zk_recipes::discovery::ZkServiceProvider) {
    /// let mut changes = provider.watch();
    /// let _ = changes.changed().await;
    /// # }
    /// ```
    pub fn watch(&self) -> watch::Receiver<Arc<Vec<ServiceInstance>>> {
        self.view.clone()
    }

    /// Waits until the cached instances satisfy `until` and returns them; at once if they do.
    ///
    /// # Errors
    ///
    /// [`Error::SessionClosed`] when the provider's task ended (its session closed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// ```no_run
    /// # async fn demo(provider: zk_recipes::discovery::ZkServiceProvider) -> Result<(), zk_recipes::Error> {
    /// provider.wait_for(|instances| !instances.is_empty()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for(
        &self,
        mut until: impl FnMut(&[ServiceInstance]) -> bool,
    ) -> Result<Arc<Vec<ServiceInstance>>> {
        let mut view = self.view.clone();
        let found = view.wait_for(|v| until(v)).await.map(|v| v.clone());
        found.map_err(|_| Error::SessionClosed)
    }
}

/// A random number from the standard library's per-process random hash keys.
fn random() -> u64 {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_usize(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}
