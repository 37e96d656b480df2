//! A history of what fault tests did to their locks, and the checker that judges it.
//!
//! # What is recorded
//!
//! Every grant and release (lock, token, session, worker, monotonic time), every fenced write
//! attempted (its unique operation id, the token and session it was made under, whether the
//! writer still believed it held the lock, when it was sent and answered, and what the client
//! was told: accepted, refused, or unknown because the connection broke), the probes that
//! lock every lock again after the faults heal, and at the end, per lock, what the store holds
//! and which lock nodes are left.
//!
//! # The store, and why it is the ground truth
//!
//! The store is ZooKeeper itself, one fenced counter per lock: each increment is one
//! `Grant::fenced_write()` transaction — the lock node exists (the library's fence), the
//! counter is at the version the writer read (so increments never overwrite each other), and
//! a persistent node named after the operation is created with the writer's token as data.
//! The operation nodes, ordered by their creation zxid, are the store's log: the order in
//! which the ensemble accepted the writes, exact and total, whatever the clients believed or
//! were told. A write whose reply was lost ("unknown") is resolved by its node: there or not.
//!
//! Why this store rather than an in-memory one that applies `accept iff token >= highest`:
//! that rule would make the checker's main invariant hold by construction, whatever the
//! library did. Here the store applies only the library's own fence, and the checker applies
//! the token rule to the log after the fact: a write from an older token accepted after a
//! newer token's write is a violation that the library let through. It also works across
//! processes (a frozen child process writes to the same store) and across the faults, which
//! hit the store as they hit the locks.
//!
//! # Invariants
//!
//! 1. No two accepted critical sections overlap: in the log of one lock, the writes of each
//!    token are contiguous (no `41, 42, 41`). A holder that froze may still *believe* it holds
//!    after the next holder was granted; that is expected, as long as its writes are refused.
//!    Cross-checked against real time: a write is never accepted if it was sent after a newer
//!    token's write had been acknowledged.
//! 2. Accepted tokens strictly increase per lock: successive runs in the log carry growing
//!    tokens; every token is granted once; every accepted write carries a token that was
//!    granted to the writer's session.
//! 3. Nothing lost, nothing doubled: the counter equals the number of operations in the log;
//!    every write reported accepted is in the log exactly once; no write reported refused is.
//! 4. After the faults heal, every lock is acquired again within a bound.
//! 5. Once all sessions are closed, no lock node remains (the anchor is not a lock node).
//!
//! # Shared locks
//!
//! A lock registered with [`History::sharing`] as something else than [`Sharing::Exclusive`]
//! is judged by its own rule in place of the run checks of invariants 1 and 2 (the rest holds
//! for every lock):
//!
//! - [`Sharing::ReadWrite`]: the log's entries are marked `shared` (a reader's) or not (a
//!   writer's). Wherever a writer is involved the store's order must be the token order: a
//!   writer's entry never follows an entry of a greater token, a reader's never follows a
//!   writer's of a greater token (readers among themselves interleave freely). The real-time
//!   check applies to the same pairs.
//! - [`Sharing::Permits`]`(n)`: each lease's entries span an interval of the log (its node
//!   existed at both ends, so throughout); at no point of the log may more than `n` intervals
//!   be open. A lease's token is its node's creation zxid (unique; a semaphore's sequence is
//!   no fencing token), so tokens need not grow.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The library's persistent child of every recipe root: not a lock node.
pub const ANCHOR: &str = "~zk-recipes-anchor";

/// What a client was told about a fenced write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Committed.
    Accepted,
    /// Not done (the error says why: lock lost, session expired, version moved...).
    Refused(String),
    /// The connection broke with the request in flight: done or not, the store will tell.
    Unknown(String),
}

/// A lock granted to a worker.
#[derive(Clone, Debug)]
pub struct Grant {
    pub lock: String,
    pub token: u64,
    pub session: i64,
    pub worker: String,
    /// When the worker learned of it. `None` when it was reported by another process.
    pub at: Option<Instant>,
}

