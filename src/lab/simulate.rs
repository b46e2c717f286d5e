//! Checks one variant's script against the call catalog and simulates the lab's
//! handles (kind and reference count) line by line, so a use after release, a
//! double release or a handle of the wrong kind is found before anything runs.
//! Turns raw statements into the `Stmt`s the engine trusts.

use std::collections::BTreeMap;

use super::api::{Api, ApiSpec, ArgKind, Effect, KERNELS, ObjKind};
use super::diagnostic::line_col;
use super::mistake::{Mistake, Problem, Span};
use super::model::{Arg, BackendKind, Number, Param, Quantity, Stmt, StmtKind, Unit};
use super::raw::Sp;
use super::script::{RawArg, RawKind, RawNum, RawQty, RawStmt};
use super::suggest;

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
}

type Res<T> = Result<T, Problem>;

pub struct Simulator<'a> {
    text: &'a str,
    backend: BackendKind,
    params: &'a [Param],
    handles: BTreeMap<String, Handle>,
    tags: BTreeMap<String, u32>,
}

const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB", "us", "ms", "s"];

impl<'a> Simulator<'a> {
    pub fn new(text: &'a str, backend: BackendKind, params: &'a [Param]) -> Simulator<'a> {
        Simulator {
            text,
            backend,
            params,
            handles: BTreeMap::new(),
            tags: BTreeMap::new(),
        }
    }

    pub fn run(mut self, stmts: &[RawStmt]) -> Res<Checked> {
        let script = self.block(stmts, true)?;
        Ok(Checked {
            script,
            tags: self.tags,
        })
    }

    fn line(&self, span: &Span) -> u32 {
        line_col(self.text, span.start).0
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
                } => self.call(s, line, bind.as_ref(), name, args, close)?,
                RawKind::Repeat { count, body } => {
                    let (count, many) = self.repeat_count(count)?;
                    let body_out = self.block(body, first)?;
                    if many {
                        self.block(body, false)?;
                    }
                    StmtKind::Repeat {
                        count,
                        body: body_out,
                    }
                }
                RawKind::Sleep { duration } => StmtKind::Sleep {
                    duration: self.quantity(duration, ArgKind::Duration)?,
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
        let q = self.quantity(count, ArgKind::Bool)?;
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
            Number::Param(p) => self
                .params
                .iter()
                .find(|x| &x.name == p)
                .is_some_and(|x| x.max >= 2.0),
        };
        Ok((q, many))
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
        let spec = Api::lookup(&name.value).ok_or_else(|| {
            Problem::new(
                name.span.clone(),
                Mistake::UnknownCall {
                    name: name.value.clone(),
                    suggestion: Api::suggest(&name.value),
                },
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
        self.arg_count(spec, args, close)?;
        let mut out = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let kind = match spec.args.get(i) {
                Some(k) => *k,
                // Only a trailing `Objs` takes more; `arg_count` saw to that.
                None => spec.args.last().copied().unwrap_or(ArgKind::Bool),
            };
            let releases = i == 0 && spec.effect == Effect::Release;
            out.push(self.arg(s, line, spec, i, a, kind, releases)?);
        }
        let binds_object = match spec.effect {
            Effect::Create(_) => true,
            Effect::Use => spec.may_return_event,
            Effect::Retain | Effect::Release => false,
        };
        if let Some(b) = bind
            && !binds_object
        {
            return Err(Problem::new(
                b.span.clone(),
                Mistake::BindsNothing { call: spec.name },
            ));
        }
        self.effect(spec, line, bind, &out);
        Ok(StmtKind::Call {
            bind: bind.map(|b| b.value.clone()),
            api: spec.api,
            args: out,
        })
    }

    /// For an overloaded call, the entry whose handle arguments name objects of the
    /// kinds it takes; the first entry when none fits (its messages then explain).
    fn overload(&self, first: &'static ApiSpec, args: &[Sp<RawArg>]) -> &'static ApiSpec {
        let fits = |spec: &ApiSpec| {
            spec.args.len() == args.len()
                && spec
                    .args
                    .iter()
                    .zip(args)
                    .all(|(kind, a)| match (kind, &a.value) {
                        (ArgKind::Obj(k), RawArg::Word(w)) => {
                            self.handles.get(w.as_str()).is_some_and(|h| h.kind == *k)
                        }
                        _ => true,
                    })
        };
        Api::overloads(first.name)
            .find(|s| fits(s))
            .unwrap_or(first)
    }

    fn arg_count(&self, spec: &ApiSpec, args: &[Sp<RawArg>], close: &Span) -> Res<()> {
        let at_least = matches!(spec.args.last(), Some(ArgKind::Objs(_)));
        let want = spec.args.len();
        let ok = if at_least {
            args.len() >= want
        } else {
            args.len() == want
        };
        if ok {
            return Ok(());
        }
        let span = match (args.get(want), args.last()) {
            (Some(first_extra), Some(last)) => first_extra.span.start..last.span.end,
            _ => close.clone(),
        };
        Err(Problem::new(
            span,
            Mistake::ArgCount {
                call: spec.name,
                expected: want,
                at_least,
                found: args.len(),
                signature: signature(spec),
            },
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn arg(
        &self,
        s: &RawStmt,
        line: u32,
        spec: &ApiSpec,
        i: usize,
        a: &Sp<RawArg>,
        kind: ArgKind,
        releases: bool,
    ) -> Res<Arg> {
        let wrong = |found: String| {
            Problem::new(
                a.span.clone(),
                Mistake::ArgType {
                    call: spec.name,
                    position: i + 1,
                    expected: kind.describe(),
                    found,
                },
            )
        };
        match (&a.value, kind) {
            (RawArg::Word(w), ArgKind::Bool) => match w.as_str() {
                "CL_TRUE" => Ok(Arg::Bool(true)),
                "CL_FALSE" => Ok(Arg::Bool(false)),
                _ => Err(wrong(format!("`{w}`"))),
            },
            (RawArg::Word(w), ArgKind::Kernel) => {
                if KERNELS.contains(&w.as_str()) {
                    Ok(Arg::Kernel(w.clone()))
                } else {
                    Err(Problem::new(
                        a.span.clone(),
                        Mistake::UnknownKernel {
                            name: w.clone(),
                            suggestion: suggest::nearest(w, KERNELS.iter().copied()),
                        },
                    ))
                }
            }
            (RawArg::Word(w), ArgKind::Obj(k) | ArgKind::Objs(k)) => {
                if w == "CL_TRUE" || w == "CL_FALSE" {
                    return Err(wrong(format!("`{w}`")));
                }
                self.handle(s, line, spec, a.span.clone(), w, k, kind, releases)?;
                Ok(Arg::Handle(w.clone()))
            }
            (RawArg::Word(w), ArgKind::Size | ArgKind::Duration) => Err(wrong(format!("`{w}`"))),
            (RawArg::Qty(q), ArgKind::Size | ArgKind::Duration) => {
                Ok(Arg::Quantity(self.quantity(q, kind)?))
            }
            (RawArg::Qty(q), _) => Err(wrong(describe_qty(self.text, q))),
        }
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
                },
            ));
        }
        if s.expect_error {
            return Ok(());
        }
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

    fn effect(&mut self, spec: &ApiSpec, line: u32, bind: Option<&Sp<String>>, args: &[Arg]) {
        let created = match spec.effect {
            Effect::Create(kind) => Some(kind),
            Effect::Use if spec.may_return_event => Some(ObjKind::Event),
            _ => None,
        };
        if let (Some(kind), Some(b)) = (created, bind) {
            // Re-binding a live name leaks the old object; that can be the lesson.
            self.handles.insert(
                b.value.clone(),
                Handle {
                    kind,
                    refs: 1,
                    released_at: None,
                    forgotten_at: None,
                },
            );
        }
        let Some(Arg::Handle(first)) = args.first() else {
            return;
        };
        let Some(h) = self.handles.get_mut(first) else {
            return;
        };
        match spec.effect {
            Effect::Retain if h.refs > 0 => h.refs += 1,
            Effect::Release if h.refs > 0 => {
                h.refs -= 1;
                if h.refs == 0 {
                    h.released_at = Some(line);
                }
            }
            // `# expect-error` lines on dead handles change nothing.
            _ => {}
        }
    }

    /// A quantity where `kind` (Size, Duration, or anything else for a plain
    /// count) is expected.
    fn quantity(&self, q: &RawQty, kind: ArgKind) -> Res<Quantity> {
        let value = match &q.value.value {
            RawNum::Lit(n) => Number::Lit(*n),
            RawNum::Param(p) => {
                if !self.params.iter().any(|x| &x.name == p) {
                    let names = self.params.iter().map(|x| x.name.as_str());
                    return Err(Problem::new(
                        q.value.span.clone(),
                        Mistake::UnknownParam {
                            name: p.clone(),
                            suggestion: suggest::nearest(p, names).map(str::to_owned),
                        },
                    ));
                }
                Number::Param(p.clone())
            }
        };
        let (want_size, expected) = match kind {
            ArgKind::Size => (true, "a size unit (B, KiB, MiB, GiB)"),
            ArgKind::Duration => (false, "a time unit (us, ms, s)"),
            _ => {
                return Ok(Quantity {
                    value,
                    unit: Unit::None,
                });
            }
        };
        let Some(u) = &q.unit else {
            let example = match (&value, want_size) {
                (Number::Param(p), _) => {
                    let unit = self
                        .param_unit(p)
                        .unwrap_or(if want_size { "MiB" } else { "ms" });
                    format!("{{{p}}} {unit}")
                }
                (Number::Lit(n), true) => format!("{n} MiB"),
                (Number::Lit(n), false) => format!("{n} ms"),
            };
            return Err(Problem::new(
                q.value.span.clone(),
                Mistake::NeedsUnit {
                    size: want_size,
                    example,
                },
            ));
        };
        let Some(unit) = Unit::parse(&u.value) else {
            return Err(Problem::new(
                u.span.clone(),
                Mistake::UnknownUnit {
                    unit: u.value.clone(),
                    suggestion: unit_suggestion(&u.value),
                },
            ));
        };
        if unit.is_size() != want_size {
            return Err(Problem::new(
                u.span.clone(),
                Mistake::WrongUnit {
                    unit: u.value.clone(),
                    expected: expected.into(),
                },
            ));
        }
        if let Number::Param(p) = &value
            && let Some(pu) = self.param_unit(p)
            && Unit::parse(pu) != Some(unit)
        {
            return Err(Problem::new(
                u.span.clone(),
                Mistake::ParamUnit {
                    name: p.clone(),
                    unit: pu.to_owned(),
                },
            ));
        }
        Ok(Quantity { value, unit })
    }

    /// The parameter's unit when it is one scripts can write (`MiB`, `ms`, …).
    fn param_unit(&self, name: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.unit.as_str())
            .filter(|u| Unit::parse(u).is_some())
    }
}

