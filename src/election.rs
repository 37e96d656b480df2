//! [`ZkLeaderElection`]: one leader among candidates, with a term that fences its writes, and
//! [`ZkLeaderObserver`] for those who only watch.

use std::fmt;

use tracing::{debug, debug_span, info, Instrument};
use zookeeper_client as zk;

use crate::error::Result;
use crate::fence::FencingToken;
use crate::grant::Grant;
use crate::guard::Guard;
use crate::layout::kind::RecipeKind;
use crate::mutex::never_none;
use crate::ops::{self, OrMissing};
use crate::path::{sorted_contenders, Contender, ZkPath};
use crate::queue::{exclusive, Queue, Rule, Wait};
use crate::session::{Epoch, Session};

/// Curator's `LeaderLatch` names its nodes `_c_{uuid}-latch-NNNNNNNNNN`; so do we.
const RULE: Rule = Rule {
    names: &[crate::layout::names::LATCH],
    decide: exclusive,
    naming: crate::path::Naming::Protected,
    // Curator's LeaderLatch reacts to NodeDeleted only.
    head_release: false,
};

/// Leader election on a ZooKeeper path: candidates queue like [`ZkMutex`](crate::ZkMutex)
/// contenders (each watches only its predecessor); the first leads. The candidate's `info`
/// (an id, an address) is stored in its node so observers can tell who leads.
///
/// # Stopping promptly: choose the loss policy
///
/// Under the default [`LossPolicy::Expiry`](crate::LossPolicy::Expiry), a leader cut off from
/// the ensemble learns it lost only when the client gives its session up, a session timeout
/// after the disconnect; meanwhile the ensemble may expire the session and elect the next
/// leader. So for a while two processes believe they lead, and only storage that checks the
/// [`term`](ZkLeadership::term) (the fencing token) keeps the old one's writes out. A job whose
/// effects cannot be fenced (it sends messages, calls other services) needs
/// [`LossPolicy::Suspension`](crate::LossPolicy::Suspension): `lost()` then resolves as soon as
/// the connection goes, before the ensemble can expire the session and elect anyone else. See
/// [`LossPolicy`](crate::LossPolicy).
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{ZkLeaderElection, Session, SessionOptions};
///
/// # async fn lead() {}
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let election = ZkLeaderElection::new(&session, "/election/app", "worker-7@10.0.0.7:8080")?;
/// let leadership = election.campaign().await?;
/// println!("leading in term {}", leadership.term());
/// tokio::select! {
///     reason = leadership.lost() => eprintln!("no longer leader: {reason:?}"),
///     _ = lead() => leadership.release().await?,
/// }
/// # Ok(()) }
/// ```
pub struct ZkLeaderElection {
    queue: Queue,
    info: Vec<u8>,
}

impl fmt::Debug for ZkLeaderElection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkLeaderElection")
            .field("path", &self.queue.root().as_str())
            .finish()
    }
}

impl ZkLeaderElection {
    /// An election on `path` for a candidate described by `info`. Nothing is sent until
    /// [`campaign`](ZkLeaderElection::campaign).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let election = zk_recipes::ZkLeaderElection::new(session, "/election/app", "worker-1")?;
    /// # Ok(()) }
    /// ```
    pub fn new(
        session: &Session,
        path: &str,
        info: impl Into<Vec<u8>>,
    ) -> Result<ZkLeaderElection> {
        Ok(ZkLeaderElection {
            queue: Queue::new(session, path, RecipeKind::Election)?,
            info: info.into(),
        })
    }

