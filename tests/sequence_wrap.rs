//! A lock root whose sequence counter is about to wrap, on a real server.
//!
//! ZooKeeper names a sequential child after its parent's count of child creates (a signed
//! 32-bit number kept with the parent; clients see it folded into `cversion`, as creates plus
//! deletes), so a root wraps after about two billion acquisitions. To reach that in a test, the
//! server is restarted on a snapshot in which the root's counter stands a few creates below
//! `i32::MAX`,
//! written with ZooKeeper's own classes by `tests/java/SequenceNearWrap.java` (Debian's
//! `libzookeeper-java`, the server's 3.8). `ZkMutex` (and `ZkLeaderElection`, its terms) must hand out
//! its last tokens in order, then refuse with `Error::SequenceWrapped`, every time, without
//! leaving a node behind.
//!
//! What this found: ZooKeeper 3.8 does not wrap the counter. Once it reaches `i32::MAX`, every
//! later child gets `i32::MAX` too, so a token of `i32::MAX` could be handed to two holders in
//! turn (election's names differ by their protected prefix, so the creates succeed; the mutex's
//! plain `lock-2147483647` collides with a live one and fails `NodeExists`). The library now
//! stops one short: `i32::MAX` is refused like a wrapped number, and a collision says so too.
//!
//! Needs a server of its own (not `ZK_CONNECT`), `javac` and the ZooKeeper jars in
//! /usr/share/java (`.ci/test` installs them); without them it prints why and passes without
//! running.

mod support;

use std::time::Duration;

use zk_recipes::{Error, Session, SessionOptions, ZkLeaderElection, ZkMutex};
use zk_testcontainers::{ensemble_unavailable_reason, scaled, ZkServer};
use zookeeper_client as zkc;

/// The roots of the crafted snapshot: a lock's and an election's.
const ROOT: &str = "/wrap/lock";
const ELECTION_ROOT: &str = "/wrap/election";
/// Its count of child creates in the snapshot: the anchor takes one, and each acquisition one,
/// so tokens `i32::MAX - 2` and `i32::MAX - 1` are the last (`i32::MAX` itself repeats).
const COUNTER: i32 = i32::MAX - 3;
/// The snapshot's zxid: above anything the server logged before its restart (epoch 1).
const ZXID: u64 = 0x1_0000_0005;
/// The anchor this library keeps under each root.
const ANCHOR: &str = "~zk-recipes-anchor";
/// The jars `SequenceNearWrap` needs, in /usr/share/java.
const JARS: [&str; 3] = ["zookeeper", "zookeeper-jute", "slf4j-api"];

