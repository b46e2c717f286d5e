//! The interpreter: walks a validated script, does each call through the backend,
//! reads memory right before and after it, keeps the ledger and emits events.
//! Never prints, never touches the terminal.

use std::collections::HashMap;

use gpulab_backend::{Backend, DriverError, Notice, ObjId, Operand, Outcome};
use gpulab_events::{
    Block, Call, CallStatus, Calling, CudaMemory, DeviceSpan, End, EndStatus, Event, Leak, Note,
    NoteLevel, ObjectAction, ObjectEvent,
};
use gpulab_host::clock::now_ns;
use gpulab_lab::{Api, Arg, ArgKind, Effect, ObjKind, Params, Stmt, StmtKind, Unit};

use super::ledger::{Ledger, State};
use super::protocol::{Command, Control, Emit, Gone};

/// Reads the device memory in use right now, as the worker sees it.
pub trait MemoryReader {
    fn read(&mut self) -> Option<MemoryNow>;

    /// What the reader has to say about its readings since it was last asked
    /// (NVML contradicting a move it counted as the worker's), for the run's notes.
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
}

impl<F: FnMut() -> Option<MemoryNow>> MemoryReader for F {
    fn read(&mut self) -> Option<MemoryNow> {
        self()
    }
}

/// One memory reading of the worker's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryNow {
    /// What the worker holds: its share of the device (NVML's process list), or
    /// the device-wide figure where there is no list, or its RSS on a CPU device.
    pub process: u64,
    /// The whole device, every process: a backend's own device-wide figures
    /// (`cuMemGetInfo`) are read again only when this moved.
    pub device: u64,
}

/// How long the engine waits at the end for spans and destructor callbacks.
const SETTLE_MS: u64 = 2_000;
/// How long the engine waits at the end for late destructor callbacks.
const DESTRUCTOR_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

pub struct Engine<'a> {
    backend: &'a mut dyn Backend,
    memory: &'a mut dyn MemoryReader,
    sink: &'a mut dyn Emit,
    control: &'a mut dyn Control,
    params: &'a Params,
    names: HashMap<String, ObjId>,
    /// Device pointers of host memory (`cudaHostGetDevicePointer`), by the
    /// host memory's id: they are released when it is.
    views: HashMap<ObjId, Vec<ObjId>>,
    /// The call that made each object, where the object's kind alone does not
    /// say how it goes back (host memory, device pointers of it).
    made_by: HashMap<ObjId, Api>,
    /// When each call that installed a callback returned, by its seq: a
    /// callback's note says how long after it ran.
    installed: HashMap<u64, u64>,
    ledger: Ledger,
    /// Per call seq: its line, for spans reported later.
    lines: HashMap<u64, Option<u32>>,
    seq: u64,
    iter: Vec<u32>,
    pid: u32,
    thread: u64,
    baseline: Option<u64>,
    budget: Option<u64>,
    /// The newest reading, taken after the last call: a loop's per-iteration
    /// budget accounting starts and ends there instead of reading twice more
    /// (two NVML reads were half of what a one-line loop cost per line).
    last: Option<MemoryNow>,
    /// `--until-failure`: the first call the driver refuses ends the run and is
    /// its finding (a CUDA allocation refused for want of memory leaves the
    /// context usable, so the script would otherwise go on failing).
    until_failure: bool,
}

/// Why the walk over statements stopped early.
enum Stop {
    /// A line failed that was not expected to.
    Failed { line: u32, error: String },
    /// The parent asked to stop.
    Cancelled,
    /// The reader of events is gone.
    Gone,
    /// The budget would be exceeded: leave the innermost loop.
    Budget,
}

impl From<Gone> for Stop {
    fn from(_: Gone) -> Self {
        Stop::Gone
    }
}

/// The clock and memory read right before and after one backend call.
struct Readings {
    begin_ns: u64,
    end_ns: u64,
    mem_before: Option<u64>,
    mem_after: Option<u64>,
    cuda: Option<CudaMemory>,
}

