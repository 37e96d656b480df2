//! `zkr lock` and `zkr elect`: take the lock (or lead), run CMD, and stop it when that is lost.
//!
//! The order of things: CMD is found first (a typo takes no lock), then the session is opened
//! and the lock awaited, with SIGINT/SIGTERM/SIGHUP caught from the start (an interrupted wait
//! withdraws its node at once instead of leaving it to the session timeout). While CMD runs,
//! three things can happen: CMD exits (release, exit with its code); the lock is lost (SIGTERM
//! to CMD's group, SIGKILL after `--grace`, exit 125); `zkr` gets a signal (passed on to CMD's
//! group; CMD decides when to exit, and the lock is released then).

use std::ffi::OsString;
use std::time::Duration;

use serde_json::json;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;
use zk_recipes::{Grant, LeaderElection, Leadership, LossReason, Session, ZkLockSpace, ZkMutex};

use crate::args::{ElectArgs, LockArgs, RunArgs, ZkArgs};
use crate::behind;
use crate::child::{self, Running};
use crate::connect;
use crate::exit::{self, Failure, Result};
use crate::watchdog::{self, Watchdog};

/// After this long without a grant, say that we wait.
const SAY_WAITING_AFTER: Duration = Duration::from_secs(1);

/// What CMD runs under.
enum Held {
    Mutex(zk_recipes::ZkMutexGuard),
    Keyed(zk_recipes::ZkLockSpaceGuard),
    Leader(Leadership),
}

impl Held {
    fn grant(&self) -> &Grant {
        match self {
            Held::Mutex(g) => g,
            Held::Keyed(g) => g,
            Held::Leader(l) => l,
        }
    }

    /// What giving it up is called.
    fn released(&self) -> &'static str {
        match self {
            Held::Leader(_) => "resigned",
            _ => "released",
        }
    }

    async fn release(self) -> zk_recipes::Result<()> {
        match self {
            Held::Mutex(g) => g.release().await,
            Held::Keyed(g) => g.release().await,
            Held::Leader(l) => l.resign().await,
        }
    }
}

/// `zkr lock`.
pub async fn lock(zk: &ZkArgs, args: LockArgs) -> Result<i32> {
    let program = child::resolve(&args.cmd[0])?;
    zk_recipes::ZkPath::new(args.path.as_str())?;
    let mut signals = Signals::new()?;
    let out = Reporter::new(&args.run);
    let session = signals
        .interruptible(connect::session(
            zk,
            args.run.loss_policy,
            args.run.owner.as_deref(),
        ))
        .await??;
    let what = match &args.key {
        Some(key) => format!("key {key:?} of {}", args.path),
        None => args.path.clone(),
    };
    // Where our node waits: PATH, or the key's directory.
    let queue_root = match &args.key {
        Some(key) => ZkLockSpace::new(&session, &args.path)?.key_path(key)?,
        None => args.path.clone(),
    };
    let acquired = async {
        match &args.key {
            None => {
                let mutex = ZkMutex::new(&session, &args.path)?;
                let root = args.path.clone();
                if args.try_lock {
                    Ok(mutex.try_lock().await?.map(|g| (Held::Mutex(g), root)))
                } else {
                    Ok(Some((Held::Mutex(mutex.lock().await?), root)))
                }
            }
            Some(key) => {
                let space = ZkLockSpace::new(&session, &args.path)?;
                let root = space.key_path(key)?;
                if args.try_lock {
                    Ok(space.try_lock(key).await?.map(|g| (Held::Keyed(g), root)))
                } else {
                    Ok(Some((Held::Keyed(space.lock(key).await?), root)))
                }
            }
        }
    };
    let held = wait_for_grant(
        &session,
        &mut signals,
        &out,
        (&what, &queue_root),
        args.timeout,
        acquired,
    )
    .await?;
    let Some((held, root)) = held else {
        session.close().await;
        return Err(Failure::new(exit::BUSY, format!("{what} is busy"))
            .event("busy")
            .with("root", queue_root));
    };
    let grant = held.grant();
    let env = vec![
        ("ZK_LOCK_PATH", grant.path().to_owned()),
        ("ZK_LOCK_ROOT", root.clone()),
        ("ZK_LOCK_TOKEN", grant.token().as_u64().to_string()),
        (
            "ZK_LOCK_INCARNATION",
            grant.token().incarnation().to_string(),
        ),
        ("ZK_SESSION_ID", format!("{:#x}", grant.session_id())),
    ];
    out.event(
        json!({"event": "holding", "root": root, "node": grant.path(), "token": grant.token().as_u64(), "session": format!("{:#x}", grant.session_id())}),
        format!(
            "holding {what} (token {}, session {:#x}, node {})",
            grant.token(),
            grant.session_id(),
            grant.path()
        ),
    );
    run_holding(
        &session,
        held,
        &program,
        &args.cmd,
        &env,
        &args.run,
        &out,
        &mut signals,
        zk,
    )
    .await
}

