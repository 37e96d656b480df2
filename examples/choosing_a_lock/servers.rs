//! The servers, started by the example itself: Redis processes and one PostgreSQL from
//! Debian's packages (installed by `servers/install.sh` when missing), each on a free port in a
//! temporary directory, stopped when the value drops; ZooKeeper in Docker (zk-testcontainers).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// One server process, stopped (`stop`, then SIGKILL) when dropped.
struct Process {
    name: String,
    child: Child,
    /// The signal that stops it now: TERM for Redis, INT (fast shutdown) for PostgreSQL.
    stop: &'static str,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(format!("-{}", self.stop))
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "servers: {} did not stop on SIG{}; killing it",
            self.name, self.stop
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Redis processes and the PostgreSQL of one run.
pub struct Servers {
    /// `redis://127.0.0.1:port/` of each Redis process (the first is the single-node lock's).
    pub redis: Vec<String>,
    /// A `tokio-postgres` connection string.
    pub postgres: String,
    processes: Vec<Process>,
    _dir: TempDir,
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("free port: {e}"))?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

fn wait_for_port(port: u16, what: &str, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{what} did not listen on {port} within {within:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|bin| bin.join("postgres").exists())
        .collect();
    found.sort();
    found.pop()
}

/// Runs `servers/install.sh` when redis-server, PostgreSQL or faketime is missing.
pub fn ensure_installed() -> Result<(), String> {
    let have_redis = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if have_redis && postgres_bin().is_some() {
        return Ok(());
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/choosing_a_lock/servers/install.sh");
    println!(
        "redis-server or PostgreSQL missing: running {}",
        script.display()
    );
    let status = Command::new("bash")
        .arg(&script)
        .status()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !status.success() {
        return Err(format!("{} failed: {status}", script.display()));
    }
    Ok(())
}

/// Runs `command` as the `postgres` user when we are root (PostgreSQL refuses root);
/// `setpriv` execs, so the child's pid is the server's.
fn as_postgres(program: &Path, root: bool) -> Command {
    if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"])
            .arg(program);
        c
    } else {
        Command::new(program)
    }
}

impl Servers {
    /// Starts `redis_count` Redis processes and one PostgreSQL.
    pub fn start(redis_count: usize) -> Result<Servers, String> {
        ensure_installed()?;
        let dir = tempfile::Builder::new()
            .prefix("choosing-a-lock-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let mut processes = Vec::new();
        let mut redis = Vec::new();
        for i in 0..redis_count {
            let port = free_port()?;
            let child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--protected-mode", "no", "--loglevel", "warning"])
                .arg("--dir")
                .arg(dir.path())
                .arg("--dbfilename")
                .arg(format!("dump-{i}.rdb"))
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("redis-server: {e}"))?;
            processes.push(Process {
                name: format!("redis-server :{port}"),
                child,
                stop: "TERM",
            });
            redis.push((port, format!("redis://127.0.0.1:{port}/")));
        }
        for (port, _) in &redis {
            wait_for_port(*port, "redis-server", Duration::from_secs(10))?;
        }

        let bin = postgres_bin().ok_or("no /usr/lib/postgresql/*/bin/postgres")?;
        // PostgreSQL refuses to run as root: as root, run it as the `postgres` user.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        let pg = dir.path().join("pg");
        std::fs::create_dir(&pg).map_err(|e| format!("{}: {e}", pg.display()))?;
        if root {
            // The postgres user must reach its directory.
            let chown = |p: &Path| {
                Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(p)
                    .status()
                    .map_err(|e| format!("chown: {e}"))
            };
            Command::new("chmod")
                .arg("0755")
                .arg(dir.path())
                .status()
                .map_err(|e| format!("chmod: {e}"))?;
            chown(&pg)?;
        }
        let out = as_postgres(&bin.join("initdb"), root)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(&pg)
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let port = free_port()?;
        let child = as_postgres(&bin.join("postgres"), root)
            .arg("-D")
            .arg(&pg)
            .args(["-p", &port.to_string(), "-k"])
            .arg(&pg)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "max_connections=300",
            ])
            .args(["-c", "shared_buffers=64MB", "-c", "log_min_messages=fatal"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("postgres: {e}"))?;
        processes.push(Process {
            name: format!("postgres :{port}"),
            child,
            stop: "INT",
        });
        wait_for_port(port, "postgres", Duration::from_secs(30))?;
        Ok(Servers {
            redis: redis.into_iter().map(|(_, url)| url).collect(),
            postgres: format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
            processes,
            _dir: dir,
        })
    }

    /// Stops every server (also done on drop).
    pub fn stop(mut self) {
        // Reverse order: PostgreSQL first.
        while let Some(p) = self.processes.pop() {
            drop(p);
        }
    }
}
