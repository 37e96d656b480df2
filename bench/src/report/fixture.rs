//! Two fixed runs for the report's tests, built from the types the workloads record (no
//! ZooKeeper): a full one (three rounds of every workload and every library, the census, the
//! once-per-run keyed figures, a failed window and an overlap among them) and a partial one (one
//! round, Curator skipped, some workloads left out, failures that empty a cell).

use clap::Parser;

use crate::args::{Args, Peer, Workload};
use crate::diagnostics::{AcquireBreakdown, Breakdown, HandoverBreakdown, RoundTrips};
use crate::floor::Floor;
use crate::handover::HandoverFigures;
use crate::keys::fresh::SideBySide;
use crate::keys::left::Left;
use crate::keys::{FreshFigures, KeyedOnce, LeftFigures, MemoryFigures};
use crate::measure::Latency;
use crate::report::Report;
use crate::rounds::Round;
use crate::throughput::Figures;
use crate::waiters::WaiterFigures;

/// Each round's factor on the base figures (latencies; throughputs are divided by it), so that
/// the rounds differ and the medians, spreads and per-round ratios are all exercised.
const SCALE: [f64; 3] = [1.0, 0.94, 1.07];
/// The same for the server's floor, so that each round's own ratios to it differ too.
const FLOOR_SCALE: [f64; 3] = [1.0, 1.03, 0.97];

/// A further factor for some peers' and workloads' lock windows, so that the ratios between
/// peers and between workloads differ from round to round too.
fn jitter(peer: Peer, workload: Workload, r: usize) -> f64 {
    let by_peer = match peer {
        Peer::ZkRecipes => 1.0,
        Peer::ClientLock => [1.0, 1.02, 0.99][r],
        Peer::Curator => [1.0, 0.9, 1.04][r],
    };
    let by_workload = match workload {
        Workload::Keys64x4 => [1.0, 1.05, 0.98][r],
        _ => 1.0,
    };
    by_peer * by_workload
}

fn lat(p50_us: f64, p99_us: f64, samples: usize, s: f64) -> Latency {
    Latency {
        p50: Some(p50_us * s),
        p99: Some(p99_us * s),
        samples,
        quantiles_us: Vec::new(),
    }
}

/// Samples (ns) whose nearest-rank p50 and p99 are the given ones (µs).
fn samples(p50_us: f64, p99_us: f64, s: f64) -> Vec<u64> {
    let (p50, p99) = ((p50_us * s * 1000.0) as u64, (p99_us * s * 1000.0) as u64);
    let mut v = vec![p50; 50];
    v.extend(std::iter::repeat_n(p99, 49));
    v.push(p99 * 2);
    v
}

fn floor(s: f64) -> Floor {
    Floor {
        set_data: samples(390.0, 650.0, s),
        list: samples(250.0, 400.0, s),
        create_list: samples(540.0, 800.0, s),
        list_create: samples(550.0, 820.0, s),
        list_create_exact: 100,
        create: samples(430.0, 650.0, s),
        delete: samples(420.0, 600.0, s),
        cycles: (5700.0 / s) as u64,
        seconds: 5.0,
        cpu_ms: 1018.6,
    }
}

/// A lock window: cycles/s, acquire p50/p99 and handoff p50/p99 (µs), CPU per 1k cycles (ms),
/// log syncs and writes per cycle, the server's requests and replies per cycle.
struct Lock {
    cps: f64,
    acquire: (f64, f64),
    handoff: Option<(f64, f64)>,
    cpu: f64,
    syncs: f64,
    writes: f64,
    requests: f64,
    replies: f64,
}

impl Lock {
    fn figures(&self, s: f64) -> Figures {
        let seconds = 5.0;
        let cycles = (self.cps / s * seconds) as u64;
        let n = cycles as f64;
        Figures {
            cycles,
            seconds,
            acquire: lat(self.acquire.0, self.acquire.1, cycles as usize, s),
            handoff: self.handoff.map_or(Latency::default(), |(p50, p99)| {
                lat(p50, p99, cycles as usize, s)
            }),
            cpu_ms: self.cpu * s * n / 1000.0,
            log: Some((
                (self.syncs * n) as u64,
                (self.writes * self.syncs * n) as u64,
            )),
            packets: Some(((self.requests * n) as u64, (self.replies * n) as u64)),
            violations: 0,
            error: None,
        }
    }
}

