//! The throughput workloads: contenders acquiring and releasing over a measurement window.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};

use crate::args::Args;
use crate::census::Census;
use crate::locks::{Conn, Lib, Locker, Parents};
use crate::measure::{cpu_time, now_ns, Latency};
use crate::zk::{log_counters, log_delta, mkdir, packet_delta};

/// What a throughput workload measured.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub cycles: u64,
    pub seconds: f64,
    pub acquire: Latency,
    pub handoff: Latency,
    pub cpu_ms: f64,
    /// The server's log syncs (fsyncs) and writes in the window, when it reports them.
    pub log: Option<(u64, u64)>,
    /// The packets the server took in (requests) and sent out (replies and watch events) in
    /// the window, when it reports them.
    pub packets: Option<(u64, u64)>,
    pub violations: u64,
    pub error: Option<String>,
}

impl Figures {
    /// The server's log syncs per cycle: each costs one fsync on its single sync thread.
    pub fn syncs_per_cycle(&self) -> Option<f64> {
        let (syncs, _) = self.log?;
        (self.cycles > 0 && self.error.is_none()).then(|| syncs as f64 / self.cycles as f64)
    }

    /// The server's writes per log sync (1.0: every write waited for a sync of its own).
    pub fn writes_per_sync(&self) -> Option<f64> {
        let (syncs, writes) = self.log?;
        (syncs > 0 && self.error.is_none()).then(|| writes as f64 / syncs as f64)
    }

    /// Requests the server took in per cycle (every session's pings included: a few per second).
    pub fn requests_per_cycle(&self) -> Option<f64> {
        let (received, _) = self.packets?;
        (self.cycles > 0 && self.error.is_none()).then(|| received as f64 / self.cycles as f64)
    }

    /// Replies and watch events the server sent per cycle.
    pub fn replies_per_cycle(&self) -> Option<f64> {
        let (_, sent) = self.packets?;
        (self.cycles > 0 && self.error.is_none()).then(|| sent as f64 / self.cycles as f64)
    }

    pub fn cycles_per_s(&self) -> Option<f64> {
        (self.seconds > 0.0 && self.error.is_none()).then(|| self.cycles as f64 / self.seconds)
    }

    pub fn cpu_ms_per_1000(&self) -> Option<f64> {
        (self.cycles > 0 && self.error.is_none()).then(|| self.cpu_ms * 1000.0 / self.cycles as f64)
    }
}

impl Figures {
    /// The figures and what follows from them, as the report's JSON has them.
    pub fn to_json(&self) -> Value {
        json!({
            "cycles": self.cycles,
            "seconds": self.seconds,
            "cycles_per_s": self.cycles_per_s(),
            "acquire": self.acquire,
            "handoff": self.handoff,
            "cpu_ms": self.cpu_ms,
            "cpu_ms_per_1000_cycles": self.cpu_ms_per_1000(),
            "server_log_syncs": self.log.map(|(s, _)| s),
            "server_writes": self.log.map(|(_, w)| w),
            "server_log_syncs_per_cycle": self.syncs_per_cycle(),
            "server_writes_per_log_sync": self.writes_per_sync(),
            "server_requests": self.packets.map(|(r, _)| r),
            "server_replies": self.packets.map(|(_, s)| s),
            "server_requests_per_cycle": self.requests_per_cycle(),
            "server_replies_per_cycle": self.replies_per_cycle(),
            "overlapping_holders": self.violations,
            "error": self.error,
        })
    }
}

/// Shared by the contenders of one lock: who holds (to catch overlaps) and when the last
/// holder called release.
#[derive(Default)]
struct LockState {
    held: AtomicBool,
    released_at: AtomicU64,
}

/// The measurement window, set by the driver after the warm-up.
#[derive(Default)]
struct Window {
    bounds: OnceLock<(u64, u64)>,
    stop: AtomicBool,
}

impl Window {
    fn contains(&self, t: u64) -> Option<bool> {
        self.bounds.get().map(|&(s, e)| t >= s && t < e)
    }

    fn start(&self) -> Option<u64> {
        self.bounds.get().map(|&(s, _)| s)
    }
}

/// What one contender task saw.
#[derive(Default)]
struct Tally {
    acquire: Vec<u64>,
    handoff: Vec<u64>,
    cycles: u64,
    violations: u64,
    error: Option<String>,
}

