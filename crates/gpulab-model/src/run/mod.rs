//! The Run model: events folded into what a report, a verdict, an export, the
//! dashboard and the watch report show. The one fold of the stream: pure data,
//! built the same way, one event at a time, live, from a recording or in a replay.

pub mod composition;
mod finding;
pub mod fold;
#[cfg(test)]
mod fold_tests;
pub mod frameworks;
pub mod gap;
mod gone;
pub mod holders;
pub mod iterations;
mod lags;
mod live;
mod load;
pub(crate) mod objects;
pub mod owners;
pub mod ranks;
pub mod reserves;
mod samples;
mod window;

use std::collections::BTreeMap;

use crate::trace::{CudaMemory, ObjKind};

use self::reserves::Reserves;

/// How an informational note of gpulab's about the OpenCL loader it set up for
/// a watched program starts: such a note is said only when some process of the
/// program made an OpenCL call ([`Run::notes_said`]).
pub const OPENCL_SET_UP: &str = "OpenCL set-up: ";

/// A composition settled by an object event before its call arrived.
#[derive(Debug, Clone)]
struct Tentative {
    object: u64,
    reading_ns: u64,
    /// The peak's composition before this one.
    peak_before: Option<holders::Holders>,
}

/// How often at most the composition of the process's memory is taken again
/// while its objects keep changing, once it has more than `HOLDERS_ALWAYS`
/// reserves to weigh (below that, at every reading).
const HOLDERS_EVERY_NS: u64 = 10_000_000;
const HOLDERS_ALWAYS: usize = 256;
/// Compositions kept, newest last: enough to take back the readings that
/// arrive before the news that the program's last process has gone.
const HOLDERS_KEPT: usize = 64;
/// Readings of a process not yet listed that are kept until it is.
const UNLISTED_KEPT: usize = 64;
pub use finding::Finding;
pub use fold::{ApiFold, Folds, TagFold};
pub use gone::RanOutCounts;
pub use lags::Lags;
pub use live::{LiveIndex, UNSEEN_MAKER, maker_text};
pub use load::{Load, loaded};
pub use objects::{MadeBy, ObjState};
pub use samples::{SAMPLES_KEPT, SampleStats};
pub use window::Recent;

use crate::trace::{
    AgentEvent, AgentState, BackendKind, Block, Call, CallStatus, Calling, ClaimVerdict,
    DeviceSpan, End, EndStatus, Event, Frame, HostLoad, Meta, Note, ObjectAction, ObjectEvent,
    Sample,
};

/// Calls a run keeps whole: the most recent ones.
pub const CALLS_KEPT: usize = 10_000;
/// Device spans a run keeps whole: the most recent ones.
pub const SPANS_KEPT: usize = 10_000;
/// Object events a run keeps whole: the most recent ones.
pub const OBJECTS_KEPT: usize = 10_000;

