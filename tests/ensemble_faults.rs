//! The ensemble fault suite: contenders doing fenced increments on a few locks of a real
//! three-member ensemble while a fault hits (a killed leader, a follower cut off, a frozen
//! server, the whole ensemble down, lost replies, a frozen client process), then the fault
//! heals and the history is judged (see `support/history.rs` for the store and the
//! invariants): no violation, nothing lost, every lock acquirable again, no node left behind.
//! (`single_server_faults.rs` provokes one fault at a time around one lock on one server and
//! asserts what the mutex reports.)
//!
//! This file holds the scenarios (and the two worker modes that some of them run as child
//! processes); the test bed they share (ensembles, contenders, probes, the final reading of the
//! store and the table row) is `support/bed/`.
//!
//! Each scenario prints its row of the "Reliability" table in docs/reliability.md (`RELIABILITY |...`).
//! `ZK_FAULTS_SCALE=N` repeats each fault N times (and runs the workload longer); the default
//! of 1 keeps the whole file to a few minutes. With `ZK_CONNECT` set, nothing here can run
//! (it needs ensembles of its own to break), and each test says so.
//!
//! Loss policies: a scenario that needs the holder to stop *before* anyone else is granted
//! uses `LossPolicy::Suspension` (the follower cut off); the others use the default
//! `LossPolicy::Expiry`, under which a holder keeps its lock across disconnects its session
//! survives, and a holder that froze is stopped by the fence alone.

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::bed::report::{assert_clean, stale_outcomes, Row};
use support::bed::worker::{run_child_worker, CHILD_WORKER_VAR};
use support::bed::{
    ensemble, grant_of, loss_and_next_grant, newer_write, options, rounds, start_every_member,
    stop_every_member, writes_of, Bed, Kind, FREEZE_MARGIN,
};
use support::history::{Outcome, Write};
use support::within;
use zk_recipes::{LossPolicy, Session, ZkMutex};
use zk_testcontainers::{opcode, scaled};

/// Worker mode of `a_client_frozen_past_its_session_timeout_is_fenced_off` (this binary run
/// again, see `support::bed::worker::ChildContender`). Without its variable it has nothing
/// to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_worker_process() {
    let Ok(spec) = std::env::var(CHILD_WORKER_VAR) else {
        return;
    };
    run_child_worker(&spec).await;
}

// ---------------------------------------------------------------------------------------
// Scenarios

/// The leader is killed (SIGKILL) while the locks are held and contended; the two others
/// elect a new one and the locks go on; then the old leader comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_while_locks_are_held() {
    let Some(ensemble) = ensemble().await else {
        return;
    };
    let timeout = Duration::from_secs(8);
    let mut bed = Bed::new(&ensemble, "leader-killed", 2).await;
    let all = bed.all();
    bed.contenders(4, &all, timeout, LossPolicy::Expiry).await;
    let before = bed.session_ids();
    let mut healed_at = Instant::now();
    for _ in 0..rounds() {
        bed.wait_writes(Instant::now(), 10, 60).await;
        bed.wait_contended(0, 2).await;
        let leader = ensemble.leader_index().await.unwrap();
        let killed_at = Instant::now();
        ensemble.member(leader).kill().await.unwrap();
        ensemble
            .wait_for_quorum(scaled(Duration::from_secs(60)))
            .await
            .unwrap();
        // Locks work again without the old leader.
        bed.wait_writes(killed_at, 3, 60).await;
        println!(
            "leader {leader} killed; every lock written again after {:.1} s",
            killed_at.elapsed().as_secs_f64()
        );
        ensemble.member(leader).start_again().await.unwrap();
        ensemble
            .wait_for_all_serving(scaled(Duration::from_secs(60)))
            .await
            .unwrap();
        healed_at = Instant::now();
    }
    bed.probe(healed_at, scaled(Duration::from_secs(30))).await;
    let survived = before.len() - bed.sessions_replaced_since(&before);
    let report = bed
        .finish(
            Row {
                scenario:
                    "leader killed (SIGKILL) while locks are held and contended, then restarted"
                        .into(),
                policy: "Expiry",
                faults: format!(
                    "{} leader kill(s); {survived} of 4 sessions survived",
                    rounds()
                ),
            },
            timeout + Duration::from_secs(10),
            scaled(Duration::from_secs(30)),
        )
        .await;
    assert_clean(&report);
}

