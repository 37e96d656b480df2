//! [`ZkMutex`]: a distributed mutex whose grants carry fencing tokens.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;
use crate::grant::Grant;
use crate::guard::{Guard, OwnedGuard};
use crate::queue::{exclusive, Queue, Rule, Wait};
use crate::session::Session;

/// Curator's `InterProcessMutex` names its nodes `_c_{uuid}-lock-NNNNNNNNNN`; so do we, so
/// that Rust and Java workers exclude each other on one path.
const RULE: Rule = Rule {
    names: &["lock-"],
    decide: exclusive,
    head_release: true,
};

/// A distributed mutex on a ZooKeeper path: one holder at a time, granted in FIFO order, each
/// grant with a [`FencingToken`](crate::FencingToken) larger than every earlier one.
///
/// Each contender creates an ephemeral sequential node under the root; the smallest holds and
/// every other watches only its immediate predecessor, so a release wakes exactly one waiter.
/// The holder deletes its node together with a data change in one transaction, which tells the
/// woken waiter that everything ahead of it is gone: it holds without reading anything, so a
/// handoff costs one write round trip. A crashed holder's node goes with its session. Not reentrant: a second `lock()` from the
/// same process queues behind the first like any other contender.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{Session, SessionOptions, ZkMutex};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let mutex = ZkMutex::new(&session, "/locks/orders-42")?;
///
/// let guard = mutex.lock().await?;
/// let token = guard.token(); // pass to storage with every write
/// // ... critical section ...
/// guard.release().await?;
/// # let _ = token; Ok(()) }
/// ```
pub struct ZkMutex {
    queue: Queue,
}

impl fmt::Debug for ZkMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkMutex")
            .field("path", &self.queue.root().as_str())
            .finish()
    }
}

impl ZkMutex {
    /// A mutex on `path` (relative to the session's chroot). Nothing is sent to ZooKeeper
    /// until the first acquisition, which creates the path as persistent nodes if missing.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let mutex = zk_recipes::ZkMutex::new(session, "/locks/orders-42")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str) -> Result<ZkMutex> {
        Ok(ZkMutex {
            queue: Queue::new(session, path)?,
        })
    }

    /// The root path.
    ///
    /// ```no_run
    /// # fn demo(mutex: zk_recipes::ZkMutex) {
    /// assert_eq!(mutex.path(), "/locks/orders-42");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.queue.root().as_str()
    }

    /// Waits for the lock (FIFO). If the session expires while waiting, it enqueues again on
    /// the new session.
    ///
    /// # Errors
    ///
    /// [`Error::NoAuth`](crate::Error::NoAuth) when the ACL forbids the root,
    /// [`Error::UnsuitableRoot`](crate::Error::UnsuitableRoot) for a container, TTL or
    /// ephemeral root, [`Error::SequenceWrapped`](crate::Error::SequenceWrapped),
    /// [`Error::Lost`](crate::Error::Lost) when our node was deleted while waiting,
    /// [`Error::SessionClosed`](crate::Error::SessionClosed), or
    /// [`Error::Unreachable`](crate::Error::Unreachable) when no new session could be opened.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future at any point removes the contender's node in the
    /// background (never blocking other contenders), and no lock is held.
    ///
    /// ```no_run
    /// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), zk_recipes::Error> {
    /// let guard = mutex.lock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<ZkMutexGuard<'_>> {
        let grant = self
            .acquire(Wait::Forever)
            .await?
            .expect("waits until granted");
        Ok(Guard::new(grant))
    }

    /// Takes the lock if it is free now; `Ok(None)` otherwise (costs one round trip, leaves no
    /// node behind).
    ///
    /// # Errors
    ///
    /// As [`lock`](ZkMutex::lock), except that a session expiry is returned as
    /// [`Error::SessionExpired`](crate::Error::SessionExpired).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](ZkMutex::lock).
    ///
    /// ```no_run
    /// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), zk_recipes::Error> {
    /// match mutex.try_lock().await? {
    ///     Some(guard) => println!("got it: token {}", guard.token()),
    ///     None => println!("busy"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<ZkMutexGuard<'_>>> {
        Ok(self.acquire(Wait::No).await?.map(Guard::new))
    }

    /// Waits for the lock at most `timeout`; `Ok(None)` when it was not granted in time.
    ///
    /// # Errors
    ///
    /// As [`lock`](ZkMutex::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](ZkMutex::lock).
    ///
    /// ```no_run
    /// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), zk_recipes::Error> {
    /// use std::time::Duration;
    /// if let Some(guard) = mutex.lock_timeout(Duration::from_secs(2)).await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<Option<ZkMutexGuard<'_>>> {
        let grant = self.acquire(Wait::Until(Instant::now() + timeout)).await?;
        Ok(grant.map(Guard::new))
    }

    /// [`lock`](ZkMutex::lock) for an `Arc<ZkMutex>`, returning a guard that owns its mutex
    /// (`'static`, can move into tasks).
    ///
    /// # Errors
    ///
    /// As [`lock`](ZkMutex::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](ZkMutex::lock).
    ///
    /// ```no_run
    /// # async fn demo(mutex: std::sync::Arc<zk_recipes::ZkMutex>) -> Result<(), zk_recipes::Error> {
    /// let guard = mutex.clone().lock_owned().await?;
    /// tokio::spawn(async move {
    ///     // ... work under the lock ...
    ///     guard.release().await
    /// });
    /// # Ok(()) }
    /// ```
    pub async fn lock_owned(self: Arc<Self>) -> Result<OwnedZkMutexGuard> {
        let grant = self
            .acquire(Wait::Forever)
            .await?
            .expect("waits until granted");
        Ok(OwnedGuard::new(grant, self))
    }

    /// [`try_lock`](ZkMutex::try_lock) for an `Arc<ZkMutex>`.
    ///
    /// # Errors
    ///
    /// As [`try_lock`](ZkMutex::try_lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`lock`](ZkMutex::lock).
    ///
    /// ```no_run
    /// # async fn demo(mutex: std::sync::Arc<zk_recipes::ZkMutex>) -> Result<(), zk_recipes::Error> {
    /// let maybe = mutex.try_lock_owned().await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_lock_owned(self: Arc<Self>) -> Result<Option<OwnedZkMutexGuard>> {
        Ok(self
            .acquire(Wait::No)
            .await?
            .map(|grant| OwnedGuard::new(grant, self)))
    }

    async fn acquire(&self, wait: Wait) -> Result<Option<Grant>> {
        self.queue.acquire(RULE, 0, &[], wait).await
    }
}

/// The held mutex, borrowed from its [`ZkMutex`]; see [`Guard`].
pub type ZkMutexGuard<'a> = Guard<'a, ZkMutex>;

/// The held mutex, owning an `Arc` of its [`ZkMutex`]; see [`OwnedGuard`].
pub type OwnedZkMutexGuard = OwnedGuard<ZkMutex>;
