//! The account-balance incident with real processes: the orchestrator, and the worker that
//! each worker process runs. Shared by `examples/incident_replay` (whose workers are the
//! example binary run again with `--worker`) and `tests/fencing.rs` (whose workers are the
//! test binary run again); the caller says how to start a worker process.
//!
//! Worker 1 takes the lock, reads the balance, computes its charge and is frozen with
//! `SIGSTOP` before it writes, until its ZooKeeper session has expired and worker 2 (another
//! process, queued on the lock) has taken the lock and written its withdrawal. Then worker 1
//! is resumed with `SIGCONT` and writes what it computed before the freeze. Fenced, the store
//! refuses that stale write and worker 1 starts over under a new lock and token; unfenced,
//! the stale write lands and the withdrawal is gone.

use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use zk_recipes::{Session, SessionOptions, ZkMutex};
use zk_testcontainers::scaled;

use crate::store::{Accounts, FenceVerdict, JournalEntry};

/// The account of the incident.
pub const ACCOUNT: &str = "acct-1";
/// Its balance before the incident.
pub const OPENING: i64 = 12_400_000;
/// Worker 1's charge.
pub const CHARGE: i64 = 200_000;
/// Worker 2's withdrawal.
pub const WITHDRAWAL: i64 = 2_000_000;
/// Worker output lines for the orchestrator start with this (anything else is ignored).
const PREFIX: &str = "@replay ";

/// Whether the store checks the fencing token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `UPDATE ... SET balance = :b, fence = :t WHERE id = :id AND fence <= :t` (reads raise
    /// the fence the same way).
    Fenced,
    /// `UPDATE ... SET balance = :b WHERE id = :id`, as in the incident.
    Unfenced,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        match s {
            "fenced" => Some(Mode::Fenced),
            "unfenced" => Some(Mode::Unfenced),
            _ => None,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Fenced => "fenced",
            Mode::Unfenced => "unfenced",
        })
    }
}

/// What a worker process is told to do.
#[derive(Clone, Debug)]
pub struct WorkerArgs {
    pub name: String,
    pub connect: String,
    pub lock: String,
    pub db: PathBuf,
    pub debit: i64,
    pub mode: Mode,
    pub session_timeout: Duration,
    /// Stop between computing and writing until a line arrives on stdin (the orchestrator
    /// freezes the process there, then resumes it and sends the line).
    pub pause_before_write: bool,
    /// After a refused write, take the lock again and start over.
    pub retry: bool,
}

impl WorkerArgs {
    /// `key=value` strings, for a command line or (joined by newlines) an environment variable.
    pub fn to_pairs(&self) -> Vec<String> {
        vec![
            format!("name={}", self.name),
            format!("connect={}", self.connect),
            format!("lock={}", self.lock),
            format!("db={}", self.db.display()),
            format!("debit={}", self.debit),
            format!("mode={}", self.mode),
            format!("session_timeout_ms={}", self.session_timeout.as_millis()),
            format!("pause_before_write={}", self.pause_before_write),
            format!("retry={}", self.retry),
        ]
    }

    pub fn from_pairs<S: AsRef<str>>(pairs: impl IntoIterator<Item = S>) -> Result<Self, String> {
        let mut map = std::collections::HashMap::new();
        for pair in pairs {
            let (k, v) = pair
                .as_ref()
                .split_once('=')
                .ok_or_else(|| format!("not key=value: {:?}", pair.as_ref()))?;
            map.insert(k.to_owned(), v.to_owned());
        }
        let get = |k: &str| map.get(k).cloned().ok_or(format!("missing {k}"));
        let parse =
            |k: &str| -> Result<u64, String> { get(k)?.parse().map_err(|e| format!("{k}: {e}")) };
        Ok(WorkerArgs {
            name: get("name")?,
            connect: get("connect")?,
            lock: get("lock")?,
            db: get("db")?.into(),
            debit: get("debit")?.parse().map_err(|e| format!("debit: {e}"))?,
            mode: Mode::parse(&get("mode")?).ok_or("mode: fenced or unfenced")?,
            session_timeout: Duration::from_millis(parse("session_timeout_ms")?),
            pause_before_write: get("pause_before_write")? == "true",
            retry: get("retry")? == "true",
        })
    }
}

