//! The report: the table and the JSON, every figure as its median over the rounds with its
//! spread, and the targets of issues #7, #13 and #14 judged on the medians.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use crate::args::{Args, Peer, Workload};
use crate::curator;
use crate::diagnostics::{Breakdown, RoundTrips};
use crate::floor::FloorFigures;
use crate::handover::HandoverFigures;
use crate::keys::{remembered, FreshFigures, KeyedOnce, LeftFigures, MemoryFigures, SideBySide};
use crate::rounds::Round;
use crate::stats::{median, ratio, Spread};
use crate::throughput::Figures;
use crate::waiters::WaiterFigures;

/// Everything one run measured.
pub struct Report {
    pub date: String,
    pub machine: String,
    pub cores: usize,
    pub zookeeper: String,
    pub load_start: f64,
    pub load_end: f64,
    pub args: Args,
    /// The Rust libraries measured.
    pub rust: Vec<Peer>,
    pub rounds: Vec<Round>,
    pub round_trips: RoundTrips,
    /// The keyed workloads run once per run (`keys-left`, `keys-memory`).
    pub keyed: KeyedOnce,
    /// Curator's version, when its peer ran.
    pub curator_version: Option<String>,
    /// Why the Curator peer did not run.
    pub curator_skipped: Option<String>,
}

/// Writes a row of the table: the workload's label, the metric's, then a cell per column.
type Row = dyn Fn(&mut String, &str, &str, Vec<String>);

/// How a figure is shown.
#[derive(Clone, Copy)]
enum Show {
    /// Microseconds as milliseconds with two decimals.
    Ms,
    /// A whole number.
    Whole,
    /// A number with this many decimals.
    Dec(usize),
}

impl Show {
    fn fmt(self, v: f64) -> String {
        match self {
            Show::Ms => format!("{:.2}", v / 1000.0),
            Show::Whole => format!("{v:.0}"),
            Show::Dec(d) => format!("{v:.d$}"),
        }
    }

    fn opt(self, v: Option<f64>) -> String {
        v.map_or("-".to_owned(), |v| self.fmt(v))
    }

    /// `median [min-max]`, or the one value of a single round.
    fn spread(self, s: &Spread) -> String {
        if s.rounds == 1 {
            self.fmt(s.median)
        } else {
            format!(
                "{} [{}-{}]",
                self.fmt(s.median),
                self.fmt(s.min),
                self.fmt(s.max)
            )
        }
    }
}

/// One figure of a kind of result: its JSON key, its label in the table, how to take it and
/// how to show it.
struct Metric<T> {
    key: &'static str,
    label: &'static str,
    get: fn(&T) -> Option<f64>,
    show: Show,
}

const CYCLES: Metric<Figures> = Metric {
    key: "cycles_per_s",
    label: "cycles/s",
    get: Figures::cycles_per_s,
    show: Show::Whole,
};
const ACQUIRE_P50: Metric<Figures> = Metric {
    key: "acquire_p50_us",
    label: "acquire p50",
    get: |f| f.acquire.p50,
    show: Show::Ms,
};
const ACQUIRE_P99: Metric<Figures> = Metric {
    key: "acquire_p99_us",
    label: "acquire p99",
    get: |f| f.acquire.p99,
    show: Show::Ms,
};
const HANDOFF_P50: Metric<Figures> = Metric {
    key: "handoff_p50_us",
    label: "handoff p50",
    get: |f| f.handoff.p50,
    show: Show::Ms,
};
const HANDOFF_P99: Metric<Figures> = Metric {
    key: "handoff_p99_us",
    label: "handoff p99",
    get: |f| f.handoff.p99,
    show: Show::Ms,
};
const CPU: Metric<Figures> = Metric {
    key: "cpu_ms_per_1000_cycles",
    label: "CPU/1k cycles",
    get: Figures::cpu_ms_per_1000,
    show: Show::Dec(1),
};
const SYNCS: Metric<Figures> = Metric {
    key: "server_log_syncs_per_cycle",
    label: "log syncs/cycle",
    get: Figures::syncs_per_cycle,
    show: Show::Dec(2),
};
const WRITES_PER_SYNC: Metric<Figures> = Metric {
    key: "server_writes_per_log_sync",
    label: "writes/log sync",
    get: Figures::writes_per_sync,
    show: Show::Dec(2),
};