/// `zkr elect PATH -- CMD`.
pub async fn elect(zk: &ZkArgs, args: ElectArgs) -> Result<i32> {
    let program = child::resolve(&args.cmd[0])?;
    zk_recipes::ZkPath::new(args.path.as_str())?;
    let mut signals = Signals::new()?;
    let out = Reporter::new(&args.run);
    let session = signals
        .interruptible(connect::session(
            zk,
            args.run.loss_policy,
            args.run.owner.as_deref(),
        ))
        .await??;
    let info = args
        .info
        .clone()
        .or_else(|| args.run.owner.clone())
        .unwrap_or_else(zk_recipes::layout::owner::default_label);
    let election = LeaderElection::new(&session, &args.path, info.as_bytes())?;
    let what = format!("the election {}", args.path);
    let acquired = async {
        if args.try_lead {
            Ok(election
                .try_campaign()
                .await?
                .map(|l| (Held::Leader(l), ())))
        } else {
            Ok(Some((Held::Leader(election.campaign().await?), ())))
        }
    };
    let held = wait_for_grant(
        &session,
        &mut signals,
        &out,
        (&what, &args.path),
        args.timeout,
        acquired,
    )
    .await?;
    let Some((held, ())) = held else {
        session.close().await;
        return Err(
            Failure::new(exit::BUSY, format!("someone else leads {}", args.path))
                .event("busy")
                .with("root", args.path.as_str()),
        );
    };
    let grant = held.grant();
    let env = vec![
        ("ZK_ELECTION_PATH", args.path.clone()),
        ("ZK_LEADER_PATH", grant.path().to_owned()),
        ("ZK_LEADER_TERM", grant.token().as_u64().to_string()),
        (
            "ZK_LEADER_INCARNATION",
            grant.token().incarnation().to_string(),
        ),
        ("ZK_SESSION_ID", format!("{:#x}", grant.session_id())),
    ];
    out.event(
        json!({"event": "leading", "root": args.path, "node": grant.path(), "term": grant.token().as_u64(), "session": format!("{:#x}", grant.session_id()), "info": info}),
        format!(
            "leading {} (term {}, session {:#x}, node {})",
            args.path,
            grant.token(),
            grant.session_id(),
            grant.path()
        ),
    );
    run_holding(
        &session,
        held,
        &program,
        &args.cmd,
        &env,
        &args.run,
        &out,
        &mut signals,
        zk,
    )
    .await
}

type Boxed<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T>>>;

