//! What a run keeps of *every* call, span and object event however long it runs:
//! per-line, per-tag and per-API aggregates, folded as each event arrives, so
//! that the reports, the verdicts and the panels never rescan the calls (which
//! the [`super::Run`] keeps only a bounded window of). Pure data; never prints.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::trace::{
    Block, Call, CallStatus, CudaMemory, DeviceSpan, ObjKind, ObjectAction, ObjectEvent,
};

use super::LineSummary;
use super::iterations::Iterations;

/// Device spans the report lists, the first ones of the run (the text report
/// prints a few of them and counts the rest).
pub const SPANS_LISTED: usize = 10_000;

/// Every aggregate of the run's calls, spans and object events.
/// The agents' own reads of the device, inside the program's calls (their
/// time is part of the agent's): calls read on each side (free device memory
/// before and after), readings of the stream-ordered pool, and reads said
/// apart (`device_read` events: a first run's wait, a CPU device's resident
/// memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentReads {
    pub around: u64,
    pub pool: u64,
    pub device: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Folds {
    /// Per script line, from its calls alone (blocks are laid over in `Run::lines`).
    pub(super) lines: BTreeMap<u32, LineSummary>,
    /// The API of the latest failing call per line.
    pub(super) error_api: BTreeMap<u32, String>,
    /// The latest `repeat` block per line.
    pub(super) last_block: BTreeMap<u32, Block>,
    /// The first block carrying each tag.
    pub(super) tagged_blocks: BTreeMap<String, Block>,
    /// Memory after the first and last iteration of each tagged block.
    pub iterations: Iterations,
    /// The CUDA pool reading after each line's latest execution, in the order
    /// lines first showed one.
    pub pools: Vec<(u32, CudaMemory)>,
    /// The latest CUDA pool reading of the run.
    pub last_pool: Option<CudaMemory>,
    /// Changes so far of what the stream-ordered pool keeps beyond its use,
    /// or of the graphs' memory: shares of a composition.
    pool_changes: u64,
    /// Per tag: what every execution of the tagged line(s) did.
    pub tags: BTreeMap<String, TagFold>,
    /// Per API name, in the order the APIs were first called.
    pub apis: Vec<ApiFold>,
    /// Calls whose status is not `ok` (errors and directives).
    pub failed_calls: u64,
    /// Per process: its calls, object events and device spans that arrived.
    pub received: BTreeMap<u32, u64>,
    /// What the agents read of the device inside the program's calls.
    pub reads: AgentReads,
    /// Kinds of objects the driver was seen deleting.
    pub destroyed_kinds: BTreeSet<ObjKind>,
    /// `Created` events of buffers and contexts, in order: (id, kind, handle).
    pub created: Vec<(u64, ObjKind, Option<String>)>,
    /// The first device spans (at most [`SPANS_LISTED`]).
    pub spans_listed: Vec<DeviceSpan>,
    /// The first call that ran out of memory or resources without a lab expecting it.
    pub ran_out: Option<Call>,
    /// What its process held of device memory when it ran out, by kind and
    /// the stack that made it.
    pub held_at_ran_out: Vec<super::live::HeldThen>,
    /// The search for the error an `# expect-error` line looks for.
    pub expected: Expected,
    /// When the first call began.
    pub first_begin: Option<u64>,
    /// The tag of each recent tagged call, by seq, for the spans that follow it.
    tag_of_seq: BTreeMap<u64, Arc<str>>,
    /// Lengths of device spans that arrived before their call, by the call's seq.
    early_spans: BTreeMap<u64, Vec<u64>>,
    /// The highest call seq seen.
    last_seq: Option<u64>,
    /// A watched program's frees of device memory that succeeded on a
    /// pointer no allocation its agent saw made ([`Call::freed_unseen`]):
    /// memory made by no call an agent watches (a CUDA graph's memory
    /// nodes allocate it at the graph's launch).
    pub freed_unseen: u64,
    /// The device held memory for the program's graphs at some reading.
    pub graph_memory_seen: bool,
}

/// Tagged calls whose spans may still arrive, and spans waiting for their call:
/// the worker sends a call's spans within a few calls of it, so this many is
/// far more than needed, and bounded.
const TAGGED_SEQS_KEPT: usize = 10_000;

