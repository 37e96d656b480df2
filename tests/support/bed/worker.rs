//! The contenders of the ensemble fault suite: lock, fenced increments, release, again, and
//! what they report to the history; in this process, or in a child process of its own.

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use zk_recipes::{
    Error, LossPolicy, Session, ZkLeaderElection, ZkLeadership, ZkLockSpace, ZkLockSpaceGuard,
    ZkMutex, ZkMutexGuard, ZkRwLock, ZkRwLockGuard, ZkSemaphore, ZkSemaphoreLease,
};
use zk_testcontainers::scaled;
use zookeeper_client as zkc;

use super::{lock_root, options, COUNTERS, KEYS, OPS, OPS_PER_GRANT};
use crate::support::history::{Grant, History, Outcome, Release, Write};
use crate::support::within;

/// A lock of the bed, by the prefix of its name: a `ZkMutex` at `{LOCKS}/lock-N`; the key
/// `key-N` of the lock space `KEYS` (`{KEYS}/key-N`, a container the server reaps when idle;
/// its tokens are zxids); a `ZkRwLock` at `{LOCKS}/rw-N` (every third
/// acquisition of a locker a write, the others reads); a `ZkSemaphore` of [`PERMITS`] at
/// `{LOCKS}/sem-N` (a lease's token is its node's zxid: the semaphore's sequence restarts with
/// its reaped `leases` directory); a `ZkLeaderElection` at `{LOCKS}/elect-N` (the term).
pub enum Locker {
    Mutex(ZkMutex),
    Keyed(ZkLockSpace, String),
    RwLock(ZkRwLock, AtomicUsize),
    Semaphore(ZkSemaphore),
    Election(ZkLeaderElection),
}

/// The permits of a bed's semaphore.
pub const PERMITS: u32 = 2;

impl Locker {
    pub fn new(session: &Session, lock: &str) -> Locker {
        let root = lock_root(lock);
        if lock.starts_with("key-") {
            Locker::Keyed(ZkLockSpace::new(session, KEYS).unwrap(), lock.to_owned())
        } else if lock.starts_with("rw-") {
            Locker::RwLock(ZkRwLock::new(session, &root).unwrap(), AtomicUsize::new(0))
        } else if lock.starts_with("sem-") {
            Locker::Semaphore(ZkSemaphore::new(session, &root, PERMITS).unwrap())
        } else if lock.starts_with("elect-") {
            Locker::Election(ZkLeaderElection::new(session, &root, "bed").unwrap())
        } else {
            Locker::Mutex(ZkMutex::new(session, &root).unwrap())
        }
    }

    /// Locks (a read/write lock: writes on the first acquisition and every third after it).
    pub async fn lock(&self) -> Result<Held, Error> {
        match self {
            Locker::Mutex(mutex) => mutex.lock().await.map(Held::Mutex),
            Locker::Keyed(space, key) => space.lock(key).await.map(Held::Keyed),
            Locker::RwLock(lock, n) => {
                if n.fetch_add(1, Ordering::Relaxed) % 3 == 0 {
                    lock.write().await.map(|g| Held::RwLock(g, false))
                } else {
                    lock.read().await.map(|g| Held::RwLock(g, true))
                }
            }
            Locker::Semaphore(semaphore) => semaphore.acquire().await.map(Held::Lease),
            Locker::Election(election) => election.campaign().await.map(Held::Leader),
        }
    }
}

/// A held lock of any kind.
pub enum Held {
    Mutex(ZkMutexGuard),
    Keyed(ZkLockSpaceGuard),
    /// Shared (a read lock) or not.
    RwLock(ZkRwLockGuard, bool),
    Lease(ZkSemaphoreLease),
    Leader(ZkLeadership),
}

impl std::ops::Deref for Held {
    type Target = zk_recipes::Grant;
    fn deref(&self) -> &zk_recipes::Grant {
        match self {
            Held::Mutex(guard) => guard,
            Held::Keyed(guard) => guard,
            Held::RwLock(guard, _) => guard,
            Held::Lease(lease) => lease,
            Held::Leader(leadership) => leadership,
        }
    }
}