/// One worker process: lock, read, compute, (pause), write, report every step on stdout.
pub async fn worker(args: WorkerArgs) -> Result<(), String> {
    let session = Session::connect(
        SessionOptions::new(args.connect.clone())
            .session_timeout(args.session_timeout)
            .connection_timeout(scaled(Duration::from_secs(10))),
    )
    .await
    .map_err(|e| format!("connect: {e}"))?;
    let store = Accounts::open(&args.db, &args.name).map_err(|e| format!("store: {e}"))?;
    let mutex = ZkMutex::new(&session, &args.lock).map_err(|e| e.to_string())?;
    say(
        "waiting",
        format!("pid {}: waiting for the lock", std::process::id()),
    );
    let mut first = true;
    loop {
        let guard = mutex.lock().await.map_err(|e| format!("lock: {e}"))?;
        let token = guard.token();
        say(
            "locked",
            format!(
                "{}holds the lock: token {token} (session {:#x})",
                if first { "" } else { "retry: " },
                guard.session_id()
            ),
        );
        let read = match args.mode {
            Mode::Fenced => store.read(ACCOUNT, token).await,
            Mode::Unfenced => store
                .read_unfenced(ACCOUNT, token)
                .await
                .map(FenceVerdict::Accepted),
        }
        .map_err(|e| format!("read: {e}"))?;
        let verdict = match read {
            FenceVerdict::Refused { fence } => {
                say(
                    "refused",
                    format!("read with token {token}: REFUSED (row fence {fence})"),
                );
                FenceVerdict::Refused { fence }
            }
            FenceVerdict::Accepted(balance) => {
                say(
                    "read",
                    match args.mode {
                        Mode::Fenced => format!(
                            "read {} with token {token} (row fence now {token})",
                            money(balance)
                        ),
                        Mode::Unfenced => format!("read {} (no fence)", money(balance)),
                    },
                );
                let new = balance - args.debit;
                say(
                    "computed",
                    format!(
                        "computed {} = {} - {}",
                        money(new),
                        money(balance),
                        money(args.debit)
                    ),
                );
                if first && args.pause_before_write {
                    let mut line = String::new();
                    BufReader::new(tokio::io::stdin())
                        .read_line(&mut line)
                        .await
                        .map_err(|e| format!("stdin: {e}"))?;
                }
                let with = match args.mode {
                    Mode::Fenced => format!("with token {token}"),
                    Mode::Unfenced => format!("as the holder of token {token}"),
                };
                say(
                    "writing",
                    format!(
                        "writes {} {with} (is_held() = {})",
                        money(new),
                        guard.is_held()
                    ),
                );
                let verdict = match args.mode {
                    Mode::Fenced => store.write(ACCOUNT, new, token).await,
                    Mode::Unfenced => store
                        .write_unfenced(ACCOUNT, new, token)
                        .await
                        .map(FenceVerdict::Accepted),
                }
                .map_err(|e| format!("write: {e}"))?;
                match verdict {
                    FenceVerdict::Accepted(()) => say(
                        "accepted",
                        match args.mode {
                            Mode::Fenced => {
                                format!("store ACCEPTED {} (token {token})", money(new))
                            }
                            Mode::Unfenced => format!("store ACCEPTED {} (no check)", money(new)),
                        },
                    ),
                    FenceVerdict::Refused { fence } => say(
                        "refused",
                        format!(
                            "store REFUSED {}: token {token} < row fence {fence}",
                            money(new)
                        ),
                    ),
                }
                verdict
            }
        };
        if first && args.pause_before_write {
            // What the client itself learns, once it talks to ZooKeeper again.
            match tokio::time::timeout(scaled(Duration::from_secs(30)), guard.lost()).await {
                Ok(reason) => say("lost", format!("lost() resolved: {reason:?}")),
                Err(_) => say("lost", "lost() did not resolve within 30 s".into()),
            }
        }
        match guard.release().await {
            Ok(()) => say("released", "released the lock".into()),
            Err(e) => say("released", format!("release: {e}")),
        }
        first = false;
        if matches!(verdict, FenceVerdict::Accepted(())) || !args.retry {
            break;
        }
    }
    say("done", "done".into());
    session.close().await;
    Ok(())
}

fn say(kind: &str, text: String) {
    println!("{PREFIX}{kind} {text}");
}

/// One replay against one ZooKeeper.
pub struct Replay {
    pub connect: String,
    /// The lock's root path; use a fresh one per run.
    pub lock: String,
    pub mode: Mode,
    pub session_timeout: Duration,
}

/// What happened, from the store's journal (the store's own record) and the workers' reports.
#[derive(Debug)]
pub struct Outcome {
    pub mode: Mode,
    /// Printable lines: `+seconds  who  what`.
    pub timeline: Vec<String>,
    pub final_balance: i64,
    /// Worker 1's token when it was frozen.
    pub stale_token: i64,
    /// Worker 2's token.
    pub newer_token: i64,
    /// Worker 1's token on its retry, if it retried.
    pub retry_token: Option<i64>,
    /// Whether the store took worker 1's write made with its stale token.
    pub stale_write_accepted: bool,
    /// How long worker 1 was stopped.
    pub frozen_for: Duration,
    pub session_timeout: Duration,
    pub journal: Vec<JournalEntry>,
}

