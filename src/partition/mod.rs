//! [`ZkPartitioner`]: the members of a group split a set of partitions among themselves, each
//! partition owned by one member at a time, with kazoo's `SetPartitioner` phases. This file:
//! the partitioner, its layout and the published [`Assignment`]; `assign.rs`: who owns what
//! (pure); `member.rs`: a member's handle; `task.rs`: the member's state machine (release,
//! then acquire, then hold).

mod assign;
mod member;
mod task;

pub use member::ZkPartitionMember;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fence::FencingToken;
use crate::key;
use crate::path::ZkPath;
use crate::session::Session;
use crate::{ZkGroup, ZkLockSpace};

/// The member directory below the partitioner's path (a [`ZkGroup`]), as kazoo names it.
const PARTY: &str = "party";
/// The lock space below the partitioner's path: one key per partition.
const LOCKS: &str = "locks";

/// Where a member is in kazoo's cycle (`PartitionState`).
///
/// ```text
/// Allocating --(every partition of its share locked)--> Acquired
/// Acquired --(the members changed, or a lock was lost)--> Release --> Allocating
/// any --(an error that needs a fix, the session closed, or the member left)--> Failure
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionState {
    /// Taking the locks of its share (waiting for their previous owners to let go).
    Allocating,
    /// Owns every partition of its share, as the members were last read.
    Acquired,
    /// Giving back partitions it no longer should own (the members changed), before taking
    /// any new one.
    Release,
    /// Over: the member left, its session was closed, or an error needs a fix
    /// ([`Assignment::error`]). It owns nothing.
    Failure,
}

/// What a member owns and why, as its state machine last published it
/// ([`ZkPartitionMember::assignment`], [`ZkPartitionMember::subscribe`]).
///
/// ```no_run
/// # fn demo(me: zk_recipes::ZkPartitionMember) {
/// let now = me.assignment();
/// println!("{:?}: {} of {:?}", now.state(), now.owned().len(), now.share());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Assignment {
    state: PartitionState,
    owned: BTreeMap<String, FencingToken>,
    share: Vec<String>,
    members: Vec<String>,
    error: Option<Error>,
}

impl Assignment {
    /// The phase.
    ///
    /// ```no_run
    /// # fn demo(a: zk_recipes::Assignment) {
    /// if a.state() == zk_recipes::PartitionState::Acquired { println!("settled"); }
    /// # }
    /// ```
    pub fn state(&self) -> PartitionState {
        self.state
    }

    /// The partitions this member holds the lock of, each with its fencing token (the lock
    /// node's creation zxid: storage fences each partition by it).
    ///
    /// ```no_run
    /// # fn demo(a: zk_recipes::Assignment) {
    /// for (partition, token) in a.owned() { println!("{partition}: {token}"); }
    /// # }
    /// ```
    pub fn owned(&self) -> &BTreeMap<String, FencingToken> {
        &self.owned
    }

    /// The partitions this member should own, by the members it read last (sorted).
    ///
    /// ```no_run
    /// # fn demo(a: zk_recipes::Assignment) {
    /// println!("{} partitions are mine", a.share().len());
    /// # }
    /// ```
    pub fn share(&self) -> &[String] {
        &self.share
    }

    /// The members as this member read them last (sorted).
    ///
    /// ```no_run
    /// # fn demo(a: zk_recipes::Assignment) {
    /// println!("{} members", a.members().len());
    /// # }
    /// ```
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// In [`PartitionState::Failure`], the error that ended the member (`None` when it left).
    ///
    /// ```no_run
    /// # fn demo(a: zk_recipes::Assignment) {
    /// if let Some(err) = a.error() { eprintln!("partitioner failed: {err}"); }
    /// # }
    /// ```
    pub fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }
}

/// A set of partitions (queues, shards, tenants) split among the members of a group, each
/// partition owned by exactly one member at a time: kazoo's `SetPartitioner`, on locks.
///
/// Layout under the partitioner's path: `party/`, a [`ZkGroup`] (a member is an ephemeral
/// node named by its id), and `locks/`, a [`ZkLockSpace`] with one key per partition.
/// Ownership **is** holding the partition's lock, so no partition ever has two owners, during
/// a rebalance too, and each owner has a [fencing token](crate::FencingToken) per partition
/// for its writes.
///
/// Every member reads the members and computes the same split from them (rendezvous hashing
/// with bounded loads: a member's share is at most `ceil(partitions / members)`, and a member
/// joining or leaving moves little more than its own share; see
/// [`plan`](ZkPartitioner::plan)). When the members change, each member first **releases**
/// the partitions it no longer should own, then **acquires** its new ones, each lock waiting
/// for its previous owner's release; a member that died or froze lets go when its session
/// ends (a session timeout). Its [`Assignment`] says where it is ([`PartitionState`]: kazoo's
/// allocating, acquired, release, failure) and what it owns.
///
/// Node names are this library's (a Curator `GroupMember` for the party, Curator's keyed
/// lock nodes), not kazoo's: a kazoo `SetPartitioner` on the same path would not take part.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::ZkPartitioner;
///
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// let queues: Vec<String> = (0..64).map(|i| format!("queue-{i}")).collect();
/// let partitioner = ZkPartitioner::new(&session, "/work/queues", queues)?;
/// let me = partitioner.join("worker-7").await?;
/// let mine = me.acquired().await?;
/// for (queue, token) in mine.owned() {
///     println!("consuming {queue} under token {token}");
/// }
/// me.leave().await?;
/// # Ok(()) }
/// ```
pub struct ZkPartitioner {
    path: ZkPath,
    group: Arc<ZkGroup>,
    space: Arc<ZkLockSpace>,
    /// Sorted, without duplicates.
    partitions: Arc<Vec<String>>,
}

