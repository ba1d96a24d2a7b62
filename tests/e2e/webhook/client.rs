//! A small HTTPS client for the webhook tests and the load bench
//! (`host/benches/webhook_load.rs` includes this file): hyper's HTTP/1.1
//! client over tokio-rustls (ring), one keep-alive connection per
//! [`Client`], trusting one self-signed certificate made with rcgen.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A self-signed certificate for `localhost` and `127.0.0.1`.
pub struct TestCert {
    /// Certificate, PEM.
    pub cert_pem: String,
    /// Private key, PEM.
    pub key_pem: String,
    /// Certificate, DER (the client's trust anchor).
    pub cert_der: Vec<u8>,
}

/// Make a fresh self-signed certificate.
pub fn test_cert() -> TestCert {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("rcgen makes a self-signed certificate");
    TestCert {
        cert_pem: certified.cert.pem(),
        key_pem: certified.signing_key.serialize_pem(),
        cert_der: certified.cert.der().to_vec(),
    }
}

/// A client configuration that trusts only `cert_der`.
pub fn client_config(cert_der: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(cert_der.to_vec()))
        .expect("the test certificate is a valid trust anchor");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("default TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// Open a TLS connection to the server (name `localhost`).
pub async fn tls_connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from("localhost")?;
    TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .context("TLS handshake")
}

/// One keep-alive HTTPS connection.
pub struct Client {
    sender: SendRequest<Full<Bytes>>,
}

/// A response: status, content type, body.
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: String,
    /// Body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("response is not JSON ({e}): {}", self.text()))
    }
}

impl Client {
    /// Connect and complete the TLS and HTTP/1.1 handshakes.
    pub async fn connect(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Result<Client> {
        let stream = tls_connect(addr, config).await?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP/1.1 handshake")?;
        tokio::spawn(async move {
            // Ends when the server closes the connection or the client is dropped.
            let _ = connection.await;
        });
        Ok(Client { sender })
    }

    /// POST `body` to `path` with `content_type`.
    pub async fn post(&mut self, path: &str, content_type: &str, body: Vec<u8>) -> Result<Reply> {
        let request = hyper::Request::post(path)
            .header("host", "localhost")
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)))?;
        self.send(request).await
    }

    /// POST a JSON value as `application/json`.
    pub async fn post_json(&mut self, path: &str, value: &serde_json::Value) -> Result<Reply> {
        self.post(path, "application/json", serde_json::to_vec(value)?)
            .await
    }

    /// GET `path`.
    pub async fn get(&mut self, path: &str) -> Result<Reply> {
        let request = hyper::Request::get(path)
            .header("host", "localhost")
            .body(Full::new(Bytes::new()))?;
        self.send(request).await
    }

    async fn send(&mut self, request: hyper::Request<Full<Bytes>>) -> Result<Reply> {
        self.sender
            .ready()
            .await
            .map_err(|e| anyhow!("connection not ready: {e}"))?;
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = response.into_body().collect().await?.to_bytes().to_vec();
        Ok(Reply {
            status,
            content_type,
            body,
        })
    }
}
