//! The lease clock: how long this client may take its session to be alive without hearing from
//! the ensemble again (Chubby's and etcd's local lease).
//!
//! The server restarts a session's expiry clock when a request of it arrives, so a request
//! *sent* at `t` and answered proves the session alive until at least `t + timeout` on the
//! server. Only requests that go through the leader count (a `sync`, a create): a read can be
//! answered by a follower already cut off from the leader, whose touches of the session never
//! reach the leader, which expires the session on its own clock. The lease runs until
//! `sent_at + timeout - margin`; the margin (a third of the timeout) covers the ensemble's own
//! lag: a follower reports its sessions' touches to the leader with its pings, every half tick,
//! so the leader's last touch of our session can be half a tick older than our request (a tick
//! is at most half the negotiated timeout with the servers' default `minSessionTimeout`).
//!
//! While the session has a contender node (waiting or held), a heartbeat (`sync("/")`, no log
//! write) feeds the lease every third of the timeout unless another request did; with nothing
//! held or queued, nothing is sent.
//!
//! **After a lapse** (the process was frozen, or the ensemble silent, while something was
//! held) an answer proves only that the leader still had the session when it handled the
//! request, not that our follower's report of the touch reached the leader before it would
//! expire the session: such an answer is a probe, and a request sent a quarter of the timeout
//! after it renews. A lapse seen only when the next answer comes is still counted (under
//! `Suspension`, a loss). With nothing queued or held the lease is not kept, and the next
//! create starts it afresh: a session frozen while idle for nearly a whole timeout and used at
//! once on waking relies on that create's answer alone (the session would have to expire
//! within half a tick of it).
//!
//! **The clock** is `CLOCK_BOOTTIME` on Linux: it keeps counting while the process is stopped
//! (`SIGSTOP`, a GC pause, a debugger) and while the machine sleeps. A virtual machine that its
//! hypervisor pauses may see no time pass on any of its clocks; only a fence covers that.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tracing::{debug, warn};

use super::epoch::Epoch;
use crate::error::connection_lost;

/// Now on the lease clock, in nanoseconds since an arbitrary start.
pub(crate) fn now() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; CLOCK_BOOTTIME exists on every Linux
        // since 2.6.39, and on failure `ts` stays zeroed, which reads as "long ago".
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        if rc == 0 {
            return (ts.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(ts.tv_nsec as u64);
        }
        0
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One session's lease.
pub(crate) struct Lease {
    timeout: u64,
    margin: u64,
    /// The lease-clock time until which the session is taken to be alive; 0: never fed.
    until: AtomicU64,
    /// When the last request that feeds the lease was sent.
    last_sent: AtomicU64,
    /// Contender nodes (waiting or held) and other users that need the lease kept fed.
    interest: AtomicUsize,
    wake: Notify,
    /// After an answer that could not renew (see [`Lease::renew`]): the earliest send time of
    /// a request whose answer may renew again; 0 when none is pending.
    probe_after: AtomicU64,
}

/// What an answered request did to the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The lease runs on from the request's send time.
    Renewed,
    /// The lease had (nearly) run out when the request was sent: the answer proves the session
    /// was alive when the leader handled it, but not that the leader had heard our touches in
    /// time, so it is a probe; a request sent a quarter of the timeout after its answer renews.
    Probe,
}

impl Lease {
    pub fn new(timeout: Duration) -> Lease {
        let timeout = nanos(timeout);
        Lease {
            timeout,
            margin: timeout / 3,
            until: AtomicU64::new(0),
            last_sent: AtomicU64::new(0),
            interest: AtomicUsize::new(0),
            wake: Notify::new(),
            probe_after: AtomicU64::new(0),
        }
    }

    /// A request sent at `sent_at` (lease-clock time) that went through the leader was
    /// answered. It renews the lease when the lease still had a quarter of the timeout to run
    /// at `sent_at` (then the leader cannot have expired the session before our follower's
    /// report of the touch reached it: followers report every half tick, and a tick is at most
    /// half the timeout), when the session is fresh (never fed), or when it was sent a quarter
    /// of the timeout after a probe's answer; otherwise it is a [`Renewal::Probe`].
    pub fn renew(&self, sent_at: u64) -> Renewal {
        let quarter = self.timeout / 4;
        let until = self.until.load(Ordering::SeqCst);
        let probe_after = self.probe_after.load(Ordering::SeqCst);
        let healthy = until == 0 || until > sent_at.saturating_add(quarter);
        let after_probe = probe_after != 0 && sent_at >= probe_after;
        self.last_sent.fetch_max(sent_at, Ordering::SeqCst);
        if !(healthy || after_probe) {
            if probe_after == 0 {
                self.probe_after
                    .store(now().saturating_add(quarter), Ordering::SeqCst);
            }
            return Renewal::Probe;
        }
        self.probe_after.store(0, Ordering::SeqCst);
        let until = sent_at.saturating_add(self.timeout - self.margin);
        self.until.fetch_max(until, Ordering::SeqCst);
        Renewal::Renewed
    }

    /// Whether the lease had run out before `sent_at`: a lapse, even if the answer comes.
    pub fn lapsed_before(&self, sent_at: u64) -> bool {
        let until = self.until.load(Ordering::SeqCst);
        until != 0 && until <= sent_at
    }

    /// When the heartbeat should send next: a period after the last send, or as soon as a
    /// probe's answer allows.
    fn next_due(&self) -> u64 {
        match self.probe_after.load(Ordering::SeqCst) {
            0 => self
                .last_sent
                .load(Ordering::SeqCst)
                .saturating_add(self.period()),
            after => after,
        }
    }