impl Outcome {
    /// Both debits applied once: the only right answer.
    pub const RIGHT: i64 = OPENING - WITHDRAWAL - CHARGE;
    /// Worker 1's stale result: what the lost update leaves.
    pub const LOST_UPDATE: i64 = OPENING - CHARGE;

    /// Fenced: the stale write refused, the balance right, and the store never accepted a
    /// write with a token older than one it had accepted before. Unfenced: the lost update.
    pub fn as_expected(&self) -> bool {
        let newer_accepted = self
            .journal
            .iter()
            .any(|e| e.op == "write" && e.token == self.newer_token && e.accepted);
        match self.mode {
            Mode::Fenced => {
                let accepted = self
                    .journal
                    .iter()
                    .filter(|e| e.op == "write" && e.accepted);
                let ordered = accepted
                    .clone()
                    .zip(accepted.skip(1))
                    .all(|(a, b)| a.token <= b.token);
                newer_accepted
                    && ordered
                    && !self.stale_write_accepted
                    && self.final_balance == Self::RIGHT
            }
            Mode::Unfenced => {
                newer_accepted
                    && self.stale_write_accepted
                    && self.final_balance == Self::LOST_UPDATE
            }
        }
    }

    /// A one-line verdict.
    pub fn verdict(&self) -> String {
        let stale = if self.stale_write_accepted {
            "ACCEPTED"
        } else {
            "REFUSED"
        };
        let right = self.final_balance == Self::RIGHT;
        let retry = match self.retry_token {
            Some(t) => format!(", worker 1 retried with token {t}"),
            None => String::new(),
        };
        format!(
            "{}: stale write (token {}, after token {} wrote) {stale}{retry}; final balance {} \
             ({}); worker 1 frozen {:.2} s with a {:.1} s session timeout",
            self.mode,
            self.stale_token,
            self.newer_token,
            money(self.final_balance),
            if right {
                "right".to_owned()
            } else {
                format!(
                    "WRONG: the right answer is {}, {} lost",
                    money(Self::RIGHT),
                    money(self.final_balance - Self::RIGHT)
                )
            },
            self.frozen_for.as_secs_f64(),
            self.session_timeout.as_secs_f64(),
        )
    }
}

struct Event {
    at: Instant,
    who: &'static str,
    kind: String,
    text: String,
}

/// The orchestrator's view: every event in arrival order.
struct Timeline {
    start: Instant,
    lines: Vec<String>,
    events: mpsc::UnboundedReceiver<Event>,
}

impl Timeline {
    fn note(&mut self, who: &str, text: impl fmt::Display) {
        self.push(Instant::now(), who, text);
    }

    fn push(&mut self, at: Instant, who: &str, text: impl fmt::Display) {
        let t = at.saturating_duration_since(self.start).as_secs_f64();
        self.lines.push(format!("+{t:6.2}s  {who:<12}  {text}"));
    }

    /// Waits for `who`'s next `kind` event, recording everything that arrives meanwhile.
    async fn expect(&mut self, who: &str, kind: &str, within: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let event = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .map_err(|_| format!("no {kind:?} from {who} within {within:?}"))?
                .ok_or("every worker is gone")?;
            if event.kind != "exit" {
                self.push(event.at, event.who, &event.text);
            }
            if event.who == who {
                match event.kind.as_str() {
                    k if k == kind => return Ok(()),
                    "exit" => return Err(format!("{who} exited before {kind:?}: {}", event.text)),
                    _ => {}
                }
            }
        }
    }
}

