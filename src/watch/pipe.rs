//! The agent's pipe, read as untrusted input: bytes, lines capped at
//! [`LINE_CAP`], only the event kinds an agent sends, and each kind of bad
//! line said once with a count. Any process of the watched program can write to
//! the pipe, so nothing read here may stop the reading (a program whose agent
//! finds the pipe unread would block or die), end the run or replace its
//! header. Never interprets an event beyond its kind.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock::now_ns;
use crate::telemetry::{Pacer, SETTLE};
use crate::trace::sink::Sink;
use crate::trace::{self, Event, Note, NoteLevel};

use super::supervisor::Agents;
use super::symbols;

/// The longest line kept: an agent's longest record (a stack of 64 frames with
/// long paths) is a few KiB. A longer line is skipped to its newline without
/// being held whole.
pub const LINE_CAP: usize = 1 << 20;

/// Why a line was not passed on; each is warned about once, with its count at
/// the end.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Rejected {
    TooLong,
    NotUtf8,
    Unreadable,
    /// A kind only gpulab itself makes (`meta`, `end`, `sample`, `claim`…).
    NotAgents(&'static str),
}

impl Rejected {
    fn first(&self, detail: &str) -> String {
        match self {
            Rejected::TooLong => format!(
                "a line of over {} MiB reached the agent's pipe and was skipped: no agent \
                 writes one, so a process of the program wrote it",
                LINE_CAP >> 20
            ),
            Rejected::NotUtf8 => "a line that is not UTF-8 reached the agent's pipe and was \
                 skipped: no agent writes one, so a process of the program wrote it"
                .into(),
            Rejected::Unreadable => {
                format!("the agent's pipe carried an unreadable line, skipped: {detail}")
            }
            Rejected::NotAgents(kind) => format!(
                "a `{kind}` event reached the agent's pipe and was ignored: only gpulab makes \
                 those, so a process of the program forged it; the report's header and end \
                 are gpulab's own"
            ),
        }
    }

    fn summary(&self, count: u64) -> String {
        let what = match self {
            Rejected::TooLong => "lines over the cap".to_string(),
            Rejected::NotUtf8 => "lines that were not UTF-8".into(),
            Rejected::Unreadable => "unreadable lines".into(),
            Rejected::NotAgents(kind) => format!("forged `{kind}` events"),
        };
        format!("the agent's pipe carried {count} {what} in all, each skipped")
    }
}

/// The kinds an agent sends (`gpulab-agent`'s transport); the name of any other.
fn not_agents(event: &Event) -> Option<&'static str> {
    match event {
        Event::Call(_)
        | Event::Object(_)
        | Event::DeviceSpan(_)
        | Event::Agent(_)
        | Event::Stack(_)
        | Event::Framework(_) => None,
        Event::Meta(_) => Some("meta"),
        Event::Calling(_) => Some("calling"),
        Event::Block(_) => Some("block"),
        Event::Sample(_) => Some("sample"),
        Event::Note(_) => Some("note"),
        Event::Claim(_) => Some("claim"),
        Event::End(_) => Some("end"),
        Event::Load(_) => Some("load"),
        Event::GpuReading(_) => Some("gpu_reading"),
    }
}

/// Lines rejected so far, by why.
#[derive(Default)]
struct Rejections(BTreeMap<Rejected, u64>);

impl Rejections {
    /// Counts `why`; the first of its kind is said at once.
    fn add(&mut self, why: Rejected, detail: &str, batch: &mut Vec<Event>) {
        let count = self.0.entry(why.clone()).or_insert(0);
        *count += 1;
        if *count == 1 {
            batch.push(warning(why.first(detail)));
        }
    }

    /// One line per kind seen more than once, with the count.
    fn finish(self, batch: &mut Vec<Event>) {
        for (why, count) in self.0 {
            if count > 1 {
                batch.push(warning(why.summary(count)));
            }
        }
    }
}

fn warning(text: String) -> Event {
    Event::Note(Note {
        t_ns: now_ns(),
        level: NoteLevel::Warning,
        text,
        line: None,
    })
}

/// One line of the pipe: whole (without its newline), or too long (skipped).
enum Line {
    Whole,
    TooLong,
    End,
}

