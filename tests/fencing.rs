//! Fencing end to end: the account-balance incident replayed with real processes frozen by
//! `SIGSTOP` (fenced and not), ZooKeeper writes guarded by a grant that is gone, and a
//! property: fenced increments stay exact while sessions expire at random.

#[path = "support/cons.rs"]
mod cons;
mod support;

#[path = "../examples/incident_replay/replay.rs"]
mod replay;
#[path = "../examples/incident_replay/store.rs"]
mod store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use replay::{Mode, Outcome, Replay, WorkerArgs};
use store::{Accounts, FenceVerdict};
use support::{within, Zk};
use tokio::sync::{oneshot, watch};
use zk_recipes::{Error, FencingToken, Grant, LossReason, Session, SessionState, ZkMutex};
use zk_testcontainers::expire_session;
use zookeeper_client as zkc;

/// Set in the environment of the worker processes of the replay (this test binary again).
const WORKER_VAR: &str = "ZK_FENCING_WORKER";
/// How many fenced increments the property test makes (default 10,000).
const INCREMENTS_VAR: &str = "ZK_FENCING_INCREMENTS";

async fn replay(mode: Mode) -> Outcome {
    let zk = Zk::start(&format!("replay-{mode}")).await;
    let exe = std::env::current_exe().unwrap();
    let replay = Replay {
        connect: zk.connect.clone(),
        lock: "/locks/acct-1".into(),
        mode,
        session_timeout: Duration::from_secs(2),
    };
    let outcome = replay::run(&replay, |worker: &WorkerArgs| {
        let mut command = tokio::process::Command::new(&exe);
        command
            .args([
                "--exact",
                "worker_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WORKER_VAR, worker.to_pairs().join("\n"));
        command
    })
    .await
    .unwrap_or_else(|e| panic!("{mode} replay: {e}"));
    for line in &outcome.timeline {
        println!("{line}");
    }
    println!("{}", outcome.verdict());
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_replay_refuses_the_stale_write_and_keeps_both_debits() {
    let outcome = replay(Mode::Fenced).await;
    assert!(outcome.frozen_for >= outcome.session_timeout);
    assert!(outcome.newer_token > outcome.stale_token);
    // The store's own record of the stale write: refused by the newer holder's fence.
    let stale = outcome
        .journal
        .iter()
        .find(|e| e.op == "write" && e.token == outcome.stale_token)
        .expect("worker 1 wrote with its stale token");
    assert!(!stale.accepted, "{stale:?}");
    assert_eq!(stale.value, replay::OPENING - replay::CHARGE);
    assert_eq!(stale.fence, outcome.newer_token);
    assert!(!outcome.stale_write_accepted);
    // Worker 1 started over under a new lock and token, from the balance worker 2 left.
    let retry = outcome.retry_token.expect("worker 1 retried");
    assert!(retry > outcome.newer_token);
    assert_eq!(outcome.final_balance, Outcome::RIGHT);
    assert_eq!(outcome.final_balance, 10_200_000);
    assert!(outcome.as_expected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unfenced_replay_loses_the_withdrawal() {
    let outcome = replay(Mode::Unfenced).await;
    assert!(outcome.frozen_for >= outcome.session_timeout);
    assert!(outcome.newer_token > outcome.stale_token);
    // Same processes, same freeze: without the fence the stale write lands.
    assert!(outcome.stale_write_accepted);
    assert_eq!(outcome.retry_token, None);
    assert_eq!(outcome.final_balance, 12_200_000);
    assert_eq!(Outcome::RIGHT - outcome.final_balance, -replay::WITHDRAWAL);
    assert!(outcome.as_expected());
}

/// A replay worker: this binary run again by the replay tests, with its orders in
/// `ZK_FENCING_WORKER`; without them it has nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_process() {
    let Ok(orders) = std::env::var(WORKER_VAR) else {
        return;
    };
    let args = WorkerArgs::from_pairs(orders.lines()).unwrap();
    if let Err(e) = replay::worker(args).await {
        println!("@replay error {e}");
        panic!("{e}");
    }
}

const ROOT: &str = "/locks/balance";
const DATA: &str = "/balance";
const AUDIT: &str = "/audit";

/// A fenced ZooKeeper write made under `grant`: sets the balance and creates an audit node.
async fn fenced_write(grant: &Grant, balance: &[u8]) -> Result<(), Error> {
    let client = grant.client()?;
    let mut write = grant.fenced_write(&client)?;
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    write.add_set_data(DATA, balance, None)?;
    write.add_create(AUDIT, balance, &open)?;
    write.commit().await.map(drop)
}

/// The balance node's data and version, and whether the audit node exists.
async fn read_back(raw: &zkc::Client) -> (Vec<u8>, i32, bool) {
    let (data, stat) = raw.get_data(DATA).await.unwrap();
    let audit = raw.check_stat(AUDIT).await.unwrap().is_some();
    (data, stat.version, audit)
}

async fn balance_node(zk: &Zk) -> zkc::Client {
    let raw = zk.raw().await;
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    raw.create(DATA, b"12400000", &open).await.unwrap();
    raw
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_write_after_session_expiry_fails_typed_and_changes_nothing() {
    let zk = Zk::start("fenced-write-expiry").await;
    let raw = balance_node(&zk).await;
    let session = zk.session().await;
    let mutex = ZkMutex::new(&session, ROOT).unwrap();
    let guard = mutex.lock().await.unwrap();
    let before = read_back(&raw).await;

    let info = session.client().await.unwrap().session().clone();
    expire_session(&zk.connect, &info).await.unwrap();
    // At once, whether or not the client has noticed yet, and again once it has. At once,
    // the request may also meet the connection the expiry broke: then the client cannot
    // know the outcome and says so (the read-back below shows nothing was written).
    let early = fenced_write(&guard, b"10400000").await.unwrap_err();
    let outcome_unknown = matches!(early, Error::ConnectionLost);
    assert!(
        matches!(early, Error::SessionExpired) || outcome_unknown,
        "{early:?}"
    );
    assert_eq!(
        within("lost() after expiry", 20, guard.lost()).await,
        LossReason::SessionExpired
    );
    let late = fenced_write(&guard, b"10400000").await.unwrap_err();
    assert!(matches!(late, Error::SessionExpired), "{late:?}");
    assert_eq!(read_back(&raw).await, before, "nothing changed");
    assert!(!before.2);

    // The session's next ZooKeeper session writes under a new grant.
    let again = within("a new grant", 20, mutex.lock()).await.unwrap();
    assert!(again.token() > guard.token());
    fenced_write(&again, b"10400000").await.unwrap();
    let after = read_back(&raw).await;
    assert_eq!((after.0.as_slice(), after.2), (&b"10400000"[..], true));
}

// One thread, so nothing reads the holder's connection between the delete being queued and
// the fenced write's own check: the client cannot have seen the deletion when it sends.
#[tokio::test(flavor = "current_thread")]
async fn a_fenced_write_after_the_lock_node_is_deleted_fails_typed_and_changes_nothing() {
    let zk = Zk::start("fenced-write-deleted").await;
    let raw = balance_node(&zk).await;
    let session = zk.session().await;
    let mutex = ZkMutex::new(&session, ROOT).unwrap();
    let guard = mutex.lock().await.unwrap();
    let before = read_back(&raw).await;

    // The lock node is deleted just before the write reaches the server, and the holder has
    // not heard of it: the delete goes first on the holder's own connection (the server
    // applies a session's requests in order) and the write is built and committed before the
    // client reads anything, so the server-side check in the multi-op is what refuses it.
    // (A delete from another client races the notification, which the holder usually sees
    // first; then the client's own check refuses, with the same error.)
    let client = guard.client().unwrap();
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let mut write = guard.fenced_write(&client).unwrap();
    write.add_set_data(DATA, b"10400000", None).unwrap();
    write.add_create(AUDIT, b"10400000", &open).unwrap();
    let delete = client.delete(guard.path(), None);
    assert!(guard.is_held(), "the client has not observed the deletion");
    let (deleted, committed) = tokio::join!(delete, write.commit());
    deleted.unwrap();
    let err = committed.unwrap_err();
    assert!(
        matches!(&err, Error::Lost { path } if path == guard.path()),
        "{err:?}"
    );
    assert_eq!(read_back(&raw).await, before, "nothing changed");
    assert_eq!(
        within("lost() after deletion", 10, guard.lost()).await,
        LossReason::NodeDeleted
    );
    assert!(!guard.is_held());
    let err = fenced_write(&guard, b"10400000").await.unwrap_err();
    assert!(matches!(err, Error::Lost { .. }), "{err:?}");
    assert_eq!(read_back(&raw).await, before, "nothing changed");
}

/// Every operation added to a fenced write is size-checked against the servers' packet
/// limit, and the whole transaction at commit: a 2 MB `set_data` is `Error::TooLarge` at
/// once (it was `ConnectionLost`, "outcome unknown", for a write that could never happen),
/// and so are three parts of 400 KiB that fit one by one but not together. Nothing is sent
/// (the server's count of the session's requests does not move, and the connection stays),
/// nothing changes, the grant still holds, and a write that fits commits afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_write_too_large_is_refused_before_anything_is_sent() {
    let zk = Zk::start("fenced-write-too-large").await;
    let raw = balance_node(&zk).await;
    // A long session: its heartbeat (a third of the timeout after the lock) falls far outside
    // the few milliseconds counted below, so the count must not move at all.
    let options = zk.options().session_timeout(Duration::from_secs(30));
    let session = Session::connect(options).await.unwrap();
    let mutex = ZkMutex::new(&session, ROOT).unwrap();
    let guard = mutex.lock().await.unwrap();
    let before = read_back(&raw).await;
    let host = zk.server.connect_string();
    let sid = guard.session_id();
    let client = guard.client().unwrap();
    let counted = cons::of_session(&host, sid).await.expect("our connection");

    // One operation over the limit (1 MiB): refused as it is added, not added.
    let mut write = guard.fenced_write(&client).unwrap();
    let huge = vec![b'9'; 2 << 20];
    let err = write.add_set_data(DATA, &huge, None).unwrap_err();
    assert!(
        matches!(err, Error::TooLarge { limit, .. } if limit < huge.len()),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let err = write.add_create(AUDIT, &huge, &open).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");
    let empty = write.size();
    drop(write);

    // Parts that fit one by one, not together: refused at commit.
    let part = vec![b'8'; 400 << 10];
    let mut write = guard.fenced_write(&client).unwrap();
    write.add_set_data(DATA, &part, None).unwrap();
    write.add_create(AUDIT, &part, &open).unwrap();
    write.add_set_data(DATA, &part, Some(before.1)).unwrap();
    assert!(write.size() > 3 * part.len() && write.size() > empty);
    let err = write.commit().await.unwrap_err();
    assert!(
        matches!(err, Error::TooLarge { size, limit, .. } if size > limit),
        "{err:?}"
    );

    let after = cons::of_session(&host, sid).await.expect("our connection");
    assert_eq!(after.peer, counted.peer, "the connection was not dropped");
    assert_eq!(
        after.lcxid, counted.lcxid,
        "requests were sent: {counted:?} -> {after:?}"
    );
    assert!(matches!(session.state(), SessionState::Connected { session_id } if session_id == sid));
    assert_eq!(read_back(&raw).await, before, "nothing changed");
    assert!(guard.is_held());
    // The grant is fine: a write that fits commits.
    fenced_write(&guard, b"10400000").await.unwrap();
    assert_eq!(read_back(&raw).await.0, b"10400000");
    guard.release().await.unwrap();
    session.close().await;
}

const COUNTER: &str = "counter";
const CONTENDERS: usize = 8;

#[derive(Default)]
struct Tally {
    /// Increments handed out so far (each contender takes the next before making one).
    started: AtomicU64,
    accepted: AtomicU64,
    refused_reads: AtomicU64,
    refused_writes: AtomicU64,
    grants: AtomicU64,
    /// Holders frozen between their read and their write.
    freezes: AtomicU64,
    /// `lock()` errors, retried.
    lock_errors: Mutex<Vec<String>>,
}

/// The incident, in-process: a holder frozen between its read and its write, with its
/// session expired. The next holder to read with a newer token resumes it and lets its stale
/// write go first, before writing itself: the window that fenced writes alone leave open.
#[derive(Default)]
struct Window {
    /// The frozen holder's token and how to resume it (it answers when it has written).
    frozen: Mutex<Option<(FencingToken, oneshot::Sender<oneshot::Sender<()>>)>>,
}

/// 8 contenders, each with its own session and its own connection to one SQLite database,
/// take the lock and make 1 to 8 increments under each grant (a fenced read, then a fenced
/// write of the value + 1). Sessions are expired at random; about once in 200 increments a
/// holder freezes between its read and its write while its session is expired (see
/// [`Window`]). The contenders never ask whether they still hold the lock: only the store
/// stops them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_increments_stay_exact_while_sessions_expire_at_random() {
    let total: u64 = std::env::var(INCREMENTS_VAR)
        .map(|v| v.parse().expect("ZK_FENCING_INCREMENTS: a number"))
        .unwrap_or(10_000);
    let zk = Zk::start("fenced-increments").await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("counter.db");
    let store = Accounts::open(&db, "test").unwrap();
    store.create(COUNTER, 0).unwrap();
    let mut sessions = Vec::new();
    for _ in 0..CONTENDERS {
        sessions.push(zk.session().await);
    }
    let tally = Arc::new(Tally::default());
    let window = Arc::new(Window::default());
    let finished = Arc::new(watch::Sender::new(0usize));
    let started = Instant::now();
    let expirer = tokio::spawn(expire_at_random(
        zk.connect.clone(),
        sessions.clone(),
        finished.subscribe(),
    ));
    let contenders: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, session)| {
            let contender = Contender {
                id: i,
                session: session.clone(),
                store: Accounts::open(&db, &format!("contender {i}")).unwrap(),
                connect: zk.connect.clone(),
                tally: tally.clone(),
                window: window.clone(),
            };
            let finished = finished.clone();
            tokio::spawn(async move {
                contender.run(total).await;
                finished.send_modify(|n| *n += 1);
            })
        })
        .collect();
    for contender in contenders {
        within("the contenders", 900, contender).await.unwrap();
    }
    let elapsed = started.elapsed();
    let random_expiries = within("the expirer", 60, expirer).await.unwrap();

    let accepted = tally.accepted.load(Ordering::Relaxed);
    let refused_reads = tally.refused_reads.load(Ordering::Relaxed);
    let refused_writes = tally.refused_writes.load(Ordering::Relaxed);
    let freezes = tally.freezes.load(Ordering::Relaxed);
    let lock_errors = tally.lock_errors.lock().unwrap().clone();
    println!(
        "{total} increments by {CONTENDERS} contenders in {:.1} s: {accepted} accepted, {} \
         refused ({refused_reads} at the read, {refused_writes} at the write), {} grants, {} \
         sessions expired ({random_expiries} at random, {freezes} of holders frozen between \
         read and write), {} lock() errors retried: {lock_errors:?}",
        elapsed.as_secs_f64(),
        refused_reads + refused_writes,
        tally.grants.load(Ordering::Relaxed),
        random_expiries + freezes,
        lock_errors.len(),
    );
    assert_eq!(accepted + refused_reads + refused_writes, total);
    let (counter, _) = store.balance(COUNTER).unwrap();
    assert_eq!(
        counter as u64, accepted,
        "the counter equals the accepted increments"
    );

    // The store's journal, in commit order.
    let journal = store.journal(COUNTER).unwrap();
    let writes: Vec<_> = journal
        .iter()
        .filter(|e| e.op == "write" && e.accepted)
        .collect();
    assert_eq!(writes.len() as u64, accepted);
    for (n, write) in writes.iter().enumerate() {
        assert_eq!(
            write.value,
            n as i64 + 1,
            "accepted writes count up: {write:?}"
        );
    }
    let mut highest = i64::MIN;
    for entry in &journal {
        if entry.accepted {
            assert!(
                entry.token >= highest,
                "accepted token {} after {highest}: {entry:?}",
                entry.token
            );
            highest = entry.token;
        } else {
            assert!(
                entry.token < entry.fence,
                "refused without cause: {entry:?}"
            );
        }
    }
    assert!(random_expiries > 0 && freezes > 0, "sessions were expired");
    assert!(refused_writes > 0, "stale holders were refused");
    // ZkMutex::lock() rides out the connection losses the expiries cause.
    assert!(lock_errors.is_empty(), "{lock_errors:?}");
}

struct Contender {
    id: usize,
    session: Session,
    store: Accounts,
    connect: String,
    tally: Arc<Tally>,
    window: Arc<Window>,
}

impl Contender {
    async fn run(&self, total: u64) {
        let mutex = ZkMutex::new(&self.session, "/locks/counter").unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.id as u64);
        let tally = &self.tally;
        'grants: while tally.started.load(Ordering::Relaxed) < total {
            let guard = match mutex.lock().await {
                Ok(guard) => guard,
                Err(e) => {
                    tally.lock_errors.lock().unwrap().push(format!("{e}"));
                    continue;
                }
            };
            tally.grants.fetch_add(1, Ordering::Relaxed);
            let token = guard.token();
            for _ in 0..rng.random_range(1..=8) {
                if tally.started.fetch_add(1, Ordering::Relaxed) >= total {
                    break 'grants;
                }
                let value = match self.store.read(COUNTER, token).await.unwrap() {
                    FenceVerdict::Accepted(value) => value,
                    FenceVerdict::Refused { .. } => {
                        tally.refused_reads.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                };
                self.let_a_frozen_holder_write_first(token).await;
                let resumed = match rng.random_ratio(1, 200) {
                    true => self.freeze(token).await,
                    false => None,
                };
                let verdict = self.store.write(COUNTER, value + 1, token).await.unwrap();
                if let Some(wrote) = resumed {
                    let _ = wrote.send(());
                }
                match verdict {
                    FenceVerdict::Accepted(()) => tally.accepted.fetch_add(1, Ordering::Relaxed),
                    FenceVerdict::Refused { .. } => {
                        tally.refused_writes.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                };
            }
            // Fails after an expiry (the node went with the session): nothing to do then.
            let _ = guard.release().await;
        }
        // Nobody may be left to resume a frozen holder.
        self.window.frozen.lock().unwrap().take();
    }

    /// Stops here, with the session expired, until a newer holder has read (or everyone else
    /// is done), unless another holder is frozen already. Returns what to signal once the
    /// stale write is made, if a newer holder waits for it.
    async fn freeze(&self, token: FencingToken) -> Option<oneshot::Sender<()>> {
        let (resume, resumed) = oneshot::channel();
        {
            let mut frozen = self.window.frozen.lock().unwrap();
            if frozen.is_some() {
                return None;
            }
            *frozen = Some((token, resume));
        }
        if !expire_current(&self.connect, &self.session).await {
            // Still holding: nobody could come to resume us.
            self.window.frozen.lock().unwrap().take();
            return None;
        }
        self.tally.freezes.fetch_add(1, Ordering::Relaxed);
        resumed.await.ok()
    }

    /// After a read with `token`: if a holder with an older token is frozen, resume it and
    /// wait until it has made its write.
    async fn let_a_frozen_holder_write_first(&self, token: FencingToken) {
        let frozen = {
            let mut frozen = self.window.frozen.lock().unwrap();
            match &*frozen {
                Some((older, _)) if *older < token => frozen.take(),
                _ => None,
            }
        };
        if let Some((_, resume)) = frozen {
            let (wrote, written) = oneshot::channel();
            if resume.send(wrote).is_ok() {
                let _ = written.await;
            }
        }
    }
}
/// Expires a random contender's session every 50 to 300 ms until every contender is done;
/// returns how many.
async fn expire_at_random(
    connect: String,
    sessions: Vec<Session>,
    mut finished: watch::Receiver<usize>,
) -> u64 {
    let mut rng = rand::rngs::StdRng::seed_from_u64(CONTENDERS as u64);
    let mut expired = 0;
    loop {
        let pause = Duration::from_millis(rng.random_range(50..=300));
        tokio::select! {
            _ = finished.wait_for(|&n| n == CONTENDERS) => return expired,
            _ = tokio::time::sleep(pause) => {}
        }
        let session = &sessions[rng.random_range(0..sessions.len())];
        if expire_current(&connect, session).await {
            expired += 1;
        }
    }
}

/// Expires `session`'s current ZooKeeper session; false if there was none to expire.
async fn expire_current(connect: &str, session: &Session) -> bool {
    let Ok(client) = session.client().await else {
        return false;
    };
    let info = client.session().clone();
    drop(client);
    expire_session(connect, &info).await.is_ok()
}
