//! The table of the rounds as data: a section per workload, its label, its metrics (a row
//! each) and the libraries the bench does not run there (a column each). `text.rs` prints it and
//! `json.rs` writes its summary from it.

use crate::args::{Args, Peer, Workload};
use crate::keys::FreshFigures;

use super::metrics::{
    metric, Figure, Metric, Of, ACQUIRE_P50, ACQUIRE_P99, CPU, CYCLES, FORGOTTEN_P50, FRESH_P50,
    HANDOFF_P50, HANDOFF_P99, HANDOVER_P50, RELOCK_P50, REPLIES, REQUESTS, SYNCS, WRITES_PER_SYNC,
};
use super::thousands;
use super::unit::Unit;

/// A block of the table's rows: a workload of the rounds and its metrics, a row each, a
/// column per library.
pub struct Section {
    pub workload: Workload,
    /// Its label in the first column.
    pub label: fn(&Args) -> String,
    pub metrics: &'static [Metric],
    /// Libraries the bench does not run this workload on, and what their cells say.
    pub absent: &'static [(Peer, &'static str)],
}

impl Section {
    /// What `peer`'s cell of `metric` says instead of a figure, if the bench takes none.
    pub fn absent(&self, metric: &Metric, peer: Peer) -> Option<&'static str> {
        self.absent
            .iter()
            .chain(metric.absent)
            .find(|(p, _)| *p == peer)
            .map(|(_, why)| *why)
    }

    /// Its metric as `peer` measured it.
    pub fn figure(&self, peer: Peer, metric: &'static Metric) -> Figure {
        Figure::of(peer, self.workload, metric)
    }
}

const NOT_MEASURED: &str = "not measured";
/// Curator runs the lock workloads on roots only (`curator::supports`).
const NO_CURATOR: &[(Peer, &str)] = &[(Peer::Curator, NOT_MEASURED)];
const LOCK_SHORT: &[Metric] = &[CYCLES, CPU, SYNCS, WRITES_PER_SYNC, REQUESTS, REPLIES];

/// The table of the rounds, section by section (the JSON's summary has the same).
pub const SECTIONS: &[Section] = &[
    Section {
        workload: Workload::Uncontended,
        label: |_| "uncontended".into(),
        metrics: &[
            CYCLES,
            ACQUIRE_P50,
            ACQUIRE_P99,
            CPU,
            SYNCS,
            WRITES_PER_SYNC,
            REQUESTS,
            REPLIES,
        ],
        absent: &[],
    },
    Section {
        workload: Workload::Contended8,
        label: |_| "8 contenders, 1 lock".into(),
        metrics: &[
            CYCLES,
            ACQUIRE_P50,
            ACQUIRE_P99,
            HANDOFF_P50,
            HANDOFF_P99,
            CPU,
            SYNCS,
            WRITES_PER_SYNC,
            REQUESTS,
            REPLIES,
        ],
        absent: &[],
    },
    Section {
        workload: Workload::Locks64x4,
        label: |_| "64 locks x 4".into(),
        metrics: LOCK_SHORT,
        absent: &[],
    },
    Section {
        workload: Workload::Keys64x4,
        label: |_| "64 keys x 4".into(),
        metrics: LOCK_SHORT,
        absent: NO_CURATOR,
    },
    Section {
        workload: Workload::FreshKeys,
        label: |a| format!("{} fresh keys", thousands(a.fresh_keys)),
        metrics: &[
            FRESH_P50,
            metric(
                "fresh_acquire_p99_us",
                "fresh acquire p99",
                Unit::Ms,
                Of::Fresh(|f| f.fresh.p99),
            ),
            metric(
                "fresh_cycles_per_s",
                "fresh cycles/s",
                Unit::Whole,
                Of::Fresh(|f| f.fresh_cycles_per_s),
            ),
            metric(
                "fresh_server_writes_per_cycle",
                "fresh writes/cyc",
                Unit::Dec(2),
                Of::Fresh(FreshFigures::fresh_writes_per_cycle),
            ),
            metric(
                "fresh_server_log_syncs_per_cycle",
                "fresh syncs/cyc",
                Unit::Dec(2),
                Of::Fresh(FreshFigures::fresh_syncs_per_cycle),
            ),
            RELOCK_P50,
            metric(
                "relock_acquire_p99_us",
                "relock acquire p99",
                Unit::Ms,
                Of::Fresh(|f| f.relock.p99),
            ),
            metric(
                "relock_cycles_per_s",
                "relock cycles/s",
                Unit::Whole,
                Of::Fresh(|f| f.relock_cycles_per_s),
            ),
            metric(
                "relock_server_writes_per_cycle",
                "relock writes/cyc",
                Unit::Dec(2),
                Of::Fresh(FreshFigures::relock_writes_per_cycle),
            ),
            metric(
                "relock_server_log_syncs_per_cycle",
                "relock syncs/cyc",
                Unit::Dec(2),
                Of::Fresh(FreshFigures::relock_syncs_per_cycle),
            ),
            FORGOTTEN_P50,
            metric(
                "forgotten_server_writes_per_cycle",
                "forgotten writes/cyc",
                Unit::Dec(2),
                Of::Fresh(FreshFigures::forgotten_writes_per_cycle),
            ),
            metric(
                "forgotten_server_log_syncs_per_cycle",
                "forgotten syncs/cyc",
                Unit::Dec(2),
                Of::Fresh(FreshFigures::forgotten_syncs_per_cycle),
            ),
        ],
        absent: NO_CURATOR,
    },
    Section {
        workload: Workload::Handover,
        label: |_| "leader handover".into(),
        metrics: &[
            HANDOVER_P50,
            metric(
                "handover_p99_us",
                "handover p99",
                Unit::Ms,
                Of::Handover(|h| h.handover.p99),
            ),
        ],
        absent: &[(Peer::ClientLock, "no election")],
    },
    Section {
        workload: Workload::Waiters,
        label: |a| format!("{} waiters, 1 lock", a.waiters),
        metrics: &[
            metric(
                "kib_per_waiter",
                "KiB per waiter",
                Unit::Dec(1),
                Of::Waiters(|w| w.kib_per_waiter),
            ),
            Metric {
                // Counted from ZkMutex's "watch fired" events.
                absent: &[(Peer::ClientLock, "not counted")],
                ..metric(
                    "wakeups_per_release",
                    "wake-ups/release",
                    Unit::Dec(2),
                    Of::Waiters(|w| w.wakeups_per_release),
                )
            },
            metric(
                "drain_handoffs_per_s",
                "drain handoffs/s",
                Unit::Whole,
                Of::Waiters(|w| w.drain_handoffs_per_s),
            ),
        ],
        absent: NO_CURATOR,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curator;

    #[test]
    fn every_section_reads_its_own_window_and_names_curator_where_it_does_not_run() {
        for s in SECTIONS {
            for m in s.metrics {
                assert!(m.of.fits(s.workload), "{} in {:?}", m.key, s.workload);
            }
            let absent = s.absent.iter().any(|(p, _)| *p == Peer::Curator);
            assert_eq!(absent, !curator::supports(s.workload), "{:?}", s.workload);
        }
        let workloads: Vec<Workload> = SECTIONS.iter().map(|s| s.workload).collect();
        assert_eq!(
            workloads,
            Workload::ALL,
            "a section per workload of the rounds"
        );
    }
}