/// A run as its events told it so far.
///
/// What is kept of every event, however long the run: the per-line, per-tag and
/// per-API aggregates ([`Folds`], which every report figure, verdict and
/// summary panel reads), each object's latest state (`ledger`, one entry per
/// object; a watched program's objects it is done with are folded out of it
/// into the live index's counts once the ledger passes 16,384, [`gone`]), the
/// `repeat` blocks, the figures of every sample ([`SampleStats`]),
/// the memory readings with each stretch of equal readings kept as its first and
/// last (16 bytes a change: a steady device costs nothing however long the run),
/// notes, claims and agents. What is bounded: the calls, device spans, object
/// events and samples themselves, of which only the most recent [`CALLS_KEPT`],
/// [`SPANS_KEPT`], [`OBJECTS_KEPT`] and [`SAMPLES_KEPT`] are kept whole (`calls`,
/// `spans`, `objects`, `samples`), for the timeline, the live panels and the one
/// metric that looks at a block's calls and spans (`overlap`, of CUDA labs' short
/// blocks; inconclusive, saying why, when a block no longer lies whole in the
/// window: [`Run::window_holds`]). A run of fewer events keeps them all, and [`Run::keeping_all`] keeps
/// them all, every reading included, whatever the length (what tests compare the
/// window with; the exports draw a recording decimated instead, `export::decimate`).
#[derive(Debug, Clone)]
pub struct Run {
    pub meta: Option<Meta>,
    /// The most recent calls (see [`Recent::seen`] for how many arrived).
    pub calls: Recent<Call>,
    /// The most recent object events.
    pub objects: Recent<ObjectEvent>,
    /// The most recent device spans.
    pub spans: Recent<DeviceSpan>,
    /// Aggregates of every call, span and object event.
    pub folds: Folds,
    /// The latest end of the device spans no longer in `spans`.
    spans_forgotten_end: Option<u64>,
    /// The highest call seq of the device spans no longer in `spans`.
    spans_forgotten_seq: Option<u64>,
    pub blocks: Vec<Block>,
    /// The most recent samples of the parent's sampler.
    pub samples: Recent<Sample>,
    /// Figures of every sample.
    pub sample_stats: SampleStats,
    /// Equal readings in a row are kept as the first and the last of them.
    thin_readings: bool,
    pub notes: Vec<Note>,
    pub claims: Vec<ClaimVerdict>,
    pub end: Option<End>,
    /// The call the worker went into and has not come back from yet: what a
    /// run that hangs is stuck in.
    pub in_flight: Option<Calling>,
    /// Agents in a watched program's processes, as they attached and detached.
    pub agents: Vec<AgentEvent>,
    /// The kinds whose deletion by the driver some process's agent watches:
    /// only of those can a released object be said to be held by the driver.
    pub deletion_watched: std::collections::BTreeSet<ObjKind>,
    /// Processes whose agent attached and has not detached yet.
    agents_running: std::collections::BTreeSet<u32>,
    /// When the latest agent detached.
    agents_last_detached: Option<u64>,
    /// Native call stacks in a watched program, by id (`watch --backtrace`).
    pub stacks: BTreeMap<u64, Vec<Frame>>,
    /// Live objects per kind right now, as the ledger's events say.
    pub live: BTreeMap<ObjKind, i64>,
    /// The most objects of each kind alive at one time so far.
    pub peak_live: BTreeMap<ObjKind, i64>,
    /// Bytes of live buffers right now.
    pub live_bytes: i64,
    /// Each object's latest state, by id: every one a lab made; of a watched
    /// program's, those not folded away ([`gone`]).
    pub ledger: BTreeMap<u64, ObjState>,
    /// The ledger indexed by what the live-objects panel and the gap ask of it.
    pub live_index: LiveIndex,
    /// Objects the worker listed as left at the end, per kind.
    leaked: BTreeMap<ObjKind, usize>,
    /// Memory readings in time order, (t_ns, bytes): the worker's own (around each
    /// call) and the parent's samples until the run ended. Values are what the run
    /// calls "device memory" (the worker's own share where the source tells it).
    pub readings: Vec<(u64, u64)>,
    /// Device-wide readings the parent took after the worker was gone, (t_ns, bytes).
    pub after_exit: Vec<(u64, u64)>,
    /// How busy the host was during the run, when the parent measured it.
    pub load: Option<HostLoad>,
    /// What contexts, modules, queues and streams hold, measured from the
    /// process's memory across their making calls.
    pub reserves: Reserves,
    /// The latest reading of the process's own memory during the run: (t_ns, bytes).
    pub process_reading: Option<(u64, u64)>,
    /// Who held the process's memory at its highest reading: the latest of
    /// the readings at that value whose composition was taken (else, in a run
    /// with hundreds of reserves, one within 1 MiB or 1% of it).
    pub holders_at_peak: Option<holders::Holders>,
    /// Who held it at the latest readings whose composition was taken (each
    /// reading; in a run with hundreds of reserves, not when objects changed
    /// less than 10 ms before it: then the one before stands, with its own
    /// time and total), newest last. Readings
    /// taken after a watched program's last process detached are not its own:
    /// they leave.
    pub(crate) holders_recent: std::collections::VecDeque<holders::Holders>,
    /// Every composition taken, as a series: who held the memory over time.
    pub composition: composition::Composition,
    /// The latest reading of the process's memory, until it is composed.
    pending_reading: Option<(u64, u64)>,
    /// The time of the latest object event folded.
    objects_changed_ns: Option<u64>,
    /// When the first call that ran out of memory returned.
    ran_out_end: Option<u64>,
    /// The latest composition, while the call of the object event that
    /// settled it has not arrived.
    tentative: Option<Tentative>,
    /// Who held it when the first call that ran out of memory returned.
    pub holders_at_ran_out: Option<holders::Holders>,
    /// The objects and measured reserves as they stood when that call
    /// returned, with no reading (`total` 0): what the run knows of that
    /// moment even when no reading of the process's memory can be set beside
    /// it (the program let go of memory right after).
    pub known_at_ran_out: Option<holders::Holders>,
    /// The contexts, modules, queues and streams held then: their reserves,
    /// measured then or later, are what they held then.
    pub unsized_at_ran_out: Vec<u64>,
    /// Objects or reserves changed since the latest composition was taken.
    holders_dirty: bool,
    /// A reading listed the process's own memory.
    process_listed: bool,
    /// The latest NVML readings before the process was first listed.
    unlisted: Vec<u64>,
    /// What the frameworks inside a watched program said of their memory.
    pub frameworks: frameworks::Frameworks,
    /// Who made the objects of each stack, by its calling frame.
    pub owners: BTreeMap<u64, owners::Owner>,
    /// A watched program per process (its rank) and per GPU.
    pub ranks: ranks::Ranks,
    /// Objects the program is done with, folded out of the ledger.
    gone: gone::Gone,
}

/// One script line with everything its executions did.
#[derive(Debug, Clone, PartialEq)]
pub struct LineSummary {
    pub line: u32,
    pub text: String,
    pub tag: Option<String>,
    pub driver: Option<String>,
    pub calls: u32,
    pub errors: u32,
    /// The last error's name, when any execution failed.
    pub error: Option<String>,
    pub expect_error: bool,
    pub host_ns_total: u64,
    pub host_ns_max: u64,
    /// Sum over executions of memory after minus before, bytes.
    pub mem_delta: Option<i64>,
}

impl LineSummary {
    pub fn host_ms_mean(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.host_ns_total as f64 / self.calls as f64 / 1e6
        }
    }
}

impl Default for Run {
    fn default() -> Self {
        Run::bounded(CALLS_KEPT, SPANS_KEPT, OBJECTS_KEPT)
    }
}

impl Run {
    /// A run that keeps every call, span and object event whole, and every
    /// object in its ledger.
    pub fn keeping_all() -> Run {
        Run {
            samples: Recent::new(usize::MAX),
            thin_readings: false,
            gone: gone::Gone::never(),
            ..Run::bounded(usize::MAX, usize::MAX, usize::MAX)
        }
    }

    /// A run that keeps the most recent `calls`, `spans` and `objects` whole.
    pub fn bounded(calls: usize, spans: usize, objects: usize) -> Run {
        Run {
            meta: None,
            calls: Recent::new(calls),
            objects: Recent::new(objects),
            spans: Recent::new(spans),
            folds: Folds::default(),
            spans_forgotten_end: None,
            spans_forgotten_seq: None,
            blocks: Vec::new(),
            samples: Recent::new(SAMPLES_KEPT),
            sample_stats: SampleStats::default(),
            thin_readings: true,
            notes: Vec::new(),
            claims: Vec::new(),
            end: None,
            in_flight: None,
            agents: Vec::new(),
            deletion_watched: std::collections::BTreeSet::new(),
            agents_running: std::collections::BTreeSet::new(),
            agents_last_detached: None,
            stacks: BTreeMap::new(),
            live: BTreeMap::new(),
            peak_live: BTreeMap::new(),
            live_bytes: 0,
            ledger: BTreeMap::new(),
            live_index: LiveIndex::default(),
            leaked: BTreeMap::new(),
            readings: Vec::new(),
            after_exit: Vec::new(),
            load: None,
            reserves: Reserves::default(),
            process_reading: None,
            holders_at_peak: None,
            holders_recent: std::collections::VecDeque::new(),
            composition: composition::Composition::default(),
            pending_reading: None,
            objects_changed_ns: None,
            ran_out_end: None,
            tentative: None,
            holders_at_ran_out: None,
            known_at_ran_out: None,
            unsized_at_ran_out: Vec::new(),
            holders_dirty: false,
            process_listed: false,
            unlisted: Vec::new(),
            frameworks: frameworks::Frameworks::default(),
            owners: BTreeMap::new(),
            ranks: ranks::Ranks::default(),
            gone: gone::Gone::default(),
        }
    }

