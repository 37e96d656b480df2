//! The harness against real standalone servers: each test asserts what a ZooKeeper client
//! actually observes.

mod common;

use std::time::Duration;

use common::{
    connect, container_exists, container_volumes, eventually, not_run, volume_exists,
    wait_for_state, PERSISTENT,
};
use zk_testcontainers::{expire_session, scaled, test_server, ServerMode, ServerOptions, ZkServer};
use zookeeper_client::SessionState;

/// Also runs against `ZK_CONNECT`: it needs no fault injection.
#[tokio::test]
async fn server_answers_create_and_read() {
    let zk = test_server().await.unwrap();
    if let Some(server) = zk.server() {
        assert_eq!(server.mode().await.unwrap(), ServerMode::Standalone);
        assert!(server.four_letter("ruok").await.unwrap().contains("imok"));
    }

    let root = zk_testcontainers::chroot(&zk.connect_string(), "create and read")
        .await
        .unwrap();
    assert!(root.starts_with(&format!(
        "{}/zk-tests/create_and_read-",
        zk.connect_string()
    )));
    let client = connect(&root, Duration::from_secs(10)).await;
    client
        .create("/greeting", b"hello", &PERSISTENT)
        .await
        .unwrap();
    let (data, stat) = client.get_data("/greeting").await.unwrap();
    assert_eq!(data, b"hello");
    assert_eq!(stat.version, 0);
    // The chroot is real: the node lives under it on the server.
    let plain = connect(&zk.connect_string(), Duration::from_secs(10)).await;
    let under = root.trim_start_matches(&zk.connect_string());
    let (data, _) = plain.get_data(&format!("{under}/greeting")).await.unwrap();
    assert_eq!(data, b"hello");
}

#[tokio::test]
async fn paused_server_disconnects_client_and_unpause_reconnects_it() {
    if not_run() {
        return;
    }
    let server = ZkServer::start().await.unwrap();
    // Detection takes 2/5 of the session timeout, and the session must outlive the pause:
    // the server expires it on waking up otherwise. So: no slow checks while frozen.
    let client = connect(&server.connect_string(), Duration::from_secs(8)).await;
    let session = client.session_id();
    let mut states = client.state_watcher();

    server.pause().await.unwrap();
    wait_for_state(
        &mut states,
        SessionState::Disconnected,
        scaled(Duration::from_secs(15)),
    )
    .await;

    server.unpause().await.unwrap();
    wait_for_state(
        &mut states,
        SessionState::SyncConnected,
        scaled(Duration::from_secs(15)),
    )
    .await;
    assert_eq!(client.session_id(), session);
    client
        .create("/after-pause", b"", &PERSISTENT)
        .await
        .unwrap();
}

/// Also runs against `ZK_CONNECT`: it needs no fault injection.
#[tokio::test]
async fn expire_session_expires_the_clients_session() {
    let zk = test_server().await.unwrap();
    let root = zk_testcontainers::chroot(&zk.connect_string(), "expire")
        .await
        .unwrap();
    // Long enough that it cannot expire by itself during the test.
    let client = connect(&root, Duration::from_secs(30)).await;
    let mut states = client.state_watcher();
    client.create("/before", b"", &PERSISTENT).await.unwrap();

    expire_session(&root, client.session()).await.unwrap();
    wait_for_state(
        &mut states,
        SessionState::Expired,
        scaled(Duration::from_secs(15)),
    )
    .await;
    assert!(matches!(
        client.get_data("/before").await,
        Err(zookeeper_client::Error::SessionExpired)
    ));
}

/// Twenty sessions expired at once, each while its own client reconnects at once after every
/// takeover: every client sees `Expired`, and no expiry needs more than the helper's bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_session_wins_against_clients_that_reconnect_at_once() {
    let zk = test_server().await.unwrap();
    let root = zk_testcontainers::chroot(&zk.connect_string(), "expire-many")
        .await
        .unwrap();
    let mut expiries = Vec::new();
    for _ in 0..20 {
        let client = connect(&root, Duration::from_secs(30)).await;
        let root = root.clone();
        expiries.push(tokio::spawn(async move {
            let mut states = client.state_watcher();
            expire_session(&root, client.session()).await.unwrap();
            wait_for_state(
                &mut states,
                SessionState::Expired,
                scaled(Duration::from_secs(15)),
            )
            .await;
        }));
    }
    for expiry in expiries {
        expiry.await.unwrap();
    }
}

