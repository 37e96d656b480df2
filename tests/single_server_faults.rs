//! ZkMutex under faults on a single server, and under bad input: expired and vanished holders,
//! lost create replies, operator deletions, refused ACLs, unsuitable roots, unreachable
//! ensembles. Each test provokes one fault around one lock and asserts what the mutex reports.
//! (`ensemble_faults.rs` breaks three-member ensembles under a fenced-write workload instead,
//! and judges the whole history.)

mod support;

use std::time::{Duration, Instant};

use support::{contenders, events, spawn_self, wait_children, within, Zk};
use zk_recipes::{Error, LossReason, RootKind, Session, SessionOptions, SessionState, ZkMutex};
use zk_testcontainers::{expire_session, scaled, FaultProxy};
use zookeeper_client as zkc;

const ROOT: &str = "/locks/faults";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_holder_loses_and_the_next_waiter_acquires() {
    let zk = Zk::start("expire-holder").await;
    let holder = zk.session().await;
    let waiter = zk.session().await;
    let held = ZkMutex::new(&holder, ROOT).unwrap();
    let guard = held.lock().await.unwrap();
    let old_token = guard.token();
    let next = ZkMutex::new(&waiter, ROOT).unwrap();
    let waiting = tokio::spawn(lock_once(next));

    let raw = zk.raw().await;
    wait_children(&raw, ROOT, 2).await;
    let expired_id = holder.session_id().unwrap();
    expire(&zk, &holder).await;

    assert_eq!(
        within("lost() after expiry", 20, guard.lost()).await,
        LossReason::SessionExpired
    );
    assert!(!guard.is_held());
    let (token, _) = within("the waiter's grant", 20, waiting).await.unwrap();
    assert!(token > old_token);
    // The session opened a new ZooKeeper session for new work.
    let mut states = holder.watch_state();
    within(
        "a new session",
        20,
        states.wait_for(
            |s| matches!(s, SessionState::Connected { session_id } if *session_id != expired_id),
        ),
    )
    .await
    .unwrap();
    assert!(matches!(guard.release().await, Err(Error::SessionExpired)));
    let again = within("lock on the new session", 20, held.lock())
        .await
        .unwrap();
    assert!(again.token() > token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_session_expires_enqueues_again_and_leaves_nothing_behind() {
    let zk = Zk::start("expire-waiter").await;
    let raw = zk.raw().await;
    let guard = hold(&zk).await;
    let waiter = zk.session().await;
    let mutex = ZkMutex::new(&waiter, ROOT).unwrap();
    let waiting = tokio::spawn(lock_once(mutex));
    wait_children(&raw, ROOT, 2).await;
    let old_id = waiter.session_id().unwrap();
    expire(&zk, &waiter).await;
    // The expired node goes, the waiter enqueues again on its new session.
    let mut states = waiter.watch_state();
    let renewed = states
        .wait_for(|s| matches!(s, SessionState::Connected { session_id } if *session_id != old_id));
    within("waiter's new session", 20, renewed).await.unwrap();
    wait_children(&raw, ROOT, 2).await;
    guard.release().await.unwrap();
    let (token, session_id) = within("the re-enqueued waiter's grant", 20, waiting)
        .await
        .unwrap();
    assert_eq!(Some(session_id), waiter.session_id());
    assert!(token.as_u64() >= 2);
    wait_children(&raw, ROOT, 0).await;
}

/// A waiter may skip the listing only after a head release. A waiter ahead of it that is
/// cancelled, or whose session expires, goes with a plain deletion: the one behind lists again
/// and keeps waiting for the holder, who is still there.
///
/// Counts the library's events, so it runs on a runtime of its own (`support::counting_events`).
#[test]
fn a_waiter_behind_a_cancelled_or_expired_waiter_looks_again_and_waits_for_the_holder() {
    support::counting_events(
        a_waiter_behind_a_cancelled_or_expired_waiter_looks_again_and_waits_for_the_holder_body(),
    );
}

async fn a_waiter_behind_a_cancelled_or_expired_waiter_looks_again_and_waits_for_the_holder_body() {
    let zk = Zk::start("plain-deletions").await;
    let counter = events();
    let raw = zk.raw().await;
    let guard = hold(&zk).await;
    let first = zk.session().await;
    let first_mutex = ZkMutex::new(&first, ROOT).unwrap();
    let cancelled = tokio::spawn(async move { first_mutex.lock().await.map(|_| ()) });
    wait_children(&raw, ROOT, 2).await;
    let second = zk.session().await;
    let second_waiting = tokio::spawn(lock_once(ZkMutex::new(&second, ROOT).unwrap()));
    wait_children(&raw, ROOT, 3).await;
    let third = zk.session().await;
    let third_waiting = tokio::spawn(lock_once(ZkMutex::new(&third, ROOT).unwrap()));
    wait_children(&raw, ROOT, 4).await;
    // After a plain deletion ahead, a waiter looks again: it lists, or in a queue it
    // joined by name, looks further down by name.
    let again = [
        "listing again",
        "the node ahead went; looking further down by name",
    ];
    let looked = counter.sum(&again);

    cancelled.abort();
    counter.wait_for_sum(&again, looked + 1).await;
    expire(&zk, &second).await;
    counter.wait_for_sum(&again, looked + 2).await;
    // The second waiter enqueues again on its new session, behind the third.
    wait_children(&raw, ROOT, 3).await;
    let mut queue = contenders(&raw, ROOT).await;
    queue.sort_by(|a, b| a[a.len() - 10..].cmp(&b[b.len() - 10..]));
    assert!(guard.is_held());
    assert!(guard.path().ends_with(&queue[0]), "{queue:?}");
    assert!(!third_waiting.is_finished() && !second_waiting.is_finished());

    let holder_token = guard.token();
    guard.release().await.unwrap();
    let (third_token, _) = within("third waiter", 20, third_waiting).await.unwrap();
    let (second_token, second_session) = within("second waiter", 20, second_waiting).await.unwrap();
    assert!(holder_token < third_token && third_token < second_token);
    assert_eq!(Some(second_session), second.session_id());
    wait_children(&raw, ROOT, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_process_killed_without_closing_is_replaced_within_the_session_timeout() {
    let zk = Zk::start("killed-holder").await;
    let session_timeout = Duration::from_secs(3);
    // The holder is a real process: this test binary run again in holder mode.
    let mut child = spawn_self(
        "holder_process",
        &[
            ("ZK_HOLDER_CONNECT", zk.connect.clone()),
            (
                "ZK_HOLDER_TIMEOUT_MS",
                session_timeout.as_millis().to_string(),
            ),
        ],
    );
    let raw = zk.raw().await;
    wait_children(&raw, ROOT, 1).await;
    let waiter = zk.session().await;
    let mutex = ZkMutex::new(&waiter, ROOT).unwrap();
    assert!(
        mutex.try_lock().await.unwrap().is_none(),
        "the child process holds the lock"
    );
    child.start_kill().unwrap(); // SIGKILL: no close, the session just stops answering
    child.wait().await.unwrap();
    let killed = Instant::now();
    let guard = within("the waiter's grant", 30, mutex.lock())
        .await
        .unwrap();
    let took = killed.elapsed();
    println!("holder killed; next grant after {took:?} (session timeout {session_timeout:?})");
    assert!(
        took <= session_timeout + scaled(Duration::from_secs(3)),
        "took {took:?}"
    );
    guard.release().await.unwrap();
}

/// Holder mode of the test above; without `ZK_HOLDER_CONNECT` it has nothing to do.
#[tokio::test]
async fn holder_process() {
    let Some(session) = support::child_session("ZK_HOLDER").await else {
        return;
    };
    let mutex = ZkMutex::new(&session, ROOT).unwrap();
    let guard = mutex.lock().await.unwrap();
    println!("HELD {}", guard.token());
    std::future::pending::<()>().await;
}

/// Counts the library's events, so it runs on a runtime of its own (`support::counting_events`).
#[test]
fn a_lost_create_reply_is_recovered_by_uuid_and_owner() {
    support::counting_events(a_lost_create_reply_is_recovered_by_uuid_and_owner_body());
}

async fn a_lost_create_reply_is_recovered_by_uuid_and_owner_body() {
    let zk = Zk::start("lost-reply").await;
    let counter = events();
    let (host, chroot) = zk.connect.split_at(zk.connect.find('/').unwrap());
    let proxy = FaultProxy::start(host).await.unwrap();
    proxy.lose_next_reply(|r| r.create_path().is_some_and(|p| p.ends_with("lock-")));
    let session = Session::connect(
        SessionOptions::new(format!("{}{}", proxy.addr(), chroot))
            .connection_timeout(scaled(Duration::from_secs(10))),
    )
    .await
    .unwrap();
    let mutex = ZkMutex::new(&session, ROOT).unwrap();
    let guard = within("lock through a lossy proxy", 30, mutex.lock())
        .await
        .unwrap();
    assert!(
        proxy.lost_replies() >= 1,
        "the proxy must have lost the create reply"
    );
    assert_eq!(
        counter.get("recovered our node after a lost create reply"),
        1
    );
    let raw = zk.raw().await;
    let children = contenders(&raw, ROOT).await;
    assert_eq!(
        children.len(),
        1,
        "exactly one node: the recovered one, {children:?}"
    );
    assert_eq!(format!("{ROOT}/{}", children[0]), guard.path());
    guard.release().await.unwrap();
    wait_children(&raw, ROOT, 0).await;
}

/// `lost()` called again on every tick of a `select!` loop (as `zkr` supervises CMD) still
/// sees a deletion: the wait after it (is the session over too?) runs from the first call
/// that saw it, not from each new call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_in_a_loop_with_a_fast_tick_still_sees_a_deletion() {
    let zk = Zk::start("lost-tick").await;
    let session = zk.session().await;
    let guard = ZkMutex::new(&session, ROOT).unwrap().lock().await.unwrap();
    zk.raw().await.delete(guard.path(), None).await.unwrap();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let reason = within("lost() through a select loop", 30, async {
        loop {
            tokio::select! {
                reason = guard.lost() => break reason,
                _ = tick.tick() => {}
            }
        }
    })
    .await;
    assert_eq!(reason, LossReason::NodeDeleted);
    assert!(!guard.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_deleting_the_lock_node_makes_the_holder_lose_it() {
    let zk = Zk::start("operator-delete").await;
    let holder = zk.session().await;
    let mutex = ZkMutex::new(&holder, ROOT).unwrap();
    let guard = mutex.lock().await.unwrap();
    let waiter = zk.session().await;
    let next = ZkMutex::new(&waiter, ROOT).unwrap();
    let waiting = tokio::spawn(lock_once(next));
    let raw = zk.raw().await;
    wait_children(&raw, ROOT, 2).await;
    raw.delete(guard.path(), None).await.unwrap();
    assert_eq!(
        within("lost() after deletion", 10, guard.lost()).await,
        LossReason::NodeDeleted
    );
    assert!(!guard.is_held());
    let (token, _) = within("the next grant", 10, waiting).await.unwrap();
    assert!(token > guard.token());
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
}

/// A holder releases with a data change, so the waiter behind reads any change of the holder's
/// node as its release (Curator's `Revoker` writes there too): the holder must hear that it lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_changing_the_lock_node_makes_the_holder_lose_it() {
    let zk = Zk::start("operator-change").await;
    let holder = zk.session().await;
    let mutex = ZkMutex::new(&holder, ROOT).unwrap();
    let guard = mutex.lock().await.unwrap();
    let waiter = zk.session().await;
    let mut waiting = tokio::spawn(lock_once(ZkMutex::new(&waiter, ROOT).unwrap()));
    let raw = zk.raw().await;
    wait_children(&raw, ROOT, 2).await;
    raw.set_data(guard.path(), b"edited by hand", None)
        .await
        .unwrap();
    assert_eq!(
        within("lost() after the change", 10, guard.lost()).await,
        LossReason::NodeChanged
    );
    assert!(!guard.is_held());
    // The change tells the holder; it hands nothing over: only the release does.
    let client = waiter.client().await.unwrap();
    client.sync(ROOT).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut waiting)
            .await
            .is_err(),
        "the waiter moved on someone else's write"
    );
    let held = guard.token();
    guard.release().await.unwrap();
    let (token, _) = within("the next grant", 10, waiting).await.unwrap();
    assert!(token > held);
    wait_children(&raw, ROOT, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_roots_and_acls_get_typed_errors_and_leave_no_node() {
    let zk = Zk::start("bad-roots").await;
    let raw = zk.raw().await;
    let session = zk.session().await;

    let owner = zk.raw().await;
    owner
        .create(
            "/ephemeral",
            &[],
            &zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let err = ZkMutex::new(&session, "/ephemeral")
        .unwrap()
        .try_lock()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnsuitableRoot {
                kind: RootKind::Ephemeral,
                ..
            }
        ),
        "{err}"
    );

    raw.create(
        "/readonly",
        &[],
        &zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_read()),
    )
    .await
    .unwrap();
    let err = ZkMutex::new(&session, "/readonly")
        .unwrap()
        .lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");
    let err = ZkMutex::new(&session, "/readonly/below")
        .unwrap()
        .lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoAuth { .. }), "{err}");

    for path in [
        "",
        "relative",
        "/",
        "/a/",
        "/a//b",
        "/a\0b",
        "/zookeeper",
        "/zookeeper/x",
    ] {
        assert!(
            matches!(ZkMutex::new(&session, path), Err(Error::InvalidPath { .. })),
            "{path:?}"
        );
    }
    assert!(raw.list_children("/readonly").await.unwrap().is_empty());
    assert!(raw.list_children("/ephemeral").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_and_recreated_root_is_refused_instead_of_restarting_tokens() {
    let zk = Zk::start("replaced-root").await;
    let raw = zk.raw().await;
    let session = zk.session().await;
    let mutex = ZkMutex::new(&session, ROOT).unwrap();
    let mut last = None;
    for _ in 0..5 {
        last = Some(mutex.lock().await.unwrap().token());
    }
    let last = last.unwrap();
    // An operator removes the whole lock (anchor included) and someone creates it again.
    raw.delete(&format!("{ROOT}/~zk-recipes-anchor"), None)
        .await
        .unwrap();
    wait_children(&raw, ROOT, 0).await;
    raw.delete(ROOT, None).await.unwrap();
    raw.create(
        ROOT,
        &[],
        &zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let err = mutex.lock().await.unwrap_err();
    assert!(matches!(err, Error::RootReplaced { .. }), "{err}");
    wait_children(&raw, ROOT, 0).await;
    // A fresh ZkMutex value takes the new root: its sequence restarted (this is why the old
    // value refused), but its tokens carry the new root's incarnation and so still come after.
    let fresh = ZkMutex::new(&session, ROOT).unwrap();
    let again = fresh.lock().await.unwrap();
    assert!(
        again.token().as_u64() < last.as_u64(),
        "the sequence restarted"
    );
    assert!(again.token() > last, "{} after {last}", again.token());
}

/// ZooKeeper reports a container's `ephemeralOwner` as 0, so no client can refuse a container
/// root; the anchor child keeps it from being reaped (and its sequence from restarting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_root_is_anchored_and_never_reaped() {
    let Some((server, raw)) = support::fast_reaper_server().await else {
        return;
    };
    let connect = server.connect_string();
    let container = zkc::CreateMode::Container.with_acls(zkc::Acls::anyone_all());
    let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    // Control: an emptied container is reaped by this server within moments.
    raw.create("/control", &[], &container).await.unwrap();
    raw.create("/control/child", &[], &persistent)
        .await
        .unwrap();
    raw.delete("/control/child", None).await.unwrap();
    support::wait_deleted(&raw, "/control").await;

    raw.create("/locks", &[], &container).await.unwrap();
    let session = Session::connect(SessionOptions::new(connect.clone()))
        .await
        .unwrap();
    let mutex = ZkMutex::new(&session, "/locks").unwrap();
    let first = mutex.lock().await.unwrap();
    let token = first.token();
    first.release().await.unwrap();
    // Empty of contenders now; the reaper runs every 100 ms. Give it many rounds: a write
    // round trip after 2 s proves the root is still the same node.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = mutex.lock().await.unwrap();
    assert!(after.token() > token, "the sequence did not restart");
    assert!(raw.check_stat("/locks").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_ensemble_is_a_typed_error_not_a_hang() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener); // nothing listens there now
    let started = Instant::now();
    let err = within(
        "connect to nothing",
        20,
        Session::connect(
            SessionOptions::new(format!("127.0.0.1:{port}"))
                .connection_timeout(Duration::from_secs(2)),
        ),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert!(started.elapsed() < scaled(Duration::from_secs(5)));
}

/// Holds the lock on a session of its own (kept alive by the guard).
async fn hold(zk: &Zk) -> zk_recipes::ZkMutexGuard {
    let session = zk.session().await;
    ZkMutex::new(&session, ROOT).unwrap().lock().await.unwrap()
}

/// Expires `session`'s current ZooKeeper session on the server.
async fn expire(zk: &Zk, session: &Session) {
    let info = session.client().await.unwrap().session().clone();
    expire_session(&zk.connect, &info).await.unwrap();
}

/// Locks, notes the token and the session of the grant, releases.
async fn lock_once(mutex: ZkMutex) -> (zk_recipes::FencingToken, i64) {
    let guard = mutex.lock().await.unwrap();
    let out = (guard.token(), guard.session_id());
    guard.release().await.unwrap();
    out
}
