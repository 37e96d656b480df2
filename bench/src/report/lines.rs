//! The ratio lines under the table as data: each a sentence whose `{}` are filled, in order,
//! with figures and ratios named from the metrics table.

use crate::args::{Peer, Workload};
use crate::stats::{median, ratio};

use super::metrics::{
    Figure, Metric, ACQUIRE_P50, CREATE_DELETE_CYCLES, CREATE_P50, CYCLES, FRESH_P50, HANDOFF_P50,
    RELOCK_AGE, RELOCK_P50, SIDE_BURST, SIDE_LIST_FIRST, SIDE_RELOCK, SIDE_SINGLE, SIDE_WRITE,
    SYNCS, WRITE,
};
use super::unit::times;
use super::Report;
use Workload::{Contended8, FreshKeys, Keys64x4, Locks64x4, Uncontended};

/// What fills a `{}` of a line.
pub enum Value {
    /// The ratio of two figures' medians over the rounds (`1.23x`).
    Ratio(Figure, Figure),
    /// The median over the rounds of each round's own ratio of two figures (`1.23x`).
    RoundsRatio(Figure, Figure),
    /// A figure's median over the rounds, in milliseconds with its unit (`0.45 ms`).
    Ms(Figure),
    /// A figure's largest value over the rounds, in its metric's unit.
    Max(Figure),
    /// One library's 8-contender cycle against its log syncs times one write: the server syncs
    /// its log on one thread, one sync after another, so a cycle can take no less than its
    /// syncs, each about one write round trip when nothing else waits.
    VsLog(Peer),
}

/// A line under the table.
pub struct Line {
    /// Printed only when this workload runs (`None`: always).
    pub when: Option<Workload>,
    pub text: &'static str,
    pub values: &'static [Value],
}

const OURS: Peer = Peer::ZkRecipes;
const CLIENT: Peer = Peer::ClientLock;
const CURATOR: Peer = Peer::Curator;

const fn cps(peer: Peer, w: Workload) -> Figure {
    Figure::of(peer, w, &CYCLES)
}

const fn fresh(peer: Peer, m: &'static Metric) -> Figure {
    Figure::of(peer, FreshKeys, m)
}

