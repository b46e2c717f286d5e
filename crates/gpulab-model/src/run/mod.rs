//! The Run model: events folded into what a report, a verdict, an export, the
//! dashboard and the watch report show. The one fold of the stream: pure data,
//! built the same way, one event at a time, live, from a recording or in a replay.
//!
//! A run is a few parts, each owning one concern and its own fields:
//! - [`window::Window`]: the latest events whole (calls, object events, device
//!   spans, samples), for the timeline and the live panels;
//! - [`Folds`]: the aggregates of every call, span and object event;
//! - [`ledger::Ledger`]: each object's latest state, the live index and the
//!   counts per kind, and what was folded away ([`gone`]);
//! - [`readings::Readings`]: the memory readings and the samples' figures;
//! - [`compose::Composer`]: the reserves and who held the process's memory;
//! - [`program::Program`]: a watched program's agents, stacks, frameworks
//!   and ranks.
//!
//! [`Run::apply`] hands each event to the parts in a fixed order, written
//! there. The composer takes a composition again only when a part it reads
//! counted a change since the last one ([`compose`]).

mod compose;
pub mod composition;
pub mod deletions;
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
mod ledger;
mod live;
mod load;
pub(crate) mod objects;
pub mod owners;
mod program;
pub use program::UnwatchedLaunches;
mod quiet;
pub mod ranks;
mod readings;
pub mod reserves;
mod samples;
mod steps;
pub mod views;
mod window;

use std::collections::BTreeMap;

use crate::trace::ObjKind;

use self::reserves::Reserves;

/// How an informational note of gpulab's about the OpenCL loader it set up for
/// a watched program starts: such a note is said only when some process of the
/// program made an OpenCL call ([`Run::notes_said`]).
pub const OPENCL_SET_UP: &str = "OpenCL set-up: ";

pub use finding::Finding;
pub use fold::{ApiFold, Folds, TagFold};
pub use gone::RanOutCounts;
pub use lags::Lags;
pub use live::{HeldThen, LiveIndex, UNSEEN_MAKER, maker_text};
pub use load::{Load, loaded};
pub use objects::{MadeBy, ObjState};
pub use readings::AgentPeak;
pub use samples::{SAMPLES_KEPT, SampleStats};
pub use window::Recent;

use crate::trace::{
    AgentEvent, AgentState, BackendKind, Block, Call, CallStatus, Calling, ClaimVerdict,
    DeviceRead, DeviceSpan, End, EndStatus, Event, Frame, HostLoad, MemorySource, Meta, Note,
    ObjectEvent, ReadSide, Sample,
};

/// Calls a run keeps whole: the most recent ones.
pub const CALLS_KEPT: usize = 10_000;
/// Device spans a run keeps whole: the most recent ones.
pub const SPANS_KEPT: usize = 10_000;
/// Object events a run keeps whole: the most recent ones.
pub const OBJECTS_KEPT: usize = 10_000;

/// Misuses a run keeps one by one; past it they are only counted.
pub const MISUSES_KEPT: usize = 1000;

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
///
/// Its fields are its parts (see the module doc); everything is read through
/// methods, and only [`Run::apply`] changes it.
#[derive(Debug, Clone)]
pub struct Run {
    meta: Option<Meta>,
    notes: Vec<Note>,
    claims: Vec<ClaimVerdict>,
    /// What was predicted of each claim before the run (the latest per claim).
    predictions: std::collections::BTreeMap<String, gpulab_events::Predicted>,
    /// Ranges predicted for measured values before the run.
    estimates: Vec<gpulab_events::Estimate>,
    /// `gpulab watch`: calls that named an object the program had released,
    /// the first [`MISUSES_KEPT`] of them, and how many there were in all.
    misuses: Vec<gpulab_events::Misuse>,
    misuses_seen: u64,
    end: Option<End>,
    /// How busy the host was during the run, when the parent measured it.
    load: Option<HostLoad>,
    window: window::Window,
    folds: Folds,
    objects: ledger::Ledger,
    readings: readings::Readings,
    /// A watched program's own memory grown between its calls (CPU device).
    quiet: quiet::Quiet,
    composer: compose::Composer,
    program: program::Program,
    /// The agents' steps held back on a shared GPU.
    steps: steps::Steps,
    /// A program on a host of many GPUs: each process composed apart.
    views: Option<views::Views>,
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

/// OpenCL calls that wait for a queue's earlier work: the agent reads its
/// process's memory across one when a kernel's first run was among it.
fn waits_for_queued_work(api: &str) -> bool {
    matches!(
        api,
        "clFinish"
            | "clWaitForEvents"
            | "clEnqueueReadBuffer"
            | "clEnqueueWriteBuffer"
            | "clEnqueueReadBufferRect"
            | "clEnqueueWriteBufferRect"
    )
}

impl Run {
    /// A run that keeps every call, span and object event whole, and every
    /// object in its ledger.
    pub fn keeping_all() -> Run {
        Run {
            window: window::Window::new(usize::MAX, usize::MAX, usize::MAX, usize::MAX),
            readings: readings::Readings::new(false),
            objects: ledger::Ledger::never_folding(),
            ..Run::default()
        }
    }

