//! [`ZkMutex`]: a distributed mutex whose grants carry fencing tokens.

use std::fmt;

use crate::error::Result;
use crate::grant::Grant;
use crate::guard::Guard;
use crate::layout::kind::RecipeKind;
use crate::queue::{exclusive, Queue, Rule, Wait};
use crate::session::Session;

/// Curator's `InterProcessMutex` names its nodes `_c_{uuid}-lock-NNNNNNNNNN` and orders them by
/// the suffix after `lock-`; ours are `lock-NNNNNNNNNN` (the attempt's id in the data), so Rust
/// and Java workers exclude each other on one path, and a waiter's predecessor has a name that
/// its sequence tells.
pub(crate) const RULE: Rule = Rule {
    names: &[crate::layout::names::LOCK],
    decide: exclusive,
    naming: crate::path::Naming::Plain,
    head_release: true,
};

/// A distributed mutex on a ZooKeeper path: one holder at a time, granted in FIFO order, each
/// grant with a [`FencingToken`](crate::FencingToken) larger than every earlier one.
///
/// Each contender creates an ephemeral sequential node under the root; the smallest holds and
/// every other watches only its immediate predecessor, so a release wakes exactly one waiter.
/// The holder deletes its node together with a data change in one transaction, which tells the
/// woken waiter that everything ahead of it is gone: it holds without reading anything, so a
/// handoff costs one write round trip. A crashed holder's node goes with its session. Not
/// reentrant: a second `lock()` from the same process queues behind the first like any other
/// contender.
///
/// For a time limit, wrap [`lock`](ZkMutex::lock) in `tokio::time::timeout`; the future is
/// cancel safe, so a lock that came too late is never held (its node is deleted in the
/// background, one request):
///
/// ```no_run
/// # async fn demo(mutex: zk_recipes::ZkMutex) -> Result<(), zk_recipes::Error> {
/// use std::time::Duration;
/// match tokio::time::timeout(Duration::from_secs(2), mutex.lock()).await {
///     Ok(guard) => guard?.release().await?,
///     Err(_elapsed) => println!("busy for 2 s; try later"),
/// }
/// # Ok(()) }
/// ```
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
            queue: Queue::new(session, path, RecipeKind::Mutex)?,
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
    /// [`Error::UnsuitableRoot`](crate::Error::UnsuitableRoot) for an ephemeral root, [`Error::SequenceWrapped`](crate::Error::SequenceWrapped),
    /// [`Error::Lost`](crate::Error::Lost) when our node was deleted while waiting,
    /// [`Error::SessionClosed`](crate::Error::SessionClosed),
    /// [`Error::ConnectionLost`](crate::Error::ConnectionLost) when a request met a broken
    /// connection on every try, or [`Error::Unreachable`](crate::Error::Unreachable) when no
    /// new session could be opened. See [`Error::is_retryable`](crate::Error::is_retryable).
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
    pub async fn lock(&self) -> Result<ZkMutexGuard> {
        let grant = self.acquire(Wait::Forever).await?;
        grant.map(Guard::new).ok_or_else(never_none)
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
    pub async fn try_lock(&self) -> Result<Option<ZkMutexGuard>> {
        Ok(self.acquire(Wait::No).await?.map(Guard::new))
    }

    async fn acquire(&self, wait: Wait) -> Result<Option<Grant>> {
        self.queue.acquire(RULE, RULE.names[0], None, wait).await
    }
}

/// A blocking acquire returns a grant or an error; this error stands in for the `None` that
/// cannot come.
pub(crate) fn never_none() -> crate::Error {
    crate::Error::internal("a waiting acquisition returned without a grant".to_owned())
}

/// The held mutex; see [`Guard`].
pub type ZkMutexGuard = Guard<ZkMutex>;

impl crate::guard::Sealed for ZkMutex {}
impl crate::guard::Recipe for ZkMutex {
    type Held = crate::grant::Grant;
}
