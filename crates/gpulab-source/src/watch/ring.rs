//! The agents' records, read from the memory gpulab shares with them
//! ([`gpulab_events::ring`]) as untrusted input: only records an agent writes,
//! each kind of bad one said once with a count. Any process of the watched
//! program can write that memory, so nothing read here may stop the reading,
//! end the run or replace its header. Never interprets an event beyond its
//! kind.
//!
//! Each process of the program that records has a segment of its own. The
//! reader follows each from its claim to its process's end (seen through a
//! pidfd, or a newer segment of the same pid: an exec), reads what is left,
//! skips a record the process died in the middle of writing, and then says
//! what that process sent and lost (`detached`, made here from the counts
//! the segment holds) and frees the segment for another process.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpulab_events::ring::{Holder, Next, Region, SEGMENT_BYTES, SEGMENTS, Segment};
use gpulab_events::wire::{self, CallRecord, ObjectRecord};

use crate::clock::now_ns;
use crate::telemetry::{Pacer, SETTLE};
use crate::trace::sink::Sink;
use crate::trace::{self, AgentEvent, AgentState, Event, Note, NoteLevel};

use super::symbols;

/// Why a line was not passed on; each is warned about once, with its count at
/// the end.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Rejected {
    NotUtf8,
    Unreadable,
    /// A header no agent writes: the segment was written over.
    Corrupt,
    /// A kind only gpulab itself makes (`meta`, `end`, `sample`, `claim`…).
    NotAgents(&'static str),
}

impl Rejected {
    fn first(&self, detail: &str) -> String {
        match self {
            Rejected::NotUtf8 => "a record that is not UTF-8 reached the agents' memory and \
                 was skipped: no agent writes one, so a process of the program wrote it"
                .into(),
            Rejected::Unreadable => {
                format!("the agents' memory held an unreadable record, skipped: {detail}")
            }
            Rejected::Corrupt => format!(
                "a process of the program wrote over its agent's memory ({detail}): what it \
                 recorded after that point is not shown"
            ),
            Rejected::NotAgents(kind) => format!(
                "a `{kind}` event reached the agents' memory and was ignored: only gpulab makes \
                 those, so a process of the program forged it; the report's header and end \
                 are gpulab's own"
            ),
        }
    }

