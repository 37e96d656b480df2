//! Service discovery against a real ZooKeeper and Curator's own `ServiceDiscovery`
//! (`tests/java/Discovery.java`, Debian's curator-x-discovery): a Java service finds a
//! Rust-registered instance with every field, and the other way round; each side sees the
//! other's instance leave when its session dies; a Rust registration comes back after an
//! expiry and Java sees it again. Then, Rust alone: update and unregister, the provider's
//! round-robin and random picks over live instances only, an unknown service empty, and bad
//! input refused with typed errors, leaving no node.
//!
//! Without `javac` or the jars (`apt-get install openjdk-17-jdk-headless
//! libcurator-discovery-java`), the Java part says why and is not run.

mod support;

use std::collections::BTreeMap;

use serde_json::json;
use support::{wait_deleted, within, Zk};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};
use zk_recipes::discovery::{ServiceInstance, ServiceType, Strategy, UriSpec, ZkServiceDiscovery};
use zk_recipes::Error;
use zk_testcontainers::expire_session;

const BASE: &str = "/discovery";

/// The Java peer: its input and its output lines.
struct Java {
    child: tokio::process::Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Java {
    async fn start(connect: &str) -> Option<Java> {
        let classes = tempfile::tempdir().unwrap().keep();
        let mut jars: Vec<&str> = include_str!("../examples/bench-peers/classpath.txt")
            .lines()
            .collect();
        jars.extend([
            "curator-x-discovery",
            "jackson-core",
            "jackson-databind",
            "jackson-annotations",
        ]);
        let classpath = match support::compile_java(
            "tests/java/Discovery.java",
            &jars,
            "libcurator-discovery-java",
            &classes,
        )
        .await
        {
            Ok(classpath) => classpath,
            Err(why) => {
                println!("Java part not run: {why}");
                return None;
            }
        };
        let mut child = tokio::process::Command::new("java")
            .arg("-cp")
            .arg(classpath)
            .arg("Discovery")
            .arg(connect)
            .arg(BASE)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut java = Java {
            child,
            stdin,
            lines,
        };
        assert_eq!(java.line("Java ready").await, "ready");
        Some(java)
    }

    async fn line(&mut self, what: &str) -> String {
        within(what, 60, self.lines.next_line())
            .await
            .unwrap()
            .expect("the Java peer ended")
    }

    async fn send(&mut self, command: &str) {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .unwrap();
    }

    /// The instances of `name` as Curator reads them, by id.
    async fn query(&mut self, name: &str) -> BTreeMap<String, ServiceInstance> {
        self.send(&format!("query {name}")).await;
        let mut out = BTreeMap::new();
        loop {
            let line = self.line("Java's query").await;
            if line == "end" {
                return out;
            }
            let instance = ServiceInstance::from_json(line.as_bytes())
                .unwrap_or_else(|e| panic!("Curator's JSON not read: {e}: {line}"));
            out.insert(instance.id.clone(), instance);
        }
    }

    async fn wait_count(&mut self, name: &str, n: usize) {
        self.send(&format!("wait-count {name} {n}")).await;
        assert_eq!(self.line("Java's count").await, format!("count {n}"));
    }
}

fn rust_instance() -> ServiceInstance {
    let mut instance = ServiceInstance::new("billing", "rust-1");
    instance.address = Some("10.0.0.7".into());
    instance.port = Some(8080);
    instance.ssl_port = Some(8443);
    instance.payload = Some(json!({"zone": "eu-2", "weight": 5, "tags": ["a", "b"]}));
    instance.payload_class = Some("java.util.LinkedHashMap".into());
    instance.uri_spec = Some(UriSpec::parse("{scheme}://{address}:{port}/v1").unwrap());
    instance
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_services_find_each_other_and_see_each_other_leave() {
    let zk = Zk::start("discovery-interop").await;
    let Some(mut java) = Java::start(&zk.connect).await else {
        return;
    };
    let (registering, observing) = (zk.session().await, zk.session().await);
    let ours = ZkServiceDiscovery::new(&registering, BASE).unwrap();
    let watcher = ZkServiceDiscovery::new(&observing, BASE).unwrap();
    let provider = watcher
        .provider("billing", Strategy::RoundRobin)
        .await
        .unwrap();

    // Rust registers; Curator reads every field.
    let mine = rust_instance();
    let registration = ours.register(&mine).await.unwrap();
    let seen = java.query("billing").await;
    assert_eq!(
        seen.get("rust-1"),
        Some(&mine),
        "Curator reads ours as written"
    );

    // Java registers; Rust reads every field Curator wrote.
    java.send("register billing java-1 10.0.0.9 9090").await;
    assert_eq!(java.line("Java registered").await, "registered");
    let theirs = ours
        .query_instance("billing", "java-1")
        .await
        .unwrap()
        .expect("Java's instance");
    assert_eq!(theirs.address.as_deref(), Some("10.0.0.9"));
    assert_eq!((theirs.port, theirs.ssl_port), (Some(9090), None));
    assert_eq!(theirs.payload, Some(json!({"zone": "eu-1", "weight": 3})));
    assert_eq!(
        theirs.payload_class.as_deref(),
        Some("java.util.LinkedHashMap")
    );
    assert_eq!(theirs.service_type, ServiceType::Dynamic);
    let mut vars = std::collections::HashMap::new();
    vars.insert("scheme".to_owned(), "http".to_owned());
    let uri = theirs.uri_spec.as_ref().unwrap().build(&theirs, &vars);
    assert_eq!(uri, "http://10.0.0.9:9090/api");
    // Curator's own reading of it is the same instance.
    assert_eq!(java.query("billing").await.get("java-1"), Some(&theirs));
    let both = within(
        "the provider sees both",
        30,
        provider.wait_for(|i| i.len() == 2),
    )
    .await
    .unwrap();
    let ids: Vec<&str> = both.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["java-1", "rust-1"]);

    // Our session expires: the registration comes back in the next, and Curator sees it.
    let raw = zk.raw().await;
    let path = format!("{BASE}/billing/rust-1");
    let before = raw.check_stat(&path).await.unwrap().unwrap();
    let info = registering.client().await.unwrap().session().clone();
    expire_session(&zk.connect, &info).await.unwrap();
    within("registered again", 30, async {
        loop {
            let (stat, watcher) = raw.check_and_watch_stat(&path).await.unwrap();
            if stat.is_some_and(|s| s.czxid != before.czxid) {
                return;
            }
            watcher.changed().await;
        }
    })
    .await;
    // The handle says so once its keeper has looked (just after the node is back).
    let mut state = registration.node().watch_state();
    within(
        "registered again, as the handle says",
        30,
        state.wait_for(|s| s.path().is_some()),
    )
    .await
    .unwrap();
    assert!(registration.is_registered());
    assert_eq!(java.query("billing").await.get("rust-1"), Some(&mine));

    // Our session dies for good: Curator sees our instance leave.
    registering.close().await;
    java.wait_count("billing", 1).await;
    assert!(!java.query("billing").await.contains_key("rust-1"));
    drop(registration);

    // The Java process dies: its session ends, and our provider sees its instance leave.
    java.child.kill().await.unwrap();
    within(
        "Java's instance gone with its session",
        30,
        provider.wait_for(|i| i.is_empty()),
    )
    .await
    .unwrap();
    assert!(watcher.query_instances("billing").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_unregister_and_the_providers_picks() {
    let zk = Zk::start("discovery-rust").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    let discovery = ZkServiceDiscovery::new(&session, BASE).unwrap();
    assert!(discovery.query_names().await.unwrap().is_empty());
    assert!(discovery
        .query_instances("nothing")
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        discovery.query_instance("nothing", "x").await.unwrap(),
        None
    );

    let mut registrations = Vec::new();
    for i in 0..3 {
        let mut instance = ServiceInstance::new("search", format!("s{i}"));
        instance.address = Some(format!("host-{i}"));
        registrations.push(discovery.register(&instance).await.unwrap());
    }
    let persistent = {
        let mut instance = ServiceInstance::new("static", "fixed");
        instance.service_type = ServiceType::Static;
        discovery.register(&instance).await.unwrap()
    };
    let stat = raw
        .check_stat(&format!("{BASE}/static/fixed"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stat.ephemeral_owner, 0, "STATIC: a persistent node");
    assert_eq!(discovery.query_names().await.unwrap(), ["search", "static"]);

    let round_robin = discovery
        .provider("search", Strategy::RoundRobin)
        .await
        .unwrap();
    let random = discovery
        .provider("search", Strategy::Random)
        .await
        .unwrap();
    // Round-robin: each instance in turn.
    let picks: Vec<String> = (0..6).map(|_| round_robin.instance().unwrap().id).collect();
    let mut counts = BTreeMap::new();
    for id in &picks {
        *counts.entry(id.as_str()).or_insert(0) += 1;
    }
    assert_eq!(
        counts.values().collect::<Vec<_>>(),
        [&2, &2, &2],
        "{picks:?}"
    );
    // Random: live instances only, and not always the same one.
    let picks: std::collections::BTreeSet<String> =
        (0..200).map(|_| random.instance().unwrap().id).collect();
    assert_eq!(picks.len(), 3, "{picks:?}");

    // Update: written in place, seen by the providers.
    let mut changed = registrations[0].instance();
    changed.payload = Some(json!({"state": "draining"}));
    registrations[0].update(&changed).await.unwrap();
    assert_eq!(
        discovery.query_instance("search", "s0").await.unwrap(),
        Some(changed.clone())
    );
    within(
        "the provider sees the update",
        30,
        round_robin.wait_for(|i| i.iter().any(|x| x.payload.is_some())),
    )
    .await
    .unwrap();
    // Another id in an update: refused, nothing changes.
    let mut other = changed.clone();
    other.id = "s9".into();
    let err = registrations[0].update(&other).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInstance { .. }), "{err:?}");

    // Unregistered: gone at once, and from the providers; random picks only the live ones.
    let gone = registrations.remove(1);
    gone.unregister().await.unwrap();
    assert_eq!(
        raw.check_stat(&format!("{BASE}/search/s1")).await.unwrap(),
        None
    );
    within(
        "the providers see it go",
        30,
        random.wait_for(|i| i.len() == 2),
    )
    .await
    .unwrap();
    for _ in 0..50 {
        assert_ne!(random.instance().unwrap().id, "s1");
    }
    // Dropped: deleted in the background, as a persistent one is on unregister.
    drop(registrations);
    persistent.unregister().await.unwrap();
    wait_deleted(&raw, &format!("{BASE}/search/s0")).await;
    wait_deleted(&raw, &format!("{BASE}/search/s2")).await;
    assert_eq!(
        raw.check_stat(&format!("{BASE}/static/fixed"))
            .await
            .unwrap(),
        None
    );
    within("empty", 30, round_robin.wait_for(|i| i.is_empty()))
        .await
        .unwrap();
    assert_eq!(round_robin.instance(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_typed_error_and_leaves_no_node() {
    let zk = Zk::start("discovery-bad").await;
    let (raw, session) = (zk.raw().await, zk.session().await);
    let err = ZkServiceDiscovery::new(&session, "no-slash").unwrap_err();
    assert!(matches!(err, Error::InvalidPath { .. }), "{err:?}");
    let discovery = ZkServiceDiscovery::new(&session, BASE).unwrap();
    for (name, id) in [
        ("", "a"),
        ("a/b", "a"),
        ("..", "a"),
        ("s", ""),
        ("s", "x/y"),
        ("s", "."),
    ] {
        let err = discovery
            .register(&ServiceInstance::new(name, id))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidInstance { .. }),
            "{name:?}/{id:?}: {err:?}"
        );
    }
    let err = discovery.query_instances("a/b").await.unwrap_err();
    assert!(matches!(err, Error::InvalidInstance { .. }), "{err:?}");
    let mut sequential = ServiceInstance::new("s", "q");
    sequential.service_type = ServiceType::DynamicSequential;
    let err = discovery.register(&sequential).await.unwrap_err();
    assert!(matches!(err, Error::InvalidInstance { .. }), "{err:?}");
    let mut big = ServiceInstance::new("s", "big");
    big.payload = Some(json!("x".repeat(2 << 20)));
    let err = discovery.register(&big).await.unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err:?}");

    // An id another session holds: refused with whose it is; theirs untouched.
    let other = zk.session().await;
    let theirs = ZkServiceDiscovery::new(&other, BASE)
        .unwrap()
        .register(&ServiceInstance::new("s", "taken"))
        .await
        .unwrap();
    let before = raw.get_data(&format!("{BASE}/s/taken")).await.unwrap();
    let err = within(
        "refused",
        30,
        discovery.register(&ServiceInstance::new("s", "taken")),
    )
    .await
    .unwrap_err();
    match err {
        Error::MemberIdTaken { session_id, .. } => {
            assert_eq!(session_id, other.session_id().unwrap())
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        raw.get_data(&format!("{BASE}/s/taken")).await.unwrap(),
        before
    );
    // A node of no instance JSON in the directory: left out of queries, an error when asked
    // for by id.
    raw.create(
        &format!("{BASE}/s/junk"),
        b"not json",
        &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let ids: Vec<String> = discovery
        .query_instances("s")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(ids, ["taken"]);
    let err = discovery.query_instance("s", "junk").await.unwrap_err();
    assert!(matches!(err, Error::InvalidInstance { .. }), "{err:?}");
    raw.delete(&format!("{BASE}/s/junk"), None).await.unwrap();
    drop(theirs);
    wait_deleted(&raw, &format!("{BASE}/s/taken")).await;
    // Nothing of the refused registrations is left.
    let left = raw
        .list_children(&format!("{BASE}/s"))
        .await
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
