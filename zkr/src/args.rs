//! The command line: subcommands, options, their help and examples.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::exit;

const ABOUT: &str = "ZooKeeper locks and elections from the shell, and who holds, who waits";

const LONG_ABOUT: &str = "\
ZooKeeper locks and elections from the shell, and who holds, who waits.

`zkr lock` and `zkr elect` run a command while holding a lock or leading, and stop it when
that is lost; `zkr inspect` and `zkr watch` show every lock queue under a path: holders, then
waiters in queue order, with tokens, sessions, ages and owners, and what an operator must fix.

The ensemble comes from --connect or ZK_CONNECT (host:port[,host:port...][/chroot]).
Credentials come from the environment rather than the command line, where other users'
`ps` would show them: ZK_DIGEST (user:password, ZooKeeper's digest scheme) and, in a zkr
built with those features, ZK_TLS_CA, ZK_TLS_CERT, ZK_TLS_KEY (PEM files; every host is
then TLS unless written tcp://host:port) and ZK_SASL_USER with ZK_SASL_PASSWORD
(DIGEST-MD5).";

const EXAMPLES: &str = "\
Examples:
  export ZK_CONNECT=zk1:2181,zk2:2181,zk3:2181
  zkr lock /locks/nightly-report -- ./report.sh --full
  zkr lock /locks/orders --key order-42 --try -- ./ship.sh 42
  zkr elect /election/scheduler --info \"$(hostname)\" -- ./scheduler
  zkr inspect /locks --recursive
  zkr repair /locks/orders/order-42        # what `inspect` prints for an anchored key";

const LOCK_EXAMPLES: &str = "\
Environment of CMD:
  ZK_LOCK_PATH    the lock node held (relative to the chroot)
  ZK_LOCK_ROOT    the lock's root: PATH, or the key's directory with --key
  ZK_LOCK_TOKEN   the fencing token (pass it with every write the lock protects)
  ZK_LOCK_INCARNATION  the root's incarnation, compared before the token (0 for a key)
  ZK_SESSION_ID   the ZooKeeper session holding the lock (0x...)

Examples:
  # one backup at a time, across hosts; wait as long as it takes
  zkr lock /locks/backup -- pg_dump -f /backups/db.sql app
  # cron: skip this run if the previous one still holds the lock (exit 75)
  zkr lock /locks/nightly-report --try -- ./report.sh
  # a lock per key (a ZkLockSpace), give up after 30 s (exit 124)
  zkr lock /locks/orders --key order-42 --timeout 30s -- ./ship.sh 42
  # stop CMD as soon as the connection to ZooKeeper goes, not only on expiry
  zkr lock /locks/deploy --loss-policy suspension --grace 5s -- ./deploy.sh";

const ELECT_EXAMPLES: &str = "\
Environment of CMD:
  ZK_ELECTION_PATH  the election's root (PATH)
  ZK_LEADER_PATH    this candidate's node
  ZK_LEADER_TERM    the term: this leadership's fencing token
  ZK_LEADER_INCARNATION  the root's incarnation, compared before the term
  ZK_SESSION_ID     the ZooKeeper session (0x...)

Examples:
  # run the scheduler on one host at a time; another takes over when it stops or dies
  zkr elect /election/scheduler --info \"$(hostname)\" -- ./scheduler
  # who leads now, and every change after that (one line each; --json for objects)
  zkr elect /election/scheduler --observe";

const INSPECT_EXAMPLES: &str = "\
Examples:
  zkr inspect /locks/nightly-report        # one lock: holder, waiters, tokens, ages
  zkr inspect /locks/orders                # a lock space: every key's queue
  zkr inspect / --recursive                # everything, with warnings
  zkr inspect /locks --recursive --json | jq '.queues[] | select(.warnings != [])'";

const REPAIR_EXAMPLES: &str = "\
What it repairs: a key's directory in a lock space (a ZkLockSpace) that was taken as a
ZkMutex root (`zkr lock SPACE/KEY` without --key) and kept its anchor, which every
ZkLockSpace worker then refuses. In one transaction it deletes PATH/~zk-recipes-anchor and
PATH (the keyed lock makes the directory again, as a container, at its next lock).

It refuses, touching nothing (exit 70), a PATH with no anchor, an anchor of a recipe that
keeps data in its root (a count, a semaphore, a lock space), and a PATH whose parent is no
lock space: the parent must carry the lock space's mark, or (a space made before the marks)
carry no anchor and have another key in use (an unanchored directory holding a keyed lock's
`_c_{uuid}-lock-N` node with zk-recipes' owner record). A ZkMutex root elsewhere is never
touched: its sequence is its tokens. Anyone holding or waiting at PATH: refused with their
nodes, owners and sessions (exit 75).

Examples:
  zkr inspect /shop/locks/orders            # ! anchored-key: ... fix: zkr repair ...
  zkr repair /shop/locks/orders/order-1 --dry-run
  zkr repair /shop/locks/orders/order-1";

const WATCH_EXAMPLES: &str = "\
Examples:
  zkr watch /locks/nightly-report
  zkr watch /locks --recursive --json      # one JSON snapshot per line, on every change";

/// `zkr`: the command line.
#[derive(Debug, Parser)]
#[command(
    name = "zkr",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    after_long_help = format!("{EXAMPLES}\n\n{}", exit::TABLE),
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub zk: ZkArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// How to reach ZooKeeper (every subcommand).
#[derive(Debug, Args)]
pub struct ZkArgs {
    /// ZooKeeper ensemble: host:port[,host:port...][/chroot]
    #[arg(
        long,
        short = 'z',
        env = "ZK_CONNECT",
        global = true,
        value_name = "HOSTS"
    )]
    pub connect: Option<String>,
    /// Session timeout to ask for (the server clamps it)
    #[arg(long, global = true, default_value = "10s", value_parser = parse_duration, value_name = "D")]
    pub session_timeout: Duration,
    /// How long to wait for a server before giving up (exit 69)
    #[arg(long, global = true, default_value = "5s", value_parser = parse_duration, value_name = "D")]
    pub connect_timeout: Duration,
    /// Log the library's events on stderr (-v: info, -vv: debug)
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Authenticate with ZooKeeper's digest scheme (prefer the environment variable)
    #[arg(
        long,
        global = true,
        env = "ZK_DIGEST",
        hide_env_values = true,
        value_name = "USER:PASSWORD"
    )]
    pub digest: Option<Secret>,
    /// Connect by TLS, trusting the CA certificates of this PEM file
    #[cfg(feature = "tls")]
    #[arg(long, global = true, env = "ZK_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// With --tls-ca: present this client certificate (PEM; needs --tls-key)
    #[cfg(feature = "tls")]
    #[arg(long, global = true, env = "ZK_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// With --tls-cert: its private key (PEM, unencrypted)
    #[cfg(feature = "tls")]
    #[arg(long, global = true, env = "ZK_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Authenticate by SASL DIGEST-MD5 as this user (password: ZK_SASL_PASSWORD)
    #[cfg(feature = "sasl-digest-md5")]
    #[arg(long, global = true, env = "ZK_SASL_USER", value_name = "USER")]
    pub sasl_user: Option<String>,
    /// The SASL user's password (prefer the environment variable)
    #[cfg(feature = "sasl-digest-md5")]
    #[arg(
        long,
        global = true,
        env = "ZK_SASL_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub sasl_password: Option<Secret>,
}

