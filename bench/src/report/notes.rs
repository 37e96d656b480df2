//! The prose under the ratio lines: where the once-per-run keyed workloads ran, the census's
//! breakdowns of `ZkMutex` and `ZkLeaderElection`, the Curator peer, and the problems (failed
//! windows, overlapping holders).

use crate::args::Peer;
use crate::diagnostics::Breakdown;
use crate::keys::remembered;

use super::metrics::{Figure, GET_CHILDREN_P50, WRITE};
use super::unit::Unit;
use super::{thousands, Report};

impl Report {
    /// Where `keys-left` and `keys-memory` ran and what `keys-memory`'s curve was.
    pub fn keyed_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let server = self.keyed.server.as_deref().unwrap_or("-");
        if let Some(left) = self.left() {
            notes.push(format!(
                "keys-left (once per run, on {server}; reaper every {} ms): each layout's {} keys \
                 locked and released once, then two reaper scans awaited ({:.1} s from the last \
                 release to the count)",
                left.reaper_interval_ms
                    .map_or("?".into(), |ms| ms.to_string()),
                left.keys,
                left.waited_s
            ));
        }
        if let Some(m) = self.memory() {
            let curve: Vec<String> = m
                .curve
                .iter()
                .map(|(k, kib)| format!("{} {:.1}", thousands(*k), *kib as f64 / 1024.0))
                .collect();
            notes.push(format!(
                "keys-memory (once per run, child process, on {server}): ZkLockSpace RSS in MiB \
                 by keys done: {} ({:.0} s)",
                curve.join(", "),
                m.seconds
            ));
        }
        notes
    }

    /// The census's lines: requests per grant and where the time goes.
    pub fn census_notes(&self) -> Vec<String> {
        let ms = Unit::Ms;
        let rt = &self.round_trips;
        let mut notes = vec![format!(
            "ZkMutex requests per grant, 8 contenders ({} grants): {:.2} create+list (pipelined), \
             {:.2} exists+watch, {:.2} wake-ups, {:.2} re-lists",
            rt.grants, rt.enqueues, rt.watches, rt.wakeups, rt.relists
        )];
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
        notes.push(format!(
            "ZkMutex uncontended lock() p50s: to \"enqueued\" (create+list pipelined) {}, \
             then to \"granted\" {}, then to return {}, total {} ({} acquires)",
            ms.opt(u.to_enqueued),
            ms.opt(u.enqueued_to_granted),
            ms.opt(u.granted_to_return),
            ms.opt(u.total),
            u.acquires
        ));
        notes.push(format!(
            "ZkMutex handoff p50s, 8 contenders: {}",
            split(&rt.breakdown)
        ));
        let drains: Vec<&Breakdown> = self
            .rounds
            .iter()
            .filter_map(|r| r.waiters.get(&Peer::ZkRecipes)?.breakdown.as_ref())
            .collect();
        if !drains.is_empty() {
            notes.push(format!(
                "ZkMutex handoff p50s, draining the waiters (medians over the rounds): {}",
                split(&Breakdown::median_of(&drains))
            ));
        }
        let h = &rt.handover;
        notes.push(format!(
            "ZkLeaderElection handover p50s (census): resign->watch event {}, event->re-list {}, \
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
            ms.opt(self.median(&WRITE)),
            ms.opt(self.median(&Figure::floor(&GET_CHILDREN_P50))),
            h.handovers
        ));
        notes
    }

    /// Which Curator ran, or why none did.
    pub fn curator_note(&self) -> String {
        match (&self.curator_skipped, &self.curator_version) {
            (Some(why), _) => format!("Curator: {why}"),
            (None, version) => format!(
                "Curator {} (Debian), InterProcessMutex and LeaderLatch, JVM process CPU; \
                 one JVM for the whole run, JIT-warmed before the first round",
                version.as_deref().unwrap_or("(version unknown)")
            ),
        }
    }

    /// Failed windows and overlapping holders, round by round.
    pub fn problems(&self) -> Vec<String> {
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
}
