//! [`TestCa`]: certificates made in the test, for servers started
//! [`with_tls`](crate::ServerOptions::with_tls) and for their clients.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate authority made in the test (an ECDSA P-256 key, never written to disk), that
/// signs server and client certificates. Two `TestCa`s never trust each other's certificates,
/// which is how a test makes an untrusted server or a refused client.
///
/// ```
/// use zk_testcontainers::TestCa;
///
/// let ca = TestCa::new("zk-recipes test CA");
/// let server = ca.server_cert(&["127.0.0.1", "localhost"]);
/// let client = ca.client_cert("worker-1");
/// assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
/// assert!(server.keystore_pem().contains("PRIVATE KEY"));
/// assert!(client.cert_pem.contains("CERTIFICATE"));
/// ```
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// A certificate and its private key, both PEM (the key in PKCS#8).
///
/// ```
/// let cert = zk_testcontainers::TestCa::new("ca").client_cert("worker");
/// assert!(cert.key_pem.contains("BEGIN PRIVATE KEY"));
/// ```
#[derive(Clone)]
pub struct TestCert {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for TestCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCert")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl TestCert {
    /// The key followed by the certificate: ZooKeeper's PEM key store
    /// (`ssl.keyStore.type=PEM`), as [`ServerTls::new`](crate::ServerTls::new) takes it.
    ///
    /// ```
    /// let cert = zk_testcontainers::TestCa::new("ca").server_cert(&["127.0.0.1"]);
    /// assert!(cert.keystore_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
    /// ```
    pub fn keystore_pem(&self) -> String {
        format!("{}{}", self.key_pem, self.cert_pem)
    }
}

fn key() -> KeyPair {
    KeyPair::generate().expect("an ECDSA P-256 key")
}

impl TestCa {
    /// A new CA whose certificate's common name is `name`.
    ///
    /// ```
    /// let ca = zk_testcontainers::TestCa::new("test CA");
    /// # let _ = ca;
    /// ```
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = key();
        let cert = params
            .self_signed(&key)
            .expect("a self-signed CA certificate");
        TestCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate (PEM): what a client trusts, or a server's trust store.
    ///
    /// ```
    /// let ca = zk_testcontainers::TestCa::new("test CA");
    /// assert!(ca.cert_pem().contains("CERTIFICATE"));
    /// ```
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A server certificate for `names` (host names or IP addresses, as clients name the
    /// server in their connect strings: `127.0.0.1` for the harness's servers).
    ///
    /// ```
    /// let ca = zk_testcontainers::TestCa::new("test CA");
    /// let cert = ca.server_cert(&["127.0.0.1", "localhost"]);
    /// # let _ = cert;
    /// ```
    pub fn server_cert(&self, names: &[&str]) -> TestCert {
        let names = names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).expect("valid server names");
        params
            .distinguished_name
            .push(DnType::CommonName, "zookeeper");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate whose subject is `CN={common_name}` (ZooKeeper's `x509`
    /// identity of a client that presents it is that distinguished name).
    ///
    /// ```
    /// let ca = zk_testcontainers::TestCa::new("test CA");
    /// let cert = ca.client_cert("worker-1");
    /// # let _ = cert;
    /// ```
    pub fn client_cert(&self, common_name: &str) -> TestCert {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> TestCert {
        let key = key();
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a certificate signed by the test CA");
        TestCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}