impl Held {
    pub async fn release(self) -> Result<(), Error> {
        match self {
            Held::Mutex(guard) => guard.release().await,
            Held::Keyed(guard) => guard.release().await,
            Held::RwLock(guard, _) => guard.release().await,
            Held::Lease(lease) => lease.release().await,
            Held::Leader(leadership) => leadership.release().await,
        }
    }

    /// The grant's token as the history knows it: a lease's node zxid (unique, where the
    /// semaphore's sequence is not), everyone else's fencing token.
    pub fn history_token(&self) -> u64 {
        match self {
            Held::Lease(lease) => lease.czxid() as u64,
            other => other.token().as_u64(),
        }
    }

    /// Whether others may hold at the same time (a read lock; leases are judged by count).
    pub fn shared(&self) -> bool {
        matches!(self, Held::RwLock(_, true))
    }
}

/// Where a worker reports: the history (in this process) or stdout (a child process, whose
/// lines the parent turns into history events).
#[derive(Clone)]
pub enum Sink {
    Local(Arc<History>),
    Stdout,
}

impl Sink {
    pub fn grant(&self, g: Grant) {
        match self {
            Sink::Local(h) => h.grant(g),
            Sink::Stdout => println!(
                "EVT grant {} {} {} {}",
                g.lock, g.token, g.session, g.worker
            ),
        }
    }

    pub fn release(&self, r: Release) {
        match self {
            Sink::Local(h) => h.release(r),
            Sink::Stdout => println!(
                "EVT release {} {} {} {} {}",
                r.lock, r.token, r.session, r.worker, r.how
            ),
        }
    }

    pub fn write(&self, w: Write) {
        match self {
            Sink::Local(h) => h.write(w),
            Sink::Stdout => {
                let (kind, detail) = match &w.outcome {
                    Outcome::Accepted => ("A", ""),
                    Outcome::Refused(e) => ("R", e.as_str()),
                    Outcome::Unknown(e) => ("U", e.as_str()),
                };
                println!(
                    "EVT write {} {} {} {} {} {} {kind} {detail}",
                    w.lock,
                    w.token,
                    w.session,
                    w.worker,
                    w.op,
                    u8::from(w.believed_held)
                );
            }
        }
    }
}

/// Turns a child's `EVT` line into a history event. The child's clock is its own: grants and
/// sends carry no time; answers carry the time the parent read them.
pub fn parse_event(line: &str, history: &History) {
    let mut f = line.split(' ').skip(1);
    let mut next = || f.next().unwrap_or_default().to_owned();
    match next().as_str() {
        "grant" => history.grant(Grant {
            lock: next(),
            token: next().parse().unwrap(),
            session: next().parse().unwrap(),
            worker: next(),
            at: None,
        }),
        "release" => {
            let (lock, token, session, worker) = (next(), next(), next(), next());
            let how = line.splitn(7, ' ').nth(6).unwrap_or_default().to_owned();
            history.release(Release {
                lock,
                token: token.parse().unwrap(),
                session: session.parse().unwrap(),
                worker,
                at: None,
                how,
            })
        }
        "write" => {
            let (lock, token, session, worker, op, believed, kind) =
                (next(), next(), next(), next(), next(), next(), next());
            let detail = line.splitn(10, ' ').nth(9).unwrap_or_default().to_owned();
            history.write(Write {
                lock,
                token: token.parse().unwrap(),
                session: session.parse().unwrap(),
                worker,
                op,
                believed_held: believed == "1",
                sent: None,
                // When the parent read the line: no earlier than the answer. Good for the
                // stall figure; the real-time check only ever trusts a late `done` to make it
                // miss a violation, never to invent one.
                done: Some(Instant::now()),
                outcome: match kind.as_str() {
                    "A" => Outcome::Accepted,
                    "R" => Outcome::Refused(detail),
                    _ => Outcome::Unknown(detail),
                },
            })
        }
        other => panic!("unknown event {other:?} in {line:?}"),
    }
}

pub struct Worker {
    pub name: String,
    pub session: Session,
    pub lock: String,
    /// Holds its first grant until it is lost (or the test stops), writing every 25 ms.
    pub pinned: bool,
    /// Stops writing as soon as `lost()` says so. A worker that does not heed it (a process
    /// that froze and does not look) writes on until the store refuses it.
    pub heeds_loss: bool,
    pub sink: Sink,
    pub stop: watch::Receiver<bool>,
}

