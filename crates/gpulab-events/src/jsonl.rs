//! JSON Lines: one event a line. The worker writes each event with one `write`, so
//! lines from a dying worker are whole or absent, never interleaved.

use std::io::{BufRead, Write};

use super::event::{Event, FORMAT_VERSION};

/// The oldest event format this gpulab still reads.
pub const MIN_FORMAT_VERSION: u32 = 1;

/// No event comes near this; a longer line is damage, not data.
pub const MAX_LINE: usize = 16 << 20;

pub type Result<T, E = TraceError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("line {line}: {message}")]
    Malformed { line: usize, message: String },
    #[error(
        "line {line}: recorded with event format {found}, this gpulab reads up to {FORMAT_VERSION}; upgrade gpulab"
    )]
    TooNew { line: usize, found: u32 },
    #[error(
        "line {line}: recorded with event format {found}, which this gpulab no longer reads (it reads {MIN_FORMAT_VERSION} to {FORMAT_VERSION}); re-record it, or report it with the gpulab that made it"
    )]
    TooOld { line: usize, found: u32 },
    #[error("the stream does not start with a `meta` event (is this a gpulab recording?)")]
    MissingMeta,
    #[error("line {line}: the first event must be a readable `meta` event: {message}")]
    BadMeta { line: usize, message: String },
    #[error("line {line}: longer than {} MiB; skipped", MAX_LINE >> 20)]
    HugeLine { line: usize },
    #[error("line {line}: not UTF-8 text (binary data?); skipped")]
    NotText { line: usize },
    /// Read, but at odds with the rest of the stream (a second `meta`, a time
    /// before the start): said, so a doctored or spliced file does not pass quietly.
    #[error("line {line}: {what}")]
    Inconsistent { line: usize, what: String },
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
        // serde quotes what it could not read (an unknown kind, a string where a
        // number goes): the file's own text, which must not act on a terminal.
        message: crate::printable::printable(&e.to_string()).into_owned(),
    })?;
    if let Event::Meta(m) = &event {
        if m.format_version > FORMAT_VERSION {
            return Err(TraceError::TooNew {
                line: line_no,
                found: m.format_version,
            });
        }
        if m.format_version < MIN_FORMAT_VERSION {
            return Err(TraceError::TooOld {
                line: line_no,
                found: m.format_version,
            });
        }
    }
    Ok(event)
}

/// A recording as far as it could be read: its events, and what was wrong with the
/// lines that were skipped (a truncated last line, a damaged one in the middle).
#[derive(Debug, Default)]
pub struct Recording {
    pub events: Vec<Event>,
    pub problems: Vec<TraceError>,
}

/// Reads a recording, skipping damaged lines and saying which. Refuses outright only
/// what cannot be a gpulab recording of a version it reads: no `meta` first, or a
/// `meta` from a newer or too old format.
pub fn read_recording(input: impl BufRead) -> Result<Recording> {
    let mut events = Vec::new();
    let problems = stream_recording(input, |e| events.push(e))?;
    Ok(Recording { events, problems })
}

/// [`read_recording`] without holding the events: each one kept goes to `keep`
/// as it is read (a report folds a recording of any size this way), and the
/// skipped lines' problems are returned.
pub fn stream_recording(
    mut input: impl BufRead,
    mut keep: impl FnMut(Event),
) -> Result<Vec<TraceError>> {
    let mut problems = Vec::new();
    let mut seen = Seen::default();
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        line_no += 1;
        let (n, complete) = read_bounded_line(&mut input, &mut buf)?;
        if n == 0 {
            break;
        }
        if !complete {
            problems.push(TraceError::HugeLine { line: line_no });
            continue;
        }
        let Ok(text) = std::str::from_utf8(&buf) else {
            if seen.start.is_none() {
                return Err(TraceError::MissingMeta);
            }
            problems.push(TraceError::NotText { line: line_no });
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match parse_line(line_no, text.trim_end()) {
            Ok(event) => {
                if seen.start.is_none() && !matches!(event, Event::Meta(_)) {
                    return Err(TraceError::MissingMeta);
                }
                match seen.at_odds(&event) {
                    Some((what, kept)) => {
                        let what = what.to_string();
                        problems.push(TraceError::Inconsistent {
                            line: line_no,
                            what,
                        });
                        if kept {
                            seen.note(&event);
                            keep(event);
                        }
                    }
                    None => {
                        seen.note(&event);
                        keep(event);
                    }
                }
            }
            Err(e @ (TraceError::TooNew { .. } | TraceError::TooOld { .. })) => return Err(e),
            Err(TraceError::Malformed { line, message }) if seen.start.is_none() => {
                return Err(TraceError::BadMeta { line, message });
            }
            Err(e) => problems.push(e),
        }
    }
    if seen.start.is_none() {
        return Err(TraceError::MissingMeta);
    }
    Ok(problems)
}

/// What the events kept so far tell about the next: the run's start (its
/// `meta`) and whether it ended.
#[derive(Default)]
struct Seen {
    start: Option<u64>,
    ended: bool,
}

impl Seen {
    fn note(&mut self, event: &Event) {
        match event {
            Event::Meta(m) if self.start.is_none() => self.start = Some(m.t_ns),
            Event::End(_) => self.ended = true,
            _ => {}
        }
    }

    /// What is wrong with `event` given the events before it, and whether to keep it.
    fn at_odds(&self, event: &Event) -> Option<(&'static str, bool)> {
        let start = self.start?;
        match event {
            Event::Meta(_) => return Some(("a second `meta` event; ignored", false)),
            Event::End(_) if self.ended => {
                return Some(("a second `end` event; ignored", false));
            }
            _ => {}
        }
        let t = event.t_ns()?;
        // The parent samples the device from before the worker exists (its start
        // is the worker's), for as long as the worker takes to report in.
        if matches!(event, Event::Sample(_)) && t < start && start - t <= BEFORE_START_NS {
            return None;
        }
        if t < start {
            Some((
                "its time is before the run's start (kept, but figures may be off)",
                true,
            ))
        } else if t - start > PLAUSIBLE_NS {
            Some((
                "its time is more than 30 days after the run's start; ignored",
                false,
            ))
        } else {
            None
        }
    }
}

/// Runs are hours long at most; a time further than this from the start is not
/// a time this run recorded.
const PLAUSIBLE_NS: u64 = 30 * 24 * 3600 * 1_000_000_000;

/// How long before the run's start its samples may be: the worker's own start,
/// context included, takes well under this.
const BEFORE_START_NS: u64 = 60 * 1_000_000_000;

/// One line into `buf` (without its newline), reading at most `MAX_LINE` bytes of
/// it; the rest of a longer line is consumed and dropped. Returns the bytes consumed
/// and whether the line was whole.
fn read_bounded_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
) -> std::io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut complete = true;
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            return Ok((consumed, complete));
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let body = if done {
            &chunk[..take - 1]
        } else {
            &chunk[..take]
        };
        if buf.len() + body.len() > MAX_LINE {
            complete = false;
        }
        if complete {
            buf.extend_from_slice(body);
        }
        input.consume(take);
        consumed += take;
        if done {
            return Ok((consumed, complete));
        }
    }
}

/// Read a whole stream strictly: the first damaged line is an error that says which.
pub fn read_events(input: impl BufRead) -> Result<Vec<Event>> {
    let rec = read_recording(input)?;
    match rec.problems.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(rec.events),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::*;

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
            expected: None,
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