fn lock(peer: Peer, workload: Workload) -> Lock {
    let l = |cps, acquire, handoff, cpu, syncs, writes| Lock {
        cps,
        acquire,
        handoff,
        cpu,
        syncs,
        writes,
        requests: 0.0,
        replies: 0.0,
    };
    let mut lock = match (peer, workload) {
        (Peer::ZkRecipes, Workload::Uncontended) => {
            l(1135.0, (450.0, 700.0), None, 140.9, 2.0, 1.0)
        }
        (Peer::ClientLock, Workload::Uncontended) => {
            l(998.0, (600.0, 930.0), None, 164.3, 2.0, 1.0)
        }
        (Peer::Curator, Workload::Uncontended) => l(883.0, (670.0, 1180.0), None, 194.7, 2.0, 1.0),
        (Peer::ZkRecipes, Workload::Contended8) => l(
            1618.0,
            (4110.0, 6850.0),
            Some((580.0, 1110.0)),
            147.9,
            1.84,
            1.08,
        ),
        (Peer::ClientLock, Workload::Contended8) => l(
            1130.0,
            (6330.0, 12120.0),
            Some((860.0, 1750.0)),
            199.3,
            1.99,
            1.01,
        ),
        (Peer::Curator, Workload::Contended8) => l(
            1017.0,
            (7040.0, 12160.0),
            Some((950.0, 1960.0)),
            342.3,
            1.99,
            1.0,
        ),
        (Peer::ZkRecipes, Workload::Locks64x4) => {
            l(5224.0, (760.0, 2100.0), None, 62.4, 0.55, 3.62)
        }
        (Peer::ClientLock, Workload::Locks64x4) => {
            l(5074.0, (780.0, 2200.0), None, 54.7, 0.49, 4.05)
        }
        (Peer::Curator, Workload::Locks64x4) => l(2737.0, (1400.0, 4100.0), None, 213.4, 0.54, 3.7),
        (Peer::ZkRecipes, _) => l(4285.0, (930.0, 2500.0), None, 73.7, 0.52, 3.88),
        (_, _) => l(5258.0, (760.0, 2000.0), None, 52.5, 0.53, 3.82),
    };
    (lock.requests, lock.replies) = match peer {
        Peer::ZkRecipes => (4.6, 5.9),
        Peer::ClientLock => (4.9, 5.3),
        Peer::Curator => (5.8, 6.4),
    };
    lock
}

fn fresh(peer: Peer, s: f64) -> FreshFigures {
    let ours = peer == Peer::ZkRecipes;
    let (fresh, relock, fresh_cps, relock_cps, writes) = if ours {
        ((460.0, 740.0), (450.0, 700.0), 1117.0, 1140.0, 2.0)
    } else {
        ((1610.0, 2410.0), (670.0, 1100.0), 479.0, 800.0, 4.0)
    };
    let side = |write: f64, single: f64, burst: f64, first: f64, relock: f64| SideBySide {
        write: lat(write, write * 1.6, 500, s),
        single: lat(single, single * 1.6, 500, s),
        burst: lat(burst, burst * 1.5, 500, s),
        list_first: lat(first, first * 1.5, 500, s),
        relock: lat(relock * s, relock * 1.6, 500, 1.0 / s),
        error: None,
    };
    FreshFigures {
        keys: 500,
        fresh: lat(fresh.0, fresh.1, 500, s),
        relock: lat(relock.0, relock.1, 500, s),
        fresh_cycles_per_s: Some(fresh_cps / s),
        relock_cycles_per_s: Some(relock_cps / s),
        relock_age_max_s: 2.6 + s,
        fresh_log: Some((500 * writes as u64, 500 * writes as u64)),
        relock_log: Some((1000, 1000)),
        forgotten: lat(relock.0 * 1.1, relock.1 * 1.1, 500, s),
        forgotten_log: Some((1000, if ours { 1500 } else { 1000 })),
        side: if ours {
            side(450.0, 527.0, 504.0, 581.0, 532.0)
        } else {
            side(450.0, 738.0, 504.0, 581.0, 743.0)
        },
        error: None,
    }
}