/// The lines, in the report's order.
pub const LINES: &[Line] = &[
    Line {
        when: None,
        text: "zk-recipes cycles/s ratios (of the medians): uncontended {} vs Client::lock, {} vs \
               Curator | 8 contenders {} vs Client::lock, {} vs Curator | 64x4 {} vs Client::lock, \
               {} vs Curator",
        values: &[
            Value::Ratio(cps(OURS, Uncontended), cps(CLIENT, Uncontended)),
            Value::Ratio(cps(OURS, Uncontended), cps(CURATOR, Uncontended)),
            Value::Ratio(cps(OURS, Contended8), cps(CLIENT, Contended8)),
            Value::Ratio(cps(OURS, Contended8), cps(CURATOR, Contended8)),
            Value::Ratio(cps(OURS, Locks64x4), cps(CLIENT, Locks64x4)),
            Value::Ratio(cps(OURS, Locks64x4), cps(CURATOR, Locks64x4)),
        ],
    },
    Line {
        when: None,
        text:
            "vs the floor (medians): uncontended cycles/s {} of create+delete; acquire p50 {} of \
               set_data p50, {} of create p50; handoff p50 {} of set_data p50",
        values: &[
            Value::Ratio(cps(OURS, Uncontended), Figure::floor(&CREATE_DELETE_CYCLES)),
            Value::Ratio(Figure::ours(Uncontended, &ACQUIRE_P50), WRITE),
            Value::Ratio(
                Figure::ours(Uncontended, &ACQUIRE_P50),
                Figure::floor(&CREATE_P50),
            ),
            Value::Ratio(Figure::ours(Contended8, &HANDOFF_P50), WRITE),
        ],
    },
    Line {
        when: None,
        text:
            "8 contenders, cycle vs the server's log syncs x one write (medians): zk-recipes {} | \
               Client::lock {} | Curator {}",
        values: &[
            Value::VsLog(OURS),
            Value::VsLog(CLIENT),
            Value::VsLog(CURATOR),
        ],
    },
    Line {
        when: Some(FreshKeys),
        text:
            "fresh keys vs the round's floor write (medians): ZkLockSpace fresh {}, relocked {} | \
               Client::lock fresh {}, relocked {} | a relock came at most {} s after the key's \
               first lock (ZkLockSpace remembers a key for 10 s)",
        values: &[
            Value::Ratio(fresh(OURS, &FRESH_P50), WRITE),
            Value::Ratio(fresh(OURS, &RELOCK_P50), WRITE),
            Value::Ratio(fresh(CLIENT, &FRESH_P50), WRITE),
            Value::Ratio(fresh(CLIENT, &RELOCK_P50), WRITE),
            Value::Max(fresh(OURS, &RELOCK_AGE)),
        ],
    },
    Line {
        when: Some(FreshKeys),
        text:
            "side by side, in turn on one connection (median of the rounds' ratios): one write {} \
               | ZkLockSpace relock {} of the write, {} of ZkMutex's uncontended acquire | ZkMutex \
               {} | raw create+list pipelined {} (the least for any acquire that lists after its \
               create), list+create {} | Client::lock relock {}, its single lock {}",
        values: &[
            Value::Ms(fresh(OURS, &SIDE_WRITE)),
            Value::RoundsRatio(fresh(OURS, &SIDE_RELOCK), fresh(OURS, &SIDE_WRITE)),
            Value::RoundsRatio(fresh(OURS, &SIDE_RELOCK), fresh(OURS, &SIDE_SINGLE)),
            Value::RoundsRatio(fresh(OURS, &SIDE_SINGLE), fresh(OURS, &SIDE_WRITE)),
            Value::RoundsRatio(fresh(OURS, &SIDE_BURST), fresh(OURS, &SIDE_WRITE)),
            Value::RoundsRatio(fresh(OURS, &SIDE_LIST_FIRST), fresh(OURS, &SIDE_WRITE)),
            Value::RoundsRatio(fresh(CLIENT, &SIDE_RELOCK), fresh(CLIENT, &SIDE_WRITE)),
            Value::RoundsRatio(fresh(CLIENT, &SIDE_SINGLE), fresh(CLIENT, &SIDE_WRITE)),
        ],
    },
    Line {
        when: Some(Keys64x4),
        text: "64 keys x 4 cycles/s (medians): ZkLockSpace {} of 64 ZkMutex roots, {} of \
               Client::lock's keys | Client::lock's keys {} of its 64 roots",
        values: &[
            Value::Ratio(cps(OURS, Keys64x4), cps(OURS, Locks64x4)),
            Value::Ratio(cps(OURS, Keys64x4), cps(CLIENT, Keys64x4)),
            Value::Ratio(cps(CLIENT, Keys64x4), cps(CLIENT, Locks64x4)),
        ],
    },
];

impl Report {
    /// One line, its `{}` filled.
    pub fn line(&self, line: &Line) -> String {
        let mut parts = line.text.split("{}");
        let mut out = parts.next().unwrap_or_default().to_owned();
        for (value, part) in line.values.iter().zip(parts) {
            out.push_str(&self.value(value));
            out.push_str(part);
        }
        out
    }

    fn value(&self, value: &Value) -> String {
        let each = |f: &Figure| {
            self.rounds
                .iter()
                .map(|r| f.in_round(r))
                .collect::<Vec<_>>()
        };
        match value {
            Value::Ratio(num, den) => times(ratio(self.median(num), self.median(den))),
            Value::RoundsRatio(num, den) => times(median(
                each(num)
                    .into_iter()
                    .zip(each(den))
                    .map(|(n, d)| ratio(n, d)),
            )),
            Value::Ms(f) => self
                .median(f)
                .map_or("-".into(), |v| format!("{:.2} ms", v / 1000.0)),
            Value::Max(f) => f
                .metric
                .unit
                .opt(each(f).into_iter().flatten().reduce(f64::max)),
            Value::VsLog(peer) => self.vs_log(*peer),
        }
    }

    fn vs_log(&self, peer: Peer) -> String {
        let cps = self.median(&cps(peer, Contended8));
        let syncs = self.median(&Figure::of(peer, Contended8, &SYNCS));
        match (cps, syncs, self.median(&WRITE)) {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_has_a_value_per_gap_read_in_its_own_windows() {
        for line in LINES {
            let gaps = line.text.matches("{}").count();
            assert_eq!(gaps, line.values.len(), "{}", line.text);
            for value in line.values {
                let figures = match value {
                    Value::Ratio(a, b) | Value::RoundsRatio(a, b) => vec![a, b],
                    Value::Ms(a) | Value::Max(a) => vec![a],
                    Value::VsLog(_) => vec![],
                };
                for f in figures {
                    assert!(f.metric.of.fits(f.workload), "{}", f.metric.key);
                }
            }
        }
    }
}