/// One tag's executions, folded.
#[derive(Debug, Clone)]
pub struct TagFold {
    /// The tag, shared with the index of recent tagged calls.
    pub name: Arc<str>,
    pub calls: u64,
    pub errors: u64,
    /// Host time summed over the executions, ns.
    pub host_ns: u64,
    /// Sum over executions of memory after minus before, bytes; None when an
    /// execution lacked a reading.
    pub mem_delta: Option<f64>,
    pub first: Call,
    /// What the latest execution left: its seq, memory after it, CUDA pool.
    pub last: LastCall,
    pub begin_min: u64,
    pub end_max: u64,
    /// Device spans of the tagged calls: their summed length (ns) and number.
    pub span_ns: u64,
    pub spans: u64,
    /// The latest end of a device span enqueued before the first execution.
    pub busy_end: Option<u64>,
    /// For a first execution that succeeded on an object, with a reading before
    /// it: the reading level that says the object's memory went (were it a
    /// release), and the first time a reading at or below it was taken after
    /// the call returned.
    pub release: Option<ReleaseWatch>,
}

/// The few figures of a tag's latest execution that metrics read (a whole
/// `Call` cloned per execution would cost more than the rest of the fold).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LastCall {
    pub seq: u64,
    pub mem_after: Option<u64>,
    pub cuda: Option<CudaMemory>,
}

impl LastCall {
    fn of(c: &Call) -> LastCall {
        LastCall {
            seq: c.seq,
            mem_after: c.mem_after,
            cuda: c.cuda,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReleaseWatch {
    /// The released object's bytes (0 when the ledger never saw it).
    pub bytes: u64,
    pub threshold: u64,
    pub gone_ns: Option<u64>,
}

/// One API's calls, folded (a watched program's script panel).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiFold {
    pub api: String,
    pub calls: u32,
    pub host_ns: u64,
    /// Calls that returned an error, and the latest one's name.
    pub errors: u32,
    pub error: Option<String>,
    /// Sum over calls of memory after minus before, bytes; None when no call
    /// had both readings.
    pub mem_delta: Option<i64>,
}

/// The `# expect-error` search: the first failing call on a marked line, then
/// the later calls up to the first that failed otherwise.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    pub marked: Option<Call>,
    pub sticky_lines: Vec<u32>,
    pub passed: Vec<u32>,
    /// A later call failed otherwise: nothing after it is this error's doing.
    pub stopped: bool,
}

/// Statuses that say something ran out.
pub const RAN_OUT: &[&str] = &[
    "CL_OUT_OF_HOST_MEMORY",
    "CL_OUT_OF_RESOURCES",
    "CL_MEM_OBJECT_ALLOCATION_FAILURE",
    "CUDA_ERROR_OUT_OF_MEMORY",
];

fn error_of(c: &Call) -> Option<&str> {
    match &c.status {
        CallStatus::Error { name, .. } => Some(name),
        _ => None,
    }
}

impl Folds {
    /// Changes so far of what the pool keeps (see `pool_changes`).
    pub(super) fn pool_changes(&self) -> u64 {
        self.pool_changes
    }

