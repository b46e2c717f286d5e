//! The run's part that says who held the process's memory: the reserves
//! measured of contexts, modules, queues and streams, and the compositions
//! of the process's readings (at the peak, the latest, over time, when the
//! first call ran out of memory).
//!
//! A composition is taken again only when something it reads changed: each
//! part it reads counts its own changes ([`Versions`]), and the composer
//! keeps the counts it last composed from, so no part has to remember to
//! tell it.

use std::collections::VecDeque;

use crate::trace::{Call, CudaMemory, ObjectAction, ObjectEvent};

use super::Run;
use super::composition::Composition;
use super::holders::Holders;
use super::reserves::{self, Reserves};

/// How often at most the composition of the process's memory is taken again
/// while its objects keep changing, once it has more than `HOLDERS_ALWAYS`
/// reserves to weigh (below that, at every reading).
const HOLDERS_EVERY_NS: u64 = 10_000_000;
const HOLDERS_ALWAYS: usize = 256;
/// Compositions kept, newest last: enough to take back the readings that
/// arrive before the news that the program's last process has gone.
const HOLDERS_KEPT: usize = 64;

/// What a composition reads, as the counts of each part's changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Versions {
    objects: u64,
    reserves: u64,
    program: u64,
    pool: u64,
}

/// A composition settled by an object event before its call arrived.
#[derive(Debug, Clone)]
struct Tentative {
    object: u64,
    reading_ns: u64,
    /// The peak's composition before this one.
    peak_before: Option<Holders>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Composer {
    /// What contexts, modules, queues and streams hold, measured from the
    /// process's memory across their making calls.
    pub(super) reserves: Reserves,
    /// Changes of the reserves' measurements so far.
    reserves_changes: u64,
    /// Who held the process's memory at its highest reading: the latest of
    /// the readings at that value whose composition was taken (else, in a
    /// run with hundreds of reserves, one within 1 MiB or 1% of it).
    pub(super) at_peak: Option<Holders>,
    /// Who held it at the latest readings whose composition was taken (each
    /// reading; in a run with hundreds of reserves, not when objects changed
    /// less than 10 ms before it: then the one before stands, with its own
    /// time and total), newest last. Readings taken after a watched
    /// program's last process detached are not its own: they leave.
    pub(super) recent: VecDeque<Holders>,
    /// Every composition taken, as a series: who held the memory over time.
    pub(super) series: Composition,
    /// The latest composition, while the call of the object event that
    /// settled it has not arrived.
    tentative: Option<Tentative>,
    /// When the first call that ran out of memory returned.
    ran_out_end: Option<u64>,
    /// Who held it when the first call that ran out of memory returned.
    pub(super) at_ran_out: Option<Holders>,
    /// The objects and measured reserves as they stood when that call
    /// returned, with no reading (`total` 0): what the run knows of that
    /// moment even when no reading of the process's memory can be set beside
    /// it (the program let go of memory right after).
    pub(super) known_at_ran_out: Option<Holders>,
    /// The contexts, modules, queues and streams held then: their reserves,
    /// measured then or later, are what they held then.
    pub(super) unsized_at_ran_out: Vec<u64>,
    /// What the latest composition taken read; None before the first, and
    /// once one was taken back.
    composed: Option<Versions>,
    /// The first reading of none of the process's memory while what it made
    /// still held some, and what they held then: (t_ns, bytes). The driver
    /// gave the memory back without a free the agent saw (the runtime's
    /// teardown at exit, a reset): from then on the readings are not
    /// composed against objects that are gone.
    pub(super) given_back: Option<(u64, u64)>,
    /// Readings that held less than the objects of a size the records said
    /// were held then (the reading lagged the driver, or ran ahead of a
    /// record): not composed. (count, the first one's time).
    pub(super) behind: (u64, Option<u64>),
    /// The latest moment the records said device memory moved: an object
    /// made or let go, a step the agent read, the pool or graphs read.
    pub(super) moved_ns: Option<u64>,
}

/// A call that hands out or takes back a block of a stream-ordered pool, as
/// an agent names it (a lab's worker names the runtime's calls, and reads
/// its own memory).
pub(super) fn pool_block_call(api: &str) -> bool {
    matches!(
        api,
        "cuMemAllocAsync" | "cuMemAllocFromPoolAsync" | "cuMemFreeAsync"
    )
}

/// How long after the records say device memory moved a reading that names
/// less than they do is taken as NVML not having counted it yet: two of the
/// sampler's default periods.
const NVML_LAG_NS: u64 = 20_000_000;

impl Composer {
    /// A reading of the process's memory, as the reserves measure.
    pub(super) fn reading(&mut self, t_ns: u64, bytes: u64) {
        if self.reserves.reading(t_ns, bytes) {
            self.reserves_changes += 1;
        }
    }

