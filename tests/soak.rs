//! The randomized fault soak (the Jepsen way): every recipe at once (a `ZkMutex`, a
//! `ZkLockSpace` key, a `ZkRwLock`, a `ZkSemaphore`, a `ZkLeaderElection`) on a five-member
//! ensemble, contenders doing fenced increments, while a nemesis picks faults at random from
//! those the harness has (leader and follower kills, the holder's server frozen past the
//! session timeout or cut off, session expiries, lost replies through a `FaultProxy`, frozen
//! holder processes), with random durations and overlaps. At the end every fault heals, every
//! lock and the election are taken again, and the checker judges the whole history
//! (`support/history.rs`): no overlapping accepted critical sections (readers together, at most
//! the permits' leases), tokens only grow, nothing lost or doubled, every lock usable after
//! the last heal, no node left.
//!
//! `ZK_SOAK_CUTS=0` leaves cutting members off the network out of the faults (each cut drawn
//! becomes a freeze of the holder's server).
//!
//! `ZK_SOAK_SECS` (default 60, what CI runs) says how long the nemesis runs; `ZK_SOAK_SEED`
//! replays a run: the fault schedule is a pure function of the seed and of `ZK_SOAK_SECS`
//! (`support/nemesis/schedule.rs`), printed at the start with the seed. Which member a fault's
//! role names (the leader, the holder's server) is found when it starts.
//!
//! While it runs, a lock without an acknowledged write for [`STALL`] gets `STALL` lines: who
//! holds it up, and where their sessions are. It prints the soak tables of
//! docs/reliability.md (`SOAK |...`), the stalls among them, each against the faults that
//! were on during it:
//!
//! ```sh
//! ZK_SOAK_SECS=600 cargo nextest run -p zk-recipes --test soak --success-output immediate | grep -E 'SOAK|STALL'
//! ```

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::bed::report::{print_recipes, recoveries, stalls, Row, Stall};
use support::bed::worker::{run_child_worker, CHILD_WORKER_VAR};
use support::bed::{ensemble_of, Bed, Kind, StallWatch};
use support::nemesis::schedule::{schedule, Shape};
use support::nemesis::{self, print_faults, Injected, Targets};
use zk_recipes::LossPolicy;
use zk_testcontainers::scaled;

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// A lock without an acknowledged write for longer than this is a stall: told while it lasts
/// (`STALL` lines: who holds it up, where their sessions are) and listed at the end against
/// the faults that were on during it.
const STALL: Duration = Duration::from_secs(10);
const KINDS: [Kind; 5] = [
    Kind::Mutex,
    Kind::Keyed,
    Kind::RwLock,
    Kind::Semaphore,
    Kind::Election,
];
/// Contenders per lock through every member (the third under `LossPolicy::Suspension`).
const PER_LOCK: usize = 3;
/// Locks with one more contender through a `FaultProxy` (the mutex and the key).
const PROXIED: usize = 2;

/// Worker mode of the frozen holder processes (this binary run again, see
/// `support::bed::worker::ChildContender`). Without its variable it has nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_worker_process() {
    let Ok(spec) = std::env::var(CHILD_WORKER_VAR) else {
        return;
    };
    run_child_worker(&spec).await;
}

fn seed() -> u64 {
    match std::env::var("ZK_SOAK_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("ZK_SOAK_SEED={s:?}: not a number")),
        Err(_) => rand::random(),
    }
}

