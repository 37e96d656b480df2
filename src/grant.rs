//! [`Grant`]: a contender node that holds, as every recipe hands it out.

use std::fmt;
use std::sync::Arc;

use tracing::{info, info_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::{connection_lost, Error, Result};
use crate::fence::{FencedWrite, FencingToken};
use crate::queue::{delete_contender, OwnedNode};
use crate::session::{Epoch, Session};

/// Why a [`Grant`] stopped being held, as [`Grant::lost`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// The ZooKeeper session expired, was closed, or was given up after a disconnect that
    /// lasted a session timeout.
    SessionExpired,
    /// The connection is suspended and the session's policy is
    /// [`LossPolicy::Suspension`](crate::LossPolicy::Suspension).
    Suspended,
    /// The node was deleted by someone else (an operator, a script).
    NodeDeleted,
    /// The node's data was changed by someone else (an operator, Curator's `Revoker`). In the
    /// recipes whose holders release with a data change (mutex, read/write lock, semaphore),
    /// the contender behind takes that for a release and proceeds.
    NodeChanged,
}

/// A held position in a recipe's queue: the lock node, its fencing token and its fate.
///
/// Recipe guards ([`ZkMutexGuard`](crate::ZkMutexGuard), ...) dereference to it. Dropping it
/// deletes the node in the background; [`release`](crate::ZkMutexGuard::release) does so and
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
    /// Known to be the first live node of its queue: released as a head release (see
    /// `queue::delete_contender`).
    head: bool,
    /// Whether the recipe's waiters read a data change of the node as its release: then a
    /// change by someone else ends the grant.
    changes_release: bool,
    /// Why the node stopped being ours, once observed (`None` while it is).
    taken: std::sync::Mutex<Option<LossReason>>,
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
        node: OwnedNode,
        sequence: i64,
        czxid: i64,
        head: bool,
        changes_release: bool,
    ) -> Grant {
        debug_assert!(!node.is_armed());
        let token = FencingToken::from_sequence(sequence)
            .expect("wrapped sequences are refused before a grant");
        Grant {
            session: node.session.clone(),
            epoch: node.epoch.clone(),
            path: node.path.clone(),
            token,
            czxid,
            since: node.epoch.register(&node.path),
            head,
            changes_release,
            taken: Default::default(),
            released: false,
        }
    }

    /// The fencing token: the node's sequence number, strictly increasing in grant order for
    /// this root. Hand it to storage with every write made under the grant.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) {
    /// let token: u64 = guard.token().into();
    /// # }
    /// ```
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The node's creation zxid: ordered across the whole ensemble, for storage that fences
    /// many locks with one number.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) {
    /// let zxid: i64 = guard.zxid();
    /// # }
    /// ```
    pub fn zxid(&self) -> i64 {
        self.czxid
    }

    /// The full path of the node (relative to the session's chroot).
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) {
    /// assert!(guard.path().starts_with("/locks/orders-42/_c_"));
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The ZooKeeper session the grant was made on.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) {
    /// println!("granted on session {:#x}", guard.session_id());
    /// # }
    /// ```
    pub fn session_id(&self) -> i64 {
        self.epoch.id()
    }

    /// Whether the grant still holds as far as this client knows: its session is alive (and,
    /// under [`LossPolicy::Suspension`](crate::LossPolicy::Suspension), connected) and no
    /// deletion of its node has been observed. A `true` can be stale by the time you act on it;
    /// the fencing token is what makes acting safe.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) {
    /// if !guard.is_held() {
    ///     return; // stop working on the resource
    /// }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        !self.released && self.taken().is_none() && self.epoch.holds(self.since)
    }

    /// Resolves when the grant is lost: its session expired (or was given up), its node was
    /// deleted, or (under [`LossPolicy::Suspension`](crate::LossPolicy::Suspension)) the
    /// connection was suspended. Race it against the work done under the lock.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe; call it as often as you like.
    ///
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) {
    /// tokio::select! {
    ///     reason = guard.lost() => eprintln!("lock lost ({reason:?}); abandoning the work"),
    ///     _ = work() => {}
    /// }
    /// # }
    /// ```
    pub async fn lost(&self) -> LossReason {
        if let Some(reason) = self.taken() {
            return reason;
        }
        let reason = tokio::select! {
            _ = self.epoch.lost(self.since) => {
                if self.epoch.is_lost() { LossReason::SessionExpired } else { LossReason::Suspended }
            }
            reason = watch_taken(&self.epoch, &self.path, self.changes_release) => {
                *self.taken.lock().unwrap() = Some(reason);
                reason
            }
        };
        warn!(node = %self.path, ?reason, "grant lost");
        reason
    }

    /// Starts a ZooKeeper transaction that commits only while this grant holds (see
    /// [`FencedWrite`]).
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard<'_>) -> Result<(), zk_recipes::Error> {
    /// let mut write = guard.fenced_write();
    /// write.set_data("/app/config", b"v2", None);
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn fenced_write(&self) -> FencedWrite {
        FencedWrite::new(self.epoch.clone(), self.path.clone())
    }

    /// Why the node stopped being ours, if that was observed.
    fn taken(&self) -> Option<LossReason> {
        *self.taken.lock().unwrap()
    }

    /// Deletes the node, handing over to the next contender.
    ///
    /// Cancel safe: a release dropped before it completes leaves the deletion to the
    /// background, as dropping the grant does.
    pub(crate) async fn release(mut self) -> Result<()> {
        let span = info_span!("release", node = %self.path, session_id = format_args!("{:#x}", self.epoch.id()));
        let result = async {
            let mut retried = false;
            loop {
                let client = self.epoch.client()?;
                match delete_contender(&client, &self.path, self.head).await {
                    Ok(()) => {
                        info!("released");
                        return Ok(());
                    }
                    // After a broken connection our first delete may well have gone through.
                    Err(zk::Error::NoNode) if retried => return Ok(()),
                    Err(zk::Error::NoNode) => {
                        return Err(Error::Lost {
                            path: self.path.clone(),
                        })
                    }
                    Err(e) if connection_lost(&e) => {
                        drop(client);
                        retried = true;
                        self.epoch.wait_reconnect().await;
                    }
                    Err(err) => return Err(Error::zk(err, &self.path)),
                }
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
            self.session.clean_up(
                self.epoch.clone(),
                std::mem::take(&mut self.path),
                self.head,
            );
        }
    }
}

/// Resolves when `path` is observed deleted (or, with `changes_release`, changed); pends
/// forever once the session is over (the caller races it against the session's own signal).
async fn watch_taken(epoch: &Epoch, path: &str, changes_release: bool) -> LossReason {
    loop {
        let Ok(client) = epoch.client() else {
            return std::future::pending().await;
        };
        let watcher = match client.check_and_watch_stat(path).await {
            Ok((None, _)) => return LossReason::NodeDeleted,
            // Our node is created at data version 0; only a change makes it another.
            Ok((Some(stat), _)) if changes_release && stat.version != 0 => {
                return LossReason::NodeChanged
            }
            Ok((Some(_), watcher)) => watcher,
            Err(e) if connection_lost(&e) => {
                drop(client);
                epoch.wait_reconnect().await;
                continue;
            }
            Err(_) => return std::future::pending().await,
        };
        drop(client);
        match watcher.changed().await.event_type {
            zk::EventType::NodeDeleted => return LossReason::NodeDeleted,
            zk::EventType::NodeDataChanged if changes_release => return LossReason::NodeChanged,
            zk::EventType::Session => return std::future::pending().await,
            _ => continue,
        }
    }
}
