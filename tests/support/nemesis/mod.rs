//! The soak's nemesis: runs a seeded fault schedule (`schedule.rs`) against a bed on a
//! five-member ensemble, faults overlapping (each runs in a task of its own for its
//! duration), and logs what it did and when each fault healed.
//!
//! At most two members are hit at once (killed, frozen or cut off), so that three keep a
//! quorum; a member is never hit twice at once; one member cut off at a time; one frozen
//! process at a time. A fault that
//! must wait for that holds back the schedule, so that faults start in the schedule's order.

pub mod schedule;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use zk_recipes::Session;
use zk_testcontainers::{expire_session, scaled, FaultProxy, ServerMode, ZkEnsemble};

use crate::support::bed::worker::ChildContender;
use crate::support::history::{Events, History, Outcome};
use schedule::{Fault, Step, KINDS};

/// What the nemesis did: one fault, its target and its fate.
#[derive(Clone, Debug)]
pub struct Injected {
    /// Its index in the schedule.
    pub step: usize,
    pub fault: Fault,
    /// The member, session, proxy or process it hit.
    pub target: String,
    pub started: Instant,
    /// When it was over: the member serves again, the session is expired, the process runs
    /// again. `None` for a lost reply (armed; it fires when a matching request comes).
    pub healed: Option<Instant>,
    /// How long the fault itself lasted (down, frozen, cut off).
    pub lasted: Duration,
    pub note: String,
}

/// What the nemesis hits.
pub struct Targets {
    pub ensemble: Arc<ZkEnsemble>,
    pub history: Arc<History>,
    pub locks: Vec<String>,
    /// The bed's contenders' sessions, by name.
    pub sessions: Vec<(String, Session)>,
    pub proxies: Vec<Arc<FaultProxy>>,
    /// Every member, in the bed's chroot.
    pub connect: String,
    pub session_timeout: Duration,
}

struct Shared {
    targets: Targets,
    /// Members hit right now.
    hit: Mutex<BTreeSet<usize>>,
    log: Mutex<Vec<Injected>>,
}

/// Runs `steps` until `until` (no step starts after it), then waits for every fault to heal.
/// Returns the log, in the order the faults started.
pub async fn run(targets: Targets, steps: &[Step], until: Instant) -> Vec<Injected> {
    let shared = Arc::new(Shared {
        targets,
        hit: Mutex::default(),
        log: Mutex::default(),
    });
    // Two members at most (three of five keep a quorum); one frozen process at a time.
    let members = Arc::new(Semaphore::new(2));
    let processes = Arc::new(Semaphore::new(1));
    // One member cut off at a time (a partition of one server from the rest; two at once and
    // the other three may lose their quorum to a kill).
    let cuts = Arc::new(Semaphore::new(1));
    let mut tasks = JoinSet::new();
    let mut failed = None;
    for (step, Step { gap, fault }) in steps.iter().enumerate() {
        tokio::time::sleep(*gap).await;
        if Instant::now() >= until {
            break;
        }
        // A fault that failed ends the schedule now.
        while let Some(done) = tasks.try_join_next() {
            if let Err(err) = done {
                failed.get_or_insert(err.into_panic());
            }
        }
        if failed.is_some() {
            break;
        }
        let cut = if matches!(fault, Fault::PartitionHoldersServer { .. }) {
            Some(cuts.clone().acquire_owned().await.unwrap())
        } else {
            None
        };
        let permit = if fault.hits_a_member() {
            Some(members.clone().acquire_owned().await.unwrap())
        } else if matches!(fault, Fault::FreezeClient { .. }) {
            Some(processes.clone().acquire_owned().await.unwrap())
        } else {
            None
        };
        if Instant::now() >= until {
            break;
        }
        // The member a fault hits is chosen here, in schedule order, and marked hit before
        // the next fault chooses.
        let member = match fault {
            Fault::KillLeader { .. } => Some(shared.pick_leader().await),
            Fault::KillFollower { pick, .. } => {
                let leader = shared.leader_now().await;
                Some((shared.pick_member(*pick, leader), "a follower".to_owned()))
            }
            Fault::PauseHoldersServer { lock, pick, .. }
            | Fault::PartitionHoldersServer { lock, pick, .. } => {
                Some(shared.holders_server(*lock, *pick).await)
            }
            _ => None,
        };
        println!("NEMESIS {step} starts: {fault}");
        let (shared, fault) = (shared.clone(), fault.clone());
        tasks.spawn(async move {
            // Nothing may hang: a fault that does not heal in time fails the run.
            let limit = scaled(Duration::from_secs(600));
            let injected =
                tokio::time::timeout(limit, inject(&shared, step, fault.clone(), member))
                    .await
                    .unwrap_or_else(|_| panic!("step {step} ({fault}) not over within {limit:?}"));
            println!(
                "NEMESIS {step}: {} on {}: {}",
                injected.fault, injected.target, injected.note
            );
            shared.log.lock().unwrap().push(injected);
            drop((permit, cut));
        });
    }
    while let Some(done) = tasks.join_next().await {
        if let Err(err) = done {
            failed.get_or_insert(err.into_panic());
        }
    }
    let mut log = std::mem::take(&mut *shared.log.lock().unwrap());
    // Fail once every fault is over and only the caller holds the ensemble: dropped in a
    // task (a panic unwinding there), its containers' removal never finished.
    drop(shared);
    if let Some(panic) = failed {
        std::panic::resume_unwind(panic);
    }
    log.sort_by_key(|i| i.step);
    log
}

