//! What `inspect` shows, computed from a snapshot of the tree: every recipe queue, its
//! contenders in queue order (holders first), their tokens, sessions, ages and owners, what
//! each waits for, and the warnings an operator must act on. Pure: no server here; the
//! snapshot is read by `read.rs` and the sessions' fate by `sessions.rs`.

mod queue;
mod semaphore;
mod warnings;

use std::collections::HashMap;

use serde::Serialize;

use zk_recipes::layout::names::Family;
use zk_recipes::layout::owner::OwnerRecord;
use zk_recipes::layout::{SEMAPHORE_LEASES, SEMAPHORE_LOCKS};

use super::marks::{self, Mark, Space};
use queue::dir_queues;
use semaphore::{is_semaphore_root, semaphore_queue};

pub use warnings::silent_too_long;

/// What `inspect` needs of a node's stat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    pub czxid: i64,
    /// Creation time, milliseconds since the epoch (the server's clock).
    pub ctime: i64,
    pub ephemeral_owner: i64,
    pub cversion: i32,
    pub num_children: i32,
}

/// A node whose children were read.
#[derive(Clone, Debug, Default)]
pub struct Dir {
    pub path: String,
    pub stat: Stat,
    pub data: Vec<u8>,
    /// The data of its `~zk-recipes-anchor` child, read by path (`None`: no anchor); the
    /// anchor is not among `children`.
    pub anchor: Option<Vec<u8>>,
    pub children: Vec<Child>,
    /// Set when `--max-nodes` cut the listing: `children` holds its head.
    pub cut: Option<Cut>,
}

/// A listing that `--max-nodes` cut: how many of how many children (the anchor aside) were
/// read. What was read is the head: the other children, then the contenders in queue order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Cut {
    pub shown: usize,
    pub of: usize,
}

/// A child: its stat, its data when it looks like a contender, its own children when read.
#[derive(Clone, Debug, Default)]
pub struct Child {
    pub name: String,
    pub stat: Stat,
    pub data: Vec<u8>,
    pub dir: Option<Dir>,
}

impl Dir {
    fn child(&self, name: &str) -> Option<&Child> {
        self.children.iter().find(|c| c.name == name)
    }

    fn anchored(&self) -> bool {
        self.anchor.is_some()
    }

    fn mark(&self) -> Mark {
        Mark::of(self.anchor.as_deref(), &self.data)
    }

    /// A child directory of this one that is a lock space's key in use (see `marks`).
    fn key_in_use(&self) -> Option<&str> {
        self.children.iter().find_map(|c| {
            let d = c.dir.as_ref()?;
            let children = d
                .children
                .iter()
                .map(|k| (k.name.as_str(), k.data.as_slice()));
            marks::key_in_use(d.anchor.as_deref(), children).then_some(c.name.as_str())
        })
    }

    fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// The fate of a session as the servers tell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionState {
    /// Some server has a connection of it.
    Connected,
    /// No server has a connection, but the session lives (until its timeout).
    Disconnected,
    /// The server that keeps the sessions (the leader, or a standalone server) has no such
    /// session.
    Gone,
}

/// What the four-letter words said about sessions.
#[derive(Clone, Debug, Default)]
pub struct Sessions {
    /// Every server was asked `cons` and answered: a session missing from all answers has no
    /// connection.
    pub all_answered: bool,
    /// Sessions with a connection, and the server that has it.
    pub connected: HashMap<i64, String>,
    /// The sessions the leader (or a standalone server) tracks, with when each expires
    /// unless heard from (ms since the epoch, when known); `None` when no such answer.
    pub tracked: Option<HashMap<i64, Option<i64>>>,
    /// How long ago each connected session was last heard from, by its server's own clock.
    pub heard: HashMap<i64, Heard>,
}

/// When a server last answered a session (`cons`: its `lresp`), against the session's timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heard {
    /// Milliseconds since the server last sent the session an answer (to a ping or a
    /// request), by the server's clock; `None` when that clock could not be read.
    pub silent_ms: Option<i64>,
    /// The session's negotiated timeout (`cons`: `to`).
    pub timeout_ms: i64,
}

