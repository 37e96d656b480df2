//! The report: the table, the JSON, and the targets of issue #7 judged from one run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use crate::args::Args;
use crate::curator::CuratorRun;
use crate::diagnostics::{Breakdown, RoundTrips};
use crate::floor::Floor;
use crate::measure::Latency;
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
    pub floor: Floor,
    pub rust: BTreeMap<&'static str, LibRun>,
    pub round_trips: RoundTrips,
    pub curator: CuratorRun,
}

/// The figures of a library that was not run.
fn not_run() -> &'static LibRun {
    static NOT_RUN: OnceLock<LibRun> = OnceLock::new();
    NOT_RUN.get_or_init(LibRun::default)
}

/// A Rust library's figures.
#[derive(Default)]
pub struct LibRun {
    pub uncontended: Figures,
    pub contended: Figures,
    pub grid: Figures,
    pub waiters: WaiterFigures,
}

/// A target and whether this run met it.
struct Target {
    name: &'static str,
    wanted: String,
    ratio: Option<f64>,
    met: Option<bool>,
}

impl Report {
    /// One write round trip: the floor's `set_data` p50 (µs).
    fn write_rtt(&self) -> Option<f64> {
        Latency::of(self.floor.set_data.clone()).p50
    }

    fn ours(&self) -> &LibRun {
        self.rust.get("zk-recipes").unwrap_or(not_run())
    }

    fn client_lock(&self) -> &LibRun {
        self.rust.get("client-lock").unwrap_or(not_run())
    }

    fn curator(&self, workload: &str) -> Option<&Figures> {
        self.curator.workloads.get(workload)
    }

    fn targets(&self) -> Vec<Target> {
        let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let ours8 = self.ours().contended.cycles_per_s();
        let vs_curator = div(
            ours8,
            self.curator("contended8").and_then(Figures::cycles_per_s),
        );
        let vs_client = div(ours8, self.client_lock().contended.cycles_per_s());
        let acquire = div(self.ours().uncontended.acquire.p50, self.write_rtt());
        let handoff = div(self.ours().contended.handoff.p50, self.write_rtt());
        vec![
            Target {
                name: "8 contenders: cycles/s vs Curator",
                wanted: ">= 1.80x".into(),
                ratio: vs_curator,
                met: vs_curator.map(|r| r >= 1.8),
            },
            Target {
                name: "8 contenders: cycles/s vs Client::lock",
                wanted: ">= 1.25x".into(),
                ratio: vs_client,
                met: vs_client.map(|r| r >= 1.25),
            },
            Target {
                name: "uncontended acquire p50 vs one write",
                wanted: "<= 1.30x".into(),
                ratio: acquire,
                met: acquire.map(|r| r <= 1.3),
            },
            Target {
                name: "handoff p50 vs one write",
                wanted: "<= 1.50x".into(),
                ratio: handoff,
                met: handoff.map(|r| r <= 1.5),
            },
        ]
    }

