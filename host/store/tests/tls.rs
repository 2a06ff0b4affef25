//! TLS configuration faults of a database URL are refused at once with
//! their cause and a next step (`database.tls`), never taken for an outage
//! and waited out: a server without TLS while the URL says
//! `sslmode=require`, a certificate from an unknown issuer, a certificate
//! for another host, a private root that holds no certificate. Against a
//! fake PostgreSQL endpoint that answers the SSLRequest and does the TLS
//! handshake (rustls, with the certificates of `tests/tls/`), so no
//! PostgreSQL is needed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;

use coordinator_runtime::config::{PoolingMode, SecretRef};
use coordinator_store::servers::{check_trusted_root, Access, ServerList};
use coordinator_store::{DatabaseError, ErrorKind};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name),
    )
    .expect("test certificate")
}

/// How the fake endpoint answers the SSLRequest.
enum Answer {
    /// `N`: no TLS here.
    NoTls,
    /// `S`, then a TLS handshake presenting this certificate; the
    /// connection is closed once the handshake ends.
    Certificate(&'static str),
}

/// A fake PostgreSQL endpoint on 127.0.0.1 answering every connection
/// with `answer`, until the test ends.
fn fake_postgres(answer: Answer) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    let config = match answer {
        Answer::NoTls => None,
        Answer::Certificate(file) => {
            let chain = vec![CertificateDer::from_pem_slice(&fixture(file)).expect("certificate")];
            let key = PrivateKeyDer::from_pem_slice(&fixture("server-key.pem")).expect("key");
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .expect("server config");
            Some(Arc::new(config))
        }
    };
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut ssl_request = [0u8; 8];
            if stream.read_exact(&mut ssl_request).is_err() {
                continue;
            }
            let Some(config) = &config else {
                let _ = stream.write_all(b"N");
                continue;
            };
            let _ = stream.write_all(b"S");
            let Ok(mut tls) = rustls::ServerConnection::new(config.clone()) else {
                continue;
            };
            while tls.is_handshaking() {
                if tls.complete_io(&mut stream).is_err() {
                    break;
                }
            }
            // Handshake done (or refused by the client): hang up.
        }
    });
    address
}

fn reference() -> SecretRef {
    SecretRef("secret:file/runtime-database-url".into())
}

/// The first usable server of `postgres://…@{host}:{port}/db?sslmode=require`
/// with `root` as the private root.
async fn connect(address: SocketAddr, root: Option<&[u8]>) -> DatabaseError {
    let url = format!(
        "postgres://coordinator_runtime:pw@{}:{}/coordinator?sslmode=require",
        address.ip(),
        address.port()
    );
    let list = ServerList::parse(&url, &reference(), root, PoolingMode::Session).expect("url");
    list.first_usable(Access::Read)
        .await
        .expect_err("the fake endpoint never logs in")
}

fn assert_tls_fault(e: &DatabaseError, cause: &str, next: &str) {
    assert_eq!(
        (e.kind, e.code),
        (ErrorKind::Refused, "database.tls"),
        "{e:?}"
    );
    assert!(e.message.contains(cause), "{e:?}");
    assert!(e.message.contains("127.0.0.1:"), "names the server: {e:?}");
    assert!(e.next.contains(next), "{e:?}");
    assert!(!e.message.contains(":pw@"), "{e:?}");
}

#[tokio::test]
async fn a_server_without_tls_is_a_configuration_fault() {
    let e = connect(fake_postgres(Answer::NoTls), None).await;
    assert_tls_fault(&e, "does not accept TLS", "ssl = on");
}

#[tokio::test]
async fn a_certificate_from_an_unknown_issuer_is_a_configuration_fault() {
    let e = connect(fake_postgres(Answer::Certificate("server-ip.pem")), None).await;
    assert_tls_fault(
        &e,
        "not signed by a trusted root",
        "trustedRootCertificateRef",
    );
}

#[tokio::test]
async fn a_certificate_for_another_host_is_a_configuration_fault() {
    let root = fixture("ca.pem");
    let e = connect(
        fake_postgres(Answer::Certificate("server-name.pem")),
        Some(&root),
    )
    .await;
    assert_tls_fault(&e, "is not valid for `127.0.0.1`", "subjectAltName");
}

/// The contrast: with the right root and name the handshake succeeds, and
/// a server that then hangs up is an outage, waited out as before.
#[tokio::test]
async fn after_a_good_handshake_a_lost_connection_is_still_an_outage() {
    let root = fixture("ca.pem");
    let e = connect(
        fake_postgres(Answer::Certificate("server-ip.pem")),
        Some(&root),
    )
    .await;
    assert_eq!(
        (e.kind, e.code),
        (ErrorKind::Unavailable, "store-unavailable"),
        "{e:?}"
    );
}

#[test]
fn a_private_root_that_holds_no_certificate_is_refused() {
    let r = SecretRef("secret:file/database-root.pem".into());
    check_trusted_root(&fixture("ca.pem"), &r).expect("a root");
    for (pem, why) in [
        (&b""[..], "is empty"),
        (&b" \n"[..], "is empty"),
        (&b"not a certificate\n"[..], "holds no PEM certificate"),
        (
            &b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"[..],
            "does not read",
        ),
    ] {
        let e = check_trusted_root(pem, &r).expect_err(why);
        assert_eq!((e.kind, e.code), (ErrorKind::Refused, "database.tls"));
        assert!(e.message.contains(why), "{e:?}");
        assert!(e.message.contains("database-root.pem"), "{e:?}");
    }
}