impl<'a> Engine<'a> {
    pub fn new(
        backend: &'a mut dyn Backend,
        memory: &'a mut dyn MemoryReader,
        sink: &'a mut dyn Emit,
        control: &'a mut dyn Control,
        params: &'a Params,
    ) -> Self {
        Engine {
            backend,
            memory,
            sink,
            control,
            params,
            names: HashMap::new(),
            views: HashMap::new(),
            installed: HashMap::new(),
            made_by: HashMap::new(),
            ledger: Ledger::default(),
            lines: HashMap::new(),
            seq: 0,
            iter: Vec::new(),
            pid: std::process::id(),
            thread: 0,
            baseline: None,
            budget: None,
            last: None,
            until_failure: false,
        }
    }

    /// The first unexpected driver error ends the run (`--until-failure`).
    pub fn until_failure(mut self, on: bool) -> Self {
        self.until_failure = on;
        self
    }

    /// Allocation stops before memory above `baseline` would pass `budget`.
    pub fn with_budget(mut self, baseline: Option<u64>, budget: Option<u64>) -> Self {
        self.baseline = baseline;
        self.budget = budget;
        self
    }

    /// Runs the script to its end (or until it fails, is stopped or the reader is
    /// gone) and emits the `end` event. Returns the status it ended with.
    pub fn run(mut self, script: &[Stmt]) -> EndStatus {
        let status = match self.walk(script) {
            Ok(()) | Err(Stop::Budget) => EndStatus::Finished,
            Err(Stop::Failed { line, error }) => {
                if !self.backend.context_lost() {
                    let _ = self.cleanup();
                }
                EndStatus::Failed {
                    line: Some(line),
                    error,
                }
            }
            Err(Stop::Cancelled) => EndStatus::Cancelled,
            Err(Stop::Gone) => return EndStatus::Cancelled,
        };
        self.backend.settle(SETTLE_MS);
        let _ = self.await_destructors();
        let leaked = self
            .ledger
            .live()
            .map(|e| Leak {
                id: e.id,
                kind: e.kind,
                handle: e.handle.clone(),
                bytes: e.bytes,
                forgotten: e.state == State::Forgotten,
            })
            .collect();
        let _ = self.sink.emit(Event::End(End {
            t_ns: now_ns(),
            status: status.clone(),
            leaked,
        }));
        status
    }