async fn inject(
    shared: &Shared,
    step: usize,
    fault: Fault,
    member: Option<(usize, String)>,
) -> Injected {
    let t = &shared.targets;
    let started = Instant::now();
    let mut injected = Injected {
        step,
        fault: fault.clone(),
        target: String::new(),
        started,
        healed: None,
        lasted: Duration::ZERO,
        note: String::new(),
    };
    let member = || member.clone().expect("a member fault's member");
    match fault {
        Fault::KillLeader { down } | Fault::KillFollower { down, .. } => {
            member_fault(shared, &mut injected, member(), down, Hit::Kill).await;
        }
        Fault::PauseHoldersServer { frozen, .. } => {
            member_fault(shared, &mut injected, member(), frozen, Hit::Pause).await;
        }
        Fault::PartitionHoldersServer { cut, .. } => {
            member_fault(shared, &mut injected, member(), cut, Hit::Cut).await;
        }
        Fault::ExpireSession { contender } => {
            let (name, session) = &t.sessions[contender % t.sessions.len()];
            injected.target = name.clone();
            let limit = scaled(Duration::from_secs(10));
            let info = match tokio::time::timeout(limit, session.client()).await {
                Ok(Ok(client)) => Some(client.session().clone()),
                _ => None,
            };
            injected.note = match info {
                None => "not connected: nothing to expire".into(),
                Some(info) => match expire_session(&t.connect, &info).await {
                    Ok(()) => format!("session {:?} expired", info.id()),
                    Err(err) => format!("not expired: {err}"),
                },
            };
            injected.healed = Some(Instant::now());
        }
        Fault::LoseReply { proxy, write } => {
            let p = &t.proxies[proxy % t.proxies.len()];
            injected.target = format!("proxy {proxy} (to {})", p.upstream());
            if write {
                p.lose_next_reply(|r| {
                    r.opcode() == zk_testcontainers::opcode::MULTI && r.contains(b"/ops/")
                });
            } else {
                p.lose_next_reply(|r| {
                    r.create_path().is_some_and(|path| {
                        ["lock-", "__READ__", "__WRIT__", "lease-", "latch-"]
                            .iter()
                            .any(|name| path.ends_with(name))
                    })
                });
            }
            injected.note = "armed".into();
        }
        Fault::FreezeClient { lock, frozen } => {
            freeze_client(shared, &mut injected, lock, frozen).await;
        }
    }
    injected
}

#[derive(Clone, Copy, Debug)]
enum Hit {
    Kill,
    Pause,
    Cut,
}

/// Kills, pauses or cuts off `member` for `lasting`, brings it back, waits until it serves.
async fn member_fault(
    shared: &Shared,
    injected: &mut Injected,
    (member, role): (usize, String),
    lasting: Duration,
    hit: Hit,
) {
    let m = shared.targets.ensemble.member(member);
    injected.target = format!("member {member} ({role})");
    let began = Instant::now();
    let injection = match hit {
        Hit::Kill => m.kill().await,
        Hit::Pause => m.pause().await,
        Hit::Cut => m.disconnect().await,
    };
    if let Err(err) = injection {
        // Docker refused (a container that would not freeze, once, under load): no fault.
        // Undo whatever half of it may have happened, and go on.
        let _ = match hit {
            Hit::Kill => m.start_again().await,
            Hit::Pause => m.unpause().await,
            Hit::Cut => m.reconnect().await,
        };
        injected.note = format!("not injected: {err}");
        println!(
            "NEMESIS {}: {hit:?} of member {member} failed: {err}",
            injected.step
        );
        wait_serving(m, member, hit).await;
        injected.healed = Some(Instant::now());
        shared.hit.lock().unwrap().remove(&member);
        return;
    }
    tokio::time::sleep(lasting).await;
    match hit {
        Hit::Kill => m.start_again().await,
        Hit::Pause => m.unpause().await,
        Hit::Cut => m.reconnect().await,
    }
    .unwrap_or_else(|err| panic!("healing the {hit:?} of member {member}: {err}"));
    injected.lasted = began.elapsed();
    let back = Instant::now();
    wait_serving(m, member, hit).await;
    injected.healed = Some(Instant::now());
    injected.note = format!(
        "{:?} for {:.1} s, serving again {:.1} s later",
        hit,
        injected.lasted.as_secs_f64(),
        back.elapsed().as_secs_f64()
    );
    shared.hit.lock().unwrap().remove(&member);
}

