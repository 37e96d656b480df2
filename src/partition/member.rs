//! A partitioner member's handle: what it owns now, a watch of its assignment, the fenced
//! writes of its partitions, and leaving.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use zookeeper_client as zk;

use super::{Assignment, PartitionState};
use crate::error::{Error, Result};
use crate::fence::{FencedWrite, FencingToken};
use crate::ZkLockSpaceGuard;

/// The locks a member holds, by partition: shared by its state machine (which takes and
/// gives them back) and its handle (which reads them).
pub(super) type Owned = Arc<Mutex<BTreeMap<String, Arc<ZkLockSpaceGuard>>>>;

pub(super) fn lock(owned: &Owned) -> MutexGuard<'_, BTreeMap<String, Arc<ZkLockSpaceGuard>>> {
    owned.lock().unwrap_or_else(|e| e.into_inner())
}

/// A member of a [`ZkPartitioner`](crate::ZkPartitioner), from
/// [`join`](crate::ZkPartitioner::join): a task of its own keeps its share of the partitions
/// (gives back what it should no longer own, then takes what it should) until
/// [`leave`](ZkPartitionMember::leave), or until the member is dropped (it then leaves in
/// the background).
///
/// ```no_run
/// # async fn demo(p: zk_recipes::ZkPartitioner) -> Result<(), zk_recipes::Error> {
/// let me = p.join("worker-7").await?;
/// let mut changes = me.subscribe();
/// loop {
///     let now = changes.borrow_and_update().clone();
///     println!("{:?}: {} partitions", now.state(), now.owned().len());
///     if changes.changed().await.is_err() { break; }
/// }
/// # Ok(()) }
/// ```
pub struct ZkPartitionMember {
    pub(super) id: String,
    pub(super) space: String,
    pub(super) owned: Owned,
    pub(super) assignment: watch::Receiver<Assignment>,
    pub(super) stop: watch::Sender<bool>,
    pub(super) task: Option<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for ZkPartitionMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let now = self.assignment.borrow();
        f.debug_struct("ZkPartitionMember")
            .field("id", &self.id)
            .field("state", &now.state())
            .field("owned", &now.owned().len())
            .finish()
    }
}

impl ZkPartitionMember {
    /// The member's id.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkPartitionMember) {
    /// assert_eq!(me.id(), "worker-7");
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The assignment as last published.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkPartitionMember) {
    /// println!("{:?}", me.assignment().state());
    /// # }
    /// ```
    pub fn assignment(&self) -> Assignment {
        self.assignment.borrow().clone()
    }

    /// A watch of the assignment: every phase and every change of what is owned.
    ///
    /// ```no_run
    /// # async fn demo(me: zk_recipes::ZkPartitionMember) {
    /// let mut changes = me.subscribe();
    /// while changes.changed().await.is_ok() {
    ///     println!("{:?}", changes.borrow().state());
    /// }
    /// # }
    /// ```
    pub fn subscribe(&self) -> watch::Receiver<Assignment> {
        self.assignment.clone()
    }

    /// Waits until the member owns its whole share ([`PartitionState::Acquired`]) and
    /// returns that assignment; at once if it already does.
    ///
    /// # Errors
    ///
    /// The error that ended the member ([`PartitionState::Failure`]), or
    /// [`Error::SessionClosed`] if it ended without one.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    ///
    /// ```no_run
    /// # async fn demo(me: zk_recipes::ZkPartitionMember) -> Result<(), zk_recipes::Error> {
    /// let mine = me.acquired().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquired(&self) -> Result<Assignment> {
        let mut rx = self.assignment.clone();
        let seen = rx
            .wait_for(|a| {
                matches!(
                    a.state(),
                    PartitionState::Acquired | PartitionState::Failure
                )
            })
            .await
            .map(|a| a.clone());
        match seen {
            Ok(a) if a.state() == PartitionState::Acquired => Ok(a),
            Ok(a) => Err(a.error().cloned().unwrap_or(Error::SessionClosed)),
            Err(_) => Err(Error::SessionClosed),
        }
    }

    /// Whether this member holds `partition`'s lock now ([`Grant::is_held`](crate::Grant::is_held)).
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkPartitionMember) {
    /// if me.owns("queue-3") { /* consume it */ }
    /// # }
    /// ```
    pub fn owns(&self, partition: &str) -> bool {
        lock(&self.owned)
            .get(partition)
            .is_some_and(|g| g.is_held())
    }

    /// The fencing token of `partition`, while this member holds its lock.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkPartitionMember) {
    /// if let Some(token) = me.token("queue-3") { println!("{token}"); }
    /// # }
    /// ```
    pub fn token(&self, partition: &str) -> Option<FencingToken> {
        lock(&self.owned).get(partition).map(|g| g.token())
    }

    /// A transaction that commits only while this member holds `partition`'s lock: the
    /// lock's [`FencedWrite`] (see [`Grant::fenced_write`](crate::Grant::fenced_write)).
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] when the member does not hold the partition's lock (its path: the
    /// key's directory), and as [`Grant::fenced_write`](crate::Grant::fenced_write).
    ///
    /// ```no_run
    /// # async fn demo(me: zk_recipes::ZkPartitionMember, session: zk_recipes::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// let client = session.client().await?;
    /// let mut write = me.fenced_write("queue-3", &client)?;
    /// write.add_set_data("/work/offsets/queue-3", b"1207", None)?;
    /// write.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn fenced_write<'c>(
        &self,
        partition: &str,
        client: &'c zk::Client,
    ) -> Result<FencedWrite<'c>> {
        match lock(&self.owned).get(partition) {
            Some(guard) => guard.fenced_write(client),
            None => Err(Error::Lost {
                path: format!("{}/{partition}", self.space),
            }),
        }
    }

    /// Leaves: the member's node goes (the others start taking its share, waiting for its
    /// locks), then every lock is released.
    ///
    /// # Errors
    ///
    /// None so far: what fails on the way (a connection lost) is left to the background and
    /// to the session's end; the error is logged.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the member is already stopped; a dropped future leaves the rest to the
    /// background.
    ///
    /// ```no_run
    /// # async fn demo(me: zk_recipes::ZkPartitionMember) -> Result<(), zk_recipes::Error> {
    /// me.leave().await?;
    /// # Ok(()) }
    /// ```
    pub async fn leave(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.await
                .map_err(|e| Error::internal(format!("the partition member failed: {e}")))?;
        }
        Ok(())
    }
}

impl Drop for ZkPartitionMember {
    fn drop(&mut self) {
        // The task leaves the group and releases every lock as it stops, in the background.
        let _ = self.stop.send(true);
    }
}