/// The follower that the holder's session is connected to (and only that one) is cut off
/// the network. Under `LossPolicy::Suspension` the holder stops as soon as it is cut off,
/// before its session expires on the others and the next contender is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holders_follower_cut_off() {
    let Some(ensemble) = ensemble().await else {
        return;
    };
    let timeout = Duration::from_secs(4);
    let policy = LossPolicy::Suspension;
    let mut bed = Bed::new(&ensemble, "follower-cut-off", 2).await;
    let mut healed_at = Instant::now();
    let mut stopped_first = 0;
    for round in 0..rounds() {
        let (follower, holder, held) = bed.isolated_holder(round, timeout, policy).await;
        let cut_at = Instant::now();
        ensemble.member(follower).disconnect().await.unwrap();
        // Healed once another contender has written under a newer token: the holder's
        // session has expired by then. The holder's worker may report its loss (stamped with
        // the moment it learned it) only after that write: a write of its own that was in
        // flight at the cut has to fail first.
        bed.wait("a newer holder's write and the holder's loss", 60, |e| {
            newer_write(e, &held.lock, &holder, held.token)
                && loss_and_next_grant(e, &holder, &held).0.is_some()
        })
        .await;
        let (lost_at, next_at) = bed.history.read(|e| loss_and_next_grant(e, &holder, &held));
        let (lost_at, next_at) = (lost_at.expect("the holder's loss"), next_at.unwrap());
        println!(
            "follower {follower} cut off: holder stopped after {:.2} s, next grant after {:.2} s",
            (lost_at - cut_at).as_secs_f64(),
            (next_at - cut_at).as_secs_f64()
        );
        assert!(
            lost_at < next_at,
            "the holder must stop before the next grant"
        );
        stopped_first += 1;
        ensemble.member(follower).reconnect().await.unwrap();
        ensemble
            .wait_for_all_serving(scaled(Duration::from_secs(60)))
            .await
            .unwrap();
        healed_at = Instant::now();
    }
    bed.probe(healed_at, scaled(Duration::from_secs(30))).await;
    let report = bed
        .finish(
            Row {
                scenario: "a follower serving the holder (its only server) cut off the network, reconnected".into(),
                policy: "Suspension",
                faults: format!(
                    "{} cut(s); holder stopped before the next grant {stopped_first} of {} times",
                    rounds(),
                    rounds()
                ),
            },
            timeout + Duration::from_secs(10),
            scaled(Duration::from_secs(30)),
        )
        .await;
    assert_clean(&report);
}

/// The holder's server (a follower, its only server) is frozen with `docker pause` for longer
/// than the session timeout. Under `LossPolicy::Expiry` the holder keeps believing it holds
/// until its own timer runs out; its writes are fenced off, the next holder's are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holders_server_paused_past_the_session_timeout() {
    let Some(ensemble) = ensemble().await else {
        return;
    };
    let timeout = Duration::from_secs(4);
    let policy = LossPolicy::Expiry;
    let mut bed = Bed::new(&ensemble, "server-paused", 2).await;
    let mut healed_at = Instant::now();
    let mut pauses = Vec::new();
    for round in 0..rounds() {
        let (frozen, holder, held) = bed.isolated_holder(round, timeout, policy).await;
        let paused_at = Instant::now();
        ensemble.member(frozen).pause().await.unwrap();
        bed.wait("a newer holder's write", 60, |e| {
            newer_write(e, &held.lock, &holder, held.token)
        })
        .await;
        // The session may have expired a little under a timeout after the pause (it counts
        // from the holder's last request): keep the server frozen past the timeout anyway.
        tokio::time::sleep_until((paused_at + timeout + FREEZE_MARGIN).into()).await;
        ensemble.member(frozen).unpause().await.unwrap();
        let paused = paused_at.elapsed();
        pauses.push(format!("{:.1} s", paused.as_secs_f64()));
        assert!(
            paused > timeout,
            "paused {paused:?}: not past the session timeout"
        );
        ensemble
            .wait_for_all_serving(scaled(Duration::from_secs(60)))
            .await
            .unwrap();
        healed_at = Instant::now();
    }
    bed.probe(healed_at, scaled(Duration::from_secs(30))).await;
    let report = bed
        .finish(
            Row {
                scenario: "the holder's server (its only one) frozen with docker pause past the session timeout, unpaused".into(),
                policy: "Expiry",
                faults: format!("{} pause(s) of {} (session timeout 4 s)", rounds(), pauses.join(", ")),
            },
            timeout + Duration::from_secs(10),
            scaled(Duration::from_secs(30)),
        )
        .await;
    assert_clean(&report);
}

