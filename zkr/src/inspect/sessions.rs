//! Which sessions are alive and connected, from the servers' four-letter words: `cons` on
//! every server (the connections it has, with their session ids), `srvr` (which one is the
//! leader) and `dump` on the leader or a standalone server (the sessions it tracks, with when
//! each expires). A server that does not allow them (`4lw.commands.whitelist`) is noted, and
//! then no session is called disconnected.

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::model::Sessions;

/// How long one four-letter word may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// What the servers said, and what could not be asked.
pub struct Asked {
    pub sessions: Sessions,
    pub notes: Vec<String>,
}

/// Asks every server of `servers`. A session is called disconnected only when every server of
/// the ensemble was asked: the connect string may name only some of them, so each server's
/// `conf` says how many there are (a standalone server is one).
pub async fn ask(servers: &[String]) -> Asked {
    let mut sessions = Sessions::default();
    let mut notes = Vec::new();
    let mut cons_answered = !servers.is_empty();
    let mut ensemble: Option<usize> = None;
    for server in servers {
        match four_letter(server, "cons").await {
            Ok(text) if refused(&text) => {
                cons_answered = false;
                notes.push(format!(
                    "{server} does not allow `cons` (4lw.commands.whitelist): sessions without a \
                     connection cannot be told"
                ));
                continue;
            }
            Ok(text) => {
                for sid in parse_cons(&text) {
                    sessions.connected.insert(sid, server.clone());
                }
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
    Asked { sessions, notes }
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
    let work = async {
        let mut stream = tokio::net::TcpStream::connect(server).await?;
        stream.write_all(word.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    tokio::time::timeout(ASK_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("no answer within 3 s")))
}

fn refused(answer: &str) -> bool {
    answer.contains("not in the whitelist") || answer.contains("is not executed")
}

/// The session ids in a `cons` answer: ` /1.2.3.4:5678[1](queued=0,...,sid=0x1000...,...)`.
pub fn parse_cons(text: &str) -> Vec<i64> {
    text.lines()
        .filter_map(|line| {
            let at = line.find("sid=0x")? + "sid=0x".len();
            let hex: String = line[at..]
                .chars()
                .take_while(char::is_ascii_hexdigit)
                .collect();
            u64::from_str_radix(&hex, 16).ok().map(|v| v as i64)
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

    #[test]
    fn cons_gives_the_connected_sessions() {
        assert_eq!(parse_cons(CONS), [0x100001c62c90001]);
        assert!(parse_cons("").is_empty());
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
