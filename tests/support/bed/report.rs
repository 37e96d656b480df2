//! What a scenario of the ensemble fault suite prints and asserts at the end.

use std::time::{Duration, Instant};

use crate::support::history::{Events, Outcome, Report, Write};

/// The longest time any lock went without an acknowledged accepted write (between its first
/// and its last one).
pub fn longest_stall(e: &Events, locks: &[String]) -> Duration {
    let mut worst = Duration::ZERO;
    for lock in locks {
        let mut acks: Vec<Instant> = e
            .writes
            .iter()
            .filter(|w| &w.lock == lock && w.outcome == Outcome::Accepted)
            .filter_map(|w| w.done)
            .collect();
        acks.sort();
        for pair in acks.windows(2) {
            worst = worst.max(pair[1] - pair[0]);
        }
    }
    worst
}

/// One row of the README's table.
pub struct Row {
    pub scenario: String,
    pub policy: &'static str,
    pub faults: String,
}

impl Row {
    pub fn print(&self, contenders: usize, locks: usize, r: &Report, stall: Duration) {
        let recovery = match r.recovery {
            Some(d) => format!("{:.1} s", d.as_secs_f64()),
            None => "not recovered".to_owned(),
        };
        println!(
            "RELIABILITY | {} | {} | {contenders} on {locks} locks | {} increments ({} applied, {} refused, {} unknown: {} done), {} grants | {} | {} | {} | {recovery} (longest stall {:.1} s) |",
            self.scenario,
            self.policy,
            r.writes,
            r.applied(),
            r.refused,
            r.unknown_done + r.unknown_not_done,
            r.unknown_done,
            r.grants,
            self.faults,
            r.violations.len(),
            r.lost,
            stall.as_secs_f64(),
        );
    }
}

pub fn assert_clean(report: &Report) {
    assert!(
        report.violations.is_empty(),
        "violations: {:#?}",
        report.violations
    );
    assert_eq!(report.lost, 0);
    assert!(
        report.applied() > 0,
        "nothing was written: the test proved nothing"
    );
}

/// What became of a stale holder's writes, for the row: "refused (session expired), believing
/// it held, ...".
pub fn stale_outcomes(writes: &[Write]) -> String {
    let outcomes: Vec<String> = writes
        .iter()
        .map(|w| {
            let belief = if w.believed_held {
                "believing it held"
            } else {
                "knowing it lost"
            };
            match &w.outcome {
                Outcome::Accepted => format!("accepted, {belief}"),
                Outcome::Refused(e) => format!("refused ({e}), {belief}"),
                Outcome::Unknown(e) => format!("unknown ({e}), {belief}"),
            }
        })
        .collect();
    outcomes.join(", ")
}
