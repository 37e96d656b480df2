//! Leader election with fenced work and a scripted double failover.
//!
//! ```text
//! cargo run --example leader_election                 # 3 workers, ZooKeeper started in Docker
//! cargo run --example leader_election -- --workers 5
//! ZK_CONNECT=127.0.0.1:2181 cargo run --example leader_election -- --id a   # one worker per process
//! ```
//!
//! Every worker campaigns on `/demo/election`; the leader appends `term:counter` entries to a
//! journal through fenced writes (ZooKeeper multi-ops that check the leader's node), followers
//! wait. After a few seconds the leader is killed (its session closed abruptly, without
//! resigning); later the next leader's session is expired on the server. The summary shows
//! terms, failover times and writes accepted and refused; the exit code is 0 only if the
//! journal proves there was never more than one leader at a time (no accepted write from an
//! older term after one from a newer term) and every failover completed.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zk_recipes::{Error, Grant, LossPolicy, Session, SessionOptions, ZkLeaderElection};
use zk_testcontainers::{expire_session, test_server};
use zookeeper_client as zkc;

const TICK: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
struct Elected {
    worker: String,
    term: u64,
    at: Instant,
}

/// What the workers tell the orchestrator.
#[derive(Default)]
struct Board {
    accepted: AtomicU64,
    refused: AtomicU64,
    /// Writes whose reply was lost with the connection: they may or may not have landed.
    unknown: AtomicU64,
    /// Set at the end: workers finish their current write and stop.
    stop: AtomicBool,
    /// Sessions by worker, so the orchestrator can kill or expire the leader's.
    sessions: Mutex<BTreeMap<String, Session>>,
}

struct Config {
    connect: String,
    root: String,
}