    /// Stands as a candidate and waits until elected. If the session expires while waiting,
    /// it stands again on the new session. For a time limit, wrap it in
    /// `tokio::time::timeout` (the candidacy is withdrawn when the future is dropped).
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
    /// # async fn demo(election: zk_recipes::ZkLeaderElection) -> Result<(), zk_recipes::Error> {
    /// let leadership = election.campaign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn campaign(&self) -> Result<ZkLeadership> {
        let span = debug_span!("campaign", path = %self.queue.root());
        async {
            debug!("campaigning");
            let grant = self.queue.acquire(RULE, RULE.names[0], Some(&self.info), Wait::Forever).await?;
            let grant = grant.ok_or_else(never_none)?;
            info!(path = %self.queue.root(), term = %grant.token(), session_id = format_args!("{:#x}", grant.session_id()), "elected");
            Ok(Guard::elected(grant, self.info.clone()))
        }
        .instrument(span)
        .await
    }

    /// Leads if nobody else does now: `Ok(None)` otherwise, with the candidacy withdrawn
    /// (one round trip, never a wait).
    ///
    /// # Errors
    ///
    /// As [`ZkMutex::try_lock`](crate::ZkMutex::try_lock).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`campaign`](ZkLeaderElection::campaign).
    ///
    /// ```no_run
    /// # async fn demo(election: zk_recipes::ZkLeaderElection) -> Result<(), zk_recipes::Error> {
    /// match election.try_campaign().await? {
    ///     Some(leadership) => leadership.release().await?,
    ///     None => println!("someone else leads"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_campaign(&self) -> Result<Option<ZkLeadership>> {
        let grant = self
            .queue
            .acquire(RULE, RULE.names[0], Some(&self.info), Wait::No)
            .await?;
        if let Some(grant) = &grant {
            info!(path = %self.queue.root(), term = %grant.token(), session_id = format_args!("{:#x}", grant.session_id()), "elected");
        }
        Ok(grant.map(|grant| Guard::elected(grant, self.info.clone())))
    }

    /// The current leader, or `None` when nobody campaigns.
    ///
    /// # Errors
    ///
    /// [`Error::NoAuth`](crate::Error::NoAuth), [`Error::SessionClosed`](crate::Error::SessionClosed), [`Error::Zk`](crate::Error::Zk).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(election: zk_recipes::ZkLeaderElection) -> Result<(), zk_recipes::Error> {
    /// if let Some(leader) = election.leader().await? {
    ///     println!("{} leads in term {}", String::from_utf8_lossy(&leader.info), leader.term);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<Leader>> {
        let epoch = self.queue.session().epoch().await?;
        leader_now(&epoch, self.queue.root()).await
    }

    /// An observer of this election's leader changes.
    ///
    /// ```no_run
    /// # fn demo(election: zk_recipes::ZkLeaderElection) {
    /// let observer = election.observer();
    /// # }
    /// ```
    pub fn observer(&self) -> ZkLeaderObserver {
        ZkLeaderObserver {
            session: self.queue.session().clone(),
            root: self.queue.root().clone(),
            last: None,
        }
    }
}

/// Leading, until [`release`](Guard::release)d (resigned) or lost: a [`Guard`] of a
/// [`ZkLeaderElection`], with the same [`is_held`](Guard::is_held), [`lost`](Guard::lost) and
/// `release` as a lock's guard, and the election's own [`term`](Guard::term) and
/// [`info`](Guard::info). Dereferences to [`Grant`] for [`fenced_write`](Grant::fenced_write)
/// and [`confirm`](Grant::confirm). Dropping it resigns in the background.
///
/// ```no_run
/// # async fn demo(election: zk_recipes::ZkLeaderElection) -> Result<(), Box<dyn std::error::Error>> {
/// let leadership: zk_recipes::ZkLeadership = election.campaign().await?;
/// let client = leadership.client()?;
/// let mut write = leadership.fenced_write(&client)?;
/// write.add_set_data("/app/leader-state", leadership.term().to_string().as_bytes(), None)?;
/// write.commit().await?;
/// leadership.release().await?;
/// # Ok(()) }
/// ```
pub type ZkLeadership = Guard<ZkLeaderElection>;

/// [`ZkLeadership`]'s old name, kept for a while so that code written for it still builds.
#[deprecated(note = "renamed `ZkLeadership` (a `Guard<ZkLeaderElection>`)")]
pub type Leadership = ZkLeadership;

/// What a leadership keeps: the grant and the info it campaigned with. Not for use outside the
/// library (see [`Recipe`](crate::Recipe)).
#[doc(hidden)]
#[derive(Debug)]
pub struct Elected {
    grant: Grant,
    info: Vec<u8>,
}

impl crate::guard::Sealed for ZkLeaderElection {}
impl crate::guard::Recipe for ZkLeaderElection {
    type Held = Elected;
}

impl crate::guard::Holding for Elected {
    fn holding_is_held(&self) -> bool {
        self.grant.is_held()
    }
    fn holding_lost(&self) -> impl std::future::Future<Output = crate::LossReason> + Send + '_ {
        self.grant.lost()
    }
    fn holding_release(self) -> impl std::future::Future<Output = Result<()>> + Send {
        debug!(term = %self.grant.token(), "resigning");
        self.grant.release()
    }
}

impl crate::guard::OnGrant for Elected {
    fn grant(&self) -> &Grant {
        &self.grant
    }
}

impl Guard<ZkLeaderElection> {
    pub(crate) fn elected(grant: Grant, info: Vec<u8>) -> Self {
        Guard::new(Elected { grant, info })
    }

    /// The term: this leadership's fencing token, strictly increasing from leader to leader.
    ///
    /// ```no_run
    /// # fn demo(leadership: zk_recipes::ZkLeadership) {
    /// let term: u64 = leadership.term().into();
    /// # }
    /// ```
    pub fn term(&self) -> FencingToken {
        self.held().grant.token()
    }

    /// The info this candidate campaigned with.
    ///
    /// ```no_run
    /// # fn demo(leadership: zk_recipes::ZkLeadership) {
    /// println!("{}", String::from_utf8_lossy(leadership.info()));
    /// # }
    /// ```
    pub fn info(&self) -> &[u8] {
        &self.held().info
    }

