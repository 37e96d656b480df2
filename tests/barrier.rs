//! Barriers on a real server: a barrier holds waiters until removed (and a wait with a time
//! limit gives up with a typed error); a double barrier of 8 lets its members in together and
//! out together, and with one member's session closed inside, the others still leave (the
//! dead member's node goes with its session) while the dead member is told; fewer than 8
//! arrivals time out with a typed error and leave no node behind; N = 0 is refused.

mod support;

use std::time::Duration;

use support::{within, Zk};
use zk_recipes::{Error, ZkBarrier, ZkDoubleBarrier};
use zk_testcontainers::scaled;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_barrier_holds_waiters_until_removed() {
    let zk = Zk::start("barrier").await;
    let session = zk.session().await;
    let barrier = ZkBarrier::new(&session, "/deploy/hold").unwrap();
    // Not set: no wait.
    barrier
        .wait_timeout(scaled(Duration::from_secs(5)))
        .await
        .unwrap();
    barrier.set().await.unwrap();
    barrier.set().await.unwrap();
    assert!(barrier.is_set().await.unwrap());
    let err = barrier
        .wait_timeout(Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TimedOut { .. }), "{err}");
    let other = zk.session().await;
    let waiter = ZkBarrier::new(&other, "/deploy/hold").unwrap();
    let waiting = tokio::spawn(async move { waiter.wait().await });
    barrier.remove().await.unwrap();
    within("the waiter released", 10, waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(!barrier.is_set().await.unwrap());
    barrier.remove().await.unwrap(); // not set: nothing to do
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_barrier_of_8_with_one_member_killed_inside() {
    let zk = Zk::start("double-barrier").await;
    let raw = zk.raw().await;
    let root = "/jobs/nightly";
    let session = zk.session().await;
    assert!(matches!(
        ZkDoubleBarrier::new(&session, root, 0).unwrap_err(),
        Error::InvalidMemberCount { members: 0 }
    ));
    assert!(matches!(
        ZkDoubleBarrier::with_id(&session, root, 2, "ready").unwrap_err(),
        Error::InvalidPath { .. }
    ));

    // Fewer than 8: each enter times out with a typed error, and no member node stays.
    let mut sessions = Vec::new();
    for _ in 0..8 {
        sessions.push(zk.session().await);
    }
    let limit = scaled(Duration::from_millis(800));
    let mut tries = Vec::new();
    for (i, s) in sessions.iter().take(7).enumerate() {
        let barrier = ZkDoubleBarrier::with_id(s, root, 8, &format!("m{i}")).unwrap();
        tries.push(tokio::spawn(async move {
            barrier.enter_timeout(limit).await.map(drop)
        }));
    }
    for t in tries {
        let err = within("a short enter", 20, t).await.unwrap().unwrap_err();
        match err {
            Error::TimedOut { reason, .. } => assert!(reason.contains("of 8 members"), "{reason}"),
            other => panic!("{other}"),
        }
    }
    let left: Vec<String> = raw.list_children(root).await.unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");

    // All 8 enter; member 0's session is closed inside; the other 7 leave.
    let mut entering = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        let barrier = ZkDoubleBarrier::with_id(s, root, 8, &format!("m{i}")).unwrap();
        entering.push(tokio::spawn(async move { barrier.enter().await }));
    }
    let mut inside = Vec::new();
    for e in entering {
        inside.push(within("every member in", 20, e).await.unwrap().unwrap());
    }
    let dead = inside.remove(0);
    sessions[0].close().await;
    let mut leaving = Vec::new();
    for entry in inside {
        let limit = scaled(Duration::from_secs(20));
        leaving.push(tokio::spawn(
            async move { entry.leave_timeout(limit).await },
        ));
    }
    for l in leaving {
        within("the others out", 30, l).await.unwrap().unwrap();
    }
    let err = dead.leave().await.unwrap_err();
    assert!(
        matches!(err, Error::SessionClosed | Error::SessionExpired),
        "{err}"
    );
    let left: Vec<String> = raw.list_children(root).await.unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