    /// The object being composed against while its call has not arrived.
    pub(super) fn tentative_object(&self) -> Option<u64> {
        self.tentative.as_ref().map(|t| t.object)
    }

    /// Compositions of the readings taken while a call that ended a
    /// context's (or a module's, a queue's, a stream's) life ran, strictly
    /// inside `begin..end`: the memory was going back as they were taken, so
    /// they say nothing sure of what it held (`cuDevicePrimaryCtxReset`
    /// takes 80 ms on the H200; a reading inside it read 548 MiB against a
    /// ledger whose context was already gone). They are taken back, and a
    /// pending one is dropped.
    pub(super) fn take_back_within(
        &mut self,
        begin: u64,
        end: u64,
        pending: &mut Option<(u64, u64)>,
    ) {
        let inside = |t: u64| t > begin && t < end;
        if pending.is_some_and(|(t, _)| inside(t)) {
            *pending = None;
        }
        let mut took = false;
        while let Some(t) = self.recent.back().map(|h| h.at_ns).filter(|t| inside(*t)) {
            self.recent.pop_back();
            self.series.take_back(t);
            took = true;
        }
        if took {
            self.composed = None;
        }
    }

    /// [`Composer::take_back_within`], and a peak composed of a reading
    /// taken back is the best of those left (the highest, then the best
    /// explained, then the latest).
    pub(super) fn take_back_within_and_peak(
        &mut self,
        begin: u64,
        end: u64,
        pending: &mut Option<(u64, u64)>,
    ) {
        self.take_back_within(begin, end, pending);
        if self
            .at_peak
            .as_ref()
            .is_some_and(|p| p.at_ns > begin && p.at_ns < end)
        {
            self.at_peak = self
                .recent
                .iter()
                .max_by_key(|h| {
                    (
                        h.total,
                        std::cmp::Reverse(h.unexplained().unsigned_abs()),
                        h.at_ns,
                    )
                })
                .cloned();
        }
    }

    /// Compositions taken after the program's last process detached at
    /// `gone` are not its own.
    pub(super) fn cut_after(&mut self, gone: u64) {
        while self.recent.back().is_some_and(|h| h.at_ns > gone) {
            self.recent.pop_back();
        }
        self.series.cut_after(gone);
    }

