//! TLS on the client port (feature `tls`): [`TlsConfig`], its translation to zookeeper-client's
//! options, and the diagnosis of a connect that failed.
//!
//! zookeeper-client (0.11) reports no TLS failure as such: a handshake that fails (a server
//! certificate signed by a CA we do not trust, a client certificate the server refuses, a plain
//! port) is a broken connection like any other, tried again until the session timeout, and
//! `connect` ends with a timeout. So when a TLS session cannot be opened within the connection
//! timeout, the session makes one TLS handshake of its own to each server of the connect string
//! with the same certificates, and names what failed: [`Error::TlsUntrustedServer`],
//! [`Error::TlsClientCertRefused`] or [`Error::TlsHandshake`]. A TLS 1.3 server refuses a client
//! certificate only after the client has finished its part of the handshake, so the probe also
//! sends the four-letter word `srvr` and reads the answer (or the server's alert).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{AlertDescription, ClientConfig, RootCertStore};
use zookeeper_client as zk;

use crate::error::{Error, Result};

/// TLS settings of a [`SessionOptions`](crate::SessionOptions) (feature `tls`): the CA
/// certificates that sign the servers' certificates and, for servers that require one
/// (`ssl.clientAuth=need`, ZooKeeper's default), a client certificate and its key. Everything
/// is PEM; the files are read (and checked) when the value is made, not at connect time.
///
/// The servers' certificates must name the hosts as the connect string does (a DNS name, or
/// an IP address for `127.0.0.1:2281`): host names are verified.
///
/// ```
/// # fn demo(ca: &str, cert: &str, key: &str) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::{SessionOptions, TlsConfig};
///
/// let tls = TlsConfig::new(ca)?.with_client_cert(cert, key)?;
/// // Every host of the connect string speaks TLS (`tcp://host:port` would be plaintext).
/// let opts = SessionOptions::new("zk1:2281,zk2:2281,zk3:2281/app").tls(tls);
/// # let _ = opts; Ok(()) }
/// ```
#[derive(Clone)]
pub struct TlsConfig {
    ca_pem: String,
    client: Option<(String, String)>,
    /// The probe's configuration, checked when the value was made.
    probe: Arc<ClientConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("client_cert", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidTls {
        reason: reason.into(),
    }
}

fn read_file(what: &str, path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        invalid(format!(
            "cannot read the {what} file {}: {e}",
            path.display()
        ))
    })
}

fn certificates(what: &str, pem: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("the {what} is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(format!(
            "no certificate (-----BEGIN CERTIFICATE-----) in the {what} PEM"
        )));
    }
    Ok(certs)
}

impl TlsConfig {
    /// TLS trusting the CA certificates in `ca_pem` (one or more `BEGIN CERTIFICATE` blocks).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTls`] when `ca_pem` holds no usable CA certificate.
    ///
    /// ```
    /// let err = zk_recipes::TlsConfig::new("not a certificate").unwrap_err();
    /// assert!(matches!(err, zk_recipes::Error::InvalidTls { .. }));
    /// ```
    pub fn new(ca_pem: impl Into<String>) -> Result<TlsConfig> {
        let ca_pem = ca_pem.into();
        let probe = probe_config(&ca_pem, None)?;
        Ok(TlsConfig {
            ca_pem,
            client: None,
            probe,
        })
    }

    /// [`new`](Self::new) with the CA certificates read from a PEM file.
    ///
    /// ```
    /// let err = zk_recipes::TlsConfig::from_ca_file("/nonexistent/ca.pem").unwrap_err();
    /// assert!(err.to_string().contains("/nonexistent/ca.pem"));
    /// ```
    pub fn from_ca_file(path: impl AsRef<Path>) -> Result<TlsConfig> {
        TlsConfig::new(read_file("CA", path.as_ref())?)
    }

    /// Presents this client certificate (`cert_pem`: the certificate, then any intermediate
    /// CA certificates) with its private key (`key_pem`: PKCS#8, PKCS#1 or SEC1, unencrypted).
    /// A server with `ssl.clientAuth=need` (ZooKeeper's default) refuses clients without one;
    /// its `x509` authentication then knows the session by the certificate's subject.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTls`] when either is not valid PEM, or the key does not belong to the
    /// certificate.
    ///
    /// ```
    /// # fn demo(tls: zk_recipes::TlsConfig, cert: &str, key: &str) -> Result<(), zk_recipes::Error> {
    /// let tls = tls.with_client_cert(cert, key)?;
    /// # let _ = tls; Ok(()) }
    /// ```
    pub fn with_client_cert(
        mut self,
        cert_pem: impl Into<String>,
        key_pem: impl Into<String>,
    ) -> Result<TlsConfig> {
        let client = (cert_pem.into(), key_pem.into());
        self.probe = probe_config(&self.ca_pem, Some(&client))?;
        self.client = Some(client);
        Ok(self)
    }