/// The lock workloads: their label in the table and their figures.
fn lock_sections() -> [(Workload, &'static str, Vec<Metric<Figures>>); 4] {
    [
        (
            Workload::Uncontended,
            "uncontended",
            vec![
                CYCLES,
                ACQUIRE_P50,
                ACQUIRE_P99,
                CPU,
                SYNCS,
                WRITES_PER_SYNC,
            ],
        ),
        (
            Workload::Contended8,
            "8 contenders, 1 lock",
            vec![
                CYCLES,
                ACQUIRE_P50,
                ACQUIRE_P99,
                HANDOFF_P50,
                HANDOFF_P99,
                CPU,
                SYNCS,
                WRITES_PER_SYNC,
            ],
        ),
        (
            Workload::Locks64x4,
            "64 locks x 4",
            vec![CYCLES, CPU, SYNCS, WRITES_PER_SYNC],
        ),
        (
            Workload::Keys64x4,
            "64 keys x 4",
            vec![CYCLES, CPU, SYNCS, WRITES_PER_SYNC],
        ),
    ]
}

const FRESH_P50: Metric<FreshFigures> = Metric {
    key: "fresh_acquire_p50_us",
    label: "fresh acquire p50",
    get: |f| f.fresh.p50,
    show: Show::Ms,
};
const RELOCK_P50: Metric<FreshFigures> = Metric {
    key: "relock_acquire_p50_us",
    label: "relock acquire p50",
    get: |f| f.relock.p50,
    show: Show::Ms,
};

fn fresh_metrics() -> [Metric<FreshFigures>; 10] {
    [
        FRESH_P50,
        Metric {
            key: "fresh_acquire_p99_us",
            label: "fresh acquire p99",
            get: |f| f.fresh.p99,
            show: Show::Ms,
        },
        Metric {
            key: "fresh_cycles_per_s",
            label: "fresh cycles/s",
            get: |f| f.fresh_cycles_per_s,
            show: Show::Whole,
        },
        Metric {
            key: "fresh_server_writes_per_cycle",
            label: "fresh writes/cyc",
            get: FreshFigures::fresh_writes_per_cycle,
            show: Show::Dec(2),
        },
        Metric {
            key: "fresh_server_log_syncs_per_cycle",
            label: "fresh syncs/cyc",
            get: FreshFigures::fresh_syncs_per_cycle,
            show: Show::Dec(2),
        },
        RELOCK_P50,
        Metric {
            key: "relock_acquire_p99_us",
            label: "relock acquire p99",
            get: |f| f.relock.p99,
            show: Show::Ms,
        },
        Metric {
            key: "relock_cycles_per_s",
            label: "relock cycles/s",
            get: |f| f.relock_cycles_per_s,
            show: Show::Whole,
        },
        Metric {
            key: "relock_server_writes_per_cycle",
            label: "relock writes/cyc",
            get: FreshFigures::relock_writes_per_cycle,
            show: Show::Dec(2),
        },
        Metric {
            key: "relock_server_log_syncs_per_cycle",
            label: "relock syncs/cyc",
            get: FreshFigures::relock_syncs_per_cycle,
            show: Show::Dec(2),
        },
    ]
}

const HANDOVER_P50: Metric<HandoverFigures> = Metric {
    key: "handover_p50_us",
    label: "handover p50",
    get: |h| h.handover.p50,
    show: Show::Ms,
};

fn handover_metrics() -> [Metric<HandoverFigures>; 2] {
    [
        HANDOVER_P50,
        Metric {
            key: "handover_p99_us",
            label: "handover p99",
            get: |h| h.handover.p99,
            show: Show::Ms,
        },
    ]
}

fn waiter_metrics() -> [Metric<WaiterFigures>; 3] {
    [
        Metric {
            key: "kib_per_waiter",
            label: "KiB per waiter",
            get: |w| w.kib_per_waiter,
            show: Show::Dec(1),
        },
        Metric {
            key: "wakeups_per_release",
            label: "wake-ups/release",
            get: |w| w.wakeups_per_release,
            show: Show::Dec(2),
        },
        Metric {
            key: "drain_handoffs_per_s",
            label: "drain handoffs/s",
            get: |w| w.drain_handoffs_per_s,
            show: Show::Whole,
        },
    ]
}

const SET_DATA_P50: Metric<FloorFigures> = Metric {
    key: "set_data_p50_us",
    label: "set_data p50",
    get: |f| f.set_data_p50_us,
    show: Show::Ms,
};

fn floor_metrics() -> [Metric<FloorFigures>; 11] {
    [
        SET_DATA_P50,
        Metric {
            key: "set_data_p99_us",
            label: "set_data p99",
            get: |f| f.set_data_p99_us,
            show: Show::Ms,
        },
        Metric {
            key: "get_children_p50_us",
            label: "get_children p50",
            get: |f| f.get_children_p50_us,
            show: Show::Ms,
        },
        Metric {
            key: "create_p50_us",
            label: "create p50",
            get: |f| f.create_p50_us,
            show: Show::Ms,
        },
        Metric {
            key: "create_p99_us",
            label: "create p99",
            get: |f| f.create_p99_us,
            show: Show::Ms,
        },
        Metric {
            key: "delete_p50_us",
            label: "delete p50",
            get: |f| f.delete_p50_us,
            show: Show::Ms,
        },
        Metric {
            key: "create_and_get_children_pipelined_p50_us",
            label: "create+get_children pipelined p50",
            get: |f| f.create_and_get_children_pipelined_p50_us,
            show: Show::Ms,
        },
        Metric {
            key: "get_children_and_create_pipelined_p50_us",
            label: "get_children+create pipelined p50",
            get: |f| f.get_children_and_create_pipelined_p50_us,
            show: Show::Ms,
        },
        Metric {
            key: "get_children_and_create_exact_pct",
            label: "% of those exact",
            get: |f| f.get_children_and_create_exact_pct,
            show: Show::Whole,
        },
        Metric {
            key: "create_delete_cycles_per_s",
            label: "create+delete cycles/s",
            get: |f| f.create_delete_cycles_per_s,
            show: Show::Whole,
        },
        Metric {
            key: "cpu_ms_per_1000_cycles",
            label: "create+delete CPU/1k cycles",
            get: |f| f.cpu_ms_per_1000_cycles,
            show: Show::Dec(1),
        },
    ]
}

/// How a target compares its figure with its bound.
#[derive(Clone, Copy)]
enum Cmp {
    AtLeast,
    AtMost,
    Below,
}

/// A target: a ratio of two figures, judged on the ratio of their medians over the rounds; or
/// (with a unit) a figure measured once per run, judged on itself.
struct Target {
    name: String,
    cmp: Cmp,
    bound: f64,
    /// `None`: a ratio (`x`); else the figure's unit.
    unit: Option<&'static str>,
    /// The ratio of the medians (or the figure).
    ratio: Option<f64>,
    /// Each round's own ratio, for the spread (empty for a figure of the whole run).
    per_round: Vec<Option<f64>>,
}

impl Target {
    fn wanted(&self) -> String {
        let cmp = match self.cmp {
            Cmp::AtLeast => ">=",
            Cmp::AtMost => "<=",
            Cmp::Below => "<",
        };
        format!("{cmp} {}", self.value(self.bound))
    }

    /// A ratio or figure as the table shows it.
    fn value(&self, v: f64) -> String {
        match self.unit {
            None => format!("{v:.2}x"),
            Some(unit) => format!("{v:.2} {unit}"),
        }
    }

    fn met(&self) -> Option<bool> {
        self.ratio.map(|r| match self.cmp {
            Cmp::AtLeast => r >= self.bound,
            Cmp::AtMost => r <= self.bound,
            Cmp::Below => r < self.bound,
        })
    }
}

impl Round {
    /// A lock window's figures, unless it failed.
    pub fn lock(&self, peer: Peer, workload: Workload) -> Option<&Figures> {
        self.locks
            .get(&(peer, workload))
            .filter(|f| f.error.is_none())
    }

    /// A fresh-keys window's figures, unless it failed.
    pub fn fresh(&self, peer: Peer) -> Option<&FreshFigures> {
        self.fresh.get(&peer).filter(|f| f.error.is_none())
    }

    /// A handover window's figures, unless it failed.
    pub fn handover(&self, peer: Peer) -> Option<&HandoverFigures> {
        self.handover.get(&peer).filter(|h| h.error.is_none())
    }

    /// One write round trip of this round: its floor's `set_data` p50 (µs).
    fn write_rtt(&self) -> Option<f64> {
        self.floor.figures().set_data_p50_us
    }
}

impl Report {
    /// The spread of a lock workload's figure over the rounds.
    fn lock_spread(&self, peer: Peer, w: Workload, m: &Metric<Figures>) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(|r| r.lock(peer, w).and_then(m.get)))
    }

    fn lock_median(&self, peer: Peer, w: Workload, m: &Metric<Figures>) -> Option<f64> {
        self.lock_spread(peer, w, m).map(|s| s.median)
    }

    fn waiter_spread(&self, peer: Peer, m: &Metric<WaiterFigures>) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(|r| {
            r.waiters
                .get(&peer)
                .filter(|w| w.error.is_none())
                .and_then(m.get)
        }))
    }

    fn fresh_spread(&self, peer: Peer, m: &Metric<FreshFigures>) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(|r| r.fresh(peer).and_then(m.get)))
    }

    /// `keys-left`'s figures, unless it failed.
    fn left(&self) -> Option<&LeftFigures> {
        self.keyed.left.as_ref().filter(|l| l.error.is_none())
    }

    /// `keys-memory`'s figures, unless it failed.
    fn memory(&self) -> Option<&MemoryFigures> {
        self.keyed.memory.as_ref().filter(|m| m.error.is_none())
    }

    fn handover_spread(&self, peer: Peer, m: &Metric<HandoverFigures>) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(|r| r.handover(peer).and_then(m.get)))
    }

    fn floor_spread(&self, m: &Metric<FloorFigures>) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(|r| (m.get)(&r.floor.figures())))
    }

    /// One write round trip: the median over the rounds of the floor's `set_data` p50 (µs).
    fn write_rtt(&self) -> Option<f64> {
        self.floor_spread(&SET_DATA_P50).map(|s| s.median)
    }

    /// A target on `num / den`, each taken from every round.
    fn target(
        &self,
        name: &str,
        at_least: bool,
        bound: f64,
        num: impl Fn(&Round) -> Option<f64>,
        den: impl Fn(&Round) -> Option<f64>,
    ) -> Target {
        Target {
            name: name.to_owned(),
            cmp: if at_least { Cmp::AtLeast } else { Cmp::AtMost },
            bound,
            unit: None,
            ratio: ratio(
                median(self.rounds.iter().map(&num)),
                median(self.rounds.iter().map(&den)),
            ),
            per_round: self.rounds.iter().map(|r| ratio(num(r), den(r))).collect(),
        }
    }

    fn targets(&self) -> Vec<Target> {
        let ours = |w: Workload, m: Metric<Figures>| {
            move |r: &Round| r.lock(Peer::ZkRecipes, w).and_then(m.get)
        };
        let peer = |p: Peer, w: Workload, m: Metric<Figures>| {
            move |r: &Round| r.lock(p, w).and_then(m.get)
        };
        let write = |r: &Round| r.write_rtt();
        vec![
            self.target(
                "8 contenders: cycles/s vs Curator",
                true,
                2.0,
                ours(Workload::Contended8, CYCLES),
                peer(Peer::Curator, Workload::Contended8, CYCLES),
            ),
            self.target(
                "8 contenders: cycles/s vs Client::lock",
                true,
                1.25,
                ours(Workload::Contended8, CYCLES),
                peer(Peer::ClientLock, Workload::Contended8, CYCLES),
            ),
            self.target(
                "uncontended acquire p50 vs one write",
                false,
                1.3,
                ours(Workload::Uncontended, ACQUIRE_P50),
                write,
            ),
            self.target(
                "handoff p50 vs one write",
                false,
                1.5,
                ours(Workload::Contended8, HANDOFF_P50),
                write,
            ),
            self.target(
                "leader handover p50 vs one write",
                false,
                2.0,
                |r: &Round| r.handover(Peer::ZkRecipes).and_then(HANDOVER_P50.get),
                write,
            ),
            self.target(
                "fresh key acquire p50 vs one write",
                false,
                1.5,
                |r: &Round| r.fresh(Peer::ZkRecipes).and_then(FRESH_P50.get),
                write,
            ),
            // Side by side: the relock and the write taken in turn on one connection, so that
            // both are of the same moments (the floor's write is of the start of the round).
            self.target(
                "relock p50 vs one write (side by side)",
                false,
                1.1,
                |r: &Round| r.fresh(Peer::ZkRecipes).and_then(|f| f.side.relock.p50),
                |r: &Round| r.fresh(Peer::ZkRecipes).and_then(|f| f.side.write.p50),
            ),
            self.target(
                "64 keys x 4: cycles/s vs 64 ZkMutex roots",
                true,
                0.9,
                ours(Workload::Keys64x4, CYCLES),
                ours(Workload::Locks64x4, CYCLES),
            ),
            self.target(
                "64 keys x 4: cycles/s vs Client::lock",
                true,
                1.0,
                ours(Workload::Keys64x4, CYCLES),
                peer(Peer::ClientLock, Workload::Keys64x4, CYCLES),
            ),
            Target {
                name: "znodes left per key after the reaper ran".into(),
                cmp: Cmp::AtMost,
                bound: 0.0,
                unit: Some("znodes"),
                ratio: self
                    .left()
                    .and_then(|l| l.zk_lock_space.as_ref())
                    .map(|l| l.per_key),
                per_round: Vec::new(),
            },
            Target {
                name: format!(
                    "RSS after {} keys minus after 1,000",
                    thousands(self.args.keys)
                ),
                cmp: Cmp::Below,
                bound: 2.0,
                unit: Some("MiB"),
                ratio: self.memory().map(|m| m.growth_kib as f64 / 1024.0),
                per_round: Vec::new(),
            },
        ]
    }

    /// Whether `peer` has a column of figures in this run.
    fn measured(&self, peer: Peer) -> bool {
        match peer {
            Peer::Curator => self.curator_skipped.is_none(),
            _ => self.rust.contains(&peer),
        }
    }

    /// A cell of the table: the median and spread, or why there is none.
    fn cell(&self, peer: Peer, spread: Option<Spread>, show: Show, failed: bool) -> String {
        match spread {
            Some(s) => show.spread(&s),
            None if !self.measured(peer) => "n/a".into(),
            None if failed => "error".into(),
            None => "-".into(),
        }
    }

    pub fn table(&self) -> String {
        let mut t = String::new();
        let rounds = self.rounds.len();
        let _ = writeln!(
            t,
            "zk-recipes lock benchmark, {} | {} ({} cores) | ZooKeeper {} | load avg {:.2} -> {:.2}",
            self.date, self.machine, self.cores, self.zookeeper, self.load_start, self.load_end
        );
        let _ = writeln!(
            t,
            "{rounds} round(s); in each, every workload's window ({:.1} s after {:.1} s warm-up) \
             for every library in turn, who goes first rotating per round; each figure is \
             median [min-max] over the rounds; latencies in ms; client CPU in ms per 1,000 cycles",
            self.args.measure.as_secs_f64(),
            self.args.warmup.as_secs_f64()
        );
        let _ = writeln!(t);
        let floor: Vec<String> = floor_metrics()
            .iter()
            .map(|m| {
                let value = self
                    .floor_spread(m)
                    .map_or("-".into(), |s| m.show.spread(&s));
                format!("{} {value}", m.label)
            })
            .collect();
        let _ = writeln!(
            t,
            "server floor (raw client, one request at a time, at the start of each round):"
        );
        let mut line = String::new();
        for item in floor {
            if !line.is_empty() && line.len() + item.len() > 100 {
                let _ = writeln!(t, "  {line}");
                line.clear();
            }
            if !line.is_empty() {
                line.push_str(" | ");
            }
            line.push_str(&item);
        }
        let _ = writeln!(t, "  {line}");
        let _ = writeln!(t);

        let columns = Peer::ALL;
        let _ = write!(t, "{:<22} {:<17}", "workload", "metric");
        for peer in columns {
            let _ = write!(t, " {:>20}", peer.title());
        }
        let _ = writeln!(t);
        let _ = writeln!(t, "{}", "-".repeat(22 + 1 + 17 + 21 * columns.len()));
        let row = |t: &mut String, label: &str, metric: &str, cells: Vec<String>| {
            let _ = write!(t, "{label:<22} {metric:<17}");
            for c in cells {
                let _ = write!(t, " {c:>20}");
            }
            let _ = writeln!(t);
        };
        for (workload, label, metrics) in lock_sections() {
            if !self.args.runs_workload(workload) {
                continue;
            }
            for (i, m) in metrics.iter().enumerate() {
                let cells = columns
                    .iter()
                    .map(|&peer| {
                        if peer == Peer::Curator
                            && self.measured(peer)
                            && !curator::supports(workload)
                        {
                            return "not measured".into();
                        }
                        let failed = self.rounds.iter().any(|r| {
                            r.locks
                                .get(&(peer, workload))
                                .is_some_and(|f| f.error.is_some())
                        });
                        self.cell(peer, self.lock_spread(peer, workload, m), m.show, failed)
                    })
                    .collect();
                row(&mut t, if i == 0 { label } else { "" }, m.label, cells);
            }
        }
        if self.args.runs_workload(Workload::FreshKeys) {
            let label = format!("{} fresh keys", thousands(self.args.fresh_keys));
            for (i, m) in fresh_metrics().iter().enumerate() {
                let cells = columns
                    .iter()
                    .map(|&peer| match peer {
                        Peer::Curator if self.measured(peer) => "not measured".into(),
                        _ => {
                            let failed = self
                                .rounds
                                .iter()
                                .any(|r| r.fresh.get(&peer).is_some_and(|f| f.error.is_some()));
                            self.cell(peer, self.fresh_spread(peer, m), m.show, failed)
                        }
                    })
                    .collect();
                row(&mut t, if i == 0 { &label } else { "" }, m.label, cells);
            }
        }
        if self.args.runs_workload(Workload::Handover) {
            for (i, m) in handover_metrics().iter().enumerate() {
                let cells = columns
                    .iter()
                    .map(|&peer| match peer {
                        Peer::ClientLock => "no election".into(),
                        _ => {
                            let failed = self
                                .rounds
                                .iter()
                                .any(|r| r.handover.get(&peer).is_some_and(|h| h.error.is_some()));
                            self.cell(peer, self.handover_spread(peer, m), m.show, failed)
                        }
                    })
                    .collect();
                row(
                    &mut t,
                    if i == 0 { "leader handover" } else { "" },
                    m.label,
                    cells,
                );
            }
        }
        if self.args.runs_workload(Workload::Waiters) {
            let label = format!("{} waiters, 1 lock", self.args.waiters);
            for (i, m) in waiter_metrics().iter().enumerate() {
                let cells = columns
                    .iter()
                    .map(|&peer| match peer {
                        Peer::Curator => "not measured".into(),
                        Peer::ClientLock if m.key == "wakeups_per_release" => "not counted".into(),
                        _ => {
                            let failed = self
                                .rounds
                                .iter()
                                .any(|r| r.waiters.get(&peer).is_some_and(|w| w.error.is_some()));
                            self.cell(peer, self.waiter_spread(peer, m), m.show, failed)
                        }
                    })
                    .collect();
                row(&mut t, if i == 0 { &label } else { "" }, m.label, cells);
            }
        }
        self.keyed_rows(&mut t, &row);
        let _ = writeln!(t);
        self.lines_after_the_table(&mut t);
        t
    }

    /// The rows of the keyed workloads run once per run (`keys-left`, `keys-memory`).
    fn keyed_rows(&self, t: &mut String, row: &Row) {
        let not = || "not measured".to_owned();
        if let Some(left) = &self.keyed.left {
            let per_key = |l: &Option<crate::keys::Left>, what: &str| match (&left.error, l) {
                (Some(_), _) => "error".to_owned(),
                (None, Some(l)) => format!("{:.2} {what}", l.per_key),
                (None, None) => "-".to_owned(),
            };
            let label = format!("{} keys once, reaped", left.keys);
            row(
                t,
                &label,
                "znodes left/key",
                vec![
                    per_key(&left.zk_lock_space, "ZkLockSpace"),
                    per_key(&left.client_lock_persistent_parents, "persistent dirs"),
                    not(),
                ],
            );
            row(
                t,
                "",
                "(other layouts)",
                vec![
                    per_key(&left.zk_mutex_per_key, "ZkMutex/key"),
                    per_key(&left.client_lock_container_parents, "container dirs"),
                    not(),
                ],
            );
        }
        if let Some(memory) = &self.keyed.memory {
            let label = format!("{} keys, 1 sess.", thousands(memory.keys));
            let ours = |v: Option<f64>, show: Show| match (&memory.error, v) {
                (Some(_), _) => "error".to_owned(),
                (None, v) => show.opt(v),
            };
            let mib = |kib: i64| Some(kib as f64 / 1024.0);
            let m = self.memory();
            let rows: [(&str, Option<f64>, Show); 4] = [
                (
                    "RSS growth, MiB",
                    m.map(|m| m.growth_kib).and_then(mib),
                    Show::Dec(2),
                ),
                (
                    "RSS at 1k, MiB",
                    m.and_then(|m| mib(m.rss_first_1000_kib as i64)),
                    Show::Dec(1),
                ),
                (
                    "RSS at end, MiB",
                    m.and_then(|m| mib(m.rss_all_kib as i64)),
                    Show::Dec(1),
                ),
                ("cycles/s", m.and_then(|m| m.cycles_per_s), Show::Whole),
            ];
            for (i, (metric, v, show)) in rows.into_iter().enumerate() {
                row(
                    t,
                    if i == 0 { &label } else { "" },
                    metric,
                    vec![ours(v, show), not(), not()],
                );
            }
        }
    }

    /// The ratios, the diagnostics, the problems and the targets.
    fn lines_after_the_table(&self, t: &mut String) {
        let ms = Show::Ms;
        let x = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
        let (ours, client, curator) = (Peer::ZkRecipes, Peer::ClientLock, Peer::Curator);
        let cps = |p: Peer, w: Workload| self.lock_median(p, w, &CYCLES);
        let _ =
            writeln!(
            t,
            "zk-recipes cycles/s ratios (of the medians): uncontended {} vs Client::lock, {} vs \
             Curator | 8 contenders {} vs Client::lock, {} vs Curator | 64x4 {} vs Client::lock, \
             {} vs Curator",
            x(ratio(cps(ours, Workload::Uncontended), cps(client, Workload::Uncontended))),
            x(ratio(cps(ours, Workload::Uncontended), cps(curator, Workload::Uncontended))),
            x(ratio(cps(ours, Workload::Contended8), cps(client, Workload::Contended8))),
            x(ratio(cps(ours, Workload::Contended8), cps(curator, Workload::Contended8))),
            x(ratio(cps(ours, Workload::Locks64x4), cps(client, Workload::Locks64x4))),
            x(ratio(cps(ours, Workload::Locks64x4), cps(curator, Workload::Locks64x4))),
        );
        let floor = |key: &str| {
            floor_metrics()
                .iter()
                .find(|m| m.key == key)
                .and_then(|m| self.floor_spread(m))
                .map(|s| s.median)
        };
        let write = self.write_rtt();
        let acquire = self.lock_median(ours, Workload::Uncontended, &ACQUIRE_P50);
        let _ = writeln!(
            t,
            "vs the floor (medians): uncontended cycles/s {} of create+delete; acquire p50 {} of \
             set_data p50, {} of create p50; handoff p50 {} of set_data p50",
            x(ratio(
                cps(ours, Workload::Uncontended),
                floor("create_delete_cycles_per_s")
            )),
            x(ratio(acquire, write)),
            x(ratio(acquire, floor("create_p50_us"))),
            x(ratio(
                self.lock_median(ours, Workload::Contended8, &HANDOFF_P50),
                write
            )),
        );
        // The server syncs its log on one thread, one sync after another: a cycle can take no
        // less than its log syncs, each about one write round trip when nothing else waits.
        let vs_log = |p: Peer| -> String {
            let cps = cps(p, Workload::Contended8);
            let syncs = self.lock_median(p, Workload::Contended8, &SYNCS);
            match (cps, syncs, write) {
                (Some(cps), Some(syncs), Some(write)) if cps > 0.0 && syncs > 0.0 => {
                    let cycle_ms = 1000.0 / cps;
                    let log_ms = syncs * write / 1000.0;
                    format!(
                        "{cycle_ms:.2} ms = {:.2}x ({syncs:.2} syncs x {:.2})",
                        cycle_ms / log_ms,
                        write / 1000.0
                    )
                }
                _ => "-".into(),
            }
        };
        let _ = writeln!(
            t,
            "8 contenders, cycle vs the server's log syncs x one write (medians): zk-recipes {} | \
             Client::lock {} | Curator {}",
            vs_log(ours),
            vs_log(client),
            vs_log(curator),
        );
        self.keyed_lines(t);
        let rt = &self.round_trips;
        let _ = writeln!(
            t,
            "ZkMutex requests per grant, 8 contenders ({} grants): {:.2} create+list (pipelined), \
             {:.2} exists+watch, {:.2} wake-ups, {:.2} re-lists",
            rt.grants, rt.enqueues, rt.watches, rt.wakeups, rt.relists
        );
        let split = |b: &Breakdown| {
            format!(
                "release->watch event {}, event->re-list {}, re-list->grant {}, \
                 event->grant without re-list {}, total {} (p99 {}) \
                 (holder's delete round trip {}; {} handoffs)",
                ms.opt(b.release_to_event),
                ms.opt(b.event_to_relist),
                ms.opt(b.relist_to_grant),
                ms.opt(b.event_to_grant_direct),
                ms.opt(b.total),
                ms.opt(b.total_p99),
                ms.opt(b.delete_rtt),
                b.handoffs
            )
        };
        let u = &rt.uncontended;
        let _ = writeln!(
            t,
            "ZkMutex uncontended lock() p50s: to \"enqueued\" (create+list pipelined) {}, \
             then to \"granted\" {}, then to return {}, total {} ({} acquires)",
            ms.opt(u.to_enqueued),
            ms.opt(u.enqueued_to_granted),
            ms.opt(u.granted_to_return),
            ms.opt(u.total),
            u.acquires
        );
        let _ = writeln!(
            t,
            "ZkMutex handoff p50s, 8 contenders: {}",
            split(&rt.breakdown)
        );
        let drains: Vec<&Breakdown> = self
            .rounds
            .iter()
            .filter_map(|r| r.waiters.get(&ours)?.breakdown.as_ref())
            .collect();
        if !drains.is_empty() {
            let _ = writeln!(
                t,
                "ZkMutex handoff p50s, draining the waiters (medians over the rounds): {}",
                split(&Breakdown::median_of(&drains))
            );
        }
        let h = &rt.handover;
        let _ = writeln!(
            t,
            "LeaderElection handover p50s (census): resign->watch event {}, event->re-list {}, \
             re-list->grant {}, event->grant without re-list {}, grant->campaign returns {}, \
             total {} (p99 {}) (leader's delete round trip {}; one write {}, one read {}; {} \
             handovers)",
            ms.opt(h.resign_to_event),
            ms.opt(h.event_to_relist),
            ms.opt(h.relist_to_grant),
            ms.opt(h.event_to_grant_direct),
            ms.opt(h.grant_to_return),
            ms.opt(h.total),
            ms.opt(h.total_p99),
            ms.opt(h.delete_rtt),
            ms.opt(write),
            ms.opt(floor("get_children_p50_us")),
            h.handovers
        );
        match (&self.curator_skipped, &self.curator_version) {
            (Some(why), _) => {
                let _ = writeln!(t, "Curator: {why}");
            }
            (None, version) => {
                let _ = writeln!(
                    t,
                    "Curator {} (Debian), InterProcessMutex and LeaderLatch, JVM process CPU; \
                     one JVM for the whole run, JIT-warmed before the first round",
                    version.as_deref().unwrap_or("(version unknown)")
                );
            }
        }
        for p in self.problems() {
            let _ = writeln!(t, "PROBLEM: {p}");
        }
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "targets (ratio of the medians over {} round(s); each round's own ratio in brackets):",
            self.rounds.len()
        );
        for target in self.targets() {
            let verdict = match target.met() {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured",
            };
            let rounds: Vec<String> = target
                .per_round
                .iter()
                .map(|r| r.map_or("-".into(), |r| format!("{r:.2}")))
                .collect();
            let rounds = match target.unit {
                None => format!("[{}]", rounds.join(" ")),
                Some(_) => "(once per run)".to_owned(),
            };
            let _ = writeln!(
                t,
                "  {:<44} {:>7}  {}  wanted {}  {}",
                target.name,
                target.ratio.map_or("-".into(), |r| target.value(r)),
                rounds,
                target.wanted(),
                verdict
            );
        }
    }

    /// What the keyed figures say against one write and each other, and where the once-per-run
    /// ones ran.
    fn keyed_lines(&self, t: &mut String) {
        let x = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
        let (ours, client) = (Peer::ZkRecipes, Peer::ClientLock);
        let write = self.write_rtt();
        if self.args.runs_workload(Workload::FreshKeys) {
            let fresh = |p: Peer, m: &Metric<FreshFigures>| {
                ratio(self.fresh_spread(p, m).map(|s| s.median), write)
            };
            let age = self
                .rounds
                .iter()
                .filter_map(|r| r.fresh(ours).map(|f| f.relock_age_max_s))
                .fold(0.0, f64::max);
            let _ = writeln!(
                t,
                "fresh keys vs the round's floor write (medians): ZkLockSpace fresh {}, \
                 relocked {} | Client::lock fresh {}, relocked {} | a relock came at most \
                 {age:.1} s after the key's first lock (ZkLockSpace remembers a key for 10 s)",
                x(fresh(ours, &FRESH_P50)),
                x(fresh(ours, &RELOCK_P50)),
                x(fresh(client, &FRESH_P50)),
                x(fresh(client, &RELOCK_P50)),
            );
            // Medians over the rounds of each round's side-by-side ratio.
            let side = |p: Peer,
                        num: fn(&SideBySide) -> Option<f64>,
                        den: fn(&SideBySide) -> Option<f64>| {
                median(self.rounds.iter().map(|r| {
                    let f = r.fresh(p)?;
                    ratio(num(&f.side), den(&f.side))
                }))
            };
            let write = |s: &SideBySide| s.write.p50;
            let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2} ms", v / 1000.0));
            let _ = writeln!(
                t,
                "side by side, in turn on one connection (median of the rounds' ratios): one write \
                 {} | ZkLockSpace relock {} of the write, {} of ZkMutex's uncontended acquire | \
                 ZkMutex {} | raw create+list pipelined {} (the least for any acquire that lists \
                 after its create), list+create {} | Client::lock relock {}, its single lock {}",
                ms(median(self.rounds.iter().map(|r| r.fresh(ours).and_then(|f| f.side.write.p50)))),
                x(side(ours, |s| s.relock.p50, write)),
                x(side(ours, |s| s.relock.p50, |s| s.single.p50)),
                x(side(ours, |s| s.single.p50, write)),
                x(side(ours, |s| s.burst.p50, write)),
                x(side(ours, |s| s.list_first.p50, write)),
                x(side(client, |s| s.relock.p50, write)),
                x(side(client, |s| s.single.p50, write)),
            );
        }
        if self.args.runs_workload(Workload::Keys64x4) {
            let cps = |p: Peer, w: Workload| self.lock_median(p, w, &CYCLES);
            let _ = writeln!(
                t,
                "64 keys x 4 cycles/s (medians): ZkLockSpace {} of 64 ZkMutex roots, {} of \
                 Client::lock's keys | Client::lock's keys {} of its 64 roots",
                x(ratio(
                    cps(ours, Workload::Keys64x4),
                    cps(ours, Workload::Locks64x4)
                )),
                x(ratio(
                    cps(ours, Workload::Keys64x4),
                    cps(client, Workload::Keys64x4)
                )),
                x(ratio(
                    cps(client, Workload::Keys64x4),
                    cps(client, Workload::Locks64x4)
                )),
            );
        }
        let server = self.keyed.server.as_deref().unwrap_or("-");
        if let Some(left) = self.left() {
            let _ = writeln!(
                t,
                "keys-left (once per run, on {server}; reaper every {} ms): each layout's {} keys \
                 locked and released once, then two reaper scans awaited ({:.1} s from the last \
                 release to the count)",
                left.reaper_interval_ms
                    .map_or("?".into(), |ms| ms.to_string()),
                left.keys,
                left.waited_s
            );
        }
        if let Some(m) = self.memory() {
            let curve: Vec<String> = m
                .curve
                .iter()
                .map(|(k, kib)| format!("{} {:.1}", thousands(*k), *kib as f64 / 1024.0))
                .collect();
            let _ = writeln!(
                t,
                "keys-memory (once per run, child process, on {server}): ZkLockSpace RSS in MiB \
                 by keys done: {} ({:.0} s)",
                curve.join(", "),
                m.seconds
            );
        }
    }

    /// Failed windows and overlapping holders, round by round.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (i, round) in self.rounds.iter().enumerate() {
            for ((peer, workload), f) in &round.locks {
                let what = format!("round {}: {} {}", i + 1, peer.title(), workload.key());
                if let Some(e) = &f.error {
                    problems.push(format!("{what}: {e}"));
                }
                if f.violations > 0 {
                    problems.push(format!("{what}: {} overlapping holders!", f.violations));
                }
            }
            for (peer, w) in &round.waiters {
                if let Some(e) = &w.error {
                    problems.push(format!("round {}: {} waiters: {e}", i + 1, peer.title()));
                }
            }
            for (peer, h) in &round.handover {
                if let Some(e) = &h.error {
                    problems.push(format!("round {}: {} handover: {e}", i + 1, peer.title()));
                }
            }
            for (peer, f) in &round.fresh {
                let what = format!("round {}: {} fresh-keys", i + 1, peer.title());
                if let Some(e) = &f.error {
                    problems.push(format!("{what}: {e}"));
                } else if let Some(e) = &f.side.error {
                    problems.push(format!("{what}, side-by-side pass: {e}"));
                } else if *peer == Peer::ZkRecipes && !remembered(f.relock_age_max_s) {
                    problems.push(format!(
                        "{what}: a relock came {:.1} s after the key's first lock, past \
                         ZkLockSpace's 10 s memory (fewer --fresh-keys)",
                        f.relock_age_max_s
                    ));
                }
            }
        }
        if let Some(e) = self.keyed.left.as_ref().and_then(|l| l.error.as_ref()) {
            problems.push(format!("keys-left: {e}"));
        }
        if let Some(e) = self.keyed.memory.as_ref().and_then(|m| m.error.as_ref()) {
            problems.push(format!("keys-memory: {e}"));
        }
        problems
    }

    pub fn json(&self) -> Value {
        let mut summary = Map::new();
        let floor: Map<String, Value> = floor_metrics()
            .iter()
            .map(|m| (m.key.to_owned(), json!(self.floor_spread(m))))
            .collect();
        summary.insert("floor".into(), Value::Object(floor));
        for peer in Peer::ALL.into_iter().filter(|&p| self.measured(p)) {
            let mut workloads = Map::new();
            for (workload, _, metrics) in lock_sections() {
                if !self.args.runs_workload(workload)
                    || !self
                        .rounds
                        .iter()
                        .any(|r| r.locks.contains_key(&(peer, workload)))
                {
                    continue;
                }
                let figures: Map<String, Value> = metrics
                    .iter()
                    .map(|m| (m.key.to_owned(), json!(self.lock_spread(peer, workload, m))))
                    .collect();
                workloads.insert(workload.key().into(), Value::Object(figures));
            }
            if self.rounds.iter().any(|r| r.fresh.contains_key(&peer)) {
                let figures: Map<String, Value> = fresh_metrics()
                    .iter()
                    .map(|m| (m.key.to_owned(), json!(self.fresh_spread(peer, m))))
                    .collect();
                workloads.insert(Workload::FreshKeys.key().into(), Value::Object(figures));
            }
            if self.rounds.iter().any(|r| r.handover.contains_key(&peer)) {
                let figures: Map<String, Value> = handover_metrics()
                    .iter()
                    .map(|m| (m.key.to_owned(), json!(self.handover_spread(peer, m))))
                    .collect();
                workloads.insert(Workload::Handover.key().into(), Value::Object(figures));
            }
            if self.rounds.iter().any(|r| r.waiters.contains_key(&peer)) {
                let figures: Map<String, Value> = waiter_metrics()
                    .iter()
                    .map(|m| (m.key.to_owned(), json!(self.waiter_spread(peer, m))))
                    .collect();
                workloads.insert(Workload::Waiters.key().into(), Value::Object(figures));
            }
            summary.insert(peer.key().into(), Value::Object(workloads));
        }
        let per_round: Vec<Value> = self
            .rounds
            .iter()
            .enumerate()
            .map(|(i, round)| {
                let order: Map<String, Value> = round
                    .order
                    .iter()
                    .map(|(w, peers)| {
                        let peers: Vec<&str> = peers.iter().map(|p| p.key()).collect();
                        (w.key().to_owned(), json!(peers))
                    })
                    .collect();
                let mut results = Map::new();
                for ((peer, workload), figures) in &round.locks {
                    let entry = results
                        .entry(peer.key())
                        .or_insert_with(|| Value::Object(Map::new()));
                    entry[workload.key()] = figures.to_json();
                }
                for (peer, handover) in &round.handover {
                    let entry = results
                        .entry(peer.key())
                        .or_insert_with(|| Value::Object(Map::new()));
                    entry[Workload::Handover.key()] = json!(handover);
                }
                for (peer, waiters) in &round.waiters {
                    let entry = results
                        .entry(peer.key())
                        .or_insert_with(|| Value::Object(Map::new()));
                    entry[Workload::Waiters.key()] = json!(waiters);
                }
                for (peer, fresh) in &round.fresh {
                    let entry = results
                        .entry(peer.key())
                        .or_insert_with(|| Value::Object(Map::new()));
                    entry[Workload::FreshKeys.key()] = json!(fresh);
                }
                json!({
                    "round": i + 1,
                    "order": order,
                    "floor": round.floor.to_json(),
                    "results": results,
                })
            })
            .collect();
        let targets: Map<String, Value> = self
            .targets()
            .into_iter()
            .map(|t| {
                let spread = Spread::of(t.per_round.iter().copied());
                let target = json!({
                    "wanted": t.wanted(),
                    "ratio_of_medians": t.ratio,
                    "met": t.met(),
                    "per_round": t.per_round,
                    "per_round_min": spread.map(|s| s.min),
                    "per_round_max": spread.map(|s| s.max),
                });
                (t.name.clone(), target)
            })
            .collect();
        let rt = &self.round_trips;
        json!({
            "date": self.date,
            "machine": self.machine,
            "cores": self.cores,
            "zookeeper": self.zookeeper,
            "load_avg_start": self.load_start,
            "load_avg_end": self.load_end,
            "measure_s": self.args.measure.as_secs_f64(),
            "warmup_s": self.args.warmup.as_secs_f64(),
            "rounds": self.rounds.len(),
            "curator": {
                "version": self.curator_version,
                "skipped": self.curator_skipped,
            },
            "summary": summary,
            "keyed_once_per_run": {
                "server": self.keyed.server,
                "keys_left": self.keyed.left,
                "keys_memory": self.keyed.memory,
            },
            "per_round": per_round,
            "zk_recipes_diagnostics": {
                "requests_per_grant_8_contenders": {
                    "grants": rt.grants,
                    "create_and_list": rt.enqueues,
                    "exists_watch": rt.watches,
                    "wakeups": rt.wakeups,
                    "relists": rt.relists,
                },
                "handoff_breakdown_8_contenders": rt.breakdown,
                "uncontended_acquire_breakdown": rt.uncontended,
                "leader_handover_breakdown": rt.handover,
            },
            "targets": targets,
        })
    }
}

/// `n` with thousands separators (`100,000`).
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}

#[cfg(test)]
mod fixture;
#[cfg(test)]
mod golden;