/// Reads the next line into `buf` (cleared first), keeping at most
/// [`LINE_CAP`] bytes of it: a longer line is consumed to its newline and
/// reported as [`Line::TooLong`]. A read error ends the pipe.
fn next_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> Line {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) | Err(_) => {
                return if buf.is_empty() && !too_long {
                    Line::End
                } else {
                    done(too_long)
                };
            }
            Ok(chunk) => chunk,
        };
        let (take, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long && buf.len() + take <= LINE_CAP {
            buf.extend_from_slice(&chunk[..take]);
        } else {
            too_long = true;
            buf.clear();
        }
        reader.consume(take + usize::from(newline));
        if newline {
            return done(too_long);
        }
    }
}

fn done(too_long: bool) -> Line {
    if too_long { Line::TooLong } else { Line::Whole }
}

/// The agent's lines, parsed and passed on in batches: what one read of the
/// pipe brought (at most [`BATCH_EVENTS`] events), so a busy program's calls
/// travel whole to the consumer instead of one channel message each. Every
/// other line is counted and said (once per kind of fault), and the reading
/// goes on to the pipe's end. Stacks go through [`symbols::name_stacks`] on a
/// thread of their own: reading a large library's symbols must never hold up
/// the pipe.
///
/// Returns false when nobody listens any more (the consumer is gone).
///
/// Each batch sent pokes `pacer`: the sampler reads once at every batch, and
/// fast for a moment after it.
pub fn read_pipe(reader: impl Read, sink: &Sink, agents: &Mutex<Agents>, pacer: &Pacer) -> bool {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut naming = None;
    let listened = read_lines(&mut reader, &Out { sink, pacer }, agents, &mut naming);
    // Stacks still being named come before the end of the stream.
    if let Some(Some((to, thread))) = naming {
        drop(to);
        let _ = thread.join();
    }
    listened
}

/// Where the batches go, and the sampler each one pokes.
struct Out<'a> {
    sink: &'a Sink,
    pacer: &'a Pacer,
}

impl Out<'_> {
    /// Sends what `batch` holds, if anything; false when nobody listens.
    fn send(&self, batch: &mut Vec<Event>) -> bool {
        if batch.is_empty() {
            return true;
        }
        let heard = self.sink.send(std::mem::take(batch));
        self.pacer.poke(SETTLE);
        heard
    }
}

fn read_lines(
    reader: &mut BufReader<impl Read>,
    out: &Out<'_>,
    agents: &Mutex<Agents>,
    naming: &mut Option<Option<symbols::Naming>>,
) -> bool {
    let mut rejected = Rejections::default();
    let mut buf = Vec::new();
    let mut batch = Vec::new();
    let mut line_no = 0;
    loop {
        // Before a read that may wait (no whole line left in what the last
        // one brought), the batch goes on.
        if (!reader.buffer().contains(&b'\n') || batch.len() >= BATCH_EVENTS)
            && !out.send(&mut batch)
        {
            return false;
        }
        line_no += 1;
        let (why, detail) = match next_line(reader, &mut buf) {
            Line::End => break,
            Line::TooLong => (Rejected::TooLong, String::new()),
            Line::Whole => match parse(line_no, &buf) {
                Ok(None) => continue,
                Ok(Some(event)) => {
                    if let Event::Agent(_) = &event {
                        match agents.lock() {
                            Ok(mut a) => a.saw(&event),
                            Err(p) => p.into_inner().saw(&event),
                        }
                    }
                    if !pass_on(event, naming, out.sink, &mut batch) {
                        return false;
                    }
                    continue;
                }
                Err(rejected) => rejected,
            },
        };
        rejected.add(why, &detail, &mut batch);
    }
    rejected.finish(&mut batch);
    out.send(&mut batch)
}

/// The most events one batch of the pipe carries.
pub const BATCH_EVENTS: usize = 256;

/// The pipe's read end, read until gpulab gives up on it: a process the
/// program left behind may hold the pipe open for ever, and the stream must
/// still end. Looks every [`GIVE_UP_CHECK`] whether it was given up on; then
/// reads as the end of the pipe.
pub struct Abandonable<R> {
    pub inner: R,
    pub abandoned: Arc<AtomicBool>,
}

/// How often a waiting read looks whether the pipe was given up on.
const GIVE_UP_CHECK: rustix::time::Timespec = rustix::time::Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};

