//! `zkr inspect PATH`: every recipe queue under PATH (mutexes, keyed locks, read/write locks,
//! semaphores, elections; zk-recipes', Curator's, kazoo's, ZooKeeper's own), holders then
//! waiters, with tokens, sessions, ages, owners and warnings.
//!
//! [`read`] reads the tree, [`sessions`] asks the servers which sessions are connected and
//! when each was last heard from, [`model`] (pure) classifies with [`marks`] (pure: the
//! recipe-kind marks), [`render`] prints.

pub mod marks;
pub mod model;
pub mod read;
pub mod render;
pub mod sessions;

use std::collections::HashMap;

use serde::Serialize;
use zk_recipes::zookeeper_client as zk;
use zk_recipes::Session;

use crate::args::{InspectArgs, Policy, ZkArgs};
use crate::connect;
use crate::exit::{self, Failure, Result};
use crate::time;

/// What `inspect` reports (and `--json` prints).
#[derive(Debug, Serialize)]
pub struct Report {
    /// PATH, as asked.
    pub path: String,
    pub recursive: bool,
    /// When read (this machine's clock), RFC 3339 and ms since the epoch.
    pub at: String,
    pub now_ms: i64,
    /// Whether every server answered `cons` (so sessions without a connection are flagged).
    pub sessions_checked: bool,
    /// Whether `--max-nodes` stopped the walk.
    pub truncated: bool,
    /// What could not be checked, and why.
    pub notes: Vec<String>,
    pub queues: Vec<model::Queue>,
}

/// `zkr inspect`.
pub async fn inspect(zk: &ZkArgs, args: &InspectArgs) -> Result<i32> {
    check_path(&args.path)?;
    let session = connect::session(zk, Policy::Expiry, None).await?;
    let mut clocks = Clocks::default();
    let result = match session.client().await {
        // The client handle goes before the close: the server confirms a close only once
        // every handle of the session is dropped.
        Ok(client) => report(zk, &client, args, false, &mut clocks).await,
        Err(err) => Err(err.into()),
    };
    clocks.close().await;
    session.close().await;
    let (report, _) = result?;
    if args.json {
        println!("{}", render::json(&report, true));
    } else {
        print!("{}", render::table(&report));
    }
    Ok(0)
}

/// PATH must be absolute, like a recipe root; `/` is allowed here.
pub fn check_path(path: &str) -> Result<()> {
    if path == "/" {
        return Ok(());
    }
    zk_recipes::layout::check_path(path).or_else(|err| match err {
        // Reading under /zookeeper is harmless.
        zk_recipes::Error::InvalidPath { reason, .. } if reason.starts_with("/zookeeper") => Ok(()),
        err => Err(Failure::from(err)),
    })
}

/// Sessions of zkr's pinned to one server each, to read the clock of a server that zkr's own
/// session is not connected to (see `sessions`); `watch` keeps them across its rounds.
#[derive(Default)]
pub struct Clocks {
    pinned: HashMap<String, Session>,
}

impl Clocks {
    /// Reads the clocks of `servers` through sessions pinned to them (opened on first use),
    /// and what their `cons` says of every session's last answer, into `heard`.
    async fn read(
        &mut self,
        zk: &ZkArgs,
        servers: &[String],
        heard: &mut HashMap<i64, model::Heard>,
        notes: &mut Vec<String>,
    ) {
        for server in servers {
            if !self.pinned.contains_key(server) {
                match connect::session_to(zk, server.clone(), Policy::Expiry, None).await {
                    Ok(session) => {
                        self.pinned.insert(server.clone(), session);
                    }
                    Err(failure) => {
                        notes.push(format!(
                            "{server}: how long ago its sessions were heard from is not known \
                             (zkr could not open a session there to read its clock: {failure})"
                        ));
                        continue;
                    }
                }
            }
            let read = match self.pinned[server].client().await {
                Ok(client) => {
                    let probe = sessions::Probe {
                        sid: client.session_id().0,
                        client: &client,
                    };
                    sessions::clock_on(server, &probe, heard).await
                }
                Err(err) => Err(err.to_string()),
            };
            if let Err(why) = read {
                notes.push(format!(
                    "{server}: how long ago its sessions were heard from is not known (reading \
                     its clock: {why})"
                ));
            }
        }
    }

    pub async fn close(self) {
        for session in self.pinned.into_values() {
            session.close().await;
        }
    }
}

/// Reads, asks the servers, classifies: the report and (with `watch`) the watches left.
pub async fn report(
    zk: &ZkArgs,
    client: &zk::Client,
    args: &InspectArgs,
    watch: bool,
    clocks: &mut Clocks,
) -> Result<(Report, Vec<zk::OneshotWatcher>)> {
    let snapshot = read::read(client, &args.path, args.recursive, args.max_nodes, watch)
        .await
        .map_err(|e| zk_failure(&args.path, e))?;
    let Some(root) = snapshot.root else {
        if watch {
            let report = Report {
                path: args.path.clone(),
                recursive: args.recursive,
                at: time::iso_now(),
                now_ms: time::now_ms(),
                sessions_checked: false,
                truncated: false,
                notes: vec![format!("{} does not exist (yet)", args.path)],
                queues: Vec::new(),
            };
            return Ok((report, snapshot.watchers));
        }
        return Err(Failure::new(
            exit::NO_NODE,
            format!("{}: no such node", args.path),
        ));
    };
    let mut notes = Vec::new();
    let sessions = if args.no_sessions {
        model::Sessions::default()
    } else {
        let connect = connect::connect_string(zk)?;
        let (servers, tls) = connect::servers(&connect, connect::tls(zk));
        if tls > 0 {
            notes.push(format!(
                "{tls} TLS server(s) not asked for their sessions (four-letter words are plain \
                 text): sessions not fully checked"
            ));
        }
        let probe = sessions::Probe {
            client,
            sid: client.session_id().0,
        };
        let mut asked = sessions::ask(&servers, Some(&probe)).await;
        asked.sessions.all_answered &= tls == 0;
        notes.extend(asked.notes);
        clocks
            .read(zk, &asked.unclocked, &mut asked.sessions.heard, &mut notes)
            .await;
        asked.sessions
    };
    if snapshot.truncated {
        notes.push(format!(
            "stopped after {} nodes (--max-nodes): some queues are not shown or cut short",
            args.max_nodes
        ));
    }
    let now_ms = time::now_ms();
    let queues = model::queues(&root, snapshot.parent_anchor.as_deref(), &sessions, now_ms);
    let report = Report {
        path: args.path.clone(),
        recursive: args.recursive,
        at: time::iso(now_ms),
        now_ms,
        sessions_checked: sessions.all_answered,
        truncated: snapshot.truncated,
        notes,
        queues,
    };
    Ok((report, snapshot.watchers))
}

fn zk_failure(path: &str, err: zk::Error) -> Failure {
    let code = match err {
        zk::Error::ConnectionLoss | zk::Error::SessionExpired | zk::Error::ClientClosed => {
            exit::UNREACHABLE
        }
        _ => exit::ZOOKEEPER,
    };
    Failure::new(code, format!("reading {path}: {err}"))
}
