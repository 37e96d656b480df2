//! TLS on the client port against a real ZooKeeper (a `secureClientPort` served by Netty, with
//! certificates made here): a lock and an election over TLS, with `TCP_NODELAY` on the TLS
//! connection; and every way a handshake fails (a server certificate from a CA the client does
//! not trust, a client certificate from a CA the server does not trust, no client certificate
//! where the server requires one, TLS to the plain port) ends `Session::connect` with its own
//! typed error, in bounded time.
#![cfg(feature = "tls")]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::sockets::nodelay_of_connections_to;
use support::within;
use zk_recipes::{
    Error, LossReason, Session, SessionOptions, TlsConfig, ZkLeaderElection, ZkMutex,
};
use zk_testcontainers::{
    expire_session, scaled, ServerOptions, ServerTls, TestCa, TestCert, ZkServer,
};

/// A server whose TLS port requires client certificates signed by `ca` (ZooKeeper's default,
/// `ssl.clientAuth=need`), or `None` (printed) where the test cannot start one.
async fn tls_server(ca: &TestCa) -> Option<ZkServer> {
    if let Some(reason) = zk_testcontainers::ensemble_unavailable_reason() {
        println!("not run: {reason}");
        return None;
    }
    support::init_tracing();
    let cert = ca.server_cert(&["127.0.0.1", "localhost"]);
    let opts =
        ServerOptions::default().with_tls(ServerTls::new(cert.keystore_pem(), ca.cert_pem()));
    Some(
        ZkServer::start_with(opts)
            .await
            .expect("a server with a TLS port"),
    )
}

fn options(server: &ZkServer, tls: TlsConfig) -> SessionOptions {
    SessionOptions::new(server.secure_connect_string().unwrap())
        .session_timeout(Duration::from_secs(4))
        .connection_timeout(scaled(Duration::from_secs(10)))
        .tls(tls)
}

