//! A partitioner member's state machine, one task per member: read the members, give back
//! what is no longer ours (release), take what is (allocating, each lock waiting for its
//! previous owner), then hold until the members change or a lock is lost (acquired).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn, Instrument};

use super::assign::assigned_to;
use super::member::{lock, Owned, ZkPartitionMember};
use super::{Assignment, PartitionState};
use crate::error::{Error, Result};
use crate::multilock::first_of;
use crate::{Members, ZkGroup, ZkGroupMember, ZkLockSpace, ZkLockSpaceGuard};

/// The pause after a retryable error (a connection lost, a session expired) before the
/// member reads the group again: doubled each time in a row, up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What a member's task starts with.
pub(super) struct Task {
    pub(super) id: String,
    pub(super) group: Arc<ZkGroup>,
    pub(super) space: Arc<ZkLockSpace>,
    pub(super) partitions: Arc<Vec<String>>,
    pub(super) member: ZkGroupMember,
}

/// The member's state machine, running.
struct Machine {
    id: String,
    group: Arc<ZkGroup>,
    space: Arc<ZkLockSpace>,
    partitions: Arc<Vec<String>>,
    owned: Owned,
    tx: watch::Sender<Assignment>,
    stop: watch::Receiver<bool>,
    /// The members as last read, and the share they give this member.
    seen: Members,
    share: Vec<String>,
}

/// What ended a wait.
enum Next {
    Stop,
    /// The members as read now (or the error of reading them).
    Members(Result<Members>),
    /// A lock we held is lost.
    Lost(String),
}

pub(super) fn start(task: Task) -> ZkPartitionMember {
    let Task {
        id,
        group,
        space,
        partitions,
        member,
    } = task;
    let (tx, rx) = watch::channel(Assignment {
        state: PartitionState::Allocating,
        owned: BTreeMap::new(),
        share: Vec::new(),
        members: Vec::new(),
        error: None,
    });
    let (stop_tx, stop) = watch::channel(false);
    let owned: Owned = Arc::default();
    let machine = Machine {
        id: id.clone(),
        group,
        space: space.clone(),
        partitions,
        owned: owned.clone(),
        tx,
        stop,
        seen: Members::default(),
        share: Vec::new(),
    };
    let span = tracing::debug_span!("partition_member", id = %id);
    let task = tokio::spawn(machine.run(member).instrument(span));
    ZkPartitionMember {
        id,
        space: space.path().to_owned(),
        owned,
        assignment: rx,
        stop: stop_tx,
        task: Some(task),
    }
}

impl Machine {
    async fn run(mut self, member: ZkGroupMember) {
        let ended = self.rounds().await;
        // Leave first: the others start taking our share at once, waiting on our locks.
        if let Err(e) = member.release().await {
            debug!(error = %e, "leaving the group failed; the node goes with the session");
        }
        let all: Vec<String> = lock(&self.owned).keys().cloned().collect();
        self.release(&all).await;
        match &ended {
            Ok(()) => info!("left the partitioner"),
            Err(e) => warn!(error = %e, "the partition member failed"),
        }
        self.publish(PartitionState::Failure, ended.err());
    }

    /// The rounds, until told to stop (`Ok`) or an error that needs a fix (`Err`).
    async fn rounds(&mut self) -> Result<()> {
        let mut pause = FIRST_PAUSE;
        let mut next = Next::Members(self.group.members().await);
        loop {
            let read = match next {
                Next::Stop => return Ok(()),
                Next::Lost(partition) => {
                    debug!(%partition, "a partition's lock was lost");
                    self.release(&[partition]).await;
                    // Read again: a lost lock often means a lost session, and other members.
                    self.members_now().await
                }
                Next::Members(read) => read,
            };
            match read {
                Ok(members) => {
                    pause = FIRST_PAUSE;
                    self.seen = members;
                }
                Err(e) if e.is_retryable() => {
                    debug!(error = %e, ?pause, "reading the group failed; again after a pause");
                    self.publish(PartitionState::Allocating, None);
                    next = match self.pause(pause).await {
                        true => Next::Stop,
                        false => self.members_now().await.into(),
                    };
                    pause = (pause * 2).min(MAX_PAUSE);
                    continue;
                }
                Err(e) => return Err(e),
            }
            self.share = self.share_of_seen();
            // Release: what is no longer ours, and what we no longer hold, first.
            let extra: Vec<String> = {
                let owned = lock(&self.owned);
                owned
                    .iter()
                    .filter(|(p, g)| !self.share.contains(p) || !g.is_held())
                    .map(|(p, _)| p.clone())
                    .collect()
            };
            if !extra.is_empty() {
                self.publish(PartitionState::Release, None);
                debug!(count = extra.len(), "releasing partitions no longer ours");
                self.release(&extra).await;
            }
            // Acquire: the rest of our share.
            match self.acquire().await {
                Ok(Some(interrupted)) => {
                    next = interrupted;
                    continue;
                }
                Ok(None) => {}
                Err(e) if e.is_retryable() => {
                    debug!(error = %e, ?pause, "taking a partition failed; again after a pause");
                    next = match self.pause(pause).await {
                        true => Next::Stop,
                        false => self.members_now().await.into(),
                    };
                    pause = (pause * 2).min(MAX_PAUSE);
                    continue;
                }
                Err(e) => return Err(e),
            }
            self.publish(PartitionState::Acquired, None);
            debug!(
                owned = self.share.len(),
                members = self.seen.len(),
                "share acquired"
            );
            // Hold, until the members change, a lock is lost, or we are told to stop.
            next = self.hold().await;
        }
    }

