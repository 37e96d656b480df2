//! The test bed of the ensemble fault suite (`ensemble_faults.rs`) and of the soak
//! (`soak.rs`): a three-member ensemble per scenario (five for the soak); per bed, a chroot on
//! it with a fenced counter per lock (a lock of any recipe: mutex, key, read/write lock,
//! semaphore, election); contenders doing fenced increments (`worker.rs`), some possibly in a
//! process of their own; the probes that take every lock again after the heal; and the final
//! reading of the store, judged by the history checker (`support/history.rs`) and printed as
//! a row of docs/reliability.md's table (`report.rs`).

pub mod report;
pub mod worker;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zk_recipes::{LossPolicy, Session, SessionOptions, SessionState};
use zk_testcontainers::{
    chroot, ensemble_unavailable_reason, scaled, FaultProxy, ServerOptions, ZkEnsemble,
};
use zookeeper_client as zkc;

use crate::support::history::{
    Entry, Events, Grant, History, Outcome, Probe, Report, Sharing, Store, Write,
};
use crate::support::within;
use report::{longest_stall, Row};
use worker::{increment, work, ChildContender, Locker, Sink, Worker};

pub const LOCKS: &str = "/locks";
/// The lock space of the bed's keyed locks (a path of its own: one path, one recipe kind).
pub const KEYS: &str = "/keys";
pub const COUNTERS: &str = "/counters";
pub const OPS: &str = "/ops";
/// Small JVMs: two scenarios run at once, three servers each, on two cores.
pub const JAVA_OPTS: &str =
    "-Xms32m -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ActiveProcessorCount=1";
/// Increments per grant of an ordinary contender.
pub const OPS_PER_GRANT: usize = 3;
/// How much longer than the session timeout a frozen server or process stays frozen.
pub const FREEZE_MARGIN: Duration = Duration::from_millis(500);
pub const PERSISTENT: zkc::CreateOptions<'static> =
    zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());

/// How many times each fault is injected (`ZK_FAULTS_SCALE`, default 1).
pub fn rounds() -> usize {
    std::env::var("ZK_FAULTS_SCALE")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(1)
}

pub fn lock_root(lock: &str) -> String {
    if lock.starts_with("key-") {
        format!("{KEYS}/{lock}")
    } else {
        format!("{LOCKS}/{lock}")
    }
}

pub fn options(connect: &str, timeout: Duration, policy: LossPolicy) -> SessionOptions {
    SessionOptions::new(connect)
        .session_timeout(timeout)
        .connection_timeout(scaled(Duration::from_secs(10)))
        .loss_policy(policy)
}

/// Starts the scenario's ensemble, or says why it cannot run.
pub async fn ensemble() -> Option<ZkEnsemble> {
    ensemble_of(3).await
}

/// Starts an ensemble of `n` members with the bed's small JVMs, or says why it cannot run.
pub async fn ensemble_of(n: usize) -> Option<ZkEnsemble> {
    if let Some(reason) = ensemble_unavailable_reason() {
        println!("NOT RUN: {reason}");
        return None;
    }
    crate::support::init_tracing(); // tracing to the test's output
    let opts = ServerOptions::default().with_env("JVMFLAGS", JAVA_OPTS);
    Some(
        ZkEnsemble::start_with(n, opts)
            .await
            .unwrap_or_else(|e| panic!("a {n}-member ensemble: {e}")),
    )
}

// ---------------------------------------------------------------------------------------
// The bed: a chroot on an ensemble, counters, workers, probes and the final check.

pub struct Bed<'e> {
    pub ensemble: &'e ZkEnsemble,
    /// The chroot path on the ensemble, `/zk-tests/<name>-<unique>`.
    pub path: String,
    pub locks: Vec<String>,
    pub kinds: Vec<Kind>,
    pub history: Arc<History>,
    pub stop: watch::Sender<bool>,
    pub workers: Vec<JoinHandle<()>>,
    pub sessions: Vec<(String, Session)>,
    pub contenders: usize,
}

/// What kind of lock a lock of the bed is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A `ZkMutex` (`lock-N`): sequence tokens, an anchored root.
    Mutex,
    /// A key of a `ZkLockSpace` (`key-N`): zxid tokens, a container directory.
    Keyed,
    /// A `ZkRwLock` (`rw-N`): readers together, a writer alone.
    RwLock,
    /// A `ZkSemaphore` of `worker::PERMITS` leases (`sem-N`).
    Semaphore,
    /// A `ZkLeaderElection` (`elect-N`): terms as tokens.
    Election,
}