/// A grant given back (or found lost).
#[derive(Clone, Debug)]
pub struct Release {
    pub lock: String,
    pub token: u64,
    pub session: i64,
    pub worker: String,
    pub at: Option<Instant>,
    /// `released`, or why it was not (`lost: SessionExpired`, ...).
    pub how: String,
}

/// A fenced write attempted under a grant.
#[derive(Clone, Debug)]
pub struct Write {
    pub lock: String,
    pub token: u64,
    pub session: i64,
    pub worker: String,
    /// Unique across the history: the name of the operation node.
    pub op: String,
    /// Whether the worker still believed it held the lock when it sent the write.
    pub believed_held: bool,
    pub sent: Option<Instant>,
    pub done: Option<Instant>,
    pub outcome: Outcome,
}

/// A lock taken after the faults healed.
#[derive(Clone, Debug)]
pub struct Probe {
    pub lock: String,
    pub healed_at: Instant,
    pub acquired_at: Option<Instant>,
}

/// One accepted write as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub op: String,
    pub token: u64,
    /// Made under a shared grant (a reader's of a read/write lock).
    pub shared: bool,
}

/// How many may hold a lock at once, which decides how its log is judged (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sharing {
    /// One holder at a time (a mutex, a key, a leader).
    #[default]
    Exclusive,
    /// Readers together, a writer alone.
    ReadWrite,
    /// At most this many holders (a semaphore's leases).
    Permits(usize),
}

/// What the store holds for one lock at the end: the counter, and the log in store order.
#[derive(Clone, Debug, Default)]
pub struct Store {
    pub counter: u64,
    pub log: Vec<Entry>,
}

/// Everything recorded.
#[derive(Clone, Debug, Default)]
pub struct Events {
    pub grants: Vec<Grant>,
    pub releases: Vec<Release>,
    pub writes: Vec<Write>,
    pub probes: Vec<Probe>,
    pub stores: BTreeMap<String, Store>,
    /// Lock nodes left under each lock's root once every session was closed.
    pub leftovers: BTreeMap<String, Vec<String>>,
    /// The locks that are not [`Sharing::Exclusive`].
    pub sharing: BTreeMap<String, Sharing>,
}

impl Events {
    /// How many may hold `lock` at once.
    pub fn sharing_of(&self, lock: &str) -> Sharing {
        self.sharing.get(lock).copied().unwrap_or_default()
    }

    /// The part of the history about `lock` alone (to judge or count one lock).
    pub fn only(&self, lock: &str) -> Events {
        let keep = |l: &String| l == lock;
        Events {
            grants: self
                .grants
                .iter()
                .filter(|g| keep(&g.lock))
                .cloned()
                .collect(),
            releases: self
                .releases
                .iter()
                .filter(|r| keep(&r.lock))
                .cloned()
                .collect(),
            writes: self
                .writes
                .iter()
                .filter(|w| keep(&w.lock))
                .cloned()
                .collect(),
            probes: self
                .probes
                .iter()
                .filter(|p| keep(&p.lock))
                .cloned()
                .collect(),
            stores: self
                .stores
                .iter()
                .filter(|(l, _)| keep(l))
                .map(|(l, s)| (l.clone(), s.clone()))
                .collect(),
            leftovers: self
                .leftovers
                .iter()
                .filter(|(l, _)| keep(l))
                .map(|(l, n)| (l.clone(), n.clone()))
                .collect(),
            sharing: self
                .sharing
                .iter()
                .filter(|(l, _)| keep(l))
                .map(|(l, s)| (l.clone(), *s))
                .collect(),
        }
    }
}

/// A recorder shared by every worker of a test; waiters are woken on every event.
pub struct History {
    events: Mutex<Events>,
    changed: watch::Sender<u64>,
}

impl Default for History {
    fn default() -> Self {
        History {
            events: Mutex::default(),
            changed: watch::channel(0).0,
        }
    }
}

impl History {
    pub fn new() -> History {
        History::default()
    }

    fn update(&self, f: impl FnOnce(&mut Events)) {
        f(&mut self.events.lock().unwrap());
        self.changed.send_modify(|n| *n += 1);
    }

