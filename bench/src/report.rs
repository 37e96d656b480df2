//! The report: the table and the JSON, every figure as its median over the rounds with its
//! spread, and the targets of issues #7, #13 and #14 judged on the medians.
//!
//! What is reported is data: `metrics.rs` (each metric's name, unit and how it is taken from a
//! round's window), `sections.rs` (the table: a section per workload, its metrics, the libraries
//! it leaves out), `once.rs` (the rows of the once-per-run keyed workloads), `targets.rs` (each
//! target's figures, rule and issues) and `lines.rs` (the ratio lines under the table).
//! `text.rs` and `json.rs` walk those tables; `notes.rs` writes the prose that is not a figure
//! of the rounds (the census, where the once-per-run workloads ran, the problems).

mod json;
mod lines;
mod metrics;
mod notes;
mod once;
mod sections;
mod targets;
mod text;
mod unit;

use crate::args::{Args, Peer, Workload};
use crate::diagnostics::RoundTrips;
use crate::handover::HandoverFigures;
use crate::keys::{FreshFigures, KeyedOnce, LeftFigures, MemoryFigures};
use crate::rounds::Round;
use crate::stats::Spread;
use crate::throughput::Figures;
use crate::waiters::WaiterFigures;

use metrics::Figure;

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

    /// A waiters window's figures, unless it failed.
    pub fn waiters(&self, peer: Peer) -> Option<&WaiterFigures> {
        self.waiters.get(&peer).filter(|w| w.error.is_none())
    }

    /// The window's error, when it ran: `Some(None)` ran, `Some(Some(e))` failed.
    fn outcome(&self, peer: Peer, workload: Workload) -> Option<Option<&String>> {
        match workload {
            Workload::FreshKeys => self.fresh.get(&peer).map(|f| f.error.as_ref()),
            Workload::Handover => self.handover.get(&peer).map(|h| h.error.as_ref()),
            Workload::Waiters => self.waiters.get(&peer).map(|w| w.error.as_ref()),
            Workload::KeysLeft | Workload::KeysMemory => None,
            _ => self.locks.get(&(peer, workload)).map(|f| f.error.as_ref()),
        }
    }

    /// Whether `peer`'s window of `workload` ran in this round (failed or not).
    pub fn ran(&self, peer: Peer, workload: Workload) -> bool {
        self.outcome(peer, workload).is_some()
    }

    /// Whether `peer`'s window of `workload` failed in this round.
    pub fn failed(&self, peer: Peer, workload: Workload) -> bool {
        self.outcome(peer, workload).flatten().is_some()
    }
}

impl Report {
    /// A figure's median and spread over the rounds that measured it.
    fn spread(&self, figure: &Figure) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(|r| figure.in_round(r)))
    }

    fn median(&self, figure: &Figure) -> Option<f64> {
        self.spread(figure).map(|s| s.median)
    }

    /// Whether `peer` has a column of figures in this run.
    fn measured(&self, peer: Peer) -> bool {
        match peer {
            Peer::Curator => self.curator_skipped.is_none(),
            _ => self.rust.contains(&peer),
        }
    }

    /// `keys-left`'s figures, unless it failed.
    fn left(&self) -> Option<&LeftFigures> {
        self.keyed.left.as_ref().filter(|l| l.error.is_none())
    }

    /// `keys-memory`'s figures, unless it failed.
    fn memory(&self) -> Option<&MemoryFigures> {
        self.keyed.memory.as_ref().filter(|m| m.error.is_none())
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
mod fixture;
#[cfg(test)]
mod golden;

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