/// Every member stopped, then started again: first for a moment (sessions survive, and so do
/// the locks they hold), then for longer than the session timeout (sessions expire; the
/// servers expire them too, one session timeout after they are back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_ensemble_stopped_and_started_again() {
    let Some(ensemble) = ensemble().await else {
        return;
    };
    // Short: well within a 20 s session timeout.
    let timeout = scaled(Duration::from_secs(20));
    let mut bed = Bed::new(&ensemble, "short-outage", 2).await;
    let all = bed.all();
    bed.contenders(4, &all, timeout, LossPolicy::Expiry).await;
    let before = bed.session_ids();
    let mut outages = Vec::new();
    let mut healed_at = Instant::now();
    for _ in 0..rounds() {
        bed.wait_writes(Instant::now(), 10, 60).await;
        let down_at = Instant::now();
        stop_every_member(&ensemble).await;
        start_every_member(&ensemble).await;
        healed_at = Instant::now();
        outages.push(format!("{:.1} s", (healed_at - down_at).as_secs_f64()));
    }
    bed.probe(healed_at, scaled(Duration::from_secs(30))).await;
    let expired = bed.sessions_replaced_since(&before);
    let report = bed
        .finish(
            Row {
                scenario:
                    "whole ensemble stopped and started again, short outage (sessions survive)"
                        .into(),
                policy: "Expiry",
                faults: format!(
                    "{} outage(s) of {} (session timeout {:.0} s); {expired} of 4 sessions expired",
                    rounds(),
                    outages.join(", "),
                    timeout.as_secs_f64()
                ),
            },
            Duration::from_secs(30),
            scaled(Duration::from_secs(30)),
        )
        .await;
    assert_clean(&report);
    assert_eq!(expired, 0, "a short outage must not expire sessions");

    // Long: the clients give their sessions up after 3 s without a server.
    let timeout = Duration::from_secs(3);
    let mut bed = Bed::new(&ensemble, "long-outage", 2).await;
    let all = bed.all();
    bed.contenders(4, &all, timeout, LossPolicy::Expiry).await;
    let mut outages = Vec::new();
    let mut expired = 0;
    for _ in 0..rounds() {
        bed.wait_writes(Instant::now(), 10, 60).await;
        let before = bed.session_ids();
        let down_at = Instant::now();
        stop_every_member(&ensemble).await;
        // Down until every contender has given its session up.
        bed.wait_sessions_given_up().await;
        start_every_member(&ensemble).await;
        healed_at = Instant::now();
        outages.push(format!("{:.1} s", (healed_at - down_at).as_secs_f64()));
        bed.wait_writes(healed_at, 1, 60).await;
        expired += bed.sessions_replaced_since(&before);
    }
    bed.probe(healed_at, scaled(timeout + Duration::from_secs(30)))
        .await;
    let report = bed
        .finish(
            Row {
                scenario: "whole ensemble stopped and started again, long outage (sessions expire)"
                    .into(),
                policy: "Expiry",
                faults: format!(
                    "{} outage(s) of {} (session timeout 3 s); {expired} sessions expired",
                    rounds(),
                    outages.join(", ")
                ),
            },
            timeout + Duration::from_secs(10),
            scaled(timeout + Duration::from_secs(30)),
        )
        .await;
    assert_clean(&report);
    assert_eq!(
        expired,
        4 * rounds(),
        "every session expires in a long outage"
    );
}

/// Two contenders reach the ensemble through a `FaultProxy` that loses replies: to the
/// create of a lock node (the library must find its node by its uuid, on the same session)
/// and to a fenced write (done, but the client cannot know: the store says).
///
/// Counts the library's events, so it runs on a runtime of its own (`support::counting_events`).
#[test]
fn lost_replies_to_creates_and_fenced_writes() {
    support::counting_events(lost_replies_to_creates_and_fenced_writes_body());
}