    pub fn grant(&self, g: Grant) {
        self.update(|e| e.grants.push(g));
    }

    pub fn release(&self, r: Release) {
        self.update(|e| e.releases.push(r));
    }

    pub fn write(&self, w: Write) {
        self.update(|e| e.writes.push(w));
    }

    pub fn probe(&self, p: Probe) {
        self.update(|e| e.probes.push(p));
    }

    pub fn store(&self, lock: &str, store: Store) {
        self.update(|e| {
            e.stores.insert(lock.to_owned(), store);
        });
    }

    /// Registers how many may hold `lock` at once (unregistered: one).
    pub fn sharing(&self, lock: &str, sharing: Sharing) {
        self.update(|e| {
            e.sharing.insert(lock.to_owned(), sharing);
        });
    }

    pub fn leftovers(&self, lock: &str, nodes: Vec<String>) {
        self.update(|e| {
            e.leftovers.insert(lock.to_owned(), nodes);
        });
    }

    /// A copy of everything so far.
    pub fn snapshot(&self) -> Events {
        self.events.lock().unwrap().clone()
    }

    /// Evaluates `f` on the events now.
    pub fn read<T>(&self, f: impl FnOnce(&Events) -> T) -> T {
        f(&self.events.lock().unwrap())
    }

    /// Waits (on the events themselves) until `pred` holds. Wrap it in a timeout.
    pub async fn wait_until(&self, mut pred: impl FnMut(&Events) -> bool) {
        let mut rx = self.changed.subscribe();
        loop {
            if self.read(&mut pred) {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Judges the history; see the module docs for the invariants.
    pub fn check(&self, recovery_bound: Duration) -> Report {
        check(&self.snapshot(), recovery_bound)
    }
}

/// A broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// 1: a token wrote again after another token had written: two critical sections overlap.
    Overlap {
        lock: String,
        token: u64,
        op: String,
        after_token: u64,
        after_op: String,
    },
    /// 1: a write was accepted although it was sent after a newer token's write had been
    /// acknowledged (real time contradicts the store's order).
    StaleAfterNewer {
        lock: String,
        op: String,
        token: u64,
        newer_op: String,
        newer_token: u64,
    },
    /// 1: more leases wrote in one stretch of the log than the semaphore has permits (the
    /// leases whose entries span the entry `op`).
    TooManyHolders {
        lock: String,
        op: String,
        tokens: Vec<u64>,
        permits: usize,
    },
    /// 2: a run of accepted writes carries a smaller token than the run before it.
    TokenWentBack {
        lock: String,
        token: u64,
        op: String,
        after_token: u64,
    },
    /// 2: one token granted twice for one lock.
    TokenGrantedTwice {
        lock: String,
        token: u64,
        sessions: Vec<i64>,
    },
    /// 2: an accepted write under a token its session was never granted.
    NotGranted {
        lock: String,
        op: String,
        token: u64,
        session: i64,
    },
    /// 3: the counter is not the number of accepted operations.
    CounterMismatch {
        lock: String,
        counter: u64,
        accepted: u64,
    },
    /// 3: a write the client was told was accepted is not in the store (a lost update).
    AcceptedButMissing { lock: String, op: String },
    /// 3: a write the client was told was refused is in the store.
    RefusedButApplied {
        lock: String,
        op: String,
        error: String,
    },
    /// 3: the store holds an operation nobody attempted, or one twice.
    Phantom { lock: String, op: String },
    /// 4: a lock was not acquired again within the bound after the faults healed.
    NotRecovered {
        lock: String,
        took: Option<Duration>,
        bound: Duration,
    },
    /// 5: a lock node remained after every session was closed.
    LeftoverNode { lock: String, node: String },
    /// The history lacks what a check needs (no store read, no probe, no leftover listing).
    Missing { lock: String, what: &'static str },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The checker's verdict and figures.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub violations: Vec<Violation>,
    pub grants: usize,
    pub writes: usize,
    pub accepted: usize,
    pub refused: usize,
    /// Unknown outcomes that the store shows were done / not done.
    pub unknown_done: usize,
    pub unknown_not_done: usize,
    /// Writes sent by a worker that still believed it held the lock, after a newer token of
    /// the same lock had been granted (and refused, or the invariants say otherwise).
    pub stale_beliefs: usize,
    /// Updates lost: writes reported accepted that the store does not hold.
    pub lost: usize,
    /// The slowest probe after the heal.
    pub recovery: Option<Duration>,
}

impl Report {
    /// `accepted` plus unknown outcomes that were done: what the counters must add up to.
    pub fn applied(&self) -> usize {
        self.accepted + self.unknown_done
    }
}

/// Judges `events`: each invariant of the module docs in turn, over every lock the history
/// names (a lock whose store was not read is a violation, and is judged no further).
pub fn check(events: &Events, recovery_bound: Duration) -> Report {
    let mut report = Report {
        grants: events.grants.len(),
        writes: events.writes.len(),
        ..Report::default()
    };
    let locks = lock_views(events, &mut report.violations);
    critical_sections_never_overlap(&locks, &mut report.violations);
    tokens_only_grow(events, &locks, &mut report.violations);
    nothing_lost_nothing_doubled(&locks, &mut report);
    report.stale_beliefs = stale_beliefs(events, &locks);
    every_lock_recovers(events, &locks, recovery_bound, &mut report);
    no_lock_node_left(events, &locks, &mut report.violations);
    report
}

/// One lock's part of the history, with the store's final state for it.
struct LockView<'e> {
    lock: &'e String,
    sharing: Sharing,
    /// The writes attempted on the lock, in the order they were reported.
    writes: Vec<&'e Write>,
    store: &'e Store,
    /// The writes by operation id.
    by_op: HashMap<&'e str, &'e Write>,
    /// How many times each operation is in the store's log.
    in_log: HashMap<&'e str, usize>,
}

/// Every lock the history names (granted, written or read in the store), in order; a lock
/// without the store's final state is a violation and has no view.
fn lock_views<'e>(events: &'e Events, v: &mut Vec<Violation>) -> Vec<LockView<'e>> {
    let mut locks: Vec<&String> = events
        .grants
        .iter()
        .map(|g| &g.lock)
        .chain(events.writes.iter().map(|w| &w.lock))
        .chain(events.stores.keys())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    locks.sort();
    let mut views = Vec::new();
    for lock in locks {
        let writes: Vec<&Write> = events.writes.iter().filter(|w| &w.lock == lock).collect();
        let Some(store) = events.stores.get(lock) else {
            v.push(Violation::Missing {
                lock: lock.clone(),
                what: "the store's final state",
            });
            continue;
        };
        let by_op: HashMap<&str, &Write> = writes.iter().map(|w| (w.op.as_str(), *w)).collect();
        let mut in_log: HashMap<&str, usize> = HashMap::new();
        for e in &store.log {
            *in_log.entry(e.op.as_str()).or_default() += 1;
        }
        views.push(LockView {
            lock,
            sharing: events.sharing_of(lock),
            writes,
            store,
            by_op,
            in_log,
        });
    }
    views
}

