//! What `inspect` shows, computed from a snapshot of the tree: every recipe queue, its
//! contenders in queue order (holders first), their tokens, sessions, ages and owners, what
//! each waits for, and the warnings an operator must act on. Pure: no server here; the
//! snapshot is read by `read.rs` and the sessions' fate by `sessions.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use zk_recipes::layout::kind::RecipeKind;
use zk_recipes::layout::names::{self, Family, NodeName, Style, Wants};
use zk_recipes::layout::owner::OwnerRecord;
use zk_recipes::layout::rules::{self, Contends, Decision};
use zk_recipes::layout::{semaphore_permits as permits, SEMAPHORE_LEASES, SEMAPHORE_LOCKS};

use super::marks::{self, Mark, Space};

/// Warn when fewer than this share of a root's counter is left.
const NEAR_END_SHARE: f64 = 0.10;

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

/// Curator's `InterProcessSemaphoreV2` layout: `{root}/leases` (and `{root}/locks`); or
/// zk-recipes' with the permits in the root's data (or its mark) and only `locks` left.
fn is_semaphore_root(dir: &Dir) -> bool {
    dir.child(SEMAPHORE_LEASES).is_some()
        || (dir.child(SEMAPHORE_LOCKS).is_some() && permits(&dir.data).is_some())
        || (dir.child(SEMAPHORE_LOCKS).is_some() && dir.mark() == Mark::Kind(RecipeKind::Semaphore))
}

/// The mark's fields of a queue, and its warnings: an anchor in a lock space's key
/// (`anchored-key`), contenders the mark's recipe does not hold (`mark-mismatch`).
fn with_marks(queue: &mut Queue, dir: &Dir, parent: Parent<'_>, families: &[Family], busy: bool) {
    let mark = dir.mark();
    queue.mark = marks::mark_text(dir.anchor.as_deref(), &dir.data);
    queue.marked_as = mark.kind().map(RecipeKind::type_name);
    let space = parent.space();
    if space.is_space() {
        queue.lock_space = parent.path.map(str::to_owned);
        if queue.key.is_none() {
            queue.key = zk_recipes::ZkLockSpace::key_of(dir.name());
        }
        if dir.anchored() {
            queue
                .warnings
                .push(anchored_key(dir, &space, mark, families, busy));
        }
    }
    let strangers: Vec<Family> = families
        .iter()
        .copied()
        .filter(|f| !mark.admits(*f))
        .collect();
    if !strangers.is_empty() {
        queue.warnings.push(Warning {
            kind: "mark-mismatch",
            node: None,
            message: format!(
                "{}, but it holds {}: a client uses this path as another recipe, whose \
                 contenders {} does not see; one path serves one recipe kind, so move one of \
                 them to another path",
                match mark.kind() {
                    Some(kind) => format!(
                        "marked as a {} root ({})",
                        kind.type_name(),
                        queue.mark.as_deref().unwrap_or_default()
                    ),
                    None => "anchored as a ZkMutex, ZkRwLock or LeaderElection root by an \
                             earlier version"
                        .to_owned(),
                },
                strangers
                    .iter()
                    .map(|f| format!("{} contenders", family_name(*f)))
                    .collect::<Vec<_>>()
                    .join(" and "),
                mark.kind().map_or("that recipe", RecipeKind::type_name)
            ),
        });
    }
}

/// The warning for an anchor in a lock space's key: the operator slip of taking the key's
/// directory as another recipe's root (`zkr lock SPACE/KEY` without `--key`).
fn anchored_key(dir: &Dir, space: &Space, mark: Mark, families: &[Family], busy: bool) -> Warning {
    let key = zk_recipes::ZkLockSpace::key_of(dir.name()).unwrap_or_else(|| dir.name().to_owned());
    // An anchor without a mark: an earlier version's lock or election; its contenders say which.
    let kind = mark.kind().unwrap_or_else(|| {
        families
            .iter()
            .find_map(|f| marks::kind_of_family(*f))
            .unwrap_or(RecipeKind::Mutex)
    });
    let slip = if kind == RecipeKind::Mutex {
        " (`zkr lock` without --key?)"
    } else {
        ""
    };
    let fix = match mark.repairable() {
        true if busy => format!(
            "fix, once its holders and waiters are gone: zkr repair {}",
            dir.path
        ),
        true => format!("fix: zkr repair {}", dir.path),
        false => format!(
            "zkr repair does not remove a {} root's anchor (that recipe keeps data of its own \
             there): move that recipe to another path, then delete {} and its anchor",
            kind.type_name(),
            dir.path
        ),
    };
    let told = match space {
        Space::KeysInUse { key: other } => format!(
            " (the space carries no mark, as an earlier version made it; its key {other:?} in \
             use shows it to be a lock space)"
        ),
        _ => String::new(),
    };
    Warning {
        kind: "anchored-key",
        node: None,
        message: format!(
            "key {key}: anchored as a {} root{slip}: ZkLockSpace workers refuse it; {fix}{told}",
            kind.type_name()
        ),
    }
}

/// A contender node of `dir`, parsed.
struct Member<'a> {
    name: NodeName,
    /// Its directory has the zk-recipes anchor (which Curator never makes).
    in_anchored: bool,
    child: &'a Child,
    record: Option<String>,
}

impl Contends for Member<'_> {
    fn wants(&self) -> Wants {
        self.name.wants
    }
}

impl Member<'_> {
    /// Whether this contender is zk-recipes', which passes persistent nodes in its queue over.
    fn passes_persistent(&self) -> bool {
        self.library() == "zk-recipes"
    }

    fn library(&self) -> &'static str {
        match self.name.style {
            Style::Plain | Style::Curator if self.record.is_some() => "zk-recipes",
            // An election candidate's data is the user's, so it has no owner record: a
            // zk-recipes election is told by its anchored root.
            Style::Curator if self.name.family == Family::Election && self.in_anchored => {
                "zk-recipes"
            }
            Style::Plain => "unknown",
            Style::Curator => "curator",
            Style::Kazoo => "kazoo",
            Style::ZooKeeper => "zookeeper",
        }
    }

    fn owner(&self) -> Option<String> {
        self.record.clone().or_else(|| text(&self.child.data))
    }
}

