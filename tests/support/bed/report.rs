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

/// One row of docs/reliability.md's table.
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

/// The soak's table of recipes (`SOAK |...` rows, a Markdown table): per lock, its
/// contenders, the operations and what became of them, the grants, the checker's verdict on
/// that lock alone, and its longest stall. Returns each lock's report.
pub fn print_recipes(
    e: &Events,
    locks: &[(String, &'static str, String)],
    recovery_bound: Duration,
) -> Vec<Report> {
    println!(
        "SOAK | recipe | lock | contenders | operations | grants | violations | updates lost | longest stall |"
    );
    println!("SOAK | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut reports = Vec::new();
    for (lock, recipe, contenders) in locks {
        let one = e.only(lock);
        let r = crate::support::history::check(&one, recovery_bound);
        let stall = longest_stall(&one, std::slice::from_ref(lock));
        println!(
            "SOAK | {recipe} | {lock} | {contenders} | {} fenced increments ({} applied, {} refused, {} unknown: {} done) | {} | {} | {} | {:.1} s |",
            r.writes,
            r.applied(),
            r.refused,
            r.unknown_done + r.unknown_not_done,
            r.unknown_done,
            r.grants,
            r.violations.len(),
            r.lost,
            stall.as_secs_f64(),
        );
        reports.push(r);
    }
    reports
}

/// For each heal (when, what): how long until every lock had an accepted write acknowledged
/// after it (`None`: some lock had none before the end). Other faults may still be on then.
pub fn recoveries(
    e: &Events,
    locks: &[String],
    heals: &[(Instant, String)],
) -> Vec<(Option<Duration>, String)> {
    heals
        .iter()
        .map(|(healed, what)| {
            let took = locks.iter().try_fold(Duration::ZERO, |worst, lock| {
                let first = e
                    .writes
                    .iter()
                    .filter(|w| &w.lock == lock && w.outcome == Outcome::Accepted)
                    .filter_map(|w| w.done)
                    .filter(|d| d > healed)
                    .min()?;
                Some(worst.max(first - *healed))
            });
            (took, what.clone())
        })
        .collect()
}

/// A stretch in which a lock had no accepted write acknowledged for longer than a bound:
/// from its last acknowledged write before (or the start of the window) to the next one
/// (`None`: none before the end of the window).
#[derive(Clone, Debug)]
pub struct Stall {
    pub lock: String,
    pub from: Instant,
    pub to: Option<Instant>,
}

impl Stall {
    /// How long it lasted (until `end` if it never ended).
    pub fn length(&self, end: Instant) -> Duration {
        self.to.unwrap_or(end).saturating_duration_since(self.from)
    }
}

/// The stalls longer than `bound` of each lock that began in the window `[since, until)`, in
/// the order they began; one still on at the last write recorded ends `None` (counted to
/// `until`).
pub fn stalls(
    e: &Events,
    locks: &[String],
    since: Instant,
    until: Instant,
    bound: Duration,
) -> Vec<Stall> {
    let mut found = Vec::new();
    for lock in locks {
        let mut acks: Vec<Instant> = e
            .writes
            .iter()
            .filter(|w| &w.lock == lock && w.outcome == Outcome::Accepted)
            .filter_map(|w| w.done)
            .filter(|d| *d > since)
            .collect();
        acks.sort();
        let mut last = since;
        for ack in acks {
            if last >= until {
                break;
            }
            if ack - last > bound {
                found.push(Stall {
                    lock: lock.clone(),
                    from: last,
                    to: Some(ack),
                });
            }
            last = ack;
        }
        if last < until && until - last > bound {
            found.push(Stall {
                lock: lock.clone(),
                from: last,
                to: None,
            });
        }
    }
    found.sort_by_key(|s| s.from);
    found
}
