//! The fault proxy against a real server: forwarding (ZooKeeper and four-letter words),
//! dropped connections, blackholes, latency and lost replies. The proxy needs no container of
//! its own, so these tests also run against `ZK_CONNECT`.

mod common;

use std::time::{Duration, Instant};

use common::{connect, wait_for_state, PERSISTENT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zk_testcontainers::{chroot, opcode, scaled, test_server, Direction, FaultProxy, TestZk};
use zookeeper_client::{Client, CreateMode, SessionState};

/// A server, a private chroot on it, and a proxy in front of the server.
async fn setup(name: &str) -> (TestZk, String, FaultProxy) {
    let zk = test_server().await.unwrap();
    let rooted = chroot(&zk.connect_string(), name).await.unwrap();
    let path = rooted[rooted.find('/').unwrap()..].to_owned();
    let proxy = FaultProxy::start(zk.connect_string()).await.unwrap();
    (zk, path, proxy)
}

/// A client straight to the server (not through the proxy), in `path`.
async fn direct(zk: &TestZk, path: &str) -> Client {
    let hosts = zk.connect_string();
    let hosts = hosts.split('/').next().unwrap().to_owned();
    connect(&format!("{hosts}{path}"), Duration::from_secs(20)).await
}

#[tokio::test]
async fn forwards_zookeeper_and_four_letter_words_and_drops_connections_on_demand() {
    let (zk, path, proxy) = setup("proxy-forwards").await;
    let through = connect(&format!("{}{path}", proxy.addr()), Duration::from_secs(20)).await;
    through.create("/a", b"1", &PERSISTENT).await.unwrap();
    assert_eq!(through.get_data("/a").await.unwrap().0, b"1");
    assert_eq!(proxy.open_connections(), 1);
    let behind = direct(&zk, &path).await;
    assert_eq!(behind.get_data("/a").await.unwrap().0, b"1");

    // A four-letter word is no ZooKeeper frame: forwarded as raw bytes.
    let mut stream = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    stream.write_all(b"ruok").await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(
        scaled(Duration::from_secs(10)),
        stream.read_to_string(&mut answer),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(answer, "imok");

    // Dropped connections: the client reconnects through the proxy, to the same session.
    let session = through.session_id();
    let ephemeral = CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
    through.create("/mine", b"", &ephemeral).await.unwrap();
    let mut states = through.state_watcher();
    proxy.drop_connections();
    let limit = scaled(Duration::from_secs(20));
    wait_for_state(&mut states, SessionState::Disconnected, limit).await;
    wait_for_state(&mut states, SessionState::SyncConnected, limit).await;
    assert_eq!(through.session_id(), session);
    assert!(behind.check_stat("/mine").await.unwrap().is_some());
    assert_eq!(proxy.open_connections(), 1);
}

#[tokio::test]
async fn a_blackhole_forwards_nothing_until_healed() {
    let (zk, path, proxy) = setup("proxy-blackhole").await;
    // The client gives up a silent connection after 2/5 of its session timeout; the session
    // survives if it is back within the timeout.
    let through = connect(&format!("{}{path}", proxy.addr()), Duration::from_secs(9)).await;
    let session = through.session_id();
    let behind = direct(&zk, &path).await;
    let mut states = through.state_watcher();

    proxy.blackhole();
    let create = through.create("/during", b"", &PERSISTENT);
    wait_for_state(
        &mut states,
        SessionState::Disconnected,
        scaled(Duration::from_secs(20)),
    )
    .await;
    assert!(create.await.is_err(), "no reply can cross a blackhole");
    // The client has given the connection up: the create was dropped, not delayed.
    assert!(behind.check_stat("/during").await.unwrap().is_none());

    proxy.heal();
    wait_for_state(
        &mut states,
        SessionState::SyncConnected,
        scaled(Duration::from_secs(20)),
    )
    .await;
    assert_eq!(through.session_id(), session, "the session survived");
    through.create("/after", b"", &PERSISTENT).await.unwrap();
    assert!(behind.check_stat("/after").await.unwrap().is_some());
    assert!(behind.check_stat("/during").await.unwrap().is_none());
}

#[tokio::test]
async fn delays_add_latency_per_direction() {
    let (_zk, path, proxy) = setup("proxy-delay").await;
    let through = connect(&format!("{}{path}", proxy.addr()), Duration::from_secs(20)).await;
    through.create("/d", b"", &PERSISTENT).await.unwrap();
    let round_trip = || async {
        let t = Instant::now();
        through.get_data("/d").await.unwrap();
        t.elapsed()
    };
    proxy.delay(Direction::ToServer, Duration::from_millis(200));
    proxy.delay(Direction::ToClient, Duration::from_millis(150));
    let slow = round_trip().await;
    assert!(slow >= Duration::from_millis(350), "round trip {slow:?}");
    proxy.heal();
    let mut fast = Duration::MAX;
    for _ in 0..3 {
        fast = fast.min(round_trip().await);
    }
    assert!(fast < slow, "healed {fast:?}, delayed {slow:?}");
    println!("round trip with 200 + 150 ms of delay: {slow:?}; healed: {fast:?}");
}

#[tokio::test]
async fn a_lost_reply_leaves_the_request_done_and_the_session_alive() {
    let (zk, path, proxy) = setup("proxy-lost-reply").await;
    let through = connect(&format!("{}{path}", proxy.addr()), Duration::from_secs(20)).await;
    let behind = direct(&zk, &path).await;
    let session = through.session_id();
    let mut states = through.state_watcher();

    proxy.lose_next_reply(|request| request.is_create() && request.contains(b"/lost-"));
    // Not matching: forwarded with its reply.
    through.create("/kept", b"", &PERSISTENT).await.unwrap();
    assert_eq!(proxy.lost_replies(), 0);
    let err = through
        .create("/lost-1", b"", &PERSISTENT)
        .await
        .unwrap_err();
    println!("the client saw: {err}");
    assert_eq!(proxy.lost_replies(), 1);
    assert!(
        behind.check_stat("/lost-1").await.unwrap().is_some(),
        "the request was done although its reply was lost"
    );
    wait_for_state(
        &mut states,
        SessionState::SyncConnected,
        scaled(Duration::from_secs(20)),
    )
    .await;
    assert_eq!(through.session_id(), session);
    // The rule fired once.
    through.create("/lost-2", b"", &PERSISTENT).await.unwrap();
    assert_eq!(proxy.lost_replies(), 1);

    // A transaction's reply, waited for as an event.
    proxy.lose_next_reply(|request| request.opcode() == opcode::MULTI);
    let mut writer = through.new_multi_writer();
    writer.add_create("/in-multi", b"", &PERSISTENT).unwrap();
    assert!(writer.commit().await.is_err());
    tokio::time::timeout(
        scaled(Duration::from_secs(10)),
        proxy.wait_for_lost_replies(2),
    )
    .await
    .unwrap();
    assert!(behind.check_stat("/in-multi").await.unwrap().is_some());
}
