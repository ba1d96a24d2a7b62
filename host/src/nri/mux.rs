//! NRI's connection multiplexer: one unix socket carries several byte
//! streams ("connections"), each frame an 8-byte header (connection id,
//! payload length, both big-endian `u32`) followed by at most
//! [`MAX_PAYLOAD`] bytes. NRI runs two ttrpc connections over it: conn
//! [`PLUGIN_CONN`] carries the `Plugin` service the plugin serves, conn
//! [`RUNTIME_CONN`] the `Runtime` service the runtime serves.
//!
//! Written from the protocol as NRI v0.8.0 documents it (`pkg/net/multiplex`);
//! both sides of a connection use this module: the plugin and the test's
//! stand-in runtime.

use std::collections::HashMap;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// The connection of the `Plugin` service (served by the plugin).
pub const PLUGIN_CONN: u32 = 1;
/// The connection of the `Runtime` service (served by the runtime).
pub const RUNTIME_CONN: u32 = 2;
/// The largest payload of one frame: a ttrpc message header (10 bytes) and
/// its largest body (4 MiB).
pub const MAX_PAYLOAD: usize = 10 + (4 << 20);
const HEADER_LEN: usize = 8;
/// Buffer between a connection's user and the mux tasks.
const PIPE_BYTES: usize = 256 << 10;

/// The tasks behind one multiplexed socket. Dropping it stops them (the
/// connections handed out then read end-of-file).
pub struct Mux {
    tasks: Vec<JoinHandle<()>>,
    closed: watch::Receiver<bool>,
}

impl Drop for Mux {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Mux {
    /// Split `socket` into the connections `ids`, returned in that order as
    /// byte streams (hand them to ttrpc as sockets). Frames for other ids
    /// are dropped. Must run inside a tokio runtime.
    pub fn split<S>(socket: S, ids: &[u32]) -> (Mux, Vec<DuplexStream>)
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (mut socket_read, mut socket_write) = tokio::io::split(socket);
        let (frames_tx, mut frames_rx) = mpsc::channel::<(u32, Vec<u8>)>(64);
        let (closed_tx, closed_rx) = watch::channel(false);
        let closed_tx = std::sync::Arc::new(closed_tx);
        let mut tasks = Vec::new();
        let mut users = Vec::new();
        let mut inbound: HashMap<u32, tokio::io::WriteHalf<DuplexStream>> = HashMap::new();
        for &id in ids {
            let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
            users.push(theirs);
            let (mut from_user, to_user) = tokio::io::split(ours);
            inbound.insert(id, to_user);
            let frames_tx = frames_tx.clone();
            tasks.push(tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    match from_user.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if frames_tx.send((id, buf[..n].to_vec())).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }));
        }
        drop(frames_tx);
        // The writer: frames in the order they were queued.
        let closed = closed_tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Some((id, payload)) = frames_rx.recv().await {
                for chunk in payload.chunks(MAX_PAYLOAD) {
                    let mut frame = Vec::with_capacity(HEADER_LEN + chunk.len());
                    frame.extend_from_slice(&id.to_be_bytes());
                    frame.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
                    frame.extend_from_slice(chunk);
                    if socket_write.write_all(&frame).await.is_err() {
                        let _ = closed.send(true);
                        return;
                    }
                }
            }
        }));
        // The reader: each frame's payload to its connection; end-of-file,
        // an error or an oversized frame closes every connection.
        let closed = closed_tx;
        tasks.push(tokio::spawn(async move {
            let mut header = [0u8; HEADER_LEN];
            let mut payload = Vec::new();
            loop {
                if socket_read.read_exact(&mut header).await.is_err() {
                    break;
                }
                let id = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
                let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
                if len > MAX_PAYLOAD {
                    tracing::warn!(
                        conn = id,
                        len,
                        "NRI frame larger than the protocol allows; closing the connection"
                    );
                    break;
                }
                payload.resize(len, 0);
                if socket_read.read_exact(&mut payload).await.is_err() {
                    break;
                }
                if let Some(to_user) = inbound.get_mut(&id) {
                    if to_user.write_all(&payload).await.is_err() {
                        inbound.remove(&id);
                    }
                } else {
                    tracing::debug!(
                        conn = id,
                        len,
                        "NRI frame for an unknown connection dropped"
                    );
                }
            }
            for (_, mut to_user) in inbound.drain() {
                let _ = to_user.shutdown().await;
            }
            let _ = closed.send(true);
        }));
        (
            Mux {
                tasks,
                closed: closed_rx,
            },
            users,
        )
    }

    /// Resolves once the peer closed the socket (or it failed).
    pub async fn closed(&mut self) {
        let _ = self.closed.wait_for(|closed| *closed).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_carry_each_connection_apart() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let (_ma, mut conns_a) = Mux::split(a, &[PLUGIN_CONN, RUNTIME_CONN]);
        let (mut mb, mut conns_b) = Mux::split(b, &[PLUGIN_CONN, RUNTIME_CONN]);
        conns_a[1].write_all(b"to the runtime").await.unwrap();
        conns_a[0].write_all(b"to the plugin").await.unwrap();
        let mut buf = vec![0u8; 14];
        conns_b[1].read_exact(&mut buf).await.unwrap();
        assert_eq!(buf, b"to the runtime");
        let mut buf = vec![0u8; 13];
        conns_b[0].read_exact(&mut buf).await.unwrap();
        assert_eq!(buf, b"to the plugin");
        drop(_ma);
        drop(conns_a);
        mb.closed().await;
    }

    #[tokio::test]
    async fn the_wire_format_is_header_then_payload() {
        let (a, mut raw) = tokio::io::duplex(1 << 20);
        let (_m, mut conns) = Mux::split(a, &[RUNTIME_CONN]);
        conns[0].write_all(b"xy").await.unwrap();
        let mut frame = [0u8; 10];
        raw.read_exact(&mut frame).await.unwrap();
        assert_eq!(frame, [0, 0, 0, 2, 0, 0, 0, 2, b'x', b'y']);
        raw.write_all(&[0, 0, 0, 2, 0, 0, 0, 3, b'a', b'b', b'c'])
            .await
            .unwrap();
        let mut got = [0u8; 3];
        conns[0].read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"abc");
    }
}