/// Where the store's log passes from one token's run of writes to the next: the last entry
/// of the run before, the first of the next, and whether the next token had a run before
/// (it comes back).
fn run_changes(log: &[Entry]) -> Vec<(&Entry, &Entry, bool)> {
    let mut finished: HashSet<u64> = HashSet::new();
    let mut changes = Vec::new();
    for pair in log.windows(2) {
        let (prev, e) = (&pair[0], &pair[1]);
        if prev.token != e.token {
            finished.insert(prev.token);
            changes.push((prev, e, finished.contains(&e.token)));
        }
    }
    changes
}

/// Invariant 1, no two accepted critical sections overlap: in each lock's log the writes of a
/// token are contiguous, and no write was accepted that was sent after a newer token's
/// accepted write had been acknowledged (real time against the store's order). Shared locks
/// by their own rule (module docs).
fn critical_sections_never_overlap(locks: &[LockView], v: &mut Vec<Violation>) {
    for l in locks {
        match l.sharing {
            Sharing::Exclusive => {
                for (prev, e, returns) in run_changes(&l.store.log) {
                    if returns {
                        v.push(Violation::Overlap {
                            lock: l.lock.clone(),
                            token: e.token,
                            op: e.op.clone(),
                            after_token: prev.token,
                            after_op: prev.op.clone(),
                        });
                    }
                }
            }
            Sharing::ReadWrite => writers_in_token_order(l, v),
            Sharing::Permits(permits) => {
                at_most_permits(l, permits, v);
                continue; // leases' tokens do not order them: no real-time check
            }
        }
        stale_after_newer(l, v);
    }
}

