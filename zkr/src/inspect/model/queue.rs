//! The queues of a directory that is no semaphore root: its contender nodes parsed and grouped
//! by protocol (`Member`, `members`), one queue per protocol found, and the contender rows
//! every queue is made of.

use std::collections::{BTreeMap, BTreeSet};

use zk_recipes::layout::kind::RecipeKind;
use zk_recipes::layout::names::{self, Family, NodeName, Style, Wants};
use zk_recipes::layout::rules::{self, Contends, Decision};

use super::marks::Mark;
use super::semaphore::kazoo_semaphore;
use super::warnings::{contender_warnings, counter_warnings, with_marks};
use super::{
    family_name, owner_record, text, Child, Contender, Counter, Dir, Parent, Queue, Sessions,
    Warning,
};

/// A contender node of `dir`, parsed.
pub(super) struct Member<'a> {
    pub(super) name: NodeName,
    /// Its directory has the zk-recipes anchor (which Curator never makes).
    pub(super) in_anchored: bool,
    pub(super) child: &'a Child,
    pub(super) record: Option<String>,
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

pub(super) fn members(dir: &Dir) -> BTreeMap<Family, Vec<Member<'_>>> {
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
pub(super) fn dir_queues(
    dir: &Dir,
    parent: Parent<'_>,
    sessions: &Sessions,
    now_ms: i64,
) -> Vec<Queue> {
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

pub(super) fn contender(
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

pub(super) fn libraries<'a, 'b: 'a>(
    members: impl Iterator<Item = &'a Member<'b>>,
) -> Vec<&'static str> {
    let set: BTreeSet<&'static str> = members.map(Member::library).collect();
    set.into_iter().collect()
}
