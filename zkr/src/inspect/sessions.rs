//! Which sessions are alive and connected, from the servers' four-letter words: `cons` on
//! every server (the connections it has, with their session ids, timeouts and when each was
//! last answered), `srvr` (which one is the leader) and `dump` on the leader or a standalone
//! server (the sessions it tracks, with when each expires). A server that does not allow them
//! (`4lw.commands.whitelist`) is noted, and then no session is called disconnected.
//!
//! How long ago a session was last heard from: `cons` gives each connection's `lresp`, when
//! the server last sent it an answer (to a ping or a request). That is the server's
//! `System.nanoTime()` in ms (on Linux: since its host booted), not the epoch, so it cannot be
//! compared with any clock of ours, skewed or not. The server's own reading of that clock comes
//! from a session of zkr's on the same server: a request of ours answered just before the
//! `cons` (its `lresp` is then "now" on the server's clock, give or take the round trips), so
//! a contender's silence is our `lresp` minus its `lresp`, plus the time between our answer and
//! the `cons`, measured here on a monotonic clock. No wall clock is involved anywhere.

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use zk_recipes::zookeeper_client as zk;

use super::model::{Heard, Sessions};

/// How long one four-letter word may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// What the servers said, and what could not be asked.
pub struct Asked {
    pub sessions: Sessions,
    pub notes: Vec<String>,
    /// The servers that answered `cons` but whose clock could not be read (no session of the
    /// probe's there): a probe pinned to each can read them ([`clock_on`]).
    pub unclocked: Vec<String>,
}

/// A session of zkr's, to read a server's clock with: one request of it answered by its server.
pub struct Probe<'a> {
    pub client: &'a zk::Client,
    pub sid: i64,
}

impl Probe<'_> {
    /// Sends a request and waits for its answer: when it was answered, by our clock (the
    /// middle of its round trip), and the round trip. `None` when it failed.
    async fn ping(&self) -> Option<Instant> {
        let sent = Instant::now();
        // An `exists` of the session's root: answered by the server the session is connected
        // to, allowed whatever the ACLs.
        self.client.check_stat("/").await.ok()?;
        let back = Instant::now();
        Some(sent + (back - sent) / 2)
    }
}

/// Asks every server of `servers`. A session is called disconnected only when every server of
/// the ensemble was asked: the connect string may name only some of them, so each server's
/// `conf` says how many there are (a standalone server is one).
pub async fn ask(servers: &[String], probe: Option<&Probe<'_>>) -> Asked {
    let mut sessions = Sessions::default();
    let mut notes = Vec::new();
    let mut unclocked = Vec::new();
    let mut cons_answered = !servers.is_empty();
    let mut ensemble: Option<usize> = None;
    for server in servers {
        let answered = match probe {
            Some(probe) => probe.ping().await,
            None => None,
        };
        match timed_four_letter(server, "cons").await {
            Ok((text, _)) if refused(&text) => {
                cons_answered = false;
                notes.push(format!(
                    "{server} does not allow `cons` (4lw.commands.whitelist): sessions without a \
                     connection cannot be told"
                ));
                continue;
            }
            Ok((text, asked)) => {
                let conns = parse_cons(&text);
                let ours = probe.map(|p| p.sid);
                let now = ours
                    .and_then(|sid| conns.iter().find(|c| c.sid == sid))
                    .zip(answered)
                    .and_then(|(c, answered)| server_now(c.lresp, answered, asked));
                if now.is_none() && probe.is_some() {
                    unclocked.push(server.clone());
                }
                for c in conns.iter().filter(|c| Some(c.sid) != ours) {
                    sessions.connected.insert(c.sid, server.clone());
                }
                merge_heard(&mut sessions.heard, &conns, ours, now);
            }
            Err(e) => {
                cons_answered = false;
                notes.push(format!(
                    "{server}: `cons` failed ({e}): sessions not fully checked"
                ));
                continue;
            }
        }
        let mode = four_letter(server, "srvr")
            .await
            .ok()
            .and_then(|t| parse_mode(&t));
        let members = match four_letter(server, "conf").await {
            Ok(text) if !refused(&text) => parse_members(&text),
            _ => None,
        };
        let size = match (members, mode.as_deref()) {
            (Some(n), _) => Some(n),
            (None, Some("standalone")) => Some(1),
            _ => None,
        };
        ensemble = ensemble.max(size);
        let leads = matches!(mode.as_deref(), Some("leader" | "standalone"));
        if leads && sessions.tracked.is_none() {
            match four_letter(server, "dump").await {
                Ok(text) if refused(&text) => notes.push(format!(
                    "{server} does not allow `dump`: sessions that are gone cannot be told"
                )),
                Ok(text) => sessions.tracked = parse_dump(&text),
                Err(e) => notes.push(format!("{server}: `dump` failed ({e})")),
            }
        }
    }
    let asked = servers
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    sessions.all_answered = cons_answered
        && match ensemble {
            Some(n) if asked >= n => true,
            Some(n) => {
                notes.push(format!(
                    "the connect string names {asked} of the ensemble's {n} servers: a session \
                     connected to another one cannot be told from a disconnected one, so none is \
                     called disconnected"
                ));
                false
            }
            None => {
                if cons_answered {
                    notes.push(
                        "the ensemble's size is unknown (`conf` not allowed): no session is called \
                         disconnected"
                            .to_owned(),
                    );
                }
                false
            }
        };
    Asked {
        sessions,
        notes,
        unclocked,
    }
}