fn trusting(ca: &TestCa, client: &TestCert) -> TlsConfig {
    TlsConfig::new(ca.cert_pem())
        .unwrap()
        .with_client_cert(&client.cert_pem, &client.key_pem)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_and_an_election_work_over_tls() {
    let ca = TestCa::new("zk-recipes test CA");
    let Some(server) = tls_server(&ca).await else {
        return;
    };
    let a = Session::connect(options(&server, trusting(&ca, &ca.client_cert("worker-a"))))
        .await
        .unwrap();
    // The explicit form of the same: `tcp+tls://`.
    let explicit = format!("tcp+tls://{}", server.secure_connect_string().unwrap());
    let b = Session::connect(
        SessionOptions::new(explicit)
            .connection_timeout(scaled(Duration::from_secs(10)))
            .tls(trusting(&ca, &ca.client_cert("worker-b"))),
    )
    .await
    .unwrap();
    let port: SocketAddr = server.secure_connect_string().unwrap().parse().unwrap();
    assert_eq!(
        nodelay_of_connections_to(port),
        [true, true],
        "both TLS connections have TCP_NODELAY"
    );

    let (mutex_a, mutex_b) = (
        ZkMutex::new(&a, "/tls/lock").unwrap(),
        ZkMutex::new(&b, "/tls/lock").unwrap(),
    );
    let held = within("a's lock", 30, mutex_a.lock()).await.unwrap();
    assert!(mutex_b.try_lock().await.unwrap().is_none(), "a holds it");
    let waiting = tokio::spawn(async move { mutex_b.lock().await });
    let first = held.token();
    held.release().await.unwrap();
    let next = within("b's lock after a's release", 30, waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(next.token() > first, "tokens grow over TLS as anywhere");
    next.release().await.unwrap();

    let (elect_a, elect_b) = (
        ZkLeaderElection::new(&a, "/tls/election", "a").unwrap(),
        ZkLeaderElection::new(&b, "/tls/election", "b").unwrap(),
    );
    let leading = within("a's campaign", 30, elect_a.campaign())
        .await
        .unwrap();
    assert!(elect_b.try_campaign().await.unwrap().is_none(), "a leads");
    let campaign_b = tokio::spawn(async move { elect_b.campaign().await });
    let term = leading.term();
    leading.release().await.unwrap();
    let b_leads = within("b elected after a resigned", 30, campaign_b)
        .await
        .unwrap()
        .unwrap();
    assert!(b_leads.term() > term);
    b_leads.release().await.unwrap();

    // A session made over TLS is expired through the plain port; its lock reports the loss.
    let mutex_a = ZkMutex::new(&a, "/tls/lock").unwrap();
    let held = within("a's lock again", 30, mutex_a.lock()).await.unwrap();
    let info = a.client().await.unwrap().session().clone();
    let tls_only = format!("tcp+tls://{}", server.secure_connect_string().unwrap());
    assert!(
        expire_session(&tls_only, &info).await.is_err(),
        "expire_session refuses a TLS-only connect string"
    );
    expire_session(&server.connect_string(), &info)
        .await
        .unwrap();
    assert_eq!(
        within("a's lock reported lost", 30, held.lost()).await,
        LossReason::SessionExpired
    );
    a.close().await;
    b.close().await;
}

/// Connects with `tls` to `connect`; the error, and how long it took.
async fn refused(connect: String, tls: TlsConfig, timeout: Duration) -> (Error, Duration) {
    let start = Instant::now();
    let opts = SessionOptions::new(connect)
        .connection_timeout(timeout)
        .tls(tls);
    let err = within("a refused connect", 60, Session::connect(opts))
        .await
        .expect_err("the connect must fail");
    println!("after {:?}: {err}", start.elapsed());
    (err, start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failed_handshake_is_a_typed_error_in_bounded_time() {
    let ca = TestCa::new("zk-recipes test CA");
    let Some(server) = tls_server(&ca).await else {
        return;
    };
    let other = TestCa::new("another CA");
    let secure = server.secure_connect_string().unwrap();
    let timeout = scaled(Duration::from_secs(2));
    // The connection timeout, then at most one more for the handshake that tells why.
    let bound = timeout * 2 + scaled(Duration::from_secs(2));

    // The server's certificate is signed by a CA the client does not trust.
    let (err, took) = refused(
        secure.clone(),
        trusting(&other, &other.client_cert("stranger")),
        timeout,
    )
    .await;
    assert!(matches!(err, Error::TlsUntrustedServer { .. }), "{err}");
    assert!(
        err.to_string().contains("TlsConfig"),
        "says what to fix: {err}"
    );
    assert!(took < bound, "took {took:?}");

    // The client's certificate is signed by a CA the server does not trust.
    let wrong_client = other.client_cert("stranger");
    let tls = TlsConfig::new(ca.cert_pem())
        .unwrap()
        .with_client_cert(&wrong_client.cert_pem, &wrong_client.key_pem)
        .unwrap();
    let (err, took) = refused(secure.clone(), tls, timeout).await;
    assert!(matches!(err, Error::TlsClientCertRefused { .. }), "{err}");
    assert!(took < bound, "took {took:?}");

    // No client certificate at all, where the server requires one.
    let (err, took) = refused(
        secure.clone(),
        TlsConfig::new(ca.cert_pem()).unwrap(),
        timeout,
    )
    .await;
    assert!(matches!(err, Error::TlsClientCertRefused { .. }), "{err}");
    assert!(took < bound, "took {took:?}");

    // TLS to the plain client port.
    let (err, took) = refused(
        server.connect_string(),
        trusting(&ca, &ca.client_cert("worker")),
        timeout,
    )
    .await;
    assert!(matches!(err, Error::TlsHandshake { .. }), "{err}");
    assert!(took < bound, "took {took:?}");

    // And the good certificates still work on the same server.
    let session = Session::connect(options(&server, trusting(&ca, &ca.client_cert("worker"))))
        .await
        .unwrap();
    session.close().await;
}

#[test]
fn bad_pem_is_refused_before_connecting() {
    let ca = TestCa::new("zk-recipes test CA");
    let client = ca.client_cert("worker");
    let other = ca.client_cert("other");
    assert!(matches!(
        TlsConfig::new("no certificate here"),
        Err(Error::InvalidTls { .. })
    ));
    // A key that is not the certificate's.
    let err = TlsConfig::new(ca.cert_pem())
        .unwrap()
        .with_client_cert(&client.cert_pem, &other.key_pem)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidTls { .. }), "{err}");
    let err = TlsConfig::new(ca.cert_pem())
        .unwrap()
        .with_client_cert_files("/nonexistent/client.pem", "/nonexistent/client.key")
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/client.pem"), "{err}");
}