/// Locks, increments, releases, again and again, until told to stop; then closes its session.
pub async fn work(w: Worker) {
    let Worker {
        name,
        session,
        lock,
        pinned,
        heeds_loss,
        sink,
        mut stop,
    } = w;
    let mutex = Locker::new(&session, &lock);
    let mut hold_first = pinned;
    let mut n = 0u64;
    while !*stop.borrow() {
        let acquired = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            acquired = mutex.lock() => acquired,
        };
        let guard = match acquired {
            Ok(guard) => guard,
            Err(err) => {
                tracing::info!(worker = %name, %err, "lock failed; trying again");
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => break,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                }
            }
        };
        let hold = std::mem::take(&mut hold_first);
        let (token, session_id) = (guard.history_token(), guard.session_id());
        sink.grant(Grant {
            lock: lock.clone(),
            token,
            session: session_id,
            worker: name.clone(),
            at: Some(Instant::now()),
        });
        // The moment the library says the grant is lost, watched alongside the writes.
        let lost_at = Mutex::new(None);
        let monitor = async {
            let reason = guard.lost().await;
            *lost_at.lock().unwrap() = Some((Instant::now(), reason));
            std::future::pending::<()>().await
        };
        let writes = async {
            let mut done = 0;
            loop {
                if *stop.borrow() || (!hold && done >= OPS_PER_GRANT) {
                    return None;
                }
                if heeds_loss && lost_at.lock().unwrap().is_some() {
                    return None;
                }
                n += 1;
                let op = format!("{name}-{n}");
                let outcome = increment(&session, &guard, &lock, &op, &name, &sink).await;
                done += 1;
                if let (false, Some(Outcome::Refused(err))) = (heeds_loss, &outcome) {
                    return Some(format!("write refused: {err}"));
                }
                if hold || outcome.is_none() {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
            }
        };
        let refused = tokio::select! {
            refused = writes => refused,
            _ = monitor => unreachable!(),
        };
        let lost = *lost_at.lock().unwrap();
        let (at, how) = match (lost, refused) {
            (Some((at, reason)), _) => {
                drop(guard); // deleted in the background if still there
                (at, format!("lost: {reason:?}"))
            }
            (None, Some(refused)) => {
                drop(guard);
                (Instant::now(), refused)
            }
            (None, None) => {
                let at = Instant::now();
                let how =
                    match tokio::time::timeout(scaled(Duration::from_secs(30)), guard.release())
                        .await
                    {
                        Ok(Ok(())) => "released".to_owned(),
                        Ok(Err(err)) => format!("release failed: {err}"),
                        Err(_) => "release timed out".to_owned(),
                    };
                (at, how)
            }
        };
        sink.release(Release {
            lock: lock.clone(),
            token,
            session: session_id,
            worker: name.clone(),
            at: Some(at),
            how,
        });
    }
    session.close().await;
}

/// One fenced increment of `lock`'s counter under `guard`: reads the counter, then commits,
/// in one transaction that holds only while the grant does, the counter at the version read
/// plus one and the operation's own node (its data: the token, and ` shared` under a read
/// lock). `None` when the counter could not even be read (no write was attempted). Holders
/// that share a lock increment it too: one of two racing increments is refused (the version
/// moved), which the checker counts as any refusal.
pub async fn increment(
    session: &Session,
    guard: &Held,
    lock: &str,
    op: &str,
    worker: &str,
    sink: &Sink,
) -> Option<Outcome> {
    let limit = scaled(Duration::from_secs(10));
    let counter = format!("{COUNTERS}/{lock}");
    let client = tokio::time::timeout(limit, session.client())
        .await
        .ok()?
        .ok()?;
    let (data, stat) = tokio::time::timeout(limit, client.get_data(&counter))
        .await
        .ok()?
        .ok()?;
    let count: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap_or(0);
    let token = guard.history_token();
    let data = if guard.shared() {
        format!("{token} shared")
    } else {
        token.to_string()
    };
    let mut write = guard.fenced_write(&client).unwrap();
    write
        .add_set_data(
            &counter,
            (count + 1).to_string().as_bytes(),
            Some(stat.version),
        )
        .unwrap();
    write
        .add_create(
            &format!("{OPS}/{lock}/{op}"),
            data.as_bytes(),
            &zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all()),
        )
        .unwrap();
    let believed_held = guard.is_held();
    let sent = Instant::now();
    let result = tokio::time::timeout(limit, write.commit()).await;
    let done = Instant::now();
    let outcome = match result {
        Ok(Ok(_)) => Outcome::Accepted,
        Ok(Err(err @ Error::ConnectionLost)) => Outcome::Unknown(err.to_string()),
        Ok(Err(err)) => Outcome::Refused(err.to_string()),
        Err(_) => Outcome::Unknown(format!("no answer within {limit:?}")),
    };
    sink.write(Write {
        lock: lock.to_owned(),
        token,
        session: guard.session_id(),
        worker: worker.to_owned(),
        op: op.to_owned(),
        believed_held,
        sent: Some(sent),
        done: Some(done),
        outcome: outcome.clone(),
    });
    Some(outcome)
}

