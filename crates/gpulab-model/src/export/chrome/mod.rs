//! Chrome trace-event JSON (what chrome://tracing and Perfetto open) from a Run:
//! the host lane with every call and its arguments (a watched program: a
//! process per process, named by its rank and pid, and a track per thread that
//! made calls, see `layout`), one track per queue or stream with the device
//! spans, slices that nest on each track (`nesting`), device memory as a counter track (named by what it
//! reads: NVML's device memory, or the worker's RSS on a CPU device), a flow arrow
//! from each enqueue or launch to the device work it started (as Nsight Systems
//! links them), and each object's life as async slices (held by the lab, then held
//! by the driver until destroyed).
//!
//! The trace is written from the recording as it is read, not from a `Run`: the
//! one fold of events into a model keeps a bounded window of calls, and a trace
//! draws every call, so it reads the events themselves (two passes: `outline`
//! first, for what the header needs), folding object lives with the run's own
//! ledger fold. Its memory is bounded by a chunk of serialised events (`sorted`)
//! and the objects alive at a time, whatever the recording's length: a 58 MB
//! recording (200,000 calls) took 411 MB held whole in a `Run`.

mod counters;
mod event;
mod layout;
mod nesting;
mod sorted;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, BufWriter, Write};

use super::outline::{NearCalls, Outline};
use crate::run::ObjState;
use crate::run::objects;
use crate::trace::{CallStatus, Event};
use counters::counter_name;
use event::{Args, OtherData, TraceEvent, other_data};
use layout::{HOST_TID, Layout, OVERLAP_TID_BASE};
use nesting::{Nesting, Placed};
use sorted::{Key, Slice, Sorted};

/// A trace's parts, as the trace built in memory ordered events of equal time.
/// The counter track of a watched program's memory by share.
const SHARES_COUNTER: &str = "who holds the program's memory (MiB)";
const CALLS: u8 = 0;
const SPANS: u8 = 1;
const FLOWS: u8 = 2;
const COUNTERS: u8 = 3;
const NOTES: u8 = 4;
const LIVES: u8 = 5;

/// A trace of one or more recordings (`export --compare`: each a process of its
/// own, its time from its own start, so that Perfetto stacks them on one axis).
/// Each recording is a function that hands over its events in order, from the
/// start, each time it is called: it is read twice.
pub struct Trace<R> {
    recordings: Vec<R>,
    outlines: Vec<Outline>,
}

impl<R> Trace<R>
where
    R: Fn(&mut dyn FnMut(Event)) -> io::Result<()>,
{
    /// The first pass over every recording: what the header needs.
    pub fn outline(recordings: Vec<R>) -> io::Result<Self> {
        let outlines = recordings
            .iter()
            .map(|r| Outline::of(|each| r(each)))
            .collect::<io::Result<_>>()?;
        Ok(Trace {
            recordings,
            outlines,
        })
    }

    /// The second pass: the whole trace as one JSON document to `out`, its events
    /// in time order.
    pub fn write(&self, out: impl Write) -> io::Result<()> {
        // Two recordings may carry the same pids; a process is one of them.
        let mut taken = BTreeSet::new();
        let layouts: Vec<Layout> = self
            .outlines
            .iter()
            .map(|o| Layout::new(o, &mut taken))
            .collect();
        let mut sorted = Sorted::default();
        for (run, ((r, o), layout)) in self
            .recordings
            .iter()
            .zip(&self.outlines)
            .zip(&layouts)
            .enumerate()
        {
            let mut tracks = Tracks::new(o, layout, run as u32);
            let mut failed = None;
            r(&mut |e| {
                if failed.is_none()
                    && let Err(x) = tracks.event(&e, &mut sorted)
                {
                    failed = Some(x);
                }
            })?;
            if let Some(x) = failed {
                return Err(x);
            }
            tracks.finish(&mut sorted)?;
        }
        let mut out = BufWriter::new(out);
        out.write_all(b"{\"traceEvents\":[")?;
        let mut first = true;
        let mut put = |out: &mut BufWriter<_>, bytes: &[u8]| {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            out.write_all(bytes)
        };
        let mut names: HashMap<(u32, u64), String> = HashMap::new();
        for (o, layout) in self.outlines.iter().zip(&layouts) {
            for e in layout.header(o) {
                if let (Args::Name { name }, "thread_name") = (&e.args, &*e.name) {
                    names.insert((e.pid, e.tid), name.to_string());
                }
                put(&mut out, &serde_json::to_vec(&e)?)?;
            }
        }
        let mut nesting = Nesting::default();
        let mut overlaps: HashMap<((u32, u64), usize), u64> = HashMap::new();
        sorted.drain(|key, bytes| {
            let Some(slice) = key.slice else {
                return put(&mut out, bytes);
            };
            let n = match nesting.place(slice.track, slice.begin, slice.end) {
                Placed::OnItsTrack => return put(&mut out, bytes),
                Placed::Overlapping(n) => n,
            };
            let (pid, tid) = slice.track;
            let next = OVERLAP_TID_BASE + overlaps.len() as u64;
            let lane = *overlaps.entry((slice.track, n)).or_insert(next);
            if lane == next {
                let own = names.get(&slice.track).map_or("a track", String::as_str);
                let e = TraceEvent {
                    args: Args::Name {
                        name: layout::overlap_name(own, n),
                    },
                    ..TraceEvent::new("thread_name", "M", pid, lane)
                };
                put(&mut out, &serde_json::to_vec(&e)?)?;
            }
            let mut e: serde_json::Value = serde_json::from_slice(bytes)?;
            e["tid"] = lane.into();
            if let Some(args) = e.get_mut("args").and_then(|a| a.as_object_mut()) {
                args.insert("moved_from_tid".into(), tid.into());
            }
            put(&mut out, &serde_json::to_vec(&e)?)
        })?;
        out.write_all(b"],\"displayTimeUnit\":\"ms\",\"otherData\":")?;
        let other = OtherData {
            overlapping_slices_moved: nesting.moved(),
            ..other_data(&self.outlines)
        };
        serde_json::to_writer(&mut out, &other)?;
        out.write_all(b"}")?;
        out.flush()
    }
}

