//! Helpers for tests about secrets: a tracing writer that keeps what is
//! written, and an account SAS signed with an account key.
//!
//! A module of `tests/support` (`crate::support::secrets` in the `it` test
//! binary).
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

/// A writer collecting everything a tracing subscriber writes.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// Logs every level, without colours, into this buffer: everything the
    /// current thread records until the guard is dropped, each span's
    /// opening with its fields included.
    ///
    /// One global subscriber serves every capture of the test binary, each
    /// thread writing into its own buffer. (A scoped subscriber per test is
    /// not enough when many tests share a binary: a callsite another test
    /// registers first can cache an interest that leaves the capture empty.)
    pub fn capture(&self) -> CaptureGuard {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            use tracing_subscriber::Layer as _;
            use tracing_subscriber::layer::SubscriberExt as _;
            let layer = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
                .with_writer(|| ThreadWriter)
                .with_filter(tracing_subscriber::filter::filter_fn(|_| {
                    CURRENT.with(|c| c.borrow().is_some())
                }));
            let subscriber = tracing_subscriber::registry().with(layer);
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in the test binary");
        });
        CURRENT.with(|c| *c.borrow_mut() = Some(self.clone()));
        tracing::callsite::rebuild_interest_cache();
        CaptureGuard(())
    }
}

thread_local! {
    /// The buffer the current thread's events go to, while capturing.
    static CURRENT: std::cell::RefCell<Option<Captured>> = const { std::cell::RefCell::new(None) };
}

/// Writes into the current thread's capture, if any.
struct ThreadWriter;

impl std::io::Write for ThreadWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CURRENT.with(|c| match &mut *c.borrow_mut() {
            Some(captured) => captured.write(buf),
            None => Ok(buf.len()),
        })
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Ends a capture of the current thread when dropped.
pub struct CaptureGuard(());

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

/// The raw account key (tests only).
pub struct AccountKey_(pub String);

/// An account SAS for tables and blobs (query string, no leading `?`),
/// signed with the account key.
pub fn account_sas(account: &str, key: &AccountKey_) -> String {
    let expiry = "2099-01-01T00:00:00Z";
    let (permissions, services, types, version) = ("rwdlacu", "bt", "sco", "2018-11-09");
    let to_sign =
        format!("{account}\n{permissions}\n{services}\n{types}\n\n{expiry}\n\n\n{version}\n");
    let sig = azure_core::hmac::hmac_sha256(
        &to_sign,
        &azure_core::credentials::Secret::new(key.0.clone()),
    )
    .expect("the key is base64");
    let mut url = azure_core::http::Url::parse("http://x/").expect("a URL");
    url.query_pairs_mut()
        .append_pair("sv", version)
        .append_pair("ss", services)
        .append_pair("srt", types)
        .append_pair("se", expiry)
        .append_pair("sp", permissions)
        .append_pair("sig", &sig);
    url.query().expect("a query").to_owned()
}

/// The signature of a SAS query string, raw and form-encoded as it travels
/// in a URL.
pub fn signature_forms(sas: &str) -> [String; 2] {
    let raw: String = sas
        .split('&')
        .find_map(|p| p.strip_prefix("sig="))
        .expect("the SAS has a signature")
        .to_owned();
    let mut u = azure_core::http::Url::parse("http://x/").expect("a URL");
    u.query_pairs_mut().append_pair("s", &raw);
    let encoded = u.query().expect("a query")[2..].to_owned();
    [raw, encoded]
}