/// A read/write lock's log: wherever a writer is involved, store order is token order.
fn writers_in_token_order(l: &LockView, v: &mut Vec<Violation>) {
    let (mut newest, mut newest_writer): (Option<&Entry>, Option<&Entry>) = (None, None);
    for e in &l.store.log {
        let bar = if e.shared { newest_writer } else { newest };
        if let Some(b) = bar.filter(|b| b.token > e.token) {
            v.push(Violation::Overlap {
                lock: l.lock.clone(),
                token: e.token,
                op: e.op.clone(),
                after_token: b.token,
                after_op: b.op.clone(),
            });
        }
        if newest.is_none_or(|n| e.token > n.token) {
            newest = Some(e);
        }
        if !e.shared && newest_writer.is_none_or(|n| e.token > n.token) {
            newest_writer = Some(e);
        }
    }
}

/// A semaphore's log: at no entry more than `permits` leases' spans open.
fn at_most_permits(l: &LockView, permits: usize, v: &mut Vec<Violation>) {
    let log = &l.store.log;
    let mut span: HashMap<u64, (usize, usize)> = HashMap::new();
    for (i, e) in log.iter().enumerate() {
        span.entry(e.token).or_insert((i, i)).1 = i;
    }
    let (mut starts, mut ends): (BTreeMap<usize, Vec<u64>>, BTreeMap<usize, Vec<u64>>) =
        (BTreeMap::new(), BTreeMap::new());
    for (token, (first, last)) in span {
        starts.entry(first).or_default().push(token);
        ends.entry(last).or_default().push(token);
    }
    let mut open: std::collections::BTreeSet<u64> = Default::default();
    let mut over = false;
    for (i, e) in log.iter().enumerate() {
        open.extend(starts.remove(&i).unwrap_or_default());
        // One violation per stretch of the log with too many leases.
        if open.len() > permits && !over {
            v.push(Violation::TooManyHolders {
                lock: l.lock.clone(),
                op: e.op.clone(),
                tokens: open.iter().copied().collect(),
                permits,
            });
        }
        over = open.len() > permits;
        for t in ends.remove(&i).unwrap_or_default() {
            open.remove(&t);
        }
    }
}

/// The real-time half of invariant 1: an accepted write sent after a newer token's accepted
/// write was acknowledged, where the two conflict (a writer is involved).
fn stale_after_newer(l: &LockView, v: &mut Vec<Violation>) {
    let shared: HashMap<&str, bool> = l
        .store
        .log
        .iter()
        .map(|e| (e.op.as_str(), e.shared))
        .collect();
    let applied: Vec<&Write> = l
        .store
        .log
        .iter()
        .filter_map(|e| l.by_op.get(e.op.as_str()).copied())
        .collect();
    let (mut newest_ack, mut newest_writer_ack): (Option<&Write>, Option<&Write>) = (None, None);
    let mut by_sent: Vec<&Write> = applied
        .iter()
        .filter(|w| w.sent.is_some())
        .copied()
        .collect();
    by_sent.sort_by_key(|w| w.sent);
    let mut acked: Vec<&Write> = applied
        .iter()
        .filter(|w| w.done.is_some())
        .copied()
        .collect();
    acked.sort_by_key(|w| w.done);
    let mut next_ack = 0;
    for w in by_sent {
        let sent = w.sent.expect("filtered");
        while next_ack < acked.len() && acked[next_ack].done.expect("filtered") < sent {
            let a = acked[next_ack];
            if newest_ack.is_none_or(|n| a.token > n.token) {
                newest_ack = Some(a);
            }
            if !shared[a.op.as_str()] && newest_writer_ack.is_none_or(|n| a.token > n.token) {
                newest_writer_ack = Some(a);
            }
            next_ack += 1;
        }
        let bar = if shared[w.op.as_str()] {
            newest_writer_ack
        } else {
            newest_ack
        };
        if let Some(newer) = bar {
            if newer.token > w.token {
                v.push(Violation::StaleAfterNewer {
                    lock: l.lock.clone(),
                    op: w.op.clone(),
                    token: w.token,
                    newer_op: newer.op.clone(),
                    newer_token: newer.token,
                });
            }
        }
    }
}

