//! The admin API's TLS certificates, as both ends judge them: which certificate the host may
//! serve, and which a verb trusts with `--admin-ca FILE`.
//!
//! **Served.** A certificate must name at least one of the names clients reach the API by (its
//! IP address, `localhost` on loopback, each `--admin-host` name) in its `subjectAltName`: TLS
//! clients, the verbs included, no longer read a certificate's CN, so one naming none of them
//! could be reached by nobody. The host refuses it at start, saying so and giving the `openssl`
//! line that makes a usable one.
//!
//! **Trusted.** The certificates in `--admin-ca FILE` are roots, as usual, and each is also
//! pinned: a server presenting exactly one of them is trusted when the certificate is within
//! its validity and names the host the URL names, whatever its basic constraints say. So the
//! self-signed certificate a plain `openssl req -x509` makes (which marks itself a CA, as
//! OpenSSL's default configuration does) is trusted given as itself, as it is served. The
//! handshake's signature is checked as always: the server holds the certificate's key. A
//! pinned certificate that marks itself a CA is not judged by its extended key usage (webpki
//! stops at its basic constraints, after its validity): the operator named that very
//! certificate. On a wildcard address without `--admin-host` the host knows no name to judge a
//! served certificate by, and asks only that it name some host.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The `openssl` command that makes a self-signed certificate (and its key) for `names`,
/// valid for a year: what a refusal of a served certificate suggests.
pub(crate) fn openssl_line(names: &[String]) -> String {
    let alt_names: Vec<String> = names
        .iter()
        .map(|name| match name.parse::<std::net::IpAddr>() {
            Ok(_) => format!("IP:{name}"),
            Err(_) => format!("DNS:{name}"),
        })
        .collect();
    let common = names
        .iter()
        .find(|name| name.parse::<std::net::IpAddr>().is_err())
        .or(names.first())
        .map_or("localhost", String::as_str);
    format!(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
         -subj /CN={common} -addext subjectAltName={} -keyout key.pem -out cert.pem",
        alt_names.join(",")
    )
}

/// Whether the certificate `leaf` names at least one of `names` (host names or IP
/// addresses); with no names to judge by (a wildcard address and no `--admin-host`),
/// whether it names anything at all.
///
/// # Errors
/// Why not, one line, with the `openssl` line that makes a certificate that does.
pub(crate) fn check_names(leaf: &CertificateDer<'_>, names: &[String]) -> Result<(), String> {
    let cert = webpki::EndEntityCert::try_from(leaf)
        .map_err(|error| format!("the certificate cannot be read: {error:?}"))?;
    let names_one = names.iter().any(|name| {
        ServerName::try_from(name.as_str())
            .is_ok_and(|server| cert.verify_is_valid_for_subject_name(&server).is_ok())
    });
    if names_one || (names.is_empty() && cert.valid_dns_names().next().is_some()) {
        return Ok(());
    }
    let wanted = if names.is_empty() {
        vec!["localhost".to_owned()]
    } else {
        names.to_vec()
    };
    Err(format!(
        "it names none of the names clients reach this admin API by ({}) in its \
         subjectAltName, and TLS clients (the ruststream verbs too) no longer read the CN: no \
         client could verify it; make one that does with `{}`",
        if names.is_empty() {
            "none given: list them with --admin-host".to_owned()
        } else {
            names.join(", ")
        },
        openssl_line(&wanted)
    ))
}

/// Trusts the certificates an operator gave (`--admin-ca`): as roots, and each pinned, so a
/// server presenting one of them is trusted as that certificate whatever its basic
/// constraints (see the module's documentation).
#[derive(Debug)]
pub struct GivenCertificates {
    roots: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl GivenCertificates {
    /// Trusts `certificates`, verifying signatures with `provider`'s algorithms.
    ///
    /// # Errors
    /// A certificate that cannot be a root (what rustls says, one line), or none given.
    pub fn new(
        certificates: Vec<CertificateDer<'static>>,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        for certificate in &certificates {
            roots
                .add(certificate.clone())
                .map_err(|error| error.to_string())?;
        }
        let roots = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|error| error.to_string())?;
        Ok(Self {
            roots,
            pinned: certificates,
            algorithms: provider.signature_verification_algorithms,
        })
    }

    /// Whether `end_entity`, one of the pinned certificates, is valid now and for
    /// `server_name`. Its basic constraints alone do not refuse it: webpki checks a
    /// certificate's validity before its basic constraints, so `CaUsedAsEndEntity` is the
    /// verdict on a certificate in its validity that marks itself a CA.
    fn pinned_holds(
        &self,
        end_entity: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> bool {
        let (Ok(cert), Ok(anchor)) = (
            webpki::EndEntityCert::try_from(end_entity),
            webpki::anchor_from_trusted_cert(end_entity),
        ) else {
            return false;
        };
        let anchors = [anchor];
        let path = cert.verify_for_usage(
            self.algorithms.all,
            &anchors,
            &[],
            now,
            webpki::KeyUsage::server_auth(),
            None,
            None,
        );
        let usable = matches!(path, Ok(_) | Err(webpki::Error::CaUsedAsEndEntity));
        usable && cert.verify_is_valid_for_subject_name(server_name).is_ok()
    }
}

