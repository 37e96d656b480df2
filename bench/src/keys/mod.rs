//! The keyed-lock workloads (issue #14): never-seen keys locked one after another, locked
//! again at once, and once more by a client that forgot them (`fresh-keys`, in the rounds), the znodes a key leaves once the server's
//! container reaper ran (`keys-left`) and the client's memory over many distinct keys
//! (`keys-memory`, in a child process), both once per run on a server of their own.
//!
//! `fresh.rs`, `left.rs` and `memory.rs` hold one workload each; this file runs the
//! once-per-run ones.

pub(crate) mod fresh;
pub(crate) mod left;
pub(crate) mod memory;

pub use fresh::{remembered, run_fresh_keys, FreshFigures};
use left::{run_keys_left, REAPER_INTERVAL_MS};
pub use left::{LeftFigures, LEFT_KEYS};
use memory::run_key_memory;
pub use memory::{child_keys, MemoryFigures};

use std::time::Duration;

use crate::zk::mkdir;

/// The once-per-run keyed workloads and where they ran.
#[derive(Clone, Debug, Default)]
pub struct KeyedOnce {
    /// The server they ran on.
    pub server: Option<String>,
    pub left: Option<LeftFigures>,
    pub memory: Option<MemoryFigures>,
}

/// Runs `keys-left` and `keys-memory` (those of them `args` asks for) on a server of their own
/// whose container reaper runs every 100 ms, started here and stopped once they are done (with
/// `--connect`, `keys-memory` runs on that ensemble and `keys-left`, which needs the short
/// reaper, is skipped).
pub async fn run_once(args: &crate::args::Args, root: &str) -> KeyedOnce {
    use crate::args::Workload;
    use zk_testcontainers::{ServerOptions, ZkServer};

    let (left, memory) = (
        args.runs_workload(Workload::KeysLeft),
        args.runs_workload(Workload::KeysMemory),
    );
    let mut once = KeyedOnce::default();
    if !left && !memory {
        return once;
    }
    let skipped = |error: String| LeftFigures {
        keys: LEFT_KEYS,
        error: Some(error),
        ..LeftFigures::default()
    };
    let (server, connect) = match args.external() {
        Some(connect) => {
            once.server = Some(format!("{connect} (--connect)"));
            if left {
                once.left = Some(skipped(
                    "needs a server of its own with a short reaper interval (not with --connect)"
                        .into(),
                ));
            }
            (None, connect)
        }
        None => {
            let opts = format!(
                "-Xmx256m -XX:+UseSerialGC -Dznode.container.checkIntervalMs={REAPER_INTERVAL_MS}"
            );
            eprintln!("bench: keyed workloads: starting a second ZooKeeper, JVM {opts}");
            let options = ServerOptions::default()
                .with_env("JVMFLAGS", &opts)
                .with_data_in_memory(args.data_in_memory);
            match ZkServer::start_with(options).await {
                Ok(server) => {
                    let connect = server.connect_string();
                    once.server = Some(format!("a second container, JVM {opts}"));
                    (Some(server), connect)
                }
                Err(e) => {
                    let why = format!("no second ZooKeeper: {e}");
                    eprintln!("bench: {why}");
                    once.left = left.then(|| skipped(why.clone()));
                    once.memory = memory.then(|| MemoryFigures {
                        keys: args.keys,
                        error: Some(why),
                        ..MemoryFigures::default()
                    });
                    return once;
                }
            }
        }
    };
    let dir = format!("{root}/keyed-once");
    if let Err(e) = mkdir(&connect, &dir).await {
        once.left = left.then(|| skipped(e.clone()));
        once.memory = memory.then(|| MemoryFigures {
            keys: args.keys,
            error: Some(e),
            ..MemoryFigures::default()
        });
        return once;
    }
    if left && server.is_some() {
        eprintln!("bench: keys-left: {LEFT_KEYS} keys in each of 4 ways, then two reaper scans...");
        once.left = Some(
            run_keys_left(
                &connect,
                &format!("{dir}/left"),
                LEFT_KEYS,
                Some(REAPER_INTERVAL_MS),
                Duration::from_secs(60),
            )
            .await,
        );
    }
    if memory {
        eprintln!(
            "bench: keys-memory: {} distinct keys one after another, in a child process...",
            args.keys
        );
        let limit = Duration::from_secs(300).max(Duration::from_millis(10 * args.keys));
        once.memory =
            Some(run_key_memory(&connect, &format!("{dir}/memory"), args.keys, limit).await);
    }
    drop(server);
    once
}