/// Invariant 2, accepted tokens strictly increase per lock: every token is granted once;
/// successive runs in the log carry growing tokens (a token that comes back is an overlap,
/// invariant 1); every accepted write carries a token that was granted to the writer's
/// session.
fn tokens_only_grow(events: &Events, locks: &[LockView], v: &mut Vec<Violation>) {
    let mut granted: HashMap<(&str, u64), Vec<i64>> = HashMap::new();
    for g in &events.grants {
        granted
            .entry((g.lock.as_str(), g.token))
            .or_default()
            .push(g.session);
    }
    let mut twice: Vec<_> = granted.iter().filter(|(_, s)| s.len() > 1).collect();
    twice.sort();
    for ((lock, token), sessions) in twice {
        v.push(Violation::TokenGrantedTwice {
            lock: lock.to_string(),
            token: *token,
            sessions: sessions.clone(),
        });
    }

    for l in locks {
        // Shared locks' order is judged by their own rule (invariant 1).
        let runs = if l.sharing == Sharing::Exclusive {
            run_changes(&l.store.log)
        } else {
            Vec::new()
        };
        for (prev, e, returns) in runs {
            if !returns && e.token < prev.token {
                v.push(Violation::TokenWentBack {
                    lock: l.lock.clone(),
                    token: e.token,
                    op: e.op.clone(),
                    after_token: prev.token,
                });
            }
        }
        for e in &l.store.log {
            let granted_to = granted.get(&(l.lock.as_str(), e.token));
            if let Some(w) = l.by_op.get(e.op.as_str()) {
                if w.token != e.token || !granted_to.is_some_and(|s| s.contains(&w.session)) {
                    v.push(Violation::NotGranted {
                        lock: l.lock.clone(),
                        op: e.op.clone(),
                        token: e.token,
                        session: w.session,
                    });
                }
            }
        }
    }
}

/// Invariant 3, nothing lost, nothing doubled: every write reported accepted is in the
/// store's log, no write reported refused is, the log holds each attempted operation at most
/// once and nothing else, and the counter equals the number of operations in the log. Counts
/// the outcomes (the unknown ones as the store resolves them) into `report`.
fn nothing_lost_nothing_doubled(locks: &[LockView], report: &mut Report) {
    for l in locks {
        let lock = l.lock;
        let v = &mut report.violations;
        for w in &l.writes {
            let present = l.in_log.contains_key(w.op.as_str());
            match &w.outcome {
                Outcome::Accepted => {
                    report.accepted += 1;
                    if !present {
                        report.lost += 1;
                        v.push(Violation::AcceptedButMissing {
                            lock: lock.clone(),
                            op: w.op.clone(),
                        });
                    }
                }
                Outcome::Refused(error) => {
                    report.refused += 1;
                    if present {
                        v.push(Violation::RefusedButApplied {
                            lock: lock.clone(),
                            op: w.op.clone(),
                            error: error.clone(),
                        });
                    }
                }
                Outcome::Unknown(_) if present => report.unknown_done += 1,
                Outcome::Unknown(_) => report.unknown_not_done += 1,
            }
        }
        let mut phantoms: Vec<_> = l
            .in_log
            .iter()
            .filter(|(op, n)| **n > 1 || !l.by_op.contains_key(*op))
            .map(|(op, _)| *op)
            .collect();
        phantoms.sort();
        for op in phantoms {
            v.push(Violation::Phantom {
                lock: lock.clone(),
                op: op.to_owned(),
            });
        }
        if l.store.counter != l.store.log.len() as u64 {
            v.push(Violation::CounterMismatch {
                lock: lock.clone(),
                counter: l.store.counter,
                accepted: l.store.log.len() as u64,
            });
        }
    }
}

