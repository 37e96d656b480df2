//! Expiring a session on demand: attach a second connection to it and close it there.
//!
//! The close rides in the same write as the connect request. Sent one round trip later
//! (connect, wait for the reply, then close), it loses a race whenever the original client
//! reconnects first: the server moves the session back and drops the second connection with
//! the close still unsent, and the two take the session from each other round after round.
//! Sent together, the server has the close in hand before anything from the original client's
//! next connection, as a rule (not a guarantee: the loop stays).
//!
//! The session's password is not public in `zookeeper_client`, so the connect request comes
//! from a `zookeeper_client` connector pointed at a listener here, which keeps its first
//! frame and answers nothing.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zookeeper_client::{Client, SessionInfo};

use crate::{scaled, HarnessError};

/// ZooKeeper's opcode of a session close.
const CLOSE_SESSION: i32 = -11;
/// The xid of our close request (the connection carries no other request).
const CLOSE_XID: i32 = 1;
/// No frame of a connect exchange is near this.
const MAX_FRAME: usize = 1 << 20;

/// Expires a live client's session now, the way ZooKeeper's own tests do: attaches a second
/// connection with the same session id and password and closes the session there. Returns
/// once the server confirms the session is gone (a reattach is answered "session expired");
/// the original client then observes `SessionState::Expired` at its next contact with the
/// server.
///
/// The close is sent together with the connect request, so the original client's own
/// reconnects rarely take the session back in between (sent a round trip later, the close
/// lost that race most rounds under load); a round that loses anyway is followed by another.
/// The helper speaks plain TCP: it skips `tcp+tls://` hosts, and a TLS port given without
/// the scheme only times out. A session is the ensemble's, whichever port the client came through,
/// so a session made over TLS is expired through the server's plain port
/// ([`ZkServer::connect_string`](crate::ZkServer::connect_string)).
///
/// # Errors
///
/// [`HarnessError::Config`] when `connect_string` names only TLS hosts, or the server refuses
/// the close without authentication (`enforce.auth.enabled`, SASL required);
/// [`HarnessError::Timeout`] when the session still lives after 30 s (scaled by
/// `ZK_TEST_TIMEOUT_SCALE`), with the last answer in the message.
///
/// ```no_run
/// use zookeeper_client::{Client, SessionState};
///
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let server = zk_testcontainers::ZkServer::start().await?;
/// let client = Client::connect(&server.connect_string()).await.unwrap();
/// let mut states = client.state_watcher();
/// zk_testcontainers::expire_session(&server.connect_string(), client.session()).await?;
/// while states.changed().await != SessionState::Expired {}
/// # Ok(()) }
/// ```
pub async fn expire_session(
    connect_string: &str,
    session: &SessionInfo,
) -> Result<(), HarnessError> {
    let limit = scaled(Duration::from_secs(30));
    let deadline = Instant::now() + limit;
    let hosts: Vec<&str> = hosts(connect_string)
        .into_iter()
        .filter(|h| !h.contains("tls://"))
        .collect();
    if hosts.is_empty() {
        return Err(HarnessError::Config(format!(
            "expire_session speaks plain TCP, and {connect_string} names only TLS hosts: pass \
             the server's plain connect string"
        )));
    }
    let mut last = String::from("no attempt finished");
    // A round without the close only asks whether the session is gone: after a close, so
    // that the answer that ends the helper comes from a connection the server closes with
    // nothing unread (no reset that could lose the answer).
    let mut probe = false;
    // Spread over the hosts from a different one each call; a round on a member that does not
    // answer (paused, cut off) gives up in time for the others.
    let start = (session.id().0 as usize) % hosts.len();
    for round in 0.. {
        let left = deadline.saturating_duration_since(Instant::now());
        let host = hosts[(start + round) % hosts.len()];
        let attempt = reattach(host, session, !probe);
        match tokio::time::timeout(left.min(scaled(ROUND)), attempt).await {
            Ok(Ok(Answer::Expired)) => {
                tracing::debug!(session = ?session.id(), round, "session expired");
                return Ok(());
            }
            Ok(Ok(Answer::Closed)) => {
                last = format!("closed through {host}; not confirmed");
                probe = true;
                continue;
            }
            // Probed and still alive: taken over, not closed (dropping the connection leaves
            // the session to its client). Close it next round.
            Ok(Ok(Answer::Alive)) => last = format!("still alive at {host}"),
            Ok(Err(Refusal::Fatal(e))) => {
                return Err(HarnessError::Config(format!(
                    "expiring session {:?} at {host}: {e}",
                    session.id()
                )))
            }
            Ok(Err(Refusal::Retry(e))) => last = format!("{host}: {e}"),
            Err(_) => last = format!("{host}: no answer in {:?}", scaled(ROUND)),
        }
        probe = false;
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(HarnessError::Timeout(format!(
        "session {:?} still not expired after {limit:?} at {connect_string} ({last})",
        session.id()
    )))
}

/// How long one round may take before the next host is tried.
const ROUND: Duration = Duration::from_secs(5);

/// What one attempt learned.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// The server refused the session: it is gone.
    Expired,
    /// The session was attached and the close answered.
    Closed,
    /// The session was attached (a probe, without a close).
    Alive,
}

