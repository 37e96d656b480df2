//! The lease clock (issue #22): a holder that froze acts on nothing when it wakes.
//!
//! - A leader in a child process under `LossPolicy::Suspension`, running a job every 50 ms, is
//!   frozen with SIGSTOP until another candidate leads (its session expired on the server),
//!   then resumed: with `ZkLeaderElection::lead` and with a loop that checks `is_held()` before
//!   each action, **no action after the resume**; a loop that only races `lost()` (the control:
//!   what the README advised before) acts again, so the test can tell the two apart.
//! - After the resume, `confirm()` says lost; on a healthy session it answers in one round trip
//!   with the lease that remains.
//! - A grant's `is_held()` turns false once the lease clock runs out while the ensemble is
//!   silent (its server paused), and true again when it answers, under `LossPolicy::Expiry`.
//!
//! - The heartbeat's cost, counted with the server's own per-connection counters: one request
//!   per third of the timeout while a lock is held, none while nothing is (the client's own
//!   pings aside, which every idle ZooKeeper connection sends).
//!
//! `ZK_FREEZE_RUNS` sets the freezes per mode (default 3).

#[path = "support/cons.rs"]
mod cons;
mod support;

use std::ops::ControlFlow;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::{within, Zk};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use zk_recipes::{LossPolicy, Session, SessionOptions, ZkLeaderElection, ZkMutex};
use zk_testcontainers::scaled;

const CHILD_VAR: &str = "ZK_LEASE_CHILD";
const SESSION: Duration = Duration::from_secs(2);
const ROOT: &str = "/election/scheduler";

fn runs() -> usize {
    std::env::var("ZK_FREEZE_RUNS")
        .ok()
        .map(|v| v.parse().expect("ZK_FREEZE_RUNS: a number"))
        .unwrap_or(3)
}

/// How the child's leader acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `ZkLeaderElection::lead`, the job acting every 50 ms.
    Lead,
    /// `campaign`, then a loop that checks `is_held()` before each action.
    Check,
    /// `campaign`, then a loop raced against `lost()` only (the control).
    Naive,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Lead => "lead",
            Mode::Check => "check",
            Mode::Naive => "naive",
        }
    }

    fn parse(s: &str) -> Mode {
        match s {
            "lead" => Mode::Lead,
            "check" => Mode::Check,
            _ => Mode::Naive,
        }
    }
}

/// The child: leads (or campaigns) and prints `LEADER`, then `ACT n` for each action, `STOP`
/// when it notices, and `CONFIRM ...` for a `confirm()` after that.
#[tokio::test]
async fn lease_child() {
    let Ok(spec) = std::env::var(CHILD_VAR) else {
        return;
    };
    let (connect, mode) = spec.split_once('|').unwrap();
    let mode = Mode::parse(mode);
    let options = SessionOptions::new(connect)
        .session_timeout(SESSION)
        .loss_policy(LossPolicy::Suspension);
    let session = Session::connect(options).await.unwrap();
    let election = ZkLeaderElection::new(&session, ROOT, "child").unwrap();
    let act = |n: u64| println!("ACT {n}");
    match mode {
        Mode::Lead => {
            election
                .lead(|leadership| async move {
                    println!("LEADER {}", leadership.term());
                    let mut tick = tokio::time::interval(Duration::from_millis(50));
                    for n in 0.. {
                        tick.tick().await;
                        act(n);
                    }
                    ControlFlow::<()>::Break(())
                })
                .await
                .unwrap();
        }
        Mode::Check | Mode::Naive => {
            let leadership = election.campaign().await.unwrap();
            println!("LEADER {}", leadership.term());
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            let work = async {
                for n in 0.. {
                    tick.tick().await;
                    if mode == Mode::Check && !leadership.is_held() {
                        return;
                    }
                    act(n);
                }
            };
            tokio::select! {
                biased;
                reason = leadership.lost() => println!("LOST {reason:?}"),
                _ = work => println!("STOP"),
            }
            println!("CONFIRM {:?}", leadership.confirm().await.map(|_| ()));
        }
    }
}

/// The child leader in `mode`, acting: the process, its pid and its output lines.
async fn acting_child(
    zk: &Zk,
    mode: Mode,
) -> (tokio::process::Child, i32, mpsc::UnboundedReceiver<String>) {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "lease_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, format!("{}|{}", zk.connect, mode.name()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap() as i32;
    let (tx, mut lines) = mpsc::unbounded_channel();
    let stdout = child.stdout.take().unwrap();
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    within("the child's first actions", 30, async {
        let mut acts = 0;
        while acts < 3 {
            let line = lines.recv().await.expect("the child's output");
            acts += usize::from(line.starts_with("ACT"));
        }
    })
    .await;
    (child, pid, lines)
}