/// One contender: acquire, note the times, release, until the window closes. With a census,
/// marks the moment it calls release.
async fn contend(
    locker: Locker,
    lock: Arc<LockState>,
    window: Arc<Window>,
    census: Option<Census>,
) -> Tally {
    let mut tally = Tally::default();
    let mark = |label: &str| {
        if let Some(census) = &census {
            census.mark(label);
        }
    };
    while !window.stop.load(Ordering::Relaxed) {
        mark("acquire");
        let asked = now_ns();
        let held = match locker.acquire().await {
            Ok(held) => held,
            Err(e) => {
                tally.error = Some(e);
                break;
            }
        };
        let granted = now_ns();
        mark("acquired");
        if lock.held.swap(true, Ordering::SeqCst) {
            tally.violations += 1;
        }
        let released = lock.released_at.swap(0, Ordering::SeqCst);
        if window.contains(granted) == Some(true) {
            let start = window.start().unwrap_or(u64::MAX);
            tally.cycles += 1;
            if asked >= start {
                tally.acquire.push(granted - asked);
            }
            if released != 0 && released >= start {
                tally.handoff.push(granted - released);
            }
        }
        lock.held.store(false, Ordering::SeqCst);
        lock.released_at.store(now_ns(), Ordering::SeqCst);
        mark("release");
        if let Err(e) = held.release().await {
            tally.error = Some(e);
            break;
        }
    }
    tally
}

/// How a throughput workload lays its locks out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A lock root each: `ZkMutex` on `{dir}/lock-{i}`, `Client::lock` on that directory made
    /// beforehand.
    Roots,
    /// Keys of one lock space `{dir}/space`: `ZkLockSpace` (each session its own), and
    /// `Client::lock` on `{dir}/space/key-{i}`, the key's directory made on demand as a container
    /// (the space made beforehand).
    Keys,
}

/// `locks` locks under `dir`, `per_lock` contenders on each; contender `i` of every lock uses
/// session `i`. With a census, the contenders mark their releases in it.
pub async fn run_locks(
    lib: Lib,
    connect: &str,
    dir: &str,
    (locks, per_lock): (usize, usize),
    layout: Layout,
    args: &Args,
    census: Option<&Census>,
) -> Figures {
    let mut conns = Vec::new();
    for _ in 0..per_lock {
        match Conn::open(lib, connect).await {
            Ok(conn) => conns.push(conn),
            Err(error) => {
                return Figures {
                    error: Some(error),
                    ..Figures::default()
                }
            }
        }
    }
    let window = Arc::new(Window::default());
    let mut tasks = Vec::new();
    let space = format!("{dir}/space");
    if layout == Layout::Keys && lib == Lib::ClientLock {
        if let Err(e) = mkdir(connect, &space).await {
            return Figures {
                error: Some(e),
                ..Figures::default()
            };
        }
    }
    // Each session its own space (and so its own memory of recent keys), as separate processes
    // would have.
    let spaces: Vec<_> = match layout {
        Layout::Keys => conns
            .iter()
            .map(|c| c.space(&space, Parents::Container))
            .collect(),
        Layout::Roots => Vec::new(),
    };
    for l in 0..locks {
        if layout == Layout::Keys {
            let state = Arc::new(LockState::default());
            for space in &spaces {
                tasks.push(tokio::spawn(contend(
                    space.locker(&format!("key-{l}")),
                    state.clone(),
                    window.clone(),
                    census.cloned(),
                )));
            }
            continue;
        }
        let path = format!("{dir}/lock-{l}");
        if lib == Lib::ClientLock {
            // Client::lock needs its directory (zk-recipes creates its own).
            if let Err(e) = mkdir(connect, &path).await {
                return Figures {
                    error: Some(e),
                    ..Figures::default()
                };
            }
        }
        let state = Arc::new(LockState::default());
        for conn in &conns {
            tasks.push(tokio::spawn(contend(
                conn.locker(&path),
                state.clone(),
                window.clone(),
                census.cloned(),
            )));
        }
    }
    tokio::time::sleep(args.warmup).await;
    let log0 = log_counters(connect).await;
    let cpu0 = cpu_time();
    let start = now_ns();
    let end = start + args.measure.as_nanos() as u64;
    let _ = window.bounds.set((start, end));
    tokio::time::sleep(args.measure).await;
    let cpu1 = cpu_time();
    let log1 = log_counters(connect).await;
    window.stop.store(true, Ordering::SeqCst);
    let mut figures = Figures {
        seconds: args.measure.as_secs_f64(),
        cpu_ms: (cpu1 - cpu0).as_secs_f64() * 1000.0,
        log: log_delta(log0, log1),
        packets: packet_delta(log0, log1),
        ..Figures::default()
    };
    let (mut acquire, mut handoff) = (Vec::new(), Vec::new());
    for task in tasks {
        match tokio::time::timeout(Duration::from_secs(60), task).await {
            Ok(Ok(tally)) => {
                figures.cycles += tally.cycles;
                figures.violations += tally.violations;
                acquire.extend(tally.acquire);
                handoff.extend(tally.handoff);
                if figures.error.is_none() {
                    figures.error = tally.error;
                }
            }
            Ok(Err(e)) => figures.error = Some(format!("contender task: {e}")),
            Err(_) => figures.error = Some("a contender did not finish within 60 s".into()),
        }
    }
    figures.acquire = Latency::of(acquire);
    // With one contender a lock has no handoffs (its next grant is its own).
    if per_lock > 1 {
        figures.handoff = Latency::of(handoff);
    }
    for conn in conns {
        conn.close().await;
    }
    figures
}
