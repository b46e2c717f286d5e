//! Chrome trace-event JSON (what chrome://tracing and Perfetto open) from a Run:
//! the host lane with every call and its arguments, one track per queue or stream
//! with the device spans, device memory as a counter track (named by what it
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

mod sorted;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufWriter, Write};

use serde::Serialize;

use super::outline::{NearCalls, Outline};
use crate::run::ObjState;
use crate::run::objects;
use crate::trace::{CallStatus, Event, MemorySource, Meta};
use sorted::{Key, Sorted};

const HOST_TID: u64 = 1;
/// Queue tracks sit above every plausible host thread id.
const QUEUE_TID_BASE: u64 = 1000;

/// One trace event; fields a phase does not use are left out.
#[derive(Serialize)]
struct TraceEvent<'a> {
    name: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'a str>,
    ph: &'static str,
    pid: u32,
    tid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    /// Instant events: their scope (`p`, the process).
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    /// Async slices and flows: the id pairing a begin with its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// Flow ends: bind to the slice that encloses them (`e`), the device span.
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    #[serde(skip_serializing_if = "Args::is_none")]
    args: Args<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Args<'a> {
    None,
    Name {
        name: Cow<'a, str>,
    },
    Call {
        line: Option<u32>,
        text: Option<&'a str>,
        driver: &'a str,
        status: Cow<'a, str>,
        tag: Option<&'a str>,
        iteration: &'a [u32],
        mem_before: Option<u64>,
        mem_after: Option<u64>,
    },
    Span {
        line: Option<u32>,
        call_seq: u64,
        queued_us: f64,
    },
    Counter {
        #[serde(rename = "MiB")]
        mib: f64,
    },
    /// A CUDA pool's bookkeeping at a call, MiB: what it holds from the
    /// device, and of that what is handed out (the rest is its cache).
    Pool {
        reserved: f64,
        used: f64,
    },
    /// Who held a watched program's memory, MiB by share: a counter track
    /// whose series Perfetto and chrome://tracing stack.
    Shares {
        objects: f64,
        cache: f64,
        reserves: f64,
        kept_by_driver: f64,
        /// The reading less the shares: negative when they add up to more.
        unexplained: f64,
    },
    Object {
        bytes: u64,
        line: Option<u32>,
        refs: &'a [u64],
        /// A watched program's: the stack that made it, innermost first (its
        /// Python line first, where it has one), each frame as the report
        /// says it.
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        made_at: &'a [String],
    },
}

impl Args<'_> {
    fn is_none(&self) -> bool {
        matches!(self, Args::None)
    }
}

impl<'a> TraceEvent<'a> {
    fn new(name: impl Into<Cow<'a, str>>, ph: &'static str, pid: u32, tid: u64) -> Self {
        TraceEvent {
            name: name.into(),
            cat: None,
            ph,
            pid,
            tid,
            ts: None,
            dur: None,
            s: None,
            id: None,
            bp: None,
            args: Args::None,
        }
    }
}

#[derive(Serialize)]
struct Claim<'a> {
    name: &'a str,
    /// Whose claim, in a trace of several runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    variant: Option<&'a str>,
    verdict: &'a str,
    /// How the verdict stands to the lab's lesson, where it states one.
    #[serde(skip_serializing_if = "Option::is_none")]
    lesson: Option<&'static str>,
    values: BTreeMap<&'a str, serde_json::Value>,
}

#[derive(Serialize)]
struct OtherData<'a> {
    gpulab_version: Option<&'a str>,
    device: Option<&'a str>,
    driver: Option<&'a str>,
    claims: Vec<Claim<'a>>,
}

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
        // Two recordings may carry the same worker pid; a process is one track.
        let mut pids: Vec<u32> = Vec::new();
        for o in &self.outlines {
            let mut pid = o.meta.as_ref().map_or(0, |m| m.pid);
            while pids.contains(&pid) {
                pid = pid.wrapping_add(1);
            }
            pids.push(pid);
        }
        let mut sorted = Sorted::default();
        for (run, (r, o)) in self.recordings.iter().zip(&self.outlines).enumerate() {
            let mut tracks = Tracks::new(o, pids[run], run as u32);
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
        for (o, pid) in self.outlines.iter().zip(&pids) {
            for e in header(o, *pid) {
                put(&mut out, &serde_json::to_vec(&e)?)?;
            }
        }
        sorted.drain(|bytes| put(&mut out, bytes))?;
        out.write_all(b"],\"displayTimeUnit\":\"ms\",\"otherData\":")?;
        serde_json::to_writer(&mut out, &other_data(&self.outlines))?;
        out.write_all(b"}")?;
        out.flush()
    }
}

