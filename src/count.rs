//! [`ZkSharedCount`]: a 32-bit count in one node, shared by every process, on Curator's
//! `SharedCount` layout.

use std::fmt;

use tracing::{debug, debug_span, Instrument};
use zookeeper_client as zk;

use crate::claim::{claim, Make};
use crate::error::{Error, Result};
use crate::layout::kind::RecipeKind;
use crate::ops::{self, OrMissing};
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

/// A count as read, with the node version that [`ZkSharedCount::try_set`] compares against.
///
/// ```no_run
/// # async fn demo(count: zk_recipes::ZkSharedCount) -> Result<(), zk_recipes::Error> {
/// let now = count.get().await?;
/// println!("{} (version {})", now.value(), now.version());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionedCount {
    value: i32,
    version: i32,
    /// The zxid of the write this value is from: it grows with every change, a node deleted
    /// and created again included, and tells a stale read (a server behind) from a new one.
    mzxid: i64,
}

impl VersionedCount {
    /// The count.
    ///
    /// ```no_run
    /// # async fn demo(count: zk_recipes::ZkSharedCount) -> Result<(), zk_recipes::Error> {
    /// assert_eq!(count.set(7).await?.value(), 7);
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> i32 {
        self.value
    }

    /// The node's data version when this value was read or written.
    ///
    /// ```no_run
    /// # async fn demo(count: zk_recipes::ZkSharedCount) -> Result<(), zk_recipes::Error> {
    /// let before = count.get().await?;
    /// assert!(count.set(1).await?.version() > before.version());
    /// # Ok(()) }
    /// ```
    pub fn version(&self) -> i32 {
        self.version
    }
}

/// A count that every process sharing the path reads and changes: a persistent node whose data
/// is the count as 4 big-endian bytes, as Curator's `SharedCount` stores it, so Rust and Java
/// workers share one.
///
/// A missing node is created with the seed on first use, its parents too (persistent, with the
/// session's node ACLs; Curator makes the parents containers, which only matters once they are
/// empty). Changes are compare-and-set on the node's version:
/// [`try_set`](ZkSharedCount::try_set) writes only over the value it read, and
/// [`add`](ZkSharedCount::add) loops on it, so no increment is lost however many processes add
/// at once. [`changed`](ZkSharedCount::changed) waits, on a watch, for the next value.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{Session, SessionOptions, ZkSharedCount};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let workers = ZkSharedCount::new(&session, "/jobs/active-workers", 0)?;
///
/// workers.add(1).await?;
/// let now = workers.get().await?;
/// println!("{} workers", now.value());
/// let next = workers.changed(&now).await?; // someone joined or left
/// # let _ = next; Ok(()) }
/// ```
pub struct ZkSharedCount {
    session: Session,
    path: ZkPath,
    seed: i32,
    /// Set once the node is known to be a count (made with the seed and marked on first use).
    checked: tokio::sync::OnceCell<()>,
}

impl fmt::Debug for ZkSharedCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkSharedCount")
            .field("path", &self.path.as_str())
            .field("seed", &self.seed)
            .finish()
    }
}

