//! A ZooKeeper ensemble: N members on a private Docker network.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::server::{launch, Launch, POLL_INTERVAL, POLL_TIMEOUT};
use crate::{docker, image, network, scaled, HarnessError, ServerMode, ServerOptions, ZkMember};

/// An ensemble of N members (typically 3 or 5) on a private Docker network, where members
/// address each other by container name. Each member's client port is published on
/// `127.0.0.1`. The containers, then the network, are removed when this value is dropped
/// (also when the test panics).
///
/// Each member keeps one address on the network for its life, through kills, restarts and
/// cuts (as real servers do; ZooKeeper keeps the addresses it resolved for its peers).
///
/// ```no_run
/// use std::time::Duration;
/// use zk_testcontainers::{scaled, ZkEnsemble};
///
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let ensemble = ZkEnsemble::start(3).await?;
/// let client = zookeeper_client::Client::connect(&ensemble.connect_string()).await.unwrap();
/// ensemble.leader().await?.kill().await?;
/// ensemble.wait_for_quorum(scaled(Duration::from_secs(30))).await?; // a new leader
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ZkEnsemble {
    // Removed in order (see `Drop`): each container, then the network.
    members: Vec<ZkMember>,
    network: String,
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        // Each member's container is removed as it drops; a network in use cannot be.
        self.members.clear();
        network::remove_blocking(std::mem::take(&mut self.network));
    }
}

impl ZkEnsemble {
    /// Starts an ensemble of `n` members with the default [`ServerOptions`] and waits until
    /// every member serves (one leader, the others following).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(5).await?;
    /// assert_eq!(ensemble.len(), 5);
    /// # Ok(()) }
    /// ```
    pub async fn start(n: usize) -> Result<ZkEnsemble, HarnessError> {
        Self::start_with(n, ServerOptions::default()).await
    }