    /// Folds one call in. What only a tag's first execution needs is asked
    /// of the run then: `busy_before` (the latest end of the device spans
    /// enqueued before it), `bytes_of` (a ledger object's bytes) and the
    /// memory readings so far.
    pub(super) fn call(
        &mut self,
        c: &Call,
        busy_before: impl FnOnce(u64) -> Option<u64>,
        bytes_of: impl FnOnce(u64) -> Option<u64>,
        readings: &[(u64, u64)],
    ) {
        self.first_begin.get_or_insert(c.begin_ns);
        self.iterations.call(c);
        self.line(c);
        self.api(c);
        *self.received.entry(c.pid).or_default() += 1;
        if !c.status.is_ok() {
            self.failed_calls += 1;
        }
        self.reads.around += u64::from(c.memory_step.is_some());
        self.reads.pool += u64::from(c.cuda.is_some());
        if let Some(m) = c.cuda {
            let kept = |m: Option<CudaMemory>| {
                m.map(|m| {
                    (
                        m.pool_reserved.saturating_sub(m.pool_used),
                        m.graph_mem.map(|g| g.reserved),
                    )
                })
            };
            if kept(Some(m)) != kept(self.last_pool) {
                self.pool_changes += 1;
            }
            self.last_pool = Some(m);
            if let Some(line) = c.line {
                match self.pools.iter_mut().find(|(l, _)| *l == line) {
                    Some(p) => p.1 = m,
                    None => self.pools.push((line, m)),
                }
            }
        }
        if self.ran_out.is_none()
            && !c.expect_error
            && error_of(c).is_some_and(|e| RAN_OUT.contains(&e))
        {
            self.ran_out = Some(c.clone());
        }
        self.expected.call(c);
        self.last_seq = Some(self.last_seq.map_or(c.seq, |s| s.max(c.seq)));
        let early = self.early_spans.remove(&c.seq).unwrap_or_default();
        let Some(tag) = &c.tag else { return };
        if !self.tags.contains_key(tag) {
            let fold = TagFold::new(c, busy_before(c.seq), c.object.and_then(bytes_of), readings);
            self.tags.insert(tag.clone(), fold);
        }
        let Some(t) = self.tags.get_mut(tag) else {
            return;
        };
        t.call(c);
        for ns in early {
            t.span_ns += ns;
            t.spans += 1;
        }
        self.tag_of_seq.insert(c.seq, Arc::clone(&t.name));
        if self.tag_of_seq.len() > TAGGED_SEQS_KEPT {
            self.tag_of_seq.pop_first();
        }
    }

    fn line(&mut self, c: &Call) {
        let Some(line) = c.line else { return };
        let s = self
            .lines
            .entry(line)
            .or_insert_with(|| LineSummary::empty(line, c.api.to_string()));
        s.calls += 1;
        // Compared before cloned: a loop's line repeats the same strings.
        if s.tag != c.tag {
            s.tag = c.tag.clone();
        }
        s.expect_error = c.expect_error;
        if c.status != CallStatus::Directive && s.driver.as_deref() != Some(c.driver.as_str()) {
            s.driver = Some(c.driver.clone());
        }
        if let CallStatus::Error { name, .. } = &c.status {
            s.errors += 1;
            s.error = Some(name.clone());
            self.error_api.insert(line, c.api.to_string());
        }
        let d = c.end_ns.saturating_sub(c.begin_ns);
        s.host_ns_total += d;
        s.host_ns_max = s.host_ns_max.max(d);
        if let (Some(b), Some(a)) = (c.mem_before, c.mem_after) {
            *s.mem_delta.get_or_insert(0) += a as i64 - b as i64;
        }
    }

    fn api(&mut self, c: &Call) {
        let i = match self.apis.iter().position(|a| c.api == a.api) {
            Some(i) => i,
            None => {
                self.apis.push(ApiFold {
                    api: c.api.to_string(),
                    calls: 0,
                    host_ns: 0,
                    errors: 0,
                    error: None,
                    mem_delta: None,
                });
                self.apis.len() - 1
            }
        };
        let a = &mut self.apis[i];
        a.calls += 1;
        a.host_ns += c.end_ns.saturating_sub(c.begin_ns);
        if let Some(e) = error_of(c) {
            a.errors += 1;
            a.error = Some(e.to_string());
        }
        if let (Some(b), Some(after)) = (c.mem_before, c.mem_after) {
            *a.mem_delta.get_or_insert(0) += after as i64 - b as i64;
        }
    }

    /// Folds one device span in.
    pub(super) fn span(&mut self, s: &DeviceSpan) {
        *self.received.entry((s.queue >> 32) as u32).or_default() += 1;
        if self.spans_listed.len() < SPANS_LISTED {
            self.spans_listed.push(s.clone());
        }
        for t in self.tags.values_mut() {
            if s.call_seq < t.first.seq {
                t.busy_end = Some(t.busy_end.unwrap_or(0).max(s.end_ns));
            }
        }
        let ns = s.end_ns.saturating_sub(s.begin_ns);
        if let Some(t) = self
            .tag_of_seq
            .get(&s.call_seq)
            .and_then(|tag| self.tags.get_mut(&**tag))
        {
            t.span_ns += ns;
            t.spans += 1;
        } else if self.last_seq.is_none_or(|last| s.call_seq > last) {
            // Its call has not arrived yet (a span normally follows its call).
            self.early_spans.entry(s.call_seq).or_default().push(ns);
            if self.early_spans.len() > TAGGED_SEQS_KEPT {
                self.early_spans.pop_first();
            }
        }
    }