impl ZkSharedCount {
    /// A count on `path` (relative to the session's chroot), created with `seed` by the first
    /// call that finds it missing. Nothing is sent to ZooKeeper here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path, [`Error::TooLarge`] for one longer than
    /// the server takes.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let count = zk_recipes::ZkSharedCount::new(session, "/jobs/active-workers", 0)?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str, seed: i32) -> Result<ZkSharedCount> {
        let path = ZkPath::new(path)?;
        session.check_size("the count's path", path.as_str().len() + 4)?;
        Ok(ZkSharedCount {
            session: session.clone(),
            path,
            seed,
            checked: tokio::sync::OnceCell::new(),
        })
    }

    /// The path.
    ///
    /// ```no_run
    /// # fn demo(count: zk_recipes::ZkSharedCount) {
    /// assert_eq!(count.path(), "/jobs/active-workers");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// Reads the count (one round trip; creating the node with the seed if it is missing).
    ///
    /// # Errors
    ///
    /// [`Error::BadCount`] when the node holds anything but 4 bytes,
    /// [`Error::NoAuth`] when the ACL forbids it,
    /// [`Error::UnsuitableRoot`] below an ephemeral node,
    /// [`Error::SessionExpired`], [`Error::SessionClosed`], [`Error::ConnectionLost`] or
    /// [`Error::Unreachable`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads, and creates a missing node with the seed (which a later
    /// call would create the same way).
    ///
    /// ```no_run
    /// # async fn demo(count: zk_recipes::ZkSharedCount) -> Result<(), zk_recipes::Error> {
    /// let now = count.get().await?;
    /// # Ok(()) }
    /// ```
    pub async fn get(&self) -> Result<VersionedCount> {
        let span = debug_span!("count_get", path = %self.path);
        async {
            let epoch = self.epoch().await?;
            self.read(&epoch).await
        }
        .instrument(span)
        .await
    }

    /// Sets the count to `value` whatever it was (an addition landing at the same moment is
    /// overwritten: use [`try_set`](ZkSharedCount::try_set) to write over a known value only).
    ///
    /// # Errors
    ///
    /// As [`get`](ZkSharedCount::get). [`Error::ConnectionLost`] means the write may or may not
    /// have landed: it is not sent again, since a repeat could undo a later addition.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: a write already sent may still land after the future is
    /// dropped. Read the count again to know.
    ///
    /// ```no_run
    /// # async fn demo(count: zk_recipes::ZkSharedCount) -> Result<(), zk_recipes::Error> {
    /// count.set(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set(&self, value: i32) -> Result<VersionedCount> {
        let span = debug_span!("count_set", path = %self.path, value);
        async {
            let epoch = self.epoch().await?;
            let path = self.path.as_str();
            loop {
                // Never sent again after a broken connection: a repeat landing after another
                // process's addition would undo it.
                let data = &value.to_be_bytes();
                let set = ops::send_once(&epoch, path, |c| async move {
                    c.set_data(path, data, None).await.or_missing()
                })
                .await?;
                match set {
                    Some(stat) => {
                        debug!(version = stat.version, "count set");
                        return Ok(counted(value, &stat));
                    }
                    // Missing: create it (with the seed), then set.
                    None => {
                        self.read(&epoch).await?;
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Sets the count to `value` only if it is still as `previous` read it; `Ok(None)` when
    /// someone changed it since (read again and decide again).
    ///
    /// # Errors
    ///
    /// As [`get`](ZkSharedCount::get). [`Error::ConnectionLost`] means the write may or may not
    /// have landed: it is not sent again, since a repeat would find its own write and answer
    /// "changed".
    ///
    /// The comparison is ZooKeeper's, on the node's version, as Curator's `trySetCount`: a
    /// node deleted and created again restarts at version 0, so an old `previous` can match
    /// the new node. Counts that are never deleted do not meet this.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: a write already sent may still land after the future is
    /// dropped.
    ///
    /// ```no_run
    /// # async fn demo(count: zk_recipes::ZkSharedCount) -> Result<(), zk_recipes::Error> {
    /// let now = count.get().await?;
    /// if count.try_set(&now, now.value() * 2).await?.is_none() {
    ///     println!("changed meanwhile");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_set(
        &self,
        previous: &VersionedCount,
        value: i32,
    ) -> Result<Option<VersionedCount>> {
        let span =
            debug_span!("count_try_set", path = %self.path, value, version = previous.version);
        async {
            let epoch = self.epoch().await?;
            self.compare_and_set(&epoch, previous, value).await
        }
        .instrument(span)
        .await
    }

    /// Adds `delta` (negative to subtract) and returns the count it wrote: read, then
    /// [`try_set`](ZkSharedCount::try_set), again while others change it in between. Each
    /// round that fails does so because another process's change landed, so the processes
    /// together always make progress; one process may take several rounds under contention.
    ///
    /// # Errors
    ///
    /// [`Error::BadCount`] when the sum does not fit an `i32` (nothing is written), and as
    /// [`try_set`](ZkSharedCount::try_set): after [`Error::ConnectionLost`] the addition may
    /// or may not have landed.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: an addition already sent may still land after the future is
    /// dropped.
    ///
    /// ```no_run
    /// # async fn demo(count: zk_recipes::ZkSharedCount) -> Result<(), zk_recipes::Error> {
    /// let after = count.add(1).await?;
    /// println!("now {}", after.value());
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, delta: i32) -> Result<VersionedCount> {
        let span = debug_span!("count_add", path = %self.path, delta);
        async {
            let epoch = self.epoch().await?;
            let mut rounds = 0u32;
            loop {
                rounds += 1;
                let now = self.read(&epoch).await?;
                let value = now
                    .value
                    .checked_add(delta)
                    .ok_or_else(|| Error::BadCount {
                        path: self.path.as_str().to_owned(),
                        reason: format!("{} + {delta} does not fit a 32-bit count", now.value),
                    })?;
                if let Some(written) = self.compare_and_set(&epoch, &now, value).await? {
                    debug!(value, rounds, "count added");
                    return Ok(written);
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Waits until the count has been written since `since` was read (a new value, the same
    /// value written again, or the node deleted and made again) and returns what it is then.
    /// Returns at once when it already was. Waits on a watch: nothing is sent while the count
    /// stays. A deleted count is waited for until someone makes it again (it never makes it).
    ///
    /// # Errors
    ///
    /// As [`get`](ZkSharedCount::get). A session that expires meanwhile is followed to the
    /// next one; [`Error::SessionClosed`] ends the wait.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads (and leaves a one-shot watch behind, which the server drops
    /// when it fires).
    ///
    /// ```no_run
    /// # async fn demo(count: zk_recipes::ZkSharedCount) -> Result<(), zk_recipes::Error> {
    /// let mut now = count.get().await?;
    /// loop {
    ///     now = count.changed(&now).await?;
    ///     println!("count is {}", now.value());
    /// }
    /// # }
    /// ```
    pub async fn changed(&self, since: &VersionedCount) -> Result<VersionedCount> {
        let span = debug_span!("count_changed", path = %self.path, version = since.version);
        async {
            let path = self.path.as_str();
            loop {
                let epoch = self.epoch().await?;
                let watched = epoch
                    .retry(path, |c| async move {
                        match c.get_and_watch_data(path).await {
                            Ok((data, stat, watcher)) => Ok(Watched::Read(data, stat, watcher)),
                            // Gone: wait for it to be made again (by someone's first use).
                            Err(zk::Error::NoNode) => match c.check_and_watch_stat(path).await? {
                                (None, watcher) => Ok(Watched::Missing(watcher)),
                                (Some(_), _) => Ok(Watched::Made),
                            },
                            Err(e) => Err(e),
                        }
                    })
                    .await;
                let watcher = match watched {
                    Ok(Watched::Read(data, stat, watcher)) => {
                        let now = decode(path, &data, &stat)?;
                        // A later write only: a server behind may still show an earlier one.
                        if now.mzxid > since.mzxid {
                            return Ok(now);
                        }
                        watcher
                    }
                    Ok(Watched::Missing(watcher)) => watcher,
                    Ok(Watched::Made) => continue,
                    Err(Error::SessionExpired) => {
                        epoch.ended().await;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                debug!("waiting for the count to change");
                tokio::select! {
                    event = watcher.changed() => debug!(event = ?event.event_type, "count watch fired"),
                    // A new session: read (and watch) again there.
                    _ = epoch.ended() => {}
                }
            }
        }
        .instrument(span)
        .await
    }

    /// The session's epoch, once the node is known to be a count: made with the seed when
    /// missing and marked (its anchor), once per value, so that no other recipe takes it.
    async fn epoch(&self) -> Result<std::sync::Arc<Epoch>> {
        let epoch = self.session.epoch().await?;
        self.checked
            .get_or_try_init(|| async {
                let seed = self.seed.to_be_bytes();
                let make = Make::Persistent(&seed);
                match claim(&epoch, &self.session, &self.path, RecipeKind::Count, make).await {
                    // A count this session may read but not change (its ACL): checked, not
                    // marked; its writes get the same refusal.
                    Err(Error::NoAuth { path }) if path.ends_with(crate::layout::ANCHOR) => {
                        debug!(%path, "the count cannot be marked (ACL); left unmarked");
                        Ok(())
                    }
                    other => other.map(drop),
                }
            })
            .await?;
        Ok(epoch)
    }

    /// Reads the count, creating the node (and its parents) with the seed when it is missing.
    async fn read(&self, epoch: &Epoch) -> Result<VersionedCount> {
        let path = self.path.as_str();
        loop {
            if let Some((data, stat)) = ops::read(epoch, path).await? {
                return decode(path, &data, &stat);
            }
            self.create(epoch).await?;
        }
    }

    /// Creates the node with the seed, its parents as persistent nodes; someone else's create
    /// first is as good.
    async fn create(&self, epoch: &Epoch) -> Result<()> {
        let path = self.path.as_str();
        let seed = self.seed.to_be_bytes();
        let seed = &seed;
        let options = &zk::CreateMode::Persistent.with_acls(self.session.acls());
        let parent = self.path.parent();
        if parent != "/" {
            epoch
                .retry(parent, |c| async move { c.mkdir(parent, options).await })
                .await?;
        }
        // With its mark (one path, one kind), in one transaction.
        let anchor = &self.path.child(crate::layout::ANCHOR);
        let mark = &RecipeKind::Count.mark();
        epoch
            .retry(path, |c| async move {
                let mut txn = c.new_multi_writer();
                txn.add_create(path, seed, options)?;
                txn.add_create(anchor, mark, options)?;
                match txn.commit().await {
                    Ok(_) => Ok(()),
                    Err(zk::MultiWriteError::OperationFailed {
                        index: 0,
                        source: zk::Error::NodeExists,
                    }) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            })
            .await?;
        debug!(seed = self.seed, "count created");
        Ok(())
    }

    /// One conditional write, never repeated: after a broken connection its outcome is unknown.
    async fn compare_and_set(
        &self,
        epoch: &Epoch,
        previous: &VersionedCount,
        value: i32,
    ) -> Result<Option<VersionedCount>> {
        let path = self.path.as_str();
        let data = &value.to_be_bytes();
        let version = Some(previous.version);
        let written = ops::send_once(epoch, path, |c| async move {
            match c.set_data(path, data, version).await {
                Ok(stat) => Ok(Some(stat)),
                Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await?;
        match written {
            Some(stat) => {
                debug!(version = stat.version, "count compare-and-set");
                Ok(Some(counted(value, &stat)))
            }
            None => {
                debug!("count changed meanwhile");
                Ok(None)
            }
        }
    }
}

/// What `changed` found on one look.
enum Watched {
    Read(Vec<u8>, zk::Stat, zk::OneshotWatcher),
    Missing(zk::OneshotWatcher),
    /// Made between the read and the watch: look again.
    Made,
}

fn counted(value: i32, stat: &zk::Stat) -> VersionedCount {
    VersionedCount {
        value,
        version: stat.version,
        mzxid: stat.mzxid,
    }
}

/// The count in a node's data: exactly 4 big-endian bytes, as Curator writes it.
fn decode(path: &str, data: &[u8], stat: &zk::Stat) -> Result<VersionedCount> {
    let bytes: [u8; 4] = data.try_into().map_err(|_| Error::BadCount {
        path: path.to_owned(),
        reason: format!(
            "it holds {} bytes, not a 4-byte big-endian count",
            data.len()
        ),
    })?;
    Ok(counted(i32::from_be_bytes(bytes), stat))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(version: i32) -> zk::Stat {
        zk::Stat {
            czxid: 9,
            mzxid: 9,
            pzxid: 9,
            ctime: 0,
            mtime: 0,
            version,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 4,
            num_children: 0,
        }
    }

    #[test]
    fn counts_are_four_big_endian_bytes_as_curator_writes_them() {
        // Curator: ByteBuffer.allocate(4).putInt(258).array()
        let read = decode("/c", &[0, 0, 1, 2], &stat(3)).unwrap();
        assert_eq!((read.value(), read.version()), (258, 3));
        assert_eq!(
            decode("/c", &(-2i32).to_be_bytes(), &stat(0))
                .unwrap()
                .value(),
            -2
        );
    }

    #[test]
    fn anything_but_four_bytes_is_a_typed_error() {
        for data in [&b""[..], b"12", b"12345"] {
            let err = decode("/c", data, &stat(0)).unwrap_err();
            assert!(matches!(err, Error::BadCount { .. }), "{err}");
            assert!(!err.is_retryable());
        }
    }
}