impl Sessions {
    /// `(state, expires_at_ms)`, or `None` when it cannot be told.
    pub fn state(&self, sid: i64) -> Option<(SessionState, Option<i64>)> {
        if self.connected.contains_key(&sid) {
            return Some((SessionState::Connected, None));
        }
        match &self.tracked {
            Some(tracked) => match tracked.get(&sid) {
                Some(expires) if self.all_answered => Some((SessionState::Disconnected, *expires)),
                Some(_) => None,
                None => Some((SessionState::Gone, None)),
            },
            None if self.all_answered => Some((SessionState::Disconnected, None)),
            None => None,
        }
    }
}

/// One recipe queue.
#[derive(Clone, Debug, Serialize)]
pub struct Queue {
    /// Its root (a semaphore's root, not its `locks`/`leases`).
    pub path: String,
    /// `mutex`, `keyed-lock`, `rwlock`, `semaphore`, `election`, or `idle` (an anchored
    /// zk-recipes root nobody holds or waits for).
    pub kind: &'static str,
    /// Which clients' nodes are there: `zk-recipes` (its owner record in the data), `curator`
    /// (Curator's protected names without it: Curator, zookeeper-client's `Client::lock`,
    /// zk-recipes' election), `kazoo`, `zookeeper` (ZooKeeper's Java recipes), `unknown`.
    pub libraries: Vec<&'static str>,
    /// A keyed lock's key (its directory's name, decoded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A semaphore's permits, when stored in its root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permits: Option<u32>,
    /// What zk-recipes hands out as the token here: `sequence`, `czxid`, or `none` (recipes
    /// with no tokens).
    pub tokens: &'static str,
    /// Whether the root has the zk-recipes anchor.
    pub anchored: bool,
    /// The root's mark as text (`zk-recipes:mutex`, ...; a group's is its root's data), `""` for
    /// an anchor of a version before the marks; absent without an anchor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mark: Option<String>,
    /// The library type the mark names (`ZkMutex`, `ZkLockSpace`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marked_as: Option<&'static str>,
    /// The lock space this directory is a key's directory of (its parent), when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_space: Option<String>,
    /// Set when `--max-nodes` cut the root's listing (a semaphore's: its `leases/` or
    /// `locks/`): the contenders shown are the head of the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<Cut>,
    pub counter: Counter,
    /// Holders, then waiters, in queue order.
    pub contenders: Vec<Contender>,
    pub warnings: Vec<Warning>,
}

/// The root's sequence counter: the next sequence, and how many tokens are left before its
/// end (`i32::MAX`, which zk-recipes refuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Counter {
    pub next: i64,
    pub left: i64,
}

impl Counter {
    /// From a parent's stat: ZooKeeper counts creates of children and reports
    /// `cversion = 2 * creates - children` (32 bits, wrapping), so creates come back as
    /// `(cversion + children) / 2`.
    pub fn of(stat: &Stat) -> Counter {
        let creates = (u64::from(stat.cversion as u32) + stat.num_children.max(0) as u64) / 2;
        let next = creates as i64;
        Counter {
            next,
            left: (i64::from(i32::MAX) - next).max(0),
        }
    }
}

