//! UTC timestamps for the ledger and the budget texts, without a date crate.
//!
//! The ledger writes `YYYY-MM-DDTHH:MM:SS.mmmZ` (always UTC, always milliseconds) and reads back that form
//! and the same without the fraction. Civil-date arithmetic after H. Hinnant's `days_from_civil` /
//! `civil_from_days` (proleptic Gregorian calendar).

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now (0 when the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn parts(ms: i64) -> (i64, i64, i64, i64, i64, i64, i64) {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    (y, m, d, sod / 3600, (sod % 3600) / 60, sod % 60, milli)
}

/// `2026-10-29T12:34:56.789Z`.
pub fn format_utc_ms(ms: i64) -> String {
    let (y, m, d, hh, mm, ss, milli) = parts(ms);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{milli:03}Z")
}

/// `2026-10-29T12:34:56Z` (seconds, for texts the model reads).
pub fn format_utc_secs(ms: i64) -> String {
    let (y, m, d, hh, mm, ss, _) = parts(ms);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// Parse `YYYY-MM-DDTHH:MM:SS[.fff…]Z` (UTC only). `None` for anything else.
pub fn parse_utc(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || !s.is_ascii() || *b.last()? != b'Z' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let t = s.get(from..to)?;
        if t.bytes().all(|c| c.is_ascii_digit()) {
            t.parse().ok()
        } else {
            None
        }
    };
    if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mi, ss) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || hh > 23 || mi > 59 || ss > 60 {
        return None;
    }
    let rest = &s[19..s.len() - 1];
    let milli = if rest.is_empty() {
        0
    } else {
        let frac = rest.strip_prefix('.')?;
        if frac.is_empty() || !frac.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let three: String = frac.chars().chain("000".chars()).take(3).collect();
        three.parse::<i64>().ok()?
    };
    let days = days_from_civil(y, mo, d);
    Some((days * 86_400 + hh * 3600 + mi * 60 + ss) * 1000 + milli)
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