    /// [`with_client_cert`](Self::with_client_cert) with both read from PEM files.
    ///
    /// ```
    /// # fn demo(tls: zk_recipes::TlsConfig) -> Result<(), zk_recipes::Error> {
    /// let tls = tls.with_client_cert_files("/etc/zk/client.pem", "/etc/zk/client.key")?;
    /// # let _ = tls; Ok(()) }
    /// ```
    pub fn with_client_cert_files(
        self,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsConfig> {
        let cert = read_file("client certificate", cert.as_ref())?;
        let key = read_file("client key", key.as_ref())?;
        self.with_client_cert(cert, key)
    }

    /// Whether a client certificate is presented.
    pub(crate) fn has_client_cert(&self) -> bool {
        self.client.is_some()
    }

    /// zookeeper-client's options for the same certificates.
    pub(crate) fn zk_options(&self) -> Result<zk::TlsOptions> {
        let options = zk::TlsOptions::new()
            .with_pem_ca(&self.ca_pem)
            .map_err(|e| invalid(format!("the CA: {e}")))?;
        match &self.client {
            None => Ok(options),
            Some((cert, key)) => options
                .with_pem_identity(cert, key)
                .map_err(|e| invalid(format!("the client certificate: {e}"))),
        }
    }

    /// Why TLS sessions to the servers of `hosts` (host:port, each a TLS endpoint) cannot be
    /// opened, if a handshake of our own tells, trying them in turn until `within` has passed.
    pub(crate) async fn diagnose(&self, hosts: Vec<String>, within: Duration) -> Option<Error> {
        let config = self.probe.clone();
        let client_cert = self.has_client_cert();
        let deadline = Instant::now() + within;
        let probing = tokio::task::spawn_blocking(move || {
            let mut found = None;
            for host in hosts {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match probe(config.clone(), &host, left, client_cert) {
                    // The most telling answer wins: a certificate problem over a handshake
                    // that failed for another reason.
                    Some(
                        err @ (Error::TlsUntrustedServer { .. }
                        | Error::TlsClientCertRefused { .. }),
                    ) => return Some(err),
                    Some(err) => found = found.or(Some(err)),
                    None => {}
                }
            }
            found
        });
        // The blocking probe keeps to its deadline; this only guards against a stuck pool.
        match tokio::time::timeout(within + Duration::from_secs(1), probing).await {
            Ok(Ok(found)) => found,
            _ => None,
        }
    }
}

/// Whether the host of `host:port` is a valid TLS server name (a DNS name or an IP address).
pub(crate) fn valid_server_name(host: &str) -> bool {
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(name.to_owned()).is_ok()
}

/// The process's rustls provider, or aws-lc-rs's (the one zookeeper-client's TLS builds in).
fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

/// zookeeper-client builds its TLS configuration with the process's default rustls provider,
/// which rustls cannot choose by itself when more than one is compiled in (a panic): install
/// aws-lc-rs's unless the program installed one.
pub(crate) fn ensure_provider() {
    if CryptoProvider::get_default().is_none() {
        // Another thread may have installed one meanwhile; either is fine.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

/// The probe's rustls configuration; building it checks the certificates and the key.
fn probe_config(ca_pem: &str, client: Option<&(String, String)>) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for cert in certificates("CA", ca_pem)? {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("a CA certificate is not usable: {e}")))?;
    }
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(e.to_string()))?
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let certs = certificates("client certificate", cert)?;
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| {
                invalid(format!(
                    "no usable private key in the client key PEM (PKCS#8, PKCS#1 or SEC1, unencrypted): {e}"
                ))
            })?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| invalid(format!("the client certificate and key: {e}")))?
        }
    };
    Ok(Arc::new(config))
}