/// The process's and its tracks' names.
fn header(o: &Outline, pid: u32) -> Vec<TraceEvent<'_>> {
    // Named after what was run: the lab and variant, or the watched program.
    let watch = o.meta.as_ref().and_then(|m| m.watch.as_ref());
    let title = match (&o.meta, o.meta.as_ref().and_then(|m| m.lab.as_ref()), watch) {
        (Some(m), Some(l), _) => format!("gpulab · {} [{}] · {}", l.id, l.variant, m.device.name),
        (Some(m), None, Some(w)) => {
            format!("gpulab watch · {} · {}", w.command.join(" "), m.device.name)
        }
        (Some(m), None, None) => format!("gpulab · {}", m.device.name),
        _ => "gpulab".to_string(),
    };
    let named = |name: &'static str, tid: u64, value: Cow<'static, str>| TraceEvent {
        args: Args::Name { name: value },
        ..TraceEvent::new(name, "M", pid, tid)
    };
    let mut events = vec![
        named("process_name", 0, title.into()),
        named("thread_name", HOST_TID, "host".into()),
    ];
    for (q, name) in &o.queues {
        events.push(named(
            "thread_name",
            QUEUE_TID_BASE + q,
            format!("queue {name}").into(),
        ));
    }
    events
}

fn other_data(outlines: &[Outline]) -> OtherData<'_> {
    let first = outlines.first().and_then(|o| o.meta.as_ref());
    let several = outlines.len() > 1;
    OtherData {
        gpulab_version: first.map(|m| m.gpulab_version.as_str()),
        device: first.map(|m| m.device.name.as_str()),
        driver: first.map(|m| m.device.driver_version.as_str()),
        claims: outlines
            .iter()
            .flat_map(|o| {
                let variant = o
                    .meta
                    .as_ref()
                    .and_then(|m| m.lab.as_ref())
                    .map(|l| l.variant.as_str())
                    .filter(|_| several);
                o.claims.iter().map(move |c| Claim {
                    name: &c.name,
                    variant,
                    verdict: c.verdict.label(),
                    lesson: c.lesson().map(|l| l.label()),
                    values: c
                        .values
                        .iter()
                        .map(|(k, v)| {
                            let v = if v.is_finite() {
                                serde_json::json!(v)
                            } else {
                                serde_json::json!("never")
                            };
                            (k.as_str(), v)
                        })
                        .collect(),
                })
            })
            .collect(),
    }
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
    near: NearCalls,
    /// Times of the calls the outline found far from their spans.
    pinned: HashMap<u64, (u64, u64)>,
    waiting: HashMap<u64, Vec<Waiting>>,
    /// Objects whose life has not ended (the driver has not destroyed them).
    open: BTreeMap<u64, ObjState>,
    /// A watched program's stacks, named by their `stack` events (each comes
    /// before any object that names it), as the report says each frame.
    stacks: HashMap<u64, Vec<String>>,
}

