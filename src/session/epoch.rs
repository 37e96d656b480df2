//! [`Epoch`]: one ZooKeeper session as the grants made on it see it, and the one retry helper
//! every idempotent request goes through.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use zookeeper_client as zk;

use super::lease::Lease;
use super::LossPolicy;
use crate::error::{connection_lost, Error, Result};

/// The life of one ZooKeeper session as seen by the grants made on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpochState {
    Live,
    Suspended,
    Lost,
}

/// How many times in a row one request may meet a broken connection before the caller gets
/// [`Error::ConnectionLost`]. A server that closes the connection on a request (one larger than
/// its `jute.maxbuffer`, say) would otherwise have it sent again on every reconnect, forever.
pub(crate) const MAX_CONNECTION_LOSSES: u32 = 8;

/// How many lapses an epoch remembers (by suspension number) to tell a grant why it was lost.
const LAPSES_KEPT: usize = 16;

/// One ZooKeeper session. Grants remember the epoch they were made on and are lost with it.
pub(crate) struct Epoch {
    pub(super) id: i64,
    pub(super) timeout: Duration,
    client: Mutex<Option<zk::Client>>,
    state: watch::Sender<EpochState>,
    policy: LossPolicy,
    /// Set when the session ends because [`Session::close`](crate::Session::close) was called.
    closed: AtomicBool,
    /// How many times this session was suspended. Under [`LossPolicy::Suspension`] a grant
    /// made before a suspension is lost for good, even when the session reconnects.
    suspensions: AtomicU64,
    /// Live grants' nodes, with the suspension count at grant time: under the strict policy
    /// the nodes of grants lost to a suspension are deleted when the session reconnects, so a
    /// guard kept after `lost()` never blocks the queue.
    grants: Mutex<HashMap<String, u64>>,
    /// The lease clock (`lease.rs`).
    lease: Lease,
    /// The lease end (`Lease::until`) last counted as a lapse, so one lapse counts once.
    lapsed_for: AtomicU64,
    /// The numbers of the latest suspensions that were lease lapses (not disconnects), so a
    /// grant lost to one is told why (a few kept: a grant asks about the one after its own).
    lapses: Mutex<std::collections::VecDeque<u64>>,
    /// The largest request the servers accept ([`SessionOptions::max_packet_bytes`](crate::SessionOptions::max_packet_bytes)).
    max_packet: usize,
}

impl Epoch {
    pub(super) fn new(client: zk::Client, policy: LossPolicy, max_packet: usize) -> Epoch {
        let client_timeout = client.session_timeout();
        Epoch {
            id: client.session_id().0,
            timeout: client.session_timeout(),
            client: Mutex::new(Some(client)),
            state: watch::channel(EpochState::Live).0,
            policy,
            closed: AtomicBool::new(false),
            suspensions: AtomicU64::new(0),
            grants: Mutex::new(HashMap::new()),
            lease: Lease::new(client_timeout),
            lapsed_for: AtomicU64::new(0),
            lapses: Mutex::new(std::collections::VecDeque::new()),
            max_packet,
        }
    }

    /// Refuses a request that would be `size` bytes on the wire (its frame, estimated from
    /// above) when the servers would not accept it: they close the connection on such a
    /// packet, and the request would end as `ConnectionLost`, "outcome unknown", for a write
    /// that could never have happened.
    pub fn check_wire_size(&self, what: &'static str, size: usize) -> Result<()> {
        super::options::within_limit(what, size, self.max_packet)
    }

    /// The session timeout the server agreed to.
    pub fn session_timeout(&self) -> Duration {
        self.timeout
    }

    /// How many times the session was suspended so far (a reconnect follows each one that it
    /// outlives).
    pub fn suspensions(&self) -> u64 {
        self.suspensions.load(Ordering::SeqCst)
    }

    /// ZooKeeper's session id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The error for "this session is over": closed by the user, or expired.
    pub fn over(&self) -> Error {
        if self.closed.load(Ordering::SeqCst) {
            Error::SessionClosed
        } else {
            Error::SessionExpired
        }
    }

    /// Whether the session ended through [`Session::close`](crate::Session::close).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Maps a ZooKeeper error about `path` on this session (see [`Error::zk`]), telling a
    /// closed session from an expired one.
    pub fn error(&self, err: zk::Error, path: &str) -> Error {
        match Error::zk(err, path) {
            Error::SessionExpired => self.over(),
            other => other,
        }
    }

    /// A client handle, unless this session is over.
    pub fn client(&self) -> Result<zk::Client> {
        if *self.state.borrow() == EpochState::Lost {
            return Err(self.over());
        }
        lock(&self.client).clone().ok_or_else(|| self.over())
    }

    /// Runs an idempotent request on this session, again after each reconnect while the
    /// connection breaks (at most [`MAX_CONNECTION_LOSSES`] times in a row), mapping other
    /// errors about `path` to typed ones. Requests that return a watcher go through here too.
    pub async fn retry<T, F, Fut>(&self, path: &str, mut request: F) -> Result<T>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, zk::Error>>,
    {
        let mut losses = 0;
        loop {
            match request(self.client()?).await {
                Ok(value) => return Ok(value),
                Err(e) if connection_lost(&e) => self.after_loss(&mut losses).await?,
                Err(e) => return Err(self.error(e, path)),
            }
        }
    }

