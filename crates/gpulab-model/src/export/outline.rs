//! The first pass over a recording: the little an export needs before its events
//! are written or drawn (the process's name and pid, the queues' tracks, the
//! run's start and end and how far its calls, spans and samples reach, which
//! device spans lie far from their call), and its claims. Its size does not
//! grow with the recording's calls. For a watched program it also folds the
//! run once for who held its memory over time (the run's composition series,
//! bounded; the fold keeps the program's objects while it reads), and its
//! processes and the threads that made calls, each a track of the trace.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::run::Run;
use crate::run::composition::SharePoint;
use crate::trace::{AgentState, ClaimVerdict, Event, Meta, Rank};

/// Calls whose times a pass keeps at hand for the device spans that follow them:
/// a worker sends a call's spans within a few calls of it.
const CALLS_NEAR: usize = 10_000;

/// What the first pass learnt of one recording.
#[derive(Debug, Default)]
pub(super) struct Outline {
    /// The latest `meta` event (a run keeps the latest).
    pub meta: Option<Meta>,
    first_begin: Option<u64>,
    last_call_end: Option<u64>,
    /// The latest end of any call, of any device span, and the latest sample.
    calls_end: Option<u64>,
    spans_end: Option<u64>,
    samples_end: Option<u64>,
    /// Each `end` event: its place in the stream and its time.
    pub ends: Vec<(u64, u64)>,
    /// Each queue or stream, in the order its first span came, with its name.
    pub queues: Vec<(u64, String)>,
    /// Calls whose spans came when the call was not among the [`CALLS_NEAR`]
    /// latest (long before, or not yet): the second pass keeps their times.
    pub far: BTreeSet<u64>,
    pub claims: Vec<ClaimVerdict>,
    /// A watched program's memory by share over time ([`Run::composition`]).
    pub composition: Vec<SharePoint>,
    /// Each process that made a call or whose agent attached, by pid.
    pub processes: BTreeMap<u32, Process>,
}

/// A process of the recording, as its agent and its calls said it.
#[derive(Debug, Default)]
pub(super) struct Process {
    /// Its executable, as its agent said it when it attached.
    pub exe: Option<String>,
    /// Its rank in a distributed job, where its launcher set one.
    pub rank: Option<Rank>,
    /// The threads that made its calls.
    pub threads: BTreeSet<u64>,
}

impl Outline {
    /// Reads one pass of events (`each` hands them over in order).
    pub fn of(
        each: impl FnOnce(&mut dyn FnMut(Event)) -> std::io::Result<()>,
    ) -> std::io::Result<Outline> {
        let mut o = Outline::default();
        let mut near = NearCalls::default();
        let mut index = 0u64;
        // Folded only once the stream says it is a watched program's.
        let mut run: Option<Run> = None;
        each(&mut |e| {
            if let Event::Meta(m) = &e
                && m.watch.is_some()
            {
                run.get_or_insert_with(Run::default);
            }
            if let Some(run) = run.as_mut() {
                run.apply(&e);
            }
            match e {
                Event::Meta(m) => o.meta = Some(*m),
                Event::Agent(a) => {
                    if let AgentState::Attached { exe, rank, .. } = a.state {
                        let p = o.processes.entry(a.pid).or_default();
                        p.exe = Some(exe);
                        if rank.is_some() {
                            p.rank = rank;
                        }
                    }
                }
                Event::Call(c) => {
                    o.processes
                        .entry(c.pid)
                        .or_default()
                        .threads
                        .insert(c.thread);
                    o.first_begin.get_or_insert(c.begin_ns);
                    o.last_call_end = Some(c.end_ns);
                    o.calls_end = o.calls_end.max(Some(c.end_ns));
                    near.push(c.seq, ());
                }
                Event::DeviceSpan(s) => {
                    o.spans_end = o.spans_end.max(Some(s.end_ns));
                    if !o.queues.iter().any(|(q, _)| *q == s.queue) {
                        let name = s.queue_name.unwrap_or_else(|| format!("#{}", s.queue));
                        o.queues.push((s.queue, name));
                    }
                    if near.get(s.call_seq).is_none() {
                        o.far.insert(s.call_seq);
                    }
                }
                Event::Claim(c) => match o.claims.iter_mut().find(|x| x.name == c.name) {
                    Some(old) => *old = c,
                    None => o.claims.push(c),
                },
                Event::End(e) => o.ends.push((index, e.t_ns)),
                Event::Sample(s) => o.samples_end = o.samples_end.max(Some(s.t_ns)),
                _ => {}
            }
            index += 1;
        })?;
        if let Some(run) = run {
            o.composition = run.composition().points().to_vec();
        }
        Ok(o)
    }