/// Not an invariant, a figure: writes sent by a worker that believed it held the lock, after
/// a newer token of that lock had been granted.
fn stale_beliefs(events: &Events, locks: &[LockView]) -> usize {
    let mut n = 0;
    for l in locks {
        // The lock's grants by token, and for each the earliest grant of a greater token.
        let mut grants: Vec<(u64, Instant)> = events
            .grants
            .iter()
            .filter(|g| g.lock == *l.lock)
            .filter_map(|g| g.at.map(|at| (g.token, at)))
            .collect();
        grants.sort();
        let mut earliest_from: Vec<Option<Instant>> = vec![None; grants.len() + 1];
        for i in (0..grants.len()).rev() {
            let at = grants[i].1;
            earliest_from[i] = Some(earliest_from[i + 1].map_or(at, |e| e.min(at)));
        }
        for w in &l.writes {
            let (Some(sent), true) = (w.sent, w.believed_held) else {
                continue;
            };
            let newer = grants.partition_point(|(t, _)| *t <= w.token);
            if earliest_from[newer].is_some_and(|at| at < sent) {
                n += 1;
            }
        }
    }
    n
}

/// Invariant 4: after the faults heal, every lock is acquired again within `bound` (the
/// slowest probe goes into `report`).
fn every_lock_recovers(events: &Events, locks: &[LockView], bound: Duration, report: &mut Report) {
    for l in locks {
        match events.probes.iter().find(|p| &p.lock == l.lock) {
            None => report.violations.push(Violation::Missing {
                lock: l.lock.clone(),
                what: "a probe after the heal",
            }),
            Some(p) => {
                let took = p
                    .acquired_at
                    .map(|at| at.saturating_duration_since(p.healed_at));
                report.recovery = report.recovery.max(took);
                if took.is_none_or(|t| t > bound) {
                    report.violations.push(Violation::NotRecovered {
                        lock: l.lock.clone(),
                        took,
                        bound,
                    });
                }
            }
        }
    }
}

/// Invariant 5: once all sessions are closed, no lock node remains (the anchor is not a lock
/// node).
fn no_lock_node_left(events: &Events, locks: &[LockView], v: &mut Vec<Violation>) {
    for l in locks {
        match events.leftovers.get(l.lock) {
            None => v.push(Violation::Missing {
                lock: l.lock.clone(),
                what: "the lock nodes left at the end",
            }),
            Some(nodes) => {
                // A node below the root (a semaphore's `locks/...`) is named by its path there.
                let anchor = |n: &&String| n.rsplit('/').next() == Some(ANCHOR);
                for node in nodes.iter().filter(|n| !anchor(n)) {
                    v.push(Violation::LeftoverNode {
                        lock: l.lock.clone(),
                        node: node.clone(),
                    });
                }
            }
        }
    }
}

/// The store's final state for `name` as the fenced tests lay it out: the counter at
/// `/counters/{name}`, and the operations under `/ops/{name}` in creation (zxid) order.
pub async fn read_store(raw: &zookeeper_client::Client, name: &str) -> Store {
    let (data, _) = raw.get_data(&format!("/counters/{name}")).await.unwrap();
    let counter = std::str::from_utf8(&data).unwrap().parse().unwrap();
    let mut log = Vec::new();
    for op in raw.list_children(&format!("/ops/{name}")).await.unwrap() {
        let (data, stat) = raw.get_data(&format!("/ops/{name}/{op}")).await.unwrap();
        let token = std::str::from_utf8(&data).unwrap().parse().unwrap();
        log.push((
            stat.czxid,
            Entry {
                op,
                token,
                shared: false,
            },
        ));
    }
    log.sort_by_key(|(czxid, _)| *czxid);
    Store {
        counter,
        log: log.into_iter().map(|(_, e)| e).collect(),
    }
}
