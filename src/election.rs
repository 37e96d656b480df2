//! [`LeaderElection`]: one leader among candidates, with a term that fences its writes, and
//! [`LeaderObserver`] for those who only watch.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, info_span, Instrument};
use zookeeper_client as zk;

use crate::error::{connection_lost, Error, Result};
use crate::fence::FencingToken;
use crate::grant::Grant;
use crate::path::{sorted_contenders, ZkPath};
use crate::queue::{exclusive, Queue, Rule, Wait};
use crate::session::Session;

/// Curator's `LeaderLatch` names its nodes `_c_{uuid}-latch-NNNNNNNNNN`; so do we.
const RULE: Rule = Rule {
    names: &["latch-"],
    decide: exclusive,
    // Curator's LeaderLatch reacts to NodeDeleted only.
    head_release: false,
};

/// Leader election on a ZooKeeper path: candidates queue like [`ZkMutex`](crate::ZkMutex)
/// contenders (each watches only its predecessor); the first leads. The candidate's `info`
/// (an id, an address) is stored in its node so observers can tell who leads.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{LeaderElection, Session, SessionOptions};
///
/// # async fn lead() {}
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let election = LeaderElection::new(&session, "/election/app", "worker-7@10.0.0.7:8080")?;
/// let leadership = election.campaign().await?;
/// println!("leading in term {}", leadership.term());
/// tokio::select! {
///     reason = leadership.lost() => eprintln!("no longer leader: {reason:?}"),
///     _ = lead() => leadership.resign().await?,
/// }
/// # Ok(()) }
/// ```
pub struct LeaderElection {
    queue: Queue,
    info: Vec<u8>,
}

impl fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElection")
            .field("path", &self.queue.root().as_str())
            .finish()
    }
}

impl LeaderElection {
    /// An election on `path` for a candidate described by `info`. Nothing is sent until
    /// [`campaign`](LeaderElection::campaign).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let election = zk_recipes::LeaderElection::new(session, "/election/app", "worker-1")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str, info: impl Into<Vec<u8>>) -> Result<LeaderElection> {
        Ok(LeaderElection {
            queue: Queue::new(session, path)?,
            info: info.into(),
        })
    }

    /// Stands as a candidate and waits until elected. If the session expires while waiting,
    /// it stands again on the new session.
    ///
    /// # Errors
    ///
    /// As [`ZkMutex::lock`](crate::ZkMutex::lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future withdraws the candidacy (its node is deleted in the
    /// background) and never blocks other candidates.
    ///
    /// ```no_run
    /// # async fn demo(election: zk_recipes::LeaderElection) -> Result<(), zk_recipes::Error> {
    /// let leadership = election.campaign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn campaign(&self) -> Result<Leadership> {
        self.campaign_until(Wait::Forever)
            .await
            .map(|l| l.expect("waits until elected"))
    }

    /// Campaigns for at most `timeout`; `Ok(None)` (candidacy withdrawn) if not elected by then.
    ///
    /// # Errors
    ///
    /// As [`campaign`](LeaderElection::campaign).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`campaign`](LeaderElection::campaign).
    ///
    /// ```no_run
    /// # async fn demo(election: zk_recipes::LeaderElection) -> Result<(), zk_recipes::Error> {
    /// if election.campaign_timeout(std::time::Duration::from_secs(1)).await?.is_none() {
    ///     println!("someone else leads");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn campaign_timeout(&self, timeout: Duration) -> Result<Option<Leadership>> {
        self.campaign_until(Wait::Until(Instant::now() + timeout))
            .await
    }

    async fn campaign_until(&self, wait: Wait) -> Result<Option<Leadership>> {
        let span = info_span!("campaign", path = %self.queue.root());
        async {
            info!("campaigning");
            let grant = self.queue.acquire(RULE, 0, &self.info, wait).await?;
            if let Some(grant) = &grant {
                info!(term = %grant.token(), session_id = format_args!("{:#x}", grant.session_id()), "elected");
            }
            Ok(grant.map(|grant| Leadership { grant, info: self.info.clone() }))
        }
        .instrument(span)
        .await
    }

    /// The current leader, or `None` when nobody campaigns.
    ///
    /// # Errors
    ///
    /// [`Error::NoAuth`], [`Error::SessionClosed`], [`Error::Zk`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(election: zk_recipes::LeaderElection) -> Result<(), zk_recipes::Error> {
    /// if let Some(leader) = election.leader().await? {
    ///     println!("{} leads in term {}", String::from_utf8_lossy(&leader.info), leader.term);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<Leader>> {
        Ok(read_leader(self.queue.session(), self.queue.root(), false)
            .await?
            .0)
    }

    /// An observer of this election's leader changes.
    ///
    /// ```no_run
    /// # fn demo(election: zk_recipes::LeaderElection) {
    /// let observer = election.observer();
    /// # }
    /// ```
    pub fn observer(&self) -> LeaderObserver {
        LeaderObserver {
            session: self.queue.session().clone(),
            root: self.queue.root().clone(),
            last: None,
        }
    }
}