async fn lost_replies_to_creates_and_fenced_writes_body() {
    let Some(ensemble) = ensemble().await else {
        return;
    };
    let timeout = Duration::from_secs(8);
    let mut bed = Bed::new(&ensemble, "lost-replies", 2).await;
    let mut proxies = Vec::new();
    for i in 0..2 {
        let (proxy, through) = bed.through_proxy(i).await;
        bed.contender(
            &format!("victim{i}"),
            &through,
            timeout,
            LossPolicy::Expiry,
            i,
            false,
        )
        .await;
        proxies.push(proxy);
    }
    let all = bed.all();
    bed.contenders(2, &all, timeout, LossPolicy::Expiry).await;
    let mut lost = [0u64; 2];
    let (mut creates, mut writes) = (0, 0);
    for k in 0..4 * rounds() {
        bed.wait_writes(Instant::now(), 3, 60).await;
        let proxy = &proxies[k % 2];
        if (k / 2) % 2 == 0 {
            proxy.lose_next_reply(|r| r.create_path().is_some_and(|p| p.ends_with("lock-")));
            creates += 1;
        } else {
            proxy.lose_next_reply(|r| r.opcode() == opcode::MULTI && r.contains(b"/ops/"));
            writes += 1;
        }
        lost[k % 2] += 1;
        within("a lost reply", 60, proxy.wait_for_lost_replies(lost[k % 2])).await;
    }
    let healed_at = Instant::now();
    bed.probe(healed_at, scaled(Duration::from_secs(30))).await;
    let recovered = support::events().get("recovered our node after a lost create reply");
    let report = bed
        .finish(
            Row {
                scenario: "replies lost through a FaultProxy: to lock-node creates and to fenced writes".into(),
                policy: "Expiry",
                faults: format!(
                    "{creates} create replies lost ({recovered} nodes recovered by uuid), {writes} fenced-write replies lost"
                ),
            },
            timeout + Duration::from_secs(10),
            scaled(Duration::from_secs(30)),
        )
        .await;
    assert_clean(&report);
    assert_eq!(
        recovered, creates,
        "every lost create was recovered by its uuid"
    );
    assert!(
        report.unknown_done >= writes,
        "lost fenced-write replies show as unknown, resolved done"
    );
}

/// A holder process is frozen with SIGSTOP past its session timeout; another contender is
/// granted and writes; the holder is resumed with SIGCONT and, not looking at `lost()`, goes
/// on writing with its old token: the store must refuse it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_frozen_past_its_session_timeout_is_fenced_off() {
    frozen_client_fenced_off("sigstop", Kind::Mutex, "").await;
}

/// The same with the frozen holder on a key of a lock space (zxid tokens).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_lock_holder_frozen_past_its_session_timeout_is_fenced_off() {
    frozen_client_fenced_off(
        "sigstop-keyed",
        Kind::Keyed,
        " (its lock a key of a ZkLockSpace)",
    )
    .await;
}