/// Why an attempt did not answer.
#[derive(Debug)]
enum Refusal {
    /// Worth another round (a server not up, a connection broken).
    Retry(String),
    /// No round can succeed (the server wants authentication first).
    Fatal(String),
}

impl From<String> for Refusal {
    fn from(e: String) -> Refusal {
        Refusal::Retry(e)
    }
}

/// ZooKeeper's answers to a close from a connection that has not authenticated where the
/// server requires it: `AuthFailed` and `SessionClosedRequireSaslAuth`.
const AUTH_REQUIRED: [i32; 2] = [-115, -124];

/// The hosts of a connect string, without its chroot.
fn hosts(connect_string: &str) -> Vec<&str> {
    // A scheme's "//" is not a chroot: the chroot starts at the first '/' after the hosts.
    let mut end = connect_string.len();
    let mut rest = connect_string;
    let mut offset = 0;
    while let Some(i) = rest.find('/') {
        if rest[i..].starts_with("//") {
            offset += i + 2;
            rest = &rest[i + 2..];
            continue;
        }
        end = offset + i;
        break;
    }
    let hosts: Vec<&str> = connect_string[..end]
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        vec![connect_string]
    } else {
        hosts
    }
}

/// Captures the connect request `zookeeper_client` makes for `session` and sends it to `host`,
/// with a close behind it in the same write when `close` is set; reads the answers.
async fn reattach(host: &str, session: &SessionInfo, close: bool) -> Result<Answer, Refusal> {
    let host = host.strip_prefix("tcp://").unwrap_or(host);
    let connect = capture_connect_request(session).await?;
    let mut server = TcpStream::connect(host)
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let _ = server.set_nodelay(true);
    let mut burst = Vec::with_capacity(connect.len() + 16);
    burst.extend_from_slice(&(connect.len() as u32).to_be_bytes());
    burst.extend_from_slice(&connect);
    if close {
        burst.extend_from_slice(&8u32.to_be_bytes());
        burst.extend_from_slice(&CLOSE_XID.to_be_bytes());
        burst.extend_from_slice(&CLOSE_SESSION.to_be_bytes());
    }
    server
        .write_all(&burst)
        .await
        .map_err(|e| format!("writing: {e}"))?;
    let reply = read_frame(&mut server).await.map_err(|e| {
        format!("{e} (before any answer: is this a TLS port? expire_session speaks plain TCP)")
    })?;
    // ConnectResponse: protocolVersion, timeOut, sessionId, passwd. A refused session gets
    // a timeout of 0 and the connection closed.
    let timeout = be_i32(&reply, 4).ok_or("a short connect response".to_owned())?;
    if timeout <= 0 {
        return Ok(Answer::Expired);
    }
    if !close {
        return Ok(Answer::Alive);
    }
    loop {
        // ReplyHeader: xid, zxid, err. Notifications (-1) and pings (-2) are skipped.
        let reply = read_frame(&mut server).await?;
        if be_i32(&reply, 0) == Some(CLOSE_XID) {
            return match be_i32(&reply, 12) {
                Some(0) => Ok(Answer::Closed),
                Some(err) if AUTH_REQUIRED.contains(&err) => Err(Refusal::Fatal(format!(
                    "the server refuses the close without authentication (error {err})"
                ))),
                err => Err(format!("the close was answered with error {err:?}").into()),
            };
        }
    }
}

/// The body of the connect request (without its length) that a reattach to `session` sends.
async fn capture_connect_request(session: &SessionInfo) -> Result<Vec<u8>, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("a local listener: {e}"))?;
    let here = listener
        .local_addr()
        .map_err(|e| format!("a local listener: {e}"))?
        .to_string();
    let client = Client::connector()
        .with_session(session.clone())
        .with_fail_eagerly()
        .connect(&here);
    let captured = async {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("accepting the connector: {e}"))?;
        read_frame(&mut stream).await
    };
    tokio::select! {
        captured = captured => captured,
        // It never hears an answer, so it can only fail.
        failed = client => Err(format!("the connector gave up first: {:?}", failed.err())),
    }
}

/// One length-prefixed frame's body.
async fn read_frame(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .await
        .map_err(|e| format!("reading: {e}"))?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(format!("a frame of {len} bytes"));
    }
    let mut body = vec![0u8; len];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("reading: {e}"))?;
    Ok(body)
}

fn be_i32(bytes: &[u8], at: usize) -> Option<i32> {
    let bytes = bytes.get(at..at + 4)?;
    Some(i32::from_be_bytes(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_drop_the_chroot_and_keep_schemes() {
        assert_eq!(hosts("127.0.0.1:2181"), ["127.0.0.1:2181"]);
        assert_eq!(hosts("a:1,b:2/zk-tests/x"), ["a:1", "b:2"]);
        assert_eq!(
            hosts("tcp://a:1, tcp+tls://b:2/chroot"),
            ["tcp://a:1", "tcp+tls://b:2"]
        );
        assert_eq!(hosts("a:1/"), ["a:1"]);
    }

    #[test]
    fn be_i32_reads_big_endian_and_refuses_short_input() {
        assert_eq!(be_i32(&[0, 0, 0, 0, 0, 0, 0x0f, 0xa0], 4), Some(4000));
        assert_eq!(be_i32(&[0, 0, 1], 0), None);
    }
}
