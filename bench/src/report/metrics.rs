//! The metrics as data: what each figure is called, its unit, and how it is taken from one
//! round's recorded window; the floor's line. The table's sections (`sections.rs`), the targets
//! (`targets.rs`) and the ratio lines (`lines.rs`) name their figures from here.

use crate::args::{Peer, Workload};
use crate::floor::FloorFigures;
use crate::handover::HandoverFigures;
use crate::keys::FreshFigures;
use crate::rounds::Round;
use crate::throughput::Figures;
use crate::waiters::WaiterFigures;

use super::unit::Unit;

/// Where a figure is read in one round, and how it is computed from what that window recorded.
#[derive(Clone, Copy)]
pub enum Of {
    /// The server's floor at the start of the round (one for every library).
    Floor(fn(&FloorFigures) -> Option<f64>),
    /// A lock window (`uncontended`, `contended8`, `locks64x4`, `keys64x4`).
    Lock(fn(&Figures) -> Option<f64>),
    /// The fresh-keys window, its side-by-side pass included.
    Fresh(fn(&FreshFigures) -> Option<f64>),
    /// The leader-handover window.
    Handover(fn(&HandoverFigures) -> Option<f64>),
    /// The waiters window.
    Waiters(fn(&WaiterFigures) -> Option<f64>),
}

impl Of {
    /// Whether it is read in `workload`'s window (a floor figure is read in any).
    #[cfg(test)]
    pub fn fits(self, workload: Workload) -> bool {
        match self {
            Of::Floor(_) => true,
            Of::Lock(_) => matches!(
                workload,
                Workload::Uncontended
                    | Workload::Contended8
                    | Workload::Locks64x4
                    | Workload::Keys64x4
            ),
            Of::Fresh(_) => workload == Workload::FreshKeys,
            Of::Handover(_) => workload == Workload::Handover,
            Of::Waiters(_) => workload == Workload::Waiters,
        }
    }
}

/// A figure of a kind of window: its JSON key, its label in the table, its unit, and how it is
/// taken.
pub struct Metric {
    pub key: &'static str,
    pub label: &'static str,
    pub unit: Unit,
    pub of: Of,
    /// Libraries whose window has no such figure, and what their cell says instead.
    pub absent: &'static [(Peer, &'static str)],
}

pub const fn metric(key: &'static str, label: &'static str, unit: Unit, of: Of) -> Metric {
    Metric {
        key,
        label,
        unit,
        of,
        absent: &[],
    }
}

/// One library's metric in one workload: what a cell, a ratio or a target reads, round by round.
#[derive(Clone, Copy)]
pub struct Figure {
    pub peer: Peer,
    pub workload: Workload,
    pub metric: &'static Metric,
}

impl Figure {
    pub const fn of(peer: Peer, workload: Workload, metric: &'static Metric) -> Figure {
        Figure {
            peer,
            workload,
            metric,
        }
    }

    /// Ours (`ZkMutex`, `ZkLockSpace` or `ZkLeaderElection`, as the workload has it).
    pub const fn ours(workload: Workload, metric: &'static Metric) -> Figure {
        Figure::of(Peer::ZkRecipes, workload, metric)
    }

    /// A figure of the server's floor.
    pub const fn floor(metric: &'static Metric) -> Figure {
        Figure::of(Peer::ZkRecipes, Workload::Uncontended, metric)
    }

    /// Its value in one round, unless its window failed or did not run.
    pub fn in_round(&self, r: &Round) -> Option<f64> {
        let (p, w) = (self.peer, self.workload);
        match self.metric.of {
            Of::Floor(get) => get(&r.floor.figures()),
            Of::Lock(get) => r.lock(p, w).and_then(get),
            Of::Fresh(get) => r.fresh(p).and_then(get),
            Of::Handover(get) => r.handover(p).and_then(get),
            Of::Waiters(get) => r.waiters(p).and_then(get),
        }
    }
}

// The lock windows.
pub const CYCLES: Metric = metric(
    "cycles_per_s",
    "cycles/s",
    Unit::Whole,
    Of::Lock(Figures::cycles_per_s),
);
pub const ACQUIRE_P50: Metric = metric(
    "acquire_p50_us",
    "acquire p50",
    Unit::Ms,
    Of::Lock(|f| f.acquire.p50),
);
pub const ACQUIRE_P99: Metric = metric(
    "acquire_p99_us",
    "acquire p99",
    Unit::Ms,
    Of::Lock(|f| f.acquire.p99),
);
pub const HANDOFF_P50: Metric = metric(
    "handoff_p50_us",
    "handoff p50",
    Unit::Ms,
    Of::Lock(|f| f.handoff.p50),
);
pub const HANDOFF_P99: Metric = metric(
    "handoff_p99_us",
    "handoff p99",
    Unit::Ms,
    Of::Lock(|f| f.handoff.p99),
);
pub const CPU: Metric = metric(
    "cpu_ms_per_1000_cycles",
    "CPU/1k cycles",
    Unit::Dec(1),
    Of::Lock(Figures::cpu_ms_per_1000),
);
pub const SYNCS: Metric = metric(
    "server_log_syncs_per_cycle",
    "log syncs/cycle",
    Unit::Dec(2),
    Of::Lock(Figures::syncs_per_cycle),
);
pub const WRITES_PER_SYNC: Metric = metric(
    "server_writes_per_log_sync",
    "writes/log sync",
    Unit::Dec(2),
    Of::Lock(Figures::writes_per_sync),
);
/// What a cycle asks of the server (issue #27): requests in, replies and watch events out.
pub const REQUESTS: Metric = metric(
    "server_requests_per_cycle",
    "requests/cycle",
    Unit::Dec(2),
    Of::Lock(Figures::requests_per_cycle),
);
pub const REPLIES: Metric = metric(
    "server_replies_per_cycle",
    "replies+events/cycle",
    Unit::Dec(2),
    Of::Lock(Figures::replies_per_cycle),
);

