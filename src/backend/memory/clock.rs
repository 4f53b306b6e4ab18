//! The backend's write clock: every write (entity or blob) takes one tick,
//! at least 100 ns after the previous one, so two writes never share a
//! Timestamp, and so never an ETag, however fast they follow each other.

use std::sync::Mutex;
use std::time::Duration;

use time::OffsetDateTime;

use crate::entity::datetime;
use crate::key::ETag;

/// One step of the service's clock.
const TICK: Duration = Duration::from_nanos(100);

/// Hands out strictly increasing Timestamps.
#[derive(Debug)]
pub(super) struct WriteClock {
    last: Mutex<Option<OffsetDateTime>>,
}

impl WriteClock {
    pub(super) fn new() -> Self {
        WriteClock {
            last: Mutex::new(None),
        }
    }

    /// The next Timestamp: `max(now, previous + 100 ns)`.
    pub(super) fn tick(&self) -> OffsetDateTime {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        // `now` is always inside the Edm.DateTime range in practice; if the
        // system clock is wildly off, fall back to the minimum and let the
        // monotonic rule carry on from the previous tick.
        let now = datetime::normalize(OffsetDateTime::now_utc()).unwrap_or(datetime::MIN);
        let next = match *last {
            Some(prev) if now <= prev => prev + TICK,
            _ => now,
        };
        *last = Some(next);
        next
    }
}

/// An entity ETag in the shape Azure Table Storage gives:
/// `W/"datetime'2026-11-21T04%3A46%3A16.9123456Z'"`, where the date-time is
/// the entity's Timestamp with `:` percent-encoded.
pub(super) fn entity_etag(timestamp: OffsetDateTime) -> ETag {
    // In one allocation: this runs on every entity write.
    let mut buf = [0u8; 28];
    let formatted;
    let stamp = match datetime::format_into(timestamp, &mut buf) {
        Some(stamp) => stamp,
        None => {
            formatted = datetime::format(timestamp);
            &formatted
        }
    };
    let mut text = String::with_capacity(48);
    text.push_str("W/\"datetime'");
    for (i, part) in stamp.split(':').enumerate() {
        if i > 0 {
            text.push_str("%3A");
        }
        text.push_str(part);
    }
    text.push_str("'\"");
    ETag::new(text)
}

/// The 100 ns ticks since 1601-01-01 UTC (a Windows FILETIME), the basis of
/// a blob ETag.
fn filetime(timestamp: OffsetDateTime) -> u64 {
    let since = timestamp - datetime::MIN;
    // Never negative (ticks are normalised into the Edm.DateTime range) and
    // below 2^63 until the year 30828.
    u64::try_from(since.whole_nanoseconds() / 100).unwrap_or(0)
}

/// A blob ETag in the shape Azure Blob Storage gives: a quoted hex number
/// such as `"0x8DC5A1B2C3D4E5F"`. Derived from the write's tick, so unique
/// per write.
pub(super) fn blob_etag(timestamp: OffsetDateTime) -> ETag {
    ETag::new(format!("\"0x8{:015X}\"", filetime(timestamp)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn ticks_strictly_increase_by_at_least_100ns() {
        let clock = WriteClock::new();
        let mut prev = clock.tick();
        for _ in 0..10_000 {
            let next = clock.tick();
            assert!(next - prev >= TICK, "{prev} then {next}");
            assert_eq!(next.nanosecond() % 100, 0);
            prev = next;
        }
    }

    #[test]
    fn etags_have_the_service_shapes() {
        let t = datetime!(2026-11-21 04:46:16.9123456 UTC);
        assert_eq!(
            entity_etag(t).as_str(),
            "W/\"datetime'2026-11-21T04%3A46%3A16.9123456Z'\""
        );
        for t in [
            datetime::MIN,
            datetime::MAX,
            datetime!(2024-02-29 00:00:00 UTC),
            datetime!(2026-01-02 03:04:05.0000100 UTC),
        ] {
            let expected = format!(
                "W/\"datetime'{}'\"",
                datetime::format(t).replace(':', "%3A")
            );
            assert_eq!(entity_etag(t).as_str(), expected);
        }
        let b = blob_etag(t);
        let s = b.as_str();
        assert!(s.starts_with("\"0x8") && s.ends_with('"'), "{s}");
        assert_eq!(s.len(), 2 + 2 + 16);
        assert_ne!(blob_etag(t + TICK), b);
    }
}
