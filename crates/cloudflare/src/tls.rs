//! TLS of the Cloudflare API client. Its trust roots are Mozilla's set compiled into the binary
//! (`webpki-roots`), never the host's CA bundle: the operator image is FROM scratch and has no
//! `/etc/ssl`, and a bundle mounted by someone else cannot widen whom the client trusts.
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

use super::error::CloudflareError;

/// The roots the client trusts: exactly the compiled-in set.
pub(crate) fn compiled_in_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// The rustls configuration of the default HTTP transport: ring, TLS 1.2/1.3, the compiled-in
/// roots, and ALPN for HTTP/2 with HTTP/1.1 as fallback (reqwest does not add ALPN to a
/// configuration it is given).
pub(crate) fn client_tls_config() -> Result<ClientConfig, CloudflareError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CloudflareError::InvalidInput(format!("cannot configure TLS: {e}")))?
        .with_root_certificates(compiled_in_roots())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn trust_store_is_the_compiled_in_set_with_the_roots_of_cloudflare_certificates() {
        let store = compiled_in_roots();
        assert_eq!(store.len(), webpki_roots::TLS_SERVER_ROOTS.len());
        assert!(store.len() > 100, "only {} roots", store.len());
        // Cloudflare's edge certificates (api.cloudflare.com included) chain to these CAs.
        for name in ["GTS Root R4", "ISRG Root X1", "GlobalSign"] {
            assert!(
                store
                    .roots
                    .iter()
                    .any(|anchor| contains(anchor.subject.as_ref(), name.as_bytes())),
                "no compiled-in root named {name}"
            );
        }
    }

    #[test]
    fn client_config_offers_h2_then_http1() {
        let config = client_tls_config().unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }
}