impl ServerCertVerifier for GivenCertificates {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.roots.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        let pinned = self.pinned.iter().any(|pin| pin == end_entity);
        match verified {
            Err(_) if pinned && self.pinned_holds(end_entity, server_name, now) => {
                Ok(ServerCertVerified::assertion())
            }
            // A certificate marking itself a CA is refused for that before its issuer is
            // looked for; not pinned, what matters is that none of those given issued it.
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(other)))
                if !pinned
                    && matches!(
                        other.0.downcast_ref::<webpki::Error>(),
                        Some(webpki::Error::CaUsedAsEndEntity)
                    ) =>
            {
                Err(CertificateError::UnknownIssuer.into())
            }
            // Any other refusal is the roots' own, which says why.
            verified => verified,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.roots.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.roots.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.roots.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rustls::pki_types::pem::PemObject as _;

    use super::*;

    /// Certificates made with OpenSSL for these tests (see `testdata/README.md`).
    fn certificate(name: &str) -> CertificateDer<'static> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/admin/testdata")
            .join(name);
        CertificateDer::from_pem_file(&path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
    }

    fn verifier(pem: &str) -> GivenCertificates {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        GivenCertificates::new(vec![certificate(pem)], &provider).expect("a verifier")
    }

    fn verify(
        verifier: &GivenCertificates,
        served: &str,
        name: &str,
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let name = ServerName::try_from(name.to_owned()).expect("a name");
        verifier.verify_server_cert(&certificate(served), &[], &name, &[], now)
    }

    /// Within every test certificate's validity (100 years from when they were made).
    fn today() -> UnixTime {
        UnixTime::now()
    }

    #[test]
    fn a_self_signed_certificate_marked_ca_is_trusted_given_as_itself() {
        let trusts = verifier("req-x509.pem");
        for name in ["localhost", "127.0.0.1"] {
            verify(&trusts, "req-x509.pem", name, today())
                .unwrap_or_else(|error| panic!("{name}: {error}"));
        }
        // Pinned is not blind: the name, the validity and the certificate itself still count.
        let wrong_name = verify(&trusts, "req-x509.pem", "admin.example", today());
        assert!(wrong_name.is_err(), "{wrong_name:?}");
        let in_2200 = UnixTime::since_unix_epoch(Duration::from_secs(7_258_118_400));
        let expired = verify(&trusts, "req-x509.pem", "localhost", in_2200);
        assert!(
            matches!(
                expired,
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::ExpiredContext { .. }
                ))
            ),
            "{expired:?}"
        );
        let other = verify(&trusts, "other-req-x509.pem", "localhost", today());
        assert!(
            matches!(
                other,
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::UnknownIssuer
                ))
            ),
            "{other:?}"
        );
    }

    #[test]
    fn a_served_certificate_must_name_how_clients_reach_it() {
        let names = ["127.0.0.1".to_owned(), "localhost".to_owned()];
        check_names(&certificate("req-x509.pem"), &names).expect("names both");
        let error = check_names(&certificate("no-san.pem"), &names).expect_err("no SAN");
        assert!(
            error.starts_with(
                "it names none of the names clients reach this admin API by (127.0.0.1, \
                 localhost) in its subjectAltName"
            ),
            "{error}"
        );
        assert!(
            error.ends_with(
                "`openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days \
                 365 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
                 -keyout key.pem -out cert.pem`"
            ),
            "{error}"
        );
        let admin = ["admin.example".to_owned()];
        assert!(check_names(&certificate("req-x509.pem"), &admin).is_err());
        check_names(&certificate("req-x509.pem"), &[]).expect("names something");
        assert!(check_names(&certificate("no-san.pem"), &[]).is_err());
    }
}