fn run_secs() -> u64 {
    std::env::var("ZK_SOAK_SECS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(60)
}

fn shape(run: Duration) -> Shape {
    Shape {
        run,
        session_timeout: SESSION_TIMEOUT,
        locks: KINDS.len(),
        contenders: KINDS.len() * PER_LOCK + PROXIED,
        proxies: PROXIED,
        cuts: std::env::var("ZK_SOAK_CUTS").map_or(true, |v| v.trim() != "0"),
    }
}

/// The same seed gives the same schedule; another seed another one.
#[test]
fn the_schedule_is_a_function_of_the_seed() {
    let shape = Shape {
        cuts: true,
        ..shape(Duration::from_secs(600))
    };
    let a = schedule(7, &shape);
    assert!(a.len() > 100, "{} steps in 10 minutes", a.len());
    assert_eq!(a, schedule(7, &shape));
    assert_ne!(a, schedule(8, &shape));
    let kinds: std::collections::BTreeSet<usize> = a.iter().map(|s| s.fault.kind()).collect();
    assert_eq!(kinds.len(), nemesis::schedule::KINDS.len(), "every kind");
    let without_cuts = schedule(
        7,
        &Shape {
            cuts: false,
            ..shape
        },
    );
    assert!(
        without_cuts.iter().all(|s| s.fault.kind() != 3),
        "no cut when cuts are off"
    );
}

/// Counts the library's events (lock nodes recovered after a lost create reply), so it runs
/// on a runtime of its own (`support::counting_events`).
#[test]
fn every_recipe_at_once_under_a_random_nemesis() {
    support::counting_events(soak());
}

async fn soak() {
    // A five-member ensemble for a minute or more: only when asked with ZK_SOAK_SECS (CI's
    // .ci/test asks for 60 s, in a step of its own; under nextest it runs alone, see
    // .config/nextest.toml).
    if std::env::var_os("ZK_SOAK_SECS").is_none() {
        println!("SOAK skipped: set ZK_SOAK_SECS (e.g. 60) to run it");
        return;
    }
    let Some(ensemble) = ensemble_of(5).await else {
        return;
    };
    let (seed, secs) = (seed(), run_secs());
    let replay = format!("ZK_SOAK_SEED={seed} ZK_SOAK_SECS={secs}");
    println!("SOAK seed {seed}: replay with {replay}");
    let ensemble = Arc::new(ensemble);
    let mut bed = Bed::with_locks(&ensemble, "soak", &KINDS).await;
    let all = bed.all();

    // The contenders: through a proxy in front of members 0 and 1 (on the mutex and the key),
    // then PER_LOCK on each lock through every member.
    let mut proxies = Vec::new();
    for i in 0..PROXIED {
        let (proxy, through) = bed.through_proxy(i).await;
        let name = format!("proxied{i}");
        bed.contender(
            &name,
            &through,
            SESSION_TIMEOUT,
            LossPolicy::Expiry,
            i,
            false,
        )
        .await;
        proxies.push(Arc::new(proxy));
    }
    for lock in 0..KINDS.len() {
        for j in 0..PER_LOCK {
            let policy = match j {
                2 => LossPolicy::Suspension,
                _ => LossPolicy::Expiry,
            };
            let name = format!("{}-w{j}", bed.locks[lock]);
            bed.contender(&name, &all, SESSION_TIMEOUT, policy, lock, false)
                .await;
        }
    }
    let contenders: Vec<String> = (0..KINDS.len())
        .map(|lock| match lock < PROXIED {
            true => format!("{} (1 through a FaultProxy)", PER_LOCK + 1),
            false => PER_LOCK.to_string(),
        })
        .collect();
    // Every lock works before the first fault.
    bed.wait_writes(Instant::now(), 3, 120).await;

    let run = Duration::from_secs(secs);
    let steps = schedule(seed, &shape(run));
    for (i, step) in steps.iter().enumerate() {
        println!(
            "SCHEDULE {i}: after {:.1} s, {}",
            step.gap.as_secs_f64(),
            step.fault
        );
    }
    let began = Instant::now();
    let targets = Targets {
        ensemble: ensemble.clone(),
        history: bed.history.clone(),
        locks: bed.locks.clone(),
        sessions: bed.sessions.clone(),
        proxies: proxies.clone(),
        connect: all.clone(),
        session_timeout: SESSION_TIMEOUT,
    };
    let watching = tokio::spawn(
        StallWatch {
            ensemble: ensemble.clone(),
            connect: all.clone(),
            locks: bed.locks.iter().cloned().zip(KINDS).collect(),
            sessions: bed.sessions.clone(),
            history: bed.history.clone(),
            began,
            bound: STALL,
        }
        .run(bed.stop.subscribe()),
    );
    let log = nemesis::run(targets, &steps, began + run).await;
    ensemble
        .wait_for_all_serving(scaled(Duration::from_secs(480)))
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: the ensemble after the last heal: {e}"));
    let healed_at = Instant::now();
    println!(
        "SOAK nemesis done after {:.0} s: {} faults of {} scheduled; every member serving",
        began.elapsed().as_secs_f64(),
        log.len(),
        steps.len()
    );
    let bound = scaled(SESSION_TIMEOUT + Duration::from_secs(30));
    bed.probe(healed_at, bound).await;
    let stalled = bed
        .history
        .read(|e| stalls(e, &bed.locks, began, healed_at, STALL));

    let history = bed.history.clone();
    let locks = bed.locks.clone();
    let lost_replies: u64 = proxies.iter().map(|p| p.lost_replies()).sum();
    let recovered = support::events().get("recovered our node after a lost create reply");
    let report = bed
        .finish(
            Row {
                scenario: format!(
                    "soak: every recipe at once on a 5-member ensemble, a random nemesis for {secs} s (seed {seed})"
                ),
                policy: "Expiry (a third Suspension)",
                faults: format!("{} faults", log.len()),
            },
            SESSION_TIMEOUT + Duration::from_secs(10),
            bound,
        )
        .await;
    watching.await.unwrap();

    // The tables.
    let events = history.snapshot();
    let rows: Vec<(String, &'static str, String)> = locks
        .iter()
        .zip(KINDS)
        .zip(&contenders)
        .map(|((lock, kind), n)| (lock.clone(), kind.recipe(), n.clone()))
        .collect();
    println!("SOAK");
    let per_lock = print_recipes(&events, &rows, bound);
    println!("SOAK");
    print_faults(&log, lost_replies, recovered);
    let heals: Vec<(Instant, String)> = log
        .iter()
        .filter_map(|i| i.healed.map(|h| (h, format!("{} ({})", i.fault, i.target))))
        .collect();
    let worst = recoveries(&events, &locks, &heals)
        .into_iter()
        .max_by_key(|(took, _)| took.unwrap_or(Duration::MAX));
    println!("SOAK");
    if let Some((took, what)) = worst {
        let took = took.map_or("not before the end".into(), |t| {
            format!("{:.1} s", t.as_secs_f64())
        });
        println!(
            "SOAK longest recovery after a heal (until every lock had an acknowledged write; other faults may still have been on): {took}, after: {what}"
        );
    }
    println!("SOAK");
    print_stalls(&stalled, &log, began, healed_at);
    println!("SOAK");
    println!(
        "SOAK after the last heal every lock taken again by a fresh session within {:.1} s",
        report.recovery.unwrap_or_default().as_secs_f64()
    );
    println!(
        "SOAK totals: {} fenced increments ({} applied), {} grants, {} violations, {} updates lost; seed {seed}",
        report.writes,
        report.applied(),
        report.grants,
        report.violations.len(),
        report.lost
    );

    assert!(
        report.violations.is_empty(),
        "seed {seed} ({replay}): violations: {:#?}",
        report.violations
    );
    assert_eq!(report.lost, 0, "seed {seed} ({replay}): updates lost");
    for ((lock, _, _), r) in rows.iter().zip(&per_lock) {
        assert!(
            r.applied() > 0,
            "seed {seed} ({replay}): nothing written on {lock}: the soak proved nothing there"
        );
    }
    assert!(
        !log.is_empty() || secs < 5,
        "seed {seed}: no fault injected"
    );
}

/// A fault in a few words, with its target: `#23 cut member 2 (elect-4's holder's)`.
fn briefly(i: &Injected) -> String {
    use nemesis::schedule::Fault;
    let what = match i.fault {
        Fault::KillLeader { .. } | Fault::KillFollower { .. } => "kill",
        Fault::PauseHoldersServer { .. } => "pause",
        Fault::PartitionHoldersServer { .. } => "cut",
        Fault::ExpireSession { .. } => "expire the session of",
        Fault::LoseReply { write: false, .. } => "lose a create reply through",
        Fault::LoseReply { write: true, .. } => "lose a write reply through",
        Fault::FreezeClient { .. } => "freeze",
    };
    let target = i.target.split(" (to ").next().unwrap_or_default();
    format!("#{} {what} {target}", i.step)
}

/// Prints the stalls (`SOAK |...` rows) against the faults that were on during them (started
/// before a stall ended, healed after it began; a lost reply, armed, at its start). Stalls
/// that overlap in time are one row (the whole ensemble out stalls every lock at once).
/// Each row: the locks and how long each stalled, the faults with their spans from the
/// row's start, whether members were out at once, and the wait after the last heal: from
/// the last fault healed before a lock's stall ended to its end (the worst of the row's
/// locks), the recovery a user waits for once the ensemble is whole; "faults still on" when
/// the lock came back before every fault was over. `end` ends a stall still on at the last
/// heal.
fn print_stalls(stalled: &[Stall], log: &[Injected], began: Instant, end: Instant) {
    println!(
        "SOAK stalls: {} over {:.0} s (a lock without an acknowledged write), with the faults on during them",
        stalled.len(),
        STALL.as_secs_f64()
    );
    if stalled.is_empty() {
        return;
    }
    println!("SOAK | began | locks (stalled for) | faults on during it (from its start, s) | members out at once | after the last heal |");
    println!("SOAK | --- | --- | --- | --- | --- |");
    // Clusters of stalls overlapping in time (`stalled` is in the order they began).
    let mut rows: Vec<Vec<&Stall>> = Vec::new();
    for stall in stalled {
        let joins = rows.last().is_some_and(|row| {
            row.iter()
                .map(|s| s.to.unwrap_or(end))
                .max()
                .is_some_and(|to| stall.from < to)
        });
        match joins {
            true => rows.last_mut().unwrap().push(stall),
            false => rows.push(vec![stall]),
        }
    }
    let on_during = |from: Instant, to: Instant| -> Vec<&Injected> {
        log.iter()
            .filter(|i| i.started < to && i.healed.unwrap_or(i.started) >= from)
            .collect()
    };
    // The worst wait after the last heal: of any stall, and of one with one member out at a
    // time at most.
    let mut worst: [Option<(Duration, String)>; 2] = [None, None];
    for row in rows {
        let from = row.iter().map(|s| s.from).min().unwrap();
        let to = row.iter().map(|s| s.to.unwrap_or(end)).max().unwrap();
        let on = on_during(from, to);
        let at = |t: Instant| match t.checked_duration_since(from) {
            Some(d) => format!("+{:.1}", d.as_secs_f64()),
            None => format!("-{:.1}", (from - t).as_secs_f64()),
        };
        let faults: Vec<String> = on
            .iter()
            .map(|i| match i.healed {
                Some(h) if h > i.started => {
                    format!("{} [{}..{}]", briefly(i), at(i.started), at(h))
                }
                _ => format!("{} [{}]", briefly(i), at(i.started)),
            })
            .collect();
        // The most members out at once: at each member fault's start, those out then.
        let members: Vec<&Injected> = on
            .iter()
            .copied()
            .filter(|i| i.fault.hits_a_member())
            .collect();
        let most = members
            .iter()
            .map(|a| {
                members
                    .iter()
                    .filter(|b| b.started <= a.started && b.healed.is_none_or(|h| h > a.started))
                    .count()
            })
            .max()
            .unwrap_or(0);
        let mut after = Vec::new();
        for stall in &row {
            let Some(back) = stall.to else {
                after.push((None, stall));
                continue;
            };
            let healed = on_during(stall.from, back)
                .iter()
                .filter_map(|i| i.healed)
                .filter(|h| *h <= back)
                .max();
            let still = on_during(stall.from, back)
                .iter()
                .any(|i| i.healed.is_some_and(|h| h > back));
            after.push((healed.map(|h| (back - h, still)), stall));
        }
        let locks: Vec<String> = row
            .iter()
            .map(|s| format!("{} {:.1} s", s.lock, s.length(end).as_secs_f64()))
            .collect();
        let waited = after
            .iter()
            .filter_map(|(a, s)| a.map(|(d, still)| (d, still, s)))
            .max_by_key(|(d, _, _)| *d);
        let after = match (after.iter().any(|(a, _)| a.is_none()), waited) {
            (true, _) => "still stalled at the last heal".to_owned(),
            (false, None) => "no fault healed during it".to_owned(),
            (false, Some((d, still, stall))) => {
                let what = format!("{} after {}", stall.lock, faults.join(", "));
                for (k, slot) in worst.iter_mut().enumerate() {
                    if (k == 0 || most <= 1) && slot.as_ref().is_none_or(|(w, _)| d > *w) {
                        *slot = Some((d, what.clone()));
                    }
                }
                let still = if still { " (faults still on)" } else { "" };
                format!("{:.1} s{still}", d.as_secs_f64())
            }
        };
        println!(
            "SOAK | +{:.1} s | {} | {} | {most} | {after} |",
            from.duration_since(began).as_secs_f64(),
            locks.join(", "),
            match faults.is_empty() {
                true => "none".to_owned(),
                false => faults.join(", "),
            },
        );
    }
    let [any, single] = worst;
    for (label, worst) in [
        ("any stall", any),
        ("a stall with one member out at a time at most", single),
    ] {
        if let Some((took, what)) = worst {
            println!(
                "SOAK longest wait after the last heal, {label}: {:.1} s ({what})",
                took.as_secs_f64()
            );
        }
    }
}

/// A stall runs from a lock's last acknowledged accepted write to its next one (refused and
/// unanswered writes do not end it); one still on at the end of the window ends `None`.
#[test]
fn stalls_are_the_gaps_between_acknowledged_writes() {
    use support::history::{Events, Outcome, Write};
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let write = |lock: &str, done: u64, outcome: Outcome| Write {
        lock: lock.into(),
        token: 1,
        session: 1,
        worker: "w".into(),
        op: format!("{lock}-{done}"),
        believed_held: true,
        sent: Some(at(done)),
        done: Some(at(done)),
        outcome,
    };
    let mut e = Events::default();
    for s in [1, 2, 20, 21] {
        e.writes.push(write("a", s, Outcome::Accepted));
    }
    e.writes
        .push(write("a", 10, Outcome::Refused("lost".into())));
    e.writes.push(write("b", 3, Outcome::Accepted));
    let locks = ["a".to_owned(), "b".to_owned()];
    let found = stalls(&e, &locks, at(0), at(30), Duration::from_secs(10));
    let seen: Vec<(&str, Instant, Option<Instant>)> = found
        .iter()
        .map(|s| (s.lock.as_str(), s.from, s.to))
        .collect();
    assert_eq!(
        seen,
        vec![("a", at(2), Some(at(20))), ("b", at(3), None)],
        "{found:?}"
    );
}
