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
use zk_recipes::{Grant, LeaderElection, Leadership, ZkLockSpace, ZkMutex};

use crate::args::{ElectArgs, LockArgs, RunArgs, ZkArgs};
use crate::child;
use crate::connect;
use crate::exit::{self, Failure, Result};
use crate::watchdog;

use hold::run_holding;
pub use signals::{signal_name, Signals};
use wait::wait_for_grant;

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