impl<'a> Tracks<'a> {
    fn new(outline: &'a Outline, pid: u32, run: u32) -> Self {
        let script = outline
            .meta
            .as_ref()
            .and_then(|m| m.lab.as_ref())
            .map(|l| l.script.iter().map(|(n, t)| (*n, t.as_str())).collect())
            .unwrap_or_default();
        Tracks {
            outline,
            pid,
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
                    ..TraceEvent::new(c.api.as_str(), "X", pid, HOST_TID)
                };
                out.push(self.key(c.begin_ns, CALLS, self.calls, 0), |b| {
                    serde_json::to_writer(b, &e)
                })?;
                if let Some(m) = &c.cuda {
                    self.pools(c.end_ns, m, out)?;
                }
                self.calls += 1;
                let times = (c.begin_ns, c.end_ns);
                self.near.push(c.seq, times);
                if self.outline.far.contains(&c.seq) {
                    self.pinned.insert(c.seq, times);
                }
                for w in self.waiting.remove(&c.seq).unwrap_or_default() {
                    self.flow(&w, times, out)?;
                }
            }
            Event::DeviceSpan(s) => {
                let e = TraceEvent {
                    cat: Some("device"),
                    ts: Some(self.us(s.begin_ns)),
                    dur: Some(s.end_ns.saturating_sub(s.begin_ns) as f64 / 1e3),
                    args: Args::Span {
                        line: s.line,
                        call_seq: s.call_seq,
                        queued_us: self.us(s.queued_ns),
                    },
                    ..TraceEvent::new(s.name.as_str(), "X", pid, QUEUE_TID_BASE + s.queue)
                };
                out.push(self.key(s.begin_ns, SPANS, self.spans, 0), |b| {
                    serde_json::to_writer(b, &e)
                })?;
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

    /// A watched program's memory by share at each composition the run took.
    fn shares(&self, out: &mut Sorted) -> io::Result<()> {
        let mib = crate::units::mib;
        for (i, p) in self.outline.composition.iter().enumerate() {
            let explained = p.stacked().iter().sum::<u64>();
            let e = TraceEvent {
                ts: Some(self.us(p.t_ns)),
                args: Args::Shares {
                    objects: mib(p.held),
                    cache: mib(p.cached),
                    reserves: mib(p.reserves),
                    kept_by_driver: mib(p.kept),
                    unexplained: (p.total as f64 - explained as f64) / crate::units::MIB_F64,
                },
                ..TraceEvent::new(SHARES_COUNTER, "C", self.pid, 0)
            };
            // After the memory readings' counter events of the same moment.
            out.push(
                self.key(p.t_ns, COUNTERS, u64::MAX / 2 + i as u64, 0),
                |b| serde_json::to_writer(b, &e),
            )?;
        }
        Ok(())
    }

    /// The CUDA pools read right after a call: the default pool's, the
    /// lab's own pool's and the graph memory's, each a counter track of two
    /// series (reserved from the device, used of it).
    fn pools(&self, t: u64, m: &crate::trace::CudaMemory, out: &mut Sorted) -> io::Result<()> {
        let mib = crate::units::mib;
        let tracks = [
            (
                "CUDA default pool, MiB",
                Some((m.pool_reserved, m.pool_used)),
            ),
            (
                "CUDA own pool, MiB",
                m.custom_pool.map(|p| (p.reserved, p.used)),
            ),
            (
                "CUDA graph memory, MiB",
                m.graph_mem.map(|p| (p.reserved, p.used)),
            ),
        ];
        for (sub, (name, pool)) in tracks.into_iter().enumerate() {
            let Some((reserved, used)) = pool else {
                continue;
            };
            let e = TraceEvent {
                ts: Some(self.us(t)),
                args: Args::Pool {
                    reserved: mib(reserved),
                    used: mib(used),
                },
                ..TraceEvent::new(name, "C", self.pid, 0)
            };
            out.push(
                self.key(t, COUNTERS, u64::MAX / 4 + self.calls, sub as u8),
                |b| serde_json::to_writer(b, &e),
            )?;
        }
        Ok(())
    }

    fn reading(
        &mut self,
        index: u64,
        t: u64,
        bytes: u64,
        sample: bool,
        out: &mut Sorted,
    ) -> io::Result<()> {
        let idx = self.readings;
        self.readings += 1;
        if !self.outline.keeps_reading(index, t, sample) {
            return Ok(());
        }
        let e = TraceEvent {
            ts: Some(self.us(t)),
            args: Args::Counter {
                mib: crate::units::mib(bytes),
            },
            ..TraceEvent::new(self.counter, "C", self.pid, 0)
        };
        out.push(self.key(t, COUNTERS, idx, 0), |b| {
            serde_json::to_writer(b, &e)
        })
    }

    /// An arrow from the enqueue or launch on the host lane to the device span it
    /// started: a flow start inside the call's slice, its end bound to the span.
    fn flow(&self, w: &Waiting, (begin, end): (u64, u64), out: &mut Sorted) -> io::Result<()> {
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
            ..TraceEvent::new(w.name.as_str(), "s", self.pid, HOST_TID)
        };
        out.push(self.key(at, FLOWS, w.span, 0), |b| {
            serde_json::to_writer(b, &start)
        })?;
        let finish = TraceEvent {
            cat: Some("flow"),
            ts: Some(self.us(w.begin_ns)),
            id: Some(id),
            bp: Some("e"),
            ..TraceEvent::new(w.name.as_str(), "f", self.pid, QUEUE_TID_BASE + w.queue)
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
                ..TraceEvent::new(name.as_str(), "b", self.pid, HOST_TID)
            };
            out.push(self.key(from, LIVES, life.id, sub), |b| {
                serde_json::to_writer(b, &begin)
            })?;
            let end = TraceEvent {
                cat: Some(label),
                ts: Some(self.us(to)),
                id: Some(idv),
                ..TraceEvent::new(name.as_str(), "e", self.pid, HOST_TID)
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

/// What the memory counter reads, by the run's memory source: NVML's device memory,
/// or on a CPU device (and for a watched program) a process's resident memory.
fn counter_name(meta: Option<&Meta>) -> &'static str {
    let Some(meta) = meta else {
        return "device memory";
    };
    match (meta.device.memory_source, meta.watch.is_some()) {
        (MemorySource::Rss, true) => "program RSS",
        (MemorySource::Rss, false) => "worker RSS",
        _ => "device memory",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Call, DeviceSpan, End, EndStatus, ObjKind, ObjectAction, ObjectEvent};

    fn call(seq: u64) -> Event {
        Event::Call(Call {
            seq,
            pid: 1,
            api: "clEnqueueNDRangeKernel".into(),
            driver: "clEnqueueNDRangeKernel".into(),
            begin_ns: seq * 100,
            end_ns: seq * 100 + 10,
            ..Default::default()
        })
    }

    fn span(call_seq: u64) -> Event {
        Event::DeviceSpan(DeviceSpan {
            queue: 0,
            queue_name: None,
            name: "spin".into(),
            call_seq,
            line: None,
            queued_ns: call_seq * 100,
            begin_ns: call_seq * 100 + 50,
            end_ns: call_seq * 100 + 60,
        })
    }

    fn object(t_ns: u64, action: ObjectAction, refcount: u32) -> Event {
        Event::Object(ObjectEvent {
            t_ns,
            id: 7,
            kind: ObjKind::Buffer,
            action,
            handle: Some("buf".into()),
            bytes: 64,
            refcount,
            refs: vec![],
            line: None,
            stack: None,
        })
    }

    fn trace(events: Vec<Event>) -> Vec<serde_json::Value> {
        let each = |f: &mut dyn FnMut(Event)| {
            events.iter().cloned().for_each(f);
            Ok(())
        };
        let mut out = Vec::new();
        Trace::outline(vec![each]).unwrap().write(&mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        doc["traceEvents"].as_array().cloned().unwrap_or_default()
    }

    /// What the CUDA pools held at each call is a counter track, as the
    /// report's JSON has it: reserved from the device, and used of it.
    #[test]
    fn cuda_pools_are_counter_tracks() {
        let with_pool = Event::Call(Call {
            seq: 0,
            pid: 1,
            api: "cudaFreeAsync".into(),
            driver: "cuMemFreeAsync".into(),
            begin_ns: 0,
            end_ns: 1_000,
            cuda: Some(crate::trace::CudaMemory {
                pool_reserved: 64 << 20,
                pool_used: 0,
                free: 0,
                total: 0,
                custom_pool: None,
                graph_mem: None,
            }),
            ..Default::default()
        });
        let t = trace(vec![with_pool]);
        let pool: Vec<_> = t
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == "CUDA default pool, MiB")
            .collect();
        assert_eq!(pool.len(), 1, "{t:?}");
        assert_eq!(pool[0]["args"]["reserved"], 64.0);
        assert_eq!(pool[0]["args"]["used"], 0.0);
        // No own pool, no graph: no track for them.
        assert!(!t.iter().any(|e| e["name"] == "CUDA own pool, MiB"));
    }

    /// A launch the device starts before the call returns (a graph launch):
    /// its arrow starts inside the call, at or before the work begins, never
    /// after it.
    #[test]
    fn a_flow_never_points_back_in_time() {
        let long = Event::Call(Call {
            seq: 0,
            pid: 1,
            api: "cudaGraphLaunch".into(),
            driver: "cuGraphLaunch".into(),
            begin_ns: 0,
            end_ns: 10_000_000,
            ..Default::default()
        });
        let early = Event::DeviceSpan(DeviceSpan {
            queue: 0,
            queue_name: None,
            name: "spin".into(),
            call_seq: 0,
            line: None,
            queued_ns: 0,
            begin_ns: 1_000_000,
            end_ns: 2_000_000,
        });
        let t = trace(vec![long, early]);
        let at = |ph: &str| {
            t.iter()
                .find(|e| e["cat"] == "flow" && e["ph"] == ph)
                .and_then(|e| e["ts"].as_f64())
                .unwrap()
        };
        assert!(at("s") <= at("f"), "{} after {}", at("s"), at("f"));
        assert!(at("s") >= 0.0);
    }

    /// A span long after its call, and one before its call, still get their arrows,
    /// and the trace stays in time order.
    #[test]
    fn spans_far_from_their_calls_keep_their_flows() {
        let mut events = vec![call(0)];
        events.extend((1..25_000).map(call));
        events.push(span(0));
        events.push(span(30_000));
        events.push(span(40_000));
        events.push(call(30_000));
        let t = trace(events);
        let flows: Vec<_> = t.iter().filter(|e| e["cat"] == "flow").collect();
        assert_eq!(flows.len(), 4, "{flows:?}");
        let ts = |ph: &str, id: &str| {
            flows
                .iter()
                .find(|e| e["ph"] == ph && e["id"] == id)
                .and_then(|e| e["ts"].as_f64())
        };
        assert_eq!(ts("s", "flow-0"), Some(0.005));
        assert_eq!(ts("f", "flow-0"), Some(0.05));
        assert_eq!(ts("s", "flow-1"), Some(3_000.005));
        // A span whose call never came has no arrow.
        assert_eq!(ts("s", "flow-2"), None);
        let times: Vec<f64> = t.iter().filter_map(|e| e["ts"].as_f64()).collect();
        assert!(times.is_sorted_by(|a, b| a <= b));
    }

    /// A destructor callback that comes before the release that fired it (a
    /// watched program's order) still gives one life: the lab's, then nothing.
    #[test]
    fn an_objects_life_is_whole_whichever_of_release_and_destroy_comes_first() {
        for order in [[1, 2], [2, 1]] {
            let mut events = vec![object(1_000, ObjectAction::Created, 1)];
            for i in order {
                events.push(match i {
                    1 => object(5_000, ObjectAction::Released, 0),
                    _ => object(5_000, ObjectAction::Destroyed, 0),
                });
            }
            events.push(Event::End(End {
                t_ns: 9_000,
                status: EndStatus::Finished,
                leaked: vec![],
            }));
            let lives: Vec<_> = trace(events)
                .into_iter()
                .filter(|e| e["ph"] == "b" || e["ph"] == "e")
                .map(|e| (e["ph"].clone(), e["cat"].clone(), e["ts"].clone()))
                .collect();
            let want = |ph: &str, ts: f64| {
                (
                    serde_json::json!(ph),
                    serde_json::json!("held by the lab"),
                    serde_json::json!(ts),
                )
            };
            assert_eq!(lives, vec![want("b", 1.0), want("e", 5.0)], "{order:?}");
        }
    }

    /// A watched program's object carries the stack that made it, its Python
    /// line first, as the report says each frame.
    #[test]
    fn an_objects_life_says_where_it_was_made() {
        let frames = vec![
            crate::trace::Frame {
                module: String::new(),
                address: 0,
                build_id: None,
                function: Some("activations".into()),
                location: Some("/home/u/train.py:21".into()),
                python: true,
            },
            crate::trace::Frame {
                module: "/venv/torch/lib/libc10_cuda.so".into(),
                address: 0x10,
                build_id: None,
                function: Some("alloc_block".into()),
                location: None,
                python: false,
            },
        ];
        let named = Event::Stack(crate::trace::Stack {
            t_ns: 500,
            id: 42,
            frames,
        });
        let mut made = object(1_000, ObjectAction::Created, 1);
        if let Event::Object(o) = &mut made {
            o.stack = Some(42);
        }
        let t = trace(vec![named, made]);
        let begins: Vec<_> = t.iter().filter(|e| e["ph"] == "b").collect();
        assert_eq!(
            begins[0]["args"]["made_at"],
            serde_json::json!([
                "activations (/home/u/train.py:21)",
                "alloc_block in libc10_cuda.so"
            ])
        );
    }
}
