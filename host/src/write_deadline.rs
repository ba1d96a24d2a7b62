//! A stream whose writes may not stall: a client that sends requests but
//! never reads the answers (a full socket buffer) would otherwise hold its
//! connection, and one of the server's capped connection places, forever.
//!
//! hyper's `header_read_timeout` bounds how long a client may stay silent;
//! nothing in hyper bounds how long a response may wait for the client to
//! read it. [`WriteDeadline`] fails a write (or flush, or shutdown) that
//! makes no progress for its deadline with `TimedOut`, which ends the
//! connection. Progress resets the clock, so a slow reader that keeps
//! reading is served. Reads pass through untouched.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A stream with a deadline on stalled writes.
pub struct WriteDeadline<S> {
    inner: S,
    stall: Duration,
    /// Armed while a write is pending; reset by any progress.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    /// Wrap `inner`; a write pending for `stall` without progress fails.
    pub fn new(inner: S, stall: Duration) -> WriteDeadline<S> {
        WriteDeadline {
            inner,
            stall,
            timer: None,
        }
    }

    /// `poll` made progress (or failed): disarm. Still pending: arm the
    /// timer on the first pending poll and fail once it has fired.
    fn check<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.timer = None;
            return poll;
        }
        let stall = self.stall;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + stall)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.timer = None;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client read nothing of the answer for {} ms",
                        stall.as_millis()
                    ),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.check(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_reads_fails_after_the_deadline() {
        // A 64 KiB pipe nobody reads: the second write cannot go anywhere.
        let (client, _server) = tokio::io::duplex(64 << 10);
        let mut stream = WriteDeadline::new(client, Duration::from_secs(5));
        stream.write_all(&[0; 64 << 10]).await.expect("fits");
        let began = Instant::now();
        let err = stream.write_all(&[0; 1]).await.expect_err("stalls");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(began.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_served() {
        use tokio::io::AsyncReadExt;
        let (client, mut server) = tokio::io::duplex(1024);
        let mut stream = WriteDeadline::new(client, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0; 512];
            while got < 8192 {
                // Each read comes 3 s after the last: under the deadline.
                tokio::time::sleep(Duration::from_secs(3)).await;
                got += server.read(&mut buf).await.expect("read");
            }
            got
        });
        stream.write_all(&[7; 8192]).await.expect("served slowly");
        assert_eq!(reader.await.expect("reader"), 8192);
    }
}