    /// Folds `events` into `run`.
    pub fn folding<'a>(mut run: Run, events: impl IntoIterator<Item = &'a Event>) -> Run {
        for e in events {
            run.apply(e);
        }
        run
    }

    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Run {
        let mut run = Run::default();
        for e in events {
            run.apply(e);
        }
        run
    }

    /// Folds one event in.
    #[expect(
        clippy::too_many_lines,
        reason = "a catalog: one arm per kind of event the run folds"
    )]
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Meta(m) => {
                self.ranks.start(&m.gpus);
                self.meta = Some(m.as_ref().clone());
            }
            Event::Calling(c) => self.in_flight = Some(c.clone()),
            Event::Call(c) => {
                if self.in_flight.as_ref().is_some_and(|f| f.seq <= c.seq) {
                    self.in_flight = None;
                }
                self.take_back_a_reading_within(c);
                self.settle(c.end_ns, None);
                if let Some(m) = c.mem_before {
                    self.insert_reading(c.begin_ns, m);
                }
                if let Some(m) = c.mem_after {
                    self.insert_reading(c.end_ns, m);
                }
                if let Some(step) = c.memory_step {
                    self.measured_by_the_agent(c, step);
                }
                // What the stream-ordered pool keeps and the graphs' memory
                // are shares: a call that changed them changes the composition.
                let kept = |m: Option<CudaMemory>| {
                    m.map(|m| {
                        (
                            m.pool_reserved.saturating_sub(m.pool_used),
                            m.graph_mem.map(|g| g.reserved),
                        )
                    })
                };
                if c.cuda.is_some() && kept(c.cuda) != kept(self.folds.last_pool) {
                    self.holders_dirty = true;
                }
                // An agent sends an object's creation before the call that made it.
                if let Some(id) = c.object
                    && self.ledger.get(&id).is_some_and(|st| st.made_by.is_none())
                {
                    self.reserves.made_by(id, c.begin_ns, c.end_ns);
                    self.holders_dirty = true;
                    if self.ledger.get(&id).is_some_and(|o| o.bytes > 0) {
                        self.reserves.sized_call(c.begin_ns, c.end_ns);
                    }
                    let before = LiveIndex::before(&self.ledger, id);
                    if let Some(st) = self.ledger.get_mut(&id) {
                        st.made_by = Some(objects::MadeBy::of(c));
                    }
                    self.live_index.update(&self.ledger, id, before);
                } else if let Some(id) = c.object
                    && self
                        .ledger
                        .get(&id)
                        .is_some_and(|o| o.bytes > 0 && !o.held())
                {
                    // The call that let a sized object go, after its release:
                    // a reading taken while it ran may hold its bytes or not.
                    self.reserves.sized_call(c.begin_ns, c.end_ns);
                }
                let (spans, forgotten_end) = (&self.spans, self.spans_forgotten_end);
                self.folds.call(
                    c,
                    |seq| {
                        spans
                            .iter()
                            .filter(|s| s.call_seq < seq)
                            .map(|s| s.end_ns)
                            .chain(forgotten_end)
                            .max()
                    },
                    |id| self.ledger.get(&id).map(|o| o.bytes),
                    &self.readings,
                );
                if let Some(failed) = &self.folds.ran_out
                    && failed.seq == c.seq
                {
                    // The memory when the call ran out: the latest sample so far
                    // taken by its end (later arrivals may still come closer).
                    for s in self.samples.iter() {
                        self.sample_stats.note_ran_out(s, failed.end_ns);
                    }
                    // Who held the process's memory then: the objects as they
                    // stood when the call returned, against a reading that is
                    // not behind them (this one, or the next before any change).
                    self.ran_out_end = Some(c.end_ns);
                    self.known_at_ran_out = Some(self.holders_at(c.end_ns, 0));
                    // Once, at the first refusal: a walk of the ledger.
                    self.unsized_at_ran_out = self
                        .ledger
                        .iter()
                        .filter(|(_, o)| reserves::unsized_kind(o.kind) && o.held())
                        .map(|(id, _)| *id)
                        .collect();
                    match self.process_reading {
                        Some((t, bytes)) if self.objects_changed_ns.is_none_or(|o| t >= o) => {
                            self.holders_at_ran_out = Some(self.holders_at(t, bytes));
                        }
                        _ => {}
                    }
                }
                self.ran_out_in_process(c);
                self.calls.push(c.clone());
            }
            Event::Object(o) => {
                self.settle(o.t_ns, Some(o.id));
                self.objects_changed_ns = self.objects_changed_ns.max(Some(o.t_ns));
                let (count, bytes) = if o.action == ObjectAction::Created {
                    (1, o.bytes as i64)
                } else if o.ends_life() {
                    (-1, -(o.bytes as i64))
                } else {
                    (0, 0)
                };
                let live = self.live.entry(o.kind).or_default();
                *live += count;
                let peak = self.peak_live.entry(o.kind).or_default();
                *peak = (*peak).max(*live);
                self.live_bytes += bytes;
                let before = LiveIndex::before(&self.ledger, o.id);
                objects::apply(&mut self.ledger, o);
                // A lab's worker sends the call first, then the object it made.
                if o.action == ObjectAction::Created
                    && let Some(c) = self.calls.last().filter(|c| c.object == Some(o.id))
                    && let Some(st) = self.ledger.get_mut(&o.id)
                {
                    st.made_by = Some(objects::MadeBy::of(c));
                }
                self.live_index.update(&self.ledger, o.id, before);
                self.measure_reserve(o);
                self.folds.object(o);
                self.objects.push(o.clone());
                self.fold_gone(o.t_ns);
            }
            Event::DeviceSpan(s) => {
                self.folds.span(s);
                if let Some(old) = self.spans.push(s.clone()) {
                    self.spans_forgotten_end =
                        Some(self.spans_forgotten_end.unwrap_or(0).max(old.end_ns));
                    self.spans_forgotten_seq =
                        Some(self.spans_forgotten_seq.unwrap_or(0).max(old.call_seq));
                }
            }
            Event::Block(b) => {
                self.folds.block(b);
                self.blocks.push(b.clone());
            }
            Event::Sample(s) => {
                match &self.end {
                    // After the worker ended its own reading of "its memory" is gone;
                    // samples past the end describe the device, not the run.
                    Some(e) if s.t_ns > e.t_ns => self.after_exit.push((s.t_ns, s.used_bytes)),
                    _ => {
                        self.insert_reading(s.t_ns, s.process_bytes.unwrap_or(s.used_bytes));
                        self.process_sample(s);
                    }
                }
                let start = self.meta.as_ref().map(|m| m.t_ns);
                self.sample_stats
                    .add(s, start, self.end.as_ref().map(|e| e.t_ns));
                if let Some(failed) = &self.folds.ran_out {
                    self.sample_stats.note_ran_out(s, failed.end_ns);
                }
                self.samples.push(s.clone());
            }
            Event::Note(n) => self.notes.push(n.clone()),
            // A claim that compares variants is judged again once they all
            // ran: the later verdict replaces the one its run got alone.
            Event::Claim(c) => match self.claims.iter_mut().find(|x| x.name == c.name) {
                Some(old) => *old = c.clone(),
                None => self.claims.push(c.clone()),
            },
            Event::End(e) => {
                self.settle(u64::MAX, None);
                self.leaked.clear();
                for l in &e.leaked {
                    *self.leaked.entry(l.kind).or_default() += 1;
                }
                self.end = Some(e.clone());
                self.split_at_end(e.t_ns);
                let start = self.meta.as_ref().map(|m| m.t_ns);
                self.sample_stats.close(e.t_ns, &self.samples, start);
            }
            Event::Agent(a) => {
                self.settle(a.t_ns, None);
                match &a.state {
                    AgentState::Detached { .. } => {
                        self.agents_running.remove(&a.pid);
                        self.holders_dirty |= self.ranks.detached(a.pid, a.t_ns);
                        self.agents_last_detached = self.agents_last_detached.max(Some(a.t_ns));
                    }
                    other => {
                        self.agents_running.insert(a.pid);
                        if let AgentState::Attached {
                            destruction,
                            exe,
                            rank,
                        } = other
                        {
                            self.deletion_watched.extend(destruction.iter().copied());
                            self.ranks.attached(a.pid, a.parent_pid, exe, rank.as_ref());
                        }
                    }
                }
                self.agents.push(a.clone());
                if let Some(gone) = self.program_gone() {
                    while self.holders_recent.back().is_some_and(|h| h.at_ns > gone) {
                        self.holders_recent.pop_back();
                    }
                    self.composition.cut_after(gone);
                }
            }
            Event::Stack(s) => {
                let owner = owners::Owner::of(&s.frames);
                if self.owners.insert(s.id, owner) != Some(owner)
                    && self
                        .live_index
                        .held_bytes_by_stack
                        .contains_key(&Some(s.id))
                {
                    self.holders_dirty = true;
                }
                self.stacks.insert(s.id, s.frames.clone());
            }
            Event::Load(l) => self.load = Some(l.clone()),
            Event::Framework(f) => {
                *self.folds.received.entry(f.pid).or_default() += 1;
                self.settle(f.t_ns, None);
                self.holders_dirty |= self.frameworks.apply(f);
            }
            Event::GpuReading(g) => {
                let gone = self.ranks.gone_by(u64::MAX).len();
                let peaked = self.ranks.reading(g);
                self.holders_dirty |= self.ranks.gone_by(u64::MAX).len() != gone;
                for pid in peaked {
                    let moment = self.ranks.moment(pid, g.t_ns, self.held_by_process(pid));
                    if let Some(m) = self.ranks.members.get_mut(&pid) {
                        m.peak = Some(moment);
                    }
                }
            }
        }
    }

    /// The bytes of the objects of a size process `pid` holds, by who made
    /// them.
    pub fn held_by_process(&self, pid: u32) -> BTreeMap<owners::Owner, u64> {
        let mut by = BTreeMap::new();
        let range = (pid, None)..=(pid, Some(u64::MAX));
        for ((_, stack), bytes) in self.live_index.held_bytes_by_pid_stack.range(range) {
            let owner = stack
                .and_then(|id| self.owners.get(&id).copied())
                .unwrap_or(owners::Owner::Unknown);
            *by.entry(owner).or_default() += bytes;
        }
        by
    }

    /// A call refused for want of memory: that process's moment, and when it
    /// is the program's first, every other process's too.
    fn ran_out_in_process(&mut self, c: &Call) {
        let refused = !c.expect_error
            && matches!(&c.status, CallStatus::Error { name, .. } if fold::RAN_OUT.contains(&name.as_str()));
        let fresh = self
            .ranks
            .members
            .get(&c.pid)
            .is_none_or(|m| m.ran_out.is_none());
        if !refused || !fresh {
            return;
        }
        let status = match &c.status {
            CallStatus::Error { name, .. } => name.clone(),
            _ => String::new(),
        };
        let moment = self
            .ranks
            .moment(c.pid, c.end_ns, self.held_by_process(c.pid));
        let refusal = c.refused.as_deref();
        let call = ranks::RanOutCall {
            api: c.api.to_string(),
            status,
            end_ns: c.end_ns,
            asked_bytes: refusal.and_then(|r| r.asked_bytes),
            driver_free_bytes: refusal.and_then(|r| r.free_bytes),
            moment,
        };
        self.ranks.attached_if_unseen(c.pid);
        if let Some(m) = self.ranks.members.get_mut(&c.pid) {
            m.ran_out = Some(call);
        }
        if self.ranks.first_ran_out.is_none() {
            self.ranks.first_ran_out = Some((c.pid, c.end_ns));
            let pids: Vec<u32> = self.ranks.members.keys().copied().collect();
            for pid in pids {
                let moment = self.ranks.moment(pid, c.end_ns, self.held_by_process(pid));
                if let Some(m) = self.ranks.members.get_mut(&pid) {
                    m.at_first_ran_out = Some(moment);
                }
            }
        }
    }

    /// A sample, as the process's own memory. NVML lists a process once it
    /// has a context on the device: before the first listing, it held none of
    /// the device's memory, and the latest such reading is the "before" of its
    /// first context (taken only once a listing shows NVML lists processes
    /// here at all). The times of the latest few are kept until then.
    fn process_sample(&mut self, s: &Sample) {
        match s.process_bytes {
            Some(own) => {
                for t in std::mem::take(&mut self.unlisted) {
                    self.holders_dirty |= self.reserves.reading(t, 0);
                }
                self.process_listed = true;
                self.process_memory(s.t_ns, own);
            }
            None if s.source == crate::trace::MemorySource::Nvml && !self.process_listed => {
                if self.unlisted.len() == UNLISTED_KEPT {
                    self.unlisted.remove(0);
                }
                self.unlisted.push(s.t_ns);
            }
            None => {}
        }
    }

    /// A reading of the process's own memory: the reserves it measures, and
    /// who held it then, composed once the events up to it have arrived
    /// ([`Run::settle`]).
    fn process_memory(&mut self, t_ns: u64, bytes: u64) {
        self.holders_dirty |= self.reserves.reading(t_ns, bytes);
        // A reading older than an object change already folded would be set
        // beside a ledger that is ahead of it: it measures, it is not composed.
        let behind = self.objects_changed_ns.is_some_and(|t| t_ns < t);
        if !behind
            && self.process_reading.is_none_or(|(t, _)| t_ns >= t)
            && !self.program_gone_by(t_ns)
        {
            self.settle(t_ns, None);
            self.process_reading = Some((t_ns, bytes));
            self.pending_reading = Some((t_ns, bytes));
        }
    }

    /// Folds the objects the program is done with out of the ledger, when it
    /// has doubled since the last sweep ([`gone`]).
    fn fold_gone(&mut self, now_ns: u64) {
        if !self.gone.due(self.ledger.len()) {
            return;
        }
        let ran_out = self
            .folds
            .ran_out
            .as_ref()
            .map(|c| (c.end_ns, self.destructors_told()));
        let tentative = self.tentative.as_ref().map(|t| t.object);
        // What a live object's references reach, however many released
        // objects lie between: the report names those paths (what pins what).
        let pinned = gone::reached(&self.ledger, &self.live_index.referring);
        let foldable: Vec<u64> = self
            .ledger
            .values()
            .filter(|o| {
                gone::Gone::foldable(o, now_ns, self.deletion_watched.contains(&o.kind))
                    && Some(o.id) != tentative
                    && !pinned.contains(&o.id)
                    && !self.live_index.is_referred(o.id)
            })
            .map(|o| o.id)
            .collect();
        if foldable.is_empty() {
            self.gone.swept(self.ledger.len());
            return;
        }
        for id in foldable {
            if let Some(o) = self.ledger.remove(&id) {
                self.live_index.forget(&o);
                self.gone.fold(&o, ran_out);
            }
        }
        // A lab report's table of deletions lists only what the ledger holds.
        let ledger = &self.ledger;
        self.folds
            .created
            .retain(|(id, ..)| ledger.contains_key(id));
        self.gone.swept(self.ledger.len());
    }

    /// Whether the driver tells when it deletes what was released (a lab on
    /// OpenCL), as the ran-out black box counts "not yet destroyed".
    pub fn destructors_told(&self) -> bool {
        self.meta
            .as_ref()
            .is_some_and(|m| m.backend == BackendKind::OpenCl)
    }

    /// Objects folded out of the ledger so far.
    pub fn objects_folded(&self) -> u64 {
        self.gone.folded()
    }

    /// What the objects folded out of the ledger add to what the first call
    /// that ran out of memory saw, and whether some folded before that call
    /// was known may be missing from it.
    pub fn ran_out_folded(&self) -> (&RanOutCounts, bool) {
        let partial = self
            .folds
            .ran_out
            .as_ref()
            .is_some_and(|c| self.gone.folded_past(c.end_ns));
        (&self.gone.at_ran_out, partial)
    }

    /// Composes the pending reading once something from after it arrives
    /// (`now_ns` past it: every source sends in time order, so every object
    /// event up to the reading is in), or at the end: the readings run ahead
    /// of the agents' records, and a composition taken at once would set a
    /// reading after a free beside a ledger that still holds the object.
    ///
    /// Settled by an object event whose call has not arrived (an agent sends
    /// the object first), the composition stays tentative: if that call turns
    /// out to have begun before the reading, and moved memory of a size, the
    /// reading was taken while the call ran and says nothing sure of it, and
    /// the composition is taken back ([`Run::take_back_a_reading_within`]).
    fn settle(&mut self, now_ns: u64, by_object: Option<u64>) {
        let Some((t_ns, bytes)) = self.pending_reading.filter(|(t, _)| now_ns > *t) else {
            return;
        };
        self.pending_reading = None;
        self.tentative = by_object.map(|object| Tentative {
            object,
            reading_ns: t_ns,
            peak_before: self.holders_at_peak.clone(),
        });
        let next = match self.holders_recent.back() {
            Some(h) if !self.holders_dirty => Some(holders::Holders {
                at_ns: t_ns,
                total: bytes,
                ..h.clone()
            }),
            Some(h)
                if self.reserves.measurements() > HOLDERS_ALWAYS
                    && t_ns < h.at_ns + HOLDERS_EVERY_NS =>
            {
                None
            }
            _ => {
                self.holders_dirty = false;
                Some(self.holders_at(t_ns, bytes))
            }
        };
        let Some(h) = next else {
            let grown = self
                .holders_at_peak
                .as_ref()
                .is_none_or(|p| bytes > p.total + (1 << 20).max(p.total / 100));
            if grown {
                self.holders_at_peak = Some(self.holders_at(t_ns, bytes));
            }
            return;
        };
        // The first reading after the refused call, before any change since.
        if let Some(end) = self.ran_out_end
            && self.holders_at_ran_out.is_none()
            && t_ns >= end
            && self.objects_changed_ns.is_none_or(|o| o <= end)
        {
            self.holders_at_ran_out = Some(h.clone());
        }
        // The latest reading at the highest value: a call in flight at the
        // first of them may have returned by a later one.
        if self
            .holders_at_peak
            .as_ref()
            .is_none_or(|p| h.total >= p.total)
        {
            self.holders_at_peak = Some(h.clone());
        }
        if self.holders_recent.len() == HOLDERS_KEPT {
            self.holders_recent.pop_front();
        }
        self.composition.push(&h);
        self.holders_recent.push_back(h);
    }

    /// The call of the object that settled the latest composition arrived: if
    /// it began before that reading and moved memory of a size, the reading
    /// was taken while it ran, and its composition is taken back.
    fn take_back_a_reading_within(&mut self, c: &Call) {
        let Some(t) = self.tentative.take() else {
            return;
        };
        let sized = self.ledger.get(&t.object).is_some_and(|o| o.bytes > 0);
        if c.object != Some(t.object) || !sized || c.begin_ns > t.reading_ns {
            return;
        }
        if self
            .holders_recent
            .back()
            .is_some_and(|h| h.at_ns == t.reading_ns)
        {
            self.holders_recent.pop_back();
            self.composition.take_back(t.reading_ns);
        }
        self.holders_at_peak = t.peak_before;
        self.holders_dirty = true;
    }

    /// The notes a report or a panel says: all of them, but gpulab's notes on
    /// how it set up OpenCL only for a program in which an agent attached to
    /// OpenCL.
    pub fn notes_said(&self) -> impl Iterator<Item = &Note> + '_ {
        let opencl = self
            .agents
            .iter()
            .any(|a| a.api == "opencl" && matches!(a.state, AgentState::Attached { .. }));
        self.notes.iter().filter(move |n| {
            opencl || n.level != crate::trace::NoteLevel::Info || !n.text.starts_with(OPENCL_SET_UP)
        })
    }

    /// When a watched program's last process said its last record: every
    /// process whose agent attached has detached. None while one runs, and
    /// for a lab.
    fn program_gone(&self) -> Option<u64> {
        self.agents_last_detached
            .filter(|_| self.agents_running.is_empty())
    }

    fn program_gone_by(&self, t_ns: u64) -> bool {
        !self.agents.is_empty() && self.program_gone().is_some_and(|gone| t_ns > gone)
    }

    /// The agent read the device's memory on each side of `c`: the object it
    /// made holds the step; a launch's step (its function's code, loaded at
    /// its first launch) is held by the newest context the process holds.
    fn measured_by_the_agent(&mut self, c: &Call, step: i64) {
        let pid = c.pid;
        let made = c.object.filter(|id| {
            self.ledger
                .get(id)
                .is_some_and(|o| reserves::unsized_kind(o.kind))
        });
        let holder = made.or_else(|| {
            self.ledger
                .iter()
                .rev()
                .find(|(id, o)| o.kind == ObjKind::Context && (*id >> 32) as u32 == pid && o.held())
                .map(|(id, _)| *id)
        });
        if let Some(id) = holder {
            self.reserves
                .direct(&[id], step, c.begin_ns, c.end_ns, made.is_none());
            self.holders_dirty = true;
        }
    }

    /// An object event, as the reserves measure: an unsized object's making
    /// call opens a measurement; a sized object made or deleted meanwhile is
    /// taken out of it.
    fn measure_reserve(&mut self, o: &ObjectEvent) {
        self.holders_dirty = true;
        match o.action {
            ObjectAction::Created if o.bytes == 0 && reserves::unsized_kind(o.kind) => {
                let (begin, end) = self
                    .calls
                    .last()
                    .filter(|c| c.object == Some(o.id))
                    .map_or((o.t_ns, o.t_ns), |c| (c.begin_ns, c.end_ns));
                self.reserves.made_unsized(o.id, begin, end);
            }
            ObjectAction::Created => {
                self.reserves.sized(o.t_ns, o.bytes as i64);
                // A lab's worker sends the call first.
                if let Some(c) = self.calls.last().filter(|c| c.object == Some(o.id)) {
                    let (begin, end) = (c.begin_ns, c.end_ns);
                    self.reserves.sized_call(begin, end);
                }
            }
            ObjectAction::Destroyed => self.reserves.sized(o.t_ns, -(o.bytes as i64)),
            // A kind whose deletion no agent reports is gone at its last
            // release (a cuMemFree): its bytes leave the measurement then, as
            // a destroyed one's do (a program that frees right after it ran
            // out left the context's reserve unmeasured on the H100).
            _ if o.ends_life() && !self.deletion_watched.contains(&o.kind) => {
                self.reserves.sized(o.t_ns, -(o.bytes as i64));
                if let Some(c) = self.calls.last().filter(|c| c.object == Some(o.id)) {
                    let (begin, end) = (c.begin_ns, c.end_ns);
                    self.reserves.sized_call(begin, end);
                }
            }
            _ => {}
        }
    }

    pub fn lab_id(&self) -> Option<&str> {
        self.meta.as_ref()?.lab.as_ref().map(|l| l.id.as_str())
    }

    pub fn variant(&self) -> Option<&str> {
        self.meta.as_ref()?.lab.as_ref().map(|l| l.variant.as_str())
    }

    pub fn baseline(&self) -> Option<u64> {
        self.meta.as_ref()?.baseline_bytes
    }

    /// Start of the run: the meta event's time, else the first call's.
    pub fn t0(&self) -> u64 {
        self.meta
            .as_ref()
            .map(|m| m.t_ns)
            .or(self.folds.first_begin)
            .unwrap_or(0)
    }

    /// Every execution of the line(s) carrying `tag`, folded.
    pub fn tagged(&self, tag: &str) -> Option<&TagFold> {
        self.folds.tags.get(tag)
    }

    /// Whether the window still holds every call that began in `lo..=hi` and
    /// every device span of those calls (`calls`: their seqs): what a metric
    /// that reads a block's calls and spans needs to read all of them.
    pub fn window_holds(&self, lo: u64, calls: &[u64]) -> bool {
        let calls_whole =
            self.calls.forgotten() == 0 || self.calls.first().is_some_and(|c| c.begin_ns < lo);
        let spans_whole = match (self.spans_forgotten_seq, calls.iter().min()) {
            (Some(gone), Some(first)) => gone < *first,
            _ => true,
        };
        calls_whole && spans_whole
    }

    /// The first `repeat` block carrying `tag`.
    pub fn tagged_block(&self, tag: &str) -> Option<&Block> {
        self.folds.tagged_blocks.get(tag)
    }

    /// Arrivals are nearly in time order (worker readings lag the sampler by a
    /// call at most), so this is an append almost always.
    fn insert_reading(&mut self, t: u64, v: u64) {
        self.folds.reading(t, v);
        if self.readings.last().is_none_or(|(lt, _)| *lt <= t) {
            // In a stretch of equal readings only its first and its last are
            // kept: the last one moves on. Every change stays, at its time.
            let n = self.readings.len();
            if self.thin_readings
                && n >= 2
                && self.readings[n - 1].1 == v
                && self.readings[n - 2].1 == v
            {
                self.readings[n - 1].0 = t;
                return;
            }
            self.readings.push((t, v));
        } else {
            let pos = self.readings.partition_point(|(lt, _)| *lt <= t);
            self.readings.insert(pos, (t, v));
        }
    }

    /// Samples that arrived before the `end` event but were taken after it belong
    /// to the device after the run, as later ones do. (Calls all end before it.)
    fn split_at_end(&mut self, end_ns: u64) {
        let cut = self.readings.partition_point(|(t, _)| *t <= end_ns);
        if cut == self.readings.len() {
            return;
        }
        self.readings.truncate(cut);
        self.after_exit = self
            .samples
            .iter()
            .filter(|s| s.t_ns > end_ns)
            .map(|s| (s.t_ns, s.used_bytes))
            .collect();
    }

    /// The APIs whose calls this run shows: a lab's backend, or, for a watched
    /// program, those its agents attached to so far (none before the first).
    pub fn apis(&self) -> Vec<BackendKind> {
        let Some(meta) = &self.meta else {
            return Vec::new();
        };
        if meta.watch.is_none() {
            return vec![meta.backend];
        }
        let mut apis: Vec<BackendKind> = self
            .agents
            .iter()
            .filter(|a| matches!(a.state, AgentState::Attached { .. }))
            .filter_map(|a| BackendKind::from_api(&a.api))
            .collect();
        apis.sort_by_key(|b| b.as_str());
        apis.dedup();
        apis
    }

    /// Latest memory reading above the baseline, bytes (negative when below).
    pub fn device_above_baseline(&self) -> Option<i64> {
        let base = self.baseline()?;
        let (_, v) = self.readings.last()?;
        Some(*v as i64 - base as i64)
    }

    /// Highest memory reading of the run above the baseline, bytes.
    pub fn peak_above_baseline(&self) -> Option<u64> {
        let base = self.baseline()?;
        self.readings
            .iter()
            .map(|(_, v)| v.saturating_sub(base))
            .max()
    }

    /// Samples the parent took after the worker was gone.
    pub fn after_exit(&self) -> Option<&Sample> {
        let end = self.end.as_ref()?.t_ns;
        self.samples.iter().rev().find(|s| s.t_ns > end)
    }

    /// One summary per script line, in script order (lines that never ran too),
    /// from the folded calls and the latest `repeat` block of each line.
    pub fn lines(&self) -> Vec<LineSummary> {
        let mut by_line: BTreeMap<u32, LineSummary> = BTreeMap::new();
        if let Some(lab) = self.meta.as_ref().and_then(|m| m.lab.as_ref()) {
            for (line, text) in &lab.script {
                by_line.insert(*line, LineSummary::empty(*line, text.clone()));
            }
        }
        for (line, folded) in &self.folds.lines {
            match by_line.get_mut(line) {
                Some(s) => {
                    *s = LineSummary {
                        text: std::mem::take(&mut s.text),
                        ..folded.clone()
                    }
                }
                None => {
                    by_line.insert(*line, folded.clone());
                }
            }
        }
        for b in self.folds.last_block.values() {
            if let Some(s) = by_line.get_mut(&b.line) {
                s.tag = b.tag.clone();
                s.calls = b.iterations;
                s.host_ns_total = b.end_ns.saturating_sub(b.begin_ns);
                s.host_ns_max = s.host_ns_total;
                s.mem_delta = match (b.mem_before, b.mem_after) {
                    (Some(x), Some(y)) => Some(y as i64 - x as i64),
                    _ => None,
                };
            }
        }
        by_line.into_values().collect()
    }

    /// Live objects per kind now, or at the end. A lab worker that finished or
    /// failed lists what it left (`live_at_end`); a worker that was killed or
    /// crashed left no list, and a watched program never writes one, so there
    /// the ledger's running counts are the last word.
    pub fn live_counts(&self) -> BTreeMap<ObjKind, usize> {
        let listed = self.meta.as_ref().is_some_and(|m| m.watch.is_none())
            && matches!(
                self.end.as_ref().map(|e| &e.status),
                Some(EndStatus::Finished | EndStatus::Failed { .. })
            );
        if listed {
            return self.live_at_end();
        }
        let mut out: BTreeMap<ObjKind, usize> = ObjKind::ALL.iter().map(|k| (*k, 0)).collect();
        for (k, n) in &self.live {
            out.insert(*k, (*n).max(0) as usize);
        }
        out
    }

    /// Live objects per kind at the end: the worker's own list of what was left.
    pub fn live_at_end(&self) -> BTreeMap<ObjKind, usize> {
        let mut out: BTreeMap<ObjKind, usize> = ObjKind::ALL.iter().map(|k| (*k, 0)).collect();
        if self.end.is_some() {
            // Counted when the end came: a list of 200,000 is not walked a frame.
            for (k, n) in &self.leaked {
                *out.entry(*k).or_default() += n;
            }
        } else {
            for (k, n) in &self.live {
                out.insert(*k, (*n).max(0) as usize);
            }
        }
        out
    }

    /// From the start to the end event. None without an end, or without a start
    /// to measure from (a run cancelled before its worker said anything: `t0` is
    /// then 0, a time since boot, not since the run).
    pub fn duration_ns(&self) -> Option<u64> {
        let end = self.end.as_ref()?.t_ns;
        if self.meta.is_none() && self.calls.seen() == 0 {
            return None;
        }
        Some(end.saturating_sub(self.t0()))
    }
}

