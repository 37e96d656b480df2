//! The crate README's first test, as written there (plus the skip when `ZK_CONNECT` names a
//! server of someone else's, which a test may not kill), and a check that the README still
//! shows it.

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

/// Every line of the README's example is in the test above, in order: the two cannot drift.
#[test]
fn the_readme_shows_this_test() {
    let readme = include_str!("../README.md");
    let this = include_str!("readme.rs");
    let example = readme
        .split("```rust,no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README's first example");
    let mut rest = this;
    for line in example.lines().filter(|l| !l.trim().is_empty()) {
        let at = rest.find(line).unwrap_or_else(|| {
            panic!("the README's line is not in tests/readme.rs, in order: {line}")
        });
        rest = &rest[at + line.len()..];
    }
}
