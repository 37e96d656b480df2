//! The rows of the keyed workloads run once per run (`keys-left`, `keys-memory`) as data: one
//! value each, no spread; the targets on them read the same getters.

use crate::keys::{LeftFigures, MemoryFigures};

use super::thousands;
use super::unit::Unit;

/// How a cell's figure is taken and the words printed after it (`None`: the bench takes none
/// for that library).
pub type OnceCell<T> = Option<(fn(&T) -> Option<f64>, &'static str)>;

/// A row of a workload run once per run: its label, unit, and per column (zk-recipes,
/// `Client::lock`, Curator) how the figure is taken and the words after it (`None`: the bench
/// takes none there).
pub struct OnceRow<T: 'static> {
    pub label: &'static str,
    pub unit: Unit,
    pub cells: [OnceCell<T>; 3],
}

/// The rows of a workload run once per run.
pub struct OnceSection<T: 'static> {
    pub label: fn(&T) -> String,
    pub rows: &'static [OnceRow<T>],
    pub error: fn(&T) -> Option<&String>,
}

/// `keys-left`: znodes left per key of `ZkLockSpace`.
pub const LEFT_SPACE: fn(&LeftFigures) -> Option<f64> =
    |l| l.zk_lock_space.as_ref().map(|l| l.per_key);

/// `keys-left`: four layouts' keys, two in a row (the columns are layouts here).
pub const LEFT: OnceSection<LeftFigures> = OnceSection {
    label: |l| format!("{} keys once, reaped", l.keys),
    rows: &[
        OnceRow {
            label: "znodes left/key",
            unit: Unit::Dec(2),
            cells: [
                Some((LEFT_SPACE, "ZkLockSpace")),
                Some((
                    |l| l.client_lock_persistent_parents.as_ref().map(|l| l.per_key),
                    "persistent dirs",
                )),
                None,
            ],
        },
        OnceRow {
            label: "(other layouts)",
            unit: Unit::Dec(2),
            cells: [
                Some((
                    |l| l.zk_mutex_per_key.as_ref().map(|l| l.per_key),
                    "ZkMutex/key",
                )),
                Some((
                    |l| l.client_lock_container_parents.as_ref().map(|l| l.per_key),
                    "container dirs",
                )),
                None,
            ],
        },
    ],
    error: |l| l.error.as_ref(),
};

/// `keys-memory`: RSS growth from the first 1,000 keys to the last (MiB).
pub const MEMORY_GROWTH: fn(&MemoryFigures) -> Option<f64> = |m| Some(m.growth_kib as f64 / 1024.0);

/// `keys-memory`: ZkLockSpace only.
pub const MEMORY: OnceSection<MemoryFigures> = OnceSection {
    label: |m| format!("{} keys, 1 sess.", thousands(m.keys)),
    rows: &[
        OnceRow {
            label: "RSS growth, MiB",
            unit: Unit::Dec(2),
            cells: [Some((MEMORY_GROWTH, "")), None, None],
        },
        OnceRow {
            label: "RSS at 1k, MiB",
            unit: Unit::Dec(1),
            cells: [
                Some((|m| Some(m.rss_first_1000_kib as f64 / 1024.0), "")),
                None,
                None,
            ],
        },
        OnceRow {
            label: "RSS at end, MiB",
            unit: Unit::Dec(1),
            cells: [
                Some((|m| Some(m.rss_all_kib as f64 / 1024.0), "")),
                None,
                None,
            ],
        },
        OnceRow {
            label: "cycles/s",
            unit: Unit::Whole,
            cells: [Some((|m| m.cycles_per_s, "")), None, None],
        },
    ],
    error: |m| m.error.as_ref(),
};