/// A holder or a waiter.
#[derive(Clone, Debug, Serialize)]
pub struct Contender {
    /// 1-based place in the queue.
    pub position: usize,
    /// `holder` or `waiter`.
    pub role: &'static str,
    /// The node's name (relative to the queue's path: `leases/...` in a semaphore).
    pub node: String,
    /// `lock`, `read`, `write`, `lease` or `leadership`.
    pub wants: &'static str,
    pub library: &'static str,
    pub sequence: i64,
    /// The token a zk-recipes grant of this node carries (`tokens` says which number).
    pub token: Option<u64>,
    /// `0x...`; `None` for a persistent node.
    pub session: Option<String>,
    /// Whether a server has the session's connection; `None` when not asked.
    pub session_state: Option<SessionState>,
    /// When a disconnected session expires unless its client comes back, in ms from now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_expires_in_ms: Option<i64>,
    /// How long ago the session was last heard from (its server's last answer to it, by the
    /// server's clock); `None` when not known (not asked, no connection, or no clock to
    /// compare with).
    pub silent_ms: Option<i64>,
    /// The session's timeout, as negotiated with its server.
    pub session_timeout_ms: Option<i64>,
    /// The server that has the session's connection (`cons`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Creation time (the server's clock), RFC 3339 and ms since the epoch.
    pub created: String,
    pub ctime_ms: i64,
    /// Now minus creation time (this machine's clock).
    pub age_ms: i64,
    /// The owner label (zk-recipes' `owner=`), or the node's data as text (Curator's default
    /// is the client's IP address, kazoo's its identifier, an election's the candidate info).
    pub owner: Option<String>,
    /// What it waits for: the node it watches, or a free lease.
    pub waits_for: Option<String>,
}

/// Something an operator must act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// `persistent-node`, `counter-near-end`, `counter-used-up`, `unanchored-root`,
    /// `session-disconnected`, `session-gone`, `session-silent`, `mixed-recipes`,
    /// `anchored-key`, `mark-mismatch`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub message: String,
}

/// Every queue in `root`'s snapshot, by path. `parent_anchor` is the data of the anchor of
/// `root`'s parent (a key's directory is told by its parent).
pub fn queues(
    root: &Dir,
    parent_anchor: Option<&[u8]>,
    sessions: &Sessions,
    now_ms: i64,
) -> Vec<Queue> {
    let mut out = Vec::new();
    let parent = Parent {
        path: super::read::parent_of(&root.path),
        mark: Mark::of(parent_anchor, b""),
        key_in_use: None,
    };
    visit(root, parent, sessions, now_ms, &mut out);
    out.sort_by(|a, b| a.path.cmp(&b.path).then(a.kind.cmp(b.kind)));
    out
}

/// What a directory's parent tells about it: whether it is a key's directory in a lock space.
#[derive(Clone, Copy)]
struct Parent<'a> {
    path: Option<&'a str>,
    mark: Mark,
    /// Another child of the parent that is a lock space's key in use.
    key_in_use: Option<&'a str>,
}

impl Parent<'_> {
    fn space(&self) -> Space {
        marks::space_of(self.mark, self.key_in_use)
    }
}

fn visit(dir: &Dir, parent: Parent<'_>, sessions: &Sessions, now_ms: i64, out: &mut Vec<Queue>) {
    let semaphore = is_semaphore_root(dir);
    if semaphore {
        out.push(semaphore_queue(dir, parent, sessions, now_ms));
    } else {
        out.extend(dir_queues(dir, parent, sessions, now_ms));
    }
    let me = Parent {
        path: Some(&dir.path),
        mark: dir.mark(),
        key_in_use: dir.key_in_use(),
    };
    for child in &dir.children {
        if semaphore && (child.name == SEMAPHORE_LOCKS || child.name == SEMAPHORE_LEASES) {
            continue;
        }
        if let Some(sub) = &child.dir {
            visit(sub, me, sessions, now_ms, out);
        }
    }
}

fn family_name(family: Family) -> &'static str {
    match family {
        Family::Mutex => "mutex",
        Family::RwLock => "read/write lock",
        Family::Election => "election",
        Family::Lease => "semaphore leases",
        Family::Kazoo => "kazoo lock",
        Family::ZkLock => "ZooKeeper WriteLock",
        Family::ZkElection => "ZooKeeper election",
    }
}

/// zk-recipes' owner record: the label.
fn owner_record(data: &[u8]) -> Option<String> {
    OwnerRecord::parse(data).map(|r| r.owner)
}

/// Node data for people: text, control characters as spaces, at most 120 characters.
fn text(data: &[u8]) -> Option<String> {
    let text: String = String::from_utf8_lossy(data)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut out: String = text.chars().take(120).collect();
    if text.chars().count() > 120 {
        out.push('…');
    }
    Some(out)
}

#[cfg(test)]
mod tests;