/// Leading, until [`resign`](Leadership::resign)ed or lost. Dereferences to [`Grant`] for
/// [`lost`](Grant::lost), [`is_held`](Grant::is_held) and
/// [`fenced_write`](Grant::fenced_write). Dropping it resigns in the background.
///
/// ```no_run
/// # async fn demo(election: zk_recipes::LeaderElection) -> Result<(), zk_recipes::Error> {
/// let leadership = election.campaign().await?;
/// let mut write = leadership.fenced_write();
/// write.set_data("/app/leader-state", leadership.term().to_string().as_bytes(), None);
/// write.commit().await?;
/// leadership.resign().await?;
/// # Ok(()) }
/// ```
#[must_use = "leadership is resigned when dropped"]
#[derive(Debug)]
pub struct Leadership {
    grant: Grant,
    info: Vec<u8>,
}

impl Leadership {
    /// The term: this leadership's fencing token, strictly increasing from leader to leader.
    ///
    /// ```no_run
    /// # fn demo(leadership: zk_recipes::Leadership) {
    /// let term: u64 = leadership.term().into();
    /// # }
    /// ```
    pub fn term(&self) -> FencingToken {
        self.grant.token()
    }

    /// The info this candidate campaigned with.
    ///
    /// ```no_run
    /// # fn demo(leadership: zk_recipes::Leadership) {
    /// println!("{}", String::from_utf8_lossy(leadership.info()));
    /// # }
    /// ```
    pub fn info(&self) -> &[u8] {
        &self.info
    }

    /// Steps down at once: the node is deleted and the next candidate is elected.
    ///
    /// # Errors
    ///
    /// As [`ZkMutexGuard::release`](crate::ZkMutexGuard::release).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if dropped before completing, the node is deleted in the background.
    ///
    /// ```no_run
    /// # async fn demo(leadership: zk_recipes::Leadership) -> Result<(), zk_recipes::Error> {
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn resign(self) -> Result<()> {
        info!(term = %self.term(), "resigning");
        self.grant.release().await
    }
}

impl Deref for Leadership {
    type Target = Grant;
    fn deref(&self) -> &Grant {
        &self.grant
    }
}

/// Who leads: the leader's info, term and node.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The info the leader campaigned with.
    pub info: Vec<u8>,
    /// Its term (fencing token).
    pub term: FencingToken,
    /// Its node.
    pub path: String,
}

/// Follows an election's leader without campaigning: [`changed`](LeaderObserver::changed)
/// reports each new leader (or none) in order, terms only growing.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// let mut observer = zk_recipes::LeaderObserver::new(&session, "/election/app")?;
/// loop {
///     match observer.changed().await? {
///         Some(leader) => println!("leader: term {}", leader.term),
///         None => println!("no leader"),
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct LeaderObserver {
    session: Session,
    root: ZkPath,
    last: Option<Option<Leader>>,
}

