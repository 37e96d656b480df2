//! The process-pause incident, per lock kind, with real processes: worker 1 takes the lock,
//! reads the balance, computes its 200,000 charge and is frozen with `SIGSTOP` (its watchdog
//! or session with it) for longer than the TTL / session timeout. Worker 2 (another process)
//! takes the lock if the lock kind lets it, withdraws 2,000,000 and writes. Worker 1 is
//! resumed with `SIGCONT` and writes what it computed; refused, it starts over.
//!
//! Right: 10,200,000. The lost update: 12,200,000 (the withdrawal gone).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::kinds::{self, Attempt, Kind};
use crate::{Addrs, PREFIX};

pub const OPENING: i64 = 12_400_000;
pub const CHARGE: i64 = 200_000;
pub const WITHDRAWAL: i64 = 2_000_000;
pub const RIGHT: i64 = OPENING - WITHDRAWAL - CHARGE;
pub const LOST: i64 = OPENING - CHARGE;

/// One worker process's orders (`key=value` pairs on its command line).
pub struct WorkerArgs {
    pub kind: Kind,
    pub name: String,
    pub item: String,
    pub amount: i64,
    pub pause: bool,
    pub retry: bool,
    pub addrs: Addrs,
}

impl WorkerArgs {
    pub fn to_pairs(&self) -> Vec<String> {
        let mut v = vec![
            format!("kind={}", self.kind),
            format!("name={}", self.name),
            format!("item={}", self.item),
            format!("amount={}", self.amount),
            format!("pause={}", self.pause),
            format!("retry={}", self.retry),
        ];
        v.extend(self.addrs.to_pairs());
        v
    }

    pub fn from_pairs(pairs: &[String]) -> Result<WorkerArgs, String> {
        let map: HashMap<&str, &str> = pairs.iter().filter_map(|p| p.split_once('=')).collect();
        let get = |k: &str| map.get(k).copied().ok_or(format!("missing {k}"));
        Ok(WorkerArgs {
            kind: Kind::parse(get("kind")?).ok_or("unknown kind")?,
            name: get("name")?.to_owned(),
            item: get("item")?.to_owned(),
            amount: get("amount")?.parse().map_err(|e| format!("amount: {e}"))?,
            pause: get("pause")? == "true",
            retry: get("retry")? == "true",
            addrs: Addrs::from_map(&map)?,
        })
    }
}

fn say(kind: &str, text: String) {
    println!("{PREFIX}{kind} {text}");
}

/// The worker process: the critical section, once (or until it is not refused, with retry).
pub async fn worker(args: WorkerArgs) -> Result<(), String> {
    let ctx = args.addrs.ctx(args.kind, 2).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut first = true;
    loop {
        let pause: Option<kinds::PauseHook> = (first && args.pause).then(|| {
            Box::pin(async {
                let mut line = String::new();
                let _ = BufReader::new(tokio::io::stdin())
                    .read_line(&mut line)
                    .await;
            }) as kinds::PauseHook
        });
        let outcome = kinds::attempt(
            &ctx,
            &args.item,
            args.amount,
            &args.name,
            deadline,
            &say,
            pause,
        )
        .await?;
        first = false;
        match outcome {
            Attempt::Done { read, token } => {
                say(
                    "accepted",
                    format!(
                        "store ACCEPTED {} (read {read}, token {token:?})",
                        read - args.amount
                    ),
                );
                break;
            }
            Attempt::SoldOut => {
                say("soldout", "nothing left".into());
                break;
            }
            Attempt::Refused(why) => {
                say("refused", format!("store REFUSED the write: {why}"));
                if !args.retry {
                    break;
                }
            }
        }
    }
    say("done", "done".into());
    Ok(())
}

/// A row of the incident table.
pub struct Outcome {
    pub kind: Kind,
    /// Worker 2 wrote while worker 1 was frozen.
    pub second_wrote_while_frozen: bool,
    /// From worker 1's freeze to worker 2's write being done.
    pub second_waited: Duration,
    pub stale_write_accepted: bool,
    pub final_balance: i64,
    pub frozen_for: Duration,
    pub timeline: Vec<String>,
}

impl Outcome {
    pub fn lost_update(&self) -> bool {
        self.final_balance != RIGHT
    }

    pub fn as_expected(&self) -> bool {
        self.lost_update() == self.kind.loses_update_on_pause()
            && (self.final_balance == RIGHT || self.final_balance == LOST)
    }
}

struct Event {
    at: Instant,
    who: &'static str,
    kind: String,
    text: String,
}

struct Timeline {
    start: Instant,
    lines: Vec<String>,
    rx: mpsc::UnboundedReceiver<Event>,
    seen: Vec<(&'static str, String)>,
}

impl Timeline {
    fn note(&mut self, who: &str, text: impl std::fmt::Display) {
        let t = self.start.elapsed().as_secs_f64();
        self.lines.push(format!("+{t:6.2}s  {who:<12}  {text}"));
    }

