//! Session against a real ZooKeeper: its connections get `TCP_NODELAY` (zookeeper-client leaves
//! Nagle's algorithm on, which turns every pipelined pair of requests into two round trips),
//! after a reconnect too, and connections of other clients are left alone; `lost()` costs one
//! watch; a closed session says so everywhere; and a release storm (a thousand holders on one
//! session that expires) resolves every `lost()`.

#[path = "support/cons.rs"]
mod cons;
mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::sockets::{connections_to, nodelay_of_connections_to};
use support::{within, Zk};
use zk_recipes::{Session, SessionOptions, SessionState};
use zk_testcontainers::{expire_session, scaled, FaultProxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_connections_get_tcp_nodelay_and_no_one_elses_do() {
    let zk = Zk::start("nodelay").await;
    let (host, chroot) = zk.connect.split_at(zk.connect.find('/').unwrap());
    let proxy = FaultProxy::start(host).await.unwrap();
    let connect = format!("{}{}", proxy.addr(), chroot);
    let other = zookeeper_client::Client::connect(&connect).await.unwrap();
    assert_eq!(nodelay_of_connections_to(proxy.addr()), [false]);

    let session = Session::connect(SessionOptions::new(connect.clone()))
        .await
        .unwrap();
    assert_eq!(
        nodelay_of_connections_to(proxy.addr()),
        [false, true],
        "ours on, the other client's untouched"
    );
    let without = Session::connect(SessionOptions::new(connect.clone()).tcp_nodelay(false))
        .await
        .unwrap();
    assert_eq!(
        nodelay_of_connections_to(proxy.addr()),
        [false, false, true]
    );
    without.close().await;
    drop(other);
    within("the other connections to close", 10, async {
        while nodelay_of_connections_to(proxy.addr()) != [true] {
            tokio::task::yield_now().await;
        }
    })
    .await;

    // The client reconnects by itself on the same session: the new connection gets it too.
    // (Found by its local address: `Suspended` can be over before a watch of the state looks.)
    let id = session.session_id().unwrap();
    let old: Vec<SocketAddr> = connections_to(proxy.addr())
        .into_iter()
        .map(|(local, _)| local)
        .collect();
    assert_eq!(old.len(), 1);
    proxy.drop_connections();
    within("a new connection, with TCP_NODELAY", 20, async {
        loop {
            let now = connections_to(proxy.addr());
            if let [(local, true)] = now[..] {
                if !old.contains(&local) {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let mut states = session.watch_state();
    let back =
        |s: &SessionState| matches!(s, SessionState::Connected { session_id } if *session_id == id);
    within("reconnected on the same session", 20, states.wait_for(back))
        .await
        .unwrap();
    session.close().await;
}

/// Packets the server has received on the connection of session `sid` (from `cons`).
async fn packets_received(connect: &str, sid: i64) -> u64 {
    cons::of_session(connect, sid)
        .await
        .unwrap_or_else(|| panic!("no connection of session {sid:#x} in cons"))
        .recved
}

/// `lost()` in a `select!` loop, as a worker writes it, costs one watch per grant, not one
/// request per call (it sent an exists-with-watch on every call before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_called_on_every_pass_of_a_loop_sets_one_watch() {
    let zk = Zk::start("lost-one-watch").await;
    let session = zk.session().await;
    let mutex = zk_recipes::ZkMutex::new(&session, "/locks/loop").unwrap();
    let guard = mutex.lock().await.unwrap();
    let sid = guard.session_id();
    let host = zk.server.connect_string();
    let before = packets_received(&host, sid).await;
    for _ in 0..200 {
        tokio::select! {
            reason = guard.lost() => panic!("lost: {reason:?}"),
            _ = tokio::task::yield_now() => {}
        }
    }
    let after = packets_received(&host, sid).await;
    // The first call's exists-watch, and perhaps a ping or two of the client's.
    assert!(
        after - before <= 4,
        "200 calls of lost() sent {} requests",
        after - before
    );
    assert!(guard.is_held());
    guard.release().await.unwrap();
    session.close().await;
}

/// After `Session::close()`, every call says the same: `SessionClosed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_close_lock_release_and_lost_all_say_closed() {
    let zk = Zk::start("closed-says-closed").await;
    let session = zk.session().await;
    let mutex = zk_recipes::ZkMutex::new(&session, "/locks/closed").unwrap();
    let guard = mutex.lock().await.unwrap();
    {
        let lost = guard.lost();
        tokio::pin!(lost);
        session.close().await;
        let reason = within("lost() after close", 10, &mut lost).await;
        assert_eq!(reason, zk_recipes::LossReason::SessionClosed);
    }
    assert!(!guard.is_held());
    let released = guard.release().await.unwrap_err();
    assert!(
        matches!(released, zk_recipes::Error::SessionClosed),
        "{released}"
    );
    let locked = mutex.lock().await.unwrap_err();
    assert!(
        matches!(locked, zk_recipes::Error::SessionClosed),
        "{locked}"
    );
    assert!(!locked.is_retryable());
}

/// A release storm: 1,000 holders of different locks (half `ZkMutex`es, half keys of one
/// `ZkLockSpace`) on one session, which expires on the server at once. Every guard's `lost()`
/// resolves, with `SessionExpired`, within a bound; nothing hangs; no lock node is left; the
/// session goes on with a new ZooKeeper session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_storm_of_a_thousand_holders_on_one_expired_session_resolves_every_lost() {
    const HOLDERS: usize = 1000;
    let zk = Zk::start("release-storm").await;
    let session = zk.session().await;
    let space = Arc::new(zk_recipes::ZkLockSpace::new(&session, "/storm/keys").unwrap());
    // At most 64 acquisitions in flight (a thousand at once is a client's own storm).
    let gate = Arc::new(tokio::sync::Semaphore::new(64));
    let (held_tx, mut held_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut holders = tokio::task::JoinSet::new();
    let started = Instant::now();
    for i in 0..HOLDERS {
        let (session, space, gate, held) = (
            session.clone(),
            space.clone(),
            gate.clone(),
            held_tx.clone(),
        );
        holders.spawn(async move {
            let permit = gate.acquire_owned().await.unwrap();
            let reason = if i % 2 == 0 {
                let mutex = zk_recipes::ZkMutex::new(&session, &format!("/storm/m/{i}")).unwrap();
                let guard = mutex.lock().await.unwrap();
                drop(permit);
                held.send(()).unwrap();
                guard.lost().await
            } else {
                let guard = space.lock(&format!("k{i}")).await.unwrap();
                drop(permit);
                held.send(()).unwrap();
                guard.lost().await
            };
            (reason, Instant::now())
        });
    }
    drop(held_tx);
    within("a thousand grants", 120, async {
        for _ in 0..HOLDERS {
            held_rx.recv().await.unwrap();
        }
    })
    .await;
    println!(
        "release storm: {HOLDERS} locks held on one session after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let old = session.session_id().unwrap();
    let info = session.client().await.unwrap().session().clone();
    let expiring = Instant::now();
    expire_session(&zk.connect, &info).await.unwrap();
    let expired = Instant::now();
    let mut slowest = Duration::ZERO;
    let bound = scaled(Duration::from_secs(30));
    let all = tokio::time::timeout(bound, async {
        while let Some(done) = holders.join_next().await {
            let (reason, at) = done.unwrap();
            assert_eq!(reason, zk_recipes::LossReason::SessionExpired);
            slowest = slowest.max(at.saturating_duration_since(expired));
        }
    })
    .await;
    assert!(
        all.is_ok(),
        "{} of {HOLDERS} lost() calls unresolved {bound:?} after the expiry",
        holders.len()
    );
    println!(
        "release storm: every one of {HOLDERS} lost() resolved (SessionExpired) at most {:.2} s \
         after the expiry was confirmed ({:.2} s after it was asked for)",
        slowest.as_secs_f64(),
        (expired - expiring + slowest).as_secs_f64()
    );

    // The session goes on, on a new ZooKeeper session, and locks again.
    let again = zk_recipes::ZkMutex::new(&session, "/storm/m/0").unwrap();
    let guard = within("a lock on the new session", 30, again.lock())
        .await
        .unwrap();
    assert_ne!(guard.session_id(), old);
    guard.release().await.unwrap();
    // No lock node left: the mutexes' roots hold their anchors, the keys' directories nothing.
    let raw = zk.raw().await;
    let mut left = Vec::new();
    for i in (0..HOLDERS).step_by(2) {
        let root = format!("/storm/m/{i}");
        left.extend(
            support::contenders(&raw, &root)
                .await
                .into_iter()
                .map(|n| format!("{root}/{n}")),
        );
    }
    for key in raw.list_children("/storm/keys").await.unwrap() {
        let dir = format!("/storm/keys/{key}");
        match raw.list_children(&dir).await {
            Ok(nodes) => left.extend(nodes.into_iter().map(|n| format!("{dir}/{n}"))),
            Err(zookeeper_client::Error::NoNode) => {} // reaped meanwhile
            Err(err) => panic!("list {dir}: {err}"),
        }
    }
    assert!(left.is_empty(), "lock nodes left: {left:?}");
    session.close().await;
}

/// `close()` while a `client()` handle lives (the README's fenced write keeps one): prompt,
/// the session is over on the server (its lock node gone, the lock free for others), and the
/// handle answers a typed error instead of hanging or keeping the session alive. Five rounds,
/// each with its own session; handles from `Session::client` and `Grant::client` alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_is_prompt_while_a_client_handle_lives_and_the_handle_then_says_expired() {
    let zk = Zk::start("close-with-handle").await;
    let raw = zk.raw().await;
    // The tests' connection timeout (`Zk::options`): close used to wait all of it.
    let timeout = scaled(Duration::from_secs(10));
    let (mut took, mut handle_took) = (Vec::new(), Vec::new());
    for round in 0..5 {
        let session = zk.session().await;
        let mutex = zk_recipes::ZkMutex::new(&session, "/locks/close").unwrap();
        let guard = mutex.lock().await.unwrap();
        let node = guard.path().to_owned();
        let handle = if round % 2 == 0 {
            session.client().await.unwrap()
        } else {
            guard.client().unwrap()
        };
        handle.check_stat("/").await.unwrap();
        let started = Instant::now();
        session.close().await;
        let elapsed = started.elapsed();
        took.push(elapsed.as_millis());
        assert!(
            elapsed < timeout / 4,
            "round {round}: close() took {elapsed:?} with a handle alive (connection timeout \
             {timeout:?})"
        );
        assert_eq!(session.state(), SessionState::Closed);
        // Over on the server: the lock node went with the session.
        assert_eq!(
            raw.check_stat(&node).await.unwrap(),
            None,
            "round {round}: the closed session's lock node is still there"
        );
        assert_eq!(
            within("lost() after close", 10, guard.lost()).await,
            zk_recipes::LossReason::SessionClosed
        );
        // The handle answers errors, never a hang: `SessionExpired` once its client hears
        // (at its next contact, or when a connection the server no longer answers times out:
        // zookeeper-client's limit, 2/5 of the session timeout here).
        let heard = Instant::now();
        let mut answers = Vec::new();
        within(
            "the handle to answer SessionExpired after close",
            10,
            async {
                loop {
                    match handle.check_stat("/").await {
                        Err(zookeeper_client::Error::SessionExpired) => break,
                        Err(other) => answers.push(other),
                        Ok(stat) => {
                            panic!("round {round}: the handle answered {stat:?} after close")
                        }
                    }
                }
            },
        )
        .await;
        handle_took.push((heard.elapsed().as_millis(), answers.len()));
    }
    // The same without a handle: zookeeper-client's own close, no second connection.
    let mut plain = Vec::new();
    for _ in 0..5 {
        let session = zk.session().await;
        let mutex = zk_recipes::ZkMutex::new(&session, "/locks/close").unwrap();
        let guard = mutex.lock().await.unwrap();
        let started = Instant::now();
        session.close().await;
        plain.push(started.elapsed().as_millis());
        assert_eq!(raw.check_stat(guard.path()).await.unwrap(), None);
    }
    println!(
        "close() without a handle: {plain:?} ms; the handle's SessionExpired after close, (ms, \
         errors before it): {handle_took:?}"
    );
    println!("close() with a client handle alive: {took:?} ms");
}

/// The requests one lock's handoff costs each side, counted by the server (`lcxid`): a holder
/// that releases to a waiter, and the waiter that is granted and releases in turn. A release
/// sends its delete and nothing else (no `RemoveWatches` for the grant's own watch, which the
/// delete fires anyway); the waiter's grant costs no more than its create, its read of the
/// queue and its two watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_costs_each_side_only_the_requests_it_needs() {
    let zk = Zk::start("handoff-requests").await;
    let (a, b) = (zk.session().await, zk.session().await);
    let host = zk.server.connect_string();
    let (ma, mb) = (
        zk_recipes::ZkMutex::new(&a, "/locks/handoff").unwrap(),
        Arc::new(zk_recipes::ZkMutex::new(&b, "/locks/handoff").unwrap()),
    );
    let raw = zk.raw().await;
    let xid = |s: &Session| {
        let (host, sid) = (host.clone(), s.session_id().unwrap());
        async move {
            cons::of_session(&host, sid)
                .await
                .expect("the session's connection")
                .lcxid
        }
    };
    let cycle = || async {
        let held = ma.lock().await.unwrap();
        let waiter = tokio::spawn({
            let mb = mb.clone();
            async move { mb.lock().await.unwrap() }
        });
        support::wait_children(&raw, "/locks/handoff", 2).await; // two contenders
        held.release().await.unwrap();
        let granted = within("b granted", 30, waiter).await.unwrap();
        granted.release().await.unwrap();
    };
    cycle().await; // the roots, the anchor and the first watches
    let (a0, b0) = (xid(&a).await, xid(&b).await);
    const CYCLES: i64 = 10;
    for _ in 0..CYCLES {
        cycle().await;
    }
    // Let any request a dropped watcher would send reach the server before counting.
    let _ = a.client().await.unwrap().sync("/").await;
    let _ = b.client().await.unwrap().sync("/").await;
    let (a1, b1) = (xid(&a).await - 1, xid(&b).await - 1); // the syncs
    let (per_a, per_b) = (
        (a1 - a0) as f64 / CYCLES as f64,
        (b1 - b0) as f64 / CYCLES as f64,
    );
    eprintln!("requests per cycle: holder {per_a}, waiter {per_b}");
    // The holder: create, list, the grant's data watch, the delete.
    assert!(per_a <= 4.0, "the holder sent {per_a} requests a cycle");
    // The waiter: create, list, the watch ahead and its own node's watch, the delete (second
    // in line, it needs no proof of the head's release). Before the grant's watch settled on
    // the release's delete, each side sent one or two `RemoveWatches` a cycle besides
    // (holder 5.8, waiter 6.6 on 2026-12-03).
    assert!(per_b <= 5.0, "the waiter sent {per_b} requests a cycle");
    a.close().await;
    b.close().await;
}

/// Whether the server's events name their transaction (ZooKeeper 3.9 does, 3.8 does not).
async fn events_carry_zxids(raw: &zookeeper_client::Client) -> bool {
    let path = "/events-carry-zxids";
    let _ = raw
        .create(
            path,
            b"",
            &zookeeper_client::CreateMode::Persistent
                .with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await;
    let (_, _, watcher) = raw.get_and_watch_data(path).await.unwrap();
    raw.set_data(path, b"x", None).await.unwrap();
    let event = watcher.changed().await;
    raw.delete(path, None).await.unwrap();
    event.zxid != zookeeper_client::WatchedEvent::NO_ZXID
}

/// A third in line, whose listing had the holder ahead of the node it watches, must know that
/// the head released (everything ahead is gone) before it holds. On a server whose events
/// name their transaction (3.9) the node ahead's own events tell: the waiter sends nothing
/// between the release and its grant. On 3.8 one read of the root tells, and the waiter sets
/// no watch it could not use: its cycle costs what it did before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_in_line_knows_the_head_released_from_the_events_alone_on_3_9() {
    let zk = Zk::start("third-in-line").await;
    let (a, b, c) = (zk.session().await, zk.session().await, zk.session().await);
    let host = zk.server.connect_string();
    let path = "/locks/third";
    let (ma, mb, mc) = (
        zk_recipes::ZkMutex::new(&a, path).unwrap(),
        Arc::new(zk_recipes::ZkMutex::new(&b, path).unwrap()),
        Arc::new(zk_recipes::ZkMutex::new(&c, path).unwrap()),
    );
    let raw = zk.raw().await;
    let named = events_carry_zxids(&raw).await;
    let sid = c.session_id().unwrap();
    let xid = || {
        let host = host.clone();
        async move {
            cons::of_session(&host, sid)
                .await
                .expect("the session's connection")
                .lcxid
        }
    };
    // C's requests in the cycle, and those it sent after B's release, before its grant.
    let cycle = async || {
        let c0 = xid().await;
        let held = ma.lock().await.unwrap();
        let wb = tokio::spawn({
            let mb = mb.clone();
            async move { mb.lock().await.unwrap() }
        });
        support::wait_children(&raw, path, 2).await;
        let wc = tokio::spawn({
            let mc = mc.clone();
            async move { mc.lock().await.unwrap() }
        });
        support::wait_children(&raw, path, 3).await;
        held.release().await.unwrap();
        let b_held = within("b granted", 30, wb).await.unwrap();
        let watched = b_held.path().to_owned();
        if named {
            // C's data watch on B's node is the last request of its wait's burst.
            within("c watches b's node", 30, async {
                // (The server shows paths with the session's chroot.)
                while !cons::data_watches(&host, sid)
                    .await
                    .iter()
                    .any(|w| w.ends_with(&watched))
                {
                    tokio::task::yield_now().await;
                }
            })
            .await;
        }
        let before = xid().await;
        b_held.release().await.unwrap();
        let c_held = within("c granted", 30, wc).await.unwrap();
        let after = xid().await;
        c_held.release().await.unwrap();
        let _ = c.client().await.unwrap().sync("/").await;
        let c1 = xid().await - 1; // the sync
        (c1 - c0, after - before)
    };
    // The root, the anchor; on 3.8 the one data watch from which C's session learns that the
    // server's events name no transaction.
    cycle().await;
    const CYCLES: i64 = 5;
    let (mut total, mut after_release) = (0, 0);
    for _ in 0..CYCLES {
        let (all, after) = cycle().await;
        total += all;
        after_release += after;
    }
    eprintln!("events carry zxids: {named}; C's requests per cycle {total}/{CYCLES}, after the release {after_release}/{CYCLES}");
    // Create, list, its own node's watch, the child watch ahead, the proof (3.9: the data
    // watch ahead; 3.8: the root's read), the delete.
    assert!(
        total <= 6 * CYCLES,
        "C sent {total} requests in {CYCLES} cycles"
    );
    if named {
        assert_eq!(
            after_release, 0,
            "C read after the head release on a server whose events tell"
        );
    }
    for s in [a, b, c] {
        s.close().await;
    }
}
