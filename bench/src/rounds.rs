//! The rounds: in each, every workload's window for every library in turn, who goes first
//! rotating from round to round, so that the machine's drift and noise fall on every library
//! alike and each figure can be taken as its median over the rounds.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::args::{Args, Peer, Workload};
use crate::curator::{self, CuratorPeer};
use crate::floor::{measure_floor, Floor};
use crate::handover::{run_handover, HandoverFigures};
use crate::keys::{run_fresh_keys, FreshFigures};
use crate::throughput::{run_locks, Figures, Layout};
use crate::waiters::{run_waiters, WaiterFigures};
use crate::zk::mkdir;
use crate::{CONTENDERS, GRID};

/// What one round measured.
#[derive(Default)]
pub struct Round {
    /// The server's floor, measured at the start of the round.
    pub floor: Floor,
    /// Who ran in which order, workload by workload.
    pub order: Vec<(Workload, Vec<Peer>)>,
    /// The lock workloads' windows (`uncontended`, `contended8`, `locks64x4`, `keys64x4`).
    pub locks: BTreeMap<(Peer, Workload), Figures>,
    /// The fresh-keys workload (Rust libraries only).
    pub fresh: BTreeMap<Peer, FreshFigures>,
    /// The waiters workload (Rust libraries only).
    pub waiters: BTreeMap<Peer, WaiterFigures>,
    /// The leader-handover workload (zk-recipes and Curator).
    pub handover: BTreeMap<Peer, HandoverFigures>,
}

/// Where the rounds run.
pub struct Setup<'a> {
    pub connect: &'a str,
    pub root: &'a str,
    pub args: &'a Args,
    /// The Rust libraries to measure.
    pub rust: Vec<Peer>,
}

/// Runs round `r` (from 0).
pub async fn run_round(
    r: usize,
    setup: &Setup<'_>,
    curator: Option<&mut CuratorPeer>,
) -> Result<Round, String> {
    let Setup {
        connect,
        root,
        args,
        ..
    } = *setup;
    let mut curator = curator;
    let dir = format!("{root}/round-{}", r + 1);
    let floor_secs = Duration::from_secs_f64((args.measure.as_secs_f64() / 3.0).max(0.5));
    eprintln!("bench: round {} of {}: server floor...", r + 1, args.rounds);
    mkdir(connect, &dir).await?;
    let mut round = Round {
        floor: measure_floor(connect, &dir, floor_secs)
            .await
            .map_err(|e| format!("floor: {e}"))?,
        ..Round::default()
    };
    for workload in Workload::ALL {
        if !args.runs_workload(workload) {
            continue;
        }
        let mut order: Vec<Peer> = setup
            .rust
            .iter()
            .copied()
            // zookeeper-client has no leader election.
            .filter(|&p| workload != Workload::Handover || p == Peer::ZkRecipes)
            .collect();
        if curator.is_some() && curator::supports(workload) {
            order.push(Peer::Curator);
        }
        if order.is_empty() {
            continue;
        }
        let first = r % order.len();
        order.rotate_left(first);
        for &peer in &order {
            let path = format!("{dir}/{}/{}", peer.key(), workload.key());
            eprintln!(
                "bench: round {} of {}: {}: {}...",
                r + 1,
                args.rounds,
                peer.key(),
                workload.key()
            );
            match (peer.lib(), workload) {
                (Some(_), Workload::Handover) => {
                    let figures =
                        run_handover(connect, &path, args.warmup, args.measure, None).await;
                    round.handover.insert(peer, figures);
                }
                (Some(lib), Workload::Waiters) => {
                    let figures = run_waiters(lib, connect, &path, args.waiters).await;
                    round.waiters.insert(peer, figures);
                }
                (Some(lib), Workload::FreshKeys) => {
                    let figures = run_fresh_keys(lib, connect, &path, args.fresh_keys).await;
                    round.fresh.insert(peer, figures);
                }
                (Some(lib), _) => {
                    let shape = match workload {
                        Workload::Uncontended => (1, 1),
                        Workload::Contended8 => (1, CONTENDERS),
                        _ => GRID,
                    };
                    let layout = match workload {
                        Workload::Keys64x4 => Layout::Keys,
                        _ => Layout::Roots,
                    };
                    let figures = run_locks(lib, connect, &path, shape, layout, args, None).await;
                    round.locks.insert((peer, workload), figures);
                }
                (None, Workload::Handover) => {
                    if let Some(java) = curator.as_deref_mut() {
                        let figures = java.handover(&path, args.warmup, args.measure).await;
                        round.handover.insert(peer, figures);
                    }
                }
                (None, _) => {
                    if let Some(java) = curator.as_deref_mut() {
                        let figures = java.locks(workload, &path, args.warmup, args.measure).await;
                        round.locks.insert((peer, workload), figures);
                    }
                }
            }
        }
        round.order.push((workload, order));
    }
    Ok(round)
}
