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
//! it) releases with one transaction that writes its node's name into the root's data, writes
//! the node itself and deletes it (the session's `Release::NoteInParent`). A waiter for which
//! that would tell more than a deletion (its listing had nodes ahead of the one it watches)
//! proves it one of two ways. On a server whose events carry their transaction's zxid (3.9),
//! it also set a data watch on the watched node: a change and a deletion with the same zxid
//! are a head release, known with no read. Otherwise (3.8; or someone else's write fired the
//! data watch first; or a reconnect came between) it reads the root's data once the watched
//! node is deleted: if it names that node, and was written after the waiter's own node was
//! made (on 3.9: by the very transaction that deleted the node), it is a head release. Then
//! every node ahead of it is gone too, and the waiter decides on its listing minus all of them
//! (for every rule here it holds, however far back it was when it listed); anything else counts
//! as a plain deletion, which says nothing about the nodes ahead, and the waiter lists again.
//! The second in line needs no proof at all. A waiter watches the node ahead with a child watch,
//! which fires on its deletion only: nobody's write to a contender's node (an operator,
//! Curator's `Revoker`) moves the queue. Only the holder's own release hands over. Peers keep
//! working: Curator's lock recipes and `Client::lock` list again on any event, and never read a
//! lock root's data. Leader election has no head releases ([`Rule::head_release`]).
//!
//! **Someone else's changes.** A waiter also watches its own node, and looks at that watch
//! first: ZooKeeper delivers a session's events in the order of its transactions, so a deletion
//! of ours that came before the watched node's is seen before it, and no grant is returned for
//! a node that is gone ([`Error::Lost`](crate::Error::Lost)). The watch carries over to the
//! grant. A persistent node in a queue (`ephemeralOwner` 0) is nobody's contender and is passed
//! over; a node someone made at the name the counter would give next is stepped over
//! (`create.rs`), never taken for a used-up counter.
//!
//! The parts: [`wait`] is the algorithm (enqueue, decide, watch one node, decide again);
//! [`create`] puts a node in the queue (create and list in one burst, a lost reply recovered);
//! [`proof`] tells a head release from any other deletion; [`deep`] finds the node ahead by name where the queue may be too deep to list;
//! [`root`] checks the root once (persistent, anchored, its czxid noted). The rules live with
//! their recipes ([`exclusive`] here, as the mutex, the election and the semaphore's internal
//! lock share it; the read/write rule in `rwlock.rs`).

mod create;
mod deep;
mod guess;
mod owned;
mod proof;
mod root;
mod task;
mod wait;

use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::layout::kind::RecipeKind;
use crate::path::{Contender, Naming, ZkPath};
use crate::session::Session;

pub(crate) use create::Created;
use deep::Depths;
pub(crate) use guess::DirGuess;

pub(crate) use crate::layout::rules::{exclusive, Decision};

/// The recipe-specific part: node names and who holds / whom to watch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    /// The names this recipe's nodes carry (after the protected prefix), e.g. `["lock-"]`.
    pub names: &'static [&'static str],
    /// Decides for the contender at `ours` in the ordered queue (wrapped nodes removed).
    pub decide: fn(queue: &[Contender], ours: usize) -> Decision,
    /// How its nodes are named.
    pub naming: Naming,
    /// Whether a head releases with a head release (see the module docs). Off for leader
    /// election, whose candidates' data is the user's and whose grants ignore its changes.
    /// (A head release no longer changes the node itself, so a peer that waits for
    /// `NodeDeleted` only, as Curator's `LeaderLatch` does, would see the deletion either way.)
    pub head_release: bool,
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
    /// The session's depth hints (kept in its slots, see `deep.rs`).
    depths: Arc<Depths>,
    /// A keyed lock's directory the client does not remember: the space's guess, which its
    /// create's outcome teaches (see `guess.rs`).
    unknown_dir: Option<Arc<DirGuess>>,
}

/// What a queue's root is, and so what its tokens are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RootMode {
    /// A persistent root of this recipe kind, checked once and anchored with the kind's mark
    /// (see `root.rs` and `crate::claim`): it is never reaped, so its sequence only grows, and
    /// the sequence is the token.
    Anchored(RecipeKind),
    /// A root that may be a container the server deletes whenever it is empty (Curator creates
    /// a semaphore's leases directory so; an anchor would take a permit there): the queue
    /// follows it to its next incarnation instead of refusing it, and its sequences are no
    /// fencing tokens.
    Unanchored,
    /// A keyed lock's directory: a container, created in the same burst as the contender
    /// (`fresh`: taken not to exist) and reaped by the server once idle. Its sequence restarts
    /// with every incarnation, so the token is the contender node's creation zxid.
    Container {
        /// Whether to create the directory in the burst.
        fresh: bool,
    },
}

impl Queue {
    /// An anchored queue of recipe kind `kind` on `root`.
    pub fn new(session: &Session, root: &str, kind: RecipeKind) -> Result<Queue> {
        Ok(Queue {
            session: session.clone(),
            root: ZkPath::new(root)?,
            root_czxid: Mutex::new(None),
            mode: RootMode::Anchored(kind),
            depths: session.slot::<Depths>(),
            unknown_dir: None,
        })
    }

    /// A queue whose root gets no anchor child: for directories whose every child Curator
    /// counts (a semaphore's leases), where an anchor would take a permit. Its sequence
    /// restarts whenever the server reaps the emptied root, so its tokens are no fencing tokens.
    pub fn unanchored(session: &Session, root: &str) -> Result<Queue> {
        Ok(Queue {
            mode: RootMode::Unanchored,
            ..Queue::new(session, root, RecipeKind::Semaphore)?
        })
    }

    /// A keyed lock's queue on its container directory `root` (see [`RootMode::Container`]):
    /// one the client saw lately (`known`) is taken to exist; else `guess` says, and learns
    /// from the create whether it did.
    pub fn container(session: &Session, root: ZkPath, known: bool, guess: &Arc<DirGuess>) -> Queue {
        Queue {
            session: session.clone(),
            root,
            root_czxid: Mutex::new(None),
            mode: RootMode::Container {
                fresh: !known && !guess.exists(),
            },
            depths: session.slot::<Depths>(),
            unknown_dir: (!known).then(|| guess.clone()),
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
