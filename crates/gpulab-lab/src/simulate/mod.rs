//! Checks one variant's script against the call catalog and simulates the lab's
//! handles (kind and reference count) line by line, so a use after release, a
//! double release or a handle of the wrong kind is found before anything runs.
//! Turns raw statements into the `Stmt`s the engine trusts; each call's arguments
//! are lowered by `lower`.

mod edges;
mod graph;
mod host;
mod svm;

use std::collections::BTreeMap;

use crate::api::{self, Api, ApiSpec, ArgKind, Effect, KernelSignature, KernelSpec, ObjKind};
use crate::diagnostic::LineIndex;
use crate::lower::{self, Lower};
use crate::mistake::{Mistake, Problem, Span};
use crate::model::{Arg, BackendKind, Number, Param, Quantity, Stmt, StmtKind};
use crate::raw::Sp;
use crate::script::{RawArg, RawKind, RawQty, RawStmt};
use crate::suggest;

pub use crate::lower::signature;

/// A variant's statements and the line of each tag it defines.
#[derive(Debug)]
pub struct Checked {
    pub script: Vec<Stmt>,
    pub tags: BTreeMap<String, u32>,
}

/// What the script knows about one name.
#[derive(Debug, Clone)]
struct Handle {
    kind: ObjKind,
    /// References the lab holds; 0 once released.
    refs: u32,
    released_at: Option<u32>,
    forgotten_at: Option<u32>,
    /// A sub-buffer's parent buffer: the driver keeps it alive while the
    /// sub-buffer lives, whatever the lab does with the parent's name.
    parent: Option<String>,
    /// Lines of the buffer's open `clEnqueueMapBuffer` mappings, oldest first.
    maps: Vec<u32>,
    /// A program's source or a kernel object's function: what a launch of it takes.
    kernel: Option<&'static KernelSpec>,
    /// A user event's status, as the script set it.
    user: Option<UserStatus>,
    /// A virtual address range: the line of the `cuMemMap` into it, while mapped.
    /// The mapping keeps its physical allocation, so the allocation's handle may be
    /// released meanwhile and the range stays usable.
    mapped_at: Option<u32>,
    /// The range's last `cuMemUnmap`, for "line N unmapped it".
    unmapped_at: Option<u32>,
    /// The call that made it: pinned host memory goes back the way it came
    /// (`cudaFreeHost` for `cudaMallocHost`, `cudaHostUnregister` for `cudaHostRegister`).
    made_by: Api,
    /// An allocation a graph's alloc node names: whether it has memory now is
    /// the graph's business, apart from the name's own count.
    alloc: Option<graph::GraphAlloc>,
    /// A device pointer's host memory (`cudaHostGetDevicePointer(h)`): the
    /// pointer has no memory of its own and dies with it.
    view_of: Option<String>,
}

