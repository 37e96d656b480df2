//! The text renderer: the header, the floor, the table (walking `sections::SECTIONS` and the
//! once-per-run sections), the ratio lines (`lines::LINES`), the notes, and the targets'
//! verdicts (`targets::TARGETS`).

use std::fmt::Write as _;

use crate::args::Peer;

use super::lines::LINES;
use super::metrics::{Figure, Metric, FLOOR};
use super::once::{OnceSection, LEFT, MEMORY};
use super::sections::{Section, SECTIONS};
use super::Report;

/// The table's column widths: the workload's label, a library's cell (the metric's column is
/// as wide as its longest label, `metric_width`).
const LABEL: usize = 22;
const CELL: usize = 20;

/// Where the floor's line wraps.
const FLOOR_WIDTH: usize = 100;

impl Report {
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "zk-recipes lock benchmark, {} | {} ({} cores) | ZooKeeper {} | load avg {:.2} -> {:.2}",
            self.date, self.machine, self.cores, self.zookeeper, self.load_start, self.load_end
        );
        let _ = writeln!(
            t,
            "{} round(s); in each, every workload's window ({:.1} s after {:.1} s warm-up) \
             for every library in turn, who goes first rotating per round; each figure is \
             median [min-max] over the rounds; latencies in ms; client CPU in ms per 1,000 cycles",
            self.rounds.len(),
            self.args.measure.as_secs_f64(),
            self.args.warmup.as_secs_f64()
        );
        let _ = writeln!(t);
        self.floor_lines(&mut t);
        let _ = writeln!(t);

        let metric = metric_width();
        let _ = write!(t, "{:<LABEL$} {:<metric$}", "workload", "metric");
        for peer in Peer::ALL {
            let _ = write!(t, " {:>CELL$}", peer.title());
        }
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "{}",
            "-".repeat(LABEL + 1 + metric + (CELL + 1) * Peer::ALL.len())
        );
        for section in SECTIONS {
            if self.args.runs_workload(section.workload) {
                let label = (section.label)(&self.args);
                for (i, metric) in section.metrics.iter().enumerate() {
                    let cells = Peer::ALL.map(|peer| self.cell(section, metric, peer));
                    row(
                        &mut t,
                        if i == 0 { &label } else { "" },
                        metric.label,
                        cells,
                    );
                }
            }
        }
        if let Some(left) = &self.keyed.left {
            once_rows(&mut t, &LEFT, left);
        }
        if let Some(memory) = &self.keyed.memory {
            once_rows(&mut t, &MEMORY, memory);
        }
        let _ = writeln!(t);

        let lines = LINES
            .iter()
            .filter(|l| l.when.is_none_or(|w| self.args.runs_workload(w)))
            .map(|l| self.line(l));
        let notes = self.keyed_notes().into_iter().chain(self.census_notes());
        for line in lines.chain(notes) {
            let _ = writeln!(t, "{line}");
        }
        let _ = writeln!(t, "{}", self.curator_note());
        for p in self.problems() {
            let _ = writeln!(t, "PROBLEM: {p}");
        }
        let _ = writeln!(t);
        self.target_lines(&mut t);
        t
    }

    /// The floor's figures, `label value` joined by ` | `, wrapped.
    fn floor_lines(&self, t: &mut String) {
        let _ = writeln!(
            t,
            "server floor (raw client, one request at a time, at the start of each round):"
        );
        let mut line = String::new();
        for m in FLOOR {
            let value = self
                .spread(&Figure::floor(m))
                .map_or("-".into(), |s| m.unit.spread(&s));
            let item = format!("{} {value}", m.label);
            if !line.is_empty() && line.len() + item.len() > FLOOR_WIDTH {
                let _ = writeln!(t, "  {line}");
                line.clear();
            }
            if !line.is_empty() {
                line.push_str(" | ");
            }
            line.push_str(&item);
        }
        let _ = writeln!(t, "  {line}");
    }

    /// A cell of the table: the median and spread, or why there is none.
    fn cell(&self, section: &Section, metric: &'static Metric, peer: Peer) -> String {
        if let Some(why) = section.absent(metric, peer) {
            return why.into();
        }
        let figure = section.figure(peer, metric);
        match self.spread(&figure) {
            Some(s) => metric.unit.spread(&s),
            None if !self.measured(peer) => "n/a".into(),
            None if self.rounds.iter().any(|r| r.failed(peer, section.workload)) => "error".into(),
            None => "-".into(),
        }
    }

    fn target_lines(&self, t: &mut String) {
        let _ = writeln!(
            t,
            "targets (ratio of the medians over {} round(s); each round's own ratio in brackets):",
            self.rounds.len()
        );
        let rows: Vec<[String; 6]> = self
            .verdicts()
            .into_iter()
            .map(|v| {
                let verdict = match v.met() {
                    Some(true) => "met",
                    Some(false) => "MISSED",
                    None => "not measured",
                };
                let rounds = match v.unit() {
                    None => {
                        let rounds: Vec<String> = v
                            .per_round
                            .iter()
                            .map(|r| r.map_or("-".into(), |r| format!("{r:.2}")))
                            .collect();
                        format!("[{}]", rounds.join(" "))
                    }
                    Some(_) => "(once per run)".to_owned(),
                };
                let issues: Vec<String> = v.target.issues.iter().map(|i| format!("#{i}")).collect();
                [
                    v.name.clone(),
                    v.value.map_or("-".into(), |r| v.show(r)),
                    rounds,
                    format!("wanted {}", v.wanted()),
                    verdict.to_owned(),
                    format!("({})", issues.join(", ")),
                ]
            })
            .collect();
        let width = |c: usize| rows.iter().map(|r| r[c].len()).max().unwrap_or(0);
        let (name, value, rounds, wanted, verdict) = (
            width(0).max(44),
            width(1).max(7),
            width(2),
            width(3),
            width(4),
        );
        for [n, v, r, w, m, i] in &rows {
            let _ = writeln!(
                t,
                "  {n:<name$} {v:>value$}  {r:<rounds$}  {w:<wanted$}  {m:<verdict$}  {i}"
            );
        }
    }
}

/// The metric column's width: its longest label.
fn metric_width() -> usize {
    let sections = SECTIONS
        .iter()
        .flat_map(|s| s.metrics.iter().map(|m| m.label));
    let once = LEFT.rows.iter().map(|r| r.label);
    let once = once.chain(MEMORY.rows.iter().map(|r| r.label));
    sections.chain(once).map(str::len).max().unwrap_or(0)
}

/// A row of the table: the workload's label, the metric's, then a cell per library.
fn row(t: &mut String, label: &str, metric: &str, cells: [String; 3]) {
    let width = metric_width();
    let _ = write!(t, "{label:<LABEL$} {metric:<width$}");
    for c in cells {
        let _ = write!(t, " {c:>CELL$}");
    }
    let _ = writeln!(t);
}

/// The rows of a workload run once per run (no spread: one value each).
fn once_rows<T>(t: &mut String, section: &OnceSection<T>, figures: &T) {
    let label = (section.label)(figures);
    let failed = (section.error)(figures).is_some();
    for (i, r) in section.rows.iter().enumerate() {
        let cells = r.cells.map(|cell| match cell {
            None => "not measured".to_owned(),
            Some(_) if failed => "error".to_owned(),
            Some((get, words)) => match get(figures) {
                Some(v) if !words.is_empty() => format!("{} {words}", r.unit.fmt(v)),
                v => r.unit.opt(v),
            },
        });
        row(t, if i == 0 { &label } else { "" }, r.label, cells);
    }
}