// The fresh-keys window.
pub const FRESH_P50: Metric = metric(
    "fresh_acquire_p50_us",
    "fresh acquire p50",
    Unit::Ms,
    Of::Fresh(|f| f.fresh.p50),
);
pub const RELOCK_P50: Metric = metric(
    "relock_acquire_p50_us",
    "relock acquire p50",
    Unit::Ms,
    Of::Fresh(|f| f.relock.p50),
);
/// A key the client forgot, its directory still there (issue #27).
pub const FORGOTTEN_P50: Metric = metric(
    "forgotten_acquire_p50_us",
    "forgotten acquire p50",
    Unit::Ms,
    Of::Fresh(|f| f.forgotten.p50),
);
/// The longest time from a key's first lock to its relock (s).
pub const RELOCK_AGE: Metric = metric(
    "relock_age_max_s",
    "relock age max, s",
    Unit::Dec(1),
    Of::Fresh(|f| Some(f.relock_age_max_s)),
);

// The side-by-side pass of the fresh-keys window: the same keys, in turn on one connection.
pub const SIDE_WRITE: Metric = metric(
    "side_write_p50_us",
    "side: one write p50",
    Unit::Ms,
    Of::Fresh(|f| f.side.write.p50),
);
pub const SIDE_RELOCK: Metric = metric(
    "side_relock_p50_us",
    "side: relock p50",
    Unit::Ms,
    Of::Fresh(|f| f.side.relock.p50),
);
pub const SIDE_SINGLE: Metric = metric(
    "side_single_lock_p50_us",
    "side: single lock p50",
    Unit::Ms,
    Of::Fresh(|f| f.side.single.p50),
);
pub const SIDE_BURST: Metric = metric(
    "side_create_list_p50_us",
    "side: create+list p50",
    Unit::Ms,
    Of::Fresh(|f| f.side.burst.p50),
);
pub const SIDE_LIST_FIRST: Metric = metric(
    "side_list_create_p50_us",
    "side: list+create p50",
    Unit::Ms,
    Of::Fresh(|f| f.side.list_first.p50),
);

// The leader-handover window.
pub const HANDOVER_P50: Metric = metric(
    "handover_p50_us",
    "handover p50",
    Unit::Ms,
    Of::Handover(|h| h.handover.p50),
);

// The server's floor.
pub const SET_DATA_P50: Metric = metric(
    "set_data_p50_us",
    "set_data p50",
    Unit::Ms,
    Of::Floor(|f| f.set_data_p50_us),
);
pub const GET_CHILDREN_P50: Metric = metric(
    "get_children_p50_us",
    "get_children p50",
    Unit::Ms,
    Of::Floor(|f| f.get_children_p50_us),
);
pub const CREATE_P50: Metric = metric(
    "create_p50_us",
    "create p50",
    Unit::Ms,
    Of::Floor(|f| f.create_p50_us),
);
pub const CREATE_DELETE_CYCLES: Metric = metric(
    "create_delete_cycles_per_s",
    "create+delete cycles/s",
    Unit::Whole,
    Of::Floor(|f| f.create_delete_cycles_per_s),
);

/// One write round trip, the yardstick of the targets: the floor's `set_data` p50.
pub const WRITE: Figure = Figure::floor(&SET_DATA_P50);

/// The floor's line of the report, in this order.
pub const FLOOR: &[Metric] = &[
    SET_DATA_P50,
    metric(
        "set_data_p99_us",
        "set_data p99",
        Unit::Ms,
        Of::Floor(|f| f.set_data_p99_us),
    ),
    GET_CHILDREN_P50,
    CREATE_P50,
    metric(
        "create_p99_us",
        "create p99",
        Unit::Ms,
        Of::Floor(|f| f.create_p99_us),
    ),
    metric(
        "delete_p50_us",
        "delete p50",
        Unit::Ms,
        Of::Floor(|f| f.delete_p50_us),
    ),
    metric(
        "create_and_get_children_pipelined_p50_us",
        "create+get_children pipelined p50",
        Unit::Ms,
        Of::Floor(|f| f.create_and_get_children_pipelined_p50_us),
    ),
    metric(
        "get_children_and_create_pipelined_p50_us",
        "get_children+create pipelined p50",
        Unit::Ms,
        Of::Floor(|f| f.get_children_and_create_pipelined_p50_us),
    ),
    metric(
        "get_children_and_create_exact_pct",
        "% of those exact",
        Unit::Whole,
        Of::Floor(|f| f.get_children_and_create_exact_pct),
    ),
    CREATE_DELETE_CYCLES,
    metric(
        "cpu_ms_per_1000_cycles",
        "create+delete CPU/1k cycles",
        Unit::Dec(1),
        Of::Floor(|f| f.cpu_ms_per_1000_cycles),
    ),
];