    /// Start of the run: the meta event's time, else the first call's (as
    /// [`crate::run::Run::t0`]).
    pub fn t0(&self) -> u64 {
        self.meta
            .as_ref()
            .map(|m| m.t_ns)
            .or(self.first_begin)
            .unwrap_or(0)
    }

    /// The end of the run: the end event's time, else the last call's end.
    pub fn end_ns(&self) -> u64 {
        self.ends
            .last()
            .map(|e| e.1)
            .or(self.last_call_end)
            .unwrap_or(self.t0())
    }

    /// The latest time a figure's timeline reaches: the run's end (the latest
    /// `end` event, as a run keeps it), or any call's or device span's end past it.
    pub fn drawn_end(&self) -> u64 {
        [
            self.ends.last().map(|e| e.1),
            self.calls_end,
            self.spans_end,
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(self.t0())
    }

    /// The latest time a chart of the timeline and the memory readings reaches.
    /// A reading the run keeps lies within a call or before the end, except a
    /// sample of a run that never ended.
    pub fn read_end(&self) -> u64 {
        let samples = self.samples_end.filter(|_| self.ends.is_empty());
        [
            self.ends.last().map(|e| e.1),
            self.calls_end,
            self.spans_end,
            samples,
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(self.t0())
    }

    /// Whether a memory reading at `t`, the `index`th event of the stream, is one
    /// the run keeps (as `Run::apply` keeps readings): none past an end event
    /// that came after it, and no sample taken after an end that came before it.
    pub fn keeps_reading(&self, index: u64, t: u64, sample: bool) -> bool {
        let cut_later = self
            .ends
            .iter()
            .filter(|(i, _)| *i > index)
            .any(|(_, end)| t > *end);
        let after_end = sample
            && self
                .ends
                .iter()
                .rev()
                .find(|(i, _)| *i < index)
                .is_some_and(|(_, end)| t > *end);
        !cut_later && !after_end
    }
}

/// What a pass keeps of the latest [`CALLS_NEAR`] calls, by seq (their times
/// and tracks for the trace, nothing for the outline).
#[derive(Debug)]
pub(super) struct NearCalls<T = ()> {
    order: VecDeque<u64>,
    /// What is kept of the latest call of each seq, and how many of `order`
    /// carry it.
    times: HashMap<u64, (T, u32)>,
}

impl<T> Default for NearCalls<T> {
    fn default() -> Self {
        NearCalls {
            order: VecDeque::new(),
            times: HashMap::new(),
        }
    }
}

impl<T: Copy> NearCalls<T> {
    pub fn push(&mut self, seq: u64, times: T) {
        let e = self.times.entry(seq).or_insert((times, 0));
        *e = (times, e.1 + 1);
        self.order.push_back(seq);
        if self.order.len() > CALLS_NEAR
            && let Some(old) = self.order.pop_front()
            && let Some(e) = self.times.get_mut(&old)
        {
            e.1 -= 1;
            if e.1 == 0 {
                self.times.remove(&old);
            }
        }
    }

    pub fn get(&self, seq: u64) -> Option<T> {
        self.times.get(&seq).map(|e| e.0)
    }
}
