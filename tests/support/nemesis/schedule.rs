//! The nemesis's fault schedule: a pure function of the seed (and of the run's shape), so that
//! a failing run can be replayed with the same sequence of fault choices, targets by role,
//! durations and gaps. Which member a role names (the leader, the holder's server) is found
//! when the fault starts: that depends on the run, not on the seed.

use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One fault, with its targets by role and its duration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL the leader; start it again after `down`.
    KillLeader { down: Duration },
    /// SIGKILL the `pick`-th follower (of those not already hit); start it again after `down`.
    KillFollower { pick: usize, down: Duration },
    /// `docker pause` the server of lock `lock`'s holder (else the `pick`-th member not hit)
    /// for `frozen`, past the session timeout.
    PauseHoldersServer {
        lock: usize,
        pick: usize,
        frozen: Duration,
    },
    /// Cut the server of lock `lock`'s holder (else the `pick`-th member not hit) off the
    /// network for `cut`.
    PartitionHoldersServer {
        lock: usize,
        pick: usize,
        cut: Duration,
    },
    /// Expire the session of contender `contender`, on the servers.
    ExpireSession { contender: usize },
    /// Lose the reply to the next lock-node create (or fenced write, `write`) through
    /// `FaultProxy` `proxy`.
    LoseReply { proxy: usize, write: bool },
    /// A holder process on lock `lock`, frozen with SIGSTOP for `frozen`, resumed with SIGCONT.
    FreezeClient { lock: usize, frozen: Duration },
}

/// The kinds of fault, in table order.
pub const KINDS: [&str; 8] = [
    "leader killed (SIGKILL), started again",
    "follower killed (SIGKILL), started again",
    "holder's server frozen (docker pause) past the session timeout",
    "holder's server cut off the network, reconnected",
    "session expired on the servers",
    "reply to a lock-node create lost (FaultProxy)",
    "reply to a fenced write lost (FaultProxy)",
    "holder process frozen (SIGSTOP), resumed (SIGCONT)",
];

impl Fault {
    /// Its row in [`KINDS`].
    pub fn kind(&self) -> usize {
        match self {
            Fault::KillLeader { .. } => 0,
            Fault::KillFollower { .. } => 1,
            Fault::PauseHoldersServer { .. } => 2,
            Fault::PartitionHoldersServer { .. } => 3,
            Fault::ExpireSession { .. } => 4,
            Fault::LoseReply { write: false, .. } => 5,
            Fault::LoseReply { write: true, .. } => 6,
            Fault::FreezeClient { .. } => 7,
        }
    }

    /// Whether it takes a member of the ensemble out while it lasts.
    pub fn hits_a_member(&self) -> bool {
        matches!(
            self,
            Fault::KillLeader { .. }
                | Fault::KillFollower { .. }
                | Fault::PauseHoldersServer { .. }
                | Fault::PartitionHoldersServer { .. }
        )
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |d: &Duration| format!("{:.1} s", d.as_secs_f64());
        match self {
            Fault::KillLeader { down } => write!(f, "kill the leader, down {}", s(down)),
            Fault::KillFollower { pick, down } => {
                write!(f, "kill follower #{pick}, down {}", s(down))
            }
            Fault::PauseHoldersServer { lock, pick, frozen } => write!(
                f,
                "pause lock {lock}'s holder's server (else member #{pick}) for {}",
                s(frozen)
            ),
            Fault::PartitionHoldersServer { lock, pick, cut } => write!(
                f,
                "cut lock {lock}'s holder's server (else member #{pick}) off for {}",
                s(cut)
            ),
            Fault::ExpireSession { contender } => {
                write!(f, "expire contender {contender}'s session")
            }
            Fault::LoseReply { proxy, write } => write!(
                f,
                "lose the next {} reply through proxy {proxy}",
                if *write {
                    "fenced-write"
                } else {
                    "lock-node create"
                }
            ),
            Fault::FreezeClient { lock, frozen } => write!(
                f,
                "freeze a holder process on lock {lock} for {}",
                s(frozen)
            ),
        }
    }
}

/// A fault and how long after the previous one's start it starts (at the earliest: a fault
/// that needs a member waits until at most one other member is hit, a frozen process until
/// the previous one is done).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub gap: Duration,
    pub fault: Fault,
}

/// The shape of the run the schedule is for.
#[derive(Clone, Debug)]
pub struct Shape {
    /// How long the nemesis runs.
    pub run: Duration,
    pub session_timeout: Duration,
    pub locks: usize,
    pub contenders: usize,
    pub proxies: usize,
    /// Whether members are cut off the network (on unless `ZK_SOAK_CUTS=0`). Without, each
    /// draw of a cut becomes a freeze of the holder's server.
    pub cuts: bool,
}

fn secs(rng: &mut StdRng, from: f64, to: f64) -> Duration {
    // Whole milliseconds, so that the printed schedule is the schedule.
    Duration::from_millis((rng.random_range(from..to) * 1000.0) as u64)
}

/// The schedule for `seed`: steps whose gaps add up to about `shape.run`.
pub fn schedule(seed: u64, shape: &Shape) -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(seed);
    let timeout = shape.session_timeout.as_secs_f64();
    let mut steps = Vec::new();
    let mut at = Duration::ZERO;
    loop {
        let gap = secs(&mut rng, 0.5, 4.0);
        at += gap;
        if at >= shape.run {
            return steps;
        }
        // Weights: member faults and expiries most, kills and frozen processes least.
        let fault = match rng.random_range(0..13) {
            0 => Fault::KillLeader {
                down: secs(&mut rng, 1.0, 8.0),
            },
            1 => Fault::KillFollower {
                pick: rng.random_range(0..8),
                down: secs(&mut rng, 1.0, 8.0),
            },
            2 | 3 => Fault::PauseHoldersServer {
                lock: rng.random_range(0..shape.locks),
                pick: rng.random_range(0..8),
                frozen: secs(&mut rng, timeout + 0.5, timeout + 3.0),
            },
            4 | 5 if !shape.cuts => Fault::PauseHoldersServer {
                lock: rng.random_range(0..shape.locks),
                pick: rng.random_range(0..8),
                frozen: secs(&mut rng, timeout + 0.5, timeout + 3.0),
            },
            4 | 5 => Fault::PartitionHoldersServer {
                lock: rng.random_range(0..shape.locks),
                pick: rng.random_range(0..8),
                cut: secs(&mut rng, 1.0, 2.0 * timeout),
            },
            6 | 7 => Fault::ExpireSession {
                contender: rng.random_range(0..shape.contenders),
            },
            8..=10 => Fault::LoseReply {
                proxy: rng.random_range(0..shape.proxies),
                write: rng.random_bool(0.5),
            },
            _ => Fault::FreezeClient {
                lock: rng.random_range(0..shape.locks),
                // Mostly past the session timeout (fenced off), sometimes short (survives).
                frozen: if rng.random_bool(0.75) {
                    secs(&mut rng, timeout + 0.5, timeout + 3.0)
                } else {
                    secs(&mut rng, 0.3, timeout / 2.0)
                },
            },
        };
        steps.push(Step { gap, fault });
    }
}