/// Reads `server`'s clock with `probe` (a session of zkr's connected to that server) and what
/// its `cons` says of every session's last answer.
pub async fn clock_on(
    server: &str,
    probe: &Probe<'_>,
    heard: &mut HashMap<i64, Heard>,
) -> Result<(), String> {
    let answered = probe
        .ping()
        .await
        .ok_or_else(|| "its request failed".to_owned())?;
    let (text, asked) = timed_four_letter(server, "cons")
        .await
        .map_err(|e| format!("`cons` failed ({e})"))?;
    let conns = parse_cons(&text);
    let now = conns
        .iter()
        .find(|c| c.sid == probe.sid)
        .and_then(|c| server_now(c.lresp, answered, asked))
        .ok_or_else(|| "zkr's session there is not in its `cons`".to_owned())?;
    merge_heard(heard, &conns, Some(probe.sid), Some(now));
    Ok(())
}

/// The server's clock at `asked` (ours), from our own connection's `lresp`, answered (by our
/// clock) at `answered`. `None` when our connection shows no answer.
pub fn server_now(our_lresp: i64, answered: Instant, asked: Instant) -> Option<i64> {
    (our_lresp > 0)
        .then(|| our_lresp + asked.saturating_duration_since(answered).as_millis() as i64)
}

/// Each session's last answer, against the server's clock `now` (`None`: unknown), kept where a
/// session shows on two servers (a connection the old server has not closed yet) by the more
/// recent answer. `ours` (the probe) is left out.
pub fn merge_heard(
    heard: &mut HashMap<i64, Heard>,
    conns: &[Conn],
    ours: Option<i64>,
    now: Option<i64>,
) {
    for c in conns.iter().filter(|c| Some(c.sid) != ours) {
        let silent_ms = now
            .filter(|_| c.lresp > 0)
            .map(|now| (now - c.lresp).max(0));
        let new = Heard {
            silent_ms,
            timeout_ms: c.timeout_ms,
        };
        heard
            .entry(c.sid)
            .and_modify(|old| {
                if let Some(s) = silent_ms {
                    if old.silent_ms.is_none_or(|o| s < o) {
                        *old = new;
                    }
                }
            })
            .or_insert(new);
    }
}

/// `Mode: ...` of a `srvr` answer.
fn parse_mode(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Mode: "))
        .map(|m| m.trim().to_owned())
}

/// How many servers a `conf` answer's membership lists (`server.N=...`); `None` without one.
fn parse_members(text: &str) -> Option<usize> {
    let ids: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("server."))
        .filter_map(|rest| rest.split_once('=').map(|(id, _)| id))
        .collect();
    (!ids.is_empty()).then_some(ids.len())
}

/// Sends a four-letter word to `server` and reads the answer until the server closes.
pub async fn four_letter(server: &str, word: &str) -> std::io::Result<String> {
    timed_four_letter(server, word).await.map(|(text, _)| text)
}

/// [`four_letter`], and when the server made its answer, by our clock: the middle between
/// sending the word and the answer's first bytes.
async fn timed_four_letter(server: &str, word: &str) -> std::io::Result<(String, Instant)> {
    let work = async {
        let mut stream = tokio::net::TcpStream::connect(server).await?;
        let sent = Instant::now();
        stream.write_all(word.as_bytes()).await?;
        let mut answer = vec![0; 4096];
        let first = stream.read(&mut answer).await?;
        let made = sent + (Instant::now() - sent) / 2;
        answer.truncate(first);
        stream.read_to_end(&mut answer).await?;
        Ok((String::from_utf8_lossy(&answer).into_owned(), made))
    };
    tokio::time::timeout(ASK_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("no answer within 3 s")))
}

