//! [`ZkRwLock`]: a distributed read/write lock on the shared queue.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;
use crate::guard::{Guard, OwnedGuard};
use crate::queue::{read_write, Queue, Rule, Wait, WRITER};
use crate::session::Session;

/// Curator's `InterProcessReadWriteLock` names: `_c_{uuid}-__READ__NNNNNNNNNN` and
/// `_c_{uuid}-__WRIT__NNNNNNNNNN`, ordered together by sequence.
const RULE: Rule = Rule {
    names: &["__READ__", "__WRIT__"],
    decide: read_write,
    head_release: true,
};
const READER: usize = 0;

/// A distributed read/write lock: readers hold together while no writer is ahead of them, a
/// writer holds alone, and grants follow queue order (FIFO between readers and writers, so a
/// stream of readers cannot starve a writer).
///
/// No herd: a writer watches its immediate predecessor; a reader watches the closest writer
/// ahead of it, so a writer's release wakes exactly the readers it was holding back. Every grant
/// carries a [`FencingToken`](crate::FencingToken) (readers' tokens order them among writers).
/// Node names are Curator's, so Rust and Java workers can share the lock.
///
/// # Example
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::ZkRwLock;
///
/// let lock = ZkRwLock::new(&session, "/locks/catalog")?;
/// let reading = lock.read().await?; // others may read at the same time
/// reading.release().await?;
/// let writing = lock.write().await?; // alone
/// writing.release().await?;
/// # Ok(()) }
/// ```
pub struct ZkRwLock {
    queue: Queue,
}

/// A held read or write lock of a [`ZkRwLock`]; see [`Guard`].
pub type ZkRwLockGuard<'a> = Guard<'a, ZkRwLock>;

/// A held read or write lock owning an `Arc` of its [`ZkRwLock`]; see [`OwnedGuard`].
pub type OwnedZkRwLockGuard = OwnedGuard<ZkRwLock>;

impl fmt::Debug for ZkRwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkRwLock")
            .field("path", &self.queue.root().as_str())
            .finish()
    }
}