    /// An object event, as the reserves measure: an unsized object's making
    /// call opens a measurement; a sized object made or deleted meanwhile is
    /// taken out of it. `call`: the span of the call that made or let go of
    /// it, when it came first; `watched`: some agent watches the deletion of
    /// its kind (in its process and API family).
    pub(super) fn object(&mut self, o: &ObjectEvent, call: Option<(u64, u64)>, watched: bool) {
        // Pinned host memory is no device memory: its bytes are in no reading
        // a reserve is measured against (asyncAPI's 64 MiB of cuMemHostAlloc
        // made its context's reserve 466 MiB where it held 530).
        if !reserves::unsized_kind(o.kind) && !reserves::device_sized_kind(o.kind) {
            return;
        }
        match o.action {
            ObjectAction::Created if o.bytes == 0 && reserves::unsized_kind(o.kind) => {
                let (begin, end) = call.unwrap_or((o.t_ns, o.t_ns));
                self.reserves.made_unsized(o.id, begin, end);
            }
            ObjectAction::Created => {
                self.reserves.sized(o.t_ns, o.bytes as i64);
                if let Some((begin, end)) = call {
                    self.reserves.sized_call(begin, end);
                }
            }
            ObjectAction::Destroyed if reserves::unsized_kind(o.kind) => {
                self.reserves.gone(o.id, o.kind, o.t_ns);
                self.reserves_changes += 1;
            }
            ObjectAction::Destroyed => self.reserves.sized(o.t_ns, -(o.bytes as i64)),
            _ if o.ends_life() && !watched && reserves::unsized_kind(o.kind) => {
                self.reserves.gone(o.id, o.kind, o.t_ns);
                self.reserves_changes += 1;
            }
            // A kind whose deletion no agent reports is gone at its last
            // release (a cuMemFree): its bytes leave the measurement then, as
            // a destroyed one's do (a program that frees right after it ran
            // out left the context's reserve unmeasured on the H100).
            _ if o.ends_life() && !watched => {
                self.reserves.sized(o.t_ns, -(o.bytes as i64));
                if let Some((begin, end)) = call {
                    self.reserves.sized_call(begin, end);
                }
            }
            _ => {}
        }
    }