impl<R: Read + AsFd> Read for Abandonable<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use rustix::event::{PollFd, PollFlags, poll};
        loop {
            if self.abandoned.load(Ordering::SeqCst) {
                return Ok(0);
            }
            let mut fds = [PollFd::new(&self.inner, PollFlags::IN)];
            match poll(&mut fds, Some(&GIVE_UP_CHECK)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => continue,
                Ok(_) => return self.inner.read(buf),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// An agent's event from one line; None for a blank line.
fn parse(line_no: usize, bytes: &[u8]) -> Result<Option<Event>, (Rejected, String)> {
    let text = std::str::from_utf8(bytes).map_err(|_| (Rejected::NotUtf8, String::new()))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let event = trace::jsonl::parse_line(line_no, text)
        .map_err(|e| (Rejected::Unreadable, e.to_string()))?;
    match not_agents(&event) {
        Some(kind) => Err((Rejected::NotAgents(kind), String::new())),
        None => Ok(Some(event)),
    }
}

/// Puts `event` in the batch, or a stack through the naming thread (started
/// at the first stack); false when nobody listens any more.
fn pass_on(
    event: Event,
    naming: &mut Option<Option<symbols::Naming>>,
    sink: &Sink,
    batch: &mut Vec<Event>,
) -> bool {
    match event {
        Event::Stack(stack) => {
            match naming.get_or_insert_with(|| symbols::name_stacks(sink.clone())) {
                Some((to, _)) => to.send(stack).is_ok(),
                // No thread to name them: they pass on as the agent named them.
                None => {
                    batch.push(Event::Stack(stack));
                    true
                }
            }
        }
        event => {
            batch.push(event);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Vec<Event> {
        let (sink, rx) = Sink::channel(1024);
        let agents = Mutex::new(Agents::default());
        assert!(read_pipe(bytes, &sink, &agents, &Pacer::default()));
        drop(sink);
        rx.into_iter().flatten().collect()
    }

    fn warnings(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Note(n) => Some(n.text.clone()),
                _ => None,
            })
            .collect()
    }

    const CALL: &str = r#"{"type":"call","data":{"seq":0,"pid":7,"thread":0,"line":null,"iter":[],"tag":null,"api":"clFinish","driver":"clFinish","begin_ns":1,"end_ns":2,"status":{"kind":"ok"},"expect_error":false,"mem_before":null,"mem_after":null,"object":null}}"#;

    fn calls(events: &[Event]) -> usize {
        events
            .iter()
            .filter(|e| matches!(e, Event::Call(_)))
            .count()
    }

    #[test]
    fn a_line_that_is_not_utf8_is_skipped_and_the_reading_goes_on() {
        let mut bytes = vec![0xFF, b'\n'];
        bytes.extend_from_slice(format!("{CALL}\n").as_bytes());
        let events = read(&bytes);
        assert_eq!(calls(&events), 1, "{events:?}");
        assert_eq!(warnings(&events).len(), 1);
        assert!(warnings(&events)[0].contains("not UTF-8"));
    }

    #[test]
    fn forged_kinds_are_ignored_and_said_once_with_a_count() {
        let meta = r#"{"type":"end","data":{"t_ns":5,"status":{"kind":"finished"},"leaked":[]}}"#;
        let mut input = String::new();
        for _ in 0..1000 {
            input.push_str(meta);
            input.push('\n');
            input.push_str("junk\n");
        }
        input.push_str(CALL);
        input.push('\n');
        let events = read(input.as_bytes());
        assert!(!events.iter().any(|e| matches!(e, Event::End(_))));
        assert_eq!(calls(&events), 1);
        let said = warnings(&events);
        assert_eq!(said.len(), 4, "{said:#?}");
        assert!(said.iter().any(|w| w.contains("1000 forged `end` events")));
        assert!(said.iter().any(|w| w.contains("1000 unreadable lines")));
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_without_being_kept_whole() {
        let mut bytes = vec![b'x'; LINE_CAP * 3 + 5];
        bytes.push(b'\n');
        bytes.extend_from_slice(CALL.as_bytes());
        let events = read(&bytes);
        assert_eq!(calls(&events), 1);
        assert!(warnings(&events)[0].contains("over 1 MiB"));
        let mut buf = Vec::new();
        let mut reader = BufReader::new(&bytes[..]);
        assert!(matches!(next_line(&mut reader, &mut buf), Line::TooLong));
        assert!(buf.capacity() <= LINE_CAP + 64 * 1024, "{}", buf.capacity());
        // The last line has no newline: it still counts.
        assert!(matches!(next_line(&mut reader, &mut buf), Line::Whole));
        assert!(matches!(next_line(&mut reader, &mut buf), Line::End));
    }
}
