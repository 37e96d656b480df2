//! `zkr lock` and `zkr elect`: take the lock (or lead), run CMD, and stop it when that is lost.
//!
//! The order of things: CMD is found first (a typo takes no lock), then the session is opened
//! and the lock awaited, with SIGINT/SIGTERM/SIGHUP caught from the start (an interrupted wait
//! withdraws its node at once instead of leaving it to the session timeout). While CMD runs,
//! three things can happen: CMD exits (release, exit with its code); the lock is lost (SIGTERM
//! to CMD's group, SIGKILL after `--grace`, exit 125); `zkr` gets a signal (passed on to CMD's
//! group; CMD decides when to exit, and the lock is released then).
//!
//! This file holds the two commands (what each acquires, the environment CMD gets), what CMD
//! runs under (`Held`) and the `Reporter`; `wait.rs` waits for the grant, `hold.rs` runs and
//! supervises CMD while it is held and gives the outcome, `signals.rs` catches our signals.

mod hold;
mod signals;
mod wait;

use serde_json::json;
use tokio::time::Instant;
use zk_recipes::{Grant, Guard, Recipe, Session, ZkLeaderElection, ZkLockSpace, ZkMutex};

use crate::args::{ElectArgs, LockArgs, RunArgs, ZkArgs};
use crate::child;
use crate::connect;
use crate::exit::{self, Failure, Result};
use crate::watchdog;

use hold::run_holding;
pub use signals::{signal_name, Signals};
use wait::wait_for_grant;

/// What CMD runs under: a lock's guard or a leadership, and what giving it up is called.
pub(super) struct Held<R: Recipe> {
    guard: Guard<R>,
    word: &'static str,
}

impl<R: Recipe> Held<R>
where
    Guard<R>: std::ops::Deref<Target = Grant>,
{
    fn grant(&self) -> &Grant {
        &self.guard
    }
}

/// What `lock` and `elect` do first: CMD found, PATH checked, the signals caught, the session
/// opened (interruptible).
struct Started {
    program: std::path::PathBuf,
    signals: Signals,
    out: Reporter,
    session: Session,
}

async fn start(
    zk: &ZkArgs,
    path: &str,
    cmd: &[std::ffi::OsString],
    run: &RunArgs,
) -> Result<Started> {
    let program = child::resolve(&cmd[0])?;
    zk_recipes::layout::check_path(path)?;
    let mut signals = Signals::new()?;
    let out = Reporter::new(run);
    let session = signals
        .interruptible(connect::session(zk, run.loss_policy, run.owner.as_deref()))
        .await??;
    Ok(Started {
        program,
        signals,
        out,
        session,
    })
}

/// `zkr lock`.
pub async fn lock(zk: &ZkArgs, args: LockArgs) -> Result<i32> {
    let Started {
        program,
        mut signals,
        out,
        session,
    } = start(zk, &args.path, &args.cmd, &args.run).await?;
    let what = match &args.key {
        Some(key) => format!("key {key:?} of {}", args.path),
        None => args.path.clone(),
    };
    // Where our node waits: PATH, or the key's directory.
    let queue_root = match &args.key {
        Some(key) => ZkLockSpace::new(&session, &args.path)?.key_path(key)?,
        None => args.path.clone(),
    };
    let run = Run {
        zk,
        session: &session,
        signals: &mut signals,
        out: &out,
        program: &program,
    };
    match &args.key {
        None => {
            let mutex = ZkMutex::new(&session, &args.path)?;
            let acquired = async {
                match args.try_lock {
                    true => mutex.try_lock().await,
                    false => mutex.lock().await.map(Some),
                }
            };
            hold_lock(run, &args, &what, &queue_root, acquired).await
        }
        Some(key) => {
            let space = ZkLockSpace::new(&session, &args.path)?;
            let acquired = async {
                match args.try_lock {
                    true => space.try_lock(key).await,
                    false => space.lock(key).await.map(Some),
                }
            };
            hold_lock(run, &args, &what, &queue_root, acquired).await
        }
    }
}

/// What running CMD under something held needs, whatever is held.
struct Run<'a> {
    zk: &'a ZkArgs,
    session: &'a Session,
    signals: &'a mut Signals,
    out: &'a Reporter,
    program: &'a std::path::Path,
}

/// `zkr lock` once it knows what it locks: waits for `acquired`, then runs CMD under it.
async fn hold_lock<R: Recipe>(
    run: Run<'_>,
    args: &LockArgs,
    what: &str,
    root: &str,
    acquired: impl std::future::Future<Output = zk_recipes::Result<Option<Guard<R>>>>,
) -> Result<i32>
where
    Guard<R>: std::ops::Deref<Target = Grant>,
{
    let Run {
        zk,
        session,
        signals,
        out,
        program,
    } = run;
    let held = wait_for_grant(session, signals, out, (what, root), args.timeout, acquired).await?;
    let Some(guard) = held else {
        session.close().await;
        return Err(Failure::new(exit::BUSY, format!("{what} is busy"))
            .event("busy")
            .with("root", root.to_owned()));
    };
    let held = Held {
        guard,
        word: "released",
    };
    let grant = held.grant();
    let env = vec![
        ("ZK_LOCK_PATH", grant.path().to_owned()),
        ("ZK_LOCK_ROOT", root.to_owned()),
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
        session, held, program, &args.cmd, &env, &args.run, out, signals, zk,
    )
    .await
}

/// `zkr elect PATH -- CMD`.
pub async fn elect(zk: &ZkArgs, args: ElectArgs) -> Result<i32> {
    let Started {
        program,
        mut signals,
        out,
        session,
    } = start(zk, &args.path, &args.cmd, &args.run).await?;
    let info = args
        .info
        .clone()
        .or_else(|| args.run.owner.clone())
        .unwrap_or_else(zk_recipes::layout::owner::default_label);
    let election = ZkLeaderElection::new(&session, &args.path, info.as_bytes())?;
    let what = format!("the election {}", args.path);
    let acquired = async {
        match args.try_lead {
            true => election.try_campaign().await,
            false => election.campaign().await.map(Some),
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
    let Some(guard) = held else {
        session.close().await;
        return Err(
            Failure::new(exit::BUSY, format!("someone else leads {}", args.path))
                .event("busy")
                .with("root", args.path.as_str()),
        );
    };
    let held = Held {
        guard,
        word: "resigned",
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

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
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