/// `MB` and friends mean the binary units here; otherwise the nearest spelling.
fn unit_suggestion(unit: &str) -> Option<&'static str> {
    match unit {
        "KB" | "kB" | "kb" | "K" | "k" => Some("KiB"),
        "MB" | "mb" | "M" => Some("MiB"),
        "GB" | "gb" | "G" => Some("GiB"),
        "sec" | "secs" => Some("s"),
        "msec" => Some("ms"),
        "usec" | "µs" => Some("us"),
        _ => suggest::nearest(unit, UNITS.iter().copied()),
    }
}

fn describe_qty(text: &str, q: &RawQty) -> String {
    let written = text.get(q.span()).unwrap_or("");
    let what = match q.unit.as_ref().and_then(|u| Unit::parse(&u.value)) {
        Some(u) if u.is_size() => "a size",
        Some(u) if u.is_time() => "a duration",
        _ => "a number",
    };
    format!("{what} `{written}`")
}

/// `clEnqueueNDRangeKernel(queue, kernel, buffer, 50 ms)`, for "write …" help.
pub fn signature(spec: &ApiSpec) -> String {
    let args: Vec<String> = spec
        .args
        .iter()
        .map(|a| match a {
            ArgKind::Obj(k) => k.as_str().to_owned(),
            ArgKind::Objs(k) => format!("{}, …", k.as_str()),
            ArgKind::Size => "64 MiB".into(),
            ArgKind::Duration => "50 ms".into(),
            ArgKind::Kernel => "spin".into(),
            ArgKind::Bool => "CL_TRUE".into(),
        })
        .collect();
    format!("{}({})", spec.name, args.join(", "))
}