    /// How long the lease still runs; `None` once it ran out (or was never fed).
    pub fn remaining(&self) -> Option<Duration> {
        let until = self.until.load(Ordering::SeqCst);
        let now = now();
        (until > now).then(|| Duration::from_nanos(until - now))
    }

    /// The lease-clock time the lease runs until (0: never fed).
    pub fn until(&self) -> u64 {
        self.until.load(Ordering::SeqCst)
    }

    pub fn is_valid(&self) -> bool {
        self.remaining().is_some()
    }

    fn period(&self) -> u64 {
        self.timeout / 3
    }
}

/// Keeps the lease fed while it is held (see [`Epoch::lease_interest`]).
pub(crate) struct Interest(Arc<Epoch>);

impl Drop for Interest {
    fn drop(&mut self) {
        let lease = self.0.lease();
        if lease.interest.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Nothing queued or held: nothing to keep fed. The next create starts the lease
            // afresh (its answer renews, see `Lease::renew`) rather than as a probe after a
            // lapse that nobody depended on.
            lease.until.store(0, Ordering::SeqCst);
            lease.probe_after.store(0, Ordering::SeqCst);
        }
    }
}

impl Epoch {
    /// A request of ours sent at `sent` (lease-clock time) that went through the leader was
    /// answered: renews the lease (or takes it as a probe), counting a lapse that happened
    /// before it was sent.
    pub fn renew_lease(&self, sent: u64) -> Renewal {
        if self.lease().lapsed_before(sent) && self.lapse() {
            warn!(
                session_id = format_args!("{:#x}", self.id()),
                "the lease clock had run out: grants made before are lost"
            );
        }
        self.lease().renew(sent)
    }

    /// Keeps the lease fed until the returned value drops.
    pub fn lease_interest(self: &Arc<Self>) -> Interest {
        if self.lease().interest.fetch_add(1, Ordering::SeqCst) == 0 {
            self.lease().wake.notify_one();
        }
        Interest(self.clone())
    }

    /// Whether the lease still runs.
    pub fn lease_valid(&self) -> bool {
        self.lease().is_valid()
    }
}

/// Feeds the lease of `epoch` while anything needs it, until the session ends. Under
/// [`LossPolicy::Suspension`](crate::LossPolicy::Suspension) a lease that runs out counts as a
/// suspension: every grant made before it is lost for good (and its node deleted).
pub(super) async fn heartbeat(epoch: Arc<Epoch>) {
    let lease = epoch.lease();
    loop {
        while lease.interest.load(Ordering::SeqCst) == 0 {
            tokio::select! {
                _ = lease.wake.notified() => {}
                _ = epoch.ended() => return,
            }
        }
        let due = lease.next_due();
        let now_ns = now();
        if due > now_ns {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_nanos(due - now_ns)) => {}
                _ = epoch.ended() => return,
            }
            continue;
        }
        if lease.interest.load(Ordering::SeqCst) == 0 {
            continue;
        }
        let sent = now();
        lease.last_sent.fetch_max(sent, Ordering::SeqCst);
        let Ok(client) = epoch.client() else { return };
        let sync = client.sync("/");
        let mut sync = std::pin::pin!(sync);
        // The answer is awaited for a session timeout at most; a lapse meanwhile is counted
        // at once (not when the answer comes, if ever).
        let give_up = tokio::time::sleep(Duration::from_nanos(lease.timeout));
        let mut give_up = std::pin::pin!(give_up);
        let mut lapse_counted = false;
        let answered = loop {
            tokio::select! {
                biased;
                _ = epoch.ended() => return,
                _ = lapse(&epoch), if !lapse_counted => {
                    lapse_counted = true;
                    lapsed(&epoch);
                }
                answer = &mut sync => break Some(answer),
                _ = &mut give_up => break None,
            }
        };
        match answered {
            Some(Ok(())) => {
                let renewal = epoch.renew_lease(sent);
                tracing::trace!(?renewal, "heartbeat answered");
            }
            Some(Err(e)) if connection_lost(&e) => {
                debug!(%e, "heartbeat met a broken connection");
                tokio::select! {
                    _ = epoch.until_reconnected() => {}
                    _ = lapse(&epoch), if !lapse_counted => {}
                }
            }
            Some(Err(e)) => {
                debug!(%e, "heartbeat refused");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_nanos(lease.period())) => {}
                    _ = epoch.ended() => return,
                }
            }
            None => debug!("heartbeat unanswered for a session timeout"),
        }
        if !lease.is_valid() && lease.until.load(Ordering::SeqCst) != 0 {
            lapsed(&epoch);
        }
    }
}

/// Resolves once the lease has run out (at once if it has).
async fn lapse(epoch: &Epoch) {
    loop {
        match epoch.lease().remaining() {
            None => return,
            Some(left) => tokio::time::sleep(left).await,
        }
    }
}

/// The lease ran out: under the strict policy, a suspension.
fn lapsed(epoch: &Arc<Epoch>) {
    if epoch.lapse() {
        warn!(
            session_id = format_args!("{:#x}", epoch.id()),
            "the lease clock ran out before the ensemble answered: grants made before are lost"
        );
        if !epoch.is_lost() {
            for path in epoch.take_suspended_grants() {
                let epoch = epoch.clone();
                tokio::spawn(
                    async move { epoch.delete(&path, super::cleanup::Release::Plain).await },
                );
            }
        }
    }
}
