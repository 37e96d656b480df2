//! Barriers on Curator's layouts: [`ZkBarrier`] (Curator `DistributedBarrier`, kazoo
//! `Barrier`), a node whose presence holds everyone back, and [`ZkDoubleBarrier`] (Curator
//! `DistributedDoubleBarrier`, `double.rs`; its leave protocol in `leave.rs`), where N members
//! enter together and leave together.
//!
//! Both mark their node's data (`zk-recipes:barrier`, `zk-recipes:double-barrier`) rather than
//! adding an anchor child: Curator deletes a barrier's node, which a child would forbid, and
//! counts every child of a double barrier's root as a member. A path another recipe kind
//! marked is refused ([`Error::UnsuitableRoot`]); a node someone else made (Curator writes the
//! client's address into it) is taken as it is.

mod double;
mod leave;

use std::fmt;
use std::time::Duration;

use tracing::{debug, debug_span, Instrument};
use zookeeper_client as zk;

use crate::claim::{claim, Make};
use crate::error::{Error, Result};
use crate::layout::kind::RecipeKind;
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

pub use double::{DoubleBarrierEntry, ZkDoubleBarrier};

/// How often [`ZkBarrier::remove`] reads again when the node changed between its read and its
/// delete (a mark written meanwhile).
const ROUNDS: u32 = 4;

/// A barrier: while its node exists, [`wait`](ZkBarrier::wait) holds every waiter back;
/// [`remove`](ZkBarrier::remove) lets them all go. The node is a persistent node at the path
/// (its parents made persistent when missing), as Curator's `DistributedBarrier` and kazoo's
/// `Barrier` make it, so Java, Python and Rust processes share one barrier.
///
/// A waiter waits on a watch (nothing is sent while the barrier stays). A barrier outlives
/// the session that set it; a waiter whose own session expires is told
/// ([`Error::SessionExpired`]) rather than left waiting on a watch that died with it.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes::{Session, SessionOptions, ZkBarrier};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let barrier = ZkBarrier::new(&session, "/deploy/hold")?;
/// barrier.set().await?; // the coordinator holds everyone back
/// // ... elsewhere, each worker:
/// barrier.wait_timeout(Duration::from_secs(30)).await?;
/// // ... and the coordinator lets them go:
/// barrier.remove().await?;
/// # Ok(()) }
/// ```
pub struct ZkBarrier {
    session: Session,
    path: ZkPath,
}

impl fmt::Debug for ZkBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkBarrier")
            .field("path", &self.path.as_str())
            .finish()
    }
}

