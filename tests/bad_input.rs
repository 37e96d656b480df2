//! Bad input against a real ZooKeeper: each case answers with a typed error in bounded time,
//! sends nothing the server would choke on, and leaves no node behind.

mod support;

use std::time::{Duration, Instant};

use support::{within, Zk};
use zk_recipes::{
    Error, RootKind, Session, SessionOptions, ZkLeaderElection, ZkLockSpace, ZkMutex,
};
use zookeeper_client as zkc;

/// A path longer than the server's packet limit (1 MiB): a server closes the connection on
/// such a request, and a client that sent it again on every reconnect would never finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_or_leader_info_over_the_packet_limit_is_refused_before_sending() {
    let zk = Zk::start("too-large").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let long_root = format!("/locks/{}", "r".repeat(2 << 20));
    let mutex = ZkMutex::new(&session, &long_root).unwrap();
    let err = within("lock() on a 2 MiB root", 10, mutex.lock())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::TooLarge { limit: 0xfffff, .. }),
        "{err}"
    );
    assert!(!err.is_retryable());

    let election = ZkLeaderElection::new(&session, "/election/big", vec![b'i'; 2 << 20]).unwrap();
    let err = within("campaign() with 2 MiB of info", 10, election.campaign())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    // The root was made (its path is small), no candidate node is there.
    assert_eq!(
        support::contenders(&raw, "/election/big").await,
        Vec::<String>::new()
    );
    // The session is fine: nothing reached the server that made it close the connection.
    assert!(matches!(
        session.state(),
        zk_recipes::SessionState::Connected { .. }
    ));
    ZkMutex::new(&session, "/locks/fine")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    // For servers that raise (or lower) `jute.maxbuffer`, the limit is the session's option.
    let strict = Session::connect(zk.options().max_packet_bytes(4096))
        .await
        .unwrap();
    let election = ZkLeaderElection::new(&strict, "/election/small", vec![b'i'; 8192]).unwrap();
    let err = election.campaign().await.unwrap_err();
    assert!(matches!(err, Error::TooLarge { limit: 4096, .. }), "{err}");
    let election = ZkLeaderElection::new(&session, "/election/small", vec![b'i'; 8192]).unwrap();
    election.campaign().await.unwrap().release().await.unwrap();
    strict.close().await;
    session.close().await;
}

/// A root below an ephemeral node cannot exist: a typed error that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_below_an_ephemeral_node_is_a_typed_error() {
    let zk = Zk::start("under-ephemeral").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let ephemeral = zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all());
    raw.create("/eph", &[], &ephemeral).await.unwrap();

    let err = ZkMutex::new(&session, "/eph/lock")
        .unwrap()
        .lock()
        .await
        .unwrap_err();
    assert_eq!(unsuitable(&err), Some(RootKind::UnderEphemeral), "{err}");
    // A lock space that is itself ephemeral.
    let err = ZkLockSpace::new(&session, "/eph")
        .unwrap()
        .lock("k")
        .await
        .unwrap_err();
    assert_eq!(unsuitable(&err), Some(RootKind::Ephemeral), "{err}");
    // (A recipe root that is an ephemeral node: single_server_faults.rs.)
    assert!(raw.list_children("/eph").await.unwrap().is_empty());
    session.close().await;
}

/// What kind of unsuitable root an error names, if it is that error.
fn unsuitable(err: &Error) -> Option<RootKind> {
    match err {
        Error::UnsuitableRoot { kind, .. } => Some(*kind),
        _ => None,
    }
}

#[tokio::test]
async fn a_connect_string_without_hosts_is_a_typed_error_at_once() {
    for connect in ["", "/chroot", "a:2181,,b:2181"] {
        let started = Instant::now();
        let err = Session::connect(SessionOptions::new(connect))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidConnectString { .. }),
            "{connect:?}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}

/// A host name that does not resolve: `Unreachable` (whose message says so) once the
/// connection timeout has passed, not later. (Nobody listening: single_server_faults.rs.)
#[tokio::test]
async fn an_unresolvable_host_is_a_typed_error_within_the_connection_timeout() {
    for connect in ["no-such-host.invalid:2181"] {
        let started = Instant::now();
        let options = SessionOptions::new(connect).connection_timeout(Duration::from_secs(1));
        let err = Session::connect(options).await.unwrap_err();
        assert!(matches!(err, Error::Unreachable { .. }), "{connect}: {err}");
        assert!(err.is_retryable());
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(3),
            "{connect}: {took:?} for a 1 s connection timeout"
        );
    }
}

/// A request the server answers by closing the connection (here: over its `jute.maxbuffer`,
/// with the client told the limit is higher) is not sent again on every reconnect forever:
/// after a few broken connections in a row the call ends with `ConnectionLost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_breaks_the_connection_every_time_ends_in_bounded_time() {
    let zk = Zk::start("breaks-connection").await;
    let session = Session::connect(zk.options().max_packet_bytes(64 << 20))
        .await
        .unwrap();
    let election = ZkLeaderElection::new(&session, "/election/huge", vec![b'i'; 2 << 20]).unwrap();
    let started = Instant::now();
    let err = within(
        "campaign() that breaks the connection",
        60,
        election.campaign(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::ConnectionLost), "{err}");
    println!("gave up after {:?}", started.elapsed());
    // The session lives on: the next (small) request works.
    let raw = zk.raw().await;
    assert_eq!(
        support::contenders(&raw, "/election/huge").await,
        Vec::<String>::new()
    );
    ZkMutex::new(&session, "/locks/after")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    session.close().await;
}

/// A connect string whose chroot does not exist: a typed error at connect that names the
/// chroot, within the connection timeout (every recipe answered a bare `NoNode` before).
#[tokio::test]
async fn a_missing_chroot_is_a_typed_error_at_connect() {
    let zk = Zk::start("no-chroot").await;
    let missing = format!("{}/missing-chroot", zk.connect);
    let err = within(
        "connect with a missing chroot",
        10,
        Session::connect(SessionOptions::new(missing.clone())),
    )
    .await
    .unwrap_err();
    match &err {
        Error::NoChroot { chroot } => assert!(chroot.ends_with("/missing-chroot"), "{chroot}"),
        other => panic!("{other:?}"),
    }
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("zkCli: create"), "{err}");
    // The test's own chroot exists: connecting there works.
    let session = Session::connect(zk.options()).await.unwrap();
    session.close().await;
}