    /// A run that keeps the most recent `calls`, `spans` and `objects` whole.
    pub fn bounded(calls: usize, spans: usize, objects: usize) -> Run {
        Run {
            meta: None,
            notes: Vec::new(),
            claims: Vec::new(),
            predictions: Default::default(),
            estimates: Vec::new(),
            misuses: Vec::new(),
            misuses_seen: 0,
            end: None,
            load: None,
            window: window::Window::new(calls, spans, objects, SAMPLES_KEPT),
            folds: Folds::default(),
            objects: ledger::Ledger::default(),
            readings: readings::Readings::new(true),
            quiet: quiet::Quiet::default(),
            composer: compose::Composer::default(),
            program: program::Program::default(),
            steps: steps::Steps::default(),
            views: None,
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
        Run::folding(Run::default(), events)
    }

    /// Folds one event in. Each event goes to the parts in this order: a
    /// pending reading is composed first (`settle`: every event from after it
    /// means the objects up to it are in), then the part the event is about,
    /// then the parts that measure from it, then the window.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Meta(m) => {
                self.program.ranks.start(&m.gpus);
                self.views = views::Views::of(m);
                self.meta = Some(m.as_ref().clone());
            }
            Event::Calling(c) => self.window.in_flight = Some(c.clone()),
            Event::Call(c) => self.call(c),
            Event::Object(o) => self.object(o),
            Event::DeviceSpan(s) => {
                self.folds.span(s);
                self.window.span(s);
            }
            Event::Block(b) => {
                self.folds.block(b);
                self.window.blocks.push(b.clone());
            }
            Event::Sample(s) => self.sample(s),
            Event::Note(n) => self.notes.push(n.clone()),
            // A claim that compares variants is judged again once they all
            // ran: the later verdict replaces the one its run got alone.
            Event::Claim(c) => match self.claims.iter_mut().find(|x| x.name == c.name) {
                Some(old) => *old = c.clone(),
                None => self.claims.push(c.clone()),
            },
            Event::End(e) => self.ended(e),
            Event::Agent(a) if matches!(a.state, AgentState::Launches { .. }) => {
                *self.folds.received.entry(a.pid).or_default() += 1;
                self.program.agent(a);
            }
            Event::Agent(a) => {
                self.settle(a.t_ns, None);
                if matches!(a.state, AgentState::Attached { .. })
                    && self.readings.api_from.is_none_or(|t| a.t_ns < t)
                {
                    // Readings that arrived before the first agent's record
                    // but were taken after it are no longer "before the API".
                    self.readings.api_from = Some(a.t_ns);
                    if self.readings.before_api.is_some_and(|(t, _)| t >= a.t_ns) {
                        self.readings.before_api = self.readings.latest_before(a.t_ns);
                    }
                }
                if let AgentState::Attached { destruction, .. } = &a.state
                    && let Some(family) = BackendKind::from_api(&a.api)
                {
                    self.objects.deletions.watch(a.pid, family, destruction);
                }
                self.program.agent(a);
                if let Some(gone) = self.program.gone() {
                    self.composer.cut_after(gone);
                }
            }
            Event::Stack(s) => {
                let held = &self.objects.index.held_bytes_by_stack;
                self.program.stack(s, |id| held.contains_key(&Some(id)));
            }
            Event::Load(l) => self.load = Some(l.clone()),
            Event::Framework(f) => {
                *self.folds.received.entry(f.pid).or_default() += 1;
                self.settle(f.t_ns, None);
                let index = &self.objects.index;
                self.program.framework(f, |pid| index.held_by(pid));
            }
            Event::GpuReading(g) => self.gpu_reading(g),
            Event::DeviceRead(r) => {
                *self.folds.received.entry(r.pid).or_default() += 1;
                self.folds.reads.device += 1;
                self.device_read(r);
            }
            Event::Prediction(p) => {
                self.predictions.insert(p.claim.clone(), p.predicted);
            }
            Event::Estimate(e) => {
                // The latest for a value stands, as for a claim's prediction.
                self.estimates.retain(|x| x.value != e.value);
                self.estimates.push(e.clone());
            }
            Event::Misuse(m) => {
                *self.folds.received.entry(m.pid).or_default() += 1;
                self.misuses_seen += 1;
                if self.misuses.len() < MISUSES_KEPT {
                    self.misuses.push(m.clone());
                }
            }
        }
        if let Some(views) = &mut self.views
            && !matches!(event, Event::Meta(_))
        {
            views.event(event);
        }
    }

    /// An agent's read of the device, around a call that moves much of its
    /// memory: a reading of the program's memory once NVML's readings have
    /// said what the rest of the device held ([`readings::Readings::device_read`]).
    /// Not where the program holds memory on more than GPU 0 (a read of one
    /// device is set against nothing else), nor once it made managed memory
    /// (what the device holds for it is no share a read can be composed
    /// with: [`Run::managed_on_device`]).
    fn device_read(&mut self, r: &DeviceRead) {
        if let Some(resident) = r.resident_bytes {
            self.resident_read(r, resident);
            return;
        }
        self.readings.read_total = Some(r.total_bytes);
        self.readings.max_read_used = self.readings.max_read_used.max(Some(r.used_bytes()));
        if self.ranks().spread() || self.readings.made_managed {
            return;
        }
        if let Some(others) = self.readings.device_read(r) {
            self.agent_reading(r, others);
        }
    }

    /// An agent's read of its process's resident memory on one side of a
    /// call that moves it by megabytes (a context, a queue, a build): where
    /// that memory is what the watch reads (a CPU device), the two sides of
    /// one call are its step, held as an agent's step across a call is (the
    /// object it made, or a build's program). A step, not a reading: the
    /// sampler reads the program's whole process tree, the agent its own
    /// process.
    fn resident_read(&mut self, r: &DeviceRead, bytes: u64) {
        let rss = self
            .meta
            .as_ref()
            .is_some_and(|m| m.watch.is_some() && m.device.memory_source == MemorySource::Rss);
        if !rss || self.end.is_some() {
            return;
        }
        // Before its first object, the process's memory right before the
        // call that makes it: where the runtime its first calls loaded ends
        // (no sample may fall between that load and the call).
        if r.side == ReadSide::Before
            && self.objects.changed_ns.is_none()
            && self
                .readings
                .before_first_object
                .is_none_or(|(t, _)| t < r.t_ns)
        {
            self.readings.before_first_object = Some((r.t_ns, bytes));
        }
        let Some((before_ns, before)) = self.readings.resident_side(r, bytes) else {
            return;
        };
        // The call's record came between its two reads.
        let call = self
            .window
            .calls
            .iter()
            .rev()
            .take(64)
            .find(|c| {
                c.pid == r.pid && c.api == r.api && c.begin_ns >= before_ns && c.end_ns <= r.t_ns
            })
            .filter(|c| c.status == CallStatus::Ok)
            .cloned();
        let Some(c) = call else {
            return;
        };
        let step = bytes as i64 - before as i64;
        if matches!(c.api.as_str(), "clBuildProgram" | "clCompileProgram") {
            // The build's step is the program's, measured across its call
            // alone (the readings' window across it gives way).
            if let Some(program) = self.newest_program(c.pid) {
                self.composer.direct(program, step, &c, false);
            }
        } else if waits_for_queued_work(&c.api) {
            // The agent reads across a wait when a kernel ran for the first
            // time in it: the code a CPU device compiled for it meanwhile,
            // less the buffers those kernels were the first to use (their
            // pages touched then are theirs, named since they were made).
            // Where that is more than the step, the step names nothing.
            let touched = r.first_touched_bytes.map_or(0, |b| b as i64);
            let code = step.saturating_sub(touched);
            if code > 0 {
                self.measured_by_the_agent_for(&c, None, code);
            }
        } else {
            self.measured_by_the_agent(&c, step);
        }
        self.composer.moved_ns = self.composer.moved_ns.max(Some(c.end_ns));
        // The latest composition was of a reading taken while the call ran
        // (PoCL's compiler, 50 ms, and the program's last reading 3 ms
        // before the build returned): composed again with the step counted;
        // a reading taken before most of it is then behind the shares.
        let inside = self
            .composer
            .recent
            .back()
            .filter(|h| h.at_ns > c.begin_ns && h.at_ns < c.end_ns)
            .map(|h| (h.at_ns, h.total));
        if let Some(reading) = inside
            && self.readings.pending.is_none()
        {
            self.composer.take_back_within_and_peak(
                c.begin_ns,
                c.end_ns,
                &mut self.readings.pending,
            );
            self.readings.pending = Some(reading);
            self.settle(r.t_ns, None);
            // Taken before most of the step (30 ms into a 54 ms build): the
            // shares name a page or more beyond it, and it is no moment of
            // the program's either way.
            if self
                .composer
                .recent
                .back()
                .is_some_and(|h| h.at_ns == reading.0 && h.unexplained() <= -(self.page() as i64))
            {
                self.composer.take_back_within_and_peak(
                    c.begin_ns,
                    c.end_ns,
                    &mut self.readings.pending,
                );
            }
        }
    }

    /// How finely a reading of the program's memory counts it: NVML's in
    /// pages of 2 MiB; a process's resident memory in pages of 4 KiB, moved
    /// by whatever its threads allocate meanwhile, so within 64 KiB. Shares
    /// beyond a reading by less than this are no sign it lags them.
    pub(super) fn page(&self) -> u64 {
        let rss = self
            .meta
            .as_ref()
            .is_some_and(|m| m.device.memory_source == MemorySource::Rss);
        if rss { 64 << 10 } else { reserves::PAGE }
    }

    /// Whether the program made managed memory: its pages move onto the
    /// device as kernels touch them, into the device's free memory and no
    /// process's NVML figure, and the driver keeps device memory for them
    /// after they are freed, so an agent's read of the device (or a step
    /// across a call) cannot be set against NVML's from then on.
    pub(super) fn made_managed(&self) -> bool {
        self.readings.made_managed
    }

    /// An NVML reading of the device (`used`) that listed the program's
    /// memory (`own`): the agents' reads it makes ready are readings.
    fn others_seen(&mut self, used: u64, own: u64) {
        for (r, others) in self.readings.others_seen(used, own) {
            self.agent_reading(&r, others);
        }
    }

    /// An agent's read of the device as a reading of the program's memory:
    /// the device's figure less `others`, what the rest of the device held.
    /// It measures the reserves and is composed as NVML's readings are,
    /// but is no point of NVML's series (the chart and the folds draw what
    /// the sampler read).
    fn agent_reading(&mut self, r: &DeviceRead, others: u64) {
        let bytes = self.readings.agent_read(r, others);
        // No read is set against NVML's once managed memory was made.
        self.process_memory(r.t_ns, bytes, Some(0));
    }

    /// The device memory held for the program's managed memory at an NVML
    /// sample that listed `own` bytes as its: the device's figure less what
    /// the rest of the device held before the program made managed memory,
    /// less `own`. NVML counts managed pages in the device's figure and in
    /// no process's (on the H200 a 256 MiB prefetch moved the device's
    /// figure by 256 MiB and the process's by nothing), and the driver's
    /// own memory for them too (UnifiedMemoryPerf's allocations of 4-64
    /// KiB: 128 MiB more on the device, kept after they were freed). 0 where
    /// it made none; None where it cannot be told: other processes on the
    /// device, the rest not measured before, a program spread over GPUs.
    fn managed_on_device(&self, s: &Sample, own: u64) -> Option<u64> {
        if !self.made_managed() {
            return Some(0);
        }
        if s.source != MemorySource::Nvml || self.ranks().spread() {
            return None;
        }
        let others = self.readings.others.filter(|_| self.readings.alone)?;
        Some(s.used_bytes.saturating_sub(others + own))
    }

    /// The run ended: the last reading is composed, the worker's list of
    /// what it left taken, and what came after the end is the device's.
    fn ended(&mut self, e: &End) {
        self.settle(u64::MAX, None);
        self.objects.left(e.leaked.iter().map(|l| l.kind));
        self.end = Some(e.clone());
        self.readings
            .split_at_end(e.t_ns, self.window.samples.iter());
        let start = self.meta.as_ref().map(|m| m.t_ns);
        self.readings
            .stats
            .close(e.t_ns, &self.window.samples, start);
    }

    /// A reading of the GPUs: each process whose memory peaked at it keeps
    /// who held it then.
    fn gpu_reading(&mut self, g: &crate::trace::GpuReading) {
        // GPU 0's, where the sampler reads: a reading of the rest of it.
        if g.gpu == 0
            && let Some(processes) = &g.processes
        {
            let own = processes.iter().filter_map(|p| p.bytes).sum();
            self.others_seen(g.used_bytes, own);
        }
        if g.gpu == 0 {
            for (c, step) in self.steps.reading(g) {
                self.measured_by_the_agent(&c, step);
            }
        }
        for pid in self.program.gpu_reading(g) {
            let held = self.held_by_process(pid);
            let ranks = &mut self.program.ranks;
            let moment = ranks.moment(pid, g.t_ns, held);
            if let Some(m) = ranks.members.get_mut(&pid) {
                m.peak = Some(moment);
            }
        }
    }

    /// The agent's step across `c`, the whole device's: it measures at once
    /// where the process has GPU 0 to itself, and is held back where it
    /// shares it until the readings say the rest stood still ([`steps`]).
    fn agent_step(&mut self, c: &Call, step: i64) {
        let shared = self.steps.shared(c.pid) || !self.readings.alone;
        if self.steps.read() && shared {
            self.steps.hold(c, step);
        } else {
            self.measured_by_the_agent(c, step);
        }
    }

    /// A call returned: the composition it may take back, the readings it
    /// carries, the object it made or let go of, the folds, and what the
    /// first call that ran out of memory saw.
    fn call(&mut self, c: &Call) {
        self.window.returned(c);
        self.take_back_a_reading_within(c);
        // A call that ended the life of a context (or another holder of a
        // reserve; `cuDevicePrimaryCtxReset` names none, its context's
        // destruction comes while it runs): readings taken while it ran are
        // no moment of the program.
        // So are readings taken while a context was being made: it held
        // part of what it would (NVIDIA's OpenCL: 30 of 514 MiB 2 ms before
        // `clCreateContext` returned), and the ledger none of it.
        let made_a_context = c.object.is_some_and(|id| {
            self.objects.unmade(id)
                && self
                    .objects
                    .ledger
                    .get(&id)
                    .is_some_and(|o| o.kind == ObjKind::Context)
        });
        if made_a_context
            || self
                .objects
                .reserve_ended_within(c.pid, c.begin_ns, c.end_ns)
        {
            self.composer.take_back_within_and_peak(
                c.begin_ns,
                c.end_ns,
                &mut self.readings.pending,
            );
        }
        // A reading taken while a call ran across which the agent read the
        // memory move (a launch that loaded its function's code): composed
        // once the step is counted, not before (it read the step's bytes
        // beside no share of them). Taken before the step, it is then short
        // of the shares so near the move that it is behind them
        // (`bound_by_reading`).
        let straddled = c
            .memory_step
            .filter(|s| s.unsigned_abs() >= reserves::PAGE)
            .and(self.readings.pending)
            .filter(|(t, _)| *t > c.begin_ns && *t < c.end_ns);
        if straddled.is_some() {
            self.readings.pending = None;
        }
        self.settle(c.end_ns, None);
        if let Some(m) = c.mem_before {
            self.reading(c.begin_ns, m);
        }
        if let Some(m) = c.mem_after {
            self.reading(c.end_ns, m);
        }
        if let Some(step) = c.memory_step {
            self.agent_step(c, step);
        }
        self.pools_moved(c);
        if straddled.is_some() && self.readings.pending.is_none() {
            self.readings.pending = straddled;
            self.settle(c.end_ns, None);
        }
        if c.freed_unseen {
            self.folds.freed_unseen += 1;
        }
        self.built(c);
        self.quiet.call(c);
        // An agent sends an object's creation before the call that made it.
        if let Some(id) = c.object
            && self.objects.unmade(id)
        {
            self.composer.reserves.made_by(id, c.begin_ns, c.end_ns);
            if self.objects.device_bytes(id).is_some_and(|b| b > 0) {
                self.composer.reserves.sized_call(c.begin_ns, c.end_ns);
            }
            self.objects.made_by(id, c);
        } else if let Some(id) = c.object
            && self
                .objects
                .ledger
                .get(&id)
                .is_some_and(|o| o.bytes > 0 && !o.held() && reserves::device_sized_kind(o.kind))
        {
            // The call that let a sized object go, after its release:
            // a reading taken while it ran may hold its bytes or not.
            self.composer.reserves.sized_call(c.begin_ns, c.end_ns);
        }
        let (window, objects) = (&self.window, &self.objects);
        self.folds.call(
            c,
            |seq| window.busy_before(seq),
            |id| objects.bytes(id),
            &self.readings.readings,
        );
        if let Some(failed) = &self.folds.ran_out
            && failed.seq == c.seq
        {
            // The memory when the call ran out: the latest sample so far
            // taken by its end (later arrivals may still come closer).
            for s in self.window.samples.iter() {
                self.readings.stats.note_ran_out(s, failed.end_ns);
            }
            self.compose_ran_out(c);
            self.folds.held_at_ran_out = self.objects.index.held_by(c.pid);
        }
        self.ran_out_in_process(c);
        // The device's free memory inside a refused allocation: how much
        // every process on it held then.
        // The device's total as the driver says it, else NVML's (which
        // counts what the driver reserves: an upper bound then).
        let total = self
            .readings
            .read_total
            .or_else(|| self.meta.as_ref().and_then(|m| m.device.total_bytes));
        if let (Some(free), Some(total)) = (c.refused.as_ref().and_then(|r| r.free_bytes), total) {
            let used = total.saturating_sub(free);
            self.readings.max_read_used = self.readings.max_read_used.max(Some(used));
        }
        self.window.calls.push(c.clone());
    }

    /// An object event: the objects, then the reserves' measurements, the
    /// folds, the window, and a sweep of what the program is done with.
    fn object(&mut self, o: &ObjectEvent) {
        self.settle(o.t_ns, Some(o.id));
        // A lab's worker sends the call first, then the object it made.
        let call = self.window.call_of(o.id);
        if o.bytes > 0 && reserves::device_sized_kind(o.kind) {
            self.composer.moved_ns = self.composer.moved_ns.max(Some(o.t_ns));
        }
        let first = self.objects.changed_ns.is_none();
        self.objects.event(o, call);
        if o.kind == ObjKind::Managed {
            self.readings.made_managed = true;
        }
        if first
            && self
                .meta
                .as_ref()
                .is_some_and(|m| m.watch.is_some() && m.device.memory_source == MemorySource::Rss)
        {
            self.quiet.start(o.t_ns);
        }
        if o.action == crate::trace::ObjectAction::Created
            && o.bytes > 0
            && reserves::device_sized_kind(o.kind)
        {
            let held: u64 = self
                .live_index()
                .held_bytes
                .iter()
                .filter(|(k, _)| reserves::device_sized_kind(**k))
                .map(|(_, b)| *b)
                .sum();
            if self.readings.max_objects.is_none_or(|(_, b)| held > b) {
                self.readings.max_objects = Some((o.t_ns, held));
            }
        }
        let watched = self.deletion_watched(o.id, o.kind);
        // A block of the stream-ordered pool: its free gives nothing back to
        // the device (the pool keeps it until a synchronisation); what the
        // pool holds is read with its calls ([`Run::call`]).
        let pooled = o.ends_life()
            && self
                .objects
                .ledger
                .get(&o.id)
                .and_then(|s| s.made_by.as_ref())
                .is_some_and(|m| compose::pool_block_call(&m.api));
        if !pooled {
            self.composer
                .object(o, call.map(|c| (c.begin_ns, c.end_ns)), watched);
        }
        self.folds.object(o);
        self.window.objects.push(o.clone());
        let ran_out = self
            .folds
            .ran_out
            .as_ref()
            .map(|c| (c.end_ns, self.destructors_told()));
        self.objects.fold_gone(
            o.t_ns,
            ran_out,
            self.composer.tentative_object(),
            &mut self.folds.created,
        );
    }

    /// A sample of the parent's sampler.
    fn sample(&mut self, s: &Sample) {
        let mut own_with_managed = None;
        match &self.end {
            // After the worker ended its own reading of "its memory" is gone;
            // samples past the end describe the device, not the run.
            Some(e) if s.t_ns > e.t_ns => self.readings.after_exit.push((s.t_ns, s.used_bytes)),
            _ => {
                if let Some(others) = &s.others {
                    self.readings.alone = others.is_empty();
                }
                // A watched program's host memory before its first call of
                // the API: the process's own, a share of every reading after.
                if s.source == MemorySource::Rss
                    && self.readings.api_from.is_none_or(|a| s.t_ns < a)
                    && self.readings.before_api.is_none_or(|(t, _)| s.t_ns >= t)
                    && self.meta.as_ref().is_some_and(|m| m.watch.is_some())
                    && let Some(own) = s.process_bytes
                {
                    self.readings.before_api = Some((s.t_ns, own));
                }
                let managed = s
                    .process_bytes
                    .and_then(|own| self.managed_on_device(s, own));
                let own = s.process_bytes.map(|own| own + managed.unwrap_or(0));
                own_with_managed = own;
                self.reading(s.t_ns, own.unwrap_or(s.used_bytes));
                match s.process_bytes {
                    Some(listed) => {
                        for t in self.readings.listed() {
                            self.composer.reading(t, 0);
                        }
                        // The rest of the device is taken while no managed
                        // page can be in it.
                        if s.source == MemorySource::Nvml && !self.made_managed() {
                            self.others_seen(s.used_bytes, listed);
                        }
                        if s.source == MemorySource::Rss {
                            self.quiet.reading(s.t_ns, listed);
                        }
                        self.process_memory(s.t_ns, listed, managed);
                    }
                    None => self.readings.not_listed(s),
                }
            }
        }
        let start = self.meta.as_ref().map(|m| m.t_ns);
        let end = self.end.as_ref().map(|e| e.t_ns);
        self.readings.stats.add(s, start, end);
        // The program's own figure holds its managed pages on the device,
        // which NVML's figure for its process does not.
        self.readings.stats.max_process = self.readings.stats.max_process.max(own_with_managed);
        if let Some(failed) = &self.folds.ran_out {
            self.readings.stats.note_ran_out(s, failed.end_ns);
        }
        self.window.samples.push(s.clone());
    }

    /// A reading of the run's memory, into the folds and the readings.
    fn reading(&mut self, t: u64, v: u64) {
        self.folds.reading(t, v);
        self.readings.insert(t, v);
    }

    /// A reading of the process's own memory: the reserves it measures, and
    /// who held it then, composed once the events up to it have arrived
    /// ([`Run::settle`]).
    ///
    /// `managed`: the program's managed pages on the device then, beside
    /// `listed` (NVML's figure, which counts none of them): in the reading
    /// composed, not in what measures the reserves. None where the program
    /// made managed memory and what the device holds for it is not known.
    fn process_memory(&mut self, t_ns: u64, listed: u64, managed: Option<u64>) {
        self.composer.reading(t_ns, listed);
        let bytes = listed + managed.unwrap_or(0);
        // A reading older than an object change already folded would be set
        // beside a ledger that is ahead of it: it measures, it is not composed.
        let behind = self.objects.changed_ns.is_some_and(|t| t_ns < t);
        if !behind
            && self.readings.process.is_none_or(|(t, _)| t_ns >= t)
            && !self.program.gone_by(t_ns)
        {
            self.settle(t_ns, None);
            self.readings.process = Some((t_ns, bytes));
            self.readings.pending = Some((t_ns, bytes));
            self.readings.managed = (t_ns, managed);
        }
    }

    /// A watched program's own memory on a CPU device grown between its
    /// calls, by a reading at `t_ns` ([`quiet`]).
    pub(super) fn own_between_calls_at(&self, t_ns: u64) -> u64 {
        self.quiet.own_at(t_ns)
    }

    /// The bytes of the objects of a size process `pid` holds, by who made
    /// them.
    pub fn held_by_process(&self, pid: u32) -> BTreeMap<owners::Owner, u64> {
        let mut by = BTreeMap::new();
        let range = (pid, None)..=(pid, Some(u64::MAX));
        for ((_, stack), bytes) in self.objects.index.held_bytes_by_pid_stack.range(range) {
            let owner = stack
                .and_then(|id| self.program.owners.get(&id).copied())
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
            .program
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
            .program
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
        self.program.ranks.attached_if_unseen(c.pid);
        if let Some(m) = self.program.ranks.members.get_mut(&c.pid) {
            m.ran_out = Some(call);
        }
        if self.program.ranks.first_ran_out.is_none() {
            self.program.ranks.first_ran_out = Some((c.pid, c.end_ns));
            let pids: Vec<u32> = self.program.ranks.members.keys().copied().collect();
            for pid in pids {
                let held = self.held_by_process(pid);
                let ranks = &mut self.program.ranks;
                let moment = ranks.moment(pid, c.end_ns, held);
                if let Some(m) = ranks.members.get_mut(&pid) {
                    m.at_first_ran_out = Some(moment);
                }
            }
        }
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
        self.objects.gone.folded()
    }

    /// What the objects folded out of the ledger add to what the first call
    /// that ran out of memory saw, and whether some folded before that call
    /// was known may be missing from it.
    pub fn ran_out_folded(&self) -> (&RanOutCounts, bool) {
        let partial = self
            .folds
            .ran_out
            .as_ref()
            .is_some_and(|c| self.objects.gone.folded_past(c.end_ns));
        (&self.objects.gone.at_ran_out, partial)
    }

    /// The notes a report or a panel says: all of them, but gpulab's notes on
    /// how it set up OpenCL only for a program in which an agent attached to
    /// OpenCL.
    pub fn notes_said(&self) -> impl Iterator<Item = &Note> + '_ {
        let opencl = self
            .program
            .agents
            .iter()
            .any(|a| a.api == "opencl" && matches!(a.state, AgentState::Attached { .. }));
        self.notes.iter().filter(move |n| {
            opencl || n.level != crate::trace::NoteLevel::Info || !n.text.starts_with(OPENCL_SET_UP)
        })
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
        self.window.holds(lo, calls)
    }

    /// The first `repeat` block carrying `tag`.
    pub fn tagged_block(&self, tag: &str) -> Option<&Block> {
        self.folds.tagged_blocks.get(tag)
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
            .program
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
        let (_, v) = self.readings.readings.last()?;
        Some(*v as i64 - base as i64)
    }

    /// Highest memory reading of the run above the baseline, bytes.
    pub fn peak_above_baseline(&self) -> Option<u64> {
        let base = self.baseline()?;
        self.readings
            .readings
            .iter()
            .map(|(_, v)| v.saturating_sub(base))
            .max()
    }

    /// A program's build (`clBuildProgram`, `clCompileProgram`) compiles its
    /// code where the device's compiler runs: on a CPU device, in the
    /// process (PoCL's LLVM took 7 MiB at Hands On OpenCL's matmul's first
    /// build, about 2 MiB at each later one). The step across the call is
    /// the program's, measured as a making call's is, held by the newest
    /// program the process holds (the call names none).
    fn built(&mut self, c: &Call) {
        if !matches!(c.api.as_str(), "clBuildProgram" | "clCompileProgram")
            || c.status != CallStatus::Ok
            || self.meta.as_ref().is_none_or(|m| m.watch.is_none())
        {
            return;
        }
        if let Some(id) = self.newest_program(c.pid) {
            self.composer
                .reserves
                .made_unsized(id, c.begin_ns, c.end_ns);
        }
    }

    /// The newest program (module) process `pid` holds: what a build is
    /// of (the call names none; it builds the program it was handed).
    fn newest_program(&self, pid: u32) -> Option<u64> {
        self.objects
            .ledger
            .iter()
            .rev()
            .find(|(id, o)| o.kind == ObjKind::Program && (*id >> 32) as u32 == pid && o.held())
            .map(|(id, _)| *id)
    }

    /// `watch`: the most device memory in use while the program ran above
    /// what was in use before it started, every process's: NVML's device
    /// figure at its samples, and the agents' reads of the device (around
    /// the calls that move much memory, and inside a refused allocation,
    /// where a program that ran out held far more than any sample caught).
    pub fn device_growth(&self) -> Option<u64> {
        let base = self.baseline()?;
        let stats = &self.readings.stats;
        stats
            .max_used_during
            .max(self.readings.max_read_used)
            .map(|used| used.saturating_sub(base))
    }

    /// The most the program's objects of a size held at once (their making
    /// calls' sizes), and when: (t_ns, bytes).
    pub fn objects_peak(&self) -> Option<(u64, u64)> {
        self.readings.max_objects
    }

    /// Samples the parent took after the worker was gone.
    pub fn after_exit(&self) -> Option<&Sample> {
        let end = self.end.as_ref()?.t_ns;
        self.window.samples.iter().rev().find(|s| s.t_ns > end)
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
        for (k, n) in &self.objects.live {
            out.insert(*k, (*n).max(0) as usize);
        }
        out
    }

    /// Live objects per kind at the end: the worker's own list of what was left.
    pub fn live_at_end(&self) -> BTreeMap<ObjKind, usize> {
        let mut out: BTreeMap<ObjKind, usize> = ObjKind::ALL.iter().map(|k| (*k, 0)).collect();
        if self.end.is_some() {
            // Counted when the end came: a list of 200,000 is not walked a frame.
            for (k, n) in &self.objects.leaked {
                *out.entry(*k).or_default() += n;
            }
        } else {
            for (k, n) in &self.objects.live {
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
        if self.meta.is_none() && self.window.calls.seen() == 0 {
            return None;
        }
        Some(end.saturating_sub(self.t0()))
    }
}

/// What the parts hold, read-only: what reports, panels and exports read.
impl Run {
    pub fn meta(&self) -> Option<&Meta> {
        self.meta.as_ref()
    }

    /// The most recent calls (see [`Recent::seen`] for how many arrived).
    pub fn calls(&self) -> &Recent<Call> {
        &self.window.calls
    }

    /// The most recent object events.
    pub fn objects(&self) -> &Recent<ObjectEvent> {
        &self.window.objects
    }

    /// The most recent device spans.
    pub fn spans(&self) -> &Recent<DeviceSpan> {
        &self.window.spans
    }

    /// The most recent samples of the parent's sampler.
    pub fn samples(&self) -> &Recent<Sample> {
        &self.window.samples
    }

    /// Every `repeat` block.
    pub fn blocks(&self) -> &[Block] {
        &self.window.blocks
    }

    /// The call the worker went into and has not come back from yet: what a
    /// run that hangs is stuck in.
    pub fn in_flight(&self) -> Option<&Calling> {
        self.window.in_flight.as_ref()
    }

    /// Aggregates of every call, span and object event.
    pub fn folds(&self) -> &Folds {
        &self.folds
    }

    /// Figures of every sample.
    pub fn sample_stats(&self) -> &SampleStats {
        &self.readings.stats
    }

    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    pub fn claims(&self) -> &[ClaimVerdict] {
        &self.claims
    }

    /// What was predicted of each claim before the run, by claim name.
    pub fn predictions(&self) -> &std::collections::BTreeMap<String, gpulab_events::Predicted> {
        &self.predictions
    }

    /// The ranges predicted for measured values before the run, in the
    /// order made.
    pub fn estimates(&self) -> &[gpulab_events::Estimate] {
        &self.estimates
    }

    /// Calls that named an object the program had released (the first
    /// [`MISUSES_KEPT`]), and how many there were in all.
    pub fn misuses(&self) -> (&[gpulab_events::Misuse], u64) {
        (&self.misuses, self.misuses_seen)
    }

    pub fn end(&self) -> Option<&End> {
        self.end.as_ref()
    }

    /// How busy the host was during the run, when the parent measured it.
    pub fn load(&self) -> Option<&HostLoad> {
        self.load.as_ref()
    }

    /// Agents in a watched program's processes, as they attached and detached.
    pub fn agents(&self) -> &[AgentEvent] {
        &self.program.agents
    }

    /// When a process's agent did not watch its kernel launches; None where
    /// it watched every one.
    pub fn unwatched_launches(&self, pid: u32) -> Option<program::UnwatchedLaunches> {
        self.program.launches.get(&pid).copied()
    }

    /// Whether a process's agent is not watching its launches now (they
    /// repeat functions it has seen): launches made now are not counted.
    pub fn launches_unwatched_now(&self) -> bool {
        self.program.launches.values().any(|u| u.since.is_some())
    }

    /// Whose deletions the run sees: per process, API family and kind, what
    /// the agents watch and what the driver was seen to delete. Only of those
    /// can a released object be said to be held by the driver.
    pub fn deletions(&self) -> &deletions::Deletions {
        &self.objects.deletions
    }

    /// Whether the agent of the process and API family that made object `id`
    /// (of `kind`) watches its deletion.
    pub fn deletion_watched(&self, id: u64, kind: ObjKind) -> bool {
        let whose = self
            .objects
            .ledger
            .get(&id)
            .map_or(((id >> 32) as u32, None, kind), deletions::whose);
        self.objects.deletions.watched(whose)
    }

    /// Native call stacks in a watched program, by id (`watch --backtrace`).
    pub fn stacks(&self) -> &BTreeMap<u64, Vec<Frame>> {
        &self.program.stacks
    }

    /// Who made the objects of each stack, by its calling frame.
    pub fn owners(&self) -> &BTreeMap<u64, owners::Owner> {
        &self.program.owners
    }

    /// What the frameworks inside a watched program said of their memory.
    pub fn frameworks(&self) -> &frameworks::Frameworks {
        &self.program.frameworks
    }

    /// A watched program per process (its rank) and per GPU.
    pub fn ranks(&self) -> &ranks::Ranks {
        &self.program.ranks
    }

    /// Each process of a program on a host of many GPUs, composed apart
    /// ([`views`]); None elsewhere.
    pub fn views(&self) -> Option<&views::Views> {
        self.views.as_ref()
    }

    /// Live objects per kind right now, as the ledger's events say.
    pub fn live(&self) -> &BTreeMap<ObjKind, i64> {
        &self.objects.live
    }

    /// The most objects of each kind alive at one time so far.
    pub fn peak_live(&self) -> &BTreeMap<ObjKind, i64> {
        &self.objects.peak_live
    }

    /// Bytes of live buffers right now.
    pub fn live_bytes(&self) -> i64 {
        self.objects.live_bytes
    }

    /// Each object's latest state, by id: every one a lab made; of a watched
    /// program's, those not folded away ([`gone`]).
    pub fn ledger(&self) -> &BTreeMap<u64, ObjState> {
        &self.objects.ledger
    }

    /// The ledger indexed by what the live-objects panel and the gap ask of it.
    pub fn live_index(&self) -> &LiveIndex {
        &self.objects.index
    }

    /// Memory readings in time order, (t_ns, bytes): the worker's own (around
    /// each call) and the parent's samples until the run ended. Values are what
    /// the run calls "device memory" (the worker's own share where the source
    /// tells it).
    pub fn readings(&self) -> &[(u64, u64)] {
        &self.readings.readings
    }

    /// Device-wide readings the parent took after the worker was gone, (t_ns, bytes).
    pub fn readings_after_exit(&self) -> &[(u64, u64)] {
        &self.readings.after_exit
    }

    /// The latest reading of the process's own memory during the run: (t_ns, bytes).
    pub fn process_reading(&self) -> Option<(u64, u64)> {
        self.readings.process
    }

    /// The highest of the agents' reads of the program's memory (each the
    /// device's figure less what the rest of the device held at NVML's
    /// latest sample), when one was set against NVML's.
    pub fn agent_peak(&self) -> Option<&AgentPeak> {
        self.readings.agent_peak.as_ref()
    }

    /// What contexts, modules, queues and streams hold, measured from the
    /// process's memory across their making calls.
    pub fn reserves(&self) -> &Reserves {
        &self.composer.reserves
    }

    /// Who held the process's memory at its highest reading whose
    /// composition was taken.
    pub fn holders_at_peak(&self) -> Option<&holders::Holders> {
        self.composer.at_peak.as_ref()
    }

    /// Who held it at the latest readings whose composition was taken,
    /// newest last.
    pub fn holders_recent(&self) -> &std::collections::VecDeque<holders::Holders> {
        &self.composer.recent
    }

    /// Every composition taken, as a series: who held the memory over time.
    pub fn composition(&self) -> &composition::Composition {
        &self.composer.series
    }

    /// Who held it when the first call that ran out of memory returned.
    pub fn holders_at_ran_out(&self) -> Option<&holders::Holders> {
        self.composer.at_ran_out.as_ref()
    }

    /// The objects and measured reserves as they stood when that call
    /// returned, with no reading (`total` 0).
    pub fn known_at_ran_out(&self) -> Option<&holders::Holders> {
        self.composer.known_at_ran_out.as_ref()
    }

    /// The contexts, modules, queues and streams held then.
    pub fn unsized_at_ran_out(&self) -> &[u64] {
        &self.composer.unsized_at_ran_out
    }

    /// The first reading of none of the process's memory while what it
    /// made still held some, and what they held: (t_ns, bytes). The
    /// compositions stop before it ([`compose`]).
    /// Readings that held less than the objects of a size the records said
    /// were held then, not composed: (how many, the first one's time).
    pub fn readings_behind(&self) -> (u64, Option<u64>) {
        self.composer.behind
    }

    pub fn memory_given_back(&self) -> Option<(u64, u64)> {
        self.composer.given_back
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
        assert_eq!(run.live()[&ObjKind::Buffer], 1);
        assert_eq!(run.live_bytes(), 64);
        let run = Run::from_events(&[
            obj(ObjectAction::Created, 1),
            obj(ObjectAction::Released, 0),
        ]);
        assert_eq!(run.live()[&ObjKind::Buffer], 0);
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
            run.readings(),
            vec![(0, 5), (9_990, 5), (10_000, 6), (19_990, 6)]
        );
        assert_eq!(run.sample_stats().seen, 2000);
        assert_eq!(run.samples().len(), 2000.min(SAMPLES_KEPT));
        assert_eq!(run.sample_stats().max_process, Some(6));
        let all = Run::folding(Run::keeping_all(), &events);
        assert_eq!(all.readings().len(), 2000);
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
        let s = &run.sample_stats();
        assert_eq!(s.seen, n);
        assert_eq!(s.first.as_ref().map(|f| f.t_ns), Some(0));
        assert_eq!((s.max_used, s.max_process), (Some(102), Some(4)));
        assert_eq!(run.samples().len(), SAMPLES_KEPT);
    }

    #[test]
    fn readings_stay_sorted_when_events_arrive_out_of_order() {
        let run = Run::from_events(&[sample(10, 100, 1), sample(30, 300, 3), sample(20, 200, 2)]);
        assert_eq!(run.readings(), vec![(10, 1), (20, 2), (30, 3)]);
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
        assert_eq!(run.readings(), vec![(10, 1)]);
        assert_eq!(run.readings_after_exit(), vec![(30, 300), (40, 400)]);
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
        assert_eq!(run.peak_live()[&ObjKind::Event], 2);
        assert_eq!(run.live()[&ObjKind::Event], 2);
        let first = &run.ledger()[&1];
        assert_eq!((first.released_ns, first.destroyed_ns), (Some(3), Some(9)));
        assert!(!first.held());
        assert!(run.ledger()[&2].held());
    }
}
