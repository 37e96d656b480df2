//! The account-balance incident, replayed with real processes, a real SQLite database and a
//! real ZooKeeper, with and without the fence.
//!
//! ```text
//! cargo run --example incident_replay                  # both runs; ZooKeeper started in Docker
//! cargo run --example incident_replay -- --fenced      # one run only
//! cargo run --example incident_replay -- --unfenced
//! ZK_CONNECT=127.0.0.1:2181 cargo run --example incident_replay -- --session-timeout-ms 2000
//! ```
//!
//! Account `acct-1` holds 12,400,000. Worker 1 (its own process) takes the lock on the
//! account (token N), reads the balance and computes 12,200,000 after a 200,000 charge; the
//! orchestrator then freezes it with `SIGSTOP`, before it writes, for longer than its session
//! timeout. Its session expires, and worker 2 (another process, queued on the lock) is granted
//! the lock (token N+1), withdraws 2,000,000 and writes 10,400,000. Worker 1 is resumed with
//! `SIGCONT` and writes its stale 12,200,000 with token N:
//!
//! - fenced (`UPDATE ... WHERE id = :id AND fence <= :token`): the store refuses it; worker 1
//!   sees `lost()` resolve, takes the lock again (a new token), reads 10,400,000 and applies
//!   its charge: 10,200,000, the right balance;
//! - unfenced (`UPDATE ... SET balance = :b WHERE id = :id`): the stale write lands, the
//!   balance is back at 12,200,000 and the 2,000,000 withdrawal is gone.
//!
//! Each run prints a timeline. The exit code is 0 when every requested run behaved as above:
//! 1 if the fenced run lost the update (or the unfenced run failed to show the lost update),
//! 2 if a run could not be carried out.
//!
//! Every worker process is this binary again, started with `--worker key=value...`.

mod replay;
mod store;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use replay::{Mode, Replay, WorkerArgs};
use zk_testcontainers::test_server;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        let worker = WorkerArgs::from_pairs(&args[1..]).unwrap_or_else(|e| fail(&e));
        if let Err(e) = replay::worker(worker).await {
            println!("@replay error {e}");
            fail(&e);
        }
        return;
    }
    let mut modes = Vec::new();
    let mut session_timeout = Duration::from_secs(2);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--fenced" => modes.push(Mode::Fenced),
            "--unfenced" => modes.push(Mode::Unfenced),
            "--session-timeout-ms" => {
                let ms = rest.next().and_then(|v| v.parse().ok());
                session_timeout = Duration::from_millis(
                    ms.unwrap_or_else(|| fail("--session-timeout-ms needs a number")),
                );
            }
            other => fail(&format!(
                "unknown argument {other:?} (--fenced, --unfenced, --session-timeout-ms N)"
            )),
        }
    }
    if modes.is_empty() {
        modes = vec![Mode::Fenced, Mode::Unfenced];
    }

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

    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("current_exe: {e}")));
    let mut all_as_expected = true;
    for mode in modes {
        let replay = Replay {
            connect: connect.clone(),
            lock: format!(
                "/incident-replay/{mode}-{}-{}/acct-1",
                std::process::id(),
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_millis())
                    .unwrap_or(0)
            ),
            mode,
            session_timeout,
        };
        println!("\n== {mode} run");
        let outcome = replay::run(&replay, |worker: &WorkerArgs| {
            let mut command = tokio::process::Command::new(&exe);
            command.arg("--worker").args(worker.to_pairs());
            command
        })
        .await
        .unwrap_or_else(|e| fail(&format!("{mode} run: {e}")));
        for line in &outcome.timeline {
            println!("{line}");
        }
        let expected = outcome.as_expected();
        println!("{}", outcome.verdict());
        println!(
            "=> {}",
            match (mode, expected) {
                (Mode::Fenced, true) => "OK: the store refused the stale write; no update lost",
                (Mode::Fenced, false) => "FAIL: the fenced run lost an update",
                (Mode::Unfenced, true) =>
                    "as expected without the fence: the lost update, reproduced",
                (Mode::Unfenced, false) => "FAIL: the unfenced run did not show the lost update",
            }
        );
        all_as_expected &= expected;
    }
    // `exit` skips destructors: remove our ZooKeeper container first.
    drop(zk);
    std::process::exit(if all_as_expected { 0 } else { 1 });
}

fn fail(msg: &str) -> ! {
    eprintln!("incident_replay: {msg}");
    std::process::exit(2)
}
