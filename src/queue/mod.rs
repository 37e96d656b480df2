//! The contender queue every recipe stands on (see `ARCHITECTURE.md`).
//!
//! A contender creates `{root}/{name}` (plain, the mutex family) or `{root}/_c_{uuid}-{name}`
//! (Curator's protected form) as EPHEMERAL_SEQUENTIAL, lists the children,
//! orders those matching the recipe's names by sequence, and asks the recipe's [`Rule`] whether
//! it holds or which single node it must watch. When the watched node goes, it decides again on
//! what it already knows before listing again: removing nodes ahead of a contender can only let
//! it proceed, and nodes created later sort behind it, so a "hold" reached from the old listing
//! minus the deleted node is true now (the second in line after the first goes holds without a
//! read).
//!
//! **Head releases.** A contender that knows it is the head of the queue (nothing live ahead of
//! it) releases with one transaction that changes its node's data and deletes it
//! ([`Release::AsHead`](crate::session::Release)). Its watcher's exists-watch is a data watch, so it fires once, with
//! `NodeDataChanged`, and that event says "the node you watch was the head and is gone": every
//! node ahead of it is gone too, so the waiter decides on its listing minus all of them and
//! (for every rule here) holds without a read, however far back it was when it listed. A plain
//! `NodeDeleted` (a cancelled waiter, an expired session, a peer such as Curator) says nothing
//! about the nodes ahead, and the waiter lists again. Nothing else in this crate changes a
//! contender's data; a change by someone else (an operator, Curator's `Revoker`) is read as a
//! release, so it ends the grant like a deletion does (`lost()` reports
//! [`LossReason::NodeChanged`](crate::LossReason::NodeChanged)). Peers keep working: Curator's
//! lock recipes and `Client::lock` list again on any event. Leader election has no head
//! releases ([`Rule::head_release`]), because Curator's `LeaderLatch` acts on `NodeDeleted`
//! only.

//!
//! The parts: [`wait`] is the algorithm (enqueue, decide, watch one node, decide again);
//! [`create`] puts a node in the queue (create and list in one burst, a lost reply recovered);
//! [`deep`] finds the node ahead by name where the queue may be too deep to list;
//! [`root`] checks the root once (persistent, anchored, its czxid noted). The rules live with
//! their recipes ([`exclusive`] here, as the mutex, the election and the semaphore's internal
//! lock share it; the read/write rule in `rwlock.rs`).

mod create;
mod deep;
mod root;
mod wait;

use std::sync::Mutex;

use crate::error::Result;
use crate::path::{Contender, Naming, ZkPath};
use crate::session::Session;

pub(crate) use create::Created;
pub(crate) use deep::Depths;

/// What a contender does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It holds.
    Hold,
    /// It waits for the node at this index of the queue to go.
    Watch(usize),
}

/// The recipe-specific part: node names and who holds / whom to watch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    /// The names this recipe's nodes carry (after the protected prefix), e.g. `["lock-"]`.
    pub names: &'static [&'static str],
    /// Decides for the contender at `ours` in the ordered queue (wrapped nodes removed).
    pub decide: fn(queue: &[Contender], ours: usize) -> Decision,
    /// How its nodes are named.
    pub naming: Naming,
    /// Whether a head releases with a head release (see the module docs). Off where a peer
    /// waits for `NodeDeleted` only (Curator's `LeaderLatch` ignores `NodeDataChanged`, and its
    /// watch, spent on that event, would never see the deletion).
    pub head_release: bool,
}

/// The mutex rule: the first holds; everyone else watches its immediate predecessor.
pub(crate) fn exclusive(_queue: &[Contender], ours: usize) -> Decision {
    if ours == 0 {
        Decision::Hold
    } else {
        Decision::Watch(ours - 1)
    }
}

/// Whether an acquisition may wait. (A time limit is the caller's `tokio::time::timeout`:
/// every acquire future is cancel safe.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Not at all (`try_*`): one round trip.
    No,
    /// As long as it takes.
    Forever,
}

/// One recipe root and its queue.
pub(crate) struct Queue {
    session: Session,
    root: ZkPath,
    /// The root's czxid, once checked: a root with another czxid was deleted and created
    /// again, and its sequence restarted.
    root_czxid: Mutex<Option<i64>>,
    mode: RootMode,
}

/// What a queue's root is, and so what its tokens are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RootMode {
    /// A persistent root, checked once and anchored (see `root.rs`): it is never reaped, so
    /// its sequence only grows, and the sequence is the token.
    Anchored,
    /// A root that may be a container the server deletes whenever it is empty (Curator creates
    /// a semaphore's leases directory so; an anchor would take a permit there): the queue
    /// follows it to its next incarnation instead of refusing it, and its sequences are no
    /// fencing tokens.
    Unanchored,
    /// A keyed lock's directory: a container, created in the same burst as the contender
    /// (`fresh`: not known to exist) and reaped by the server once idle. Its sequence restarts
    /// with every incarnation, so the token is the contender node's creation zxid.
    Container {
        /// Whether to create the directory in the burst.
        fresh: bool,
    },
}

impl Queue {
    pub fn new(session: &Session, root: &str) -> Result<Queue> {
        Ok(Queue {
            session: session.clone(),
            root: ZkPath::new(root)?,
            root_czxid: Mutex::new(None),
            mode: RootMode::Anchored,
        })
    }

    /// A queue whose root gets no anchor child: for directories whose every child Curator
    /// counts (a semaphore's leases), where an anchor would take a permit. Its sequence
    /// restarts whenever the server reaps the emptied root, so its tokens are no fencing tokens.
    pub fn unanchored(session: &Session, root: &str) -> Result<Queue> {
        Ok(Queue {
            mode: RootMode::Unanchored,
            ..Queue::new(session, root)?
        })
    }

    /// A keyed lock's queue on its container directory `root` (see [`RootMode::Container`]).
    pub fn container(session: &Session, root: ZkPath, fresh: bool) -> Queue {
        Queue {
            session: session.clone(),
            root,
            root_czxid: Mutex::new(None),
            mode: RootMode::Container { fresh },
        }
    }

    pub fn root(&self) -> &ZkPath {
        &self.root
    }

    pub fn session(&self) -> &Session {
        &self.session
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_holds_first_and_watches_predecessor() {
        let q: Vec<Contender> = [3, 5, 9]
            .iter()
            .map(|&s| Contender {
                name: format!("lock-{s:010}"),
                kind: "lock-",
                sequence: s,
            })
            .collect();
        assert_eq!(exclusive(&q, 0), Decision::Hold);
        assert_eq!(exclusive(&q, 1), Decision::Watch(0));
        assert_eq!(exclusive(&q, 2), Decision::Watch(1));
    }
}
