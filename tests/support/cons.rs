//! A server's own counts of one session's traffic, from its `cons` four-letter word: per
//! connection, the packets received (`recved=`, pings included) and the last client xid
//! (`lcxid=`), which counts the session's requests and nothing else (zookeeper-client numbers
//! its requests 1, 2, 3...; pings carry the xid -2, which the server does not record there).
//! Included by path (`#[path = "support/cons.rs"] mod cons;`) where a test counts requests.
//! `wchc` beside it: the data watches a session has set, by path.
#![allow(dead_code)]

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One connection of a session, as `cons` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    /// The client's address as the server sees it: the connection's identity.
    pub peer: String,
    /// Packets received on the connection, pings included.
    pub recved: u64,
    /// The last request's xid on the connection (the number of requests so far, pings aside).
    pub lcxid: i64,
    /// The last operation (`PING`, `SYNC`, ...).
    pub lop: String,
}

/// The connection of session `sid` at the server of `connect` (its first host), if it has one
/// there.
pub async fn of_session(connect: &str, sid: i64) -> Option<Conn> {
    let out = ask(connect, b"cons").await;
    let needle = format!("sid={sid:#x},");
    let line = out.lines().find(|l| l.contains(&needle))?;
    Some(parse(line))
}

/// A four-letter word's answer from the server of `connect` (its first host).
async fn ask(connect: &str, word: &[u8]) -> String {
    let host = connect
        .split('/')
        .next()
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream.write_all(word).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

/// The paths on which session `sid` has a data watch (`getData`, `exists`) at the server of
/// `connect`, from `wchc` (which lists data watches only, not child watches).
pub async fn data_watches(connect: &str, sid: i64) -> Vec<String> {
    watches_in(&ask(connect, b"wchc").await, sid)
}

/// The paths listed under session `sid` in a `wchc` answer.
fn watches_in(out: &str, sid: i64) -> Vec<String> {
    let head = format!("{sid:#x}");
    out.lines()
        .skip_while(|l| l.trim() != head)
        .skip(1)
        .take_while(|l| l.starts_with('\t'))
        .map(|l| l.trim().to_owned())
        .collect()
}

#[test]
fn a_wchc_answer_parses() {
    let out = "0x100000da6df0004\n\t/a/lock-1\n\t/a/lock-2\n0x100000da6df0005\n\t/b\n";
    assert_eq!(
        watches_in(out, 0x100000da6df0004),
        ["/a/lock-1", "/a/lock-2"]
    );
    assert_eq!(watches_in(out, 0x100000da6df0005), ["/b"]);
    assert!(watches_in(out, 0x1).is_empty());
}

/// `field=value` of a `cons` line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let pat = format!("{name}=");
    let at = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {name}= in the cons line {line:?}"));
    let rest = &line[at + pat.len()..];
    rest.split([',', ')']).next().unwrap()
}

fn parse(line: &str) -> Conn {
    let peer = line.trim().split('[').next().unwrap().to_owned();
    let lcxid = field(line, "lcxid");
    Conn {
        peer,
        recved: field(line, "recved").parse().unwrap(),
        lcxid: i64::from_str_radix(lcxid.trim_start_matches("0x"), 16).unwrap(),
        lop: field(line, "lop").to_owned(),
    }
}

#[test]
fn a_cons_line_parses() {
    let line = " /172.17.0.1:50634[1](queued=0,recved=12,sent=12,sid=0x100000da6df0004,lop=PING,\
                est=1764686834123,to=4000,lcxid=0x1a,lzxid=0x11,lresp=1764686835000,llat=0,\
                minlat=0,avglat=0,maxlat=1)";
    assert_eq!(
        parse(line),
        Conn {
            peer: "/172.17.0.1:50634".into(),
            recved: 12,
            lcxid: 0x1a,
            lop: "PING".into(),
        }
    );
}
