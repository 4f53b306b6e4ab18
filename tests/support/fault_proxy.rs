//! A TCP fault proxy for tests: forwards `127.0.0.1:<port>` to a target
//! (such as Azurite's table port) and, on command, adds latency, resets
//! connections at random, or swallows all traffic (a blackhole).
//!
//! A module of `tests/support` (`crate::support::fault_proxy` in the `it` test
//! binary).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the proxy does to traffic; shared with every connection task.
#[derive(Debug, Default)]
struct Controls {
    /// Added before each forwarded chunk, in microseconds.
    latency_us: AtomicU64,
    /// Chance, in millionths, that a request chunk (client to server)
    /// resets the connection instead of being forwarded: the request is lost.
    reset_ppm: AtomicU32,
    /// The same for reply chunks (server to client): the request was
    /// applied, its reply is lost.
    reply_reset_ppm: AtomicU32,
    /// When set, nothing is forwarded and new connections hang.
    blackhole: AtomicBool,
    /// xorshift state for the reset draws (seeded: reproducible order of
    /// draws, though not of task interleavings).
    rng: AtomicU64,
    connections: AtomicU64,
    chunks: AtomicU64,
    resets: AtomicU64,
}

impl Controls {
    fn draw_reset(&self, ppm: &AtomicU32) -> bool {
        let ppm = ppm.load(Ordering::Relaxed);
        if ppm == 0 {
            return false;
        }
        let mut x = self.rng.load(Ordering::Relaxed);
        loop {
            let mut next = x;
            next ^= next << 13;
            next ^= next >> 7;
            next ^= next << 17;
            match self
                .rng
                .compare_exchange_weak(x, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next % 1_000_000 < u64::from(ppm),
                Err(current) => x = current,
            }
        }
    }
}

/// A running proxy. Dropping it stops accepting; open connections end when
/// their peers close them.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    controls: Arc<Controls>,
    accept: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port forwarding to `target`.
    pub async fn start(target: SocketAddr, seed: u64) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let controls = Arc::new(Controls {
            rng: AtomicU64::new(seed | 1),
            ..Controls::default()
        });
        let shared = controls.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                shared.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(client, target, shared.clone()));
            }
        });
        Ok(FaultProxy {
            addr,
            controls,
            accept,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Delay added before each forwarded chunk.
    pub fn set_latency(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.controls.latency_us.store(us, Ordering::Relaxed);
    }

    /// The chance (0.0–1.0) that a request chunk resets its connection
    /// (both sides see a TCP RST) instead of being forwarded: the request
    /// never reaches the server.
    pub fn set_reset_probability(&self, p: f64) {
        self.controls.reset_ppm.store(ppm(p), Ordering::Relaxed);
    }

    /// The chance (0.0–1.0) that a reply chunk resets its connection: the
    /// server applied the request, the client never hears of it.
    pub fn set_reply_reset_probability(&self, p: f64) {
        self.controls
            .reply_reset_ppm
            .store(ppm(p), Ordering::Relaxed);
    }

    /// Swallows all traffic while set: requests get no reply, new
    /// connections are accepted but never answered.
    pub fn set_blackhole(&self, on: bool) {
        self.controls.blackhole.store(on, Ordering::Relaxed);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.controls.connections.load(Ordering::Relaxed)
    }

    /// Chunks forwarded so far (both directions).
    pub fn chunks(&self) -> u64 {
        self.controls.chunks.load(Ordering::Relaxed)
    }

    /// Connections reset so far.
    pub fn resets(&self) -> u64 {
        self.controls.resets.load(Ordering::Relaxed)
    }
}

async fn serve(client: TcpStream, target: SocketAddr, controls: Arc<Controls>) {
    // Zero linger on both sockets: dropping them sends a TCP RST, which is
    // how a reset draw aborts the connection.
    let _ = client.set_zero_linger();
    let Ok(server) = TcpStream::connect(target).await else {
        drop(client);
        return;
    };
    let _ = server.set_zero_linger();
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let reset_now = tokio::sync::Notify::new();
    let up = pump(
        client_read,
        server_write,
        &controls,
        &controls.reset_ppm,
        &reset_now,
    );
    let down = pump(
        server_read,
        client_write,
        &controls,
        &controls.reply_reset_ppm,
        &reset_now,
    );
    // A reset drops both directions (and so both sockets) at once.
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = reset_now.notified() => {}
    }
}

/// Copies one direction, chunk by chunk, applying the controls, until the
/// peer closes or a reset is drawn.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    controls: &Controls,
    reset_ppm: &AtomicU32,
    reset_now: &tokio::sync::Notify,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if controls.blackhole.load(Ordering::Relaxed) {
            continue;
        }
        let latency = controls.latency_us.load(Ordering::Relaxed);
        if latency > 0 {
            tokio::time::sleep(Duration::from_micros(latency)).await;
        }
        if controls.draw_reset(reset_ppm) {
            controls.resets.fetch_add(1, Ordering::Relaxed);
            reset_now.notify_one();
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        controls.chunks.fetch_add(1, Ordering::Relaxed);
    }
}

fn ppm(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * 1_000_000.0).round() as u32
}