    fn summary(&self, count: u64) -> String {
        let what = match self {
            Rejected::NotUtf8 => "records that were not UTF-8".to_string(),
            Rejected::Unreadable => "unreadable records".into(),
            Rejected::Corrupt => "segments written over".into(),
            Rejected::NotAgents(kind) => format!("forged `{kind}` events"),
        };
        format!("the agents' memory held {count} {what} in all, each skipped")
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
        | Event::Framework(_)
        | Event::Misuse(_)
        | Event::DeviceRead(_) => None,
        Event::Meta(_) => Some("meta"),
        Event::Calling(_) => Some("calling"),
        Event::Block(_) => Some("block"),
        Event::Sample(_) => Some("sample"),
        Event::Note(_) => Some("note"),
        Event::Claim(_) => Some("claim"),
        Event::End(_) => Some("end"),
        Event::Load(_) => Some("load"),
        Event::GpuReading(_) => Some("gpu_reading"),
        Event::Prediction(_) => Some("prediction"),
        Event::Estimate(_) => Some("estimate"),
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

/// The most events one batch carries.
pub const BATCH_EVENTS: usize = 256;
/// The reader's nap while records flow, and longest while the program is quiet.
const NAP_MIN: Duration = Duration::from_millis(1);
const NAP_MAX: Duration = Duration::from_millis(8);
/// A process's first moments, when its runtime loads and its first context
/// comes, and the program's: read at the shortest nap, so the sampler (told
/// at each batch) reads soon after a call that made a context returns.
/// NVIDIA's OpenCL makes a context in 130 ms and a tutorial program
/// releases it 7 ms later: after the quiet of the making call the nap had
/// grown to 8 ms, and the reading the record asked for came after the
/// release (`hoocl_vadd_chain` on the H200: 0% of its memory named).
pub const YOUNG: Duration = Duration::from_secs(1);

/// The nap after a pass that read nothing: longer while quiet, up to
/// [`NAP_MAX`], but the shortest while the program or a process is young.
fn next_nap(nap: Duration, young: bool) -> Duration {
    if young {
        NAP_MIN
    } else {
        (nap * 2).min(NAP_MAX)
    }
}

/// The processes whose agent reported, and those whose end was said: kept
/// by the reader, asked by the supervisor.
#[derive(Default)]
pub(super) struct Agents {
    attached: std::collections::BTreeSet<u32>,
    detached: std::collections::BTreeSet<u32>,
}

impl Agents {
    pub(super) fn saw(&mut self, event: &Event) {
        if let Event::Agent(a) = event {
            match a.state {
                trace::AgentState::Detached { .. } => self.detached.insert(a.pid),
                _ => self.attached.insert(a.pid),
            };
        }
    }

    /// Whether `pid`'s agent reported.
    pub(super) fn reported(&self, pid: u32) -> bool {
        self.attached.contains(&pid)
    }
}

/// How the program gpulab started ended, as the supervisor reaped it: the
/// signal of the one process whose end gpulab reaps itself.
#[derive(Default)]
pub struct ProgramEnd {
    /// The program's pid, once it started.
    pid: std::sync::atomic::AtomicU32,
    exited: AtomicBool,
    /// The signal it died of; 0 when none.
    signal: std::sync::atomic::AtomicI32,
}

impl ProgramEnd {
    /// The program started as `pid`.
    pub fn started(&self, pid: u32) {
        self.pid.store(pid, Ordering::SeqCst);
    }

    /// The program has exited (and was reaped), of `signal` if one.
    pub fn exited(&self, signal: Option<i32>) {
        self.signal.store(signal.unwrap_or(0), Ordering::SeqCst);
        self.exited.store(true, Ordering::SeqCst);
    }

    pub fn has_exited(&self) -> bool {
        self.exited.load(Ordering::SeqCst)
    }

    /// The signal process `pid` died of, where gpulab can tell: the program's
    /// own from its reaping (waited for, a moment, once its process is
    /// gone), any other's from its zombie.
    fn signal_of(&self, pid: u32) -> Option<i32> {
        if let Some(signal) = zombie_signal(pid) {
            return Some(signal);
        }
        if pid != self.pid.load(Ordering::SeqCst) {
            return None;
        }
        let deadline = Instant::now() + Duration::from_millis(200);
        while !self.has_exited() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

/// Reads the agents' records until the program is done: once it has exited
/// (`end`) and no process is recording any more, or at once when `abandoned`
/// is set (what is published by then still goes on). Records go on in
/// batches of at most [`BATCH_EVENTS`]; stacks go through
/// [`symbols::name_stacks`] on a thread of their own, so reading a large
/// library's symbols never holds up the reading.
///
/// Returns false when nobody listens any more (the consumer is gone).
pub fn read_ring(
    region: Region<'_>,
    out: &Out<'_>,
    agents: &Mutex<Agents>,
    end: &ProgramEnd,
    abandoned: &AtomicBool,
) -> bool {
    // gpulab's heartbeat, on a thread of its own: it goes on while the
    // reading waits for the consumer, so a writer waiting for room waits for a
    // gpulab that is behind and gives up only on one that stopped.
    let reading = AtomicBool::new(true);
    std::thread::scope(|s| {
        s.spawn(|| {
            while reading.load(Ordering::Relaxed) {
                region.beat();
                std::thread::sleep(BEAT_EVERY);
            }
        });
        let listened = read_until_done(region, out, agents, end, abandoned);
        reading.store(false, Ordering::Relaxed);
        listened
    })
}

/// How often gpulab's heartbeat moves.
const BEAT_EVERY: Duration = Duration::from_millis(10);

fn read_until_done(
    region: Region<'_>,
    out: &Out<'_>,
    agents: &Mutex<Agents>,
    end: &ProgramEnd,
    abandoned: &AtomicBool,
) -> bool {
    let mut reader = Reader {
        region,
        out,
        agents,
        end,
        listened: true,
        followed: (0..SEGMENTS).map(|_| None).collect(),
        rejected: Rejections::default(),
        buf: Vec::new(),
        batch: Vec::new(),
        naming: None,
        record_no: 0,
    };
    let mut nap = NAP_MIN;
    let started = Instant::now();
    let listened = loop {
        // Read before the pass: a pass that starts after the program exited
        // sees everything its processes published.
        let last = abandoned.load(Ordering::SeqCst);
        let exited = end.has_exited();
        let records = reader.pass(last);
        if !reader.listened || !out.send(&mut reader.batch) {
            break false;
        }
        if last || (exited && reader.followed.iter().all(Option::is_none)) {
            break true;
        }
        // Records came: the next pass at once (a busy program fills its
        // segment faster than any nap); none: a nap, longer while quiet.
        if records > 0 {
            nap = NAP_MIN;
            continue;
        }
        std::thread::sleep(nap);
        let young = started.elapsed() < YOUNG
            || reader
                .followed
                .iter()
                .flatten()
                .any(|f| f.seen.elapsed() < YOUNG);
        nap = next_nap(nap, young);
    };
    let unclaimed = region.unclaimed();
    if unclaimed > 0 {
        reader.batch.push(warning(format!(
            "{unclaimed} process(es) of the program found all {SEGMENTS} of the agents' \
             segments taken and recorded nothing: more processes recorded at once than gpulab \
             follows"
        )));
    }
    let Reader {
        rejected,
        mut batch,
        naming,
        ..
    } = reader;
    rejected.finish(&mut batch);
    let listened = listened && out.send(&mut batch);
    // Stacks still being named come before the end of the stream.
    if let Some(Some((to, thread))) = naming {
        drop(to);
        let _ = thread.join();
    }
    listened
}

/// Where the batches go, and the sampler each one pokes.
pub struct Out<'a> {
    pub sink: &'a Sink,
    pub pacer: &'a Pacer,
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

/// A segment followed from its claim to its process's end.
struct Followed {
    pid: u32,
    parent_pid: u32,
    claim: u64,
    pos: u64,
    /// Readable once the process has exited; None when it could not be
    /// opened (the process was gone already).
    pidfd: Option<OwnedFd>,
    /// When the reader first saw its claim.
    seen: Instant,
    /// Records read, and records its process died in the middle of writing.
    records: u64,
    unfinished: u64,
    /// The APIs it attached to, as its `detached` record names them.
    apis: Vec<String>,
    /// Written over by the program: reading it stopped.
    corrupt: bool,
    /// A newer segment of the same pid exists: the process exec'd.
    replaced: bool,
}

impl Followed {
    fn new(pid: u32, parent_pid: u32, claim: u64, pos: u64) -> Followed {
        let pidfd = rustix::process::Pid::from_raw(pid as i32).and_then(|p| {
            rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
        });
        Followed {
            pid,
            parent_pid,
            claim,
            pos,
            pidfd,
            seen: Instant::now(),
            records: 0,
            unfinished: 0,
            apis: Vec::new(),
            corrupt: false,
            replaced: false,
        }
    }

    /// Has its process (or its image) ended?
    fn ended(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        if self.replaced {
            return true;
        }
        let Some(fd) = &self.pidfd else { return true };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0)
    }
}

struct Reader<'r> {
    region: Region<'r>,
    /// Where records go, who reported, and how the program ended.
    out: &'r Out<'r>,
    agents: &'r Mutex<Agents>,
    end: &'r ProgramEnd,
    /// False once nobody listens any more.
    listened: bool,
    followed: Vec<Option<Followed>>,
    rejected: Rejections,
    buf: Vec<u8>,
    batch: Vec<Event>,
    naming: Option<Option<symbols::Naming>>,
    record_no: usize,
}

impl Reader<'_> {
    /// Looks at every segment once: new claims are followed, each followed
    /// one is read, and one whose process ended is read to its end, said and
    /// freed. In claim order, so an image's records come before those of the
    /// image it exec'd. Returns the records read.
    fn pass(&mut self, give_up: bool) -> u64 {
        for i in 0..SEGMENTS {
            let Some(seg) = self.region.segment(i) else {
                continue;
            };
            let Holder::Live {
                pid,
                parent_pid,
                claim,
            } = seg.holder()
            else {
                continue;
            };
            if self.followed[i].as_ref().is_some_and(|f| f.claim == claim) {
                continue;
            }
            // One pid's segments: all but the newest claim are images that
            // exec'd, whichever is seen first.
            // Positions go on across holders: the new one's start where the
            // last one's reading ended.
            let mut new = Followed::new(pid, parent_pid, claim, seg.read_position());
            for f in self.followed.iter_mut().flatten() {
                if f.pid == pid {
                    f.replaced |= f.claim < claim;
                    new.replaced |= claim < f.claim;
                }
            }
            self.followed[i] = Some(new);
        }
        let mut order: Vec<(u64, usize)> = self
            .followed
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.as_ref().map(|f| (f.claim, i)))
            .collect();
        order.sort_unstable();
        let mut records = 0;
        for (_, i) in order {
            let Some(seg) = self.region.segment(i) else {
                continue;
            };
            // Whether it ended is asked before it is read: what a process
            // published before it ended is all there by then.
            let ended = self.followed[i].as_ref().is_some_and(Followed::ended);
            records += self.read(i, &seg);
            if ended {
                self.finish(i, &seg);
            } else if give_up {
                // Still running: what it published is read, nothing is said
                // of its end (the supervisor says it was left running).
                self.followed[i] = None;
            }
        }
        records
    }