    /// After a broken connection: counts it against the budget of one request
    /// ([`MAX_CONNECTION_LOSSES`]) and waits until the session is connected again or over.
    /// The state watcher may not have seen the disconnect yet, hence the short pause first.
    pub async fn after_loss(&self, losses: &mut u32) -> Result<()> {
        *losses += 1;
        if *losses > MAX_CONNECTION_LOSSES {
            tracing::warn!(
                losses = *losses - 1,
                "a request met a broken connection on every try; giving up"
            );
            return Err(Error::ConnectionLost);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| *s != EpochState::Suspended).await;
        Ok(())
    }

    /// After a broken connection, for the requests that must not give up while the session
    /// lives (deleting our own nodes): waits until the session is connected again or over,
    /// with no budget. Bounded all the same: a session that cannot reconnect is given up
    /// after a session timeout.
    pub async fn until_reconnected(&self) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| *s != EpochState::Suspended).await;
    }

    /// Registers a grant's node; returns the suspension count the grant is made under.
    pub fn register(&self, path: &str) -> u64 {
        let mut grants = lock(&self.grants);
        let since = self.suspensions.load(Ordering::SeqCst);
        grants.insert(path.to_owned(), since);
        since
    }

    pub fn unregister(&self, path: &str) {
        lock(&self.grants).remove(path);
    }

    /// Under the strict policy: takes the nodes of grants made before the latest suspension.
    pub(super) fn take_suspended_grants(&self) -> Vec<String> {
        if self.policy != LossPolicy::Suspension {
            return Vec::new();
        }
        let now = self.suspensions.load(Ordering::SeqCst);
        let mut grants = lock(&self.grants);
        let stale: Vec<String> = grants
            .iter()
            .filter(|(_, &at)| at < now)
            .map(|(p, _)| p.clone())
            .collect();
        for path in &stale {
            grants.remove(path);
        }
        stale
    }

    /// Whether a grant made under suspension count `since` still holds under the policy.
    pub fn holds(&self, since: u64) -> bool {
        let state = *self.state.borrow();
        self.holds_in(state, since)
    }

    /// [`holds`](Self::holds) for a state already read (inside the channel's own closures,
    /// which run under its lock: reading the channel again there could deadlock).
    fn holds_in(&self, state: EpochState, since: u64) -> bool {
        match self.policy {
            _ if state == EpochState::Lost => false,
            LossPolicy::Expiry => true,
            LossPolicy::Suspension => {
                state == EpochState::Live && self.suspensions.load(Ordering::SeqCst) == since
            }
        }
    }

    /// The session's lease clock.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The lease ran out: under [`LossPolicy::Suspension`], a suspension for the grants (each
    /// made before it is lost for good). Whether this counted (once per lapse, strict policy
    /// only).
    pub(super) fn lapse(&self) -> bool {
        if self.policy != LossPolicy::Suspension {
            return false;
        }
        let until = self.lease.until();
        if self.lapsed_for.swap(until, Ordering::SeqCst) == until {
            return false;
        }
        let number = self.suspensions.fetch_add(1, Ordering::SeqCst) + 1;
        {
            let mut lapses = lock(&self.lapses);
            if lapses.len() == LAPSES_KEPT {
                lapses.pop_front();
            }
            lapses.push_back(number);
        }
        // Wake every `lost()`: the state is the same, what it means for old grants is not.
        self.state.send_modify(|_| {});
        true
    }

    /// Whether what ended a grant made under suspension count `since` (the suspension after
    /// it) was a lapse of the lease rather than a disconnect. `false` when that is too long
    /// ago to tell.
    pub fn lapsed_after(&self, since: u64) -> bool {
        lock(&self.lapses).contains(&(since + 1))
    }

    pub fn is_lost(&self) -> bool {
        *self.state.borrow() == EpochState::Lost
    }

    /// Resolves when a grant made under suspension count `since` must count as lost.
    pub async fn lost(&self, since: u64) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|state| !self.holds_in(*state, since)).await;
    }

    /// Resolves when the ZooKeeper session is over (expired, given up or closed).
    pub async fn ended(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| *s == EpochState::Lost).await;
    }

    pub(super) fn set(&self, state: EpochState) {
        self.state.send_if_modified(|s| {
            let changed = *s != state && *s != EpochState::Lost;
            if changed {
                if state == EpochState::Suspended {
                    self.suspensions.fetch_add(1, Ordering::SeqCst);
                }
                *s = state;
            }
            changed
        });
    }

    /// Marks the session over and drops our client handle; once in-flight operations finish,
    /// zookeeper-client closes the session, which deletes its ephemeral nodes. `closing`: the
    /// user closed it.
    pub(super) fn end(&self, closing: bool) {
        if closing {
            self.closed.store(true, Ordering::SeqCst);
        }
        self.set(EpochState::Lost);
        lock(&self.client).take();
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Epoch({:#x}, {:?})", self.id, *self.state.borrow())
    }
}

/// Locks a std mutex, shrugging off poisoning (nothing held under it can be left half done).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
