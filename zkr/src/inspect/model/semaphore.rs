//! The semaphore layouts: Curator's `InterProcessSemaphoreV2` (which zk-recipes' `ZkSemaphore`
//! shares), its leases then its internal lock's queue, and kazoo's `Semaphore`.

use std::collections::{BTreeMap, BTreeSet};

use zk_recipes::layout::kind::RecipeKind;
use zk_recipes::layout::names::{self, Family, NodeName, Style, Wants};
use zk_recipes::layout::{semaphore_permits as permits, SEMAPHORE_LEASES, SEMAPHORE_LOCKS};

use super::marks::Mark;
use super::queue::{contender, libraries, members, Member};
use super::warnings::{contender_warnings, counter_warnings, with_marks};
use super::{Child, Counter, Dir, Parent, Queue, Sessions, Warning};

/// Curator's `InterProcessSemaphoreV2` layout: `{root}/leases` (and `{root}/locks`); or
/// zk-recipes' with the permits in the root's data (or its mark) and only `locks` left.
pub(super) fn is_semaphore_root(dir: &Dir) -> bool {
    dir.child(SEMAPHORE_LEASES).is_some()
        || (dir.child(SEMAPHORE_LOCKS).is_some() && permits(&dir.data).is_some())
        || (dir.child(SEMAPHORE_LOCKS).is_some() && dir.mark() == Mark::Kind(RecipeKind::Semaphore))
}

/// Curator's `InterProcessSemaphoreV2` layout, as zk-recipes' `ZkSemaphore` shares it: the
/// leases (the first `permits` hold; one more waits for room, made by the head of the
/// internal lock), then the internal lock's queue (its head is about to take a lease).
pub(super) fn semaphore_queue(
    dir: &Dir,
    parent: Parent<'_>,
    sessions: &Sessions,
    now_ms: i64,
) -> Queue {
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
pub(super) fn kazoo_semaphore(dir: &Dir, sessions: &Sessions, now_ms: i64) -> Option<Queue> {
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