    /// Reads what segment `i` has published since the last look.
    fn read(&mut self, i: usize, seg: &Segment<'_>) -> u64 {
        let Some(f) = self.followed[i].as_mut() else {
            return 0;
        };
        if f.corrupt {
            // Nothing more is read of it; what its process writes is let go
            // at once, so its writers never wait for room.
            let written = seg.written();
            if written > f.pos && written - f.pos <= SEGMENT_BYTES {
                f.pos = written;
                seg.consumed(written);
            }
            return 0;
        }
        let (pid, mut pos) = (f.pid, f.pos);
        let f_pos = pos;
        let mut read = 0;
        // Stacks travel as records of their own; the count is of the
        // records the report counts as received (as an agent counted them).
        let mut counted = 0;
        loop {
            match seg.read(&mut pos, &mut self.buf) {
                Next::Record(kind) => {
                    read += 1;
                    self.record_no += 1;
                    let event = decode(kind, &self.buf, pid, self.record_no);
                    match event {
                        Ok(Some(event)) => {
                            counted += u64::from(!matches!(event, Event::Stack(_)));
                            if let Event::Agent(a) = &event {
                                if let Some(f) = self.followed[i].as_mut()
                                    && !f.apis.contains(&a.api)
                                {
                                    f.apis.push(a.api.clone());
                                }
                                lock(self.agents).saw(&event);
                            }
                            self.listened &=
                                pass_on(event, &mut self.naming, self.out.sink, &mut self.batch);
                        }
                        Ok(None) => {}
                        Err((why, detail)) => {
                            counted += 1;
                            self.rejected.add(why, &detail, &mut self.batch);
                        }
                    }
                    if self.batch.len() >= BATCH_EVENTS {
                        self.listened &= self.out.send(&mut self.batch);
                    }
                }
                Next::Nothing => break,
                Next::Corrupt => {
                    self.rejected.add(
                        Rejected::Corrupt,
                        &format!("pid {pid}'s segment"),
                        &mut self.batch,
                    );
                    if let Some(f) = self.followed[i].as_mut() {
                        f.corrupt = true;
                    }
                    break;
                }
            }
        }
        // Stored only when it moved: the writers' line is left alone by a
        // look that found nothing.
        if read > 0 || pos != f_pos {
            seg.consumed(pos);
        }
        if let Some(f) = self.followed[i].as_mut() {
            f.pos = pos;
            f.records += counted;
        }
        read
    }

