//! The supervisor: follows the current ZooKeeper session's state, publishes it, gives up a
//! session that stayed disconnected for a whole session timeout, and opens a new session after
//! expiry.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, info_span, warn, Instrument};
use zookeeper_client as zk;

use super::cleanup::Release;
use super::epoch::{Epoch, EpochState};
use super::{SessionOptions, SessionState};
use crate::nodelay::Connections;

pub(super) async fn supervise(
    options: SessionOptions,
    mut epoch: Arc<Epoch>,
    state: watch::Sender<SessionState>,
    current: watch::Sender<Option<Arc<Epoch>>>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Resolved once (bounded): a reconnect must not wait for a name server.
    let nodelay_servers = options.nodelay_servers().await;
    loop {
        let span = info_span!("session", session_id = format_args!("{:#x}", epoch.id));
        let Ok(client) = epoch.client() else { return };
        let mut watcher = client.state_watcher();
        let info = client.session().clone();
        drop(client);
        let servers = nodelay_servers.as_deref();
        let closing = follow(&epoch, &mut watcher, &state, &mut shutdown, servers)
            .instrument(span)
            .await;
        epoch.end(closing);
        if closing {
            close(&options, info, &mut watcher).await;
            current.send_replace(None);
            state.send_replace(SessionState::Closed);
            debug!(
                session_id = format_args!("{:#x}", epoch.id),
                "session closed"
            );
            return;
        }
        warn!(
            session_id = format_args!("{:#x}", epoch.id),
            "session expired; opening a new one"
        );
        state.send_replace(SessionState::Expired {
            session_id: epoch.id,
        });
        let mut backoff = Duration::from_millis(50);
        epoch = loop {
            tokio::select! {
                biased;
                _ = closed(&mut shutdown) => {
                    current.send_replace(None);
                    state.send_replace(SessionState::Closed);
                    return;
                }
                opened = options.open() => match opened {
                    Ok(client) => {
                        let epoch = Arc::new(Epoch::new(client, options.loss_policy, options.max_packet));
                        tokio::spawn(super::lease::heartbeat(epoch.clone()));
                        break epoch;
                    }
                    Err(err) => {
                        debug!(%err, "reconnect failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                },
            }
        };
        info!(
            session_id = format_args!("{:#x}", epoch.id),
            "new session connected"
        );
        current.send_replace(Some(epoch.clone()));
        state.send_replace(SessionState::Connected {
            session_id: epoch.id,
        });
    }
}

/// How long `close` waits for zookeeper-client's own close (sent once the last handle of the
/// client is gone, answered in a round trip) before it closes the session from a second
/// connection: a `client()` handle that someone still holds keeps the first one open.
const OWN_CLOSE_GRACE: Duration = Duration::from_millis(100);

/// How long `close` waits for a second connection's close to be answered before it asks the
/// server again (a reattach, answered `SessionExpired` once the session is over).
const CLOSE_RECHECK: Duration = Duration::from_millis(500);

/// Ends the session for `close()` (or the last `Session` dropped), and waits (bounded by the
/// connection timeout) for the server to confirm it, so that a process exiting right after
/// `close().await` leaves no ephemeral node behind.
///
/// With our handles gone, zookeeper-client sends `closeSession` by itself, but only once
/// every handle of the client is dropped (it has no close of its own): one the user still
/// holds (`Session::client`, `Grant::client`) would keep the session, and its locks, alive for
/// as long as it lives. So after a short grace the session is closed from a second client
/// that reattaches to it (with its id and password, as a client does after a reconnect: the
/// server moves the session to the new connection and drops the old one) and is dropped at
/// once, which sends the close. The first client, reconnecting, may take the session back
/// before the close arrives (then the second one's close is lost with its connection): the
/// second client attaches again, at once, until the server answers a reattach with "session
/// expired", the proof that the session is over. The first client's handles then answer
/// `SessionExpired`.
async fn close(options: &SessionOptions, info: zk::SessionInfo, watcher: &mut zk::StateWatcher) {
    let started = tokio::time::Instant::now();
    let deadline = started + options.connection_timeout;
    if terminated(watcher, OWN_CLOSE_GRACE.min(options.connection_timeout)).await {
        return;
    }
    debug!("a client handle still lives: closing the session over a second connection");
    let mut attempts = 0u32;
    while tokio::time::Instant::now() < deadline {
        if watcher.peek_state().is_terminated() {
            return;
        }
        attempts += 1;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, options.reattach(info.clone())).await {
            Ok(Ok(second)) => {
                // Dropped at once: its only request is the close. Its end is waited for a
                // moment only: the next reattach's `SessionExpired` is the server's word that
                // the session is over, and a close that lost a race with the first client's
                // own reconnect (which takes the session back) is sent again at once.
                let mut closing = second.state_watcher();
                drop(second);
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let ended = terminated(&mut closing, left.min(CLOSE_RECHECK)).await;
                debug!(attempts, ended, took = ?started.elapsed(), "a close sent over a second connection");
            }
            Ok(Err(crate::Error::SessionExpired)) => {
                debug!(took = ?started.elapsed(), attempts, "session closed over a second connection");
                return;
            }
            Ok(Err(err)) => {
                debug!(%err, attempts, took = ?started.elapsed(), "a reattach to close the session failed")
            }
            Err(_) => break,
        }
    }
    warn!(
        attempts,
        "the server did not confirm the close within the connection timeout: the session may \
         live on until it expires"
    );
}

/// Whether `watcher`'s session is over (closed, expired, refused) within `limit`.
async fn terminated(watcher: &mut zk::StateWatcher, limit: Duration) -> bool {
    let over = async {
        while !watcher.peek_state().is_terminated() {
            watcher.changed().await;
        }
    };
    tokio::time::timeout(limit, over).await.is_ok()
}

/// Follows one ZooKeeper session until it is over; returns whether we are closing.
async fn follow(
    epoch: &Arc<Epoch>,
    watcher: &mut zk::StateWatcher,
    state: &watch::Sender<SessionState>,
    shutdown: &mut watch::Receiver<bool>,
    nodelay_servers: Option<&[SocketAddr]>,
) -> bool {
    let id = epoch.id;
    let mut suspended_since: Option<tokio::time::Instant> = None;
    // The connections to the servers since ours was last set up: when the client is back
    // (it reconnects by itself, often before we hear it was gone), its new connection is
    // among those that appeared since.
    let mut known = nodelay_servers.map(|_| Connections::now());
    loop {
        let give_up = suspended_since.map(|t| t + epoch.timeout);
        tokio::select! {
            biased;
            _ = closed(shutdown) => return true,
            _ = sleep_until(give_up) => {
                warn!("disconnected for a whole session timeout; giving the session up");
                return false;
            }
            zk_state = watcher.changed() => match zk_state {
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                    info!("session reconnected");
                    if let (Some(before), Some(servers)) = (&known, nodelay_servers) {
                        let set = before.set_nodelay_on_new(servers);
                        debug!(connections = set, "TCP_NODELAY set");
                        known = Some(Connections::now());
                    }
                    suspended_since = None;
                    epoch.set(EpochState::Live);
                    for path in epoch.take_suspended_grants() {
                        info!(node = %path, "deleting a grant lost to the suspension");
                        let epoch = epoch.clone();
                        tokio::spawn(async move { epoch.delete(&path, Release::Plain).await });
                    }
                    state.send_replace(SessionState::Connected { session_id: id });
                }
                zk::SessionState::Disconnected => {
                    warn!("session suspended (disconnected)");
                    suspended_since.get_or_insert_with(tokio::time::Instant::now);
                    epoch.set(EpochState::Suspended);
                    state.send_replace(SessionState::Suspended { session_id: id });
                }
                // Closed without our close: treat like expiry (the reconnect loop notices a
                // shutdown first).
                zk::SessionState::Closed | zk::SessionState::Expired | zk::SessionState::AuthFailed => return false,
            },
        }
    }
}

/// Resolves on `close()` or when the last `Session` is dropped.
async fn closed(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|closed| *closed).await;
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