/// Waits for `acquired`, bounded by `timeout`, interrupted by a signal. After a second of
/// waiting it says so, and whom it waits behind in the queue at `root` (node, owner, session;
/// see `behind.rs`), and again each time the node it waits for goes while it still waits.
/// `Ok(None)`: not granted (`--try`).
async fn wait_for_grant<T>(
    session: &Session,
    signals: &mut Signals,
    out: &Reporter,
    (what, root): (&str, &str),
    timeout: Option<Duration>,
    acquired: impl std::future::Future<Output = zk_recipes::Result<Option<T>>>,
) -> Result<Option<T>> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut acquired = Box::pin(acquired);
    let say_waiting = tokio::time::sleep(SAY_WAITING_AFTER);
    tokio::pin!(say_waiting);
    let mut said = false;
    // Reading where our node stands, then waiting for the node ahead to go: one at a time.
    let mut reading: Option<
        Boxed<Option<(behind::Behind, zk_recipes::zookeeper_client::OneshotWatcher)>>,
    > = None;
    let mut ahead_gone: Option<Boxed<()>> = None;
    let mut last: Option<String> = None;
    let read_behind = |session: &Session| -> Boxed<_> {
        let session = session.clone();
        let root = root.to_owned();
        Box::pin(async move {
            let client = session.client().await.ok()?;
            behind::read(&client, &root).await
        })
    };
    let outcome = loop {
        tokio::select! {
            biased;
            result = &mut acquired => break Ok(result),
            signal = signals.recv() => {
                break Err(Failure::new(exit::SIGNAL_BASE + signal, format!("interrupted by {} while waiting for {what}", signal_name(signal)))
                    .event("interrupted")
                    .with("signal", signal_name(signal))
                    .with("root", root));
            }
            () = sleep_until(deadline) => {
                let waited = timeout.unwrap_or_default();
                break Err(Failure::new(exit::TIMEOUT, format!("timed out after {waited:?} waiting for {what}"))
                    .event("timeout")
                    .with("root", root)
                    .with("waited_ms", waited.as_millis() as u64));
            }
            () = &mut say_waiting, if !said => {
                said = true;
                reading = Some(read_behind(session));
            }
            found = async { reading.as_mut().expect("guarded").await }, if reading.is_some() => {
                reading = None;
                match found {
                    Some((behind, watcher)) => {
                        let text = behind.describe();
                        if last.as_deref() != Some(text.as_str()) {
                            let mut object = json!({"event": "waiting", "for": what, "root": root});
                            if let (Some(o), serde_json::Value::Object(b)) = (object.as_object_mut(), behind.json()) {
                                o.extend(b);
                            }
                            let again = if last.is_some() { "still " } else { "" };
                            out.event(object, format!("{again}waiting for {what}: {text}"));
                            last = Some(text);
                        }
                        ahead_gone = Some(Box::pin(async move { watcher.changed().await; }));
                    }
                    // Not told (our node not there yet, or the node ahead just went): said plainly
                    // the first time.
                    None if last.is_none() => {
                        out.event(json!({"event": "waiting", "for": what, "root": root}), format!("waiting for {what}"));
                        last = Some(String::new());
                    }
                    None => {}
                }
            }
            () = async { ahead_gone.as_mut().expect("guarded").await }, if ahead_gone.is_some() => {
                ahead_gone = None;
                reading = Some(read_behind(session));
            }
        }
    };
    // The abandoned acquisition goes first: it holds a handle of the session, and a session
    // closes (deleting our node at once) only once every handle is gone; so do our reads.
    drop(acquired);
    drop(reading);
    drop(ahead_gone);
    match outcome {
        Ok(Ok(held)) => Ok(held),
        Ok(Err(err)) => {
            session.close().await;
            Err(Failure::new(exit::code_of(&err), format!("{what}: {err}")).with("root", root))
        }
        Err(failure) => {
            session.close().await;
            Err(failure)
        }
    }
}

