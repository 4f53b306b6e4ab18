//! The tracing layer: one debug span per backend request, with
//! OpenTelemetry's database-client attributes, and the request's outcome
//! logged in it. Backends write no spans of their own; every store stacks
//! this layer over its backend (see [`Layer`](super::Layer)).

use std::future::Future;
use std::sync::Arc;

use tracing::Instrument as _;

use super::{Backend, Layer, Layered, Request, Target, Wrap};
use crate::error::Result;

/// What traces every request of the backend below it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tracing;

impl Wrap for Tracing {
    fn layer(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
        Arc::new(Layered {
            layer: Traced {
                system: inner.system_name(),
                address: inner.server_address(),
            },
            inner,
        })
    }
}

/// The layer that runs every request in a span (see the module docs).
#[derive(Debug)]
struct Traced {
    /// `db.system.name`.
    system: &'static str,
    /// `server.address`, when the backend has one.
    address: Option<String>,
}

impl Traced {
    /// The span of `request`. Keys are recorded; metadata, bodies and lease
    /// ids never are.
    fn span(&self, request: &Request<'_>) -> tracing::Span {
        let address = self.address.as_deref();
        match &request.target {
            Target::Account => tracing::debug_span!(
                "leasehold.table",
                otel.name = request.name,
                otel.kind = "client",
                db.system.name = self.system,
                db.operation.name = request.name,
                server.address = address,
            ),
            Target::Table {
                table,
                partition,
                row,
                size,
            } => tracing::debug_span!(
                "leasehold.table",
                otel.name = %format_args!("{} {}", request.name, table),
                otel.kind = "client",
                db.system.name = self.system,
                db.operation.name = request.name,
                db.collection.name = %table,
                db.operation.batch.size = *size,
                server.address = address,
                partition = partition.as_ref().map(|p| p.as_str()),
                row = row.as_ref().map(|r| r.as_str()),
            ),
            Target::Blob { container, blob } => tracing::debug_span!(
                "leasehold.blob",
                otel.name = %format_args!("{} {}", request.name, container),
                otel.kind = "client",
                db.system.name = self.system,
                db.operation.name = request.name,
                container = %container,
                blob = blob.map(|b| b.as_str()),
            ),
        }
    }
}

impl Layer for Traced {
    fn call<T: Send>(
        &self,
        request: &Request<'_>,
        next: impl Future<Output = Result<T>> + Send,
    ) -> impl Future<Output = Result<T>> + Send {
        let logged = async move {
            let result = next.await;
            match &result {
                Ok(_) => tracing::debug!("ok"),
                Err(e) => tracing::debug!(kind = ?e.kind(), code = e.code(), "failed"),
            }
            result
        };
        logged.instrument(self.span(request))
    }
}