#[tokio::test]
async fn stop_and_start_again_keep_connect_string_data_and_session() {
    if not_run() {
        return;
    }
    let server = ZkServer::start().await.unwrap();
    let connect_string = server.connect_string();
    let client = connect(&connect_string, Duration::from_secs(20)).await;
    let session = client.session_id();
    let mut states = client.state_watcher();
    client
        .create("/durable", b"kept", &PERSISTENT)
        .await
        .unwrap();

    server.stop().await.unwrap();
    wait_for_state(
        &mut states,
        SessionState::Disconnected,
        scaled(Duration::from_secs(10)),
    )
    .await;
    assert!(
        server.four_letter("ruok").await.is_err(),
        "a stopped server answered"
    );

    server.start_again().await.unwrap();
    assert_eq!(server.connect_string(), connect_string);
    // The old client finds the server at the same address and resumes its session.
    wait_for_state(
        &mut states,
        SessionState::SyncConnected,
        scaled(Duration::from_secs(20)),
    )
    .await;
    assert_eq!(client.session_id(), session);
    let (data, _) = eventually("reading /durable", scaled(Duration::from_secs(10)), || {
        client.get_data("/durable")
    })
    .await;
    assert_eq!(data, b"kept");
}

#[tokio::test]
async fn kill_and_start_again_keep_data() {
    if not_run() {
        return;
    }
    let server = ZkServer::start().await.unwrap();
    let client = connect(&server.connect_string(), Duration::from_secs(20)).await;
    client.create("/survivor", b"1", &PERSISTENT).await.unwrap();

    server.kill().await.unwrap();
    assert!(
        server.four_letter("ruok").await.is_err(),
        "a killed server answered"
    );
    server.start_again().await.unwrap();
    let fresh = connect(&server.connect_string(), Duration::from_secs(10)).await;
    assert_eq!(fresh.get_data("/survivor").await.unwrap().0, b"1");
}

#[tokio::test]
async fn disconnect_cuts_the_client_and_reconnect_restores_it() {
    if not_run() {
        return;
    }
    let server = ZkServer::start().await.unwrap();
    let client = connect(&server.connect_string(), Duration::from_secs(20)).await;
    let session = client.session_id();
    let mut states = client.state_watcher();

    server.disconnect().await.unwrap();
    wait_for_state(
        &mut states,
        SessionState::Disconnected,
        scaled(Duration::from_secs(10)),
    )
    .await;
    assert!(
        server.four_letter("ruok").await.is_err(),
        "the host port still answers while disconnected"
    );

    server.reconnect().await.unwrap();
    wait_for_state(
        &mut states,
        SessionState::SyncConnected,
        scaled(Duration::from_secs(20)),
    )
    .await;
    assert_eq!(client.session_id(), session);
    client
        .create("/after-reconnect", b"", &PERSISTENT)
        .await
        .unwrap();
}

/// The container goes away with its handle, also when the owner panics, and so does the
/// volume that holds the server's data.
#[tokio::test]
async fn container_is_removed_on_drop_and_on_panic() {
    if not_run() {
        return;
    }
    let server = ZkServer::start().await.unwrap();
    let name = server.container_name().to_owned();
    assert!(container_exists(&name).await);
    let volumes = container_volumes(&name).await;
    assert!(
        !volumes.is_empty(),
        "{name} keeps its data in its own layer, not on a volume"
    );
    drop(server);
    assert!(!container_exists(&name).await, "{name} survived its handle");
    for volume in volumes {
        assert!(
            !volume_exists(&volume).await,
            "volume {volume} of {name} survived its handle"
        );
    }

    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let server = ZkServer::start().await.unwrap();
        tx.send(server.container_name().to_owned()).unwrap();
        panic!("deliberate panic with a live server");
    });
    assert!(task.await.unwrap_err().is_panic());
    let name = rx.await.unwrap();
    assert!(!container_exists(&name).await, "{name} survived a panic");
}