/// What the trace keeps of a call for the device spans it started: its
/// times and its track.
#[derive(Debug, Clone, Copy)]
struct Near {
    begin: u64,
    end: u64,
    track: (u32, u64),
}

/// A device span whose call has not come yet.
struct Waiting {
    span: u64,
    name: String,
    queue: u64,
    begin_ns: u64,
}

/// One recording's timed events, made as its events arrive: the host lane with
/// every call and its arguments, one track per queue or stream with the device
/// spans, memory as a counter track, a flow arrow from each enqueue or launch to
/// the device work it started (as Nsight Systems links them), and each object's
/// life as async slices (held by the lab, then by the driver until destroyed).
struct Tracks<'a> {
    outline: &'a Outline,
    layout: &'a Layout,
    /// The process of the whole run (counters, notes).
    pid: u32,
    run: u32,
    t0: u64,
    end_ns: u64,
    script: BTreeMap<u32, &'a str>,
    counter: &'static str,
    /// Events of the stream so far, and of each part.
    index: u64,
    calls: u64,
    spans: u64,
    readings: u64,
    notes: u64,
    near: NearCalls<Near>,
    /// Times of the calls the outline found far from their spans.
    pinned: HashMap<u64, Near>,
    waiting: HashMap<u64, Vec<Waiting>>,
    /// Objects whose life has not ended (the driver has not destroyed them).
    open: BTreeMap<u64, ObjState>,
    /// A watched program's stacks, named by their `stack` events (each comes
    /// before any object that names it), as the report says each frame.
    stacks: HashMap<u64, Vec<String>>,
}

impl<'a> Tracks<'a> {
    fn new(outline: &'a Outline, layout: &'a Layout, run: u32) -> Self {
        let script = outline
            .meta
            .as_ref()
            .and_then(|m| m.lab.as_ref())
            .map(|l| l.script.iter().map(|(n, t)| (*n, t.as_str())).collect())
            .unwrap_or_default();
        Tracks {
            outline,
            layout,
            pid: layout.program,
            run,
            t0: outline.t0(),
            end_ns: outline.end_ns(),
            script,
            counter: counter_name(outline.meta.as_ref()),
            index: 0,
            calls: 0,
            spans: 0,
            readings: 0,
            notes: 0,
            near: NearCalls::default(),
            pinned: HashMap::new(),
            waiting: HashMap::new(),
            open: BTreeMap::new(),
            stacks: HashMap::new(),
        }
    }

    fn us(&self, t: u64) -> f64 {
        (t as f64 - self.t0 as f64) / 1e3
    }

    fn key(&self, t: u64, part: u8, idx: u64, sub: u8) -> Key {
        Key {
            ts: self.us(t),
            run: self.run,
            part,
            idx,
            sub,
            slice: None,
        }
    }