impl LeaderObserver {
    /// An observer of the election on `path`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let observer = zk_recipes::LeaderObserver::new(session, "/election/app")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str) -> Result<LeaderObserver> {
        Ok(LeaderObserver {
            session: session.clone(),
            root: ZkPath::new(path)?,
            last: None,
        })
    }

    /// Waits for the leader to differ from the one reported last (the first call reports the
    /// current one at once) and returns it.
    ///
    /// # Errors
    ///
    /// [`Error::NoAuth`], [`Error::SessionClosed`], [`Error::Zk`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a cancelled call reports nothing and loses nothing; the next call compares
    /// with the last leader reported.
    ///
    /// ```no_run
    /// # async fn demo(mut observer: zk_recipes::LeaderObserver) -> Result<(), zk_recipes::Error> {
    /// let now = observer.changed().await?;
    /// let next = observer.changed().await?;
    /// # Ok(()) }
    /// ```
    pub async fn changed(&mut self) -> Result<Option<Leader>> {
        loop {
            let (leader, watcher) = read_leader(&self.session, &self.root, true).await?;
            let known = self.last.as_ref().map(|l| l.as_ref().map(|l| &l.path));
            if known != Some(leader.as_ref().map(|l| &l.path)) {
                self.last = Some(leader.clone());
                return Ok(leader);
            }
            if let Some(watcher) = watcher {
                watcher.changed().await;
            }
        }
    }
}

/// Reads the leader (the first live candidate) and, if asked, sets a watch that fires when it
/// may change: on the leader's node, or on the children while there is none.
async fn read_leader(
    session: &Session,
    root: &ZkPath,
    watch: bool,
) -> Result<(Option<Leader>, Option<zk::OneshotWatcher>)> {
    loop {
        let epoch = session.epoch().await?;
        let client = epoch.client()?;
        let listed = if watch {
            client
                .get_and_watch_children(root.as_str())
                .await
                .map(|(c, _, w)| (c, Some(w)))
        } else {
            client.list_children(root.as_str()).await.map(|c| (c, None))
        };
        let (children, children_watch) = match listed {
            Ok(listed) => listed,
            Err(zk::Error::NoNode) => (Vec::new(), None),
            Err(e) if connection_lost(&e) => {
                drop(client);
                epoch.wait_reconnect().await;
                continue;
            }
            Err(err) => return Err(Error::zk(err, root.as_str())),
        };
        let Some(first) = sorted_contenders(&children, RULE.names)
            .into_iter()
            .find(|c| !c.is_wrapped())
        else {
            if watch && children_watch.is_none() {
                // No root yet: wait for it to appear (or look again if it just did).
                let (stat, w) = client
                    .check_and_watch_stat(root.as_str())
                    .await
                    .map_err(|e| Error::zk(e, root.as_str()))?;
                if stat.is_some() {
                    continue;
                }
                return Ok((None, Some(w)));
            }
            return Ok((None, children_watch));
        };
        let path = root.child(&first.name);
        let read = if watch {
            client
                .get_and_watch_data(&path)
                .await
                .map(|(d, _, w)| (d, Some(w)))
        } else {
            client.get_data(&path).await.map(|(d, _)| (d, None))
        };
        match read {
            Ok((info, watcher)) => {
                let Some(term) = FencingToken::from_sequence(first.sequence) else {
                    continue;
                };
                return Ok((Some(Leader { info, term, path }), watcher));
            }
            // It resigned between the listing and the read: look again.
            Err(zk::Error::NoNode) => continue,
            Err(e) if connection_lost(&e) => {
                drop(client);
                epoch.wait_reconnect().await;
                continue;
            }
            Err(err) => return Err(Error::zk(err, &path)),
        }
    }
}