    pub(super) fn object(&mut self, o: &ObjectEvent) {
        *self.received.entry((o.id >> 32) as u32).or_default() += 1;
        if o.action == ObjectAction::Destroyed {
            self.destroyed_kinds.insert(o.kind);
        }
        if o.action == ObjectAction::Created
            && matches!(
                o.kind,
                ObjKind::Buffer | ObjKind::Managed | ObjKind::Context
            )
        {
            self.created.push((o.id, o.kind, o.handle.clone()));
        }
    }

    pub(super) fn block(&mut self, b: &Block) {
        self.iterations.block(b);
        self.last_block.insert(b.line, b.clone());
        if let Some(tag) = &b.tag {
            self.tagged_blocks
                .entry(tag.clone())
                .or_insert_with(|| b.clone());
        }
    }

    /// A memory reading that counts for the run (taken before its end).
    pub(super) fn reading(&mut self, t: u64, v: u64) {
        for tag in self.tags.values_mut() {
            if let Some(r) = &mut tag.release {
                r.see(t, v, tag.first.end_ns);
            }
        }
    }
}

impl TagFold {
    fn new(
        c: &Call,
        busy_end: Option<u64>,
        bytes: Option<u64>,
        readings: &[(u64, u64)],
    ) -> TagFold {
        let bytes = bytes.unwrap_or(0);
        let release = match (c.mem_before, &c.status) {
            (Some(before), CallStatus::Ok) if c.object.is_some() => {
                let mut w = ReleaseWatch {
                    bytes,
                    threshold: before.saturating_sub(bytes / 2),
                    gone_ns: None,
                };
                for &(t, v) in readings {
                    w.see(t, v, c.end_ns);
                }
                Some(w)
            }
            _ => None,
        };
        TagFold {
            name: c.tag.as_deref().unwrap_or_default().into(),
            calls: 0,
            errors: 0,
            host_ns: 0,
            mem_delta: Some(0.0),
            first: c.clone(),
            last: LastCall::of(c),
            begin_min: c.begin_ns,
            end_max: c.end_ns,
            span_ns: 0,
            spans: 0,
            busy_end,
            release,
        }
    }

    fn call(&mut self, c: &Call) {
        self.calls += 1;
        if error_of(c).is_some() {
            self.errors += 1;
        }
        self.host_ns += c.end_ns.saturating_sub(c.begin_ns);
        self.mem_delta = match (self.mem_delta, c.mem_before, c.mem_after) {
            (Some(sum), Some(x), Some(y)) => Some(sum + (y as f64 - x as f64)),
            _ => None,
        };
        self.begin_min = self.begin_min.min(c.begin_ns);
        self.end_max = self.end_max.max(c.end_ns);
        self.last = LastCall::of(c);
    }
}

impl ReleaseWatch {
    fn see(&mut self, t: u64, v: u64, after: u64) {
        if t >= after && v <= self.threshold {
            self.gone_ns = Some(self.gone_ns.map_or(t, |g| g.min(t)));
        }
    }
}

impl Expected {
    fn call(&mut self, c: &Call) {
        let Some(marked) = &self.marked else {
            if c.expect_error && error_of(c).is_some() {
                self.marked = Some(c.clone());
            }
            return;
        };
        if self.stopped {
            return;
        }
        match &c.status {
            CallStatus::Directive => {}
            CallStatus::Error { name, .. } if Some(name.as_str()) == error_of(marked) => {
                if let Some(l) = c.line.filter(|l| !self.sticky_lines.contains(l)) {
                    self.sticky_lines.push(l);
                }
            }
            CallStatus::Ok => {
                if let Some(l) = c.line.filter(|l| !self.passed.contains(l)) {
                    self.passed.push(l);
                }
            }
            _ => self.stopped = true,
        }
    }
}
