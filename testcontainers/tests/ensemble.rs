//! The harness against a real three-member ensemble. One ensemble, one story, to keep the
//! run short: election, failover when the leader dies, no writes without quorum, cleanup.

mod common;

use std::time::Duration;

use common::{connect, container_exists, eventually, network_exists, not_run, PERSISTENT};
use zk_testcontainers::{scaled, ServerMode, ZkEnsemble};

#[tokio::test]
async fn ensemble_fails_over_on_leader_loss_and_stops_writes_without_quorum() {
    if not_run() {
        return;
    }
    let ensemble = ZkEnsemble::start(3).await.unwrap();
    assert_eq!(ensemble.len(), 3);
    assert_eq!(ensemble.connect_string().split(',').count(), 3);

    // Exactly one leader, the others follow.
    let modes: Vec<ServerMode> = ensemble
        .modes()
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let count = |m: ServerMode| modes.iter().filter(|x| **x == m).count();
    assert_eq!(count(ServerMode::Leader), 1, "modes: {modes:?}");
    assert_eq!(count(ServerMode::Follower), 2, "modes: {modes:?}");
    let old_leader = ensemble.leader_index().await.unwrap();
    assert_eq!(modes[old_leader], ServerMode::Leader);

    let client = connect(&ensemble.connect_string(), Duration::from_secs(20)).await;
    client.create("/before", b"", &PERSISTENT).await.unwrap();

    // Kill the leader: the two survivors elect a new one and writes go on.
    ensemble.member(old_leader).kill().await.unwrap();
    ensemble
        .wait_for_quorum(scaled(Duration::from_secs(30)))
        .await
        .unwrap();
    let new_leader = ensemble.leader_index().await.unwrap();
    assert_ne!(new_leader, old_leader);
    eventually(
        "a write after failover",
        scaled(Duration::from_secs(30)),
        || client.create("/after-failover", b"", &PERSISTENT),
    )
    .await;
    assert!(client.check_stat("/before").await.unwrap().is_some());

    // Kill one more: the last member has no quorum; writes fail or hang.
    let last = (0..3)
        .find(|i| *i != old_leader && *i != new_leader)
        .unwrap();
    ensemble.member(new_leader).kill().await.unwrap();
    let write = client.create("/without-quorum", b"", &PERSISTENT);
    match tokio::time::timeout(scaled(Duration::from_secs(5)), write).await {
        Err(_) => {} // no answer: the write cannot commit
        Ok(Err(_)) => {}
        Ok(Ok(_)) => panic!("a write succeeded with one member of three alive"),
    }
    // And the survivor says so itself once it notices.
    let survivor = ensemble.member(last);
    let deadline = tokio::time::Instant::now() + scaled(Duration::from_secs(30));
    loop {
        if survivor.mode().await.ok() == Some(ServerMode::NotServing) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the survivor kept serving without quorum"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Dropping the ensemble removes its containers, then its network.
    let names: Vec<String> = ensemble
        .members()
        .iter()
        .map(|m| m.container_name().to_owned())
        .collect();
    let network = ensemble.network_name().to_owned();
    drop(client);
    drop(ensemble);
    for name in &names {
        assert!(
            !container_exists(name).await,
            "{name} survived the ensemble"
        );
    }
    assert!(
        !network_exists(&network).await,
        "{network} survived the ensemble"
    );
}

#[tokio::test]
async fn disconnected_member_rejoins_the_ensemble() {
    if not_run() {
        return;
    }
    let ensemble = ZkEnsemble::start(3).await.unwrap();
    let leader = ensemble.leader_index().await.unwrap();
    let member = ensemble.member(leader);
    let port = member.host_port();

    // Cut the leader off: the others elect a new leader among themselves.
    member.disconnect().await.unwrap();
    assert!(member.four_letter("ruok").await.is_err());
    let deadline = tokio::time::Instant::now() + scaled(Duration::from_secs(30));
    loop {
        let modes = ensemble.modes().await;
        let others_lead = modes
            .iter()
            .enumerate()
            .any(|(i, m)| i != leader && matches!(m, Ok(ServerMode::Leader)));
        if others_lead {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no new leader: {modes:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Back on the network: same host port, and it rejoins as a follower.
    member.reconnect().await.unwrap();
    assert_eq!(member.host_port(), port);
    ensemble
        .wait_for_all_serving(scaled(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(member.mode().await.unwrap(), ServerMode::Follower);
    let client = connect(&member.connect_string(), Duration::from_secs(20)).await;
    client
        .create("/via-rejoined", b"", &PERSISTENT)
        .await
        .unwrap();
}

/// Curator `TestingCluster`-style operations: the leader as a member, the member a session is
/// connected to, and the whole ensemble stopped and started again with its data.
#[tokio::test]
async fn the_ensemble_finds_its_leader_and_a_sessions_member_and_restarts_whole() {
    if not_run() {
        return;
    }
    let ensemble = ZkEnsemble::start(3).await.unwrap();
    let leader = ensemble.leader().await.unwrap();
    assert_eq!(leader.mode().await.unwrap(), ServerMode::Leader);

    // A client of member 1 alone: the ensemble finds it there.
    let client = connect(
        &ensemble.member(1).connect_string(),
        Duration::from_secs(30),
    )
    .await;
    client.create("/kept", b"1", &PERSISTENT).await.unwrap();
    let found = ensemble
        .member_of_session(client.session_id().0)
        .await
        .unwrap()
        .expect("the session's member");
    assert_eq!(found.container_name(), ensemble.member(1).container_name());
    assert!(ensemble.member_of_session(0x7777).await.unwrap().is_none());

    // The whole ensemble down, then up again with its data; the session survives the outage.
    let watcher = client.state_watcher();
    ensemble.stop().await.unwrap();
    for i in 0..3 {
        assert!(
            ensemble.member(i).mode().await.is_err(),
            "member {i} still answers"
        );
    }
    ensemble.start_again().await.unwrap();
    let (data, _) = eventually(
        "the client to read again",
        scaled(Duration::from_secs(30)),
        || client.get_data("/kept"),
    )
    .await;
    assert_eq!(data, b"1");
    assert_eq!(
        watcher.peek_state(),
        zookeeper_client::SessionState::SyncConnected
    );
}

/// Each member's address on the ensemble's network, as Docker reports it.
async fn addresses(ensemble: &ZkEnsemble) -> Vec<String> {
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .unwrap();
    let mut found = Vec::new();
    for member in ensemble.members() {
        let inspected = docker
            .inspect_container(member.container_id(), None)
            .await
            .unwrap();
        let address = inspected
            .network_settings
            .and_then(|s| s.networks)
            .and_then(|mut n| n.remove(ensemble.network_name()))
            .and_then(|e| e.ip_address)
            .unwrap_or_default();
        found.push(address);
    }
    found
}

/// Members keep their addresses when killed and started again in another order (Docker would
/// hand the first one back the lowest free address, another member's) and when cut off and
/// reconnected: ZooKeeper keeps the addresses it resolved for its peers, and a member whose
/// peers dial a stale one stays out of the ensemble.
#[tokio::test]
async fn members_keep_their_addresses_through_kills_and_cuts() {
    if not_run() {
        return;
    }
    let ensemble = ZkEnsemble::start(3).await.unwrap();
    let before = addresses(&ensemble).await;
    assert!(before.iter().all(|a| !a.is_empty()), "{before:?}");

    ensemble.member(0).kill().await.unwrap();
    ensemble.member(1).kill().await.unwrap();
    ensemble.member(1).start_again().await.unwrap();
    ensemble.member(0).start_again().await.unwrap();
    ensemble.member(2).disconnect().await.unwrap();
    ensemble.member(2).reconnect().await.unwrap();
    assert_eq!(addresses(&ensemble).await, before);
    ensemble
        .wait_for_all_serving(scaled(Duration::from_secs(60)))
        .await
        .unwrap();
}