    fn walk(&mut self, script: &[Stmt]) -> Result<(), Stop> {
        for stmt in script {
            self.stmt(stmt)?;
        }
        Ok(())
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<(), Stop> {
        match &stmt.kind {
            StmtKind::Repeat { count, body } => self.repeat(stmt, count.resolve(self.params), body),
            _ => {
                if self.control.before_line() == Command::Stop {
                    return Err(Stop::Cancelled);
                }
                match &stmt.kind {
                    StmtKind::Call { bind, api, args } => {
                        self.call(stmt, bind.as_deref(), *api, args)
                    }
                    StmtKind::Sleep { duration } => {
                        let ms = duration.resolve(self.params).max(0.0);
                        self.directive(stmt, "sleep", format!("{ms} ms"), |_| {
                            std::thread::sleep(std::time::Duration::from_secs_f64(ms / 1e3));
                            None
                        })
                    }
                    StmtKind::Mark { text } => self.directive(stmt, "mark", text.clone(), |_| None),
                    StmtKind::Forget { handle } => self.forget(stmt, handle),
                    StmtKind::Verify { handle } => self.verify(stmt, handle),
                    StmtKind::Repeat { .. } => Ok(()),
                }
            }
        }
    }

    fn repeat(&mut self, stmt: &Stmt, count: f64, body: &[Stmt]) -> Result<(), Stop> {
        let planned = if count.is_finite() && count > 0.0 {
            count.round() as u32
        } else {
            0
        };
        let mem_before = self.read_memory();
        let begin_ns = now_ns();
        let mut done = 0;
        let mut result = Ok(());
        // The largest growth one iteration has shown so far: an iteration that
        // would pass the budget is not started (a context alone can be 500 MiB,
        // more than any buffer the budget check before an allocation sees).
        let mut step_growth = 0u64;
        for i in 0..planned {
            let start = self.in_use();
            let r = match self.budget {
                Some(budget) if i > 0 && start + step_growth > budget => Err(Stop::Budget),
                _ => {
                    self.iter.push(i);
                    let r = self.walk(body);
                    self.iter.pop();
                    r
                }
            };
            step_growth = step_growth.max(self.in_use().saturating_sub(start));
            match r {
                Ok(()) => done += 1,
                Err(Stop::Budget) => {
                    self.note(
                        NoteLevel::Warning,
                        format!(
                            "memory budget reached: loop stopped after {done} of {planned} iterations"
                        ),
                        Some(stmt.line),
                    )?;
                    break;
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let end_ns = now_ns();
        let mem_after = self.read_memory();
        self.sink.emit(Event::Block(Block {
            line: stmt.line,
            tag: stmt.tag.clone(),
            iterations: done,
            planned,
            begin_ns,
            end_ns,
            mem_before,
            mem_after,
        }))?;
        result
    }

    fn operands(&self, api: Api, args: &[Arg]) -> Vec<Operand> {
        let kinds = gpulab_lab::api::spec(api).args;
        let mut ops = Vec::with_capacity(args.len());
        let mut variadic = Vec::new();
        for (i, arg) in args.iter().enumerate() {
            let kind = kinds.get(i.min(kinds.len().saturating_sub(1))).copied();
            let op = match arg {
                // Validation guarantees names are bound; an unbound one (only on an
                // `expect-error` line) goes to the driver as id 0, a null handle.
                Arg::Handle(name) => Operand::Obj(self.names.get(name).copied().unwrap_or(0)),
                // Validation gave every size a size unit and every duration a time
                // unit; a launch's kernel arguments sit at no fixed position.
                Arg::Quantity(q) if q.unit == Unit::None => {
                    Operand::Index(q.resolve(self.params).clamp(0.0, f64::from(u32::MAX)) as u32)
                }
                Arg::Quantity(q) if q.unit.is_size() => {
                    Operand::Bytes(q.resolve(self.params).max(0.0) as u64)
                }
                Arg::Quantity(q) => Operand::Ms(q.resolve(self.params)),
                Arg::Kernel(k) => Operand::Kernel(k.clone()),
                Arg::Bool(b) => Operand::Bool(*b),
                Arg::Flag(f) => Operand::Flag(*f),
                Arg::Flags(fs) => Operand::Flags(fs.clone()),
                Arg::WaitList(names) => Operand::Wait(
                    names
                        .iter()
                        .map(|n| self.names.get(n).copied().unwrap_or(0))
                        .collect(),
                ),
            };
            if let (Some(ArgKind::Objs(_)), Operand::Obj(id)) = (kind, &op) {
                variadic.push(*id);
            } else {
                ops.push(op);
            }
        }
        if !variadic.is_empty() {
            ops.push(Operand::Objs(variadic));
        }
        ops
    }

    /// Memory above the baseline as the worker sees it (or the ledger's bytes when
    /// the device cannot be read), from the newest reading: between two lines that
    /// is the last call's after-reading, taken microseconds ago. Read afresh only
    /// before the first.
    fn in_use(&mut self) -> u64 {
        let now = match self.last {
            Some(m) => Some(m.process),
            None => self.read_memory(),
        };
        match (now, self.baseline) {
            (Some(now), Some(base)) => now.saturating_sub(base).max(self.ledger.live_bytes()),
            _ => self.ledger.live_bytes(),
        }
    }

    /// The worker's memory now; kept as the newest reading.
    fn read_memory(&mut self) -> Option<u64> {
        let now = self.memory.read();
        self.last = now;
        now.map(|m| m.process)
    }

    fn call(
        &mut self,
        stmt: &Stmt,
        bind: Option<&str>,
        api: Api,
        args: &[Arg],
    ) -> Result<(), Stop> {
        let operands = self.operands(api, args);
        self.check_budget(stmt, api, &operands)?;
        let seq = self.seq;
        self.seq += 1;
        self.lines.insert(seq, Some(stmt.line));
        // Said before the call: one that never returns (a driver deadlock) is then
        // known by name, line and iteration to whoever ends the run.
        self.sink.emit(Event::Calling(Calling {
            seq,
            line: Some(stmt.line),
            iter: self.iter.clone(),
            api: api.into(),
            t_ns: now_ns(),
        }))?;
        let (result, readings) = self.timed_call(seq, api, &operands, bind.is_some());
        if api == Api::ClSetEventCallback && result.is_ok() {
            self.installed.insert(seq, readings.end_ns);
        }
        let (status, object, objects) = match &result {
            Ok(out) => {
                let (object, objects) = self.account(
                    stmt,
                    bind,
                    api,
                    &operands,
                    out.created,
                    out.bytes,
                    readings.end_ns,
                );
                (CallStatus::Ok, object, objects)
            }
            Err(e) => (
                CallStatus::Error {
                    code: e.code,
                    name: e.name.clone(),
                },
                None,
                Vec::new(),
            ),
        };
        let mut call = self.call_event(stmt, api, seq, readings, status, object);
        call.returned = result.as_ref().ok().and_then(|o| o.returned);
        self.sink.emit(Event::Call(call))?;
        for o in objects {
            self.sink.emit(Event::Object(o))?;
        }
        for text in self.memory.take_notes() {
            self.note(NoteLevel::Warning, text, Some(stmt.line))?;
        }
        self.drain()?;
        self.after_call(stmt, api, result)
    }

    /// Refuses a buffer that would pass the budget: at the top level the run fails
    /// with a note; inside a loop, the loop stops.
    fn check_budget(&mut self, stmt: &Stmt, api: Api, operands: &[Operand]) -> Result<(), Stop> {
        // Physical memory of the virtual memory API counts as a buffer would.
        let (Some(budget), Effect::Create(ObjKind::Buffer | ObjKind::MemHandle)) =
            (self.budget, api.effect())
        else {
            return Ok(());
        };
        // A sub-buffer is a region of memory its parent already holds.
        if api == Api::ClCreateSubBuffer {
            return Ok(());
        }
        let bytes = operands
            .iter()
            .find_map(|o| match o {
                Operand::Bytes(b) => Some(*b),
                _ => None,
            })
            .unwrap_or(0);
        // The last call's after-reading, taken microseconds ago: a fresh one here
        // cost an allocating line a memory read and NVML's process list (~40 µs
        // on the H100) for a check that is a safety margin, not a measurement.
        if self.in_use() + bytes <= budget {
            return Ok(());
        }
        if !self.iter.is_empty() {
            return Err(Stop::Budget);
        }
        let msg = format!(
            "memory budget reached: {} would pass the budget of {}",
            api.name(),
            mib(budget)
        );
        self.note(NoteLevel::Warning, msg.clone(), Some(stmt.line))?;
        Err(Stop::Failed {
            line: stmt.line,
            error: msg,
        })
    }

    /// Does the call through the backend, reading the clock and memory around it.
    fn timed_call(
        &mut self,
        seq: u64,
        api: Api,
        operands: &[Operand],
        want_event: bool,
    ) -> (Result<Outcome, DriverError>, Readings) {
        let mem_before = self.read_memory();
        let begin_ns = now_ns();
        let result = self.backend.call(seq, api, operands, want_event);
        let end_ns = now_ns();
        // The data a read-back brought, checked now that its time is taken,
        // and let go before the reading after (on a CPU device gpulab's own
        // copy of it would count as the device's memory).
        let checked = self.backend.read_back();
        let mem_after = self.read_memory();
        let cuda = self.backend.cuda_memory(self.last.map(|m| m.device));
        let result = result.map(|mut out| {
            out.returned = out.returned.or(checked);
            out
        });
        let readings = Readings {
            begin_ns,
            end_ns,
            mem_before,
            mem_after,
            cuda,
        };
        (result, readings)
    }

    fn call_event(
        &self,
        stmt: &Stmt,
        api: Api,
        seq: u64,
        readings: Readings,
        status: CallStatus,
        object: Option<u64>,
    ) -> Call {
        Call {
            seq,
            pid: self.pid,
            thread: self.thread,
            line: Some(stmt.line),
            iter: self.iter.clone(),
            tag: stmt.tag.clone(),
            api: api.into(),
            driver: api.driver().to_string(),
            begin_ns: readings.begin_ns,
            end_ns: readings.end_ns,
            status,
            expect_error: stmt.expect_error,
            mem_before: readings.mem_before,
            mem_after: readings.mem_after,
            object,
            cuda: readings.cuda,
            memory_step: None,
            refused: None,
            freed_unseen: false,
            returned: None,
        }
    }

    /// Whether the script goes on after a call: an unexpected error ends it (or,
    /// where the backend says the lab goes on, is noted), and so is an expected
    /// error that did not come.
    fn after_call(
        &mut self,
        stmt: &Stmt,
        api: Api,
        result: Result<Outcome, DriverError>,
    ) -> Result<(), Stop> {
        match result {
            Err(e)
                if !stmt.expect_error
                    && (stmt.stop_on_error
                        || self.until_failure
                        || self.backend.error_ends_run(&e)) =>
            {
                let DriverError { name, code } = e;
                let lost = if self.backend.context_lost() {
                    "; the context is unusable from here on (a sticky error): the script stops, and the worker's exit hands its memory back"
                } else {
                    ""
                };
                Err(Stop::Failed {
                    line: stmt.line,
                    error: format!("{} returned {name} ({code}){lost}", api.name()),
                })
            }
            Err(e) if !stmt.expect_error => {
                self.note(
                    NoteLevel::Warning,
                    format!(
                        "{} returned {e}; the lab goes on (CUDA errors end a run only when they leave the context unusable)",
                        api.name()
                    ),
                    Some(stmt.line),
                )?;
                Ok(())
            }
            Ok(_) if stmt.expect_error => {
                self.note(
                    NoteLevel::Warning,
                    format!("{} was expected to fail but succeeded", api.name()),
                    Some(stmt.line),
                )?;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Updates the ledger for a successful call; returns the object it touched and
    /// the object events to emit after the call.
    #[allow(clippy::too_many_arguments)]
    fn account(
        &mut self,
        stmt: &Stmt,
        bind: Option<&str>,
        api: Api,
        operands: &[Operand],
        created: Option<ObjId>,
        bytes: u64,
        t_ns: u64,
    ) -> (Option<u64>, Vec<ObjectEvent>) {
        let spec = gpulab_lab::api::spec(api);
        let line = Some(stmt.line);
        let first_obj = operands.iter().find_map(|o| match o {
            Operand::Obj(id) => Some(*id),
            _ => None,
        });
        let event = |e: &super::ledger::Entry, action| e.event(action, t_ns, line);
        match (spec.effect, created) {
            (Effect::Create(_), Some(id)) | (Effect::Use, Some(id)) => {
                let kind = match spec.effect {
                    Effect::Create(k) => k,
                    _ => ObjKind::Event,
                };
                let refs: Vec<ObjId> = operands
                    .iter()
                    .flat_map(|o| match o {
                        Operand::Obj(id) => vec![*id],
                        // An enqueue's event depends on the events it waited for.
                        Operand::Objs(ids) | Operand::Wait(ids) => ids.clone(),
                        _ => vec![],
                    })
                    .collect();
                if let Some(name) = bind {
                    self.names.insert(name.to_string(), id);
                }
                if let (Api::CudaHostGetDevicePointer, Some(host)) = (api, first_obj) {
                    self.views.entry(host).or_default().push(id);
                }
                if api.freed_by().is_some() || api == Api::CudaHostGetDevicePointer {
                    self.made_by.insert(id, api);
                }
                let e = self
                    .ledger
                    .create(id, kind, bind.map(str::to_string), bytes, refs, line);
                (Some(id), vec![event(e, ObjectAction::Created)])
            }
            (Effect::Retain(_), _) => match first_obj.and_then(|id| self.ledger.retain(id)) {
                Some(e) => (Some(e.id), vec![event(e, ObjectAction::Retained)]),
                None => (None, vec![]),
            },
            (Effect::Release(_), _) => match first_obj.and_then(|id| self.ledger.release(id)) {
                Some(e) => {
                    let (id, gone) = (e.id, e.state == State::Released);
                    let mut out = vec![event(e, ObjectAction::Released)];
                    if gone {
                        out.extend(self.views_go(id, ObjectAction::Released, t_ns, line));
                    }
                    (Some(id), out)
                }
                None => (None, vec![]),
            },
            // A free node hands the allocation's free to its graph, a callback
            // its buffer's release to the implementation: the lab no longer
            // holds it, and nothing of the lab's frees it again.
            (Effect::Use, None) if api.hands_over().is_some() => {
                let freed = match api.hands_over().and_then(|i| operands.get(i)) {
                    Some(Operand::Obj(id)) => self.ledger.release(*id),
                    _ => None,
                };
                match freed {
                    Some(e) => (Some(e.id), vec![event(e, ObjectAction::Released)]),
                    None => (None, vec![]),
                }
            }
            _ => (None, vec![]),
        }
    }

    /// The device pointers of host memory `host`, released with it: they have
    /// no allocation of their own.
    fn views_go(
        &mut self,
        host: ObjId,
        action: ObjectAction,
        t_ns: u64,
        line: Option<u32>,
    ) -> Vec<ObjectEvent> {
        let mut out = Vec::new();
        for view in self.views.remove(&host).unwrap_or_default() {
            if let Some(v) = self.ledger.release(view) {
                out.push(v.event(action, t_ns, line));
            }
        }
        out
    }

    fn forget(&mut self, stmt: &Stmt, handle: &str) -> Result<(), Stop> {
        let t = now_ns();
        self.directive(stmt, "forget", handle.to_string(), |_| None)?;
        if let Some(id) = self.names.remove(handle)
            && let Some(e) = self.ledger.forget(id)
        {
            let ev = e.event(ObjectAction::Forgotten, t, Some(stmt.line));
            self.sink.emit(Event::Object(ev))?;
        }
        Ok(())
    }

    /// `verify h`: reads host buffer `h` as the program would check its data,
    /// for the share of its words that hold the pattern kernel's values. A
    /// buffer the lab no longer holds is not read (an `# expect-error` line).
    fn verify(&mut self, stmt: &Stmt, handle: &str) -> Result<(), Stop> {
        let live = self
            .names
            .get(handle)
            .copied()
            .filter(|id| self.ledger.get(*id).is_some_and(|e| e.state == State::Live));
        self.directive(stmt, "verify", handle.to_string(), |backend| {
            live.and_then(|id| backend.verify_pattern(id))
        })
    }

    /// A line gpulab does itself; recorded as a call so the timeline shows it.
    /// `act` may answer with a value a claim reads (`Call::returned`).
    fn directive(
        &mut self,
        stmt: &Stmt,
        name: &str,
        detail: String,
        act: impl FnOnce(&dyn Backend) -> Option<f64>,
    ) -> Result<(), Stop> {
        let seq = self.seq;
        self.seq += 1;
        let mem_before = self.read_memory();
        let begin_ns = now_ns();
        let returned = act(&*self.backend);
        let end_ns = now_ns();
        let mem_after = self.read_memory();
        self.sink.emit(Event::Call(Call {
            seq,
            pid: self.pid,
            thread: self.thread,
            line: Some(stmt.line),
            iter: self.iter.clone(),
            tag: stmt.tag.clone(),
            api: name.into(),
            driver: detail,
            begin_ns,
            end_ns,
            status: CallStatus::Directive,
            expect_error: false,
            mem_before,
            mem_after,
            object: None,
            cuda: self.backend.cuda_memory(self.last.map(|m| m.device)),
            memory_step: None,
            refused: None,
            freed_unseen: false,
            returned,
        }))?;
        self.drain()?;
        Ok(())
    }

    fn note(&mut self, level: NoteLevel, text: String, line: Option<u32>) -> Result<(), Gone> {
        self.sink.emit(Event::Note(Note {
            t_ns: now_ns(),
            level,
            text,
            line,
        }))
    }

    /// Turns the backend's late news (spans, destructor callbacks) into events.
    fn drain(&mut self) -> Result<(), Gone> {
        for notice in self.backend.drain() {
            match notice {
                Notice::Span {
                    call_seq,
                    queue,
                    name,
                    queued_ns,
                    begin_ns,
                    end_ns,
                } => {
                    let queue_name = self.ledger.get(queue).and_then(|e| e.handle.clone());
                    self.sink.emit(Event::DeviceSpan(DeviceSpan {
                        queue,
                        queue_name,
                        name,
                        call_seq,
                        line: self.lines.get(&call_seq).copied().flatten(),
                        queued_ns,
                        begin_ns,
                        end_ns,
                    }))?;
                }
                Notice::Destroyed { obj, t_ns } => {
                    if let Some(e) = self.ledger.destroyed(obj, t_ns) {
                        let ev = e.event(ObjectAction::Destroyed, t_ns, None);
                        self.sink.emit(Event::Object(ev))?;
                    }
                }
                Notice::Callback {
                    call_seq,
                    t_ns,
                    what,
                } => {
                    let after = match self.installed.remove(&call_seq) {
                        Some(end) if t_ns >= end => {
                            format!(
                                " {:.1} ms after its call returned",
                                (t_ns - end) as f64 / 1e6
                            )
                        }
                        _ => String::new(),
                    };
                    self.sink.emit(Event::Note(Note {
                        t_ns,
                        level: NoteLevel::Info,
                        text: format!("the callback ran{after}: {what}"),
                        line: self.lines.get(&call_seq).copied().flatten(),
                    }))?;
                }
            }
        }
        Ok(())
    }

    /// Destructor callbacks may run on a driver thread a little after the last
    /// release; give them a moment so the stream says whether they fired. A driver
    /// that has none (CUDA) is not waited for: that wait cost every CUDA run 250 ms.
    fn await_destructors(&mut self) -> Result<(), Gone> {
        let watched = self.backend.destruction_watched();
        if watched.is_empty() {
            return self.drain();
        }
        let deadline = std::time::Instant::now() + DESTRUCTOR_WAIT;
        loop {
            self.drain()?;
            let waiting = self.ledger.all().any(|e| {
                e.state == State::Released
                    && e.destroyed_ns.is_none()
                    && watched.contains(&e.kind)
                    && self
                        .made_by
                        .get(&e.id)
                        .is_none_or(|made| made.destruction_observable())
            });
            if !waiting || std::time::Instant::now() >= deadline {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// After a failure: release what the lab still holds, newest first, so a failed
    /// run does not look like a leak. Errors here are reported, never fatal.
    fn cleanup(&mut self) -> Result<(), Gone> {
        let live: Vec<(ObjId, ObjKind)> = self
            .ledger
            .live()
            .filter(|e| e.state == State::Live)
            .map(|e| (e.id, e.kind))
            .collect();
        for (id, kind) in live.into_iter().rev() {
            // Host memory goes back the way it came; a device pointer of it
            // goes with it and is never freed itself.
            let release = match self.made_by.get(&id) {
                Some(Api::CudaHostGetDevicePointer) => continue,
                Some(made) => made.freed_by(),
                None => Api::release_of(kind, self.backend.kind()),
            };
            let Some(release) = release else {
                continue;
            };
            let refcount = self.ledger.get(id).map_or(0, |e| e.refcount);
            // `clSVMFree` names the context the memory was made in first.
            let operands = match (release, self.ledger.get(id).and_then(|e| e.refs.first())) {
                (Api::ClSVMFree, Some(ctx)) => vec![Operand::Obj(*ctx), Operand::Obj(id)],
                _ => vec![Operand::Obj(id)],
            };
            for _ in 0..refcount {
                let seq = self.seq;
                self.seq += 1;
                match self.backend.call(seq, release, &operands, false) {
                    Ok(_) => {
                        let t = now_ns();
                        if let Some(e) = self.ledger.release(id) {
                            let gone = e.state == State::Released;
                            let ev = e.event(ObjectAction::CleanedUp, t, None);
                            self.sink.emit(Event::Object(ev))?;
                            if gone {
                                for ev in self.views_go(id, ObjectAction::CleanedUp, t, None) {
                                    self.sink.emit(Event::Object(ev))?;
                                }
                            }
                        }
                    }
                    Err(err) => {
                        self.note(
                            NoteLevel::Warning,
                            format!("cleanup: {} on object {id} returned {err}", release.name()),
                            None,
                        )?;
                        break;
                    }
                }
            }
        }
        self.drain()
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", gpulab_events::units::mib(bytes))
}
