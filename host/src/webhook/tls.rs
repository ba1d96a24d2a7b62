//! TLS for the webhook: a rustls server configuration (ring provider, TLS
//! 1.2 and 1.3, HTTP/1.1 by ALPN) from a PEM certificate chain and key, as
//! a Kubernetes TLS secret holds them (`tls.crt`, `tls.key`).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A server configuration from PEM text: the certificate chain (leaf first)
/// and its private key (PKCS#8, PKCS#1 or SEC1).
pub fn server_config_from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("reading the certificate PEM: {e}"))?;
    if chain.is_empty() {
        bail!("no CERTIFICATE block in the certificate PEM");
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| anyhow!("reading the private key PEM: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("TLS protocol versions: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| anyhow!("the certificate and key do not make a TLS identity: {e}"))?;
    // The server speaks HTTP/1.1 only; say so, so that the API server does
    // not try h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// A server configuration from PEM files (`--tls-cert`, `--tls-key`).
pub fn server_config_from_files(cert: &Path, key: &Path) -> Result<ServerConfig> {
    let cert_pem = std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?;
    let key_pem = std::fs::read(key).with_context(|| format!("reading {}", key.display()))?;
    server_config_from_pem(&cert_pem, &key_pem)
        .with_context(|| format!("{} / {}", cert.display(), key.display()))
}