impl LineSummary {
    pub(crate) fn empty(line: u32, text: String) -> Self {
        LineSummary {
            line,
            text,
            tag: None,
            driver: None,
            calls: 0,
            errors: 0,
            error: None,
            expect_error: false,
            host_ns_total: 0,
            host_ns_max: 0,
            mem_delta: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::*;

    fn call(seq: u64, line: u32, begin: u64, end: u64, mem: (u64, u64)) -> Event {
        Event::Call(Call {
            seq,
            pid: 1,
            line: Some(line),
            api: "clFinish".into(),
            driver: "clFinish".into(),
            begin_ns: begin,
            end_ns: end,
            mem_before: Some(mem.0),
            mem_after: Some(mem.1),
            ..Default::default()
        })
    }

    #[test]
    fn lines_sum_their_executions() {
        let run = Run::from_events(&[
            call(0, 4, 0, 1_000_000, (10, 20)),
            call(1, 4, 2_000_000, 5_000_000, (20, 25)),
            call(2, 5, 6_000_000, 7_000_000, (25, 5)),
        ]);
        let lines = run.lines();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].calls, 2);
        assert_eq!(lines[0].mem_delta, Some(15));
        assert!((lines[0].host_ms_mean() - 2.0).abs() < 1e-9);
        assert_eq!(lines[1].mem_delta, Some(-20));
    }