    /// Steps down: [`release`](Guard::release) under its old name.
    ///
    /// # Errors
    ///
    /// As [`release`](Guard::release).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if dropped before completing, the node is deleted in the background.
    ///
    /// ```no_run
    /// # async fn demo(leadership: zk_recipes::ZkLeadership) -> Result<(), zk_recipes::Error> {
    /// leadership.release().await?; // was `leadership.resign().await?`
    /// # Ok(()) }
    /// ```
    #[deprecated(note = "use `release`, the one name every guard has")]
    pub async fn resign(self) -> Result<()> {
        self.release().await
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

/// Follows an election's leader without campaigning: [`changed`](ZkLeaderObserver::changed)
/// reports each new leader (or none) in order, terms only growing.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// let mut observer = zk_recipes::ZkLeaderObserver::new(&session, "/election/app")?;
/// loop {
///     match observer.changed().await? {
///         Some(leader) => println!("leader: term {}", leader.term),
///         None => println!("no leader"),
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct ZkLeaderObserver {
    session: Session,
    root: ZkPath,
    last: Option<Option<Leader>>,
}

impl ZkLeaderObserver {
    /// An observer of the election on `path`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let observer = zk_recipes::ZkLeaderObserver::new(session, "/election/app")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str) -> Result<ZkLeaderObserver> {
        Ok(ZkLeaderObserver {
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
    /// [`Error::NoAuth`](crate::Error::NoAuth), [`Error::SessionClosed`](crate::Error::SessionClosed), [`Error::Zk`](crate::Error::Zk).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a cancelled call reports nothing and loses nothing; the next call compares
    /// with the last leader reported.
    ///
    /// ```no_run
    /// # async fn demo(mut observer: zk_recipes::ZkLeaderObserver) -> Result<(), zk_recipes::Error> {
    /// let now = observer.changed().await?;
    /// let next = observer.changed().await?;
    /// # Ok(()) }
    /// ```
    pub async fn changed(&mut self) -> Result<Option<Leader>> {
        loop {
            let epoch = self.session.epoch().await?;
            let (leader, watcher) = leader_and_watch(&epoch, &self.root).await?;
            let known = self.last.as_ref().map(|l| l.as_ref().map(|l| &l.path));
            if known != Some(leader.as_ref().map(|l| &l.path)) {
                self.last = Some(leader.clone());
                return Ok(leader);
            }
            tokio::select! {
                _ = watcher.changed() => {}
                _ = epoch.ended() => {}
            }
        }
    }
}

/// The first live candidate of a listing.
fn first(children: &[String]) -> Option<Contender> {
    sorted_contenders(children, RULE.names)
        .into_iter()
        .find(|c| !c.is_wrapped())
}

/// The leader: the first live candidate, with its info; `None` when nobody campaigns.
async fn leader_now(epoch: &Epoch, root: &ZkPath) -> Result<Option<Leader>> {
    let root = root.as_str();
    loop {
        let (children, root_czxid) = epoch
            .retry(root, |c| async move {
                match c.get_children(root).await {
                    Err(zk::Error::NoNode) => Ok((Vec::new(), 0)),
                    other => other.map(|(children, stat)| (children, stat.czxid)),
                }
            })
            .await?;
        let Some(first) = first(&children) else {
            return Ok(None);
        };
        let path = format!("{root}/{}", first.name);
        let at = path.as_str();
        // None: it resigned between the listing and the read; look again.
        let read = ops::read(epoch, at).await?.map(|(data, _)| data);
        let term = FencingToken::from_sequence(first.sequence, root_czxid);
        if let (Some(info), Some(term)) = (read, term) {
            return Ok(Some(Leader { info, term, path }));
        }
    }
}

/// The leader as [`leader_now`], and a watch that fires when it may change: on the leader's
/// node, on the children while there is none, or on the root while it does not exist.
async fn leader_and_watch(
    epoch: &Epoch,
    root: &ZkPath,
) -> Result<(Option<Leader>, zk::OneshotWatcher)> {
    let root = root.as_str();
    loop {
        let listed = epoch
            .retry(root, |c| async move {
                c.get_and_watch_children(root).await.or_missing()
            })
            .await?;
        let Some((children, stat, children_watch)) = listed else {
            // No root yet: wait for it to appear (or look again if it just did).
            let (stat, watcher) = epoch
                .retry(root, |c| async move { c.check_and_watch_stat(root).await })
                .await?;
            if stat.is_some() {
                continue;
            }
            return Ok((None, watcher));
        };
        let Some(first) = first(&children) else {
            return Ok((None, children_watch));
        };
        let path = format!("{root}/{}", first.name);
        let at = path.as_str();
        let read = epoch
            .retry(at, |c| async move {
                c.get_and_watch_data(at).await.or_missing()
            })
            .await?
            .map(|(data, _, watcher)| (data, watcher));
        if let (Some((info, watcher)), Some(term)) = (
            read,
            FencingToken::from_sequence(first.sequence, stat.czxid),
        ) {
            return Ok((Some(Leader { info, term, path }), watcher));
        }
    }
}