    /// Segment `i`'s process ended: the rest is read (past any record it died
    /// in the middle of), its end is said with the counts, and the segment is
    /// free for another process.
    fn finish(&mut self, i: usize, seg: &Segment<'_>) {
        loop {
            self.read(i, seg);
            let Some(f) = self.followed[i].as_mut() else {
                return;
            };
            if f.corrupt || f.pos >= seg.written() {
                break;
            }
            let mut pos = f.pos;
            if seg.skip_unfinished(&mut pos) == 0 {
                break;
            }
            f.pos = pos;
            f.unfinished += 1;
        }
        let Some(f) = self.followed[i].take() else {
            return;
        };
        let (dropped, coalesced, pending) = seg.counts();
        let (launch_ns, launches, call_ns, calls) = seg.observer();
        let observed = (launches + calls > 0).then_some(trace::Observed {
            launches,
            launch_ns,
            calls,
            call_ns,
            every: gpulab_events::ring::OBSERVED_EVERY,
        });
        let signal = if f.replaced {
            None
        } else {
            self.end.signal_of(f.pid)
        };
        let event = Event::Agent(AgentEvent {
            t_ns: now_ns(),
            pid: f.pid,
            parent_pid: f.parent_pid,
            api: if f.apis.is_empty() {
                "none".into()
            } else {
                f.apis.join("+")
            },
            state: AgentState::Detached {
                records: f.records,
                dropped,
                coalesced,
                signal,
                lost: pending,
                cut: f.unfinished,
                observed,
            },
        });
        lock(self.agents).saw(&event);
        self.batch.push(event);
        // Past everything reserved, unless what says so was written over.
        let written = seg.written();
        let end = if written > f.pos && written - f.pos <= SEGMENT_BYTES {
            written
        } else {
            f.pos
        };
        seg.free(end);
    }
}