fn refused(answer: &str) -> bool {
    answer.contains("not in the whitelist") || answer.contains("is not executed")
}

/// A connection of a `cons` answer that has a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    pub sid: i64,
    /// `to=`: the session's negotiated timeout, ms.
    pub timeout_ms: i64,
    /// `lresp=`: when the server last answered it, ms on the server's monotonic clock (`0`:
    /// not since this connection was made).
    pub lresp: i64,
}

/// The connections with a session in a `cons` answer:
/// ` /1.2.3.4:5678[1](queued=0,...,sid=0x1000...,...,to=30000,...,lresp=569692,...)`.
pub fn parse_cons(text: &str) -> Vec<Conn> {
    text.lines()
        .filter_map(|line| {
            let (_, stats) = line.split_once('(')?;
            let stats = stats.trim_end().trim_end_matches(')');
            let field = |key: &str| {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            };
            let hex = field("sid")?.strip_prefix("0x")?;
            let sid = u64::from_str_radix(hex, 16).ok()? as i64;
            Some(Conn {
                sid,
                timeout_ms: field("to").and_then(|v| v.parse().ok()).unwrap_or(0),
                lresp: field("lresp").and_then(|v| v.parse().ok()).unwrap_or(0),
            })
        })
        .collect()
}

/// The sessions of a `dump` answer's "Session Sets" (the leader's or a standalone server's
/// session tracker), with when each expires:
///
/// ```text
/// Session Sets (1)/(1):
/// 1 expire at Tue Dec 01 09:07:22 UTC 2026:
///     0x100001c62c90001
/// ephemeral nodes dump:
/// ```
pub fn parse_dump(text: &str) -> Option<HashMap<i64, Option<i64>>> {
    let start = text.find("Session Sets")?;
    let section = &text[start..];
    let section = section
        .find("ephemeral nodes dump")
        .map_or(section, |end| &section[..end]);
    let mut sessions = HashMap::new();
    let mut expires = None;
    for line in section.lines().skip(1) {
        let trimmed = line.trim();
        if let Some(hex) = trimmed.strip_prefix("0x") {
            if let Ok(sid) = u64::from_str_radix(hex, 16) {
                sessions.insert(sid as i64, expires);
            }
        } else if let Some(at) = trimmed.find("expire at ") {
            expires = parse_java_date(trimmed[at + "expire at ".len()..].trim_end_matches(':'));
        }
    }
    Some(sessions)
}

