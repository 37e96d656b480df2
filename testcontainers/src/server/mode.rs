//! Four-letter words and what `srvr` says of a server's mode.

use std::fmt;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::HarnessError;

/// What a server says about itself in the `Mode:` line of `srvr`.
///
/// ```no_run
/// use zk_testcontainers::{ServerMode, ZkServer};
///
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let server = ZkServer::start().await?;
/// assert_eq!(server.mode().await?, ServerMode::Standalone);
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerMode {
    /// A standalone server, serving.
    Standalone,
    /// The leader of a serving ensemble.
    Leader,
    /// A follower of a serving ensemble.
    Follower,
    /// An observer of a serving ensemble.
    Observer,
    /// Up, but not serving requests (an ensemble member without quorum, or still starting).
    NotServing,
}

impl ServerMode {
    /// Whether the server answers client requests in this mode.
    ///
    /// ```
    /// use zk_testcontainers::ServerMode;
    /// assert!(ServerMode::Leader.is_serving());
    /// assert!(!ServerMode::NotServing.is_serving());
    /// ```
    pub fn is_serving(self) -> bool {
        self != ServerMode::NotServing
    }

    /// Reads the mode from a `srvr` (or `stat`) answer; `None` if the text has none.
    pub(crate) fn parse(srvr: &str) -> Option<ServerMode> {
        if srvr.contains("not currently serving requests") {
            return Some(ServerMode::NotServing);
        }
        let mode = srvr
            .lines()
            .find_map(|l| l.trim().strip_prefix("Mode:"))?
            .trim();
        match mode {
            "standalone" => Some(ServerMode::Standalone),
            "leader" => Some(ServerMode::Leader),
            "follower" => Some(ServerMode::Follower),
            "observer" => Some(ServerMode::Observer),
            _ => None,
        }
    }
}

impl fmt::Display for ServerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerMode::Standalone => "standalone",
            ServerMode::Leader => "leader",
            ServerMode::Follower => "follower",
            ServerMode::Observer => "observer",
            ServerMode::NotServing => "not serving",
        })
    }
}

/// Sends a four-letter word to `127.0.0.1:port` and reads the answer to the end.
pub(crate) async fn four_letter_at(
    port: u16,
    cmd: &str,
    limit: Duration,
) -> Result<String, HarnessError> {
    let what = || format!("four-letter word {cmd:?} to 127.0.0.1:{port}");
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(cmd.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(Ok(answer)) => Ok(String::from_utf8_lossy(&answer).into_owned()),
        Ok(Err(e)) => Err(HarnessError::Io(what(), e)),
        Err(_) => Err(HarnessError::Timeout(format!(
            "{} got no answer within {limit:?}",
            what()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::ServerMode;

    #[test]
    fn modes_are_parsed() {
        let srvr = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(ServerMode::parse(srvr), Some(ServerMode::Follower));
        assert_eq!(
            ServerMode::parse("Mode: leader\n"),
            Some(ServerMode::Leader)
        );
        assert_eq!(
            ServerMode::parse("This ZooKeeper instance is not currently serving requests\n"),
            Some(ServerMode::NotServing)
        );
        assert_eq!(ServerMode::parse(""), None);
    }
}
