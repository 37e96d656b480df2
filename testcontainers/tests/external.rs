//! `ZK_CONNECT` mode: tests run against an existing server and own no container. Its own test
//! binary, because it sets the process environment.

mod common;

use std::time::Duration;

use common::{connect, PERSISTENT};
use zk_testcontainers::{ensemble_unavailable_reason, test_server, TestZk, ZkServer};

#[tokio::test]
async fn zk_connect_selects_an_external_server() {
    // Stand in for "an existing server" with a container, unless one is configured already.
    let _container = match std::env::var("ZK_CONNECT") {
        Ok(existing) if !existing.trim().is_empty() => None,
        _ => {
            let server = ZkServer::start().await.unwrap();
            // Only this test runs in this process: nothing reads the environment meanwhile.
            std::env::set_var("ZK_CONNECT", server.connect_string());
            Some(server)
        }
    };
    let expected = std::env::var("ZK_CONNECT").unwrap().trim().to_owned();

    let zk = test_server().await.unwrap();
    assert!(matches!(&zk, TestZk::External(s) if *s == expected));
    assert_eq!(zk.connect_string(), expected);
    assert!(zk.server().is_none());
    let reason = ensemble_unavailable_reason().expect("ensembles are unavailable");
    assert!(
        reason.contains(&expected) && reason.contains("not run"),
        "{reason}"
    );

    // Chroots keep tests on a shared server apart.
    let a = zk_testcontainers::chroot(&zk.connect_string(), "shared")
        .await
        .unwrap();
    let b = zk_testcontainers::chroot(&zk.connect_string(), "shared")
        .await
        .unwrap();
    assert_ne!(a, b);
    let client_a = connect(&a, Duration::from_secs(10)).await;
    let client_b = connect(&b, Duration::from_secs(10)).await;
    client_a.create("/mine", b"a", &PERSISTENT).await.unwrap();
    assert!(client_b.check_stat("/mine").await.unwrap().is_none());
    // A chroot below a chroot.
    let nested = zk_testcontainers::chroot(&a, "inner").await.unwrap();
    assert!(
        nested.starts_with(&format!("{a}/zk-tests/inner-")),
        "{nested}"
    );
    let client_n = connect(&nested, Duration::from_secs(10)).await;
    client_n.create("/deep", b"", &PERSISTENT).await.unwrap();
}