/// What the child prints after its resume, up to its `CONFIRM` line (or a time limit).
async fn after_resume(lines: &mut mpsc::UnboundedReceiver<String>, secs: u64) -> Vec<String> {
    let mut after = Vec::new();
    let deadline = tokio::time::Instant::now() + scaled(Duration::from_secs(secs));
    while let Ok(Some(line)) = tokio::time::timeout_at(deadline, lines.recv()).await {
        let done = line.starts_with("CONFIRM");
        after.push(line);
        if done {
            break;
        }
    }
    after
}

/// One freeze: the child leads, is frozen until a candidate of ours leads, and resumed. The
/// child's actions after the resume, and what it printed then.
async fn freeze_once(zk: &Zk, mode: Mode) -> (usize, Vec<String>) {
    let (mut child, pid, mut lines) = acting_child(zk, mode).await;
    // SAFETY: a plain kill(2) of our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let stopped = Instant::now();
    // A candidate of ours leads once the child's session expired on the server.
    let session = zk.session().await;
    let election = ZkLeaderElection::new(&session, ROOT, "parent").unwrap();
    let leadership = within("our candidate's election", 30, election.campaign())
        .await
        .unwrap();
    // Whatever the child printed before the freeze is read by now.
    tokio::time::sleep(Duration::from_millis(200)).await;
    while lines.try_recv().is_ok() {}
    // The server counts the session from the child's last packet, up to a ping interval
    // before the SIGSTOP, so our candidate may lead a little before a whole session timeout
    // of freeze: the freeze lasts at least that long all the same.
    let past = SESSION + Duration::from_millis(50);
    if let Some(left) = past.checked_sub(stopped.elapsed()) {
        tokio::time::sleep(left).await;
    }
    assert!(stopped.elapsed() > SESSION, "not frozen past the session");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let after = after_resume(&mut lines, 2).await;
    let acts = after.iter().filter(|l| l.starts_with("ACT")).count();
    println!(
        "{}: frozen {:?}, after the resume: {acts} action(s), then {:?}",
        mode.name(),
        stopped.elapsed(),
        after
            .iter()
            .filter(|l| !l.starts_with("ACT"))
            .collect::<Vec<_>>()
    );
    let _ = child.kill().await;
    leadership.release().await.unwrap();
    session.close().await;
    (acts, after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_acts_on_nothing_when_it_resumes() {
    let zk = Zk::start("lease-freeze").await;
    let mut naive = Vec::new();
    for run in 0..runs() {
        for mode in [Mode::Lead, Mode::Check, Mode::Naive] {
            let (acts, after) = freeze_once(&zk, mode).await;
            match mode {
                Mode::Naive => naive.push(acts),
                _ => assert_eq!(
                    acts,
                    0,
                    "run {run}, {}: actions after the resume: {after:?}",
                    mode.name()
                ),
            }
            if mode == Mode::Check {
                let confirm = after.iter().find(|l| l.starts_with("CONFIRM"));
                assert!(
                    confirm.is_some_and(|c| c.contains("Err")),
                    "run {run}: confirm() after the freeze: {confirm:?}"
                );
            }
        }
    }
    println!("the control (lost() only): actions after each resume: {naive:?}");
    assert!(
        naive.iter().any(|&n| n > 0),
        "the control never acted after a resume: the freeze did not reproduce the problem"
    );
}

#[tokio::test]
async fn confirm_answers_in_one_round_trip_with_the_lease_that_remains() {
    let zk = Zk::start("lease-confirm").await;
    let session = Session::connect(zk.options().session_timeout(Duration::from_secs(4)))
        .await
        .unwrap();
    let mutex = ZkMutex::new(&session, "/locks/confirm").unwrap();
    let guard = mutex.lock().await.unwrap();
    let timeout = Duration::from_secs(4);
    for _ in 0..5 {
        let started = Instant::now();
        let left = guard.confirm().await.unwrap();
        let took = started.elapsed();
        assert!(left > Duration::ZERO && left <= timeout, "left {left:?}");
        // The lease is renewed from the send: at least the lease span minus the round trip.
        assert!(
            left + took >= timeout * 2 / 3 - Duration::from_millis(50),
            "left {left:?} after {took:?}"
        );
        assert!(guard.is_held());
    }
    // A node someone else deleted: confirm says lost.
    let raw = zk.raw().await;
    raw.delete(guard.path(), None).await.unwrap();
    let err = guard.confirm().await.unwrap_err();
    assert!(matches!(err, zk_recipes::Error::Lost { .. }), "{err:?}");
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_held_is_false_while_the_lease_has_run_out_and_true_again_once_answered() {
    let zk = Zk::start("lease-silent").await;
    let Some(server) = zk.server.server() else {
        println!("not run: ZK_CONNECT is set, and this test must pause the server itself");
        return;
    };
    let session = Session::connect(zk.options().session_timeout(Duration::from_secs(6)))
        .await
        .unwrap();
    let mutex = ZkMutex::new(&session, "/locks/silent").unwrap();
    let guard = mutex.lock().await.unwrap();
    assert!(guard.is_held());
    // The server stops answering (paused), for less than the session timeout.
    server.pause().await.unwrap();
    let paused = Instant::now();
    within("is_held() false while the server is silent", 10, async {
        while guard.is_held() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let after = paused.elapsed();
    // The lease runs two thirds of the timeout from the last renewal (at most a third ago).
    assert!(
        after <= Duration::from_secs(4) + Duration::from_millis(500),
        "is_held() turned false only {after:?} into the silence"
    );
    server.unpause().await.unwrap();
    within("is_held() true again once the server answers", 10, async {
        while !guard.is_held() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    guard.release().await.unwrap();
    session.close().await;
}

/// A freeze shorter than the session (it survives on the server) but past the lease, under
/// `Suspension`: the leader resumed acts on nothing and its grant is lost for good, although
/// the next answer would renew the session's lease (the lapse is counted when seen late).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_past_the_lease_but_not_the_session_is_a_loss_under_suspension() {
    let zk = Zk::start("lease-short-freeze").await;
    let (mut child, pid, mut rx) = acting_child(&zk, Mode::Check).await;
    // SAFETY: kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // Past the lease (two thirds of the session) but well inside the session.
    tokio::time::sleep(SESSION * 4 / 5).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    while rx.try_recv().is_ok() {}
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let after = after_resume(&mut rx, 3).await;
    println!("after the resume: {after:?}");
    assert!(
        !after.iter().any(|l| l.starts_with("ACT")),
        "actions after the resume: {after:?}"
    );
    assert!(
        after.iter().any(|l| l.starts_with("CONFIRM Err")),
        "the grant should be lost for good: {after:?}"
    );
    let _ = child.kill().await;
}

/// What the server counted on one session's connection over a window: requests (pings aside)
/// and pings.
#[derive(Debug)]
struct Traffic {
    requests: i64,
    pings: i64,
}

impl Traffic {
    fn between(before: &cons::Conn, after: &cons::Conn) -> Traffic {
        assert_eq!(
            before.peer, after.peer,
            "the session reconnected during the window: its counts started again"
        );
        let requests = after.lcxid - before.lcxid;
        let packets = i64::try_from(after.recved - before.recved).unwrap();
        Traffic {
            requests,
            pings: packets - requests,
        }
    }
}

/// The heartbeat's cost, counted by the server (`cons`: packets received and the last request
/// number of each connection): over three session timeouts, a session holding a lock sends
/// one request per third of the timeout (nine, give or take one: the window's two ends each
/// cut a period; the client schedules each heartbeat from the previous send, so its own lag
/// is a few milliseconds per period, not a drift), and a session of the same process that
/// holds nothing sends none, nor does the first once it released; both send the
/// client's pings, which every idle ZooKeeper connection sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_costs_one_request_per_third_of_the_timeout_while_held_and_none_idle() {
    let zk = Zk::start("lease-heartbeat-cost").await;
    let host = zk.server.connect_string();
    let options = || zk.options().session_timeout(SESSION);
    let holder = Session::connect(options()).await.unwrap();
    let idle = Session::connect(options()).await.unwrap();
    let (held_sid, idle_sid) = (holder.session_id().unwrap(), idle.session_id().unwrap());
    let mutex = ZkMutex::new(&holder, "/locks/heartbeat").unwrap();
    let guard = mutex.lock().await.unwrap();
    let window = SESSION * 3;
    let period = SESSION / 3;

    let count = |sid| cons::of_session(&host, sid);
    let (held0, idle0) = (
        count(held_sid).await.unwrap(),
        count(idle_sid).await.unwrap(),
    );
    let started = Instant::now();
    // The window is what is measured: the time itself. Meanwhile the lease that a check
    // (`is_held()`) would find, sampled every 5 ms.
    let mut lease = (Duration::MAX, Duration::ZERO);
    let mut sample = tokio::time::interval(Duration::from_millis(5));
    while started.elapsed() < window {
        sample.tick().await;
        let left = guard
            .lease_remaining()
            .expect("the lease ran out while held");
        lease = (lease.0.min(left), lease.1.max(left));
    }
    let (held1, idle1) = (
        count(held_sid).await.unwrap(),
        count(idle_sid).await.unwrap(),
    );
    let elapsed = started.elapsed();
    let (held, idle_traffic) = (
        Traffic::between(&held0, &held1),
        Traffic::between(&idle0, &idle1),
    );
    assert!(guard.is_held());
    guard.release().await.unwrap();

    // The same session once it released: nothing held, nothing sent. The release's own
    // requests (its delete, then zookeeper-client's RemoveWatches for the grant's watches as
    // they drop) go out within milliseconds of it, so the window starts a heartbeat period
    // later: a heartbeat that went on would still be due nine times in it.
    tokio::time::sleep(period).await;
    let released0 = count(held_sid).await.unwrap();
    tokio::time::sleep(window).await;
    let released1 = count(held_sid).await.unwrap();
    let released = Traffic::between(&released0, &released1);

    let expected = (elapsed.as_secs_f64() / period.as_secs_f64()).round() as i64;
    println!(
        "heartbeat cost over {elapsed:.1?} ({} session timeouts of {SESSION:?}, a period of \
         {period:?}: {expected} expected): holding a lock {held:?}; a session holding nothing \
         {idle_traffic:?}; the holder after its release {released:?}",
        window.as_secs() / SESSION.as_secs()
    );
    println!(
        "the lease a check found while held: {:?} to {:?}",
        lease.0, lease.1
    );
    // The heartbeat goes out when a third of the lease's two thirds has run: a check always
    // finds at least a third of the timeout left, less the heartbeat's round trip and lag.
    assert!(
        lease.0 >= period - SESSION / 10 && lease.1 <= SESSION * 2 / 3,
        "the lease a check found: {lease:?}"
    );
    assert!(
        (expected - 1..=expected + 1).contains(&held.requests),
        "{} requests while holding, expected {expected} +- 1",
        held.requests
    );
    // The counters do count on an idle connection: the client's pings are there.
    assert!(
        idle_traffic.pings > 0 && released.pings > 0,
        "no pings counted"
    );
    assert_eq!(
        idle_traffic.requests, 0,
        "a session holding nothing sent requests"
    );
    assert_eq!(
        released.requests, 0,
        "the holder sent requests after its release"
    );
    holder.close().await;
    idle.close().await;
}

/// A grant lost to a disconnect says `Suspended`, even when `lost()` is asked only after the
/// lease has run out as well: the reason is what ended the grant first, not the lease's state
/// when someone asks. (A lapse that comes first says `LeaseExpired`: the freeze tests above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_lost_to_a_disconnect_says_suspended_after_the_lease_runs_out_too() {
    let zk = Zk::start("lease-reason").await;
    let (host, chroot) = zk.connect.split_at(zk.connect.find('/').unwrap());
    let proxy = zk_testcontainers::FaultProxy::start(host).await.unwrap();
    let session = Session::connect(
        SessionOptions::new(format!("{}{}", proxy.addr(), chroot))
            .session_timeout(SESSION * 2)
            .connection_timeout(scaled(Duration::from_secs(10)))
            .loss_policy(LossPolicy::Suspension),
    )
    .await
    .unwrap();
    let mutex = ZkMutex::new(&session, "/locks/reason").unwrap();
    let guard = mutex.lock().await.unwrap();
    let mut state = session.watch_state();
    proxy.blackhole();
    within("the client to see the disconnect", 30, async {
        state
            .wait_for(|s| matches!(s, zk_recipes::SessionState::Suspended { .. }))
            .await
            .unwrap();
    })
    .await;
    // Seen before the lease ran out (else the lapse came first, and the test proves nothing).
    let left = guard.lease_remaining();
    assert!(
        left.is_some(),
        "the disconnect was seen after the lease's end"
    );
    // Past the lease's end, then back.
    tokio::time::sleep(left.unwrap() + Duration::from_millis(100)).await;
    assert_eq!(guard.lease_remaining(), None);
    assert!(!guard.is_held());
    proxy.heal();
    within("the session back", 30, async {
        state
            .wait_for(|s| matches!(s, zk_recipes::SessionState::Connected { .. }))
            .await
            .unwrap();
    })
    .await;
    assert_eq!(
        within("lost()", 10, guard.lost()).await,
        zk_recipes::LossReason::Suspended
    );
    session.close().await;
}
