//! The servers, started by the example itself: Redis processes and one PostgreSQL from
//! Debian's packages (installed by `servers/install.sh` when missing), each on a free port in a
//! temporary directory, stopped when the value drops; ZooKeeper in Docker (zk-testcontainers).
//!
//! For the failover and clock-jump incidents also: a Redis primary with its replica
//! ([`Servers::replica_pair`]), five Redlock nodes of which one runs with a wall clock the
//! orchestrator moves ([`Servers::clock_nodes`], through `servers/clock_shim.c`), five Redlock
//! nodes any of which can be killed and started again empty ([`Servers::restart_nodes`]), a
//! 3-member ZooKeeper ensemble ([`zk_ensemble`]) and a ZooKeeper server under libfaketime
//! ([`zk_with_faketime`]).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use zk_testcontainers::{ServerOptions, ZkEnsemble, ZkServer};

/// One server process, stopped (`stop`, then SIGKILL) when dropped.
struct Process {
    name: String,
    child: Child,
    /// The signal that stops it now: TERM for Redis, INT (fast shutdown) for PostgreSQL.
    stop: &'static str,
}

impl Drop for Process {
    fn drop(&mut self) {
        // Already gone (the failover's killed primary).
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .arg(format!("-{}", self.stop))
            .arg(self.child.id().to_string())
            .status();
        // A process left frozen (SIGSTOP) by a run that failed would take the signal only when
        // continued.
        let _ = Command::new("kill")
            .arg("-CONT")
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
    if have_redis && postgres_bin().is_some() && Path::new(LIBFAKETIME).exists() {
        return Ok(());
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/choosing_a_lock/servers/install.sh");
    println!(
        "redis-server, PostgreSQL or libfaketime missing: running {}",
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

/// Starts one redis-server on a free port (no persistence), with `extra` arguments and `env`.
fn spawn_redis(
    dir: &Path,
    tag: &str,
    extra: &[String],
    env: &[(&str, &Path)],
) -> Result<(Process, u16), String> {
    let port = free_port()?;
    let process = spawn_redis_on(port, dir, tag, extra, env)?;
    Ok((process, port))
}

/// [`spawn_redis`] on a given port.
fn spawn_redis_on(
    port: u16,
    dir: &Path,
    tag: &str,
    extra: &[String],
    env: &[(&str, &Path)],
) -> Result<Process, String> {
    let mut command = Command::new("redis-server");
    command
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--protected-mode", "no", "--loglevel", "warning"])
        .arg("--dir")
        .arg(dir)
        .arg("--dbfilename")
        .arg(format!("dump-{tag}.rdb"))
        .args(extra)
        .stdout(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let child = command.spawn().map_err(|e| format!("redis-server: {e}"))?;
    Ok(Process {
        name: format!("redis-server :{port}"),
        child,
        stop: "TERM",
    })
}

/// A Redis primary and its replica (`--replicaof`), for the failover incident; both stopped
/// when dropped.
pub struct ReplicaPair {
    pub primary: String,
    pub replica: String,
    primary_process: Option<Process>,
    replica_process: Process,
}

impl ReplicaPair {
    pub fn replica_pid(&self) -> u32 {
        self.replica_process.child.id()
    }

    /// SIGKILLs the primary and waits until it is gone.
    pub fn kill_primary(&mut self) -> Result<(), String> {
        let mut p = self
            .primary_process
            .take()
            .ok_or("the primary is already dead")?;
        p.child
            .kill()
            .map_err(|e| format!("SIGKILL primary: {e}"))?;
        p.child
            .wait()
            .map_err(|e| format!("waiting for the primary: {e}"))?;
        Ok(())
    }
}

/// Five Redlock nodes, the first (`jumped`) with a wall clock the orchestrator moves at run
/// time (`servers/clock_shim.c`, preloaded); stopped when dropped.
pub struct ClockNodes {
    pub urls: Vec<String>,
    pub jumped: usize,
    offset_file: PathBuf,
    _processes: Vec<Process>,
}

impl ClockNodes {
    /// Sets node `jumped`'s wall clock `ahead` of the real one, at once.
    pub fn set_ahead(&self, ahead: Duration) -> Result<(), String> {
        std::fs::write(&self.offset_file, format!("{}\n", ahead.as_millis()))
            .map_err(|e| format!("{}: {e}", self.offset_file.display()))
    }
}

/// Five Redlock nodes of their own, for the failover incident: each can be frozen (its pid) and
/// killed and started again on its port, empty (no persistence); stopped when dropped.
pub struct RestartNodes {
    pub urls: Vec<String>,
    ports: Vec<u16>,
    dir: PathBuf,
    tag: String,
    processes: Vec<Process>,
    restarts: usize,
}

impl RestartNodes {
    pub fn pid(&self, node: usize) -> u32 {
        self.processes[node].child.id()
    }

    /// SIGKILLs node `node`, waits until it is gone, and starts a new redis-server on its port
    /// (nothing to load: no RDB, no AOF), answering PING.
    pub fn kill_and_restart(&mut self, node: usize) -> Result<(), String> {
        let p = &mut self.processes[node];
        p.child
            .kill()
            .map_err(|e| format!("SIGKILL {}: {e}", p.name))?;
        p.child
            .wait()
            .map_err(|e| format!("waiting for {}: {e}", p.name))?;
        self.restarts += 1;
        let tag = format!("{}-{node}-again{}", self.tag, self.restarts);
        let port = self.ports[node];
        self.processes[node] = spawn_redis_on(port, &self.dir, &tag, &[], &[])?;
        wait_for_redis(port, Duration::from_secs(10))
    }
}

/// Builds `servers/clock_shim.c` into `dir` with the C compiler (`cc`, which the workspace's
/// bundled SQLite needs anyway).
fn build_clock_shim(dir: &Path) -> Result<PathBuf, String> {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/choosing_a_lock/servers/clock_shim.c");
    let out = dir.join("clock_shim.so");
    let result = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .map_err(|e| format!("cc (to build {}): {e}", src.display()))?;
    if !result.status.success() {
        return Err(format!(
            "cc {} failed: {}",
            src.display(),
            String::from_utf8_lossy(&result.stderr)
        ));
    }
    Ok(out)
}

/// Waits until a Redis at `port` answers PING (a listening port is not yet a loaded server).
fn wait_for_redis(port: u16, within: Duration) -> Result<(), String> {
    use std::io::{Read, Write};
    let deadline = Instant::now() + within;
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut buf = [0u8; 16];
            if s.write_all(b"PING\r\n").is_ok()
                && s.read(&mut buf).is_ok_and(|n| n > 0)
                && buf.starts_with(b"+PONG")
            {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "redis-server on {port} did not answer PING within {within:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A 3-member (`n`) ZooKeeper ensemble in Docker, every member serving.
pub async fn zk_ensemble(n: usize) -> Result<ZkEnsemble, String> {
    ZkEnsemble::start(n)
        .await
        .map_err(|e| format!("ZooKeeper ensemble: {e}"))
}

/// Debian's libfaketime (package `libfaketime`, with `faketime`), copied into the ZooKeeper
/// container of the clock-jump incident.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Where [`zk_with_faketime`] puts libfaketime and its timestamp file in the container.
const FAKETIME_LIB: &str = "/opt/faketime/libfaketime.so.1";
const FAKETIME_FILE: &str = "/tmp/faketime.rc";

/// The wall clock of a ZooKeeper server run under libfaketime.
pub struct FakeClock {
    container: String,
}

impl FakeClock {
    /// Sets the server's wall clock `ahead` of the real one, in whole seconds (libfaketime
    /// reads the file on every call: `FAKETIME_NO_CACHE=1`).
    pub async fn set_ahead(&self, ahead: Duration) -> Result<(), String> {
        let out = tokio::process::Command::new("docker")
            .args(["exec", "-u", "0", &self.container, "sh", "-c"])
            .arg(format!("echo +{} > {FAKETIME_FILE}", ahead.as_secs()))
            .output()
            .await
            .map_err(|e| format!("docker exec: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "docker exec (moving the clock): {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }
}

/// A standalone ZooKeeper server whose JVM runs under Debian's libfaketime (copied into the
/// container; the image is bookworm too), only the wall clock faked
/// (`FAKETIME_DONT_FAKE_MONOTONIC=1`, which the JVM needs and which is what a clock step does).
pub async fn zk_with_faketime() -> Result<(ZkServer, FakeClock), String> {
    let host_lib = LIBFAKETIME;
    let lib = std::fs::read(host_lib)
        .map_err(|e| format!("{host_lib}: {e} (install.sh installs faketime)"))?;
    let opts = ServerOptions::default()
        .with_file(FAKETIME_LIB, lib)
        .with_file(FAKETIME_FILE, b"+0\n".to_vec())
        .with_env("LD_PRELOAD", FAKETIME_LIB)
        .with_env("FAKETIME_TIMESTAMP_FILE", FAKETIME_FILE)
        .with_env("FAKETIME_NO_CACHE", "1")
        .with_env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    let server = ZkServer::start_with(opts)
        .await
        .map_err(|e| format!("ZooKeeper under faketime: {e}"))?;
    let clock = FakeClock {
        container: server.container_id().to_owned(),
    };
    Ok((server, clock))
}

impl Servers {
    /// Starts a Redis primary and a replica of it, and waits until the replica is in sync.
    pub fn replica_pair(&self, tag: &str) -> Result<ReplicaPair, String> {
        let (primary_process, pport) =
            spawn_redis(self._dir.path(), &format!("{tag}-p"), &[], &[])?;
        wait_for_redis(pport, Duration::from_secs(10))?;
        let replicaof = [
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            pport.to_string(),
        ];
        let (replica_process, rport) =
            spawn_redis(self._dir.path(), &format!("{tag}-r"), &replicaof, &[])?;
        wait_for_redis(rport, Duration::from_secs(10))?;
        Ok(ReplicaPair {
            primary: format!("redis://127.0.0.1:{pport}/"),
            replica: format!("redis://127.0.0.1:{rport}/"),
            primary_process: Some(primary_process),
            replica_process,
        })
    }

    /// Starts five Redis processes for Redlock, each answering PING; `env(i)`: node `i`'s
    /// environment.
    fn five_nodes<'a>(
        &'a self,
        tag: &str,
        env: impl Fn(usize) -> Vec<(&'a str, &'a Path)>,
    ) -> Result<(Vec<Process>, Vec<u16>), String> {
        let mut processes = Vec::new();
        let mut ports = Vec::new();
        for i in 0..5 {
            let (process, port) =
                spawn_redis(self._dir.path(), &format!("{tag}-{i}"), &[], &env(i))?;
            processes.push(process);
            wait_for_redis(port, Duration::from_secs(10))?;
            ports.push(port);
        }
        Ok((processes, ports))
    }

    /// Starts five Redis processes for Redlock, the first one's wall clock movable.
    pub fn clock_nodes(&self, tag: &str) -> Result<ClockNodes, String> {
        let dir = self._dir.path();
        let shim = build_clock_shim(dir)?;
        let offset_file = dir.join(format!("clock-{tag}.ms"));
        std::fs::write(&offset_file, "0\n")
            .map_err(|e| format!("{}: {e}", offset_file.display()))?;
        let (processes, ports) = self.five_nodes(tag, |i| {
            if i == 0 {
                vec![("LD_PRELOAD", &shim), ("CLOCK_SHIM_FILE", &offset_file)]
            } else {
                Vec::new()
            }
        })?;
        Ok(ClockNodes {
            urls: ports
                .iter()
                .map(|p| format!("redis://127.0.0.1:{p}/"))
                .collect(),
            jumped: 0,
            offset_file,
            _processes: processes,
        })
    }

    /// Starts five Redis processes for Redlock, any of which can be killed and started again
    /// empty.
    pub fn restart_nodes(&self, tag: &str) -> Result<RestartNodes, String> {
        let (processes, ports) = self.five_nodes(tag, |_| Vec::new())?;
        Ok(RestartNodes {
            urls: ports
                .iter()
                .map(|p| format!("redis://127.0.0.1:{p}/"))
                .collect(),
            ports,
            dir: self._dir.path().to_owned(),
            tag: tag.to_owned(),
            processes,
            restarts: 0,
        })
    }

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
            let (process, port) = spawn_redis(dir.path(), &format!("{i}"), &[], &[])?;
            processes.push(process);
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