impl ZkRwLock {
    /// A read/write lock on `path`. Nothing is sent until the first acquisition.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let lock = zk_recipes::ZkRwLock::new(session, "/locks/catalog")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str) -> Result<ZkRwLock> {
        Ok(ZkRwLock {
            queue: Queue::new(session, path)?,
        })
    }

    /// The root path.
    ///
    /// ```no_run
    /// # fn demo(lock: zk_recipes::ZkRwLock) {
    /// assert_eq!(lock.path(), "/locks/catalog");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.queue.root().as_str()
    }

    /// Waits for a read lock.
    ///
    /// # Errors
    ///
    /// As [`ZkMutex::lock`](crate::ZkMutex::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future removes the contender's node in the background.
    ///
    /// ```no_run
    /// # async fn demo(lock: zk_recipes::ZkRwLock) -> Result<(), zk_recipes::Error> {
    /// let guard = lock.read().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<ZkRwLockGuard<'_>> {
        Ok(Guard::new(
            self.queue
                .acquire(RULE, READER, &[], Wait::Forever)
                .await?
                .expect("waits"),
        ))
    }

    /// Takes a read lock if no writer holds or waits ahead; `Ok(None)` otherwise.
    ///
    /// # Errors
    ///
    /// As [`ZkMutex::try_lock`](crate::ZkMutex::try_lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](ZkRwLock::read).
    ///
    /// ```no_run
    /// # async fn demo(lock: zk_recipes::ZkRwLock) -> Result<(), zk_recipes::Error> {
    /// if let Some(guard) = lock.try_read().await? { guard.release().await?; }
    /// # Ok(()) }
    /// ```
    pub async fn try_read(&self) -> Result<Option<ZkRwLockGuard<'_>>> {
        Ok(self
            .queue
            .acquire(RULE, READER, &[], Wait::No)
            .await?
            .map(Guard::new))
    }

    /// Waits for a read lock at most `timeout`; `Ok(None)` if not granted in time.
    ///
    /// # Errors
    ///
    /// As [`read`](ZkRwLock::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](ZkRwLock::read).
    ///
    /// ```no_run
    /// # async fn demo(lock: zk_recipes::ZkRwLock) -> Result<(), zk_recipes::Error> {
    /// let maybe = lock.read_timeout(std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_timeout(&self, timeout: Duration) -> Result<Option<ZkRwLockGuard<'_>>> {
        let wait = Wait::Until(Instant::now() + timeout);
        Ok(self
            .queue
            .acquire(RULE, READER, &[], wait)
            .await?
            .map(Guard::new))
    }

    /// Waits for the write lock.
    ///
    /// # Errors
    ///
    /// As [`ZkMutex::lock`](crate::ZkMutex::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](ZkRwLock::read).
    ///
    /// ```no_run
    /// # async fn demo(lock: zk_recipes::ZkRwLock) -> Result<(), zk_recipes::Error> {
    /// let guard = lock.write().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write(&self) -> Result<ZkRwLockGuard<'_>> {
        Ok(Guard::new(
            self.queue
                .acquire(RULE, WRITER, &[], Wait::Forever)
                .await?
                .expect("waits"),
        ))
    }

    /// Takes the write lock if nobody holds or waits ahead; `Ok(None)` otherwise.
    ///
    /// # Errors
    ///
    /// As [`ZkMutex::try_lock`](crate::ZkMutex::try_lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](ZkRwLock::read).
    ///
    /// ```no_run
    /// # async fn demo(lock: zk_recipes::ZkRwLock) -> Result<(), zk_recipes::Error> {
    /// if let Some(guard) = lock.try_write().await? { guard.release().await?; }
    /// # Ok(()) }
    /// ```
    pub async fn try_write(&self) -> Result<Option<ZkRwLockGuard<'_>>> {
        Ok(self
            .queue
            .acquire(RULE, WRITER, &[], Wait::No)
            .await?
            .map(Guard::new))
    }

    /// Waits for the write lock at most `timeout`; `Ok(None)` if not granted in time.
    ///
    /// # Errors
    ///
    /// As [`write`](ZkRwLock::write).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](ZkRwLock::read).
    ///
    /// ```no_run
    /// # async fn demo(lock: zk_recipes::ZkRwLock) -> Result<(), zk_recipes::Error> {
    /// let maybe = lock.write_timeout(std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_timeout(&self, timeout: Duration) -> Result<Option<ZkRwLockGuard<'_>>> {
        let wait = Wait::Until(Instant::now() + timeout);
        Ok(self
            .queue
            .acquire(RULE, WRITER, &[], wait)
            .await?
            .map(Guard::new))
    }

    /// [`read`](ZkRwLock::read) for an `Arc<ZkRwLock>`, returning an owned guard.
    ///
    /// # Errors
    ///
    /// As [`read`](ZkRwLock::read).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](ZkRwLock::read).
    ///
    /// ```no_run
    /// # async fn demo(lock: std::sync::Arc<zk_recipes::ZkRwLock>) -> Result<(), zk_recipes::Error> {
    /// let guard = lock.read_owned().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_owned(self: Arc<Self>) -> Result<OwnedZkRwLockGuard> {
        let grant = self
            .queue
            .acquire(RULE, READER, &[], Wait::Forever)
            .await?
            .expect("waits");
        Ok(OwnedGuard::new(grant, self))
    }

    /// [`write`](ZkRwLock::write) for an `Arc<ZkRwLock>`, returning an owned guard.
    ///
    /// # Errors
    ///
    /// As [`write`](ZkRwLock::write).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`read`](ZkRwLock::read).
    ///
    /// ```no_run
    /// # async fn demo(lock: std::sync::Arc<zk_recipes::ZkRwLock>) -> Result<(), zk_recipes::Error> {
    /// let guard = lock.write_owned().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_owned(self: Arc<Self>) -> Result<OwnedZkRwLockGuard> {
        let grant = self
            .queue
            .acquire(RULE, WRITER, &[], Wait::Forever)
            .await?
            .expect("waits");
        Ok(OwnedGuard::new(grant, self))
    }
}