    #[test]
    fn object_events_keep_live_counts() {
        let obj = |action, refcount| {
            Event::Object(ObjectEvent {
                t_ns: 0,
                id: 1,
                kind: ObjKind::Buffer,
                action,
                handle: Some("buf".into()),
                bytes: 64,
                refcount,
                refs: vec![],
                line: None,
                stack: None,
            })
        };
        let run = Run::from_events(&[
            obj(ObjectAction::Created, 1),
            obj(ObjectAction::Retained, 2),
            obj(ObjectAction::Released, 1),
        ]);
        assert_eq!(run.live[&ObjKind::Buffer], 1);
        assert_eq!(run.live_bytes, 64);
        let run = Run::from_events(&[
            obj(ObjectAction::Created, 1),
            obj(ObjectAction::Released, 0),
        ]);
        assert_eq!(run.live[&ObjKind::Buffer], 0);
    }

    fn sample(t: u64, used: u64, own: u64) -> Event {
        Event::Sample(Sample {
            t_ns: t,
            source: MemorySource::Nvml,
            used_bytes: used,
            total_bytes: None,
            process_bytes: Some(own),
            others: None,
        })
    }

    /// A steady device costs two readings however long it stays steady; every
    /// change is kept at its time, and the value at any time is what it was.
    #[test]
    fn a_stretch_of_equal_readings_is_kept_as_its_first_and_last() {
        let mut events: Vec<Event> = (0..1000).map(|i| sample(i * 10, 7, 5)).collect();
        events.push(sample(10_000, 9, 6));
        events.extend((1001..2000).map(|i| sample(i * 10, 9, 6)));
        let run = Run::from_events(&events);
        assert_eq!(
            run.readings,
            vec![(0, 5), (9_990, 5), (10_000, 6), (19_990, 6)]
        );
        assert_eq!(run.sample_stats.seen, 2000);
        assert_eq!(run.samples.len(), 2000.min(SAMPLES_KEPT));
        assert_eq!(run.sample_stats.max_process, Some(6));
        let all = Run::folding(Run::keeping_all(), &events);
        assert_eq!(all.readings.len(), 2000);
    }