fn handover(peer: Peer, s: f64) -> HandoverFigures {
    let (p50, p99) = match peer {
        Peer::ZkRecipes => (490.0, 830.0),
        _ => (750.0, 3410.0),
    };
    HandoverFigures {
        handovers: 400,
        seconds: 5.0,
        handover: lat(p50, p99, 400, s),
        error: None,
    }
}

fn breakdown(s: f64, handoffs: usize) -> Breakdown {
    Breakdown {
        handoffs,
        release_to_event: Some(400.0 * s),
        event_to_relist: None,
        relist_to_grant: None,
        event_to_grant_direct: Some(2.0 * s),
        total: Some(402.0 * s),
        total_p99: Some(610.0 * s),
        delete_rtt: Some(410.0 * s),
    }
}

fn waiters(peer: Peer, s: f64) -> WaiterFigures {
    let ours = peer == Peer::ZkRecipes;
    WaiterFigures {
        waiters: 1000,
        rss_before_kib: 9000,
        rss_waiting_kib: if ours { 16_900 } else { 99_500 },
        kib_per_waiter: Some(if ours { 7.9 } else { 90.5 } * s),
        wakeups_per_release: ours.then_some(1.0),
        relists_per_handoff: ours.then_some(0.0),
        enqueue_s: 1.2,
        drain_handoffs_per_s: Some(if ours { 2422.0 } else { 1053.0 } / s),
        breakdown: ours.then(|| breakdown(s, 999)),
        error: None,
    }
}

fn round(r: usize, rust: &[Peer], curator: bool, args: &Args) -> Round {
    let s = SCALE[r];
    let mut round = Round {
        floor: floor(FLOOR_SCALE[r]),
        ..Round::default()
    };
    for workload in Workload::ALL {
        if !args.runs_workload(workload) {
            continue;
        }
        let mut order: Vec<Peer> = rust
            .iter()
            .copied()
            .filter(|&p| workload != Workload::Handover || p == Peer::ZkRecipes)
            .collect();
        if curator && crate::curator::supports(workload) {
            order.push(Peer::Curator);
        }
        let first = r % order.len();
        order.rotate_left(first);
        for &peer in &order {
            match workload {
                Workload::FreshKeys => {
                    round.fresh.insert(peer, fresh(peer, s));
                }
                Workload::Handover => {
                    round.handover.insert(peer, handover(peer, s));
                }
                Workload::Waiters => {
                    round.waiters.insert(peer, waiters(peer, s));
                }
                _ => {
                    round.locks.insert(
                        (peer, workload),
                        lock(peer, workload).figures(s * jitter(peer, workload, r)),
                    );
                }
            }
        }
        round.order.push((workload, order));
    }
    round
}

fn round_trips() -> RoundTrips {
    RoundTrips {
        grants: 2009,
        enqueues: 1.0,
        watches: 1.0,
        wakeups: 1.0,
        relists: 0.0,
        breakdown: Breakdown {
            handoffs: 2008,
            release_to_event: Some(630.0),
            total: Some(630.0),
            total_p99: Some(1030.0),
            delete_rtt: Some(620.0),
            event_to_grant_direct: Some(1.0),
            ..Breakdown::default()
        },
        uncontended: AcquireBreakdown {
            acquires: 1574,
            to_enqueued: Some(420.0),
            enqueued_to_granted: Some(1.0),
            granted_to_return: Some(2.0),
            total: Some(423.0),
        },
        handover: HandoverBreakdown {
            handovers: 401,
            delete_rtt: Some(470.0),
            resign_to_event: Some(460.0),
            event_to_relist: None,
            relist_to_grant: None,
            event_to_grant_direct: Some(1.0),
            grant_to_return: Some(10.0),
            total: Some(470.0),
            total_p99: Some(1080.0),
        },
    }
}

fn left(keys: u64) -> LeftFigures {
    let left = |per_key: f64| {
        Some(Left {
            nodes: (per_key * keys as f64) as u64,
            per_key,
        })
    };
    LeftFigures {
        keys,
        reaper_interval_ms: Some(100),
        zk_lock_space: left(0.0),
        zk_mutex_per_key: left(2.0),
        client_lock_persistent_parents: left(1.0),
        client_lock_container_parents: left(0.0),
        waited_s: 0.84,
        error: None,
    }
}

