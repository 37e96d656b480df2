//! `zkr watch PATH`: `inspect`, printed again on every change. Every directory listed leaves
//! a ZooKeeper watch behind (PATH's existence when it is missing); the first to fire starts the
//! next read, which sets the next watches. Nothing polls. A terminal is redrawn in place;
//! otherwise each snapshot follows the last (`--json`: one object per line).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use tokio::task::JoinSet;

use crate::args::{InspectArgs, Policy, ZkArgs};
use crate::connect;
use crate::exit::Result;
use crate::inspect::{self, render};
use crate::run::Signals;

/// After a watch fires, changes that follow within this long are shown together (a handoff
/// is a deletion and a grant in quick succession).
const SETTLE: Duration = Duration::from_millis(50);

pub async fn watch(zk: &ZkArgs, args: &InspectArgs) -> Result<i32> {
    inspect::check_path(&args.path)?;
    let mut signals = Signals::new()?;
    let session = signals
        .interruptible(connect::session(zk, Policy::Expiry, None))
        .await??;
    let mut states = session.watch_state();
    // Sessions pinned to the servers zkr's own is not on, to read their clocks: kept across
    // rounds, closed with ours.
    let mut clocks = inspect::Clocks::default();
    let code = watch_rounds(zk, args, &session, &mut signals, &mut states, &mut clocks).await;
    clocks.close().await;
    session.close().await;
    code
}

async fn watch_rounds(
    zk: &ZkArgs,
    args: &InspectArgs,
    session: &zk_recipes::Session,
    signals: &mut Signals,
    states: &mut tokio::sync::watch::Receiver<zk_recipes::SessionState>,
    clocks: &mut inspect::Clocks,
) -> Result<i32> {
    let terminal = std::io::stdout().is_terminal();
    loop {
        // The client handle is dropped at once: a session closes cleanly only once every
        // handle of it is gone.
        let read = match session.client().await {
            Ok(client) => inspect::report(zk, &client, args, true, clocks).await,
            Err(err) => Err(err.into()),
        };
        let (report, watchers) = read?;
        let text = if args.json {
            format!("{}\n", render::json(&report, false))
        } else if terminal {
            format!("\x1b[H\x1b[2J{}", render::table(&report))
        } else {
            format!("--- {}\n{}", report.at, render::table(&report))
        };
        let mut stdout = std::io::stdout();
        if stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return Ok(0);
        }
        let mut fired = JoinSet::new();
        for watcher in watchers {
            fired.spawn(async move { watcher.changed().await });
        }
        tokio::select! {
            _ = fired.join_next(), if !fired.is_empty() => {}
            // The session went and came back (or expired): read again on the current one.
            changed = states.changed() => {
                if changed.is_err() {
                    return Err(zk_recipes::Error::SessionClosed.into());
                }
            }
            _ = signals.recv() => return Ok(0),
        }
        fired.abort_all();
        tokio::time::sleep(SETTLE).await;
    }
}