impl ZkBarrier {
    /// A barrier on `path` (relative to the session's chroot). Nothing is sent to ZooKeeper
    /// here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path, [`Error::TooLarge`] for one longer than
    /// the server takes.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let barrier = zk_recipes::ZkBarrier::new(session, "/deploy/hold")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str) -> Result<ZkBarrier> {
        let path = ZkPath::new(path)?;
        let mark = RecipeKind::Barrier.mark();
        session.check_size("the barrier's path", path.as_str().len() + mark.len())?;
        Ok(ZkBarrier {
            session: session.clone(),
            path,
        })
    }

    /// The barrier's path.
    ///
    /// ```no_run
    /// # fn demo(barrier: zk_recipes::ZkBarrier) {
    /// assert_eq!(barrier.path(), "/deploy/hold");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// Sets the barrier: creates its node (marked as a barrier), or finds it set already.
    ///
    /// # Errors
    ///
    /// [`Error::UnsuitableRoot`] when another recipe kind uses the path (nothing is made), and
    /// the session's errors ([`Error::NoAuth`], [`Error::SessionExpired`], ...).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: the create is idempotent, so a barrier set by a dropped call is
    /// one a later call would find set.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkBarrier) -> Result<(), zk_recipes::Error> {
    /// barrier.set().await?;
    /// # Ok(()) }
    /// ```
    pub async fn set(&self) -> Result<()> {
        let span = debug_span!("barrier_set", path = %self.path);
        async {
            let epoch = self.session.epoch().await?;
            let mark = RecipeKind::Barrier.mark();
            self.check(&epoch, Make::Persistent(&mark)).await?;
            debug!("barrier set");
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// Whether the barrier is set now (one read).
    ///
    /// # Errors
    ///
    /// As [`set`](ZkBarrier::set).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkBarrier) -> Result<(), zk_recipes::Error> {
    /// if barrier.is_set().await? {
    ///     println!("still held back");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn is_set(&self) -> Result<bool> {
        let epoch = self.session.epoch().await?;
        Ok(self.check(&epoch, Make::Nothing).await?.is_some())
    }

    /// Removes the barrier, releasing every waiter; a barrier not set is left as it is.
    ///
    /// # Errors
    ///
    /// [`Error::UnsuitableRoot`] when another recipe kind uses the path (nothing is deleted),
    /// [`Error::Zk`] with `NotEmpty` when the node has children (it is not a barrier:
    /// nothing is deleted), and the session's errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: a delete already sent may still land, which a later call would
    /// find done.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkBarrier) -> Result<(), zk_recipes::Error> {
    /// barrier.remove().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove(&self) -> Result<()> {
        let span = debug_span!("barrier_remove", path = %self.path);
        async {
            let epoch = self.session.epoch().await?;
            let path = self.path.as_str();
            for _ in 0..ROUNDS {
                let Some(stat) = self.check(&epoch, Make::Nothing).await? else {
                    debug!("barrier not set");
                    return Ok(());
                };
                // On the version read, so that what was checked is what goes; a delete sent
                // again after a lost reply finds the node gone, as good as deleted.
                let version = Some(stat.version);
                let deleted = epoch
                    .retry(path, |c| async move {
                        match c.delete(path, version).await {
                            Ok(()) | Err(zk::Error::NoNode) => Ok(true),
                            Err(zk::Error::BadVersion) => Ok(false),
                            Err(e) => Err(e),
                        }
                    })
                    .await?;
                if deleted {
                    debug!("barrier removed");
                    return Ok(());
                }
            }
            Err(Error::RootReplaced {
                path: path.to_owned(),
            })
        }
        .instrument(span)
        .await
    }

    /// Waits until the barrier is removed; returns at once when it is not set. Waits on a
    /// watch, for as long as it takes: [`wait_timeout`](ZkBarrier::wait_timeout) gives up.
    ///
    /// # Errors
    ///
    /// [`Error::SessionExpired`] (or [`Error::SessionClosed`]) when the session ends while
    /// waiting: the watch went with it, so the wait ends with an error rather than never;
    /// wait again (the barrier is read on the new session). [`Error::UnsuitableRoot`] when
    /// another recipe kind uses the path, and the session's other errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads (and leaves a one-shot watch behind, which the server drops
    /// when it fires).
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkBarrier) -> Result<(), zk_recipes::Error> {
    /// barrier.wait().await?;
    /// println!("released");
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self) -> Result<()> {
        let span = debug_span!("barrier_wait", path = %self.path);
        async {
            let epoch = self.session.epoch().await?;
            let path = self.path.as_str();
            if self.check(&epoch, Make::Nothing).await?.is_none() {
                return Ok(());
            }
            loop {
                let (stat, watcher) = epoch
                    .retry(path, |c| async move { c.check_and_watch_stat(path).await })
                    .await?;
                if stat.is_none() {
                    debug!("barrier removed; released");
                    return Ok(());
                }
                debug!("waiting for the barrier's removal");
                tokio::select! {
                    event = watcher.changed() => debug!(event = ?event.event_type, "barrier watch fired"),
                    () = epoch.ended() => return Err(epoch.over()),
                }
            }
        }
        .instrument(span)
        .await
    }

    /// [`wait`](ZkBarrier::wait), for at most `limit`.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] when the barrier is still set after `limit`; as
    /// [`wait`](ZkBarrier::wait) otherwise.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`wait`](ZkBarrier::wait).
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkBarrier) -> Result<(), zk_recipes::Error> {
    /// use std::time::Duration;
    /// match barrier.wait_timeout(Duration::from_secs(5)).await {
    ///     Err(zk_recipes::Error::TimedOut { .. }) => println!("still held back"),
    ///     other => other?,
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_timeout(&self, limit: Duration) -> Result<()> {
        match tokio::time::timeout(limit, self.wait()).await {
            Ok(done) => done,
            Err(_) => Err(Error::TimedOut {
                path: self.path.as_str().to_owned(),
                waited: limit,
                reason: "the barrier is still set".to_owned(),
            }),
        }
    }

    /// The node's stat when it is there and may be a barrier (`None`: not set); `make` says
    /// whether to create it.
    async fn check(&self, epoch: &Epoch, make: Make<'_>) -> Result<Option<zk::Stat>> {
        claim(epoch, &self.session, &self.path, RecipeKind::Barrier, make).await
    }
}