/// A password: kept out of `Debug` output.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(value: &str) -> Result<Secret, Self::Err> {
        Ok(Secret(value.to_owned()))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run CMD while holding a lock; release when it exits
    #[command(after_help = LOCK_EXAMPLES)]
    Lock(LockArgs),
    /// Run CMD while leading an election, or --observe who leads
    #[command(after_help = ELECT_EXAMPLES)]
    Elect(ElectArgs),
    /// Show every lock queue under PATH: holders, waiters, tokens, sessions, ages, warnings
    #[command(after_help = INSPECT_EXAMPLES)]
    Inspect(InspectArgs),
    /// `inspect`, redrawn on every change (ZooKeeper watches, no polling)
    #[command(after_help = WATCH_EXAMPLES)]
    Watch(InspectArgs),
    /// Remove the anchor a lock space's key got as another recipe's root (`zkr lock` without --key)
    #[command(after_help = REPAIR_EXAMPLES)]
    Repair(RepairArgs),
}

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The key's directory: SPACE/KEY (the key as its node is named; `zkr inspect` prints it)
    pub path: String,
    /// Check and say what would be deleted, without deleting it
    #[arg(long)]
    pub dry_run: bool,
    /// Print the outcome (and a refusal, on stderr) as one JSON object
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LockArgs {
    /// The lock's path (a ZkMutex), or the lock space's with --key
    pub path: String,
    /// Lock KEY in the lock space PATH (a ZkLockSpace) instead of the mutex PATH
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Give up after waiting D for the lock (exit 124)
    #[arg(long, value_parser = parse_duration, value_name = "D", conflicts_with = "try_lock")]
    pub timeout: Option<Duration>,
    /// Do not wait: exit at once (75) when the lock is busy
    #[arg(long = "try", id = "try_lock")]
    pub try_lock: bool,
    #[command(flatten)]
    pub run: RunArgs,
    /// The command to run holding the lock, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct ElectArgs {
    /// The election's path
    pub path: String,
    /// What observers see of this candidate (default: the owner label, host/pid)
    #[arg(long, value_name = "TEXT", conflicts_with = "observe")]
    pub info: Option<String>,
    /// Do not campaign: print the leader now and on every change (until interrupted)
    #[arg(long)]
    pub observe: bool,
    /// Do not wait: exit at once (75) when someone else leads
    #[arg(long = "try", id = "try_lead", conflicts_with = "observe")]
    pub try_lead: bool,
    /// Give up after campaigning for D (exit 124)
    #[arg(long, value_parser = parse_duration, value_name = "D", conflicts_with_all = ["observe", "try_lead"])]
    pub timeout: Option<Duration>,
    #[command(flatten)]
    pub run: RunArgs,
    /// The command to run while leading, after `--`
    #[arg(last = true, required_unless_present = "observe", value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

/// How CMD is run and stopped (lock, elect).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// After the loss of the lock, how long CMD's process group has between SIGTERM and SIGKILL
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "D")]
    pub grace: Duration,
    /// When the lock counts as lost: at session expiry, or as soon as the connection is
    /// suspended (before the ensemble can give the lock to anyone else)
    #[arg(long, value_enum, default_value_t = Policy::Expiry, value_name = "POLICY")]
    pub loss_policy: Policy,
    /// The owner label stored in the lock node, shown by `inspect` (default: host/pid)
    #[arg(long, value_name = "LABEL")]
    pub owner: Option<String>,
    /// Print nothing of our own on stderr (errors aside)
    #[arg(long, short)]
    pub quiet: bool,
    /// Report acquisition, loss and release as JSON objects on stderr, one per line
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    /// Lost when the session expires (rides out short disconnects)
    Expiry,
    /// Also lost as soon as the connection is suspended
    Suspension,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Where to look: the queue at PATH and those of its children (all below with --recursive)
    pub path: String,
    /// Look at the whole subtree below PATH
    #[arg(long, short)]
    pub recursive: bool,
    /// Print the same as JSON
    #[arg(long)]
    pub json: bool,
    /// Stop after reading this many nodes (a large tree)
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub max_nodes: usize,
    /// Do not ask the servers which sessions are connected (the four-letter words cons, dump)
    #[arg(long)]
    pub no_sessions: bool,
}