/// One TLS handshake with `host` (host:port), then `srvr` and its answer: the error that
/// names what failed, or `None` if it worked or told nothing (no connection, a timeout).
fn probe(
    config: Arc<ClientConfig>,
    host: &str,
    within: Duration,
    client_cert: bool,
) -> Option<Error> {
    let server = host.to_owned();
    let (name, _) = host.rsplit_once(':')?;
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let addr = host.to_socket_addrs().ok()?.next()?;
    let tcp = TcpStream::connect_timeout(&addr, within).ok()?;
    tcp.set_read_timeout(Some(within)).ok()?;
    tcp.set_write_timeout(Some(within)).ok()?;
    let handshake = |reason: String| Error::TlsHandshake {
        server: server.clone(),
        reason,
    };
    let Ok(name) = ServerName::try_from(name.to_owned()) else {
        return Some(handshake(format!("{name:?} is no valid TLS server name")));
    };
    let connection = match rustls::ClientConnection::new(config, name) {
        Ok(connection) => connection,
        Err(e) => return Some(handshake(e.to_string())),
    };
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    let mut answer = [0u8; 64];
    let outcome = tls
        .write_all(b"srvr")
        .and_then(|()| tls.flush())
        .and_then(|()| tls.read(&mut answer));
    match outcome {
        Ok(n) if n > 0 => None,
        Ok(_) => Some(handshake(
            "the server closed the connection without a word (is this its secureClientPort?)"
                .to_owned(),
        )),
        Err(e) => classify(&server, &e, client_cert),
    }
}

/// What an I/O error of the probe says.
fn classify(server: &str, err: &std::io::Error, client_cert: bool) -> Option<Error> {
    use std::io::ErrorKind;
    let server = server.to_owned();
    let Some(tls) = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    else {
        return match err.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => None,
            ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
                Some(Error::TlsHandshake {
                    server,
                    reason: format!(
                        "the server closed the connection during the handshake ({err}; is this its secureClientPort?)"
                    ),
                })
            }
            _ => None,
        };
    };
    match tls {
        rustls::Error::InvalidCertificate(cert) => Some(Error::TlsUntrustedServer {
            server,
            reason: cert.to_string(),
        }),
        rustls::Error::AlertReceived(alert) if refuses_certificate(*alert, client_cert) => {
            Some(Error::TlsClientCertRefused {
                server,
                reason: match client_cert {
                    true => format!("the server answered with the alert {alert:?}"),
                    false => format!(
                        "the server answered with the alert {alert:?}; it wants a client \
                         certificate and we presented none"
                    ),
                },
            })
        }
        other => Some(Error::TlsHandshake {
            server,
            reason: other.to_string(),
        }),
    }
}

/// Whether an alert from the server is its refusal of our certificate (or of its absence).
fn refuses_certificate(alert: AlertDescription, client_cert: bool) -> bool {
    use AlertDescription as A;
    match alert {
        A::BadCertificate
        | A::UnsupportedCertificate
        | A::CertificateRevoked
        | A::CertificateExpired
        | A::CertificateUnknown
        | A::UnknownCA
        | A::AccessDenied
        | A::CertificateRequired => true,
        // TLS 1.2 servers say only this when a required certificate is missing.
        A::HandshakeFailure => !client_cert,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_pem_without_certificates() {
        for bad in [
            "",
            "hello",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        ] {
            let err = TlsConfig::new(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidTls { .. }), "{bad:?}: {err}");
        }
    }

    #[test]
    fn server_names_are_dns_names_or_addresses() {
        assert!(valid_server_name("zk1.example.com:2281"));
        assert!(valid_server_name("127.0.0.1:2281"));
        assert!(valid_server_name("[::1]:2281"));
        assert!(!valid_server_name("zk_1 bad:2281"));
    }

    #[test]
    fn alerts_about_certificates_are_refusals() {
        assert!(refuses_certificate(AlertDescription::BadCertificate, true));
        assert!(refuses_certificate(
            AlertDescription::CertificateRequired,
            false
        ));
        assert!(refuses_certificate(
            AlertDescription::HandshakeFailure,
            false
        ));
        assert!(!refuses_certificate(
            AlertDescription::HandshakeFailure,
            true
        ));
        assert!(!refuses_certificate(
            AlertDescription::ProtocolVersion,
            true
        ));
    }

    #[test]
    fn an_untrusted_certificate_is_named() {
        let err = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert!(matches!(
            classify("zk1:2281", &err, true),
            Some(Error::TlsUntrustedServer { .. })
        ));
        let timeout = std::io::Error::from(std::io::ErrorKind::WouldBlock);
        assert!(classify("zk1:2281", &timeout, true).is_none());
    }
}