impl Kind {
    /// The name of the bed's lock `i` of this kind.
    pub fn lock_name(self, i: usize) -> String {
        let prefix = match self {
            Kind::Mutex => "lock",
            Kind::Keyed => "key",
            Kind::RwLock => "rw",
            Kind::Semaphore => "sem",
            Kind::Election => "elect",
        };
        format!("{prefix}-{i}")
    }

    /// The recipe, as docs/reliability.md's tables name it.
    pub fn recipe(self) -> &'static str {
        match self {
            Kind::Mutex => "ZkMutex",
            Kind::Keyed => "ZkLockSpace key",
            Kind::RwLock => "ZkRwLock",
            Kind::Semaphore => "ZkSemaphore",
            Kind::Election => "ZkLeaderElection",
        }
    }

    fn sharing(self) -> Sharing {
        match self {
            Kind::RwLock => Sharing::ReadWrite,
            Kind::Semaphore => Sharing::Permits(worker::PERMITS as usize),
            _ => Sharing::Exclusive,
        }
    }

    /// Where its contender nodes are, below the lock's root: the root itself, or a
    /// semaphore's two queues.
    fn node_dirs(self, root: &str) -> Vec<String> {
        match self {
            Kind::Semaphore => vec![format!("{root}/locks"), format!("{root}/leases")],
            _ => vec![root.to_owned()],
        }
    }
}

