//! [`Grant`]: a contender node that holds, as every recipe hands it out.

use std::fmt;
use std::sync::{Arc, OnceLock};

use tokio::sync::watch;
use tracing::{debug, debug_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::Result;
use crate::fence::{FencedWrite, FencingToken};
use crate::session::{Deleted, Epoch, Release, Session};

/// Why a [`Grant`] stopped being held, as [`Grant::lost`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// The ZooKeeper session expired, or was given up after a disconnect that lasted a session
    /// timeout.
    SessionExpired,
    /// [`Session::close`](crate::Session::close) ended the session.
    SessionClosed,
    /// The connection is suspended and the session's policy is
    /// [`LossPolicy::Suspension`](crate::LossPolicy::Suspension).
    Suspended,
    /// The node was deleted by someone else (an operator, a script).
    NodeDeleted,
    /// The node's data was changed by someone else (an operator, Curator's `Revoker`). In the
    /// recipes whose holders release with a data change (mutex, keyed lock, read/write lock),
    /// the contender behind takes that for a release and proceeds.
    NodeChanged,
}

/// Whether a change of a grant's node by someone else ends the grant: it does where the
/// recipe's waiters read a data change as a release (see the `queue` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnChange {
    Lost,
    Ignore,
}

/// A held position in a recipe's queue: the lock node, its fencing token and its fate.
///
/// Recipe guards ([`ZkMutexGuard`](crate::ZkMutexGuard), ...) dereference to it. It owns
/// everything it needs (`'static`, `Send` and `Sync`), so it can move into a spawned task.
/// Dropping it deletes the node in the background; the guard's `release()` does so and
/// reports errors.
///
/// # Example
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::ZkMutex;
///
/// let mutex = ZkMutex::new(&session, "/locks/orders-42")?;
/// let guard = mutex.lock().await?;
/// println!("holding {} with token {} (czxid {:#x})", guard.path(), guard.token(), guard.zxid());
/// assert!(guard.is_held());
/// guard.release().await?;
/// # Ok(()) }
/// ```
pub struct Grant {
    session: Session,
    epoch: Arc<Epoch>,
    path: String,
    token: FencingToken,
    czxid: i64,
    /// The session's suspension count when granted (see `LossPolicy::Suspension`).
    since: u64,
    release: Release,
    on_change: OnChange,
    /// The one watch of this grant's node, set up by the first `lost()`: `Some(reason)` once
    /// the node is observed gone or changed.
    loss: OnceLock<watch::Receiver<Option<LossReason>>>,
    released: bool,
}

impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("path", &self.path)
            .field("token", &self.token)
            .field("session_id", &format_args!("{:#x}", self.epoch.id()))
            .field("held", &self.is_held())
            .finish()
    }
}

impl Grant {
    pub(crate) fn new(
        session: Session,
        epoch: Arc<Epoch>,
        path: String,
        token: FencingToken,
        czxid: i64,
        release: Release,
        on_change: OnChange,
    ) -> Grant {
        let since = epoch.register(&path);
        Grant {
            session,
            epoch,
            path,
            token,
            czxid,
            since,
            release,
            on_change,
            loss: OnceLock::new(),
            released: false,
        }
    }

    /// The fencing token, strictly increasing in grant order for this lock: the node's
    /// sequence number for the recipes on one long-lived root ([`ZkMutex`](crate::ZkMutex),
    /// [`ZkRwLock`](crate::ZkRwLock), [`LeaderElection`](crate::LeaderElection)), its creation
    /// zxid for a [`ZkLockSpace`](crate::ZkLockSpace) key (whose directory is reaped when
    /// idle). Hand it to storage with every write made under the grant.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// let token: u64 = guard.token().as_u64();
    /// # }
    /// ```
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The node's creation zxid: ordered across the whole ensemble.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// let zxid: i64 = guard.zxid();
    /// # }
    /// ```
    pub fn zxid(&self) -> i64 {
        self.czxid
    }

