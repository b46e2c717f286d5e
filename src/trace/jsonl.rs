//! JSON Lines: one event a line. The worker writes each event with one `write`, so
//! lines from a dying worker are whole or absent, never interleaved.

use std::io::{BufRead, Write};

use super::event::{Event, FORMAT_VERSION};

pub type Result<T, E = TraceError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("line {line}: {message}")]
    Malformed { line: usize, message: String },
    #[error(
        "line {line}: recorded with event format {found}, this gpulab reads up to {FORMAT_VERSION}; upgrade gpulab"
    )]
    TooNew { line: usize, found: u32 },
    #[error("the stream does not start with a `meta` event")]
    MissingMeta,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The event as one line, newline included.
pub fn to_line(event: &Event) -> String {
    // Serializing our own plain data types cannot fail (no maps with non-string keys).
    let mut s = serde_json::to_string(event).unwrap_or_else(|e| {
        format!(r#"{{"type":"note","data":{{"t_ns":0,"level":"warning","text":"unserializable event: {e}","line":null}}}}"#)
    });
    s.push('\n');
    s
}

/// Write one event in a single `write_all` and flush, so a reader never sees half a line.
pub fn write_event(out: &mut impl Write, event: &Event) -> std::io::Result<()> {
    out.write_all(to_line(event).as_bytes())?;
    out.flush()
}

/// Parse one line of a stream.
pub fn parse_line(line_no: usize, line: &str) -> Result<Event> {
    let event: Event = serde_json::from_str(line).map_err(|e| TraceError::Malformed {
        line: line_no,
        message: e.to_string(),
    })?;
    if let Event::Meta(m) = &event
        && m.format_version > FORMAT_VERSION
    {
        return Err(TraceError::TooNew {
            line: line_no,
            found: m.format_version,
        });
    }
    Ok(event)
}

/// Read a whole stream; stops at the first bad line and says which.
pub fn read_events(input: impl BufRead) -> Result<Vec<Event>> {
    let mut events = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        events.push(parse_line(i + 1, &line)?);
    }
    if !matches!(events.first(), Some(Event::Meta(_))) {
        return Err(TraceError::MissingMeta);
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::*;

    #[test]
    fn events_round_trip_through_a_line() {
        let e = Event::Note(Note {
            t_ns: 5,
            level: NoteLevel::Info,
            text: "budget reached".into(),
            line: Some(3),
        });
        let line = to_line(&e);
        assert!(line.starts_with(r#"{"type":"note","data":{"#));
        assert_eq!(parse_line(1, line.trim_end()).unwrap(), e);
    }

    #[test]
    fn infinite_claim_values_survive_a_round_trip() {
        let e = Event::Claim(ClaimVerdict {
            name: "c".into(),
            text: "t".into(),
            expr: "release_lag_ms(r) < 5".into(),
            requires: None,
            values: [
                ("release_lag_ms(r)".to_string(), f64::INFINITY),
                ("x".to_string(), 1.5),
            ]
            .into_iter()
            .collect(),
            verdict: Verdict::DoesNotHold,
            reason: None,
        });
        let line = to_line(&e);
        assert!(line.contains(r#""release_lag_ms(r)":"inf""#), "{line}");
        assert_eq!(parse_line(1, line.trim_end()).unwrap(), e);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = parse_line(
            7,
            r#"{"type":"note","data":{"t_ns":1,"level":"info","text":"x","line":null,"extra":1}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("line 7:"), "{err}");
    }

    #[test]
    fn a_stream_must_start_with_meta() {
        let err = read_events(std::io::Cursor::new(
            r#"{"type":"note","data":{"t_ns":1,"level":"info","text":"x","line":null}}"#,
        ))
        .unwrap_err();
        assert!(matches!(err, TraceError::MissingMeta));
    }
}