    /// The samples' figures a report reads are of every sample, not of the window.
    #[test]
    fn sample_figures_cover_every_sample_past_the_window() {
        let n = SAMPLES_KEPT as u64 + 500;
        let mut events: Vec<Event> = (0..n).map(|i| sample(i, 100 + i % 3, i % 5)).collect();
        events.push(Event::End(End {
            t_ns: n / 2,
            status: EndStatus::Finished,
            leaked: vec![],
        }));
        let run = Run::from_events(&events);
        let s = &run.sample_stats;
        assert_eq!(s.seen, n);
        assert_eq!(s.first.as_ref().map(|f| f.t_ns), Some(0));
        assert_eq!((s.max_used, s.max_process), (Some(102), Some(4)));
        assert_eq!(run.samples.len(), SAMPLES_KEPT);
    }

    #[test]
    fn readings_stay_sorted_when_events_arrive_out_of_order() {
        let run = Run::from_events(&[sample(10, 100, 1), sample(30, 300, 3), sample(20, 200, 2)]);
        assert_eq!(run.readings, vec![(10, 1), (20, 2), (30, 3)]);
    }

    #[test]
    fn samples_taken_after_the_end_describe_the_device_whenever_they_arrive() {
        let end = Event::End(End {
            t_ns: 25,
            status: EndStatus::Finished,
            leaked: vec![],
        });
        // One sample taken after the end arrives before it, one after it.
        let run = Run::from_events(&[
            sample(10, 100, 1),
            sample(30, 300, 3),
            end,
            sample(40, 400, 4),
        ]);
        assert_eq!(run.readings, vec![(10, 1)]);
        assert_eq!(run.after_exit, vec![(30, 300), (40, 400)]);
        assert_eq!(run.after_exit().map(|s| s.t_ns), Some(40));
    }

    #[test]
    fn the_ledger_keeps_each_objects_life_and_the_peak_per_kind() {
        let obj = |id, t_ns, action, refcount| {
            Event::Object(ObjectEvent {
                t_ns,
                id,
                kind: ObjKind::Event,
                action,
                handle: None,
                bytes: 0,
                refcount,
                refs: vec![],
                line: None,
                stack: None,
            })
        };
        let run = Run::from_events(&[
            obj(1, 1, ObjectAction::Created, 1),
            obj(2, 2, ObjectAction::Created, 1),
            obj(1, 3, ObjectAction::Released, 0),
            obj(3, 4, ObjectAction::Created, 1),
            obj(1, 9, ObjectAction::Destroyed, 0),
        ]);
        assert_eq!(run.peak_live[&ObjKind::Event], 2);
        assert_eq!(run.live[&ObjKind::Event], 2);
        let first = &run.ledger[&1];
        assert_eq!((first.released_ns, first.destroyed_ns), (Some(3), Some(9)));
        assert!(!first.held());
        assert!(run.ledger[&2].held());
    }
}