    /// The key of a complete slice `begin..end` on `track`.
    fn slice_key(&self, (begin, end): (u64, u64), track: (u32, u64), part: u8, idx: u64) -> Key {
        let rel = |t: u64| {
            (i128::from(t) - i128::from(self.t0)).clamp(i128::from(i64::MIN), i128::from(i64::MAX))
                as i64
        };
        Key {
            slice: Some(Slice {
                track,
                begin: rel(begin),
                end: rel(end.max(begin)),
            }),
            ..self.key(begin, part, idx, 0)
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "a catalog: one arm per kind of event the trace draws"
    )]
    fn event(&mut self, event: &Event, out: &mut Sorted) -> io::Result<()> {
        let index = self.index;
        self.index += 1;
        let pid = self.pid;
        match event {
            Event::Call(c) => {
                if let Some(m) = c.mem_before {
                    self.reading(index, c.begin_ns, m, false, out)?;
                }
                if let Some(m) = c.mem_after {
                    self.reading(index, c.end_ns, m, false, out)?;
                }
                let track = self.layout.call(c.pid, c.thread);
                let status: Cow<str> = match &c.status {
                    CallStatus::Ok => "ok".into(),
                    CallStatus::Directive => "directive".into(),
                    CallStatus::Error { name, code } => format!("{name} ({code})").into(),
                };
                let e = TraceEvent {
                    cat: Some("call"),
                    ts: Some(self.us(c.begin_ns)),
                    dur: Some(c.end_ns.saturating_sub(c.begin_ns) as f64 / 1e3),
                    args: Args::Call {
                        line: c.line,
                        text: c.line.and_then(|l| self.script.get(&l).copied()),
                        driver: &c.driver,
                        status,
                        tag: c.tag.as_deref(),
                        iteration: &c.iter,
                        mem_before: c.mem_before,
                        mem_after: c.mem_after,
                    },
                    ..TraceEvent::new(c.api.as_str(), "X", track.0, track.1)
                };
                let key = self.slice_key((c.begin_ns, c.end_ns), track, CALLS, self.calls);
                out.push(key, |b| serde_json::to_writer(b, &e))?;
                if let Some(m) = &c.cuda {
                    self.pools(c.end_ns, m, out)?;
                }
                self.calls += 1;
                let times = Near {
                    begin: c.begin_ns,
                    end: c.end_ns,
                    track,
                };
                self.near.push(c.seq, times);
                if self.outline.far.contains(&c.seq) {
                    self.pinned.insert(c.seq, times);
                }
                for w in self.waiting.remove(&c.seq).unwrap_or_default() {
                    self.flow(&w, times, out)?;
                }
            }
            Event::DeviceSpan(s) => {
                let track = self.layout.queue(s.queue);
                let e = TraceEvent {
                    cat: Some("device"),
                    ts: Some(self.us(s.begin_ns)),
                    dur: Some(s.end_ns.saturating_sub(s.begin_ns) as f64 / 1e3),
                    args: Args::Span {
                        line: s.line,
                        call_seq: s.call_seq,
                        queued_us: self.us(s.queued_ns),
                    },
                    ..TraceEvent::new(s.name.as_str(), "X", track.0, track.1)
                };
                let key = self.slice_key((s.begin_ns, s.end_ns), track, SPANS, self.spans);
                out.push(key, |b| serde_json::to_writer(b, &e))?;
                let w = Waiting {
                    span: self.spans,
                    name: s.name.clone(),
                    queue: s.queue,
                    begin_ns: s.begin_ns,
                };
                self.spans += 1;
                let call = self
                    .near
                    .get(s.call_seq)
                    .or_else(|| self.pinned.get(&s.call_seq).copied());
                match call {
                    Some(times) => self.flow(&w, times, out)?,
                    // Its call comes later (or never: then no arrow, as before).
                    None if self.outline.far.contains(&s.call_seq) => {
                        self.waiting.entry(s.call_seq).or_default().push(w)
                    }
                    None => {}
                }
            }
            Event::Sample(s) => {
                self.reading(
                    index,
                    s.t_ns,
                    s.process_bytes.unwrap_or(s.used_bytes),
                    true,
                    out,
                )?;
            }
            Event::Note(n) => {
                let e = TraceEvent {
                    cat: Some("note"),
                    ts: Some(self.us(n.t_ns)),
                    s: Some("p"),
                    ..TraceEvent::new(n.text.as_str(), "i", pid, HOST_TID)
                };
                out.push(self.key(n.t_ns, NOTES, self.notes, 0), |b| {
                    serde_json::to_writer(b, &e)
                })?;
                self.notes += 1;
            }
            Event::Stack(s) => {
                self.stacks
                    .insert(s.id, s.frames.iter().map(|f| f.describe()).collect());
            }
            Event::Object(o) => {
                objects::apply(&mut self.open, o);
                // Released and deleted by the driver: its life is whole. (A
                // watched program's destructor callback may come before the
                // release that fired it.)
                if self
                    .open
                    .get(&o.id)
                    .is_some_and(|l| l.destroyed() && l.released_ns.is_some())
                    && let Some(life) = self.open.remove(&o.id)
                {
                    self.life(&life, out)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The lives of the objects the driver never destroyed, to the run's end.
    fn finish(self, out: &mut Sorted) -> io::Result<()> {
        for life in self.open.values() {
            self.life(life, out)?;
        }
        self.shares(out)
    }

    /// An arrow from the enqueue or launch on the host lane to the device span it
    /// started: a flow start inside the call's slice, its end bound to the span.
    fn flow(&self, w: &Waiting, call: Near, out: &mut Sorted) -> io::Result<()> {
        let (begin, end) = (call.begin, call.end);
        let id = format!("flow-{}", w.span);
        // Inside the call's slice (Perfetto binds the start to it), and never
        // after the work it started began: a launch the device starts while
        // the call still runs (cudaGraphLaunch, a long enqueue) must not draw
        // its arrow backwards in time.
        let mid = begin + end.saturating_sub(begin) / 2;
        let at = mid.min(w.begin_ns).max(begin);
        let start = TraceEvent {
            cat: Some("flow"),
            ts: Some(self.us(at)),
            id: Some(id.clone()),
            ..TraceEvent::new(w.name.as_str(), "s", call.track.0, call.track.1)
        };
        out.push(self.key(at, FLOWS, w.span, 0), |b| {
            serde_json::to_writer(b, &start)
        })?;
        let (pid, tid) = self.layout.queue(w.queue);
        let finish = TraceEvent {
            cat: Some("flow"),
            ts: Some(self.us(w.begin_ns)),
            id: Some(id),
            bp: Some("e"),
            ..TraceEvent::new(w.name.as_str(), "f", pid, tid)
        };
        out.push(self.key(w.begin_ns, FLOWS, w.span, 1), |b| {
            serde_json::to_writer(b, &finish)
        })
    }

    /// One object: "held by the lab" from creation to its last release, then
    /// "held by the driver" until the destructor fired (or the run ended without it).
    fn life(&self, life: &ObjState, out: &mut Sorted) -> io::Result<()> {
        let name = format!(
            "{} {}",
            life.kind.as_str(),
            life.handle
                .clone()
                .unwrap_or_else(|| format!("#{}", life.id))
        );
        // A watched process's object carries its pid in its id's upper bits.
        let pid = self.layout.owner(life.id);
        let made_at = life
            .stack
            .and_then(|id| self.stacks.get(&id))
            .map_or(&[][..], Vec::as_slice);
        let mut sub = 0;
        let mut slice = |label: &'static str, from: u64, to: u64| -> io::Result<()> {
            let to = to.max(from);
            let idv = format!("{}-{label}", life.id);
            let begin = TraceEvent {
                cat: Some(label),
                ts: Some(self.us(from)),
                id: Some(idv.clone()),
                args: Args::Object {
                    bytes: life.bytes,
                    line: life.line,
                    refs: &life.refs,
                    made_at,
                },
                ..TraceEvent::new(name.as_str(), "b", pid, HOST_TID)
            };
            out.push(self.key(from, LIVES, life.id, sub), |b| {
                serde_json::to_writer(b, &begin)
            })?;
            let end = TraceEvent {
                cat: Some(label),
                ts: Some(self.us(to)),
                id: Some(idv),
                ..TraceEvent::new(name.as_str(), "e", pid, HOST_TID)
            };
            out.push(self.key(to, LIVES, life.id, sub + 1), |b| {
                serde_json::to_writer(b, &end)
            })?;
            sub += 2;
            Ok(())
        };
        let released = life.released_ns;
        slice(
            "held by the lab",
            life.created_ns,
            released.unwrap_or(self.end_ns),
        )?;
        if let Some(r) = released {
            match life.destroyed_ns {
                Some(d) if d > r => slice("held by the driver", r, d)?,
                Some(_) => {}
                None => slice(
                    "held by the driver (never destroyed while the worker lived)",
                    r,
                    self.end_ns,
                )?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