    /// Waits for `who`'s `kind` (recording all that arrives); Ok(false) on timeout.
    async fn expect(&mut self, who: &str, kind: &str, within: Duration) -> Result<bool, String> {
        if self.seen.iter().any(|(w, k)| *w == who && k == kind) {
            return Ok(true);
        }
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let Ok(event) = tokio::time::timeout_at(deadline, self.rx.recv()).await else {
                return Ok(false);
            };
            let event = event.ok_or("every worker is gone")?;
            let t = event.at.saturating_duration_since(self.start).as_secs_f64();
            if event.kind != "exit" {
                self.lines
                    .push(format!("+{t:6.2}s  {:<12}  {}", event.who, event.text));
            }
            self.seen.push((event.who, event.kind.clone()));
            if event.who == who {
                if event.kind == kind {
                    return Ok(true);
                }
                if event.kind == "exit" {
                    return Err(format!("{who} exited before {kind:?}"));
                }
            }
        }
    }

    fn saw(&self, who: &str, kind: &str) -> bool {
        self.seen.iter().any(|(w, k)| *w == who && k == kind)
    }
}

fn spawn(
    args: &WorkerArgs,
    who: &'static str,
    tx: &mpsc::UnboundedSender<Event>,
) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .arg("--worker")
        .args(args.to_pairs())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {who}: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let tx = tx.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Some(report) = line.strip_prefix(PREFIX) else {
                continue;
            };
            let (kind, text) = report.split_once(' ').unwrap_or((report, ""));
            let _ = tx.send(Event {
                at: Instant::now(),
                who,
                kind: kind.to_owned(),
                text: text.to_owned(),
            });
        }
        let _ = tx.send(Event {
            at: Instant::now(),
            who,
            kind: "exit".into(),
            text: String::new(),
        });
    });
    Ok(child)
}

pub fn signal(pid: u32, sig: &str) -> Result<(), String> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .map_err(|e| format!("kill -{sig}: {e}"))?;
    status
        .success()
        .then_some(())
        .ok_or(format!("kill -{sig} {pid}: {status}"))
}

/// Runs the incident once for `kind`; `pause` is how long worker 1 stays frozen at least.
pub async fn run(
    kind: Kind,
    addrs: &Addrs,
    pause: Duration,
    nonce: &str,
) -> Result<Outcome, String> {
    let item = format!("acct-{kind}-{nonce}");
    let db = crate::store::connect(&addrs.pg).await?;
    crate::store::create_item(&db, &item, OPENING).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let mut tl = Timeline {
        start: Instant::now(),
        lines: Vec::new(),
        rx,
        seen: Vec::new(),
    };
    let args = |name: &str, amount, pause| WorkerArgs {
        kind,
        name: name.to_owned(),
        item: item.clone(),
        amount,
        pause,
        retry: true,
        addrs: addrs.clone(),
    };
    let wait = Duration::from_secs(30);
    let mut w1 = spawn(&args("worker 1", CHARGE, true), "worker 1", &tx)?;
    if !tl.expect("worker 1", "computed", wait).await? {
        return Err("worker 1 never computed".into());
    }
    let pid1 = w1.id().ok_or("worker 1 has no pid")?;
    signal(pid1, "STOP")?;
    let frozen = Instant::now();
    tl.note(
        "orchestrator",
        format!(
            "SIGSTOP worker 1 before it writes (TTL / session {:.1} s)",
            addrs.ttl.as_secs_f64()
        ),
    );
    let mut w2 = spawn(&args("worker 2", WITHDRAWAL, false), "worker 2", &tx)?;
    // A lock that hands over does so within the TTL plus the server's expiry granularity;
    // one that does not hand over (FOR UPDATE without a timeout) is given the pause only.
    let patience = if kind == Kind::PgForUpdate {
        pause
    } else {
        pause.max(Duration::from_secs(20))
    };
    let second = tl.expect("worker 2", "done", patience).await?;
    let second_waited = frozen.elapsed();
    tokio::time::sleep_until((frozen + pause).into()).await;
    signal(pid1, "CONT")?;
    let frozen_for = frozen.elapsed();
    tl.note(
        "orchestrator",
        format!(
            "SIGCONT worker 1 after {:.2} s frozen",
            frozen_for.as_secs_f64()
        ),
    );
    let mut stdin = w1.stdin.take().ok_or("no stdin")?;
    stdin.write_all(b"go\n").await.map_err(|e| e.to_string())?;
    if !tl.expect("worker 1", "done", wait).await? {
        return Err("worker 1 did not finish".into());
    }
    if !tl.expect("worker 2", "done", wait).await? {
        return Err("worker 2 did not finish".into());
    }
    let second_waited = if second {
        second_waited
    } else {
        frozen.elapsed()
    };
    for (who, child) in [("worker 1", &mut w1), ("worker 2", &mut w2)] {
        let status = tokio::time::timeout(wait, child.wait())
            .await
            .map_err(|_| format!("{who} did not exit"))?
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("{who} exited with {status}"));
        }
    }
    let (final_balance, _) = crate::store::tally(&db, &item).await?;
    // Worker 1's first write was accepted iff it reported no refusal before being accepted.
    let stale_write_accepted = !tl.saw("worker 1", "refused");
    tl.note("store", format!("{item}: balance {final_balance}"));
    Ok(Outcome {
        kind,
        second_wrote_while_frozen: second,
        second_waited,
        stale_write_accepted,
        final_balance,
        frozen_for,
        timeline: tl.lines,
    })
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
