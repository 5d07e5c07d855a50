//! UTC timestamps for the ledger and the budget texts (the `time` crate does the calendar).
//!
//! The ledger writes `YYYY-MM-DDTHH:MM:SS.mmmZ` (always UTC, always milliseconds) and reads back that form
//! and the same without the fraction (RFC 3339 in UTC, `Z` only).

use std::time::{SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

/// Milliseconds since the Unix epoch, now (0 when the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The instant of `ms`, clamped to the years 0000–9999 (an absurd clock still formats).
fn instant(ms: i64) -> OffsetDateTime {
    const MIN_MS: i64 = -62_167_219_200_000; // 0000-01-01T00:00:00Z
    const MAX_MS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    let ms = ms.clamp(MIN_MS, MAX_MS);
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `2026-10-29T12:34:56.789Z`.
pub fn format_utc_ms(ms: i64) -> String {
    instant(ms)
        .format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        ))
        .unwrap_or_default()
}

/// `2026-10-29T12:34:56Z` (seconds, for texts the model reads).
pub fn format_utc_secs(ms: i64) -> String {
    instant(ms)
        .format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
        .unwrap_or_default()
}

/// Parse `YYYY-MM-DDTHH:MM:SS[.fff…]Z` (UTC only). `None` for anything else.
pub fn parse_utc(s: &str) -> Option<i64> {
    // RFC 3339 also allows offsets and a lower-case `t`/`z`; the ledger writes only this form.
    if !s.is_ascii() || !s.ends_with('Z') || s.as_bytes().get(10) != Some(&b'T') {
        return None;
    }
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

/// A duration for texts: `10 min`, `1 h`, `90 s`, `1 h 30 min`.
pub fn human_secs(secs: u64) -> String {
    if secs >= 3600 && secs.is_multiple_of(60) {
        let h = secs / 3600;
        let m = (secs % 3600) / 60;
        if m == 0 {
            format!("{h} h")
        } else {
            format!("{h} h {m} min")
        }
    } else if secs >= 60 && secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_utc_ms(0), "1970-01-01T00:00:00.000Z");
        // 2026-10-29T12:34:56.789Z
        let t = 1_761_741_296_789;
        assert_eq!(format_utc_ms(t), "2025-10-29T12:34:56.789Z");
        assert_eq!(format_utc_secs(t), "2025-10-29T12:34:56Z");
        assert_eq!(parse_utc("2025-10-29T12:34:56.789Z"), Some(t));
        assert_eq!(parse_utc("2025-10-29T12:34:56Z"), Some(t - 789));
        assert_eq!(parse_utc("2000-02-29T00:00:00.5Z"), Some(951_782_400_500));
        // A clock far outside the calendar still formats (clamped), never panics.
        assert_eq!(format_utc_ms(i64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(format_utc_secs(i64::MIN), "0000-01-01T00:00:00Z");
    }

    #[test]
    fn round_trip_and_garbage() {
        for ms in [
            0i64,
            1,
            999,
            86_399_999,
            951_782_400_000,
            1_761_741_296_789,
            4_102_444_800_000,
        ] {
            assert_eq!(parse_utc(&format_utc_ms(ms)), Some(ms), "{ms}");
        }
        for bad in [
            "",
            "2025-10-29",
            "2025-10-29T12:34:56",
            "2025-13-29T12:34:56Z",
            "2025-10-29T12:34:56.Z",
            "2025-10-29T12:34:56+01:00",
            "２０２５-10-29T12:34:56Z",
            "2025-10-29T12:34:5xZ",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(human_secs(600), "10 min");
        assert_eq!(human_secs(3600), "1 h");
        assert_eq!(human_secs(5400), "1 h 30 min");
        assert_eq!(human_secs(90), "90 s");
        assert_eq!(human_secs(0), "0 s");
    }
}