/// A handle named on `line` still holds its object: not forgotten, not
/// released (a release of it then is a double release).
fn alive(h: &Handle, name: &str, span: Span, line: u32, releases: bool) -> Res<()> {
    if let Some(at) = h.forgotten_at {
        return Err(Problem::new(
            span,
            Mistake::UseAfterForget {
                name: name.to_owned(),
                line: at,
            },
        ));
    }
    if let (0, Some(at)) = (h.refs, h.released_at) {
        let earlier_iteration = at >= line;
        let name = name.to_owned();
        let mistake = if releases {
            Mistake::DoubleRelease {
                name,
                line: at,
                earlier_iteration,
            }
        } else {
            Mistake::UseAfterRelease {
                name,
                line: at,
                earlier_iteration,
            }
        };
        return Err(Problem::new(span, mistake));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UserStatus {
    Unset,
    /// `clSetUserEventStatus` on this line.
    SetAt(u32),
}

type Res<T> = Result<T, Problem>;

/// Times a `repeat` may run: every iteration's calls are kept for the report.
pub const MAX_REPEAT_COUNT: u64 = 1_000_000;
/// How long one `sleep` may last: an hour.
pub const MAX_SLEEP_MS: u64 = 3_600_000;

pub struct Simulator<'a> {
    backend: BackendKind,
    params: &'a [Param],
    lower: Lower<'a>,
    handles: BTreeMap<String, Handle>,
    /// Queues and events held back by a user event not yet set (the value): a
    /// command waits for it, or comes after one that does on an in-order queue.
    held: BTreeMap<String, String>,
    /// The nodes of each graph the script builds, by the graph's name.
    graphs: BTreeMap<String, graph::Nodes>,
    /// Each exec's snapshot of its graph's nodes, by the exec's name.
    execs: BTreeMap<String, graph::Nodes>,
    tags: BTreeMap<String, u32>,
    /// How many times the statements being walked can run: the product of the
    /// most each enclosing `repeat` can run.
    runs: f64,
    lines: LineIndex,
    /// Mistakes of lines that bind nothing, passed over so the rest of the
    /// script is checked in the same pass (at most [`MAX_PASSED`]).
    passed: Vec<Problem>,
    /// The names the passed-over lines used: a later mistake on a line that
    /// uses one of them is likely that mistake's echo (a buffer used after
    /// its release, then released again), and is not said.
    tainted: std::collections::BTreeSet<String>,
}

/// The mistakes of one variant passed over in one pass (the next ends it, so
/// ten are said at most): past them, a script is
/// more likely wrong as a whole than line by line.
const MAX_PASSED: usize = 9;

impl<'a> Simulator<'a> {
    pub fn new(text: &'a str, backend: BackendKind, params: &'a [Param]) -> Simulator<'a> {
        Simulator {
            backend,
            params,
            lower: Lower::new(text, params),
            handles: BTreeMap::new(),
            held: BTreeMap::new(),
            graphs: BTreeMap::new(),
            execs: BTreeMap::new(),
            tags: BTreeMap::new(),
            runs: 1.0,
            lines: LineIndex::new(text),
            passed: Vec::new(),
            tainted: std::collections::BTreeSet::new(),
        }
    }

    /// The script checked, or every mistake found in one pass: a line that
    /// binds nothing is passed over with its mistake, so a misspelt
    /// `clFinsh(q)` does not hide the lines after it; a line that binds a
    /// handle ends the pass (what follows would fail for want of it).
    pub fn run(mut self, stmts: &[RawStmt]) -> Result<Checked, Vec<Problem>> {
        let script = self.block(stmts, true);
        let mut problems = std::mem::take(&mut self.passed);
        match script {
            Err(p) => problems.push(p),
            Ok(script) if problems.is_empty() => {
                return Ok(Checked {
                    script,
                    tags: self.tags,
                });
            }
            Ok(_) => {}
        }
        Err(problems)
    }

    fn line(&self, span: &Span) -> u32 {
        self.lines.line(span.start)
    }

    /// Walks a block; `first` is false on the repeat body's second pass, which
    /// only simulates (tags and statements were taken on the first).
    fn block(&mut self, stmts: &[RawStmt], first: bool) -> Res<Vec<Stmt>> {
        let mut out = Vec::new();
        for s in stmts {
            let line = self.line(&s.span);
            if first && let Some(tag) = &s.tag {
                if let Some(&first_line) = self.tags.get(&tag.value) {
                    return Err(Problem::new(
                        tag.span.clone(),
                        Mistake::DuplicateTag {
                            tag: tag.value.clone(),
                            first_line,
                        },
                    ));
                }
                self.tags.insert(tag.value.clone(), line);
            }
            let kind = match &s.kind {
                RawKind::Call {
                    bind,
                    name,
                    args,
                    close,
                } => match self.call(s, line, bind.as_ref(), name, args, close) {
                    Ok(kind) => kind,
                    Err(p) if bind.is_none() && self.passed.len() < MAX_PASSED => {
                        let word = |a: &Sp<RawArg>| match &a.value {
                            RawArg::Word(w) => Some(w.clone()),
                            _ => None,
                        };
                        let echo = args
                            .iter()
                            .filter_map(word)
                            .any(|w| self.tainted.contains(&w));
                        // The handle the mistake is about (it points at an
                        // argument): later mistakes of lines using it are echoes.
                        let about = args
                            .iter()
                            .filter(|a| a.span.start <= p.span.start && p.span.end <= a.span.end)
                            .filter_map(word);
                        self.tainted.extend(about);
                        // The repeat body's second pass may meet it again;
                        // what only a second iteration shows is its own.
                        if !echo && !self.passed.contains(&p) {
                            self.passed.push(p);
                        }
                        continue;
                    }
                    Err(p) => return Err(p),
                },
                RawKind::Repeat { count, body } => {
                    let (count, many) = self.repeat_count(count)?;
                    let outer = self.runs;
                    self.runs *= self.most(&count).max(1.0);
                    let body_out = self.block(body, first)?;
                    if many {
                        self.block(body, false)?;
                    }
                    self.runs = outer;
                    StmtKind::Repeat {
                        count,
                        body: body_out,
                    }
                }
                RawKind::Sleep { duration } => StmtKind::Sleep {
                    duration: self.sleep(duration)?,
                },
                RawKind::Mark { text } => StmtKind::Mark { text: text.clone() },
                RawKind::Forget { handle } => {
                    let Some(h) = self.handles.get_mut(&handle.value) else {
                        return Err(Problem::new(
                            handle.span.clone(),
                            Mistake::ForgetUndefined {
                                name: handle.value.clone(),
                                suggestion: self.nearest_handle(&handle.value),
                            },
                        ));
                    };
                    h.forgotten_at = Some(line);
                    StmtKind::Forget {
                        handle: handle.value.clone(),
                    }
                }
                RawKind::Verify { handle } => self.verify(s, line, handle)?,
            };
            out.push(Stmt {
                line,
                text: s.text.clone(),
                tag: s.tag.as_ref().map(|t| t.value.clone()),
                expect_error: s.expect_error,
                stop_on_error: s.stop_on_error,
                kind,
            });
        }
        Ok(out)
    }

    fn nearest_handle(&self, name: &str) -> Option<String> {
        suggest::nearest(name, self.handles.keys().map(String::as_str)).map(str::to_owned)
    }

    /// The count and whether the body can run twice or more.
    fn repeat_count(&self, count: &RawQty) -> Res<(Quantity, bool)> {
        let q = self.lower.quantity(count, ArgKind::Bool)?;
        let many = match &q.value {
            Number::Lit(n) => {
                if n.fract() != 0.0 || *n < 0.0 {
                    return Err(Problem::new(
                        count.span(),
                        Mistake::BadRepeatCount { count: *n },
                    ));
                }
                *n >= 2.0
            }
            Number::Param(_) | Number::Scaled(..) => self.most(&q) >= 2.0,
        };
        // Nested loops multiply: the body runs this many times in all.
        let most = self.runs * self.most(&q);
        if most > MAX_REPEAT_COUNT as f64 {
            return Err(Problem::new(
                count.span(),
                Mistake::RepeatTooMany {
                    count: most,
                    limit: MAX_REPEAT_COUNT,
                },
            ));
        }
        Ok((q, many))
    }

    /// The largest value `q` can take: its literal, or its parameter's `max`, in
    /// the quantity's unit (bytes, ms or plain).
    fn most(&self, q: &Quantity) -> f64 {
        let v = match &q.value {
            Number::Lit(v) => *v,
            Number::Param(p) => self
                .params
                .iter()
                .find(|x| &x.name == p)
                .map_or(0.0, |x| x.max),
            Number::Scaled(f, p) => {
                f * self
                    .params
                    .iter()
                    .find(|x| &x.name == p)
                    .map_or(0.0, |x| x.max)
            }
        };
        v * q.unit.factor()
    }

    /// A sleep's duration, refused past `MAX_SLEEP_MS`.
    fn sleep(&self, duration: &RawQty) -> Res<Quantity> {
        let q = self.lower.quantity(duration, ArgKind::Duration)?;
        let ms = self.most(&q);
        if ms > MAX_SLEEP_MS as f64 {
            return Err(Problem::new(
                duration.span(),
                Mistake::SleepTooLong {
                    ms,
                    limit_ms: MAX_SLEEP_MS,
                },
            ));
        }
        Ok(q)
    }

    fn call(
        &mut self,
        s: &RawStmt,
        line: u32,
        bind: Option<&Sp<String>>,
        name: &Sp<String>,
        args: &[Sp<RawArg>],
        close: &Span,
    ) -> Res<StmtKind> {
        let spec = api::lookup(&name.value).ok_or_else(|| {
            Problem::new(
                name.span.clone(),
                crate::known::unknown(&name.value, self.backend),
            )
        })?;
        let spec = self.overload(spec, args);
        if spec.backend != self.backend {
            return Err(Problem::new(
                name.span.clone(),
                Mistake::OtherBackend {
                    call: spec.name,
                    call_backend: spec.backend,
                    lab_backend: self.backend,
                },
            ));
        }
        // A launch takes what its kernel takes: the arguments before the kernel's
        // are checked first, so a wrong kernel is named before any count.
        let kernel_at = spec.args.iter().position(|a| *a == ArgKind::KernelArgs);
        let kernel = kernel_at.and_then(|at| self.launched_kernel(spec, at, args));
        let sig = match kernel {
            Some(k) => k.expand(spec.args),
            None => spec.args.to_vec(),
        };
        let mut out = Vec::new();
        if let (Some(at), None) = (kernel_at, kernel) {
            for (i, a) in args.iter().enumerate().take(at) {
                self.arg(s, line, spec, &sig, i, a)?;
            }
        }
        lower::arg_count(spec, &sig, kernel, args, close)?;
        for (i, a) in args.iter().enumerate() {
            out.push(self.arg(s, line, spec, &sig, i, a)?);
        }
        self.kernel_of_program(spec, args, &out)?;
        self.kernel_on_backend(args, &out)?;
        let binds_object = match spec.effect {
            Effect::Create(_) => true,
            Effect::Use => spec.may_return_event,
            Effect::Retain(_) | Effect::Release(_) => false,
        };
        if let Some(b) = bind
            && !binds_object
        {
            return Err(Problem::new(
                b.span.clone(),
                Mistake::BindsNothing { call: spec.name },
            ));
        }
        self.buffer_edges(s, spec, args, &out)?;
        self.kernel_arg_index(spec, args, &out)?;
        if !s.expect_error {
            self.user_event_edges(spec, line, args, &out)?;
        }
        self.range_edges(s, line, spec, args, &out)?;
        self.host_release(s, spec, args, &out)?;
        self.svm_edges(s, spec, args, &out)?;
        self.host_pointer(s, spec, args, &out)?;
        self.graph_edges(s, line, spec, args, &out)?;
        self.effect(spec, line, bind, &out);
        self.graph_made(spec, line, bind, &out);
        self.hold_bound(spec, bind, &out);
        Ok(StmtKind::Call {
            bind: bind.map(|b| b.value.clone()),
            api: spec.api,
            args: out,
        })
    }

    /// Argument `i` of a call to `spec` with signature `sig`, lowered and, when
    /// it names handles, checked against what the script holds.
    fn arg(
        &self,
        s: &RawStmt,
        line: u32,
        spec: &ApiSpec,
        sig: &[ArgKind],
        i: usize,
        a: &Sp<RawArg>,
    ) -> Res<Arg> {
        let kind = lower::arg_kind(sig, i);
        let arg = self.lower.arg(spec, i, a, kind)?;
        // Checked as soon as it is lowered, so the first wrong argument is the one reported.
        if let (Arg::Handle(name), ArgKind::Obj(want) | ArgKind::Objs(want)) = (&arg, kind) {
            let releases = i == 0 && matches!(spec.effect, Effect::Release(_));
            self.handle(s, line, spec, a.span.clone(), name, want, kind, releases)?;
        }
        // An enqueue with a wait list depends on each of those events: each must be
        // an event the lab still holds.
        if let RawArg::Wait(evs) = &a.value {
            let event = ArgKind::Obj(ObjKind::Event);
            for e in evs {
                let span = e.span.clone();
                self.handle(s, line, spec, span, &e.value, ObjKind::Event, event, false)?;
            }
        }
        Ok(arg)
    }

    /// For an overloaded call, the entry whose handle arguments name objects of the
    /// kinds it takes; the first entry when none fits (its messages then explain).
    fn overload(&self, first: &'static ApiSpec, args: &[Sp<RawArg>]) -> &'static ApiSpec {
        // Optional arguments may be left out; a fixed word and a wait list
        // are told apart by how they are written.
        let fits = |spec: &ApiSpec| {
            let required = spec.args.iter().filter(|a| !a.is_optional()).count();
            (required..=spec.args.len()).contains(&args.len())
                && spec
                    .args
                    .iter()
                    .zip(args)
                    .all(|(kind, a)| match (kind, &a.value) {
                        (ArgKind::Obj(k), RawArg::Word(w)) => {
                            self.handles.get(w.as_str()).is_some_and(|h| h.kind == *k)
                        }
                        (ArgKind::Fixed(f), a) => matches!(a, RawArg::Word(w) if w == f.c_name()),
                        (ArgKind::WaitList, a) => matches!(a, RawArg::Wait(_)),
                        _ => true,
                    })
        };
        api::overloads(first.name)
            .find(|s| fits(s))
            .unwrap_or(first)
    }

    #[allow(clippy::too_many_arguments)]
    fn handle(
        &self,
        s: &RawStmt,
        line: u32,
        spec: &ApiSpec,
        span: Span,
        name: &str,
        want: ObjKind,
        kind: ArgKind,
        releases: bool,
    ) -> Res<()> {
        let Some(h) = self.handles.get(name) else {
            return Err(Problem::new(
                span,
                Mistake::UndefinedHandle {
                    name: name.to_owned(),
                    suggestion: self.nearest_handle(name),
                },
            ));
        };
        if h.kind != want {
            return Err(Problem::new(
                span,
                Mistake::WrongKind {
                    name: name.to_owned(),
                    is: h.kind,
                    call: spec.name,
                    expected: kind.describe(),
                    // Host memory given to a device free: the call that frees it.
                    goes_back: (h.kind == ObjKind::HostBuffer
                        && matches!(spec.effect, Effect::Release(_)))
                    .then(|| (h.made_by.name(), host::release_of_host(h.made_by).name())),
                },
            ));
        }
        if s.expect_error {
            return Ok(());
        }
        alive(h, name, span, line, releases)
    }

    /// The virtual memory API's mapping state of a range: a use, an unmap or a
    /// free needs (or must not have) an allocation mapped into it. What the
    /// allocation's own handle does meanwhile does not matter: the mapping keeps
    /// the physical memory until `cuMemUnmap`.
    fn range_edges(
        &mut self,
        s: &RawStmt,
        line: u32,
        spec: &ApiSpec,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        let uses_range = matches!(
            spec.api,
            Api::CuMemMap
                | Api::CuMemSetAccess
                | Api::CudaMemsetAsyncRange
                | Api::CuMemUnmap
                | Api::CuMemAddressFree
        );
        let (true, Some(Arg::Handle(name)), Some(a)) = (uses_range, args.first(), raw.first())
        else {
            return Ok(());
        };
        let Some(h) = self.handles.get_mut(name) else {
            return Ok(());
        };
        let (name, span) = (name.clone(), a.span.clone());
        let mistake = match (spec.api, h.mapped_at) {
            (Api::CuMemMap, Some(at)) => Some(Mistake::AlreadyMapped { name, line: at }),
            (Api::CuMemMap, None) => {
                h.mapped_at = Some(line);
                None
            }
            (Api::CuMemAddressFree, Some(at)) => {
                Some(Mistake::RangeFreedWhileMapped { name, line: at })
            }
            (Api::CuMemAddressFree, None) => None,
            (Api::CuMemUnmap, Some(_)) => {
                h.mapped_at = None;
                h.unmapped_at = Some(line);
                None
            }
            (_, Some(_)) => None,
            (_, None) => Some(Mistake::RangeNotMapped {
                name,
                unmapped_at: h.unmapped_at,
            }),
        };
        match mistake {
            Some(m) if !s.expect_error => Err(Problem::new(span, m)),
            _ => Ok(()),
        }
    }

    fn effect(&mut self, spec: &ApiSpec, line: u32, bind: Option<&Sp<String>>, args: &[Arg]) {
        let created = match spec.effect {
            Effect::Create(kind) => Some(kind),
            Effect::Use if spec.may_return_event => Some(ObjKind::Event),
            _ => None,
        };
        if let (Some(kind), Some(b)) = (created, bind) {
            let parent = match (spec.api, args.first()) {
                (Api::ClCreateSubBuffer, Some(Arg::Handle(p))) => Some(p.clone()),
                _ => None,
            };
            let kernel = match (spec.api, args.get(1)) {
                (Api::ClCreateProgramWithSource | Api::ClCreateKernel, Some(Arg::Kernel(k))) => {
                    KernelSpec::lookup(k)
                }
                _ => None,
            };
            // Re-binding a live name leaks the old object; that can be the lesson.
            self.handles.insert(
                b.value.clone(),
                Handle {
                    kind,
                    refs: 1,
                    released_at: None,
                    forgotten_at: None,
                    parent,
                    maps: Vec::new(),
                    kernel,
                    user: (spec.api == Api::ClCreateUserEvent).then_some(UserStatus::Unset),
                    mapped_at: None,
                    unmapped_at: None,
                    made_by: spec.api,
                    alloc: None,
                    view_of: match (spec.api, args.first()) {
                        (Api::CudaHostGetDevicePointer, Some(Arg::Handle(h))) => Some(h.clone()),
                        _ => None,
                    },
                },
            );
        }
        // A callback that releases a buffer holds the lab's reference from
        // here on (a graph's free node is the graph edges' to follow).
        let hands_over = match spec.effect {
            Effect::Use if spec.api != Api::CudaGraphAddMemFreeNode => spec.api.hands_over(),
            _ => None,
        };
        let released = match hands_over {
            Some(i) => args.get(i),
            None => args.first(),
        };
        let Some(Arg::Handle(first)) = released else {
            return;
        };
        let Some(h) = self.handles.get_mut(first) else {
            return;
        };
        let effect = match hands_over {
            Some(_) => Effect::Release(h.kind),
            None => spec.effect,
        };
        match effect {
            Effect::Retain(_) if h.refs > 0 => h.refs += 1,
            // A graph allocation's frees are the graph edges' to follow: its
            // name lives as long as its graph could map it again.
            Effect::Release(_) if h.refs > 0 && h.alloc.is_none() => {
                h.refs -= 1;
                if h.refs == 0 {
                    h.released_at = Some(line);
                    let first = first.clone();
                    self.views_die_with(&first, line);
                }
            }
            // `# expect-error` lines on dead handles change nothing.
            _ => {}
        }
    }
}
