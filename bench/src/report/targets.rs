//! The targets as data: what each compares, its rule and the issue it comes from; and their
//! verdicts on a run, on the medians over the rounds.

use crate::args::{Peer, Workload};
use crate::keys::{LeftFigures, MemoryFigures};
use crate::stats::{median, ratio};

use super::metrics::{
    Figure, Metric, ACQUIRE_P50, CYCLES, FORGOTTEN_P50, FRESH_P50, HANDOFF_P50, HANDOVER_P50,
    SIDE_RELOCK, SIDE_WRITE, WRITE,
};
use super::once::{LEFT_SPACE, MEMORY_GROWTH};
use super::{thousands, Report};

/// How a target's figure must compare with its bound.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    AtLeast(f64),
    AtMost(f64),
    Below(f64),
}

impl Rule {
    pub fn bound(self) -> f64 {
        match self {
            Rule::AtLeast(b) | Rule::AtMost(b) | Rule::Below(b) => b,
        }
    }

    pub fn met(self, v: f64) -> bool {
        match self {
            Rule::AtLeast(b) => v >= b,
            Rule::AtMost(b) => v <= b,
            Rule::Below(b) => v < b,
        }
    }

    fn sign(self) -> &'static str {
        match self {
            Rule::AtLeast(_) => ">=",
            Rule::AtMost(_) => "<=",
            Rule::Below(_) => "<",
        }
    }
}