/// Runs CMD while `held` holds, then releases; the exit code.
#[allow(clippy::too_many_arguments)]
async fn run_holding(
    session: &Session,
    held: Held,
    program: &std::path::Path,
    cmd: &[OsString],
    env: &[(&'static str, String)],
    run: &RunArgs,
    out: &Reporter,
    signals: &mut Signals,
    zk: &ZkArgs,
) -> Result<i32> {
    // A second process that ends CMD's group should this one freeze (see `watchdog.rs`),
    // started first: it must be running before CMD is.
    let mut watchdog = match Watchdog::spawn(run.grace, out.mode()) {
        Ok(watchdog) => Some(watchdog),
        Err(e) => {
            out.warn(format!(
                "no watchdog ({e}): a frozen zkr would leave CMD running"
            ));
            None
        }
    };
    let mut running = match child::spawn(program, cmd, env) {
        Ok(running) => running,
        Err(failure) => {
            if let Some(watchdog) = watchdog {
                watchdog.finish();
            }
            let _ = bounded(zk, held.release()).await;
            session.close().await;
            return Err(failure);
        }
    };
    let liveness = watchdog::liveness(zk.session_timeout);
    if let Some(watchdog) = watchdog.as_mut() {
        let left = held
            .grant()
            .lease_remaining()
            .unwrap_or_default()
            .max(liveness);
        watchdog.arm(running.pid(), watchdog::boottime() + left.as_nanos() as u64);
    }
    let (status, lost) = supervise(
        &held,
        &mut running,
        signals,
        run.grace,
        out,
        watchdog.as_mut().map(|w| (w, liveness)),
    )
    .await;
    if let Some(watchdog) = watchdog {
        watchdog.finish();
    }
    let word = held.released();
    let released = bounded(zk, held.release()).await;
    session.close().await;
    let cmd_code = match &status {
        Ok(status) => child::exit_code(*status),
        Err(e) => {
            out.warn(format!("waiting for CMD: {e}"));
            exit::NOT_EXECUTABLE
        }
    };
    if let Some(reason) = lost {
        return Err(Failure::new(
            exit::LOST,
            format!("CMD stopped (its code {cmd_code}): {}", describe(reason)),
        )
        .event("stopped")
        .with("cmd_code", cmd_code)
        .with("reason", format!("{reason:?}")));
    }
    match released {
        Ok(Ok(())) => {
            out.event(
                json!({"event": word, "code": cmd_code}),
                format!("{word}; CMD exited with {cmd_code}"),
            );
            Ok(cmd_code)
        }
        // Gone before CMD ended, unseen until now: CMD may have run without the lock at the end.
        Ok(Err(err @ (zk_recipes::Error::Lost { .. } | zk_recipes::Error::SessionExpired))) => {
            Err(Failure::new(
                exit::LOST,
                format!("the lock was lost before CMD ended (CMD exited with {cmd_code}): {err}"),
            )
            .event("stopped")
            .with("cmd_code", cmd_code)
            .with("reason", "lost before CMD ended"))
        }
        Ok(Err(err)) => {
            out.warn(format!(
                "releasing: {err} (the node goes with the session, closed now)"
            ));
            Ok(cmd_code)
        }
        Err(()) => {
            out.warn(
                "releasing took too long (the node goes with the session, closed now)".to_owned(),
            );
            Ok(cmd_code)
        }
    }
}

/// Waits for CMD, watching the grant and our signals: the exit status and, if the grant was
/// lost meanwhile, why.
async fn supervise(
    held: &Held,
    running: &mut Running,
    signals: &mut Signals,
    grace: Duration,
    out: &Reporter,
    mut watchdog: Option<(&mut Watchdog, Duration)>,
) -> (
    std::io::Result<std::process::ExitStatus>,
    Option<LossReason>,
) {
    let grant = held.grant();
    let mut lost = None;
    let mut kill_at: Option<Instant> = None;
    let mut feed = tokio::time::interval(watchdog::FEED_EVERY);
    // One `lost()` for the whole loop, never made again: after it sees the node deleted it
    // waits a while to tell a deletion from the session's end, and a call dropped in that
    // wait starts over, so a loop that made a new one at every feed (100 ms) never saw a
    // deleted node.
    let gone = grant.lost();
    tokio::pin!(gone);
    let status = loop {
        tokio::select! {
            status = running.wait() => break status,
            _ = feed.tick(), if watchdog.is_some() => {
                if let Some((watchdog, liveness)) = watchdog.as_mut() {
                    let left = grant.lease_remaining().unwrap_or_default().max(*liveness);
                    watchdog.feed(watchdog::boottime() + left.as_nanos() as u64);
                }
            }
            reason = &mut gone, if lost.is_none() => {
                lost = Some(reason);
                kill_at = Some(Instant::now() + grace);
                out.event(
                    json!({"event": "lost", "reason": format!("{reason:?}"), "pid": running.pid(), "grace_ms": grace.as_millis() as u64}),
                    format!("{}; sending SIGTERM to CMD (process group {}), SIGKILL in {grace:?}", describe(reason), running.pid()),
                );
                running.signal_group(libc::SIGTERM);
            }
            () = sleep_until(kill_at) => {
                kill_at = None;
                out.event(json!({"event": "killed", "pid": running.pid()}), format!("CMD still running after {grace:?}: SIGKILL"));
                running.signal_group(libc::SIGKILL);
            }
            signal = signals.recv() => {
                out.event(json!({"event": "signal", "signal": signal_name(signal)}), format!("passing {} on to CMD", signal_name(signal)));
                running.signal_group(signal);
            }
        }
    };
    if lost.is_some() {
        // What CMD left in its group gets the rest of the grace, then SIGKILL.
        if let Some(at) = kill_at {
            while running.group_alive() && Instant::now() < at {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        running.signal_group(libc::SIGKILL);
    }
    (status, lost)
}

fn describe(reason: LossReason) -> String {
    match reason {
        LossReason::SessionExpired => "lost the lock: the ZooKeeper session expired".to_owned(),
        LossReason::Suspended => {
            "lost the lock: the connection to ZooKeeper was suspended (--loss-policy suspension)"
                .to_owned()
        }
        LossReason::NodeDeleted => "lost the lock: its node was deleted by someone else".to_owned(),
        LossReason::NodeChanged => "lost the lock: its node was changed by someone else".to_owned(),
        LossReason::SessionClosed => "lost the lock: the session was closed".to_owned(),
        other => format!("lost the lock: {other:?}"),
    }
}

/// At most a session timeout and a connection timeout: a release never hangs `zkr`.
async fn bounded<T>(zk: &ZkArgs, fut: impl std::future::Future<Output = T>) -> Result<T, ()> {
    tokio::time::timeout(zk.session_timeout + zk.connect_timeout, fut)
        .await
        .map_err(|_| ())
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// SIGINT, SIGTERM and SIGHUP, caught from the start.
pub struct Signals {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Signals {
    pub fn new() -> Result<Signals> {
        let catch = |kind| {
            signal(kind)
                .map_err(|e| Failure::new(exit::ZOOKEEPER, format!("catching signals: {e}")))
        };
        Ok(Signals {
            int: catch(SignalKind::interrupt())?,
            term: catch(SignalKind::terminate())?,
            hup: catch(SignalKind::hangup())?,
        })
    }

    /// The next signal's number.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => libc::SIGINT,
            _ = self.term.recv() => libc::SIGTERM,
            _ = self.hup.recv() => libc::SIGHUP,
        }
    }

    /// `fut`, or the exit for the signal that came first.
    pub async fn interruptible<T>(
        &mut self,
        fut: impl std::future::Future<Output = T>,
    ) -> Result<T> {
        tokio::select! {
            value = fut => Ok(value),
            signal = self.recv() => Err(Failure::new(exit::SIGNAL_BASE + signal, format!("interrupted by {}", signal_name(signal)))
                .event("interrupted")
                .with("signal", signal_name(signal))),
        }
    }
}

pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}

/// `zkr:` lines (or JSON objects) on stderr, unless `--quiet`.
pub struct Reporter {
    quiet: bool,
    json: bool,
}

impl Reporter {
    pub fn new(run: &RunArgs) -> Reporter {
        Reporter {
            quiet: run.quiet,
            json: run.json,
        }
    }

    fn event(&self, object: serde_json::Value, text: String) {
        if self.quiet {
            return;
        }
        if self.json {
            eprintln!("{object}");
        } else {
            eprintln!("zkr: {text}");
        }
    }

    /// Something that went wrong but does not stop zkr: printed even with `--quiet`.
    fn warn(&self, text: String) {
        if self.json {
            eprintln!("{}", json!({"event": "warning", "message": text}));
        } else {
            eprintln!("zkr: {text}");
        }
    }

    /// How the watchdog reports.
    fn mode(&self) -> watchdog::Output {
        match (self.quiet, self.json) {
            (true, _) => watchdog::Output::Quiet,
            (false, true) => watchdog::Output::Json,
            (false, false) => watchdog::Output::Text,
        }
    }
}