impl<'e> Bed<'e> {
    /// A bed with `locks` locks: the even ones `ZkMutex`es, the odd ones keys of a lock space.
    pub async fn new(ensemble: &'e ZkEnsemble, name: &str, locks: usize) -> Bed<'e> {
        let kinds: Vec<Kind> = (0..locks)
            .map(|i| if i % 2 == 0 { Kind::Mutex } else { Kind::Keyed })
            .collect();
        Bed::with_locks(ensemble, name, &kinds).await
    }

    /// A bed with one lock of each kind given, in that order.
    pub async fn with_locks(ensemble: &'e ZkEnsemble, name: &str, kinds: &[Kind]) -> Bed<'e> {
        let rooted = chroot(&ensemble.connect_string(), name).await.unwrap();
        let path = rooted[rooted.find('/').unwrap()..].to_owned();
        let raw = zkc::Client::connect(&rooted).await.unwrap();
        let locks: Vec<String> = kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| kind.lock_name(i))
            .collect();
        let history = Arc::new(History::new());
        for (lock, kind) in locks.iter().zip(kinds) {
            history.sharing(lock, kind.sharing());
            raw.mkdir(&format!("{OPS}/{lock}"), &PERSISTENT)
                .await
                .unwrap();
            raw.mkdir(&format!("{COUNTERS}/{lock}"), &PERSISTENT)
                .await
                .unwrap();
            raw.set_data(&format!("{COUNTERS}/{lock}"), b"0", None)
                .await
                .unwrap();
        }
        Bed {
            ensemble,
            path,
            locks,
            kinds: kinds.to_vec(),
            history,
            stop: watch::channel(false).0,
            workers: Vec::new(),
            sessions: Vec::new(),
            contenders: 0,
        }
    }

    /// Every member, in the bed's chroot.
    pub fn all(&self) -> String {
        format!("{}{}", self.ensemble.connect_string(), self.path)
    }

    /// Only these members, in the bed's chroot.
    pub fn only(&self, members: &[usize]) -> String {
        let hosts: Vec<String> = members
            .iter()
            .map(|i| self.ensemble.member(*i).connect_string())
            .collect();
        format!("{}{}", hosts.join(","), self.path)
    }

    pub async fn raw(&self) -> zkc::Client {
        within("a raw client", 60, zkc::Client::connect(&self.all()))
            .await
            .unwrap()
    }

    /// Starts a contender on `lock` (index) through `connect`.
    pub async fn contender(
        &mut self,
        name: &str,
        connect: &str,
        timeout: Duration,
        policy: LossPolicy,
        lock: usize,
        pinned: bool,
    ) {
        let session = Session::connect(options(connect, timeout, policy))
            .await
            .unwrap();
        self.sessions.push((name.to_owned(), session.clone()));
        self.contenders += 1;
        self.workers.push(tokio::spawn(work(Worker {
            name: name.to_owned(),
            session,
            lock: self.locks[lock].clone(),
            pinned,
            heeds_loss: true,
            sink: Sink::Local(self.history.clone()),
            stop: self.stop.subscribe(),
        })));
    }

    /// Waits (on the history's events) until `pred` holds.
    pub async fn wait(&self, what: &str, secs: u64, pred: impl FnMut(&Events) -> bool) {
        within(what, secs, self.history.wait_until(pred)).await;
    }

    /// Waits until every lock has `n` more accepted writes acknowledged after `since`.
    pub async fn wait_writes(&self, since: Instant, n: usize, secs: u64) {
        let locks = self.locks.clone();
        self.wait(&format!("{n} writes on every lock"), secs, move |e| {
            locks.iter().all(|lock| accepted_since(e, lock, since) >= n)
        })
        .await;
    }

    /// One round of the single-member scenarios: a holder whose session reaches only one
    /// follower (not the ensemble leader, alternating between the two), granted first; in
    /// round 0, four waiters on the other members; then contention and a few writes. Returns
    /// the isolated member, the holder's name and its grant.
    pub async fn isolated_holder(
        &mut self,
        round: usize,
        timeout: Duration,
        policy: LossPolicy,
    ) -> (usize, String, Grant) {
        let leader = self.ensemble.leader_index().await.unwrap();
        let member = (leader + 1 + round % 2) % 3;
        let others: Vec<usize> = (0..3).filter(|i| *i != member).collect();
        let (alone, rest) = (self.only(&[member]), self.only(&others));
        let holder = format!("holder{round}");
        self.contender(&holder, &alone, timeout, policy, 0, true)
            .await;
        self.wait("the holder's grant", 60, |e| grant_of(e, &holder).is_some())
            .await;
        let held = self.history.read(|e| grant_of(e, &holder)).unwrap();
        if round == 0 {
            self.contenders(4, &rest, timeout, policy).await;
        }
        self.wait_contended(0, 3).await;
        self.wait_writes(Instant::now(), 3, 60).await;
        (member, holder, held)
    }

    /// Waits until `lock`'s root has at least `n` contender nodes (a holder and waiters).
    pub async fn wait_contended(&self, lock: usize, n: usize) {
        let raw = self.raw().await;
        let root = lock_root(&self.locks[lock]);
        within("the lock to be contended", 60, async {
            loop {
                let (children, watcher) = children_and_watch(&raw, &root).await;
                if children.iter().filter(|c| !c.starts_with('~')).count() >= n {
                    return;
                }
                watcher.changed().await;
            }
        })
        .await;
    }

    /// After the heal: each lock taken by a fresh session through every member, with a
    /// fenced write, timed from `healed_at`.
    pub async fn probe(&self, healed_at: Instant, bound: Duration) {
        let mut probes = Vec::new();
        for (lock, kind) in self.locks.clone().into_iter().zip(self.kinds.clone()) {
            let (connect, history) = (self.all(), self.history.clone());
            let sessions = self.sessions.clone();
            probes.push(tokio::spawn(async move {
                let deadline = tokio::time::Instant::from_std(healed_at + bound);
                let acquired = tokio::time::timeout_at(deadline, async {
                    let session = loop {
                        let opts = options(&connect, Duration::from_secs(10), LossPolicy::Expiry);
                        match Session::connect(opts).await {
                            Ok(session) => break session,
                            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                        }
                    };
                    let mutex = Locker::new(&session, &lock);
                    loop {
                        match mutex.lock().await {
                            Ok(guard) => return (session, guard, Instant::now()),
                            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                        }
                    }
                })
                .await;
                let acquired_at = match acquired {
                    Err(_) => {
                        who_holds("STUCK", &connect, &lock, kind, &sessions, &history, None).await;
                        None
                    }
                    Ok((session, guard, at)) => {
                        let sink = Sink::Local(history.clone());
                        let worker = format!("probe-{lock}");
                        sink.grant(Grant {
                            lock: lock.clone(),
                            token: guard.history_token(),
                            session: guard.session_id(),
                            worker: worker.clone(),
                            at: Some(at),
                        });
                        let op = format!("{worker}-1");
                        increment(&session, &guard, &lock, &op, &worker, &sink).await;
                        let released = guard.release().await;
                        assert!(released.is_ok(), "probe release: {released:?}");
                        session.close().await;
                        Some(at)
                    }
                };
                history.probe(Probe {
                    lock,
                    healed_at,
                    acquired_at,
                });
            }));
        }
        for p in probes {
            p.await.unwrap();
        }
    }

    /// Starts `n` ordinary contenders, `w0`, `w1`..., through `connect`, spread over the
    /// locks.
    pub async fn contenders(
        &mut self,
        n: usize,
        connect: &str,
        timeout: Duration,
        policy: LossPolicy,
    ) {
        for i in 0..n {
            let lock = i % self.locks.len();
            self.contender(&format!("w{i}"), connect, timeout, policy, lock, false)
                .await;
        }
    }

    /// Starts a contender in a process of its own on `lock` (index) through `connect`: it
    /// holds its first grant and writes on, without heeding `lost()`, until stopped.
    pub fn child_contender(
        &mut self,
        name: &str,
        connect: &str,
        timeout: Duration,
        lock: usize,
    ) -> ChildContender {
        self.contenders += 1;
        ChildContender::spawn(name, connect, &self.locks[lock], timeout, &self.history)
    }

    /// A `FaultProxy` in front of `member`, and the connect string into the bed's chroot
    /// through it.
    pub async fn through_proxy(&self, member: usize) -> (FaultProxy, String) {
        let proxy = FaultProxy::start(self.ensemble.member(member).connect_string())
            .await
            .unwrap();
        let through = format!("{}{}", proxy.addr(), self.path);
        (proxy, through)
    }

    /// A raw client on the leader alone (after a `sync`, so it has every committed write), in
    /// the bed's chroot.
    async fn leader_raw(&self) -> zkc::Client {
        let leader = within("the ensemble's leader", 60, self.ensemble.leader())
            .await
            .unwrap();
        let connect = format!("{}{}", leader.connect_string(), self.path);
        let raw = within(
            "a raw client on the leader",
            60,
            zkc::Client::connect(&connect),
        )
        .await
        .unwrap();
        raw.sync("/").await.unwrap();
        raw
    }

    /// Each lock's counter and number of operations as every member serves them, against
    /// `leader`'s: a member that differs lost committed transactions (or has not caught up
    /// after a `sync`), which is ZooKeeper's fault, never the library's; printed as `STORE`
    /// lines for whoever reads the report.
    async fn compare_members(&self, leader: &zkc::Client) {
        async fn view(raw: &zkc::Client, locks: &[String]) -> Vec<(String, usize)> {
            let mut view = Vec::new();
            for lock in locks {
                let counter = raw.get_data(&format!("{COUNTERS}/{lock}")).await;
                let ops = raw.list_children(&format!("{OPS}/{lock}")).await;
                let counter = counter.map(|(d, _)| String::from_utf8_lossy(&d).into_owned());
                view.push((format!("{counter:?}"), ops.map(|o| o.len()).unwrap_or(0)));
            }
            view
        }
        let wanted = view(leader, &self.locks).await;
        for (i, member) in self.ensemble.members().iter().enumerate() {
            let connect = format!("{}{}", member.connect_string(), self.path);
            // A member a test left down is not waited for long.
            let Ok(Ok(raw)) = tokio::time::timeout(
                scaled(Duration::from_secs(3)),
                zkc::Client::connect(&connect),
            )
            .await
            else {
                println!("STORE member {i}: not reached");
                continue;
            };
            let _ = raw.sync("/").await;
            let seen = view(&raw, &self.locks).await;
            for ((lock, want), got) in self.locks.iter().zip(&wanted).zip(&seen) {
                if want != got {
                    println!(
                        "STORE member {i} differs from the leader on {lock}: counter {} and \
                         {} operations there, {} and {} on the leader (its data is not the leader's after a sync: \
                         ZooKeeper's own inconsistency, not the library's)",
                        got.0, got.1, want.0, want.1
                    );
                }
            }
        }
    }

    /// Waits until every contender's client has given its session up (no server reached
    /// within the session timeout).
    pub async fn wait_sessions_given_up(&self) {
        for (name, session) in &self.sessions {
            let mut states = session.watch_state();
            within(&format!("{name} to give its session up"), 60, async {
                states
                    .wait_for(|s| matches!(s, SessionState::Expired { .. }))
                    .await
                    .unwrap();
            })
            .await;
        }
    }

    /// The session ids of every contender right now.
    pub fn session_ids(&self) -> Vec<Option<i64>> {
        self.sessions.iter().map(|(_, s)| s.session_id()).collect()
    }

    /// How many contenders are on another session than in `before` (their
    /// [`Bed::session_ids`] then).
    pub fn sessions_replaced_since(&self, before: &[Option<i64>]) -> usize {
        before
            .iter()
            .zip(self.session_ids())
            .filter(|(a, b)| **a != *b)
            .count()
    }

    /// Stops the contenders, waits for their sessions to close and their nodes to go (as
    /// long as `linger`: sessions the clients gave up may live on the servers that long),
    /// reads the store, judges the history and prints the scenario's row.
    pub async fn finish(mut self, row: Row, linger: Duration, recovery_bound: Duration) -> Report {
        self.stop.send_replace(true);
        let workers = std::mem::take(&mut self.workers);
        within("the contenders to stop", 120, async {
            for w in workers {
                w.await.unwrap();
            }
        })
        .await;
        let raw = self.raw().await;
        for (lock, kind) in self.locks.iter().zip(&self.kinds) {
            let mut left = Vec::new();
            for dir in kind.node_dirs(&lock_root(lock)) {
                let gone = tokio::time::timeout(scaled(linger), async {
                    loop {
                        let (children, watcher) = children_and_watch(&raw, &dir).await;
                        if children.iter().all(|c| c.starts_with('~')) {
                            return;
                        }
                        watcher.changed().await;
                    }
                })
                .await;
                // A key's directory (a semaphore's leases) may be reaped already: nothing
                // left in it.
                let nodes = children_and_watch(&raw, &dir).await.0;
                if gone.is_err() {
                    println!("{dir}: nodes still there after {linger:?}: {nodes:?}");
                }
                let below = dir.strip_prefix(&lock_root(lock)).unwrap_or_default();
                let below = below.trim_start_matches('/');
                left.extend(nodes.into_iter().map(|n| match below {
                    "" => n,
                    below => format!("{below}/{n}"),
                }));
            }
            self.history.leftovers(lock, left);
        }
        // The store, as the leader serves it (every committed transaction is there; a member
        // that lost some, a ZooKeeper bug, would show a lost update the library never made):
        // the counter, and the operations in the order the ensemble took them. Every member's
        // own view is compared with it, and a member that differs is said so.
        let raw = self.leader_raw().await;
        self.compare_members(&raw).await;
        for lock in &self.locks {
            let (data, _) = raw.get_data(&format!("{COUNTERS}/{lock}")).await.unwrap();
            let counter = std::str::from_utf8(&data).unwrap().parse().unwrap();
            let mut log = Vec::new();
            let ops = raw.list_children(&format!("{OPS}/{lock}")).await.unwrap();
            // Read 256 at a time (a soak's store holds thousands).
            for chunk in ops.chunks(256) {
                let mut reads = tokio::task::JoinSet::new();
                for op in chunk {
                    let (raw, path, op) = (raw.clone(), format!("{OPS}/{lock}/{op}"), op.clone());
                    reads.spawn(async move {
                        let (data, stat) = raw.get_data(&path).await.unwrap();
                        (op, data, stat.czxid)
                    });
                }
                while let Some(read) = reads.join_next().await {
                    let (op, data, czxid) = read.unwrap();
                    let data = std::str::from_utf8(&data).unwrap();
                    let (token, shared) = match data.strip_suffix(" shared") {
                        Some(token) => (token, true),
                        None => (data, false),
                    };
                    let token = token.parse().unwrap();
                    log.push((czxid, Entry { op, token, shared }));
                }
            }
            log.sort_by_key(|(czxid, _)| *czxid);
            let log = log.into_iter().map(|(_, e)| e).collect();
            self.history.store(lock, Store { counter, log });
        }
        let report = self.history.check(recovery_bound);
        let stall = longest_stall(&self.history.snapshot(), &self.locks);
        row.print(self.contenders, self.locks.len(), &report, stall);
        for v in &report.violations {
            println!("VIOLATION: {v}");
        }
        report
    }
}

/// The children of `path` and a watch that fires when they (or, while `path` does not exist
/// (a key's directory not made yet, or reaped), its existence) change.
pub async fn children_and_watch(
    raw: &zkc::Client,
    path: &str,
) -> (Vec<String>, zkc::OneshotWatcher) {
    loop {
        match raw.get_and_watch_children(path).await {
            Ok((children, _, watcher)) => return (children, watcher),
            Err(zkc::Error::NoNode) => {
                let (stat, watcher) = raw.check_and_watch_stat(path).await.unwrap();
                if stat.is_none() {
                    return (Vec::new(), watcher);
                }
            }
            Err(err) => panic!("list {path}: {err}"),
        }
    }
}

/// Accepted writes on `lock` acknowledged after `since`.
pub fn accepted_since(e: &Events, lock: &str, since: Instant) -> usize {
    e.writes
        .iter()
        .filter(|w| w.lock == lock && w.outcome == Outcome::Accepted)
        .filter(|w| w.done.is_some_and(|d| d > since))
        .count()
}

/// The grant of `worker` on `lock`, once it is recorded.
pub fn grant_of(e: &Events, worker: &str) -> Option<Grant> {
    e.grants.iter().find(|g| g.worker == worker).cloned()
}

/// Whether someone other than `worker` had a write accepted on `lock` under a newer token.
pub fn newer_write(e: &Events, lock: &str, worker: &str, token: u64) -> bool {
    e.writes.iter().any(|w| {
        w.lock == lock && w.worker != worker && w.token > token && w.outcome == Outcome::Accepted
    })
}

/// The writes `worker` attempted, in the order it reported them.
pub fn writes_of<'a>(e: &'a Events, worker: &'a str) -> impl Iterator<Item = &'a Write> {
    e.writes.iter().filter(move |w| w.worker == worker)
}

/// When `holder` learned that it lost `held`, and when the next holder of that lock was
/// granted (either may not have happened yet).
pub fn loss_and_next_grant(
    e: &Events,
    holder: &str,
    held: &Grant,
) -> (Option<Instant>, Option<Instant>) {
    let lost = e
        .releases
        .iter()
        .find(|r| r.worker == holder)
        .and_then(|r| r.at);
    let next = e
        .grants
        .iter()
        .filter(|g| g.lock == held.lock && g.token > held.token)
        .filter_map(|g| g.at)
        .min();
    (lost, next)
}

// ---------------------------------------------------------------------------------------
// Faults of the whole ensemble

/// Stops every member at once.
pub async fn stop_every_member(ensemble: &ZkEnsemble) {
    ensemble.stop().await.unwrap();
}

/// Starts every member again at once, and waits until they all serve.
pub async fn start_every_member(ensemble: &ZkEnsemble) {
    ensemble.start_again().await.unwrap();
}

/// Prints what holds `lock` up (`label` first on every line: `STUCK` for a probe that did not
/// get it, `STALL` while the soak runs): the contender nodes in queue order with their owners
/// (the bed's session by name, when it is one), the member serving each owner's session (with
/// `ensemble`: the servers' `cons`), each owner's last grant and release in the history, and
/// the client-side state of the sessions involved (every bed session for `STUCK`).
pub async fn who_holds(
    label: &str,
    connect: &str,
    lock: &str,
    kind: Kind,
    sessions: &[(String, Session)],
    history: &History,
    ensemble: Option<&Arc<ZkEnsemble>>,
) {
    let Ok(Ok(raw)) =
        tokio::time::timeout(Duration::from_secs(10), zkc::Client::connect(connect)).await
    else {
        println!("{label} {lock}: no client to look with");
        return;
    };
    let names: Vec<(String, Option<i64>)> = sessions
        .iter()
        .map(|(name, s)| (name.clone(), s.session_id()))
        .collect();
    // Each member's connections, read once (at the same time: a frozen member answers only
    // at its four-letter word's timeout).
    let mut cons: Vec<Option<String>> = Vec::new();
    if let Some(e) = ensemble {
        let mut reads = tokio::task::JoinSet::new();
        for i in 0..e.len() {
            let e = e.clone();
            reads.spawn(async move { (i, e.member(i).four_letter("cons").await.ok()) });
        }
        cons = vec![None; e.len()];
        while let Some(Ok((i, read))) = reads.join_next().await {
            cons[i] = read;
        }
    }
    let mut involved = Vec::new();
    for dir in kind.node_dirs(&lock_root(lock)) {
        let listing = tokio::time::timeout(Duration::from_secs(10), raw.list_children(&dir));
        let mut children = match listing.await {
            Ok(Ok(children)) => children,
            Ok(Err(err)) => {
                println!("{label} {lock}: listing {dir}: {err}");
                continue;
            }
            Err(_) => {
                println!("{label} {lock}: listing {dir}: no answer within 10 s");
                continue;
            }
        };
        children.sort_by_key(|c| c.rsplit('-').next().map(str::to_owned));
        for child in children {
            let path = format!("{dir}/{child}");
            let owner = match raw.check_stat(&path).await {
                Ok(Some(stat)) => stat.ephemeral_owner,
                _ => 0,
            };
            // A bed session by name, else a child process's (or an earlier session's) by its
            // grants in the history.
            let name = names
                .iter()
                .find(|(_, id)| *id == Some(owner))
                .map(|(n, _)| n.clone())
                .or_else(|| {
                    history.read(|e| {
                        e.grants
                            .iter()
                            .rev()
                            .find(|g| g.session == owner)
                            .map(|g| g.worker.clone())
                    })
                });
            let name = name.as_deref().unwrap_or("(not a bed session)");
            involved.push(name.to_owned());
            let needle = format!("sid={owner:#x}");
            let served = match cons
                .iter()
                .position(|c| c.as_ref().is_some_and(|c| c.contains(&needle)))
            {
                _ if ensemble.is_none() || owner == 0 => String::new(),
                Some(i) => format!(", served by member {i}"),
                None => ", served by no member that answers".to_owned(),
            };
            let last = history.read(|e| {
                let grant = e
                    .grants
                    .iter()
                    .rev()
                    .find(|g| g.worker == name && g.lock == lock);
                let release = e
                    .releases
                    .iter()
                    .rev()
                    .find(|r| r.worker == name && r.lock == lock);
                format!(
                    "last grant {:?}, last release {:?}",
                    grant.map(|g| (g.token, g.at.map(|a| a.elapsed()))),
                    release.map(|r| (r.token, r.at.map(|a| a.elapsed()), r.how.clone()))
                )
            });
            println!("{label} {lock}: {path} owner {owner:#x} = {name}{served}: {last}");
        }
    }
    let contender = format!("{lock}-");
    for (name, s) in sessions {
        let mine = name.starts_with(&contender) || involved.contains(name);
        if label == "STUCK" || mine {
            println!(
                "{label} session {name}: {:?} id {:?}",
                s.state(),
                s.session_id().map(|i| format!("{i:#x}"))
            );
        }
    }
}

/// What [`StallWatch::run`] looks at.
pub struct StallWatch {
    pub ensemble: Arc<ZkEnsemble>,
    /// Every member, in the bed's chroot.
    pub connect: String,
    pub locks: Vec<(String, Kind)>,
    pub sessions: Vec<(String, Session)>,
    pub history: Arc<History>,
    /// When the nemesis began (the lines say when a stall began from it).
    pub began: Instant,
    pub bound: Duration,
}

impl StallWatch {
    /// While the soak runs (until `stop`): every second, any lock that has had no accepted
    /// write acknowledged for `bound` (and again at each further multiple of it) gets its
    /// `STALL` lines: how long, and [`who_holds`] it up right then.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let w = self;
        // Per lock: the last acknowledged write seen, and how many bounds of its stall were
        // told.
        let mut told: Vec<(Instant, u32)> = vec![(w.began, 0); w.locks.len()];
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            for (i, (lock, kind)) in w.locks.iter().enumerate() {
                let last = w.history.read(|e| {
                    e.writes
                        .iter()
                        .filter(|x| &x.lock == lock && x.outcome == Outcome::Accepted)
                        .filter_map(|x| x.done)
                        .max()
                });
                let last = last.unwrap_or(w.began).max(w.began);
                if last > told[i].0 {
                    told[i] = (last, 0);
                }
                let quiet = last.elapsed();
                let n = (quiet.as_secs_f64() / w.bound.as_secs_f64()) as u32;
                if n > told[i].1 {
                    told[i].1 = n;
                    println!(
                        "STALL {lock}: no acknowledged write for {:.1} s (since +{:.1} s of the nemesis)",
                        quiet.as_secs_f64(),
                        last.duration_since(w.began).as_secs_f64()
                    );
                    let (connect, sessions) = (&w.connect, &w.sessions);
                    let ensemble = Some(&w.ensemble);
                    who_holds(
                        "STALL", connect, lock, *kind, sessions, &w.history, ensemble,
                    )
                    .await;
                }
            }
        }
    }
}