fn lock(agents: &Mutex<Agents>) -> std::sync::MutexGuard<'_, Agents> {
    agents
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A record's event: calls and objects from their binary form, the rest
/// from their JSON line. None for a blank line.
fn decode(
    kind: u16,
    bytes: &[u8],
    pid: u32,
    record_no: usize,
) -> Result<Option<Event>, (Rejected, String)> {
    let bad = |what: &str| {
        (
            Rejected::Unreadable,
            format!("a {what} record that does not decode"),
        )
    };
    match kind {
        wire::CALL => CallRecord::decode(bytes)
            .map(|c| Some(c.into_event(pid)))
            .ok_or_else(|| bad("call")),
        wire::OBJECT => ObjectRecord::decode(bytes)
            .map(|o| Some(o.into_event()))
            .ok_or_else(|| bad("object")),
        wire::JSON => parse(record_no, bytes),
        other => Err((
            Rejected::Unreadable,
            format!("a record of kind {other}, which no agent writes"),
        )),
    }
}

/// The signal process `pid` died of, while it is a zombie (the exit code
/// `/proc/<pid>/stat` shows then, as `waitpid` would give it); None when it
/// exited, or was reaped before gpulab looked.
fn zombie_signal(pid: u32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // anything: the state is field 3, the exit code field 52.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() != Some(&"Z") {
        return None;
    }
    let code: i32 = fields.get(49)?.parse().ok()?;
    let signal = code & 0x7f;
    (signal != 0 && signal != 0x7f).then_some(signal)
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
    use gpulab_host::shared::SharedRegion;

    /// A pid no process has any more: one of a child already reaped.
    #[test]
    fn the_nap_stays_shortest_while_young_and_doubles_to_its_longest_after() {
        assert_eq!(next_nap(NAP_MAX, true), NAP_MIN);
        let mut nap = NAP_MIN;
        for _ in 0..10 {
            nap = next_nap(nap, false);
        }
        assert_eq!(nap, NAP_MAX);
        assert_eq!(next_nap(NAP_MIN, false), NAP_MIN * 2);
    }

    fn gone_pid() -> u32 {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait");
        pid
    }

    /// Everything the reader passes on once the program has exited.
    fn read(shared: &SharedRegion) -> Vec<Event> {
        let (sink, rx) = Sink::channel(1 << 16);
        let agents = Mutex::new(Agents::default());
        let pacer = Pacer::default();
        let out = Out {
            sink: &sink,
            pacer: &pacer,
        };
        let end = ProgramEnd::default();
        end.exited(None);
        assert!(read_ring(
            shared.region(),
            &out,
            &agents,
            &end,
            &AtomicBool::new(false)
        ));
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

    /// (pid, records, lost, cut) of each `detached`.
    fn detached(events: &[Event]) -> Vec<(u32, u64, u64, u64)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Agent(AgentEvent {
                    pid,
                    state:
                        AgentState::Detached {
                            records, lost, cut, ..
                        },
                    ..
                }) => Some((*pid, *records, *lost, *cut)),
                _ => None,
            })
            .collect()
    }

    fn binary_call(seq: u64) -> Vec<u8> {
        let mut out = Vec::new();
        CallRecord {
            seq,
            thread: 1,
            api: "clFinish",
            driver: "clFinish",
            begin_ns: 1,
            end_ns: 2,
            status: wire::Status::OpenCl(0),
            object: None,
            memory_step: None,
            freed_unseen: false,
        }
        .encode(&mut out);
        out
    }

    #[test]
    fn a_gone_process_is_read_to_its_end_said_and_its_segment_freed() {
        let shared = SharedRegion::new().expect("region");
        let pid = gone_pid();
        let seg = shared.region().claim(pid, 1).expect("claims");
        for seq in 0..10_000 {
            assert!(
                seg.write(wire::CALL, &binary_call(seq)),
                "a 2 MiB segment holds 10,000 calls"
            );
        }
        assert!(seg.write(wire::JSON, CALL.as_bytes()));
        let events = read(&shared);
        assert_eq!(calls(&events), 10_001);
        let Some(Event::Call(c)) = events.first() else {
            panic!("{:?}", events.first())
        };
        assert_eq!((c.pid, c.seq), (pid, 0), "the segment names the process");
        assert_eq!(detached(&events), vec![(pid, 10_001, 0, 0)]);
        assert!(
            matches!(events.last(), Some(Event::Agent(_))),
            "its end comes last"
        );
        assert_eq!(seg.holder(), Holder::Free);
    }

    #[test]
    fn forged_kinds_and_bad_records_are_skipped_and_said_once_with_a_count() {
        let shared = SharedRegion::new().expect("region");
        let seg = shared.region().claim(gone_pid(), 1).expect("claims");
        let end = r#"{"type":"end","data":{"t_ns":5,"status":{"kind":"finished"},"leaked":[]}}"#;
        for _ in 0..1000 {
            assert!(seg.write(wire::JSON, end.as_bytes()));
            assert!(seg.write(wire::JSON, b"junk"));
        }
        assert!(seg.write(wire::JSON, &[0xFF, 0xFE]));
        assert!(seg.write(wire::CALL, b"short"));
        assert!(seg.write(99, b"{}"));
        assert!(seg.write(wire::JSON, CALL.as_bytes()));
        let events = read(&shared);
        assert!(!events.iter().any(|e| matches!(e, Event::End(_))));
        assert_eq!(calls(&events), 1);
        let said = warnings(&events);
        assert!(
            said.iter().any(|w| w.contains("1000 forged `end` events")),
            "{said:#?}"
        );
        assert!(
            said.iter().any(|w| w.contains("1002 unreadable records")),
            "{said:#?}"
        );
        assert!(said.iter().any(|w| w.contains("not UTF-8")), "{said:#?}");
    }

    #[test]
    fn a_record_its_process_died_writing_is_counted_cut_and_the_rest_arrives() {
        let shared = SharedRegion::new().expect("region");
        let pid = gone_pid();
        let seg = shared.region().claim(pid, 1).expect("claims");
        assert!(seg.write(wire::CALL, &binary_call(0)));
        // Another thread of the process reserved room and the process died
        // before it published.
        let _never_published = seg.reserve(binary_call(1).len());
        assert!(seg.write(wire::CALL, &binary_call(2)));
        let events = read(&shared);
        let seqs: Vec<u64> = events
            .iter()
            .filter_map(|e| match e {
                Event::Call(c) => Some(c.seq),
                _ => None,
            })
            .collect();
        assert_eq!(seqs, vec![0, 2]);
        assert_eq!(detached(&events), vec![(pid, 2, 0, 1)], "cut, not lost");
        assert_eq!(seg.holder(), Holder::Free);
    }

    #[test]
    fn an_image_that_execd_ends_before_the_next_one_begins() {
        let shared = SharedRegion::new().expect("region");
        let pid = gone_pid();
        let region = shared.region();
        let first = region.claim(gone_pid(), 1).expect("claims");
        let old = region.claim(pid, 1).expect("claims");
        first.free(first.read_position());
        let new = region.claim(pid, 1).expect("claims again");
        assert!(new.index() < old.index());
        let attached = |exe: &str| {
            gpulab_events::to_line(&Event::Agent(AgentEvent {
                t_ns: 1,
                pid,
                parent_pid: 1,
                api: "opencl".into(),
                state: AgentState::Attached {
                    exe: exe.into(),
                    destruction: Vec::new(),
                    rank: None,
                },
            }))
        };
        // The new image's segment has the lower index: claim order decides.
        assert!(new.write(wire::JSON, attached("/after").trim_end().as_bytes()));
        assert!(old.write(wire::JSON, attached("/before").trim_end().as_bytes()));
        assert!(old.write(wire::CALL, &binary_call(0)));
        let events = read(&shared);
        let order: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                Event::Agent(a) => Some(match &a.state {
                    AgentState::Attached { exe, .. } => exe.clone(),
                    AgentState::Detached { records, .. } => format!("end {records}"),
                    _ => String::new(),
                }),
                _ => None,
            })
            .collect();
        assert_eq!(order, vec!["/before", "end 2", "/after", "end 1"]);
    }
}