impl Config {
    fn election(&self) -> String {
        format!("{}/election", self.root)
    }
    fn journal(&self) -> String {
        format!("{}/journal", self.root)
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let workers: usize = flag("--workers")
        .map(|w| w.parse().expect("--workers N"))
        .unwrap_or(3);
    // ZK_CONNECT, or a ZooKeeper of our own in Docker (removed when `zk` drops).
    if std::env::var_os("ZK_CONNECT").is_none() {
        println!(
            "starting ZooKeeper in Docker (zk-testcontainers; builds the image on first use)..."
        );
    }
    let zk = test_server()
        .await
        .unwrap_or_else(|e| fail(&format!("cannot start ZooKeeper: {e}")));
    let connect = zk.connect_string();
    println!("ZooKeeper at {connect}");
    if let Some(id) = flag("--id") {
        // One worker in this process, until killed; run several to watch them take over.
        let config = Arc::new(Config {
            connect,
            root: "/demo".into(),
        });
        let (elected_tx, _) = watch::channel(None);
        run_worker(id, config, Arc::default(), elected_tx).await;
        return;
    }
    let code = orchestrate(connect, workers).await;
    // `exit` skips destructors: remove our ZooKeeper container first.
    drop(zk);
    std::process::exit(code);
}

async fn orchestrate(connect: String, workers: usize) -> i32 {
    let root = format!("/demo/run-{}-{}", std::process::id(), now_millis());
    let config = Arc::new(Config { connect, root });
    let board = Arc::new(Board::default());
    let (elected_tx, mut elected_rx) = watch::channel::<Option<Elected>>(None);
    let mut tasks: BTreeMap<String, JoinHandle<()>> = BTreeMap::new();
    let spawn = |id: String| {
        tokio::spawn(run_worker(
            id,
            config.clone(),
            board.clone(),
            elected_tx.clone(),
        ))
    };
    for i in 0..workers {
        let id = format!("w{i}");
        tasks.insert(id.clone(), spawn(id));
    }
    let started = Instant::now();
    let mut terms = Vec::new();
    let first = wait_leader(&mut elected_rx, None, Duration::from_secs(30)).await;
    let Some(first) = first else {
        return fail_code("no leader was elected within 30 s");
    };
    terms.push(first.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Failover 1: the leader dies without resigning (its session closed abruptly).
    let leader = current(&elected_rx);
    println!(
        "\n*** killing leader {} (term {}): session closed, task aborted",
        leader.worker, leader.term
    );
    let killed_at = Instant::now();
    if let Some(task) = tasks.remove(&leader.worker) {
        task.abort();
    }
    let session = board.sessions.lock().unwrap().remove(&leader.worker);
    if let Some(session) = session {
        session.close().await;
    }
    let Some(second) =
        wait_leader(&mut elected_rx, Some(leader.term), Duration::from_secs(30)).await
    else {
        return fail_code("no new leader after the kill");
    };
    let kill_failover = second.at.duration_since(killed_at);
    terms.push(second.clone());
    // The killed worker comes back as a fresh candidate.
    tasks.insert(leader.worker.clone(), spawn(leader.worker.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Failover 2: the new leader's session expires on the server.
    let leader = current(&elected_rx);
    let session = board
        .sessions
        .lock()
        .unwrap()
        .get(&leader.worker)
        .cloned()
        .expect("leader's session");
    let info = session
        .client()
        .await
        .expect("leader's client")
        .session()
        .clone();
    println!(
        "\n*** expiring the session of leader {} (term {})",
        leader.worker, leader.term
    );
    let expired_at = Instant::now();
    if let Err(err) = expire_session(host_part(&config.connect), &info).await {
        return fail_code(&format!("could not expire the session: {err}"));
    }
    let Some(third) =
        wait_leader(&mut elected_rx, Some(leader.term), Duration::from_secs(30)).await
    else {
        return fail_code("no new leader after the expiry");
    };
    let expiry_failover = third.at.duration_since(expired_at);
    terms.push(third);
    tokio::time::sleep(Duration::from_secs(1)).await;

    println!("\n*** shutting down: each worker resigns or withdraws its candidacy");
    board.stop.store(true, Ordering::SeqCst);
    for (_, task) in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    let sessions: Vec<Session> = board.sessions.lock().unwrap().values().cloned().collect();
    for s in &sessions {
        s.close().await;
    }
    let verdict = check_journal(&config).await;
    println!(
        "\n=== summary ({:.1} s) ===",
        started.elapsed().as_secs_f64()
    );
    println!(
        "leaders (in order): {}",
        terms
            .iter()
            .map(|e| format!("{}@term {}", e.worker, e.term))
            .collect::<Vec<_>>()
            .join(" -> ")
    );
    println!(
        "failover after kill (session closed):   {:>8.1} ms",
        kill_failover.as_secs_f64() * 1e3
    );
    println!(
        "failover after session expiry:          {:>8.1} ms",
        expiry_failover.as_secs_f64() * 1e3
    );
    println!(
        "fenced writes accepted: {}",
        board.accepted.load(Ordering::Relaxed)
    );
    println!(
        "fenced writes refused:  {}",
        board.refused.load(Ordering::Relaxed)
    );
    println!(
        "fenced writes with outcome unknown (connection lost mid-write): {}",
        board.unknown.load(Ordering::Relaxed)
    );
    match verdict {
        Ok(journal) => {
            println!(
                "journal: {} entries, terms {}",
                journal.entries,
                journal
                    .terms
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            println!("at most one leader at a time: yes (no accepted write of an older term after a newer one)");
            0
        }
        Err(violation) => {
            println!("at most one leader at a time: NO: {violation}");
            1
        }
    }
}

/// A worker: campaigns, leads with fenced writes on every tick, campaigns again when lost.
async fn run_worker(
    id: String,
    config: Arc<Config>,
    board: Arc<Board>,
    elected: watch::Sender<Option<Elected>>,
) {
    let options = SessionOptions::new(config.connect.clone())
        .session_timeout(Duration::from_secs(4))
        .loss_policy(LossPolicy::Suspension);
    let session = match Session::connect(options).await {
        Ok(s) => s,
        Err(e) => return eprintln!("[{id}] cannot connect: {e}"),
    };
    board
        .sessions
        .lock()
        .unwrap()
        .insert(id.clone(), session.clone());
    let election =
        ZkLeaderElection::new(&session, &config.election(), id.as_bytes()).expect("valid path");
    let mut observer = election.observer();
    let journal = config.journal();
    if let Ok(client) = session.client().await {
        let _ = client
            .mkdir(
                &journal,
                &zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all()),
            )
            .await;
    }
    if let Ok(Some(leader)) = observer.changed().await {
        println!(
            "[{id}] candidate; current leader {} (term {})",
            String::from_utf8_lossy(&leader.info),
            leader.term
        );
    }
    // `lead` campaigns, runs the job while leader (dropping it the moment leadership is lost
    // or the session's lease clock runs out, so a worker resumed after a freeze does not run
    // one more tick), resigns when it returns, and campaigns again.
    let led = election
        .lead(|leadership| {
            let (id, board, elected, journal) =
                (id.clone(), board.clone(), elected.clone(), journal.clone());
            async move {
                let term = leadership.term().as_u64();
                if board.stop.load(Ordering::SeqCst) {
                    println!("[{id}] elected, term {term}, during the shutdown: resigning at once");
                    return ControlFlow::Break(());
                }
                println!("[{id}] elected, term {term}");
                elected.send_replace(Some(Elected {
                    worker: id.clone(),
                    term,
                    at: Instant::now(),
                }));
                let mut counter = 0u64;
                let mut ticks = tokio::time::interval(TICK);
                loop {
                    ticks.tick().await;
                    counter += 1;
                    let entry = format!("{term}:{counter}:{id}");
                    match journal_write(&leadership, &format!("{journal}/entry-"), entry.as_bytes())
                        .await
                    {
                        Ok(_) => {
                            board.accepted.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e @ (Error::Lost { .. } | Error::SessionExpired)) => {
                            board.refused.fetch_add(1, Ordering::Relaxed);
                            println!("[{id}] fenced write of term {term} refused: {e}");
                            return ControlFlow::Continue(());
                        }
                        Err(e) => {
                            board.unknown.fetch_add(1, Ordering::Relaxed);
                            println!(
                            "[{id}] fenced write of term {term} may or may not have landed: {e}"
                        );
                        }
                    }
                    if board.stop.load(Ordering::SeqCst) {
                        return ControlFlow::Break(());
                    }
                }
            }
        })
        .await;
    match led {
        Ok(()) | Err(Error::SessionClosed) => {}
        Err(e) => eprintln!("[{id}] leading failed: {e}"),
    }
}

/// Waits for a leader with a term other than `old`.
async fn wait_leader(
    rx: &mut watch::Receiver<Option<Elected>>,
    old: Option<u64>,
    limit: Duration,
) -> Option<Elected> {
    let wait = rx.wait_for(|e| e.as_ref().is_some_and(|e| Some(e.term) != old));
    tokio::time::timeout(limit, wait).await.ok()?.ok()?.clone()
}

fn current(rx: &watch::Receiver<Option<Elected>>) -> Elected {
    rx.borrow().clone().expect("a leader")
}

struct Journal {
    entries: usize,
    terms: Vec<u64>,
}

/// The journal, in commit order, must never show an older term after a newer one, and each
/// term must belong to one worker.
async fn check_journal(config: &Config) -> Result<Journal, String> {
    let client = zkc::Client::connect(&config.connect)
        .await
        .map_err(|e| e.to_string())?;
    let journal = config.journal();
    let mut names = client
        .list_children(&journal)
        .await
        .map_err(|e| e.to_string())?;
    names.sort();
    let mut terms: Vec<u64> = Vec::new();
    let mut owners: BTreeMap<u64, String> = BTreeMap::new();
    for name in &names {
        let (data, _) = client
            .get_data(&format!("{journal}/{name}"))
            .await
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&data).into_owned();
        let mut parts = text.splitn(3, ':');
        let term: u64 = parts
            .next()
            .and_then(|t| t.parse().ok())
            .ok_or(format!("bad entry {text}"))?;
        let worker = parts.nth(1).unwrap_or_default().to_owned();
        if let Some(&last) = terms.last() {
            if term < last {
                return Err(format!(
                    "{name}: a write of term {term} accepted after one of term {last}"
                ));
            }
        }
        if owners.entry(term).or_insert_with(|| worker.clone()) != &worker {
            return Err(format!("term {term} written by two workers"));
        }
        if terms.last() != Some(&term) {
            terms.push(term);
        }
    }
    Ok(Journal {
        entries: names.len(),
        terms,
    })
}

fn host_part(connect: &str) -> &str {
    connect.split('/').next().unwrap_or(connect)
}

fn now_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

fn fail(msg: &str) -> ! {
    eprintln!("leader_election: {msg}");
    std::process::exit(2)
}

fn fail_code(msg: &str) -> i32 {
    eprintln!("leader_election: {msg}");
    1
}

/// Appends a journal entry in a transaction that commits only while `leadership` holds.
async fn journal_write(leadership: &Grant, prefix: &str, entry: &[u8]) -> Result<(), Error> {
    let client = leadership.client()?;
    let mut write = leadership.fenced_write(&client)?;
    let mode = zkc::CreateMode::PersistentSequential.with_acls(zkc::Acls::anyone_all());
    write.add_create(prefix, entry, &mode)?;
    write.commit().await.map(drop)
}
