//! The crate README's first test, as written there (plus the skip when `ZK_CONNECT` names a
//! server of someone else's, which a test may not kill).

mod common;

use std::time::Duration;

use common::not_run;
use zk_testcontainers::{scaled, ZkServer};
use zookeeper_client::{Client, SessionState};

#[tokio::test]
async fn my_code_hears_that_zookeeper_died() {
    if not_run() {
        return;
    }
    let server = ZkServer::start().await.unwrap();
    let client = Client::connect(&server.connect_string()).await.unwrap();
    let mut state = client.state_watcher(); // what your code listens to
    server.kill().await.unwrap();
    let heard = tokio::time::timeout(scaled(Duration::from_secs(30)), state.changed()).await;
    assert_eq!(heard.unwrap(), SessionState::Disconnected);
}
