//! [`ZkRwLock`]: a distributed read/write lock on the shared queue.

use std::fmt;

use crate::error::Result;
use crate::guard::Guard;
use crate::layout::kind::RecipeKind;
use crate::layout::rules::read_write;
use crate::mutex::never_none;
use crate::queue::{Queue, Rule, Wait};
use crate::session::Session;

use crate::layout::names::{READ as READER, WRITE as WRITER};

/// Curator's `InterProcessReadWriteLock` names: `_c_{uuid}-__READ__NNNNNNNNNN` and
/// `_c_{uuid}-__WRIT__NNNNNNNNNN`, ordered together by sequence; the read/write rule of
/// [`layout::rules::read_write`](crate::layout::rules::read_write).
pub(crate) const RULE: Rule = Rule {
    names: &[READER, WRITER],
    decide: read_write,
    naming: crate::path::Naming::Protected,
    head_release: true,
};

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
pub type ZkRwLockGuard = Guard<ZkRwLock>;

impl crate::guard::Sealed for ZkRwLock {}
impl crate::guard::Recipe for ZkRwLock {
    type Held = crate::grant::Grant;
}

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
            queue: Queue::new(session, path, RecipeKind::RwLock)?,
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
    pub async fn read(&self) -> Result<ZkRwLockGuard> {
        let grant = self
            .queue
            .acquire(RULE, READER, None, Wait::Forever)
            .await?;
        grant.map(Guard::new).ok_or_else(never_none)
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
    pub async fn try_read(&self) -> Result<Option<ZkRwLockGuard>> {
        Ok(self
            .queue
            .acquire(RULE, READER, None, Wait::No)
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
    pub async fn write(&self) -> Result<ZkRwLockGuard> {
        let grant = self
            .queue
            .acquire(RULE, WRITER, None, Wait::Forever)
            .await?;
        grant.map(Guard::new).ok_or_else(never_none)
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
    pub async fn try_write(&self) -> Result<Option<ZkRwLockGuard>> {
        Ok(self
            .queue
            .acquire(RULE, WRITER, None, Wait::No)
            .await?
            .map(Guard::new))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layout::rules::Decision;
    use crate::path::Contender;

    /// A queue of readers (`R`) and writers (`W`), sequences 0, 1, ...
    pub(crate) fn queue(kinds: &str) -> Vec<Contender> {
        kinds
            .chars()
            .enumerate()
            .map(|(i, k)| Contender {
                name: format!("{k}{i:010}"),
                kind: if k == 'W' { WRITER } else { READER },
                sequence: i as i64,
            })
            .collect()
    }

    #[test]
    fn readers_share_until_a_writer_and_watch_the_closest_writer() {
        let q = queue("RRWRRWR");
        let decisions: Vec<Decision> = (0..q.len()).map(|i| read_write(&q, i)).collect();
        use Decision::*;
        assert_eq!(
            decisions,
            [Hold, Hold, Watch(1), Watch(2), Watch(2), Watch(4), Watch(5)]
        );
        assert_eq!(read_write(&queue("W"), 0), Hold);
        assert_eq!(read_write(&queue("RW"), 1), Watch(0));
    }
}