/// With its data in memory, a server keeps it on a `tmpfs` (no volume) and loses it when
/// killed, as documented.
#[tokio::test]
async fn data_in_memory_is_on_tmpfs_and_gone_after_a_kill() {
    if not_run() {
        return;
    }
    let options = ServerOptions::default().with_data_in_memory(true);
    let server = ZkServer::start_with(options).await.unwrap();
    let name = server.container_name().to_owned();
    assert!(
        container_volumes(&name).await.is_empty(),
        "{name} has a volume although its data is in memory"
    );
    let client = connect(&server.connect_string(), Duration::from_secs(20)).await;
    client
        .create("/in-memory", b"1", &PERSISTENT)
        .await
        .unwrap();
    assert_eq!(client.get_data("/in-memory").await.unwrap().0, b"1");

    server.kill().await.unwrap();
    server.start_again().await.unwrap();
    let fresh = connect(&server.connect_string(), Duration::from_secs(10)).await;
    assert!(
        fresh.check_stat("/in-memory").await.unwrap().is_none(),
        "data kept in memory survived a kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_on_a_multi_thread_runtime() {
    if not_run() {
        return;
    }
    let server = ZkServer::start().await.unwrap();
    let name = server.container_name().to_owned();
    let client = connect(&server.connect_string(), Duration::from_secs(10)).await;
    client.create("/mt", b"", &PERSISTENT).await.unwrap();
    drop(server);
    assert!(!container_exists(&name).await, "{name} survived its handle");
}

/// The local image runs the ZooKeeper version `ZK_VERSION` asks for (3.8 unless told 3.9), as
/// the server itself reports it, and both answer the four-letter words and `mntr` keys the
/// benchmark and the tests read.
#[tokio::test]
async fn the_local_image_runs_the_zookeeper_version_asked_for() {
    if std::env::var_os("ZK_IMAGE").is_some() || not_run() {
        return eprintln!("NOT RUN: checks the local image (ZK_IMAGE is set, or no Docker)");
    }
    let want = match std::env::var("ZK_VERSION").as_deref() {
        Ok("3.9") => "3.9.",
        _ => "3.8.",
    };
    let server = ZkServer::start().await.unwrap();
    let srvr = server.four_letter("srvr").await.unwrap();
    let version = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version: "))
        .unwrap_or_else(|| panic!("no version in srvr:\n{srvr}"));
    assert!(
        version.starts_with(want),
        "asked for {want}x, runs {version}"
    );
    let mntr = server.four_letter("mntr").await.unwrap();
    for key in [
        "zk_cnt_sync_processor_batch_size",
        "zk_watch_count",
        "zk_znode_count",
    ] {
        assert!(mntr.contains(key), "mntr of {version} lacks {key}:\n{mntr}");
    }
    for word in ["cons", "wchs", "dump"] {
        assert!(
            !server.four_letter(word).await.unwrap().is_empty(),
            "{word}"
        );
    }
}

/// A server started through the ordinary testcontainers API, with the harness's fault helpers
/// on it: a client connects, its session is expired on demand, and the container is frozen and
/// thawed with testcontainers' own `pause` / `unpause`.
#[tokio::test]
async fn a_server_started_with_the_testcontainers_api_takes_the_fault_helpers() {
    use testcontainers::runners::AsyncRunner;
    if not_run() {
        return;
    }
    let image = zk_testcontainers::ZooKeeper::default();
    zk_testcontainers::ensure_image(&image.reference())
        .await
        .unwrap();
    let server = image.start().await.unwrap();
    let port = server
        .get_host_port_ipv4(zk_testcontainers::CLIENT_PORT)
        .await
        .unwrap();
    let connect_string = format!("127.0.0.1:{port}");
    let client = connect(&connect_string, Duration::from_secs(4)).await;
    client.create("/a", b"1", &PERSISTENT).await.unwrap();
    assert_eq!(client.get_data("/a").await.unwrap().0, b"1");

    let mut watcher = client.state_watcher();
    expire_session(&connect_string, client.session())
        .await
        .unwrap();
    wait_for_state(
        &mut watcher,
        SessionState::Expired,
        scaled(Duration::from_secs(20)),
    )
    .await;

    let client = connect(&connect_string, Duration::from_secs(4)).await;
    let mut watcher = client.state_watcher();
    server.pause().await.unwrap();
    wait_for_state(
        &mut watcher,
        SessionState::Disconnected,
        scaled(Duration::from_secs(20)),
    )
    .await;
    server.unpause().await.unwrap();
    wait_for_state(
        &mut watcher,
        SessionState::SyncConnected,
        scaled(Duration::from_secs(20)),
    )
    .await;
    assert_eq!(client.get_data("/a").await.unwrap().0, b"1");
}
