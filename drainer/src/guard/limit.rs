//! At most N connections to the guard at once: each one accepted holds a permit for its lifetime,
//! and one beyond the limit is closed at accept; and at most so many bytes of request bodies held
//! over all of them ([`Bytes`]). Slow clients cannot pile up connections (5,000 held
//! ones took the drainer from 40 to 148 MB, issue 11); the header and request timeouts in
//! `server.rs` close the slow ones that are let in. I/O (it wraps the listener).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Clone)]
pub(crate) struct LimitAcceptor<A> {
    inner: A,
    permits: Arc<Semaphore>,
}

impl<A> LimitAcceptor<A> {
    pub(crate) fn new(inner: A, max_connections: usize) -> Self {
        LimitAcceptor {
            inner,
            permits: Arc::new(Semaphore::new(max_connections.max(1))),
        }
    }
}

impl<A, I, S> Accept<I, S> for LimitAcceptor<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Unpin,
{
    type Stream = Permitted<A::Stream>;
    type Service = A::Service;
    type Future = Pin<Box<dyn Future<Output = io::Result<(Self::Stream, Self::Service)>> + Send>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        // Decided before the TLS handshake: a refused connection costs nothing more.
        let permit = self.permits.clone().try_acquire_owned();
        let handshake = permit.is_ok().then(|| self.inner.accept(stream, service));
        Box::pin(async move {
            let (Ok(permit), Some(handshake)) = (permit, handshake) else {
                tracing::debug!("guard connection limit reached: connection closed");
                return Err(io::Error::other("guard connection limit reached"));
            };
            let (stream, service) = handshake.await?;
            Ok((
                Permitted {
                    inner: stream,
                    _permit: permit,
                },
                service,
            ))
        })
    }
}

/// A connection holding its permit until it is dropped.
pub(crate) struct Permitted<T> {
    inner: T,
    _permit: OwnedSemaphorePermit,
}

impl<T: AsyncRead + Unpin> AsyncRead for Permitted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Permitted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The bytes of request bodies held at once: a request takes its declared length from `budget`
/// until it is answered. One that would go over is shed unread with 503 (the API server's
/// `failurePolicy: Ignore` admits it: saturated, the guard fails open) and counted in `shed`.
pub(super) struct Bytes {
    pub(super) budget: Arc<Semaphore>,
    pub(super) max_request: usize,
    pub(super) shed: prometheus_client::metrics::counter::Counter,
}

impl Bytes {
    pub(super) async fn admit(
        self,
        req: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        use axum::http::StatusCode;
        use axum::response::IntoResponse;
        let Some(len) = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
        else {
            // The API server always says how long its AdmissionReview is.
            return StatusCode::LENGTH_REQUIRED.into_response();
        };
        if len > self.max_request {
            return StatusCode::PAYLOAD_TOO_LARGE.into_response();
        }
        let Ok(_held) = self.budget.try_acquire_many_owned(len.max(1) as u32) else {
            self.shed.inc();
            tracing::debug!(
                bytes = len,
                "guard saturated: request shed (the API server admits it)"
            );
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        };
        next.run(req).await
    }
}