async fn frozen_client_fenced_off(name: &str, frozen_on: Kind, what: &str) {
    let Some(ensemble) = ensemble().await else {
        return;
    };
    let timeout = Duration::from_secs(3);
    let other = match frozen_on {
        Kind::Mutex => Kind::Keyed,
        _ => Kind::Mutex,
    };
    let mut bed = Bed::with_locks(&ensemble, name, &[frozen_on, other]).await;
    let all = bed.all();
    let mut refusals = Vec::new();
    let mut started = false;
    for round in 0..rounds() {
        let child = bed.child_contender(&format!("child{round}"), &all, timeout, 0);
        let name = child.name.clone();
        bed.wait("the child's grant and writes", 60, |e| {
            writes_of(e, &name)
                .filter(|w| w.outcome == Outcome::Accepted)
                .count()
                >= 3
        })
        .await;
        let held = bed.history.read(|e| grant_of(e, &name)).unwrap();
        if !started {
            started = true;
            bed.contenders(4, &all, timeout, LossPolicy::Expiry).await;
        }
        bed.wait_contended(0, 3).await;
        child.freeze();
        let stopped_at = Instant::now();
        let seen_before = bed.history.read(|e| writes_of(e, &name).count());
        bed.wait("a newer holder's write", 60, |e| {
            newer_write(e, &held.lock, &name, held.token)
        })
        .await;
        tokio::time::sleep_until((stopped_at + timeout + FREEZE_MARGIN).into()).await;
        child.resume();
        let frozen = stopped_at.elapsed();
        assert!(
            frozen > timeout,
            "frozen {frozen:?}: not past the session timeout"
        );
        // The child writes on with its old token until refused (a write that was in flight at
        // the freeze may come back first, as unknown or accepted: the store's log says where
        // it landed).
        bed.wait("the child's stale write refused", 60, |e| {
            writes_of(e, &name)
                .skip(seen_before)
                .any(|w| matches!(w.outcome, Outcome::Refused(_)))
        })
        .await;
        let stale: Vec<Write> = bed
            .history
            .read(|e| writes_of(e, &name).skip(seen_before).cloned().collect());
        for w in &stale {
            println!(
                "child after SIGCONT: token {} believed held: {}, {:?}",
                w.token, w.believed_held, w.outcome
            );
        }
        refusals.push(format!(
            "token {} wrote on: {}",
            held.token,
            stale_outcomes(&stale)
        ));
        child.stop().await;
        println!(
            "child frozen for {:.1} s (session timeout 3 s)",
            frozen.as_secs_f64()
        );
    }
    let healed_at = Instant::now();
    bed.probe(healed_at, scaled(Duration::from_secs(30))).await;
    let report = bed
        .finish(
            Row {
                scenario: format!("a holder process{what} frozen with SIGSTOP past its session timeout, resumed with SIGCONT, writing on with its old token"),
                policy: "Expiry",
                faults: format!("{} freeze(s) past the 3 s session timeout; after SIGCONT {}", rounds(), refusals.join("; ")),
            },
            timeout + Duration::from_secs(10),
            scaled(Duration::from_secs(30)),
        )
        .await;
    assert_clean(&report);
}

/// A process that closes its session and exits at once must leave no lock node behind:
/// `Session::close` says the ephemeral nodes "are deleted at once". The session timeout is
/// long (20 s), so a node that outlives the process by seconds went with the server's expiry,
/// not with the close. One server is enough.
///
/// (Found by this suite: `close()` used to return before zookeeper-client had sent
/// `closeSession`, and about 6 runs of 10 left the node for the whole 20 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_closed_just_before_its_process_exits_leaves_no_lock_node() {
    let zk = support::Zk::start("close-then-exit").await;
    let raw = zk.raw().await;
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        let child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "close_and_exit_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ZK_FAULTS_CLOSE_AND_EXIT", &zk.connect)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let out = within("the child to exit", 60, child.wait_with_output())
            .await
            .unwrap();
        assert!(out.status.success(), "child: {}", out.status);
        assert!(String::from_utf8_lossy(&out.stdout).contains("CLOSED"));
        let exited = Instant::now();
        support::wait_children(&raw, "/locks/close", 0).await;
        println!(
            "lock node gone {:?} after the process exited",
            exited.elapsed()
        );
        slowest = slowest.max(exited.elapsed());
    }
    println!("lock node gone at most {slowest:?} after the process exited");
    assert!(
        slowest < scaled(Duration::from_secs(5)),
        "the lock node outlived its closed session by {slowest:?}: it went with the \
         session's expiry (20 s), not with Session::close"
    );
}

/// Worker mode of the test above: locks, closes the session, exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_and_exit_process() {
    let Ok(connect) = std::env::var("ZK_FAULTS_CLOSE_AND_EXIT") else {
        return;
    };
    let session = Session::connect(options(
        &connect,
        Duration::from_secs(20),
        LossPolicy::Expiry,
    ))
    .await
    .unwrap();
    let mutex = ZkMutex::new(&session, "/locks/close").unwrap();
    let guard = mutex.lock().await.unwrap();
    println!("HELD {}", guard.token());
    // The worker's last act: close the session (which "deletes every lock held through it at
    // once"), then leave.
    session.close().await;
    println!("CLOSED");
    // What returning from `main` does, without the grace of the runtime's shutdown.
    drop(guard);
    std::process::exit(0);
}