impl fmt::Debug for ZkPartitioner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkPartitioner")
            .field("path", &self.path.as_str())
            .field("partitions", &self.partitions.len())
            .finish()
    }
}

impl ZkPartitioner {
    /// The partitioner of `partitions` at `path`. Nothing is sent to ZooKeeper until a
    /// member joins.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSet`] for no partition or one partition twice, [`Error::InvalidKey`]
    /// for a partition name no lock key can have (empty, too long), [`Error::InvalidPath`]
    /// for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let p = zk_recipes::ZkPartitioner::new(session, "/work/queues", ["a", "b", "c"])?;
    /// # Ok(()) }
    /// ```
    pub fn new(
        session: &Session,
        path: &str,
        partitions: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<ZkPartitioner> {
        let path = ZkPath::new(path)?;
        let mut set: Vec<String> = partitions.into_iter().map(Into::into).collect();
        set.sort();
        if set.is_empty() {
            return Err(Error::InvalidSet {
                what: "partition set",
                reason: "no partition in it".to_owned(),
            });
        }
        if let Some(twice) = set.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidSet {
                what: "partition set",
                reason: format!("{:?} is in it twice", twice[0]),
            });
        }
        for p in &set {
            key::encode(p)?;
        }
        Ok(ZkPartitioner {
            group: Arc::new(ZkGroup::new(session, &path.child(PARTY))?),
            space: Arc::new(ZkLockSpace::new(session, &path.child(LOCKS))?),
            path,
            partitions: Arc::new(set),
        })
    }

    /// The partitioner's path.
    ///
    /// ```no_run
    /// # fn demo(p: zk_recipes::ZkPartitioner) {
    /// assert_eq!(p.path(), "/work/queues");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// The partitions, sorted.
    ///
    /// ```no_run
    /// # fn demo(p: zk_recipes::ZkPartitioner) {
    /// println!("{} partitions", p.partitions().len());
    /// # }
    /// ```
    pub fn partitions(&self) -> &[String] {
        &self.partitions
    }

    /// Who owns which partition when `members` are the group (each partition, its member):
    /// the split every member computes. Pure; a member id given twice counts once.
    ///
    /// The rule: each (member, partition) pair has a fixed score (FNV-1a over the member's
    /// id, a `0xff` byte and the partition's name, then the splitmix64 finalizer); partitions
    /// in sorted order go to their highest-scoring member (ties: the smaller id) that owns
    /// fewer than `ceil(partitions / members)` so far.
    ///
    /// ```
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let p = zk_recipes::ZkPartitioner::new(session, "/work/queues", ["a", "b", "c", "d"])?;
    /// let plan = p.plan(&["w1", "w2"]);
    /// assert_eq!(plan.len(), 4);
    /// assert_eq!(plan.values().filter(|m| *m == "w1").count(), 2);
    /// # Ok(()) }
    /// ```
    pub fn plan(&self, members: &[&str]) -> BTreeMap<String, String> {
        let partitions: Vec<&str> = self.partitions.iter().map(String::as_str).collect();
        assign::assign(members, &partitions)
            .into_iter()
            .map(|(p, m)| (p.to_owned(), m.to_owned()))
            .collect()
    }

    /// Joins as member `id` (a group member's node `party/{id}`) and starts its state
    /// machine, which takes the member's share and follows the group from then on. Returns
    /// once the member's node exists, in [`PartitionState::Allocating`]; wait with
    /// [`acquired`](ZkPartitionMember::acquired) or follow
    /// [`subscribe`](ZkPartitionMember::subscribe).
    ///
    /// # Errors
    ///
    /// [`Error::MemberIdTaken`] when a member with this id is already in the group (through
    /// another session, or this one); and as [`ZkGroup::join`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`ZkGroup::join`]: a member node made when the future is dropped is
    /// deleted in the background.
    ///
    /// ```no_run
    /// # async fn demo(p: zk_recipes::ZkPartitioner) -> Result<(), zk_recipes::Error> {
    /// let me = p.join("worker-7").await?;
    /// # Ok(()) }
    /// ```
    pub async fn join(&self, id: &str) -> Result<ZkPartitionMember> {
        let member = self.group.join(id, b"").await?;
        Ok(task::start(task::Task {
            id: id.to_owned(),
            group: self.group.clone(),
            space: self.space.clone(),
            partitions: self.partitions.clone(),
            member,
        }))
    }
}
