//! `zkr elect PATH --observe`: the leader now, then one line (or JSON object) per change,
//! until interrupted.

use std::io::Write;

use serde_json::json;
use zk_recipes::{Leader, ZkLeaderObserver};

use crate::args::{ElectArgs, Policy, ZkArgs};
use crate::connect;
use crate::exit::{self, Failure, Result};
use crate::run::{signal_name, Signals};
use crate::time;

pub async fn observe(zk: &ZkArgs, args: &ElectArgs) -> Result<i32> {
    zk_recipes::layout::check_path(args.path.as_str())?;
    let mut signals = Signals::new()?;
    let session = signals
        .interruptible(connect::session(zk, Policy::Expiry, None))
        .await??;
    let mut observer = ZkLeaderObserver::new(&session, &args.path)?;
    let mut stdout = std::io::stdout();
    loop {
        let changed = tokio::select! {
            changed = observer.changed() => changed,
            signal = signals.recv() => {
                session.close().await;
                if args.run.json {
                    eprintln!("{}", json!({"event": "stopped", "signal": signal_name(signal)}));
                } else if !args.run.quiet {
                    eprintln!("zkr: {} received; stopped observing", signal_name(signal));
                }
                return Ok(0);
            }
        };
        let leader = match changed {
            Ok(leader) => leader,
            Err(err) => {
                session.close().await;
                return Err(Failure::new(
                    exit::code_of(&err),
                    format!("observing {}: {err}", args.path),
                ));
            }
        };
        let line = if args.run.json {
            json_line(&leader)
        } else {
            text_line(&leader)
        };
        // A closed stdout (`| head -1`) ends the observation.
        if writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            session.close().await;
            return Ok(0);
        }
    }
}

fn text_line(leader: &Option<Leader>) -> String {
    let at = time::iso_now();
    match leader {
        Some(l) => format!(
            "{at} leader {} (term {}, node {})",
            String::from_utf8_lossy(&l.info),
            l.term,
            node_name(&l.path)
        ),
        None => format!("{at} no leader"),
    }
}

fn json_line(leader: &Option<Leader>) -> String {
    let at = time::iso_now();
    let leader = leader.as_ref().map(|l| {
        json!({
            "info": String::from_utf8_lossy(&l.info),
            "term": l.term.as_u64(),
            "node": l.path,
        })
    });
    json!({"at": at, "leader": leader}).to_string()
}

fn node_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