/// What a target judges.
pub enum On {
    /// `num / den`: the ratio of their medians over the rounds (each round's own ratio for the
    /// spread).
    Ratio { num: Figure, den: Figure },
    /// A figure of `keys-left`, measured once per run, in `unit`.
    Left(fn(&LeftFigures) -> Option<f64>, &'static str),
    /// A figure of `keys-memory`, measured once per run, in `unit`.
    Memory(fn(&MemoryFigures) -> Option<f64>, &'static str),
}

pub struct Target {
    /// Its name (`{keys}`: `--keys`, with thousands separators).
    pub name: &'static str,
    pub on: On,
    pub rule: Rule,
    /// The issues that set it (the first asked for it; a later one restated it).
    pub issues: &'static [u32],
}

const fn ours_vs(w: Workload, num: &'static Metric, den: Figure) -> On {
    On::Ratio {
        num: Figure::ours(w, num),
        den,
    }
}

/// The targets, in the report's order.
pub const TARGETS: &[Target] = &[
    Target {
        // Issue #7 asked 1.8x in one run; #13 judged it on the medians of rounds, at 2.0x.
        name: "8 contenders: cycles/s vs Curator",
        on: ours_vs(
            Workload::Contended8,
            &CYCLES,
            Figure::of(Peer::Curator, Workload::Contended8, &CYCLES),
        ),
        rule: Rule::AtLeast(2.0),
        issues: &[7, 13],
    },
    Target {
        name: "8 contenders: cycles/s vs Client::lock",
        on: ours_vs(
            Workload::Contended8,
            &CYCLES,
            Figure::of(Peer::ClientLock, Workload::Contended8, &CYCLES),
        ),
        rule: Rule::AtLeast(1.25),
        issues: &[7],
    },
    Target {
        name: "uncontended acquire p50 vs one write",
        on: ours_vs(Workload::Uncontended, &ACQUIRE_P50, WRITE),
        rule: Rule::AtMost(1.3),
        issues: &[7],
    },
    Target {
        name: "handoff p50 vs one write",
        on: ours_vs(Workload::Contended8, &HANDOFF_P50, WRITE),
        rule: Rule::AtMost(1.5),
        issues: &[7],
    },
    Target {
        name: "leader handover p50 vs one write",
        on: ours_vs(Workload::Handover, &HANDOVER_P50, WRITE),
        rule: Rule::AtMost(2.0),
        issues: &[13],
    },
    Target {
        name: "fresh key acquire p50 vs one write",
        on: ours_vs(Workload::FreshKeys, &FRESH_P50, WRITE),
        rule: Rule::AtMost(1.5),
        issues: &[14],
    },
    Target {
        name: "forgotten key acquire p50 vs one write",
        on: ours_vs(Workload::FreshKeys, &FORGOTTEN_P50, WRITE),
        rule: Rule::AtMost(1.3),
        issues: &[27],
    },
    Target {
        // Side by side: the relock and the write taken in turn on one connection, so that both
        // are of the same moments (the floor's write is of the start of the round).
        name: "relock p50 vs one write (side by side)",
        on: ours_vs(
            Workload::FreshKeys,
            &SIDE_RELOCK,
            Figure::ours(Workload::FreshKeys, &SIDE_WRITE),
        ),
        rule: Rule::AtMost(1.1),
        issues: &[14],
    },
    Target {
        name: "64 keys x 4: cycles/s vs 64 ZkMutex roots",
        on: ours_vs(
            Workload::Keys64x4,
            &CYCLES,
            Figure::ours(Workload::Locks64x4, &CYCLES),
        ),
        rule: Rule::AtLeast(0.9),
        issues: &[14],
    },
    Target {
        name: "64 keys x 4: cycles/s vs Client::lock",
        on: ours_vs(
            Workload::Keys64x4,
            &CYCLES,
            Figure::of(Peer::ClientLock, Workload::Keys64x4, &CYCLES),
        ),
        rule: Rule::AtLeast(1.0),
        issues: &[14],
    },
    Target {
        name: "znodes left per key after the reaper ran",
        on: On::Left(LEFT_SPACE, "znodes"),
        rule: Rule::AtMost(0.0),
        issues: &[14],
    },
    Target {
        name: "RSS after {keys} keys minus after 1,000",
        on: On::Memory(MEMORY_GROWTH, "MiB"),
        rule: Rule::Below(2.0),
        issues: &[14],
    },
];

/// A target judged on one run.
pub struct Verdict {
    pub target: &'static Target,
    pub name: String,
    /// The ratio of the medians, or the once-per-run figure.
    pub value: Option<f64>,
    /// Each round's own ratio (empty for a figure of the whole run).
    pub per_round: Vec<Option<f64>>,
}

impl Verdict {
    /// `None`: not measured.
    pub fn met(&self) -> Option<bool> {
        self.value.map(|v| self.target.rule.met(v))
    }

    /// The figure's unit (`None`: a ratio).
    pub fn unit(&self) -> Option<&'static str> {
        match self.target.on {
            On::Ratio { .. } => None,
            On::Left(_, unit) | On::Memory(_, unit) => Some(unit),
        }
    }

    /// A ratio or figure as the report shows it.
    pub fn show(&self, v: f64) -> String {
        match self.unit() {
            None => format!("{v:.2}x"),
            Some(unit) => format!("{v:.2} {unit}"),
        }
    }

    pub fn wanted(&self) -> String {
        let rule = self.target.rule;
        format!("{} {}", rule.sign(), self.show(rule.bound()))
    }
}

impl Report {
    /// Every target's verdict on this run.
    pub fn verdicts(&self) -> Vec<Verdict> {
        TARGETS
            .iter()
            .map(|target| {
                let (value, per_round) = match &target.on {
                    On::Ratio { num, den } => {
                        let medians = ratio(
                            median(self.rounds.iter().map(|r| num.in_round(r))),
                            median(self.rounds.iter().map(|r| den.in_round(r))),
                        );
                        let rounds = self
                            .rounds
                            .iter()
                            .map(|r| ratio(num.in_round(r), den.in_round(r)))
                            .collect();
                        (medians, rounds)
                    }
                    On::Left(get, _) => (self.left().and_then(get), Vec::new()),
                    On::Memory(get, _) => (self.memory().and_then(get), Vec::new()),
                };
                Verdict {
                    target,
                    name: target.name.replace("{keys}", &thousands(self.args.keys)),
                    value,
                    per_round,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ratio_reads_its_own_windows_and_names_an_issue() {
        for t in TARGETS {
            assert!(!t.issues.is_empty(), "{}", t.name);
            if let On::Ratio { num, den } = &t.on {
                for f in [num, den] {
                    assert!(f.metric.of.fits(f.workload), "{}: {}", t.name, f.metric.key);
                }
            }
        }
    }
}