/// The variable that makes [`CHILD_WORKER_TEST`] a child worker:
/// `connect|lock|timeout ms|name`.
pub const CHILD_WORKER_VAR: &str = "ZK_FAULTS_WORKER";
/// The worker-mode test of `ensemble_faults.rs`, which runs [`run_child_worker`] when
/// [`CHILD_WORKER_VAR`] is set.
pub const CHILD_WORKER_TEST: &str = "faults_worker_process";

/// A child worker's life (`spec` is [`CHILD_WORKER_VAR`]'s value): holds the lock and writes,
/// without heeding `lost()`, until its stdin closes, reporting on stdout.
pub async fn run_child_worker(spec: &str) {
    let parts: Vec<&str> = spec.split('|').collect();
    let [connect, lock, ms, name] = parts[..] else {
        panic!("bad {CHILD_WORKER_VAR}={spec:?}");
    };
    let timeout = Duration::from_millis(ms.parse().unwrap());
    let (stop_tx, mut stop) = watch::channel(false);
    tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut tokio::io::sink()).await;
        stop_tx.send_replace(true);
    });
    // No member may serve for a while (an election after a leader's kill, under load, took
    // over the connection timeout): try again until told to stop.
    let session = loop {
        let connecting = Session::connect(options(connect, timeout, LossPolicy::Expiry));
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {
                println!("EXITING");
                return;
            }
            connected = connecting => match connected {
                Ok(session) => break session,
                Err(err) => {
                    eprintln!("{name}: no session yet ({err}); trying again");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            },
        }
    };
    work(Worker {
        name: name.to_owned(),
        session,
        lock: lock.to_owned(),
        pinned: true,
        heeds_loss: false,
        sink: Sink::Stdout,
        stop,
    })
    .await;
    println!("EXITING");
}

/// A contender in a process of its own: this test binary run again, with only
/// [`CHILD_WORKER_TEST`]; its events go into the history as it reports them. Killed if
/// dropped.
pub struct ChildContender {
    pub name: String,
    pid: String,
    child: Child,
    stdin: ChildStdin,
    reader: JoinHandle<()>,
}

impl ChildContender {
    pub fn spawn(
        name: &str,
        connect: &str,
        lock: &str,
        timeout: Duration,
        history: &Arc<History>,
    ) -> ChildContender {
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                CHILD_WORKER_TEST,
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                CHILD_WORKER_VAR,
                format!("{connect}|{lock}|{}|{name}", timeout.as_millis()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap().to_string();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let history = history.clone();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                // libtest may have written "test ... " on the same line first.
                if let Some(at) = line.find("EVT ") {
                    parse_event(&line[at..], &history);
                }
            }
        });
        ChildContender {
            name: name.to_owned(),
            pid,
            child,
            stdin,
            reader,
        }
    }

    /// Freezes the process (SIGSTOP).
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets the frozen process go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = &self.pid;
        let status = std::process::Command::new("kill")
            .args([sig, pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill {sig} {pid}");
    }

    /// Closes its stdin: the child stops, releases what it may still hold, and exits; waits
    /// for that and for the last of its events.
    pub async fn stop(self) {
        let ChildContender {
            mut child,
            stdin,
            reader,
            ..
        } = self;
        drop(stdin);
        let status = within("the child to exit", 60, child.wait()).await.unwrap();
        assert!(status.success(), "child exited with {status}");
        reader.await.unwrap();
    }
}