/// Java's `Date.toString()` in UTC (`Tue Dec 01 09:07:22 UTC 2026`) as ms since the epoch;
/// `None` for another zone.
fn parse_java_date(text: &str) -> Option<i64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [_, month, day, clock, zone, year] = words.as_slice() else {
        return None;
    };
    if !matches!(*zone, "UTC" | "GMT") {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as u32 + 1;
    let day: u32 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<i64> = clock
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    let days = crate::time::days_from_civil(year, month, day);
    Some(((days * 86_400) + h * 3600 + m * 60 + s) * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONS: &str = " /172.17.0.1:52856[0](queued=0,recved=1,sent=0)\n /172.17.0.1:42404[1](queued=0,recved=2,sent=2,sid=0x100001c62c90001,lop=CREA,est=1796116012120,to=30000,lcxid=0x1,lzxid=0x9,lresp=1969414,llat=2,minlat=0,avglat=1,maxlat=2)\n\n";

    const DUMP: &str = "SessionTracker dump:\nSession Sets (2)/(2):\n1 expire at Tue Dec 01 09:07:22 UTC 2026:\n\t0x100001c62c90001\n1 expire at Tue Dec 01 09:07:30 UTC 2026:\n\t0x100001c62c90002\nephemeral nodes dump:\nSessions with Ephemerals (1):\n0x100001c62c90001:\n\t/t/lock-0000000003\nConnections dump:\nConnections Sets (1)/(1):\n0 expire at Tue Dec 01 09:07:02 UTC 2026:\n\tip: /172.17.0.1:42404 sessionId: 0x100001c62c90001\n";

    #[test]
    fn conf_gives_the_ensembles_size_and_srvr_the_mode() {
        let conf = "serverId=1\ninitLimit=5\nmembership: \nserver.1=zk1:2888:3888:participant;0.0.0.0:2181\nserver.2=zk2:2888:3888:participant;0.0.0.0:2181\nserver.3=zk3:2888:3888:observer;0.0.0.0:2181\nversion=0\n";
        assert_eq!(parse_members(conf), Some(3));
        assert_eq!(parse_members("clientPort=2181\ndataDir=/data\n"), None);
        assert_eq!(
            parse_mode("Zookeeper version: 3.8.0\nMode: follower\nNode count: 5\n").as_deref(),
            Some("follower")
        );
    }

    /// Real `cons` answers of this repository's images (ZooKeeper 3.8.0 and 3.9.3), each with
    /// a Java client's session after a ping and the asking connection itself (no session).
    const CONS_38: &str = " /172.17.0.1:41036[1](queued=0,recved=5,sent=5,sid=0x10000087e840000,lop=PING,est=1796222513493,to=30000,lcxid=0x2,lzxid=0x2,lresp=589704,llat=1,minlat=0,avglat=7,maxlat=19)\n /172.17.0.1:38906[0](queued=0,recved=1,sent=0)\n\n";
    const CONS_39: &str = " /172.17.0.1:38632[1](queued=0,recved=5,sent=5,sid=0x1000008804d0000,lop=PING,est=1796222513491,to=30000,lcxid=0x2,lzxid=0x2,lresp=589702,llat=0,minlat=0,avglat=7,maxlat=19)\n /172.17.0.1:40904[0](queued=0,recved=1,sent=0)\n\n";

    #[test]
    fn cons_gives_the_connected_sessions_their_timeouts_and_last_answers() {
        let conn = |sid, timeout_ms, lresp| Conn {
            sid,
            timeout_ms,
            lresp,
        };
        assert_eq!(parse_cons(CONS), [conn(0x100001c62c90001, 30000, 1969414)]);
        assert_eq!(
            parse_cons(CONS_38),
            [conn(0x10000087e840000, 30000, 589704)]
        );
        assert_eq!(
            parse_cons(CONS_39),
            [conn(0x1000008804d0000, 30000, 589702)]
        );
        assert!(parse_cons("").is_empty());
        // `lresp` is the server's monotonic clock, not the epoch (`est` is the epoch).
        assert!(parse_cons(CONS_38)[0].lresp < 1_000_000_000);
    }

    #[test]
    fn silence_is_read_on_the_servers_clock_through_our_own_session() {
        // Our session (0x1) was answered at the server's 10_000 ms, 40 ms (our clock) before the
        // server made its `cons`; 0x2 was last answered at 7_000, 0x3 never yet.
        let text = " /10.0.0.1:1[1](queued=0,sid=0x1,to=4000,lresp=10000)\n /10.0.0.2:2[1](queued=0,sid=0x2,to=4000,lresp=7000)\n /10.0.0.3:3[1](queued=0,sid=0x3,to=6000,lresp=0)\n";
        let conns = parse_cons(text);
        let answered = Instant::now();
        let now = server_now(
            conns[0].lresp,
            answered,
            answered + Duration::from_millis(40),
        );
        assert_eq!(now, Some(10_040));
        let mut heard = HashMap::new();
        merge_heard(&mut heard, &conns, Some(0x1), now);
        assert!(
            !heard.contains_key(&0x1),
            "our own session is nobody's contender"
        );
        assert_eq!(
            heard[&0x2],
            Heard {
                silent_ms: Some(3040),
                timeout_ms: 4000
            }
        );
        assert_eq!(heard[&0x3].silent_ms, None);
        // No clock: timeouts only. And a session on two servers keeps its latest answer.
        let mut two = HashMap::new();
        merge_heard(&mut two, &conns, Some(0x1), None);
        assert_eq!(two[&0x2].silent_ms, None);
        merge_heard(&mut two, &conns, Some(0x1), Some(20_000));
        assert_eq!(two[&0x2].silent_ms, Some(13_000));
        merge_heard(&mut two, &conns, Some(0x1), now);
        assert_eq!(two[&0x2].silent_ms, Some(3040));
        merge_heard(&mut two, &conns, Some(0x1), Some(20_000));
        assert_eq!(two[&0x2].silent_ms, Some(3040));
        assert_eq!(server_now(0, answered, answered), None);
    }

    #[test]
    fn dump_gives_the_tracked_sessions_and_their_expiry() {
        let tracked = parse_dump(DUMP).unwrap();
        assert_eq!(tracked.len(), 2, "{tracked:?}");
        assert_eq!(tracked[&0x100001c62c90001], Some(1_796_116_042_000));
        assert_eq!(tracked[&0x100001c62c90002], Some(1_796_116_050_000));
        assert_eq!(parse_dump("no sessions here"), None);
        assert!(refused(
            "cons is not executed because it is not in the whitelist."
        ));
        assert_eq!(parse_java_date("Tue Dec 01 09:07:22 CET 2026"), None);
    }
}