    /// The full path of the node (relative to the session's chroot).
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// assert!(guard.path().starts_with("/locks/orders-42/lock-"));
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The ZooKeeper session the grant was made on.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// println!("granted on session {:#x}", guard.session_id());
    /// # }
    /// ```
    pub fn session_id(&self) -> i64 {
        self.epoch.id()
    }

    /// The ZooKeeper session the grant was made in.
    pub(crate) fn epoch(&self) -> &Arc<Epoch> {
        &self.epoch
    }

    /// Whether the grant still holds as far as this client knows: its session is alive (and,
    /// under [`LossPolicy::Suspension`](crate::LossPolicy::Suspension), connected) and no
    /// deletion or change of its node has been observed (by [`lost`](Grant::lost)). A `true`
    /// can be stale by the time you act on it; the fencing token is what makes acting safe.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// if !guard.is_held() {
    ///     return; // stop working on the resource
    /// }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        !self.released && self.observed().is_none() && self.epoch.holds(self.since)
    }

    /// Resolves when the grant is lost: its session expired, was given up or closed, its node
    /// was deleted or changed by someone else, or (under
    /// [`LossPolicy::Suspension`](crate::LossPolicy::Suspension)) the connection was
    /// suspended. Race it against the work done under the lock.
    ///
    /// The first call sets one watch on the node (one request); every later call, and every
    /// concurrent one, shares it, so calling it on each pass of a `select!` loop costs nothing.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call loses nothing; the watch stays set for the next one.
    ///
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// tokio::select! {
    ///     reason = guard.lost() => eprintln!("lock lost ({reason:?}); abandoning the work"),
    ///     _ = work() => {}
    /// }
    /// # }
    /// ```
    pub async fn lost(&self) -> LossReason {
        let mut observed = self.loss.get_or_init(|| self.watch_node()).clone();
        let reason = tokio::select! {
            _ = self.epoch.lost(self.since) => {
                if self.epoch.is_closed() {
                    LossReason::SessionClosed
                } else if self.epoch.is_lost() {
                    LossReason::SessionExpired
                } else {
                    LossReason::Suspended
                }
            }
            Ok(reason) = observed.wait_for(Option::is_some) => (*reason).unwrap_or(LossReason::NodeDeleted),
        };
        if reason == LossReason::SessionClosed {
            debug!(node = %self.path, ?reason, "grant lost");
        } else {
            warn!(node = %self.path, ?reason, "grant lost");
        }
        reason
    }

    /// The client of the ZooKeeper session this grant was made on, for a
    /// [`fenced_write`](Grant::fenced_write) or anything else.
    ///
    /// # Errors
    ///
    /// [`Error::SessionExpired`](crate::Error::SessionExpired) or
    /// [`Error::SessionClosed`](crate::Error::SessionClosed) once that session is over.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), zk_recipes::Error> {
    /// let client = guard.client()?;
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> Result<zk::Client> {
        self.epoch.client()
    }

    /// zookeeper-client's own transaction builder ([`zk::CheckWriter`], through
    /// [`FencedWrite`]) with the ownership check already in it: the transaction commits only
    /// while this grant's node exists, so the writes and the check are one atomic multi-op.
    /// Add any operation the client has, with your own ACLs; [`FencedWrite::commit`] reports
    /// a lost grant as [`Error::Lost`](crate::Error::Lost).
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = guard.client()?;
    /// let mut write = guard.fenced_write(&client)?;
    /// write.add_set_data("/app/config", b"v2", None)?;
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Zk`](crate::Error::Zk) if the client refuses the node's path (a client with
    /// another chroot than the grant's session).
    pub fn fenced_write<'c>(&self, client: &'c zk::Client) -> Result<FencedWrite<'c>> {
        let version = (self.on_change == OnChange::Lost).then_some(0);
        FencedWrite::new(
            client,
            self.epoch.clone(),
            self.path.clone(),
            version,
            self.since,
        )
    }

    /// What the node's watch has seen, if it is set.
    fn observed(&self) -> Option<LossReason> {
        self.loss.get().and_then(|rx| *rx.borrow())
    }

    /// Starts the one task that watches this grant's node; it ends when the grant goes.
    fn watch_node(&self) -> watch::Receiver<Option<LossReason>> {
        let (tx, rx) = watch::channel(None);
        let (epoch, path, on_change) = (self.epoch.clone(), self.path.clone(), self.on_change);
        let czxid = self.czxid;
        tokio::spawn(async move {
            tokio::select! {
                reason = watch_taken(&epoch, &path, on_change, czxid) => { let _ = tx.send(Some(reason)); }
                _ = tx.closed() => {}
            }
        });
        rx
    }

    /// Deletes the node, handing over to the next contender.
    ///
    /// Cancel safe: a release dropped before it completes leaves the deletion to the
    /// background, as dropping the grant does.
    pub(crate) async fn release(mut self) -> Result<()> {
        let span = debug_span!("release", node = %self.path, session_id = format_args!("{:#x}", self.epoch.id()));
        let result = async {
            match self.epoch.delete(&self.path, self.release).await? {
                Deleted::ByUs => {
                    debug!("released");
                    Ok(())
                }
                Deleted::Before => Err(crate::Error::Lost {
                    path: self.path.clone(),
                }),
            }
        }
        .instrument(span)
        .await;
        // Only now: had the future been dropped on the way, `Drop` would clean up.
        self.released = true;
        self.epoch.unregister(&self.path);
        result
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if !self.released {
            self.epoch.unregister(&self.path);
            self.session.clean_up(
                self.epoch.clone(),
                std::mem::take(&mut self.path),
                self.release,
            );
        }
    }
}

/// Our node deleted: by someone else, unless the session's end did it (the server deletes an
/// expired session's ephemeral nodes and may tell this connection so before it says the
/// session is over, as 3.9 did in a release storm). One request tells: on a live session it
/// is answered; on an ended one it fails, and this pends so that the caller reports the
/// session's end.
async fn deleted_or_ended(epoch: &Epoch, path: &str) -> LossReason {
    match epoch
        .retry(path, |c| async move { c.check_stat(path).await })
        .await
    {
        Ok(_) => LossReason::NodeDeleted,
        Err(_) => std::future::pending().await,
    }
}

/// Resolves when `path` is observed deleted (or changed, where that ends the grant); pends
/// forever once the session is over (the caller races it against the session's own signal).
async fn watch_taken(epoch: &Epoch, path: &str, on_change: OnChange, czxid: i64) -> LossReason {
    loop {
        let watched = match epoch
            .retry(path, |c| async move { c.check_and_watch_stat(path).await })
            .await
        {
            Ok(watched) => watched,
            // A run of broken connections on a session that lives on: look again once it is
            // back (the session's end is the caller's other signal).
            Err(crate::Error::ConnectionLost) => {
                epoch.until_reconnected().await;
                if epoch.is_lost() {
                    return std::future::pending().await;
                }
                continue;
            }
            Err(_) => return std::future::pending().await,
        };
        let watcher = match watched {
            (None, _) => return deleted_or_ended(epoch, path).await,
            // Another node at our path (ours is gone) is not ours.
            (Some(stat), _) if stat.czxid != czxid => return deleted_or_ended(epoch, path).await,
            // Our node is created at data version 0; only a change makes it another.
            (Some(stat), _) if on_change == OnChange::Lost && stat.version != 0 => {
                return LossReason::NodeChanged
            }
            (Some(_), watcher) => watcher,
        };
        match watcher.changed().await.event_type {
            zk::EventType::NodeDeleted => return deleted_or_ended(epoch, path).await,
            zk::EventType::NodeDataChanged if on_change == OnChange::Lost => {
                return LossReason::NodeChanged
            }
            zk::EventType::Session => return std::future::pending().await,
            _ => continue,
        }
    }
}
