//! `Edm.DateTime`, the service's one date-time form: UTC, 100 ns ticks,
//! from 1601-01-01 to 9999-12-31. Property values, date-time key parts,
//! filter literals, the wire form and lease records all read and write
//! date-times through here.

use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::{OffsetDateTime, UtcOffset};

/// The earliest `Edm.DateTime` the service stores.
pub(crate) const MIN: OffsetDateTime = datetime!(1601-01-01 00:00:00 UTC);
/// The latest `Edm.DateTime` the service stores.
pub(crate) const MAX: OffsetDateTime = datetime!(9999-12-31 23:59:59.9999999 UTC);

/// The wall-clock time as `tokio::time` sees it (moved with tokio's clock
/// when it is paused), so row expiry runs on paused time in tests.
pub(crate) fn now() -> OffsetDateTime {
    let wall = OffsetDateTime::now_utc();
    let tokio_now = tokio::time::Instant::now().into_std();
    let std_now = std::time::Instant::now();
    let moved = match tokio_now.checked_duration_since(std_now) {
        Some(ahead) => time::Duration::try_from(ahead)
            .ok()
            .and_then(|d| wall.checked_add(d)),
        None => time::Duration::try_from(std_now.saturating_duration_since(tokio_now))
            .ok()
            .and_then(|d| wall.checked_sub(d)),
    };
    moved.unwrap_or(wall)
}

/// Brings a date-time to the service's form: UTC, truncated to 100 ns.
///
/// # Errors
/// A message when the instant lies outside 1601-01-01..=9999-12-31.
pub(crate) fn normalize(t: OffsetDateTime) -> Result<OffsetDateTime, String> {
    let t = t.to_offset(UtcOffset::UTC);
    if t < MIN || t > MAX {
        return Err(format!(
            "{} is outside the range of Edm.DateTime (1601-01-01 to 9999-12-31 UTC)",
            format_any(t)
        ));
    }
    let nanos = t.nanosecond();
    t.replace_nanosecond(nanos - nanos % 100)
        .map_err(|e| e.to_string())
}

/// Writes a date-time as the service does: `2024-01-02T03:04:05.1234567Z`,
/// fixed width (so the text sorts as the instants do within the valid range).
pub(crate) fn format(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:07}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.nanosecond() / 100
    )
}

/// The separators of [`format`]'s text, by position.
const SEPARATORS: [(usize, u8); 7] = [
    (4, b'-'),
    (7, b'-'),
    (10, b'T'),
    (13, b':'),
    (16, b':'),
    (19, b'.'),
    (27, b'Z'),
];

