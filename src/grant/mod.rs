//! [`Grant`]: a contender node that holds, as every recipe hands it out.

mod watch;

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing::{debug, debug_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::Result;
use crate::fence::{FencedWrite, FencingToken};
use crate::session::{Deleted, Epoch, LeaseInterest, Release, Session};

pub(crate) use watch::{NodeWatch, Seen};

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
    /// The node's data was changed by someone else (an operator, a script), in the recipes
    /// whose nodes carry only the library's owner record (mutex, keyed lock, read/write lock).
    /// Nobody else proceeds because of it: the lock moves only when this grant releases, so
    /// release it. (Curator's revocation request, `__REVOKE__`, is no loss: see
    /// [`Grant::revoke_requested`].)
    NodeChanged,
    /// The session's lease clock ran out under
    /// [`LossPolicy::Suspension`](crate::LossPolicy::Suspension): the ensemble did not answer
    /// for so long that the session may have expired (the process was frozen, or the
    /// connection silent). See [`Grant::is_held`].
    LeaseExpired,
}

/// Whether a change of a grant's node by someone else ends the grant: it does where the node
/// carries only the library's owner record (an election candidate's data is the user's).
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
/// println!("holding {} with token {} (czxid {:#x})", guard.path(), guard.token(), guard.czxid());
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
    /// What the one watch of this grant's node (followed from the grant on) has seen.
    fate: watch::Fate,
    released: bool,
    /// When a `lost()` first saw the node deleted: the grace that tells a deletion from the
    /// session's end runs from then, whatever calls are dropped and made again meanwhile.
    deletion_seen: std::sync::OnceLock<tokio::time::Instant>,
    /// Keeps the session's lease fed while the grant lives.
    _lease: LeaseInterest,
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
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        session: Session,
        epoch: Arc<Epoch>,
        path: String,
        token: FencingToken,
        czxid: i64,
        release: Release,
        on_change: OnChange,
        node: NodeWatch,
    ) -> Grant {
        let since = epoch.register(&path);
        let fate = watch::follow(epoch.clone(), node, on_change);
        Grant {
            _lease: epoch.lease_interest(),
            session,
            epoch,
            path,
            token,
            czxid,
            since,
            release,
            fate,
            released: false,
            deletion_seen: std::sync::OnceLock::new(),
        }
    }

    /// The fencing token, strictly increasing in grant order for this lock: the node's
    /// sequence number for the recipes on one long-lived root ([`ZkMutex`](crate::ZkMutex),
    /// [`ZkRwLock`](crate::ZkRwLock), [`ZkLeaderElection`](crate::ZkLeaderElection)), its creation
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

    /// The node's creation zxid (`czxid`): ordered across the whole ensemble. A
    /// [`ZkLockSpace`](crate::ZkLockSpace) key's token is this number.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// let czxid: i64 = guard.czxid();
    /// # }
    /// ```
    pub fn czxid(&self) -> i64 {
        self.czxid
    }

    /// [`czxid`](Grant::czxid) under its old name (it is the node's creation zxid, not the
    /// zxid of anything later).
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// let czxid: i64 = guard.czxid(); // was `guard.czxid()`
    /// # }
    /// ```
    #[deprecated(note = "renamed `czxid`: it is the node's creation zxid")]
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
    /// under [`LossPolicy::Suspension`](crate::LossPolicy::Suspension), connected), the
    /// session's **lease clock** still runs, and no deletion or change of its node has been
    /// observed (the grant watches its node from the moment it is made, so this needs no call
    /// to [`lost`](Grant::lost)).
    ///
    /// The lease clock: the session counts as alive only until a third of the session timeout
    /// before the server could expire it, reckoned from when the last request that went through
    /// the ensemble's leader was *sent* (a heartbeat keeps it fed while anything is held or
    /// queued), on a clock that keeps counting while the process is stopped. So a process
    /// resumed after a freeze (GC, `SIGSTOP`, a stalled host) sees `false` here before it acts,
    /// whatever its own timers do first. Under
    /// [`LossPolicy::Expiry`](crate::LossPolicy::Expiry) it turns `true` again once the
    /// ensemble answers and the session proves alive; under `Suspension` the lapse is a loss
    /// ([`LossReason::LeaseExpired`]). A VM paused by its hypervisor may see no time pass on any
    /// clock: only a fence covers that.
    ///
    /// A `true` can be stale by the time you act on it (the check-act window); the fencing
    /// token is what makes acting safe. For an action no store can fence, [`confirm`](Grant::confirm)
    /// first.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// if !guard.is_held() {
    ///     return; // stop working on the resource
    /// }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        !self.released
            && self.observed().is_none()
            && self.epoch.holds(self.since)
            && self.epoch.lease_valid()
    }

    /// Checks on the server, in one round trip, that the grant still holds: a `sync` through
    /// the ensemble's leader and a read of the node after it (its owner must be this session),
    /// and feeds the session's lease clock from the time the request was sent. Returns how long
    /// the caller may act on the answer: the lease that remains. Use it right before an action
    /// that no store can fence (sending mail, calling a service); the window that remains is
    /// the time between this answer and the act.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`](crate::Error::Lost) when the node is gone, belongs to another session,
    /// or the grant was already seen lost; [`Error::SessionExpired`](crate::Error::SessionExpired)
    /// or [`Error::ConnectionLost`](crate::Error::ConnectionLost) when the ensemble cannot
    /// answer (not retried: a confirmation is about now).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads; a dropped call feeds nothing.
    ///
    /// ```no_run
    /// # async fn send_the_mail() {}
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) -> Result<(), zk_recipes::Error> {
    /// let left = guard.confirm().await?; // one round trip
    /// if left > std::time::Duration::from_millis(500) {
    ///     send_the_mail().await;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn confirm(&self) -> Result<std::time::Duration> {
        let lost = || crate::Error::Lost {
            path: self.path.clone(),
        };
        if self.released || self.observed().is_some() || !self.epoch.holds(self.since) {
            return Err(lost());
        }
        let sent = crate::session::lease_now();
        let client = self.epoch.client()?;
        // Sent back to back; the server answers the read after the sync, with the leader's view.
        let sync = client.sync("/");
        let stat = client.check_stat(&self.path);
        let (sync, stat) = (sync.await, stat.await);
        drop(client);
        sync.map_err(|e| self.epoch.error(e, "/"))?;
        let stat = stat.map_err(|e| self.epoch.error(e, &self.path))?;
        if stat.is_none_or(|s| s.ephemeral_owner != self.epoch.id()) {
            return Err(lost());
        }
        self.epoch.renew_lease(sent);
        if !self.epoch.holds(self.since) || self.observed().is_some() {
            return Err(lost());
        }
        let left = self.epoch.lease().remaining().ok_or_else(lost)?;
        debug!(node = %self.path, ?left, "grant confirmed");
        Ok(left)
    }

    /// Resolves when the grant is lost: its session expired, was given up or closed, its node
    /// was deleted or changed by someone else, or (under
    /// [`LossPolicy::Suspension`](crate::LossPolicy::Suspension)) the connection was
    /// suspended. Race it against the work done under the lock.
    ///
    /// The node is watched once, from the grant on (one request, or none for a grant that
    /// waited: its waiter's watch carries over); every call shares that watch, so calling it
    /// on each pass of a `select!` loop costs nothing.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call loses nothing; the watch stays set for the next one, and
    /// the short wait after a deletion (is the session over too?) runs from the first call
    /// that saw it, so a `select!` loop that makes a new call on every tick still resolves.
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
        let mut observed = self.fate.loss.clone();
        let session = || {
            if self.epoch.is_closed() {
                LossReason::SessionClosed
            } else if self.epoch.is_lost() {
                LossReason::SessionExpired
            } else if self.epoch.lapsed_after(self.since) {
                // The suspension that ended it was the lease's lapse, not a disconnect (the
                // lease's state now says nothing: it may be renewed, or run out since).
                LossReason::LeaseExpired
            } else {
                LossReason::Suspended
            }
        };
        let reason = tokio::select! {
            biased;
            _ = self.epoch.lost(self.since) => session(),
            Ok(reason) = observed.wait_for(Option::is_some) => (*reason).unwrap_or(LossReason::NodeDeleted),
        };
        // A session's end deletes its nodes too, and this client may see the deletion a
        // moment before it hears that the session is over: name the session, if that is it.
        let reason = match reason {
            LossReason::NodeDeleted => {
                let grace = self.epoch.session_timeout() / 8;
                let seen = *self.deletion_seen.get_or_init(tokio::time::Instant::now);
                match tokio::time::timeout_at(seen + grace, self.epoch.lost(self.since)).await {
                    Ok(()) => session(),
                    Err(_) => reason,
                }
            }
            other => other,
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

    /// A transaction with the ownership check already in it ([`FencedWrite`], on
    /// zookeeper-client's [`zk::CheckWriter`]): it commits only while this grant's node
    /// exists, so the writes and the check are one atomic multi-op. Add set-data, create (with
    /// your own ACLs), delete and version-check operations, each size-checked against the
    /// servers' limit; [`FencedWrite::commit`] reports a lost grant as
    /// [`Error::Lost`](crate::Error::Lost).
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
        let version = self.fate.version.load(Ordering::Acquire);
        FencedWrite::new(
            client,
            self.epoch.clone(),
            self.path.clone(),
            self.token,
            (version >= 0).then_some(version),
            self.since,
            self.fate.loss.clone(),
        )
    }

    /// Whether someone asked this holder to release, as Curator's `Revoker.attemptRevoke`
    /// does (it writes `__REVOKE__` into the node, where this client sees it at once): the
    /// request of Curator's `RevocationListener`. It is only a request: the lock is still held
    /// and moves when the holder releases, which is the holder's call.
    ///
    /// ```no_run
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// if guard.is_revoke_requested() {
    ///     guard.release().await.ok();
    /// }
    /// # }
    /// ```
    pub fn is_revoke_requested(&self) -> bool {
        *self.fate.revoke.borrow()
    }

    /// Resolves once a revocation is requested (see
    /// [`is_revoke_requested`](Grant::is_revoke_requested)); at once if it already was.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call loses nothing; the request stays seen.
    ///
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// tokio::select! {
    ///     _ = guard.revoke_requested() => println!("asked to release; finishing early"),
    ///     _ = work() => {}
    /// }
    /// guard.release().await.ok();
    /// # }
    /// ```
    pub async fn revoke_requested(&self) {
        let mut revoke = self.fate.revoke.clone();
        if revoke.wait_for(|r| *r).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// How long the session's lease clock still runs (see [`is_held`](Grant::is_held)); `None`
    /// once it has run out. A supervisor outside this process (`zkr`'s watchdog) can be told
    /// the lease's end and act on its own when this process stops telling it.
    ///
    /// ```no_run
    /// # fn demo(guard: zk_recipes::ZkMutexGuard) {
    /// if let Some(left) = guard.lease_remaining() {
    ///     println!("the session is taken to be alive for another {left:?}");
    /// }
    /// # }
    /// ```
    pub fn lease_remaining(&self) -> Option<std::time::Duration> {
        self.epoch.lease().remaining()
    }

    /// Resolves once the session's lease clock has run out (see [`is_held`](Grant::is_held)).
    pub(crate) async fn lease_lapsed(&self) {
        loop {
            match self.epoch.lease().remaining() {
                None => return,
                Some(left) => tokio::time::sleep(left).await,
            }
        }
    }

    /// What the node's watch has seen.
    fn observed(&self) -> Option<LossReason> {
        *self.fate.loss.borrow()
    }

    /// Whether the node is known to be gone: then a delete by path could only hit a namesake
    /// (another session's node in a root someone deleted and made again), so none is sent.
    fn known_gone(&self) -> bool {
        self.observed() == Some(LossReason::NodeDeleted)
    }

    /// Deletes the node, handing over to the next contender.
    ///
    /// Cancel safe: a release dropped before it completes leaves the deletion to the
    /// background, as dropping the grant does.
    pub(crate) async fn release(mut self) -> Result<()> {
        let span = debug_span!("release", node = %self.path, session_id = format_args!("{:#x}", self.epoch.id()));
        let result = async {
            if self.known_gone() {
                return Err(crate::Error::Lost {
                    path: self.path.clone(),
                });
            }
            self.fate.stop();
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
            if self.known_gone() {
                return;
            }
            self.fate.stop();
            self.session.clean_up(
                self.epoch.clone(),
                std::mem::take(&mut self.path),
                self.release,
            );
        }
    }
}