fn memory(keys: u64) -> MemoryFigures {
    let curve = (1..=10).map(|i| (keys * i / 10, 8_900 + 45 * i)).collect();
    MemoryFigures {
        keys,
        rss_first_1000_kib: 8_400,
        rss_all_kib: 9_350,
        growth_kib: 950,
        curve,
        seconds: 95.2,
        cycles_per_s: Some(1050.3),
        error: None,
    }
}

fn args(flags: &[&str]) -> Args {
    // --measure and --warmup given, so that BENCH_MEASURE_SECS and BENCH_WARMUP_SECS do not
    // change the fixture.
    let base = ["bench", "--measure", "5", "--warmup", "1"];
    Args::try_parse_from(base.iter().chain(flags)).expect("the fixture's flags parse")
}

fn report(args: Args, rust: Vec<Peer>, rounds: Vec<Round>, keyed: KeyedOnce) -> Report {
    Report {
        date: "2026-12-01 18:11 UTC".into(),
        machine: "AMD EPYC".into(),
        cores: 2,
        zookeeper: "3.8.0 (standalone, Docker, data on a volume, JVM -Xms256m -Xmx512m)".into(),
        load_start: 1.44,
        load_end: 2.7,
        args,
        rust,
        rounds,
        round_trips: round_trips(),
        keyed,
        curator_version: Some("5.4.0".into()),
        curator_skipped: None,
    }
}

const SERVER: &str = "a second container, JVM -Xmx256m -Dznode.container.checkIntervalMs=100";

/// Every workload, every library, three rounds; Curator's uncontended window of round 3 failed
/// and round 2's `Client::lock` 64x4 window saw overlapping holders.
pub fn full() -> Report {
    let args = args(&[]);
    let rust = vec![Peer::ZkRecipes, Peer::ClientLock];
    let mut rounds: Vec<Round> = (0..3).map(|r| round(r, &rust, true, &args)).collect();
    let failed = rounds[2]
        .locks
        .get_mut(&(Peer::Curator, Workload::Uncontended))
        .expect("the fixture has it");
    *failed = Figures {
        error: Some("the JVM did not answer within 30 s".into()),
        ..Figures::default()
    };
    rounds[1]
        .locks
        .get_mut(&(Peer::ClientLock, Workload::Locks64x4))
        .expect("the fixture has it")
        .violations = 2;
    let keyed = KeyedOnce {
        server: Some(SERVER.into()),
        left: Some(left(200)),
        memory: Some(memory(100_000)),
    };
    report(args, rust, rounds, keyed)
}

/// One round without Curator (`--no-java`) and without the 64-lock and handover workloads;
/// `Client::lock`'s waiters failed, ours relocked past `ZkLockSpace`'s memory, its side-by-side
/// pass failed, and `keys-memory` failed.
pub fn partial() -> Report {
    let args = args(&[
        "--no-java",
        "--workloads",
        "uncontended,contended8,keys64x4,fresh-keys,waiters,keys-left,keys-memory",
        "--fresh-keys",
        "2000",
        "--keys",
        "5000",
    ]);
    let rust = vec![Peer::ZkRecipes, Peer::ClientLock];
    let mut round = round(0, &rust, false, &args);
    *round
        .waiters
        .get_mut(&Peer::ClientLock)
        .expect("in the fixture") = WaiterFigures {
        error: Some("the child exited with status 1".into()),
        ..WaiterFigures::default()
    };
    let fresh = round
        .fresh
        .get_mut(&Peer::ZkRecipes)
        .expect("in the fixture");
    fresh.relock_age_max_s = 11.5;
    let client = round
        .fresh
        .get_mut(&Peer::ClientLock)
        .expect("in the fixture");
    client.side = SideBySide {
        error: Some("set_data: connection loss".into()),
        ..SideBySide::default()
    };
    let keyed = KeyedOnce {
        server: Some(SERVER.into()),
        left: Some(left(200)),
        memory: Some(MemoryFigures {
            keys: 5000,
            error: Some("the child printed no RESULT".into()),
            ..MemoryFigures::default()
        }),
    };
    let mut report = report(args, rust, vec![round], keyed);
    report.curator_version = None;
    report.curator_skipped = Some("skipped (--no-java)".into());
    report
}