    /// The agent read the device's memory across a call: `step` is held by
    /// `holder` (see [`Run::measured_by_the_agent`]).
    pub(super) fn direct(&mut self, holder: u64, step: i64, c: &Call, more: bool) {
        self.reserves
            .direct(&[holder], step, c.begin_ns, c.end_ns, more);
        self.reserves_changes += 1;
    }
}

impl Run {
    /// What a composition taken now would read.
    fn versions(&self) -> Versions {
        Versions {
            objects: self.objects.changes(),
            reserves: self.composer.reserves_changes,
            program: self.program.changes(),
            pool: self.folds.pool_changes(),
        }
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
    pub(super) fn settle(&mut self, now_ns: u64, by_object: Option<u64>) {
        let Some((t_ns, bytes)) = self.readings.pending.filter(|(t, _)| now_ns > *t) else {
            return;
        };
        self.readings.pending = None;
        self.composer.tentative = by_object.map(|object| Tentative {
            object,
            reading_ns: t_ns,
            peak_before: self.composer.at_peak.clone(),
        });
        let versions = self.versions();
        let next = match self.composer.recent.back() {
            // Nothing it reads changed but the reading: the shares that
            // are readings' own are taken at this one (memory kept after
            // its objects went is bounded by the reading: composed afresh).
            Some(h)
                if self.composer.composed == Some(versions)
                    && h.kept == 0
                    && !self.composer.reserves.kept_changes_between(h.at_ns, t_ns) =>
            {
                Some(Holders {
                    at_ns: t_ns,
                    total: bytes,
                    managed_on_device: self.managed_on_device_at(t_ns),
                    own_between_calls: self.own_between_calls_at(t_ns),
                    before_api: self.before_api_at(t_ns, bytes),
                    runtime: self.runtime_loaded(t_ns, bytes),
                    ..h.clone()
                })
            }
            Some(h)
                if self.composer.reserves.measurements() > HOLDERS_ALWAYS
                    && t_ns < h.at_ns + HOLDERS_EVERY_NS =>
            {
                None
            }
            _ => {
                self.composer.composed = Some(versions);
                Some(self.holders_at(t_ns, bytes))
            }
        };
        // A reading of nothing beside shares that name something: the memory
        // went back without a free the agent saw. Not a moment of the
        // program's objects: the compositions before it stand.
        if let Some(h) = &next
            && h.total == 0
            && h.explained() > 0
        {
            self.composer
                .given_back
                .get_or_insert((h.at_ns, h.explained()));
            return;
        }
        let Some(h) = next else {
            let grown = self
                .composer
                .at_peak
                .as_ref()
                .is_none_or(|p| bytes > p.total + (1 << 20).max(p.total / 100));
            if grown && let Some(h) = self.bound_by_reading(self.holders_at(t_ns, bytes)) {
                self.composer.at_peak = Some(h);
            }
            return;
        };
        let Some(h) = self.bound_by_reading(h) else {
            return;
        };
        let composer = &mut self.composer;
        // The first reading after the refused call, before any change since.
        if let Some(end) = composer.ran_out_end
            && composer.at_ran_out.is_none()
            && t_ns >= end
            && self.objects.changed_ns.is_none_or(|o| o <= end)
        {
            composer.at_ran_out = Some(h.clone());
        }
        // Of the readings at the highest value, the latest one the shares
        // explain at least as well: a call in flight at the first of them may
        // have returned by a later one, and a later one may read memory the
        // driver kept after what held it was deleted (NVIDIA's OpenCL keeps a
        // deleted context's 518 MiB until the process exits).
        if composer.at_peak.as_ref().is_none_or(|p| {
            h.total > p.total
                || (h.total == p.total && h.unexplained().abs() <= p.unexplained().abs())
        }) {
            composer.at_peak = Some(h.clone());
        }
        if composer.recent.len() == HOLDERS_KEPT {
            composer.recent.pop_front();
        }
        composer.series.push(&h);
        composer.recent.push_back(h);
    }

    /// A composition whose objects of a size alone name more than its
    /// reading held (their bytes are what their calls said; the pool's and
    /// the graphs' what the agent read): the reading is behind the records
    /// (NVML had not counted an allocation yet, or ran ahead of a free's
    /// record). Not a moment both can be true: not composed (None).
    ///
    /// Where only the reserves make the shares more than the reading, it is
    /// composed and its excess stays said (a negative "unexplained"): lowering
    /// a reserve to fit would be a guess between a reading that lags a
    /// graph's or a managed allocation's pages and a step that counted code
    /// loaded and unloaded meanwhile; tried, it took 346 MiB off
    /// `graphMemoryFootprint`'s context for a reading that lagged its graph.
    fn bound_by_reading(&mut self, h: Holders) -> Option<Holders> {
        let sized = h.held + h.cached + h.released + h.pool_kept + h.graphs;
        // NVML counts a change some milliseconds after the driver made it
        // (on the H200 the agent read 32 MiB given back at a synchronisation
        // that NVML still counted 3.6 ms later): a reading that close after
        // the records said memory moved, and that holds less than the shares
        // name, is behind them too.
        // NVML counts in pages: shares more than the reading by less than one
        // (a reserve the agent read to 64 KiB) are no lag ([`Run::page`]).
        let lagging = h.unexplained() <= -(self.page() as i64)
            && self
                .composer
                .moved_ns
                .is_some_and(|m| h.at_ns.abs_diff(m) < NVML_LAG_NS);
        // Spread over GPUs, the sampler reads GPU 0 alone against every
        // rank's objects: those compositions are no one process's moment,
        // and the report composes per GPU instead.
        if (sized <= h.total && !lagging) || self.ranks().spread() {
            return Some(h);
        }
        self.composer.behind.0 += 1;
        self.composer.behind.1.get_or_insert(h.at_ns);
        // The next reading composes afresh, not from this one's shares.
        self.composer.composed = None;
        None
    }

    /// What a call says moved on the device beside its objects: a step the
    /// agent read or the pool read with it marks a change the readings may
    /// lag; the stream-ordered pool's blocks are none of the device's memory
    /// of their own, so the pool's (and graph memory's) reserve, read with
    /// the call, is what moved, and a pool call with no read of it leaves
    /// that moment unknown to any measurement across it.
    pub(super) fn pools_moved(&mut self, c: &Call) {
        if c.memory_step.is_some() || c.cuda.is_some() {
            self.composer.moved_ns = self.composer.moved_ns.max(Some(c.end_ns));
        }
        if pool_block_call(&c.api) {
            if let Some(id) = c.object
                && self.objects.unmade(id)
                && let Some(o) = self.objects.ledger.get(&id)
                && reserves::device_sized_kind(o.kind)
            {
                // Its creation counted its bytes, before its call said whose.
                self.composer
                    .reserves
                    .sized(o.created_ns, -(o.bytes as i64));
            }
            if c.cuda.is_none() {
                self.composer.reserves.unsure(c.end_ns);
            }
        }
        if let Some(m) = c.cuda {
            if m.graph_mem.is_some_and(|g| g.reserved > 0) {
                self.folds.graph_memory_seen = true;
            }
            let held = |m: &CudaMemory| m.pool_reserved + m.graph_mem.map_or(0, |g| g.reserved);
            let before = self.folds.last_pool.as_ref().map_or(0, held);
            let moved = held(&m) as i64 - before as i64;
            if moved != 0 {
                self.composer.reserves.sized(c.end_ns, moved);
            }
        }
    }

    /// The call of the object that settled the latest composition arrived: if
    /// it began before that reading and moved memory of a size, the reading
    /// was taken while it ran, and its composition is taken back.
    pub(super) fn take_back_a_reading_within(&mut self, c: &Call) {
        let Some(t) = self.composer.tentative.take() else {
            return;
        };
        let sized = self.objects.bytes(t.object).is_some_and(|b| b > 0);
        if c.object != Some(t.object) || !sized || c.begin_ns > t.reading_ns {
            return;
        }
        let composer = &mut self.composer;
        if composer
            .recent
            .back()
            .is_some_and(|h| h.at_ns == t.reading_ns)
        {
            composer.recent.pop_back();
            composer.series.take_back(t.reading_ns);
        }
        composer.at_peak = t.peak_before;
        composer.composed = None;
    }

    /// The agent read the device's memory on each side of `c`: the object it
    /// made holds the step; a launch's step (its function's code, loaded at
    /// its first launch) is held by the newest context the process holds.
    pub(super) fn measured_by_the_agent(&mut self, c: &Call, step: i64) {
        self.measured_by_the_agent_for(c, c.object, step);
    }

    /// [`Run::measured_by_the_agent`], held by `object` if it is one with a
    /// reserve, else by its process's context as code loaded at a first
    /// run (a call that waited for a kernel's first run on a CPU device,
    /// which compiled it meanwhile: its queue holds none of that).
    pub(super) fn measured_by_the_agent_for(&mut self, c: &Call, object: Option<u64>, step: i64) {
        // Managed pages another stream's kernel drew onto the device while
        // the call ran are in the step (UnifiedMemoryStreams: a module said
        // to hold 128 MiB): the readings measure it instead.
        if self.made_managed() {
            return;
        }
        let pid = c.pid;
        let ledger = &self.objects.ledger;
        let made = object.filter(|id| {
            ledger
                .get(id)
                .is_some_and(|o| reserves::unsized_kind(o.kind))
        });
        let holder = made.or_else(|| {
            ledger
                .iter()
                .rev()
                .find(|(id, o)| {
                    o.kind == crate::trace::ObjKind::Context
                        && (*id >> 32) as u32 == pid
                        && o.held()
                })
                .map(|(id, _)| *id)
        });
        if let Some(id) = holder {
            self.composer.direct(id, step, c, made.is_none());
        }
    }

    /// The first call that ran out of memory returned: who held the
    /// process's memory then, the objects as they stood when the call
    /// returned, against a reading that is not behind them (this one, or the
    /// next before any change).
    pub(super) fn compose_ran_out(&mut self, c: &Call) {
        self.composer.ran_out_end = Some(c.end_ns);
        self.composer.known_at_ran_out = Some(self.holders_at(c.end_ns, 0));
        // Once, at the first refusal: a walk of the ledger.
        self.composer.unsized_at_ran_out = self
            .objects
            .ledger
            .iter()
            .filter(|(_, o)| reserves::unsized_kind(o.kind) && o.held())
            .map(|(id, _)| *id)
            .collect();
        match self.readings.process {
            Some((t, bytes)) if self.objects.changed_ns.is_none_or(|o| t >= o) => {
                self.composer.at_ran_out = Some(self.holders_at(t, bytes));
            }
            _ => {}
        }
    }
}