/// Runs the replay. `command` makes the command that starts a worker process with the given
/// arguments (its stdin and stdout are piped here, stderr is inherited).
pub async fn run(
    replay: &Replay,
    command: impl Fn(&WorkerArgs) -> Command,
) -> Result<Outcome, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let db = dir.path().join("accounts.db");
    let store = Accounts::open(&db, "orchestrator").map_err(|e| e.to_string())?;
    store.create(ACCOUNT, OPENING).map_err(|e| e.to_string())?;
    let (tx, events) = mpsc::unbounded_channel();
    let mut timeline = Timeline {
        start: Instant::now(),
        lines: Vec::new(),
        events,
    };
    timeline.note(
        "store",
        format!(
            "{ACCOUNT}: balance {}, fence 0 ({})",
            money(OPENING),
            match replay.mode {
                Mode::Fenced => "UPDATE ... WHERE id = :id AND fence <= :token",
                Mode::Unfenced => "UPDATE ... WHERE id = :id, no fence",
            }
        ),
    );
    let args = |name: &str, debit: i64, pause: bool| WorkerArgs {
        name: name.to_owned(),
        connect: replay.connect.clone(),
        lock: replay.lock.clone(),
        db: db.clone(),
        debit,
        mode: replay.mode,
        session_timeout: replay.session_timeout,
        pause_before_write: pause,
        retry: pause && replay.mode == Mode::Fenced,
    };
    let wait = scaled(Duration::from_secs(30));

    let mut w1 = spawn(command(&args("worker 1", CHARGE, true)), "worker 1", &tx)?;
    timeline.expect("worker 1", "locked", wait).await?;
    // Worker 2 queues on the lock while worker 1 holds it.
    let mut w2 = spawn(
        command(&args("worker 2", WITHDRAWAL, false)),
        "worker 2",
        &tx,
    )?;
    timeline.expect("worker 1", "computed", wait).await?;
    let pid1 = w1.id().ok_or("worker 1 has no pid")?;
    signal(pid1, "STOP")?;
    let frozen = Instant::now();
    timeline.note(
        "orchestrator",
        format!(
            "SIGSTOP worker 1 before it writes (session timeout {:.1} s)",
            replay.session_timeout.as_secs_f64()
        ),
    );
    // Worker 2's grant is the event that says worker 1's session has expired.
    timeline
        .expect("worker 2", "locked", replay.session_timeout + wait)
        .await?;
    timeline.note(
        "orchestrator",
        "worker 2's grant: worker 1's session has expired, its lock node with it",
    );
    timeline.expect("worker 2", "done", wait).await?;
    // The incident's pause outlasted the session timeout; so does this one, whatever the
    // server's expiry granularity let worker 2 do sooner.
    tokio::time::sleep_until((frozen + replay.session_timeout).into()).await;
    signal(pid1, "CONT")?;
    let frozen_for = frozen.elapsed();
    timeline.note(
        "orchestrator",
        format!(
            "SIGCONT worker 1 after {:.2} s frozen",
            frozen_for.as_secs_f64()
        ),
    );
    let mut stdin = w1.stdin.take().ok_or("worker 1 has no stdin")?;
    stdin
        .write_all(b"go\n")
        .await
        .map_err(|e| format!("resuming worker 1: {e}"))?;
    timeline
        .expect("worker 1", "done", scaled(Duration::from_secs(60)))
        .await?;
    for (who, child) in [("worker 1", &mut w1), ("worker 2", &mut w2)] {
        let status = tokio::time::timeout(wait, child.wait())
            .await
            .map_err(|_| format!("{who} did not exit"))?
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("{who} exited with {status}"));
        }
    }

    let (final_balance, fence) = store.balance(ACCOUNT).map_err(|e| e.to_string())?;
    let journal = store.journal(ACCOUNT).map_err(|e| e.to_string())?;
    timeline.note(
        "store",
        format!("{ACCOUNT}: balance {}, fence {fence}", money(final_balance)),
    );
    let writes = |who: &'static str| {
        journal
            .iter()
            .filter(move |e| e.writer == who && e.op == "write")
    };
    let stale = writes("worker 1")
        .next()
        .ok_or("worker 1 never wrote")?
        .clone();
    let newer = writes("worker 2").next().ok_or("worker 2 never wrote")?;
    let retry_token = writes("worker 1").nth(1).map(|e| e.token);
    Ok(Outcome {
        mode: replay.mode,
        timeline: timeline.lines,
        final_balance,
        stale_token: stale.token,
        newer_token: newer.token,
        retry_token,
        stale_write_accepted: stale.accepted,
        frozen_for,
        session_timeout: replay.session_timeout,
        journal,
    })
}

/// Starts a worker and forwards its report lines as events.
fn spawn(
    mut command: Command,
    who: &'static str,
    events: &mpsc::UnboundedSender<Event>,
) -> Result<Child, String> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {who}: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let events = events.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Some(report) = line.strip_prefix(PREFIX) else {
                continue; // a test harness's own output
            };
            let (kind, text) = report.split_once(' ').unwrap_or((report, ""));
            let _ = events.send(Event {
                at: Instant::now(),
                who,
                kind: kind.to_owned(),
                text: text.to_owned(),
            });
        }
        let _ = events.send(Event {
            at: Instant::now(),
            who,
            kind: "exit".into(),
            text: "stdout closed".into(),
        });
    });
    Ok(child)
}

/// `kill -<sig> <pid>`.
fn signal(pid: u32, sig: &str) -> Result<(), String> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .map_err(|e| format!("kill -{sig}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{sig} {pid}: {status}"))
    }
}

/// `12400000` -> `12,400,000`.
pub fn money(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0 {
        format!("-{out}")
    } else {
        out
    }
}