    pub fn table(&self) -> String {
        let mut t = String::new();
        let (ms, num, dec) = (fmt_ms, fmt_num, fmt_dec);
        let curator_note = self.curator.skipped.clone();
        let cur = |w: &str, f: &fn(&Figures) -> String| -> String {
            match (&curator_note, self.curator(w)) {
                (Some(_), _) => "n/a".into(),
                (None, Some(fig)) if fig.error.is_some() => "error".into(),
                (None, Some(fig)) => f(fig),
                (None, None) => "-".into(),
            }
        };
        let floor_set = Latency::of(self.floor.set_data.clone());
        let floor_create = Latency::of(self.floor.create.clone());
        let floor_delete = Latency::of(self.floor.delete.clone());
        let floor_cycles =
            (self.floor.seconds > 0.0).then(|| self.floor.cycles as f64 / self.floor.seconds);
        let floor_cpu =
            (self.floor.cycles > 0).then(|| self.floor.cpu_ms * 1000.0 / self.floor.cycles as f64);
        let _ = writeln!(
            t,
            "zk-recipes lock benchmark, {} | {} ({} cores) | ZooKeeper {} | load avg {:.2} -> {:.2}",
            self.date, self.machine, self.cores, self.zookeeper, self.load_start, self.load_end
        );
        let _ = writeln!(
            t,
            "window {:.1} s after {:.1} s warm-up per workload; latencies in ms; client CPU in ms per 1,000 cycles",
            self.args.measure.as_secs_f64(),
            self.args.warmup.as_secs_f64()
        );
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "server floor (raw client, one request at a time): set_data p50 {} p99 {} | \
             get_children p50 {} | create p50 {} p99 {} | delete p50 {} | \
             create+get_children pipelined p50 {} | get_children+create pipelined p50 {} \
             ({:.0}% exact) | create+delete {} cycles/s, CPU {}",
            ms(floor_set.p50),
            ms(floor_set.p99),
            ms(Latency::of(self.floor.list.clone()).p50),
            ms(floor_create.p50),
            ms(floor_create.p99),
            ms(floor_delete.p50),
            ms(Latency::of(self.floor.create_list.clone()).p50),
            ms(Latency::of(self.floor.list_create.clone()).p50),
            100.0 * self.floor.list_create_exact as f64
                / self.floor.list_create.len().max(1) as f64,
            num(floor_cycles),
            dec(floor_cpu, 1),
        );
        let _ = writeln!(t);
        let (o, c) = (self.ours(), self.client_lock());
        // (workload label, Rust figures, Curator's workload, [(metric, how to show it)])
        type Show = fn(&Figures) -> String;
        type Pick = fn(&LibRun) -> &Figures;
        type Section<'a> = (&'a str, Pick, &'a str, Vec<(&'a str, Show)>);
        let sections: [Section<'_>; 3] = [
            (
                "uncontended",
                |r| &r.uncontended,
                "uncontended",
                vec![
                    ("cycles/s", |f| fmt_num(f.cycles_per_s())),
                    ("acquire p50", |f| fmt_ms(f.acquire.p50)),
                    ("acquire p99", |f| fmt_ms(f.acquire.p99)),
                    ("CPU/1k cycles", |f| fmt_dec(f.cpu_ms_per_1000(), 1)),
                    ("log syncs/cycle", |f| fmt_dec(f.syncs_per_cycle(), 2)),
                    ("writes/log sync", |f| fmt_dec(f.writes_per_sync(), 2)),
                ],
            ),
            (
                "8 contenders, 1 lock",
                |r| &r.contended,
                "contended8",
                vec![
                    ("cycles/s", |f| fmt_num(f.cycles_per_s())),
                    ("acquire p50", |f| fmt_ms(f.acquire.p50)),
                    ("acquire p99", |f| fmt_ms(f.acquire.p99)),
                    ("handoff p50", |f| fmt_ms(f.handoff.p50)),
                    ("handoff p99", |f| fmt_ms(f.handoff.p99)),
                    ("CPU/1k cycles", |f| fmt_dec(f.cpu_ms_per_1000(), 1)),
                    ("log syncs/cycle", |f| fmt_dec(f.syncs_per_cycle(), 2)),
                    ("writes/log sync", |f| fmt_dec(f.writes_per_sync(), 2)),
                ],
            ),
            (
                "64 locks x 4",
                |r| &r.grid,
                "locks64x4",
                vec![
                    ("cycles/s", |f| fmt_num(f.cycles_per_s())),
                    ("CPU/1k cycles", |f| fmt_dec(f.cpu_ms_per_1000(), 1)),
                    ("log syncs/cycle", |f| fmt_dec(f.syncs_per_cycle(), 2)),
                    ("writes/log sync", |f| fmt_dec(f.writes_per_sync(), 2)),
                ],
            ),
        ];
        let mut rows: Vec<(String, &str, String, String, String)> = Vec::new();
        for (label, pick, java, metrics) in &sections {
            for (i, (metric, show)) in metrics.iter().enumerate() {
                rows.push((
                    if i == 0 {
                        label.to_string()
                    } else {
                        String::new()
                    },
                    metric,
                    show(pick(o)),
                    show(pick(c)),
                    cur(java, show),
                ));
            }
        }
        let waiters = format!(
            "{} waiters, 1 lock",
            o.waiters.waiters.max(c.waiters.waiters)
        );
        let none = || "not measured".to_owned();
        rows.push((
            waiters,
            "KiB per waiter",
            fmt_dec(o.waiters.kib_per_waiter, 1),
            fmt_dec(c.waiters.kib_per_waiter, 1),
            none(),
        ));
        rows.push((
            String::new(),
            "wake-ups/release",
            fmt_dec(o.waiters.wakeups_per_release, 2),
            "not counted".into(),
            none(),
        ));
        rows.push((
            String::new(),
            "drain handoffs/s",
            fmt_num(o.waiters.drain_handoffs_per_s),
            fmt_num(c.waiters.drain_handoffs_per_s),
            none(),
        ));
        let _ = writeln!(
            t,
            "{:<22} {:<17} {:>12} {:>13} {:>13}",
            "workload", "metric", "zk-recipes", "Client::lock", "Curator"
        );
        let _ = writeln!(t, "{}", "-".repeat(81));
        for (w, m, a, b, c) in rows {
            let _ = writeln!(t, "{w:<22} {m:<17} {a:>12} {b:>13} {c:>13}");
        }
        let _ = writeln!(t);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        let cur_cps = |w: &str| self.curator(w).and_then(Figures::cycles_per_s);
        let _ = writeln!(
            t,
            "zk-recipes cycles/s ratios: uncontended {} vs Client::lock, {} vs Curator | \
             8 contenders {} vs Client::lock, {} vs Curator | 64x4 {} vs Client::lock, {} vs Curator",
            ratio(o.uncontended.cycles_per_s(), c.uncontended.cycles_per_s()),
            ratio(o.uncontended.cycles_per_s(), cur_cps("uncontended")),
            ratio(o.contended.cycles_per_s(), c.contended.cycles_per_s()),
            ratio(o.contended.cycles_per_s(), cur_cps("contended8")),
            ratio(o.grid.cycles_per_s(), c.grid.cycles_per_s()),
            ratio(o.grid.cycles_per_s(), cur_cps("locks64x4")),
        );
        let _ = writeln!(
            t,
            "vs the floor: uncontended cycles/s {} of create+delete; acquire p50 {} of set_data p50, \
             {} of create p50; handoff p50 {} of set_data p50",
            ratio(o.uncontended.cycles_per_s(), floor_cycles),
            ratio(o.uncontended.acquire.p50, floor_set.p50),
            ratio(o.uncontended.acquire.p50, floor_create.p50),
            ratio(o.contended.handoff.p50, floor_set.p50),
        );
        // The server syncs its log on one thread, one sync after another: a cycle can take no
        // less than its log syncs, each about one write round trip when nothing else waits.
        let vs_log = |f: Option<&Figures>| -> String {
            let Some(f) = f else { return "-".into() };
            match (f.cycles_per_s(), f.syncs_per_cycle(), floor_set.p50) {
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
            "8 contenders, cycle vs the server's log syncs x one write: zk-recipes {} | \
             Client::lock {} | Curator {}",
            vs_log(Some(&o.contended)),
            vs_log(Some(&c.contended)),
            vs_log(self.curator("contended8")),
        );
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
                ms(b.release_to_event),
                ms(b.event_to_relist),
                ms(b.relist_to_grant),
                ms(b.event_to_grant_direct),
                ms(b.total),
                ms(b.total_p99),
                ms(b.delete_rtt),
                b.handoffs
            )
        };
        let u = &rt.uncontended;
        let _ = writeln!(
            t,
            "ZkMutex uncontended lock() p50s: to \"enqueued\" (create+list pipelined) {}, \
             then to \"granted\" {}, then to return {}, total {} ({} acquires)",
            ms(u.to_enqueued),
            ms(u.enqueued_to_granted),
            ms(u.granted_to_return),
            ms(u.total),
            u.acquires
        );
        let _ = writeln!(
            t,
            "ZkMutex handoff p50s, 8 contenders: {}",
            split(&rt.breakdown)
        );
        if let Some(b) = &o.waiters.breakdown {
            let _ = writeln!(
                t,
                "ZkMutex handoff p50s, draining the waiters: {}",
                split(b)
            );
        }
        if let Some(why) = &curator_note {
            let _ = writeln!(t, "Curator: {why}");
        } else if let Some(v) = &self.curator.version {
            let _ = writeln!(
                t,
                "Curator {v} (Debian), InterProcessMutex, JVM process CPU"
            );
        }
        let mut problems = Vec::new();
        for (name, lib) in &self.rust {
            for (w, f) in [
                ("uncontended", &lib.uncontended),
                ("8 contenders", &lib.contended),
                ("64x4", &lib.grid),
            ] {
                if let Some(e) = &f.error {
                    problems.push(format!("{name} {w}: {e}"));
                }
                if f.violations > 0 {
                    problems.push(format!("{name} {w}: {} overlapping holders!", f.violations));
                }
            }
            if let Some(e) = &lib.waiters.error {
                problems.push(format!("{name} waiters: {e}"));
            }
        }
        for (w, f) in &self.curator.workloads {
            if let Some(e) = &f.error {
                problems.push(format!("Curator {w}: {e}"));
            }
            if f.violations > 0 {
                problems.push(format!(
                    "Curator {w}: {} overlapping holders!",
                    f.violations
                ));
            }
        }
        for p in &problems {
            let _ = writeln!(t, "PROBLEM: {p}");
        }
        let _ = writeln!(t);
        let _ = writeln!(t, "targets (ratios from this run):");
        for target in self.targets() {
            let verdict = match target.met {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured",
            };
            let _ = writeln!(
                t,
                "  {:<40} {:>9}  wanted {}  {}",
                target.name,
                target.ratio.map_or("-".into(), |r| format!("{r:.2}x")),
                target.wanted,
                verdict
            );
        }
        t
    }

    pub fn json(&self) -> Value {
        let floor = &self.floor;
        let mut results = Map::new();
        for (name, lib) in &self.rust {
            results.insert(
                name.to_string(),
                json!({
                    "uncontended": lib.uncontended.to_json(),
                    "contended8": lib.contended.to_json(),
                    "locks64x4": lib.grid.to_json(),
                    "waiters": lib.waiters,
                }),
            );
        }
        let curator = match &self.curator.skipped {
            Some(why) => json!({ "skipped": why }),
            None => {
                let mut curator = Map::new();
                curator.insert("version".into(), json!(self.curator.version));
                for (workload, figures) in &self.curator.workloads {
                    curator.insert(workload.clone(), figures.to_json());
                }
                Value::Object(curator)
            }
        };
        results.insert("curator".into(), curator);
        let targets: Map<String, Value> = self
            .targets()
            .into_iter()
            .map(|t| {
                let target = json!({ "wanted": t.wanted, "ratio": t.ratio, "met": t.met });
                (t.name.to_owned(), target)
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
            "floor": {
                "set_data": Latency::of(floor.set_data.clone()),
                "get_children": Latency::of(floor.list.clone()),
                "create_and_get_children_pipelined": Latency::of(floor.create_list.clone()),
                "get_children_and_create_pipelined": Latency::of(floor.list_create.clone()),
                "get_children_and_create_exact": floor.list_create_exact,
                "create": Latency::of(floor.create.clone()),
                "delete": Latency::of(floor.delete.clone()),
                "create_delete_cycles_per_s":
                    (floor.seconds > 0.0).then(|| floor.cycles as f64 / floor.seconds),
                "cpu_ms_per_1000_cycles":
                    (floor.cycles > 0).then(|| floor.cpu_ms * 1000.0 / floor.cycles as f64),
            },
            "results": results,
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
            },
            "targets": targets,
        })
    }
}

/// Microseconds shown as milliseconds with two decimals, `-` when missing.
fn fmt_ms(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{:.2}", v / 1000.0))
}

/// A whole number, `-` when missing.
fn fmt_num(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.0}"))
}

/// A number with `d` decimals, `-` when missing.
fn fmt_dec(v: Option<f64>, d: usize) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.d$}"))
}