/// `500ms`, `10s`, `1.5s`, `2m`, `1h`, or plain seconds (`10`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is no duration (e.g. 500ms, 10s, 2m)"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown unit {other:?} (ms, s, m, h)")),
    };
    if !seconds.is_finite() || seconds > 1e9 {
        return Err(format!("{text:?} is too long"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["", "s", "ten", "5 parsecs", "-1s", "1e99h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn cmd_follows_the_double_dash() {
        let cli = Cli::try_parse_from(["zkr", "lock", "/l", "--", "echo", "--try"]).unwrap();
        let Command::Lock(lock) = cli.command else {
            panic!("not lock")
        };
        assert_eq!(lock.cmd, ["echo", "--try"]);
        assert!(!lock.try_lock);
        let missing = Cli::try_parse_from(["zkr", "lock", "/l"]).unwrap_err();
        assert_eq!(missing.exit_code(), exit::USAGE);
        assert!(Cli::try_parse_from(["zkr", "elect", "/e", "--observe"]).is_ok());
        assert!(Cli::try_parse_from(["zkr", "elect", "/e"]).is_err());
    }

    #[test]
    fn every_subcommand_has_examples() {
        for sub in Cli::command().get_subcommands() {
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(help.contains("Examples:"), "{}", sub.get_name());
        }
    }
}
