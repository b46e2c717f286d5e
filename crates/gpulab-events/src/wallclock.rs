//! Wall-clock UTC time as the event stream writes it (`2026-11-22T14:03:07Z`):
//! when a recording was made. Everything else in a stream is CLOCK_MONOTONIC;
//! this is the one field that says which day it was.

use std::time::{SystemTime, UNIX_EPOCH};

/// A UTC civil time, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utc {
    pub year: i64,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl Utc {
    /// Seconds since the Unix epoch to a civil date (Howard Hinnant's
    /// days-to-civil algorithm).
    pub fn from_unix(secs: u64) -> Self {
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        Utc {
            year: yoe + era * 400 + i64::from(month <= 2),
            month: month as u8,
            day: day as u8,
            hour: (rem / 3600) as u8,
            minute: (rem / 60 % 60) as u8,
            second: (rem % 60) as u8,
        }
    }

    pub fn now() -> Self {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self::from_unix(secs)
    }

    /// RFC 3339 in UTC, as `meta.recorded_at` holds it.
    pub fn rfc3339(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// `2026-11-22 14:03 UTC`, for people.
    pub fn human(&self) -> String {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02} UTC",
            self.year, self.month, self.day, self.hour, self.minute
        )
    }

    /// `20261122-140307`: sorts by time, safe in a file name.
    pub fn compact(&self) -> String {
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// Reads exactly the form `rfc3339` writes (`YYYY-MM-DDTHH:MM:SSZ`, a
    /// fraction of a second allowed); anything else is `None`, never a guess.
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
            return None;
        }
        if b[13] != b':' || b[16] != b':' || *b.last()? != b'Z' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<u32> {
            let part = s.get(r)?;
            part.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| part.parse().ok())?
        };
        let frac = s.get(19..s.len() - 1)?;
        let frac_ok = frac.is_empty()
            || (frac.len() > 1
                && frac.starts_with('.')
                && frac[1..].bytes().all(|c| c.is_ascii_digit()));
        let t = Utc {
            year: i64::from(num(0..4)?),
            month: u8::try_from(num(5..7)?).ok()?,
            day: u8::try_from(num(8..10)?).ok()?,
            hour: u8::try_from(num(11..13)?).ok()?,
            minute: u8::try_from(num(14..16)?).ok()?,
            second: u8::try_from(num(17..19)?).ok()?,
        };
        let valid = frac_ok
            && (1..=12).contains(&t.month)
            && (1..=31).contains(&t.day)
            && t.hour < 24
            && t.minute < 60
            && t.second < 61;
        valid.then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_from_unix_seconds() {
        assert_eq!(Utc::from_unix(0).rfc3339(), "1970-01-01T00:00:00Z");
        let leap = Utc::from_unix(951_782_400 + 3_661);
        assert_eq!(leap.rfc3339(), "2000-02-29T01:01:01Z");
        assert_eq!(leap.compact(), "20000229-010101");
        assert_eq!(leap.human(), "2000-02-29 01:01 UTC");
    }

    #[test]
    fn parse_reads_what_rfc3339_writes_and_nothing_else() {
        for secs in [0, 951_782_400, 1_795_000_000, 4_102_444_799] {
            let t = Utc::from_unix(secs);
            assert_eq!(Utc::parse(&t.rfc3339()), Some(t));
        }
        assert!(Utc::parse("2026-11-22T14:03:07.25Z").is_some());
        for bad in [
            "",
            "2026-11-22",
            "2026-11-22 14:03:07Z",
            "2026-13-22T14:03:07Z",
            "2026-11-22T14:03:07+01:00",
            "2026-11-22T14:03:07.Z",
            "2026-1a-22T14:03:07Z",
            "\u{1b}]0;x\u{7}-11-22T14:03:07Z",
        ] {
            assert_eq!(Utc::parse(bad), None, "{bad:?}");
        }
    }
}