fn members(dir: &Dir) -> BTreeMap<Family, Vec<Member<'_>>> {
    let anchored = dir.anchored();
    let mut families: BTreeMap<Family, Vec<Member<'_>>> = BTreeMap::new();
    for child in &dir.children {
        if let Some(name) = names::parse(&child.name) {
            families.entry(name.family).or_default().push(Member {
                in_anchored: anchored,
                record: owner_record(&child.data),
                name,
                child,
            });
        }
    }
    for list in families.values_mut() {
        list.sort_by(|a, b| {
            a.name
                .sequence
                .cmp(&b.name.sequence)
                .then_with(|| a.child.name.cmp(&b.child.name))
        });
    }
    families
}

/// The queues of a directory that is no semaphore root: one per protocol found.
fn dir_queues(dir: &Dir, parent: Parent<'_>, sessions: &Sessions, now_ms: i64) -> Vec<Queue> {
    let families = members(dir);
    let anchored = dir.anchored();
    let mark = dir.mark();
    let counter = Counter::of(&dir.stat);
    let in_space = parent.space().is_space();
    if families.is_empty() {
        if let Some(queue) = kazoo_semaphore(dir, sessions, now_ms) {
            return vec![queue];
        }
        // A lock space shows as its keys' queues; a directory without a mark is no root.
        if mark == Mark::None || mark == Mark::Kind(RecipeKind::LockSpace) {
            return Vec::new();
        }
        let no_tokens = matches!(mark.kind(), Some(RecipeKind::Count | RecipeKind::Group));
        let mut queue = Queue {
            path: dir.path.clone(),
            kind: "idle",
            libraries: vec!["zk-recipes"],
            key: None,
            permits: None,
            tokens: if no_tokens { "none" } else { "sequence" },
            anchored,
            mark: None,
            marked_as: None,
            lock_space: None,
            cut: dir.cut,
            counter,
            contenders: Vec::new(),
            warnings: Vec::new(),
        };
        with_marks(&mut queue, dir, parent, &[], false);
        if !no_tokens {
            counter_warnings(&mut queue, false);
        }
        return vec![queue];
    }
    let mixed =
        (families.len() > 1).then(|| Warning {
            kind: "mixed-recipes",
            node: None,
            message: format!(
            "contenders of different recipes in one directory ({}) do not see each other: each \
             queue below has its own holder",
            families.keys().map(|f| family_name(*f)).collect::<Vec<_>>().join(", ")
        ),
        });
    let mut out = Vec::new();
    for (family, list) in &families {
        // Ours, unanchored: a keyed lock's directory (its nodes carry our owner record, under
        // protected names since a reaped directory restarts its sequence), or any unanchored
        // directory of a lock space.
        let keyed = *family == Family::Mutex
            && !anchored
            && (in_space || list.iter().any(|m| m.record.is_some()));
        let (kind, tokens) = match family {
            Family::Mutex if keyed => ("keyed-lock", "czxid"),
            Family::Mutex => ("mutex", "sequence"),
            Family::RwLock => ("rwlock", "sequence"),
            Family::Election => ("election", "sequence"),
            Family::Lease => ("semaphore", "sequence"),
            Family::Kazoo if list.iter().any(|m| m.name.wants == Wants::Read) => ("rwlock", "none"),
            Family::Kazoo | Family::ZkLock => ("mutex", "none"),
            Family::ZkElection => ("election", "none"),
        };
        // The library's own rules (a semaphore's leases have none: see semaphore_queue).
        let decide = |list: &[Wants], i: usize| match family {
            Family::RwLock | Family::Kazoo => rules::read_write(list, i),
            Family::Lease => Decision::Hold,
            _ => rules::exclusive(list, i),
        };
        // A zk-recipes contender passes persistent nodes over (nobody's contenders); every
        // other client's counts them in its queue. Both views, made once (a deep queue has
        // thousands of contenders).
        let everyone: Vec<usize> = (0..list.len()).collect();
        let live: Vec<usize> = everyone
            .iter()
            .copied()
            .filter(|&j| list[j].child.stat.ephemeral_owner != 0)
            .collect();
        let wants_of =
            |view: &[usize]| -> Vec<Wants> { view.iter().map(|&j| list[j].name.wants).collect() };
        let (wants_everyone, wants_live) = (wants_of(&everyone), wants_of(&live));
        let mut contenders = Vec::new();
        for (i, m) in list.iter().enumerate() {
            let persistent = m.child.stat.ephemeral_owner == 0;
            let watched = if !m.passes_persistent() || persistent {
                // A persistent node is nobody's contender: what it waits for is the other
                // clients' view of it.
                decide(&wants_everyone, i).watched()
            } else {
                let at = live.binary_search(&i).unwrap_or(0);
                decide(&wants_live, at).watched().map(|w| live[w])
            };
            let token = match tokens {
                _ if m.name.is_wrapped() => None,
                "czxid" => u64::try_from(m.child.stat.czxid).ok(),
                "sequence" => u64::try_from(m.name.sequence).ok(),
                _ => None,
            };
            contenders.push(contender(
                i + 1,
                m,
                m.child.name.clone(),
                token,
                watched.map(|w| list[w].child.name.clone()),
                sessions,
                now_ms,
            ));
        }
        let mut queue = Queue {
            path: dir.path.clone(),
            kind,
            libraries: libraries(list.iter()),
            key: keyed
                .then(|| zk_recipes::ZkLockSpace::key_of(dir.name()))
                .flatten(),
            permits: None,
            tokens,
            anchored,
            mark: None,
            marked_as: None,
            lock_space: None,
            cut: dir.cut,
            counter,
            contenders,
            warnings: mixed.iter().cloned().collect(),
        };
        with_marks(&mut queue, dir, parent, &[*family], true);
        let sequence_tokens = matches!(family, Family::Mutex | Family::RwLock | Family::Election);
        if sequence_tokens && !keyed && !anchored {
            queue.warnings.push(Warning {
                kind: "unanchored-root",
                node: None,
                message: "no ~zk-recipes-anchor child: if this root is a container (as Curator \
                          creates lock parents) ZooKeeper deletes it once empty and its sequence \
                          starts again at 0, so its sequence numbers are no fencing tokens; a \
                          zk-recipes lock on this path anchors it"
                    .to_owned(),
            });
        }
        let wrapped = list.iter().any(|m| m.name.is_wrapped());
        counter_warnings(&mut queue, wrapped);
        contender_warnings(&mut queue);
        out.push(queue);
    }
    out
}