    /// Starts an ensemble of `n` members (1 to 9) with the given options and waits until
    /// every member serves (one leader, the others following), within the options' startup
    /// timeout.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zk_testcontainers::{ServerOptions, ZkEnsemble};
    ///
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let opts = ServerOptions::default().with_startup_timeout(Duration::from_secs(120));
    /// let ensemble = ZkEnsemble::start_with(3, opts).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_with(n: usize, opts: ServerOptions) -> Result<ZkEnsemble, HarnessError> {
        if !(1..=9).contains(&n) {
            return Err(HarnessError::Config(format!(
                "an ensemble needs 1 to 9 members, not {n}"
            )));
        }
        let image = opts.image.clone().unwrap_or_else(image::configured_image);
        image::prepare(&image).await?;
        let base = docker::unique_name();
        let network = format!("{base}-net");
        let names: Vec<String> = (1..=n).map(|id| format!("{base}-{id}")).collect();
        let servers = names
            .iter()
            .enumerate()
            .map(|(i, name)| format!("server.{}={name}:2888:3888;2181", i + 1))
            .collect::<Vec<_>>()
            .join(" ");
        network::create(&network).await?;
        // From here on, dropping the ensemble removes the network.
        let mut ensemble = ZkEnsemble {
            members: Vec::with_capacity(n),
            network,
        };
        for (i, name) in names.into_iter().enumerate() {
            let mut member = launch(Launch {
                opts: &opts,
                image: &image,
                name,
                network: Some(&ensemble.network),
                member: Some((i as u32 + 1, &servers)),
            })
            .await?;
            // Before the next member starts, so that it cannot take this one's address.
            member.pin_address().await?;
            ensemble.members.push(member);
        }
        let deadline = Instant::now() + scaled(opts.startup_timeout);
        for member in &ensemble.members {
            member
                .wait_until_up(deadline.saturating_duration_since(Instant::now()))
                .await?;
        }
        ensemble
            .wait_for_all_serving(deadline.saturating_duration_since(Instant::now()))
            .await?;
        Ok(ensemble)
    }

    /// All members' connect strings, comma-separated: `127.0.0.1:p1,127.0.0.1:p2,...`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// assert_eq!(ensemble.connect_string().split(',').count(), 3);
    /// # Ok(()) }
    /// ```
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(ZkMember::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Member `i` (0-based; its ZooKeeper server id is `i + 1`).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// ensemble.member(2).disconnect().await?;
    /// # Ok(()) }
    /// ```
    pub fn member(&self, i: usize) -> &ZkMember {
        &self.members[i]
    }

    /// All members, in server-id order.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// for member in ensemble.members() {
    ///     println!("{}", member.connect_string());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn members(&self) -> &[ZkMember] {
        &self.members
    }

    /// Number of members.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// assert_eq!(ensemble.len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always `false`: an ensemble has at least one member.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// assert!(!ensemble.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Name of the ensemble's private Docker network.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// println!("docker network inspect {}", ensemble.network_name());
    /// # Ok(()) }
    /// ```
    pub fn network_name(&self) -> &str {
        &self.network
    }

    /// Every member's [`ServerMode`] right now (asked concurrently with `srvr`), or the
    /// error that kept it from answering (stopped, paused, disconnected...).
    ///
    /// ```no_run
    /// use zk_testcontainers::ServerMode;
    ///
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// let leaders = ensemble
    ///     .modes()
    ///     .await
    ///     .into_iter()
    ///     .filter(|m| matches!(m, Ok(ServerMode::Leader)))
    ///     .count();
    /// assert_eq!(leaders, 1);
    /// # Ok(()) }
    /// ```
    pub async fn modes(&self) -> Vec<Result<ServerMode, HarnessError>> {
        let limit = scaled(POLL_TIMEOUT);
        futures::future::join_all(self.members.iter().map(|m| m.mode_within(limit))).await
    }

    /// The member that leads now: the one whose `srvr` says `Mode: leader`. Asks once,
    /// without waiting; fails with [`HarnessError::Quorum`] if no member, or more than one,
    /// claims to lead (e.g. during an election: see [`wait_for_quorum`](Self::wait_for_quorum)).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// let leader = ensemble.leader().await?;
    /// println!("leader: server id {:?}", leader.server_id());
    /// leader.kill().await?;
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<&ZkMember, HarnessError> {
        Ok(&self.members[self.leader_index().await?])
    }

    /// The index of the member that leads (for [`member`](Self::member)), as
    /// [`leader`](Self::leader) finds it.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// let i = ensemble.leader_index().await?;
    /// ensemble.member((i + 1) % ensemble.len()).kill().await?; // a follower
    /// # Ok(()) }
    /// ```
    pub async fn leader_index(&self) -> Result<usize, HarnessError> {
        let modes = self.modes().await;
        let leaders: Vec<usize> = leaders(&modes);
        match leaders.as_slice() {
            [one] => Ok(*one),
            [] => Err(HarnessError::Quorum(format!(
                "no member is leader: {}",
                self.describe(&modes)
            ))),
            _ => Err(HarnessError::Quorum(format!(
                "several members claim to lead: {}",
                self.describe(&modes)
            ))),
        }
    }

    /// The member a client session (by ZooKeeper's session id) is connected to, from each
    /// member's `cons`; `None` when no member lists it (disconnected, or closed).
    ///
    /// ```no_run
    /// # async fn demo(client: zookeeper_client::Client) -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// if let Some(member) = ensemble.member_of_session(client.session_id().0).await? {
    ///     member.disconnect().await?; // cut off the client's own server
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn member_of_session(
        &self,
        session_id: i64,
    ) -> Result<Option<&ZkMember>, HarnessError> {
        let needle = format!("sid={session_id:#x}");
        for member in &self.members {
            // A member that does not answer (stopped, frozen, cut off) serves nobody now.
            if let Ok(cons) = member.four_letter("cons").await {
                if cons.contains(&needle) {
                    return Ok(Some(member));
                }
            }
        }
        Ok(None)
    }

    /// Stops every member at once (a graceful stop each, as [`ZkMember::stop`]): the whole
    /// ensemble is down, its data kept.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// ensemble.stop().await?;
    /// ensemble.start_again().await?;
    /// # Ok(()) }
    /// ```
    pub async fn stop(&self) -> Result<(), HarnessError> {
        let stopped = futures::future::join_all(self.members.iter().map(|m| m.stop())).await;
        stopped.into_iter().collect()
    }

    /// Starts every member again at once (same data, same connect strings) and waits until
    /// all of them serve again (within 60 s, [`scaled`](crate::scaled)).
    ///
    /// ```no_run
    /// # async fn demo(ensemble: zk_testcontainers::ZkEnsemble) -> Result<(), zk_testcontainers::HarnessError> {
    /// ensemble.start_again().await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_again(&self) -> Result<(), HarnessError> {
        let started = futures::future::join_all(self.members.iter().map(|m| m.start_again())).await;
        started.into_iter().collect::<Result<(), HarnessError>>()?;
        self.wait_for_all_serving(crate::scaled(Duration::from_secs(60)))
            .await
    }

    /// Waits until exactly one member leads and a majority of members serve (leader plus
    /// followers). `timeout` is used as given: wrap it in [`scaled`](crate::scaled).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zk_testcontainers::scaled;
    ///
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// ensemble.member(0).stop().await?;
    /// ensemble.member(0).start_again().await?;
    /// ensemble.wait_for_quorum(scaled(Duration::from_secs(30))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_quorum(&self, timeout: Duration) -> Result<(), HarnessError> {
        self.wait_for_serving(self.members.len() / 2 + 1, timeout)
            .await
    }

    /// Waits until exactly one member leads and all the others follow, e.g. after a member
    /// came back with [`start_again`](ZkMember::start_again) or
    /// [`reconnect`](ZkMember::reconnect). `timeout` is used as given: wrap it in
    /// [`scaled`](crate::scaled).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zk_testcontainers::scaled;
    ///
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
    /// ensemble.member(1).disconnect().await?;
    /// ensemble.member(1).reconnect().await?;
    /// ensemble.wait_for_all_serving(scaled(Duration::from_secs(30))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_all_serving(&self, timeout: Duration) -> Result<(), HarnessError> {
        self.wait_for_serving(self.members.len(), timeout).await
    }

    async fn wait_for_serving(&self, needed: usize, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            let modes = self.modes().await;
            let serving = modes
                .iter()
                .filter(|m| matches!(m, Ok(ServerMode::Leader | ServerMode::Follower)))
                .count();
            if leaders(&modes).len() == 1 && serving >= needed {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::Timeout(format!(
                    "not {needed} of {} members serving with one leader within {timeout:?}: {}",
                    self.members.len(),
                    self.describe(&modes)
                )));
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    fn describe(&self, modes: &[Result<ServerMode, HarnessError>]) -> String {
        let mut out = String::new();
        for (i, (member, mode)) in self.members.iter().zip(modes).enumerate() {
            let _ = match mode {
                Ok(mode) => write!(out, "[{i}] {}: {mode}; ", member.container_name()),
                Err(e) => write!(out, "[{i}] {}: {e}; ", member.container_name()),
            };
        }
        out.trim_end_matches("; ").to_owned()
    }
}

fn leaders(modes: &[Result<ServerMode, HarnessError>]) -> Vec<usize> {
    modes
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Ok(ServerMode::Leader)))
        .map(|(i, _)| i)
        .collect()
}