/// As [`format`], into a stack buffer: `None` (use [`format`]) unless the
/// date-time is UTC with a four-digit year.
pub(crate) fn format_into(t: OffsetDateTime, buf: &mut [u8; 28]) -> Option<&str> {
    if t.offset() != UtcOffset::UTC {
        return None;
    }
    let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
    let frac = t.nanosecond() / 100;
    let mut put = |at: usize, width: usize, mut v: u32| {
        for i in (at..at + width).rev() {
            // `v % 10` is a digit: the cast cannot truncate.
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, u32::from(u8::from(t.month())));
    put(8, 2, u32::from(t.day()));
    put(11, 2, u32::from(t.hour()));
    put(14, 2, u32::from(t.minute()));
    put(17, 2, u32::from(t.second()));
    put(20, 7, frac);
    for (i, c) in SEPARATORS {
        buf[i] = c;
    }
    std::str::from_utf8(buf).ok()
}

fn format_any(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_else(|_| format!("{t}"))
}

/// Parses an RFC 3339 date-time as the service returns it (any number of
/// fractional digits) and normalizes it.
///
/// # Errors
/// A message when `s` is not an RFC 3339 date-time in range.
pub(crate) fn parse(s: &str) -> Result<OffsetDateTime, String> {
    if let Some(t) = parse_canonical(s) {
        return Ok(t);
    }
    let t = OffsetDateTime::parse(s, &Rfc3339).map_err(|e| format!("{s:?}: {e}"))?;
    normalize(t)
}

/// The date-time in the service's own form (see [`format`]), which every
/// date-time it sends has, read without the general RFC 3339 parser;
/// `None` for any other text or an instant out of range.
fn parse_canonical(s: &str) -> Option<OffsetDateTime> {
    let b: &[u8; 28] = s.as_bytes().try_into().ok()?;
    if SEPARATORS.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let number = |at: usize, width: usize| {
        b[at..at + width].iter().try_fold(0u32, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let year = i32::try_from(number(0, 4)?).ok()?;
    let month = time::Month::try_from(u8::try_from(number(5, 2)?).ok()?).ok()?;
    let date =
        time::Date::from_calendar_date(year, month, u8::try_from(number(8, 2)?).ok()?).ok()?;
    let time = time::Time::from_hms_nano(
        u8::try_from(number(11, 2)?).ok()?,
        u8::try_from(number(14, 2)?).ok()?,
        u8::try_from(number(17, 2)?).ok()?,
        number(20, 7)? * 100,
    )
    .ok()?;
    let t = date.with_time(time).assume_utc();
    (MIN..=MAX).contains(&t).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_the_edges_with_100ns_precision() {
        for t in [MIN, MAX, datetime!(2024-02-29 12:34:56.1234567 UTC)] {
            let text = format(t);
            assert_eq!(parse(&text).unwrap(), t, "{text}");
        }
        assert_eq!(format(MIN), "1601-01-01T00:00:00.0000000Z");
        assert_eq!(format(MAX), "9999-12-31T23:59:59.9999999Z");
    }

    #[test]
    fn the_canonical_form_reads_as_the_general_parser_reads_it() {
        let texts = [
            "2024-02-29T12:34:56.1234567Z",
            "1601-01-01T00:00:00.0000000Z",
            "9999-12-31T23:59:59.9999999Z",
            "2026-11-28T09:34:25.4145619Z",
            // Not the canonical form, or not valid: the general parser's
            // answer stands.
            "1600-12-31T23:59:59.9999999Z",
            "2023-02-29T00:00:00.0000000Z",
            "2024-13-01T00:00:00.0000000Z",
            "2024-01-01T24:00:00.0000000Z",
            "2024-01-01T00:00:60.0000000Z",
            "2024-01-01T00:00:00.000000aZ",
            "2024-01-01 00:00:00.0000000Z",
            "+024-01-01T00:00:00.0000000Z",
            "2024-01-01T00:00:00.123456789Z",
            "2024-01-01T00:00:00Z",
            "2024-01-01T00:00:00.1234567+01:00",
        ];
        for text in texts {
            let general = OffsetDateTime::parse(text, &Rfc3339)
                .map_err(|e| e.to_string())
                .and_then(normalize);
            let canonical = parse_canonical(text);
            if let Some(t) = canonical {
                assert_eq!(Ok(t), general, "{text}");
            }
            assert_eq!(parse(text).ok(), general.ok(), "{text}");
        }
        for text in &texts[..4] {
            assert!(parse_canonical(text).is_some(), "{text}");
        }
    }

    #[test]
    fn format_into_matches_format() {
        let mut buf = [0; 28];
        for t in [
            MIN,
            MAX,
            datetime!(2024-02-29 12:34:56.1234567 UTC),
            datetime!(0000-01-01 00:00:00 UTC),
            datetime!(0001-02-03 04:05:06.000000789 UTC),
        ] {
            assert_eq!(format_into(t, &mut buf), Some(format(t).as_str()));
        }
        assert_eq!(
            format_into(datetime!(2024-01-01 01:00:00 +01:00), &mut buf),
            None
        );
        assert_eq!(
            format_into(datetime!(-0001-01-01 00:00:00 UTC), &mut buf),
            None
        );
    }

    #[test]
    fn normalizes_offsets_and_truncates_nanoseconds() {
        let t = datetime!(2024-01-01 01:00:00.123456789 +01:00);
        let n = normalize(t).unwrap();
        assert_eq!(n.offset(), UtcOffset::UTC);
        assert_eq!(format(n), "2024-01-01T00:00:00.1234567Z");
        assert!(normalize(datetime!(1600-12-31 23:59:59 UTC)).is_err());
    }
}