/// Curator's `InterProcessSemaphoreV2` layout, as zk-recipes' `ZkSemaphore` shares it: the
/// leases (the first `permits` hold; one more waits for room, made by the head of the
/// internal lock), then the internal lock's queue (its head is about to take a lease).
fn semaphore_queue(dir: &Dir, parent: Parent<'_>, sessions: &Sessions, now_ms: i64) -> Queue {
    let permits = permits(&dir.data);
    let leases_dir = dir.child(SEMAPHORE_LEASES).and_then(|c| c.dir.as_ref());
    let locks_dir = dir.child(SEMAPHORE_LOCKS).and_then(|c| c.dir.as_ref());
    let empty = BTreeMap::new();
    let lease_families = leases_dir.map(members);
    let lock_families = locks_dir.map(members);
    let leases: &[Member<'_>] = lease_families
        .as_ref()
        .unwrap_or(&empty)
        .get(&Family::Lease)
        .map_or(&[], Vec::as_slice);
    let locks: &[Member<'_>] = lock_families
        .as_ref()
        .unwrap_or(&empty)
        .get(&Family::Mutex)
        .map_or(&[], Vec::as_slice);
    let head_session = locks.first().map(|m| m.child.stat.ephemeral_owner);
    let holds: Vec<bool> = leases
        .iter()
        .enumerate()
        .map(|(i, m)| match permits {
            Some(p) => i < p as usize,
            None => !(i + 1 == leases.len() && head_session == Some(m.child.stat.ephemeral_owner)),
        })
        .collect();
    let taken = holds.iter().filter(|&&h| h).count();
    let mut contenders = Vec::new();
    let mut waiting_sessions = BTreeSet::new();
    for (i, m) in leases.iter().enumerate() {
        let waits = (!holds[i]).then(|| match permits {
            Some(p) => format!("a free lease ({taken} of {p} taken)"),
            None => format!("a free lease ({taken} taken)"),
        });
        if waits.is_some() {
            waiting_sessions.insert(m.child.stat.ephemeral_owner);
        }
        let token = (!m.name.is_wrapped()).then_some(m.name.sequence as u64);
        let node = format!("leases/{}", m.child.name);
        contenders.push(contender(
            contenders.len() + 1,
            m,
            node,
            token,
            waits,
            sessions,
            now_ms,
        ));
    }
    for (i, m) in locks.iter().enumerate() {
        if i == 0 && waiting_sessions.contains(&m.child.stat.ephemeral_owner) {
            continue; // the head waiting for room: its lease is listed above
        }
        let waits = match i {
            0 => "a free lease (about to take one)".to_owned(),
            _ => format!("locks/{}", locks[i - 1].child.name),
        };
        let node = format!("locks/{}", m.child.name);
        let mut c = contender(
            contenders.len() + 1,
            m,
            node,
            None,
            Some(waits),
            sessions,
            now_ms,
        );
        c.wants = Wants::Lease.as_str();
        contenders.push(c);
    }
    let counter = [leases_dir, locks_dir]
        .into_iter()
        .flatten()
        .map(|d| Counter::of(&d.stat))
        .min_by_key(|c| c.left)
        .unwrap_or_else(|| Counter::of(&dir.stat));
    let mut queue = Queue {
        path: dir.path.clone(),
        kind: "semaphore",
        libraries: libraries(leases.iter().chain(locks)),
        key: None,
        permits,
        tokens: "sequence",
        anchored: locks_dir.is_some_and(Dir::anchored),
        mark: None,
        marked_as: None,
        lock_space: None,
        // The part a cut listing shortened (the leases first: they hold).
        cut: [leases_dir, locks_dir, Some(dir)]
            .into_iter()
            .flatten()
            .find_map(|d| d.cut),
        counter,
        contenders,
        warnings: Vec::new(),
    };
    let busy = !queue.contenders.is_empty();
    with_marks(&mut queue, dir, parent, &[], busy);
    // The internal lock's own mark (its anchor: the semaphore's, or an earlier version's).
    if let Some(locks_dir) = locks_dir {
        let inner = locks_dir.mark();
        if !matches!(
            inner,
            Mark::None | Mark::Before | Mark::Kind(RecipeKind::Semaphore)
        ) {
            queue.warnings.push(Warning {
                kind: "mark-mismatch",
                node: Some(SEMAPHORE_LOCKS.to_owned()),
                message: format!(
                    "the semaphore's {SEMAPHORE_LOCKS}/ is {}, not a ZkSemaphore's: a client \
                     uses it as another recipe; one path serves one recipe kind",
                    inner.describe().unwrap_or_default()
                ),
            });
        }
    }
    if !matches!(dir.mark(), Mark::None | Mark::Kind(RecipeKind::Semaphore)) {
        queue.warnings.push(Warning {
            kind: "mark-mismatch",
            node: None,
            message: format!(
                "{}, but it has a semaphore's {SEMAPHORE_LOCKS}/ and {SEMAPHORE_LEASES}/: a \
                 client uses this path as a semaphore; one path serves one recipe kind",
                dir.mark().describe().unwrap_or_default()
            ),
        });
    }
    let wrapped = leases.iter().chain(locks).any(|m| m.name.is_wrapped());
    counter_warnings(&mut queue, wrapped);
    contender_warnings(&mut queue);
    queue
}

/// kazoo's `Semaphore`: a lease is an ephemeral child with a 32-hex-digit name, the permits
/// in the root's data, and its lock queue in the sibling `{root}-__lock__` (shown on its own).
fn kazoo_semaphore(dir: &Dir, sessions: &Sessions, now_ms: i64) -> Option<Queue> {
    let leases: Vec<&Child> = dir
        .children
        .iter()
        .filter(|c| names::is_kazoo_lease(&c.name) && c.stat.ephemeral_owner != 0)
        .collect();
    if leases.is_empty() || leases.len() != dir.children.len() {
        return None;
    }
    let mut leases = leases;
    leases.sort_by_key(|c| c.stat.czxid);
    let contenders = leases
        .iter()
        .enumerate()
        .map(|(i, child)| {
            let m = Member {
                name: NodeName {
                    style: Style::Kazoo,
                    family: Family::Kazoo,
                    wants: Wants::Lease,
                    sequence: -1,
                },
                child,
                record: None,
                in_anchored: false,
            };
            contender(i + 1, &m, child.name.clone(), None, None, sessions, now_ms)
        })
        .collect();
    let mut queue = Queue {
        path: dir.path.clone(),
        kind: "semaphore",
        libraries: vec!["kazoo"],
        key: None,
        permits: permits(&dir.data),
        tokens: "none",
        anchored: false,
        mark: None,
        marked_as: None,
        lock_space: None,
        cut: dir.cut,
        counter: Counter::of(&dir.stat),
        contenders,
        warnings: Vec::new(),
    };
    contender_warnings(&mut queue);
    Some(queue)
}

fn contender(
    position: usize,
    m: &Member<'_>,
    node: String,
    token: Option<u64>,
    waits_for: Option<String>,
    sessions: &Sessions,
    now_ms: i64,
) -> Contender {
    let owner_sid = m.child.stat.ephemeral_owner;
    let state = (owner_sid != 0)
        .then(|| sessions.state(owner_sid))
        .flatten();
    let heard = (owner_sid != 0)
        .then(|| sessions.heard.get(&owner_sid))
        .flatten();
    Contender {
        position,
        role: if waits_for.is_none() {
            "holder"
        } else {
            "waiter"
        },
        node,
        wants: m.name.wants.as_str(),
        library: m.library(),
        sequence: m.name.sequence,
        token,
        session: (owner_sid != 0).then(|| format!("{owner_sid:#x}")),
        session_state: state.map(|(s, _)| s),
        session_expires_in_ms: state.and_then(|(_, at)| at).map(|at| at - now_ms),
        silent_ms: heard.and_then(|h| h.silent_ms),
        session_timeout_ms: heard.map(|h| h.timeout_ms),
        server: (owner_sid != 0)
            .then(|| sessions.connected.get(&owner_sid).cloned())
            .flatten(),
        created: crate::time::iso(m.child.stat.ctime),
        ctime_ms: m.child.stat.ctime,
        age_ms: now_ms - m.child.stat.ctime,
        owner: m.owner(),
        waits_for,
    }
}

fn libraries<'a, 'b: 'a>(members: impl Iterator<Item = &'a Member<'b>>) -> Vec<&'static str> {
    let set: BTreeSet<&'static str> = members.map(Member::library).collect();
    set.into_iter().collect()
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

fn counter_warnings(queue: &mut Queue, wrapped: bool) {
    let Counter { next, left } = queue.counter;
    let end = i64::from(i32::MAX);
    if left == 0 || wrapped {
        queue.warnings.push(Warning {
            kind: "counter-used-up",
            node: None,
            message: format!(
                "the sequence counter of {} is at its end (next {next}): every new contender \
                 fails (zk-recipes: SequenceWrapped); move the lock to a new root",
                queue.path
            ),
        });
    } else if (left as f64) < end as f64 * NEAR_END_SHARE {
        queue.warnings.push(Warning {
            kind: "counter-near-end",
            node: None,
            message: format!(
                "{left} tokens left: the sequence counter is at {next} of {end}; once used up \
                 every acquisition fails; plan a move to a new root"
            ),
        });
    }
}

/// Persistent nodes in the queue, and sessions the servers say have no connection or are
/// gone.
fn contender_warnings(queue: &mut Queue) {
    let mut warnings = Vec::new();
    for c in &queue.contenders {
        let holds = c.role == "holder";
        match (&c.session, c.session_state) {
            (None, _) => {
                warnings.push(Warning {
                    kind: "persistent-node",
                    node: Some(c.node.clone()),
                    message: format!(
                    "{} is a persistent node, nobody's contender: zk-recipes contenders pass it \
                     over, but for Curator and Client::lock it {} and everyone behind it waits \
                     forever; delete it if nobody owns it (zkCli: delete {}/{})",
                    c.node,
                    if holds { "holds the lock" } else { "will hold the lock once first" },
                    queue.path,
                    c.node
                ),
                })
            }
            (Some(sid), Some(SessionState::Disconnected)) => warnings.push(Warning {
                kind: "session-disconnected",
                node: Some(c.node.clone()),
                message: format!(
                    "session {sid} of {} has no connection to any server: its client is gone \
                     or cut off; the node stays until the session expires{}{}",
                    c.node,
                    match c.session_expires_in_ms {
                        Some(ms) => format!(" (in about {})", crate::time::age(ms.max(0))),
                        None => String::new(),
                    },
                    if holds {
                        ", holding the lock for nobody"
                    } else {
                        ""
                    }
                ),
            }),
            (Some(sid), Some(SessionState::Gone)) => warnings.push(Warning {
                kind: "session-gone",
                node: Some(c.node.clone()),
                message: format!(
                    "the server tracks no session {sid}, yet {} exists: it should be deleted \
                     any moment (inspect again)",
                    c.node
                ),
            }),
            _ => {}
        }
        if let (Some(sid), Some(silent), Some(timeout)) =
            (&c.session, c.silent_ms, c.session_timeout_ms)
        {
            if silent_too_long(silent, timeout) {
                warnings.push(Warning {
                    kind: "session-silent",
                    node: Some(c.node.clone()),
                    message: format!(
                        "no ping for {} of {} {} session: frozen or cut off? (session {sid} of \
                         {}{}; its server expires it once it has heard nothing for the whole \
                         timeout, and {} then)",
                        seconds(silent),
                        article(&seconds(timeout)),
                        seconds(timeout),
                        c.node,
                        c.server
                            .as_deref()
                            .map_or_else(String::new, |s| format!(", connected to {s}")),
                        if holds {
                            "the lock goes to the next in line"
                        } else {
                            "its place in the queue goes"
                        }
                    ),
                });
            }
        }
    }
    queue.warnings.extend(warnings);
}

/// Past half its timeout without an answer from its server: a live client hears from its
/// server at least every third of the timeout (its pings: the Java client's after a third of
/// the timeout idle, zookeeper-client's after 3/20; zk-recipes' heartbeat while it holds).
pub fn silent_too_long(silent_ms: i64, timeout_ms: i64) -> bool {
    timeout_ms > 0 && silent_ms * 2 > timeout_ms
}

/// `a` or `an` before a number as it is said (`an 8 s`, `an 11 s`, `a 4 s`).
fn article(number: &str) -> &'static str {
    let whole: String = number.chars().take_while(char::is_ascii_digit).collect();
    let eleven_or_eighteen =
        matches!(whole.len() % 3, 2) && (whole.starts_with("11") || whole.starts_with("18"));
    if whole.starts_with('8') || eleven_or_eighteen {
        "an"
    } else {
        "a"
    }
}

/// `3.1 s`, `4 s`, `850 ms`.
fn seconds(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
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
mod tests {
    use super::*;
    use zk_recipes::layout::ANCHOR;

    const NOW: i64 = 1_796_116_042_000;
    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    fn node(name: &str, sid: i64, data: &str, age_s: i64) -> Child {
        let seq = names::parse(name).map_or(0, |n| n.sequence);
        Child {
            name: name.to_owned(),
            stat: Stat {
                czxid: 0x1_0000_0000 + seq,
                ctime: NOW - age_s * 1000,
                ephemeral_owner: sid,
                ..Stat::default()
            },
            data: data.as_bytes().to_vec(),
            dir: None,
        }
    }

    fn ours(seq: i64, sid: i64, owner: &str) -> Child {
        node(
            &format!("lock-{seq:010}"),
            sid,
            &format!("id={UUID}\nowner={owner}\n"),
            100 - seq,
        )
    }

    fn anchor() -> Child {
        node(ANCHOR, 0, "", 1000)
    }

    /// A directory whose counter has seen `creates` child creates; an `anchor()` among
    /// `children` becomes its anchor, as `read.rs` reads it.
    fn dir(path: &str, creates: i32, children: Vec<Child>) -> Dir {
        let n = children.len() as i32;
        let (anchors, children): (Vec<Child>, Vec<Child>) =
            children.into_iter().partition(|c| c.name == ANCHOR);
        Dir {
            path: path.to_owned(),
            stat: Stat {
                cversion: creates.wrapping_mul(2).wrapping_sub(n),
                num_children: n,
                ..Stat::default()
            },
            data: Vec::new(),
            anchor: anchors.into_iter().next().map(|a| a.data),
            children,
            cut: None,
        }
    }

    fn sub(child_name: &str, d: Dir) -> Child {
        Child {
            name: child_name.to_owned(),
            dir: Some(d),
            ..Child::default()
        }
    }

    fn roles(q: &Queue) -> Vec<(&str, &str, Option<&str>)> {
        q.contenders
            .iter()
            .map(|c| (c.role, c.node.as_str(), c.waits_for.as_deref()))
            .collect()
    }

    fn kinds(q: &Queue) -> Vec<&str> {
        q.warnings.iter().map(|w| w.kind).collect()
    }

    #[test]
    fn counters_come_back_from_cversion() {
        // 3 creates, 1 delete: cversion 2 * 3 - 2 = 4 with 2 children.
        let stat = Stat {
            cversion: 4,
            num_children: 2,
            ..Stat::default()
        };
        assert_eq!(Counter::of(&stat).next, 3);
        let near = Stat {
            cversion: (i32::MAX - 3).wrapping_mul(2),
            num_children: 0,
            ..Stat::default()
        };
        assert_eq!(
            Counter::of(&near),
            Counter {
                next: i64::from(i32::MAX) - 3,
                left: 3
            }
        );
        let full = Stat {
            cversion: i32::MAX.wrapping_mul(2).wrapping_sub(1),
            num_children: 1,
            ..Stat::default()
        };
        assert_eq!(Counter::of(&full).left, 0);
    }

    #[test]
    fn a_mutex_holder_then_waiters_in_order() {
        let root = dir(
            "/locks/report",
            12,
            vec![
                ours(11, 0x12, "cron@b/2"),
                anchor(),
                ours(9, 0x10, "web-1/42"),
                ours(10, 0x11, "x"),
            ],
        );
        let qs = queues(&root, None, &Sessions::default(), NOW);
        assert_eq!(qs.len(), 1);
        let q = &qs[0];
        assert_eq!((q.kind, q.tokens, q.anchored), ("mutex", "sequence", true));
        assert_eq!(q.libraries, ["zk-recipes"]);
        assert_eq!(
            roles(q),
            [
                ("holder", "lock-0000000009", None),
                ("waiter", "lock-0000000010", Some("lock-0000000009")),
                ("waiter", "lock-0000000011", Some("lock-0000000010")),
            ]
        );
        let h = &q.contenders[0];
        assert_eq!(h.token, Some(9));
        assert_eq!(h.session.as_deref(), Some("0x10"));
        assert_eq!(h.owner.as_deref(), Some("web-1/42"));
        assert_eq!(h.age_ms, 91_000);
        assert_eq!(h.session_state, None);
        assert_eq!(
            q.counter,
            Counter {
                next: 12,
                left: i64::from(i32::MAX) - 12
            }
        );
        assert!(q.warnings.is_empty(), "{:?}", q.warnings);
    }

    #[test]
    fn keyed_locks_have_zxid_tokens_and_a_key() {
        let key_dir = dir(
            "/locks/orders/a%2Fb",
            2,
            vec![ours(0, 0x20, "w/1"), ours(1, 0x21, "w/2")],
        );
        let space = dir("/locks/orders", 1, vec![sub("a%2Fb", key_dir)]);
        let qs = queues(&space, None, &Sessions::default(), NOW);
        assert_eq!(qs.len(), 1);
        let q = &qs[0];
        assert_eq!(
            (q.kind, q.tokens, q.key.as_deref()),
            ("keyed-lock", "czxid", Some("a/b"))
        );
        assert_eq!(q.contenders[0].token, Some(0x1_0000_0000));
        assert!(q.warnings.is_empty(), "{:?}", q.warnings);
    }

    #[test]
    fn curator_in_a_container_warns_that_it_is_unanchored() {
        let c = node(&format!("_c_{UUID}-lock-0000000000"), 0x30, "172.17.0.1", 5);
        let q = &queues(
            &dir("/curator", 1, vec![c]),
            None,
            &Sessions::default(),
            NOW,
        )[0];
        assert_eq!(
            (q.kind, q.libraries.as_slice()),
            ("mutex", &["curator"][..])
        );
        assert_eq!(q.contenders[0].owner.as_deref(), Some("172.17.0.1"));
        assert_eq!(kinds(q), ["unanchored-root"]);
    }

    #[test]
    fn a_persistent_squatter_blocks_everyone() {
        let squatter = node("lock-0000000000", 0, "", 3600);
        let root = dir(
            "/locks/stuck",
            3,
            vec![anchor(), squatter, ours(2, 0x40, "w/1")],
        );
        let q = &queues(&root, None, &Sessions::default(), NOW)[0];
        assert_eq!(q.contenders[0].session, None);
        assert_eq!(q.contenders[0].role, "holder");
        assert_eq!(kinds(q), ["persistent-node"]);
        assert!(q.warnings[0].message.contains("waits forever"));
        assert_eq!(q.warnings[0].node.as_deref(), Some("lock-0000000000"));
    }

    #[test]
    fn counters_near_their_end_and_used_up() {
        let near = dir(
            "/near",
            i32::MAX - 1000,
            vec![anchor(), ours(i64::from(i32::MAX) - 1001, 0x1, "a")],
        );
        let q = &queues(&near, None, &Sessions::default(), NOW)[0];
        assert_eq!(q.counter.left, 1000);
        assert_eq!(kinds(q), ["counter-near-end"]);
        assert!(q.warnings[0].message.starts_with("1000 tokens left"));
        let wrapped = dir(
            "/wrapped",
            i32::MAX,
            vec![anchor(), node("lock-2147483647", 0x2, "", 1)],
        );
        let q = &queues(&wrapped, None, &Sessions::default(), NOW)[0];
        assert_eq!(kinds(q), ["counter-used-up"]);
        assert_eq!(q.contenders[0].token, None);
    }

    #[test]
    fn readers_share_and_wait_for_the_writer_ahead() {
        let rw = |kind: &str, seq: i64, sid: i64| {
            node(
                &format!("_c_{UUID}-{kind}{seq:010}"),
                sid,
                &format!("id={UUID}\nowner=o{seq}\n"),
                1,
            )
        };
        let root = dir(
            "/catalog",
            5,
            vec![
                anchor(),
                rw("__READ__", 0, 1),
                rw("__READ__", 1, 2),
                rw("__WRIT__", 2, 3),
                rw("__READ__", 3, 4),
            ],
        );
        let q = &queues(&root, None, &Sessions::default(), NOW)[0];
        assert_eq!(q.kind, "rwlock");
        let w = format!("_c_{UUID}-__WRIT__0000000002");
        assert_eq!(
            roles(q).iter().map(|r| (r.0, r.2)).collect::<Vec<_>>(),
            [
                ("holder", None),
                ("holder", None),
                (
                    "waiter",
                    Some(format!("_c_{UUID}-__READ__0000000001").as_str())
                ),
                ("waiter", Some(w.as_str())),
            ]
        );
        assert_eq!(q.contenders[3].wants, "read");
        assert_eq!(q.libraries, ["zk-recipes"]);
    }

    #[test]
    fn a_semaphore_shows_leases_then_its_lock_queue() {
        let lease =
            |seq: i64, sid: i64| node(&format!("_c_{UUID}-lease-{seq:010}"), sid, "", 10 - seq);
        let leases = dir(
            "/pool/leases",
            3,
            vec![lease(0, 1), lease(1, 2), lease(2, 3)],
        );
        let locks = dir(
            "/pool/locks",
            7,
            vec![anchor(), ours(5, 3, "c"), ours(6, 4, "d")],
        );
        let mut root = dir("/pool", 2, vec![sub("leases", leases), sub("locks", locks)]);
        root.data = b"2".to_vec();
        let qs = queues(&root, None, &Sessions::default(), NOW);
        assert_eq!(qs.len(), 1, "locks and leases are parts of the semaphore");
        let q = &qs[0];
        assert_eq!((q.kind, q.permits), ("semaphore", Some(2)));
        assert_eq!(
            roles(q),
            [
                (
                    "holder",
                    format!("leases/_c_{UUID}-lease-0000000000").as_str(),
                    None
                ),
                (
                    "holder",
                    format!("leases/_c_{UUID}-lease-0000000001").as_str(),
                    None
                ),
                (
                    "waiter",
                    format!("leases/_c_{UUID}-lease-0000000002").as_str(),
                    Some("a free lease (2 of 2 taken)")
                ),
                (
                    "waiter",
                    "locks/lock-0000000006",
                    Some("locks/lock-0000000005")
                ),
            ]
        );
        assert_eq!(q.contenders[3].token, None);
        assert_eq!(q.contenders[3].wants, "lease");
    }

    #[test]
    fn kazoo_and_zookeeper_recipes_are_recognised_and_mixing_is_flagged() {
        let kz = "6d1f0b7ab2c44a4fa0b1c2d3e4f5a6b7";
        let root = dir(
            "/mixed",
            3,
            vec![
                node(&format!("{kz}__lock__0000000000"), 1, "kazoo-worker", 3),
                node(&format!("_c_{UUID}-lock-0000000001"), 2, "10.0.0.2", 2),
                node("x-72057594037927936-0000000002", 3, "", 1),
            ],
        );
        let qs = queues(&root, None, &Sessions::default(), NOW);
        let libs: Vec<_> = qs
            .iter()
            .map(|q| (q.kind, q.libraries[0], q.tokens))
            .collect();
        assert_eq!(
            libs,
            [
                ("mutex", "curator", "sequence"),
                ("mutex", "kazoo", "none"),
                ("mutex", "zookeeper", "none")
            ]
        );
        for q in &qs {
            assert_eq!(
                q.contenders[0].role, "holder",
                "each protocol has its own holder"
            );
            assert!(kinds(q).contains(&"mixed-recipes"));
        }
        assert_eq!(qs[1].contenders[0].owner.as_deref(), Some("kazoo-worker"));
    }

    #[test]
    fn a_kazoo_semaphore_shows_its_leases() {
        let lease = |hex: &str, sid: i64, who: &str| node(hex, sid, who, 3);
        let mut root = dir(
            "/kz-pool",
            2,
            vec![
                lease("a1b2c3d4e5f60718293a4b5c6d7e8f90", 2, "worker-2"),
                lease("3f2a9c0d5e6b4f718293a4b5c6d7e8f9", 1, "worker-1"),
            ],
        );
        root.children[1].stat.czxid = 1;
        root.children[0].stat.czxid = 2;
        root.data = b"3".to_vec();
        let q = &queues(&root, None, &Sessions::default(), NOW)[0];
        assert_eq!(
            (q.kind, q.permits, q.tokens),
            ("semaphore", Some(3), "none")
        );
        assert_eq!(q.libraries, ["kazoo"]);
        let owners: Vec<_> = q.contenders.iter().map(|c| c.owner.as_deref()).collect();
        assert_eq!(
            owners,
            [Some("worker-1"), Some("worker-2")],
            "in creation order"
        );
        assert!(q.contenders.iter().all(|c| c.role == "holder"));
    }

    #[test]
    fn sessions_without_a_connection_are_flagged() {
        let mut sessions = Sessions {
            all_answered: true,
            connected: HashMap::from([(0x2, "zk1:2181".to_owned())]),
            tracked: Some(HashMap::from([(0x1, Some(NOW + 25_000)), (0x2, None)])),
            heard: HashMap::new(),
        };
        let root = dir(
            "/l",
            3,
            vec![
                anchor(),
                ours(0, 0x1, "gone-host/1"),
                ours(1, 0x2, "b"),
                ours(2, 0x3, "c"),
            ],
        );
        let q = &queues(&root, None, &sessions, NOW)[0];
        let states: Vec<_> = q.contenders.iter().map(|c| c.session_state).collect();
        use SessionState::*;
        assert_eq!(states, [Some(Disconnected), Some(Connected), Some(Gone)]);
        assert_eq!(q.contenders[0].session_expires_in_ms, Some(25_000));
        assert_eq!(kinds(q), ["session-disconnected", "session-gone"]);
        assert!(q.warnings[0].message.contains("in about 25s"));
        assert!(q.warnings[0]
            .message
            .contains("holding the lock for nobody"));
        // A server that did not answer: nobody can be called disconnected.
        sessions.all_answered = false;
        let q = &queues(&root, None, &sessions, NOW)[0];
        assert_eq!(q.contenders[0].session_state, None);
    }

    #[test]
    fn idle_anchored_roots_are_shown_and_plain_directories_are_not() {
        let idle = dir("/locks/idle", 40, vec![anchor()]);
        let parent = dir(
            "/locks",
            2,
            vec![sub("idle", idle), node("config", 0, "x", 1)],
        );
        let qs = queues(&parent, None, &Sessions::default(), NOW);
        assert_eq!(qs.len(), 1);
        assert_eq!((qs[0].path.as_str(), qs[0].kind), ("/locks/idle", "idle"));
        assert!(qs[0].contenders.is_empty());
    }

    fn marked(mut d: Dir, kind: RecipeKind) -> Dir {
        d.anchor = Some(kind.mark());
        d
    }

    fn keyed(seq: i64, sid: i64, owner: &str) -> Child {
        node(
            &format!("_c_{UUID}-lock-{seq:010}"),
            sid,
            &format!("id={UUID}\nowner={owner}\n"),
            5,
        )
    }

    #[test]
    fn an_anchor_in_a_lock_spaces_key_is_flagged_with_the_fix() {
        // The slip of an earlier version (an empty anchor), idle, and a ZkMutex holder in
        // another key taken the same way; a key in use beside them.
        let idle = dir("/shop/orders/order-1", 1, vec![anchor()]);
        let held = dir(
            "/shop/orders/order-2",
            2,
            vec![anchor(), ours(1, 0x51, "cron/7")],
        );
        let fine = dir("/shop/orders/order-3", 1, vec![keyed(0, 0x52, "w/1")]);
        let space = marked(
            dir(
                "/shop/orders",
                3,
                vec![
                    sub("order-1", idle),
                    sub("order-2", held),
                    sub("order-3", fine),
                ],
            ),
            RecipeKind::LockSpace,
        );
        let qs = queues(&space, None, &Sessions::default(), NOW);
        let paths: Vec<_> = qs.iter().map(|q| (q.path.as_str(), q.kind)).collect();
        assert_eq!(
            paths,
            [
                ("/shop/orders/order-1", "idle"),
                ("/shop/orders/order-2", "mutex"),
                ("/shop/orders/order-3", "keyed-lock"),
            ],
            "the space itself is shown by its keys"
        );
        assert_eq!(kinds(&qs[0]), ["anchored-key"]);
        assert_eq!(
            qs[0].warnings[0].message,
            "key order-1: anchored as a ZkMutex root (`zkr lock` without --key?): ZkLockSpace \
             workers refuse it; fix: zkr repair /shop/orders/order-1"
        );
        assert_eq!(qs[0].key.as_deref(), Some("order-1"));
        assert_eq!(qs[0].lock_space.as_deref(), Some("/shop/orders"));
        assert_eq!(qs[0].mark.as_deref(), Some(""));
        assert_eq!(
            qs[1].tokens, "sequence",
            "the mutex hands out sequence numbers"
        );
        assert!(
            qs[1].warnings[0].message.ends_with(
                "fix, once its holders and waiters are gone: zkr repair /shop/orders/order-2"
            ),
            "{:?}",
            qs[1].warnings
        );
        assert_eq!(kinds(&qs[2]), Vec::<&str>::new());
        assert_eq!(qs[2].lock_space.as_deref(), Some("/shop/orders"));

        // The same space made before the marks: told by its key in use.
        let mut unmarked = space.clone();
        unmarked.anchor = None;
        let qs = queues(&unmarked, None, &Sessions::default(), NOW);
        assert_eq!(kinds(&qs[0]), ["anchored-key"]);
        assert!(qs[0].warnings[0]
            .message
            .contains("its key \"order-3\" in use"));
        // Without a key in use, an unmarked directory of anchored roots is just that.
        let mut plain = unmarked.clone();
        plain.children.pop();
        let qs = queues(&plain, None, &Sessions::default(), NOW);
        assert!(qs.iter().all(|q| q.warnings.is_empty()), "{qs:#?}");
        assert!(qs.iter().all(|q| q.lock_space.is_none()));

        // PATH itself a key: told by its parent's anchor, read by path.
        let alone = dir("/shop/orders/order-1", 1, vec![anchor()]);
        let space_mark = RecipeKind::LockSpace.mark();
        let qs = queues(&alone, Some(&space_mark), &Sessions::default(), NOW);
        assert_eq!(kinds(&qs[0]), ["anchored-key"]);
        // A count's anchor in a key: flagged, but repair does not remove that recipe's root.
        let count = marked(dir("/shop/orders/n", 1, vec![]), RecipeKind::Count);
        let qs = queues(&count, Some(&space_mark), &Sessions::default(), NOW);
        assert_eq!(qs[0].tokens, "none");
        assert!(
            qs[0].warnings[0]
                .message
                .contains("zkr repair does not remove a ZkSharedCount"),
            "{:?}",
            qs[0].warnings
        );
    }

    #[test]
    fn each_root_shows_its_mark_and_a_mark_that_disagrees_is_flagged() {
        let rw = |seq: i64| {
            node(
                &format!("_c_{UUID}-__WRIT__{seq:010}"),
                0x60 + seq,
                &format!("id={UUID}\nowner=o{seq}\n"),
                1,
            )
        };
        let root = marked(dir("/jobs", 2, vec![ours(0, 0x61, "a")]), RecipeKind::Mutex);
        let q = &queues(&root, None, &Sessions::default(), NOW)[0];
        assert_eq!(
            (q.mark.as_deref(), q.marked_as),
            (Some("zk-recipes:mutex"), Some("ZkMutex"))
        );
        assert!(q.warnings.is_empty(), "{:?}", q.warnings);
        let wrong = marked(dir("/jobs", 2, vec![rw(0)]), RecipeKind::Mutex);
        let q = &queues(&wrong, None, &Sessions::default(), NOW)[0];
        assert_eq!(q.kind, "rwlock");
        assert_eq!(kinds(q), ["mark-mismatch"]);
        assert!(
            q.warnings[0]
                .message
                .starts_with("marked as a ZkMutex root (zk-recipes:mutex), but it holds read/write lock contenders"),
            "{}",
            q.warnings[0].message
        );
        // A count with contenders in it; an election's anchor of an earlier version is fine.
        let count = marked(dir("/n", 2, vec![ours(0, 0x62, "a")]), RecipeKind::Count);
        assert_eq!(
            kinds(&queues(&count, None, &Sessions::default(), NOW)[0]),
            ["mark-mismatch"]
        );
        let latch = node(&format!("_c_{UUID}-latch-0000000000"), 0x63, "info", 1);
        let election = dir("/e", 2, vec![anchor(), latch]);
        assert!(queues(&election, None, &Sessions::default(), NOW)[0]
            .warnings
            .is_empty());
        // An idle root marked as a group's (its data) shows as such.
        let mut group = dir("/g", 0, vec![]);
        group.data = RecipeKind::Group.mark();
        let q = &queues(&group, None, &Sessions::default(), NOW)[0];
        assert_eq!((q.kind, q.marked_as), ("idle", Some("ZkGroup")));
    }

    #[test]
    fn a_cut_listing_keeps_the_kind_and_the_head_of_the_queue() {
        // 20,000 waiters: only the head was read, the anchor by path.
        let mut root = dir(
            "/hot",
            20_002,
            vec![anchor(), ours(1, 0x70, "holder"), ours(2, 0x71, "w-2")],
        );
        root.stat.num_children = 20_002;
        root.cut = Some(Cut {
            shown: 2,
            of: 20_001,
        });
        let q = &queues(&root, None, &Sessions::default(), NOW)[0];
        assert_eq!((q.kind, q.tokens), ("mutex", "sequence"));
        let tokens: Vec<_> = q.contenders.iter().map(|c| c.token).collect();
        assert_eq!(tokens, [Some(1), Some(2)]);
        assert_eq!(
            q.cut,
            Some(Cut {
                shown: 2,
                of: 20_001
            })
        );
        assert_eq!(roles(q)[0].0, "holder");
    }

    #[test]
    fn a_session_silent_past_half_its_timeout_is_flagged() {
        let sessions = Sessions {
            heard: HashMap::from([
                (
                    0x80,
                    Heard {
                        silent_ms: Some(3100),
                        timeout_ms: 4000,
                    },
                ),
                (
                    0x81,
                    Heard {
                        silent_ms: Some(600),
                        timeout_ms: 4000,
                    },
                ),
            ]),
            connected: HashMap::from([
                (0x80, "zk1:2181".to_owned()),
                (0x81, "zk1:2181".to_owned()),
            ]),
            ..Sessions::default()
        };
        let root = dir(
            "/l",
            2,
            vec![anchor(), ours(0, 0x80, "frozen"), ours(1, 0x81, "ok")],
        );
        let q = &queues(&root, None, &sessions, NOW)[0];
        assert_eq!(kinds(q), ["session-silent"]);
        assert!(
            q.warnings[0]
                .message
                .starts_with("no ping for 3.1 s of a 4 s session: frozen or cut off? (session 0x80 of lock-0000000000, connected to zk1:2181;"),
            "{}",
            q.warnings[0].message
        );
        assert_eq!(q.contenders[0].silent_ms, Some(3100));
        assert_eq!(q.contenders[1].session_timeout_ms, Some(4000));
        assert!(!silent_too_long(2000, 4000));
        let said: Vec<_> = [
            "4 s", "8 s", "11 s", "18 s", "80 s", "110 s", "850 ms", "1.5 s",
        ]
        .iter()
        .map(|n| article(n))
        .collect();
        assert_eq!(said, ["a", "an", "an", "an", "an", "a", "an", "a"]);
        assert!(silent_too_long(2001, 4000));
    }

    #[test]
    fn owner_records_and_text() {
        assert_eq!(
            owner_record(b"id=x\nowner=web-1/42\n").as_deref(),
            Some("web-1/42")
        );
        assert_eq!(owner_record(b"owner=a"), None);
        assert_eq!(text(b"  10.0.0.1\n").as_deref(), Some("10.0.0.1"));
        assert_eq!(text(b"\x00\x01"), None);
        assert_eq!(text(&[b'a'; 200]).unwrap().chars().count(), 121);
    }
}