/// Runs a command to completion, panicking with its output when it fails.
async fn run(command: &mut tokio::process::Command) {
    let output = command.output().await.unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A server of the test's own, restarted on the crafted snapshot.
async fn server_near_the_wrap(classpath: &str) -> ZkServer {
    let snapshot = tempfile::tempdir().unwrap();
    run(tokio::process::Command::new("java")
        .args(["-cp", classpath, "SequenceNearWrap"])
        .arg(snapshot.path())
        .args([&COUNTER.to_string(), &ZXID.to_string(), ROOT, ELECTION_ROOT]))
    .await;
    let server = ZkServer::start().await.unwrap();
    server.stop().await.unwrap();
    let target = format!("{}:/data/version-2/", server.container_name());
    run(tokio::process::Command::new("docker")
        .arg("cp")
        .arg(snapshot.path().join("version-2/."))
        .arg(target))
    .await;
    server.start_again().await.unwrap();
    server
}

/// A root's children, the anchor included.
async fn children(raw: &zkc::Client, root: &str) -> Vec<String> {
    let mut children = raw.list_children(root).await.unwrap();
    children.sort();
    children
}

/// A server near the wrap, a raw client and a session on it; `None` (saying why) where the test
/// cannot run.
async fn near_the_wrap() -> Option<(ZkServer, zkc::Client, Session)> {
    if let Some(reason) = ensemble_unavailable_reason() {
        println!("not run: needs a server of its own ({reason})");
        return None;
    }
    let classes = tempfile::tempdir().unwrap();
    let classpath = match support::compile_java(
        "tests/java/SequenceNearWrap.java",
        &JARS,
        "libzookeeper-java",
        classes.path(),
    )
    .await
    {
        Ok(classpath) => classpath,
        Err(why) => {
            println!("not run: {why}");
            return None;
        }
    };
    let server = server_near_the_wrap(&classpath).await;
    let raw = zkc::Client::connect(&server.connect_string())
        .await
        .unwrap();
    for root in [ROOT, ELECTION_ROOT] {
        let (_, stat) = raw.get_data(root).await.unwrap();
        assert_eq!(stat.czxid as u64, ZXID, "the snapshot was not loaded");
        // Clients see creates plus deletes: with no children, twice the creates.
        assert_eq!(
            stat.cversion,
            COUNTER.wrapping_mul(2),
            "{root}: counter not set"
        );
    }
    let session = Session::connect(
        SessionOptions::new(server.connect_string())
            .session_timeout(Duration::from_secs(4))
            .connection_timeout(scaled(Duration::from_secs(10))),
    )
    .await
    .unwrap();
    Some((server, raw, session))
}

#[tokio::test]
async fn at_the_end_of_the_counter_the_last_tokens_then_a_typed_error_and_no_node() {
    let Some((_server, raw, session)) = near_the_wrap().await else {
        return;
    };
    let mutex = ZkMutex::new(&session, ROOT).unwrap();
    let mut tokens = Vec::new();
    let wrapped = loop {
        assert!(tokens.len() < 5, "no wrap after tokens {tokens:?}");
        match mutex.lock().await {
            Ok(guard) => {
                tokens.push(guard.token());
                guard.release().await.unwrap();
            }
            Err(Error::SequenceWrapped { path, sequence }) => break (path, sequence),
            Err(e) => panic!("after tokens {tokens:?}: {e}"),
        }
    };
    let max = i32::MAX as u32;
    // The numbers (their incarnation is the root's czxid, the same for all of them).
    assert_eq!(
        tokens.iter().map(|t| t.as_u64()).collect::<Vec<_>>(),
        [max - 2, max - 1].map(u64::from),
        "the last tokens before the counter is used up"
    );
    assert!(tokens.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(wrapped.0, ROOT);
    assert_eq!(
        wrapped.1,
        i64::from(i32::MAX),
        "the sequence that is refused"
    );
    assert_eq!(
        children(&raw, ROOT).await,
        [ANCHOR],
        "a node was left behind"
    );

    // It stays refused: ZooKeeper keeps giving i32::MAX (it does not wrap), and nothing is
    // left behind.
    for _ in 0..2 {
        match mutex.lock().await {
            Err(Error::SequenceWrapped { sequence, .. }) => {
                assert_eq!(sequence, i64::from(i32::MAX))
            }
            Ok(guard) => panic!("a wrapped root granted {:?}", guard.token()),
            Err(e) => panic!("wrapped root: {e}"),
        }
    }
    assert_eq!(
        children(&raw, ROOT).await,
        [ANCHOR],
        "a node was left behind"
    );
    session.close().await;
}

#[tokio::test]
async fn at_the_end_of_the_counter_the_last_terms_then_a_typed_error_and_no_candidate() {
    let Some((_server, raw, session)) = near_the_wrap().await else {
        return;
    };
    let election = ZkLeaderElection::new(&session, ELECTION_ROOT, "candidate").unwrap();
    let mut terms = Vec::new();
    let refused = loop {
        assert!(terms.len() < 5, "no refusal after terms {terms:?}");
        match election.campaign().await {
            Ok(leadership) => {
                terms.push(leadership.term());
                leadership.release().await.unwrap();
            }
            Err(Error::SequenceWrapped { sequence, .. }) => break sequence,
            Err(e) => panic!("after terms {terms:?}: {e}"),
        }
    };
    let max = i32::MAX as u32;
    assert_eq!(
        terms.iter().map(|t| t.as_u64()).collect::<Vec<_>>(),
        [max - 2, max - 1].map(u64::from)
    );
    assert!(terms.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(refused, i64::from(i32::MAX));
    assert_eq!(children(&raw, ELECTION_ROOT).await, [ANCHOR]);
    assert!(
        election.leader().await.unwrap().is_none(),
        "a refused candidate is seen as leader"
    );
    session.close().await;
}
