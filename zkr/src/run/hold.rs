//! CMD while the grant is held: spawned under the watchdog, supervised (the grant's loss,
//! our signals, the watchdog's deadlines), the grant released, and the exit code or failure.

use std::ffi::OsString;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use zk_recipes::{Grant, Guard, LossReason, Recipe, Session};

use super::{signal_name, sleep_until, Held, Reporter, Signals};
use crate::args::{RunArgs, ZkArgs};
use crate::child::{self, Running};
use crate::exit::{self, Failure, Result};
use crate::watchdog::{self, Watchdog};

/// Runs CMD while `held` holds, then releases; the exit code.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_holding<R: Recipe>(
    session: &Session,
    held: Held<R>,
    program: &std::path::Path,
    cmd: &[OsString],
    env: &[(&'static str, String)],
    run: &RunArgs,
    out: &Reporter,
    signals: &mut Signals,
    zk: &ZkArgs,
) -> Result<i32>
where
    Guard<R>: std::ops::Deref<Target = Grant>,
{
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
            let _ = bounded(zk, held.guard.release()).await;
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
    let word = held.word;
    let released = bounded(zk, held.guard.release()).await;
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
async fn supervise<R: Recipe>(
    held: &Held<R>,
    running: &mut Running,
    signals: &mut Signals,
    grace: Duration,
    out: &Reporter,
    mut watchdog: Option<(&mut Watchdog, Duration)>,
) -> (
    std::io::Result<std::process::ExitStatus>,
    Option<LossReason>,
)
where
    Guard<R>: std::ops::Deref<Target = Grant>,
{
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