    /// Our share by the members last read: none while our own node is not among them (after
    /// a session expiry, until the group's keeper made it again).
    fn share_of_seen(&self) -> Vec<String> {
        if !self.seen.contains(&self.id) {
            return Vec::new();
        }
        let members: Vec<&str> = self.seen.iter().map(|(id, _)| id).collect();
        let partitions: Vec<&str> = self.partitions.iter().map(String::as_str).collect();
        assigned_to(&self.id, &members, &partitions)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// Takes every partition of the share not held yet, all at once (each lock FIFO among
    /// its contenders, the previous owner's first). `Some` when interrupted by a change of
    /// the members or a stop: what was taken so far is kept (the next round decides), what
    /// was still awaited is given up (the tasks' futures are dropped, their nodes deleted).
    async fn acquire(&mut self) -> Result<Option<Next>> {
        let missing: Vec<String> = {
            let owned = lock(&self.owned);
            self.share
                .iter()
                .filter(|p| !owned.contains_key(*p))
                .cloned()
                .collect()
        };
        if missing.is_empty() {
            return Ok(None);
        }
        self.publish(PartitionState::Allocating, None);
        debug!(count = missing.len(), "taking partitions");
        let mut taking: JoinSet<(String, Result<ZkLockSpaceGuard>)> = JoinSet::new();
        for p in missing {
            let space = self.space.clone();
            taking.spawn(async move {
                let got = space.lock(&p).await;
                (p, got)
            });
        }
        let mut failed = None;
        // One wait for a change of the members for the whole acquisition (each call reads
        // the group and sets its watches).
        let (group, seen) = (self.group.clone(), self.seen.clone());
        let changed = group.changed(&seen);
        tokio::pin!(changed);
        let mut stop = self.stop.clone();
        loop {
            let joined = tokio::select! {
                joined = taking.join_next() => joined,
                _ = stop.wait_for(|s| *s) => return Ok(Some(Next::Stop)),
                read = &mut changed => return Ok(Some(Next::Members(read))),
            };
            let Some(joined) = joined else { break };
            match joined {
                Ok((p, Ok(guard))) => {
                    lock(&self.owned).insert(p, Arc::new(guard));
                    self.publish(PartitionState::Allocating, None);
                }
                Ok((p, Err(e))) => {
                    debug!(partition = %p, error = %e, "taking a partition failed");
                    failed.get_or_insert(e);
                }
                Err(e) => {
                    failed.get_or_insert(Error::internal(format!("a lock task failed: {e}")));
                }
            }
        }
        failed.map_or(Ok(None), Err)
    }

    /// Waits for a change of the members, the loss of a lock we hold, or a stop.
    async fn hold(&self) -> Next {
        let guards: Vec<(String, Arc<ZkLockSpaceGuard>)> = lock(&self.owned)
            .iter()
            .map(|(p, g)| (p.clone(), g.clone()))
            .collect();
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = stop.wait_for(|s| *s) => Next::Stop,
            read = self.group.changed(&self.seen) => Next::Members(read),
            (i, reason) = first_of(guards.iter().map(|(_, g)| g.lost())) => {
                debug!(partition = %guards[i].0, ?reason, "partition lost");
                Next::Lost(guards[i].0.clone())
            }
        }
    }

    /// Gives back `partitions`' locks, all at once (a release that fails leaves its node to
    /// the background or to the session's end).
    async fn release(&self, partitions: &[String]) {
        let taken: Vec<(String, Arc<ZkLockSpaceGuard>)> = {
            let mut owned = lock(&self.owned);
            partitions
                .iter()
                .filter_map(|p| owned.remove(p).map(|g| (p.clone(), g)))
                .collect()
        };
        if taken.is_empty() {
            return;
        }
        self.publish(PartitionState::Release, None);
        let mut releasing = JoinSet::new();
        for (p, guard) in taken {
            releasing.spawn(async move {
                // The handle may hold a clone for a moment (a fenced write being made): then
                // the last clone's drop releases, in the background.
                if let Ok(guard) = Arc::try_unwrap(guard) {
                    if let Err(e) = guard.release().await {
                        debug!(partition = %p, error = %e, "release failed");
                    }
                }
            });
        }
        while releasing.join_next().await.is_some() {}
    }

    /// The members now (not waiting for a change), or the stop.
    async fn members_now(&self) -> Result<Members> {
        self.group.members().await
    }

    /// Sleeps `pause`; `true` when told to stop meanwhile.
    async fn pause(&self, pause: Duration) -> bool {
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = stop.wait_for(|s| *s) => true,
            _ = tokio::time::sleep(pause) => false,
        }
    }

    fn publish(&self, state: PartitionState, error: Option<Error>) {
        let owned: BTreeMap<String, crate::FencingToken> = lock(&self.owned)
            .iter()
            .map(|(p, g)| (p.clone(), g.token()))
            .collect();
        let members: Vec<String> = self.seen.iter().map(|(id, _)| id.to_owned()).collect();
        let (share, error) = match state {
            PartitionState::Failure => (Vec::new(), error),
            _ => (self.share.clone(), None),
        };
        self.tx.send_if_modified(|a| {
            let now = Assignment {
                state,
                owned,
                share,
                members,
                error,
            };
            let changed = a.state != now.state
                || a.owned != now.owned
                || a.share != now.share
                || a.members != now.members
                || now.error.is_some();
            *a = now;
            changed
        });
    }
}

impl From<Result<Members>> for Next {
    fn from(read: Result<Members>) -> Next {
        Next::Members(read)
    }
}