/// Waits until `m` serves again (a follower once more, or the leader).
async fn wait_serving(m: &zk_testcontainers::ZkMember, member: usize, hit: Hit) {
    // Generous: on a loaded machine (load 10 on 2 cores) a member cut off for 5 s took 70 s,
    // once over 240 s, to follow again, its syncs with leaders cut short by the next kills.
    let limit = scaled(Duration::from_secs(480));
    let back = Instant::now();
    loop {
        if matches!(
            m.mode().await,
            Ok(ServerMode::Leader | ServerMode::Follower)
        ) {
            return;
        }
        if back.elapsed() >= limit {
            // The member's own account of why it does not follow, for the failure's reader.
            let logs = m.logs().await.unwrap_or_else(|e| format!("(no logs: {e})"));
            let lines: Vec<&str> = logs.lines().collect();
            let tail = lines[lines.len().saturating_sub(80)..].join("\n");
            println!("NEMESIS member {member}'s last log lines:\n{tail}");
            panic!("member {member} not serving {limit:?} after the {hit:?} healed");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Starts a holder process on `lock`; once it holds and writes, freezes it for `frozen`,
/// resumes it, waits for what it does next (a stale write refused, after a freeze past the
/// session timeout; more accepted writes, after a short one), and stops it.
async fn freeze_client(shared: &Shared, injected: &mut Injected, lock: usize, frozen: Duration) {
    let t = &shared.targets;
    let name = format!("child{}", injected.step);
    let lock = &t.locks[lock % t.locks.len()];
    injected.target = format!("{name} on {lock}");
    let child = ChildContender::spawn(&name, &t.connect, lock, t.session_timeout, &t.history);
    let accepted = |e: &Events| {
        e.writes
            .iter()
            .filter(|w| w.worker == name && w.outcome == Outcome::Accepted)
            .count()
    };
    let limit = scaled(Duration::from_secs(30));
    let held = tokio::time::timeout(limit, t.history.wait_until(|e| accepted(e) >= 2)).await;
    if held.is_err() {
        injected.note = format!("not frozen: no grant within {limit:?}");
        injected.healed = Some(Instant::now());
        child.stop().await;
        return;
    }
    let seen = t
        .history
        .read(|e| e.writes.iter().filter(|w| w.worker == name).count());
    let before = t.history.read(accepted);
    child.freeze();
    let began = Instant::now();
    tokio::time::sleep(frozen).await;
    child.resume();
    injected.lasted = began.elapsed();
    injected.healed = Some(Instant::now());
    let past = injected.lasted > t.session_timeout;
    // What it does once resumed: a write refused (fenced off: its session expired, or its
    // lock is shared and another holder's increment came first), or writes accepted (its
    // session survived: the servers expire a session on their own clock, and a new leader
    // gives every session a fresh timeout).
    let after = |e: &Events| {
        let mine = e.writes.iter().filter(|w| w.worker == name).skip(seen);
        let refused = mine
            .filter_map(|w| match &w.outcome {
                Outcome::Refused(err) => Some(err.clone()),
                _ => None,
            })
            .next();
        (refused, accepted(e) - before)
    };
    let waited = tokio::time::timeout(
        limit,
        t.history.wait_until(|e| {
            let (refused, more) = after(e);
            refused.is_some() || more >= 10
        }),
    )
    .await;
    let (refused, more) = t.history.read(after);
    let then = match (refused, waited) {
        (Some(err), _) => format!("fenced off: its write refused ({err}) after {more} accepted"),
        (None, Ok(())) => format!("wrote on: {more} writes accepted, none refused"),
        (None, Err(_)) => format!("neither refused nor writing on within {limit:?}"),
    };
    injected.note = format!(
        "frozen {:.1} s ({} the {:.0} s session timeout); {then}",
        injected.lasted.as_secs_f64(),
        if past { "past" } else { "within" },
        t.session_timeout.as_secs_f64(),
    );
    child.stop().await;
}

impl Shared {
    /// The leader now (waiting for one if an election is on).
    async fn leader_now(&self) -> Option<usize> {
        let e = &self.targets.ensemble;
        if let Ok(leader) = e.leader_index().await {
            return Some(leader);
        }
        e.wait_for_quorum(scaled(Duration::from_secs(60)))
            .await
            .ok()?;
        e.leader_index().await.ok()
    }

    /// The leader, marked hit; a follower if the leader is hit already (a race).
    async fn pick_leader(&self) -> (usize, String) {
        let leader = self.leader_now().await;
        let mut hit = self.hit.lock().unwrap();
        match leader.filter(|l| !hit.contains(l)) {
            Some(l) => {
                hit.insert(l);
                (l, "the leader".into())
            }
            None => {
                drop(hit);
                (
                    self.pick_member(0, leader),
                    "no leader found: a follower".into(),
                )
            }
        }
    }

    /// The `pick`-th member not hit (and not `except`), marked hit.
    fn pick_member(&self, pick: usize, except: Option<usize>) -> usize {
        let mut hit = self.hit.lock().unwrap();
        let free: Vec<usize> = (0..self.targets.ensemble.len())
            .filter(|m| !hit.contains(m) && Some(*m) != except)
            .collect();
        let member = free[pick % free.len()];
        hit.insert(member);
        member
    }

    /// The member serving lock `lock`'s current holder, marked hit; the `pick`-th member not
    /// hit if there is no holder now, or its member is hit already.
    async fn holders_server(&self, lock: usize, pick: usize) -> (usize, String) {
        let t = &self.targets;
        let lock = &t.locks[lock % t.locks.len()];
        let session = t.history.read(|e| {
            let released: std::collections::HashSet<(&str, u64, i64)> = e
                .releases
                .iter()
                .filter(|r| &r.lock == lock)
                .map(|r| (r.lock.as_str(), r.token, r.session))
                .collect();
            e.grants
                .iter()
                .rev()
                .find(|g| {
                    &g.lock == lock && !released.contains(&(g.lock.as_str(), g.token, g.session))
                })
                .map(|g| g.session)
        });
        if let Some(session) = session {
            if let Ok(Some(member)) = t.ensemble.member_of_session(session).await {
                let i = t
                    .ensemble
                    .members()
                    .iter()
                    .position(|m| m.container_name() == member.container_name())
                    .unwrap();
                let mut hit = self.hit.lock().unwrap();
                if hit.insert(i) {
                    return (i, format!("{lock}'s holder's"));
                }
            }
        }
        let role = format!("{lock}'s holder's server not found or hit already: another");
        (self.pick_member(pick, None), role)
    }
}

/// Prints the faults as rows of a Markdown table (`SOAK |...`, as the bed's `RELIABILITY`
/// rows): per kind, how many, how long, what came of them.
pub fn print_faults(log: &[Injected], lost_replies: u64, recovered_creates: usize) {
    println!("SOAK | fault | injected | lasting | what came of them |");
    println!("SOAK | --- | --- | --- | --- |");
    for (kind, what) in KINDS.iter().enumerate() {
        let of_kind: Vec<&Injected> = log.iter().filter(|i| i.fault.kind() == kind).collect();
        let lasted: Vec<f64> = of_kind
            .iter()
            .map(|i| i.lasted.as_secs_f64())
            .filter(|s| *s > 0.0)
            .collect();
        let lasting = match lasted.iter().copied().reduce(f64::min) {
            None => "-".to_owned(),
            Some(min) => {
                let max = lasted.iter().copied().fold(0.0, f64::max);
                format!("{min:.1}-{max:.1} s")
            }
        };
        let notes = match kind {
            2 | 3 => {
                let on = of_kind
                    .iter()
                    .filter(|i| i.target.ends_with("holder's)"))
                    .count();
                format!(
                    "{on} on a holder's server, {} on another member (no holder found, or its server hit already)",
                    of_kind.len() - on
                )
            }
            4 => {
                let done = of_kind
                    .iter()
                    .filter(|i| i.note.ends_with("expired"))
                    .count();
                format!("{done} expired (the others were not connected)")
            }
            5 => format!(
                "{lost_replies} replies lost of both kinds (a rule armed again before it fired \
                 is replaced); {recovered_creates} lock nodes recovered by their id"
            ),
            7 => {
                let count = |what: &str| of_kind.iter().filter(|i| i.note.contains(what)).count();
                let unheld = of_kind.iter().filter(|i| i.note.starts_with("not")).count();
                format!(
                    "{} past the session timeout; after SIGCONT {} fenced off (a write refused), \
                     {} wrote on (the session survived); {unheld} never held (not frozen)",
                    count("(past"),
                    count("fenced off"),
                    count("wrote on"),
                )
            }
            _ => String::new(),
        };
        println!("SOAK | {what} | {} | {lasting} | {notes} |", of_kind.len());
    }
}
