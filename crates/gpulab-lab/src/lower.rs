//! Argument lowering: a call's arguments as the script wrote them (words and
//! quantities) become the typed `Arg`s the engine takes, checked against the
//! call's signature, the lab's parameters and the units. Never looks at what a
//! handle holds: a handle comes out as its name, for `simulate` to check.

use super::api::{ApiSpec, ArgKind, ClFlag, KERNELS, KernelSignature, KernelSpec};
use super::mistake::{Mistake, Problem, Span};
use super::model::{Arg, Number, Param, Quantity, Unit};
use super::raw::Sp;
use super::script::{RawArg, RawNum, RawQty};
use super::suggest;

type Res<T> = Result<T, Problem>;

const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB", "us", "ms", "s"];

/// What lowering reads: the file (to quote what was written) and the parameters.
#[derive(Clone, Copy)]
pub(super) struct Lower<'a> {
    text: &'a str,
    params: &'a [Param],
}

/// The kind the call takes at argument `i`, where `sig` is its signature with
/// the kernel's arguments in place (`KernelSpec::expand`).
pub(super) fn arg_kind(sig: &[ArgKind], i: usize) -> ArgKind {
    match sig.get(i) {
        Some(k) => *k,
        // Only a trailing `Objs` takes more; `arg_count` saw to that.
        None => sig.last().copied().unwrap_or(ArgKind::Bool),
    }
}

/// Checks the number of arguments against the call's signature `sig`; a launch
/// names its kernel in the message, with what that kernel takes.
pub(super) fn arg_count(
    spec: &ApiSpec,
    sig: &[ArgKind],
    kernel: Option<&KernelSpec>,
    args: &[Sp<RawArg>],
    close: &Span,
) -> Res<()> {
    let at_least = matches!(sig.last(), Some(ArgKind::Objs(_)));
    let optional = sig.iter().filter(|a| a.is_optional()).count();
    let want = sig.len() - optional;
    // A launch's wait list is known by its `wait [`: the rest must be exactly
    // what the kernel takes, so a duration for a kernel without one is a count.
    let positional = args
        .iter()
        .filter(|a| kernel.is_none() || !matches!(a.value, RawArg::Wait(_)))
        .count();
    let ok = if at_least {
        args.len() >= want
    } else if kernel.is_some() {
        positional == want && args.len() <= want + optional
    } else {
        (want..=want + optional).contains(&args.len())
    };
    if ok {
        return Ok(());
    }
    let span = match (args.get(want + optional), args.last()) {
        (Some(first_extra), Some(last)) => first_extra.span.start..last.span.end,
        _ => close.clone(),
    };
    Err(Problem::new(
        span,
        Mistake::ArgCount {
            call: spec.name,
            expected: want,
            at_least,
            optional,
            found: if kernel.is_some() {
                positional
            } else {
                args.len()
            },
            signature: signature_of(spec.name, sig, kernel.map(|k| k.name)),
            kernel: kernel.map(|k| (k.name, k.takes())),
        },
    ))
}

impl<'a> Lower<'a> {
    pub(super) fn new(text: &'a str, params: &'a [Param]) -> Lower<'a> {
        Lower { text, params }
    }

    /// Argument `i` of a call to `spec`, where the call takes `kind`.
    pub(super) fn arg(&self, spec: &ApiSpec, i: usize, a: &Sp<RawArg>, kind: ArgKind) -> Res<Arg> {
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
                if KernelSpec::lookup(w).is_some() {
                    Ok(Arg::Kernel(w.clone()))
                } else {
                    Err(Problem::new(
                        a.span.clone(),
                        Mistake::UnknownKernel {
                            name: w.clone(),
                            suggestion: suggest::nearest(w, KERNELS.iter().map(|k| k.name)),
                        },
                    ))
                }
            }
            (RawArg::Word(w), ArgKind::Obj(_) | ArgKind::Objs(_)) => {
                if w == "CL_TRUE" || w == "CL_FALSE" {
                    return Err(wrong(format!("`{w}`")));
                }
                Ok(Arg::Handle(w.clone()))
            }
            (
                RawArg::Word(w),
                ArgKind::MemFlag | ArgKind::QueueFlag | ArgKind::EventStatus | ArgKind::StreamFlag,
            ) => match ClFlag::parse(w).filter(|f| super::api::flag_kind(*f) == kind) {
                Some(f) => Ok(Arg::Flag(f)),
                None => Err(wrong(format!("`{w}`"))),
            },
            (RawArg::Word(w), ArgKind::Fixed(f)) if w == f.c_name() => Ok(Arg::Flag(f)),
            (RawArg::Word(w), ArgKind::Advice | ArgKind::Location | ArgKind::Limit) => {
                Ok(Arg::Flag(self.flag(a, w, kind, &wrong)?))
            }
            (RawArg::Word(w), ArgKind::HostAllocFlags | ArgKind::EventFlags) => {
                Ok(Arg::Flags(vec![self.flag(a, w, kind, &wrong)?]))
            }
            (RawArg::Flags(fs), ArgKind::HostAllocFlags | ArgKind::EventFlags) => {
                let mut flags = Vec::with_capacity(fs.len());
                for f in fs {
                    let one = Sp::new(RawArg::Word(f.value.clone()), f.span.clone());
                    flags.push(self.flag(&one, &f.value, kind, &wrong)?);
                }
                Ok(Arg::Flags(flags))
            }
            (RawArg::Flags(fs), _) => Err(wrong(format!(
                "flags joined by `|` ({}): only `cudaHostAlloc` and `cudaEventCreateWithFlags` take more than one",
                fs.iter()
                    .map(|f| f.value.as_str())
                    .collect::<Vec<_>>()
                    .join(" | ")
            ))),
            (RawArg::Wait(evs), ArgKind::WaitList) => {
                Ok(Arg::WaitList(evs.iter().map(|e| e.value.clone()).collect()))
            }
            (RawArg::Wait(_), _) => Err(wrong(
                "a wait list (only an enqueue takes one, as its last argument)".into(),
            )),
            (
                RawArg::Word(w),
                ArgKind::Size
                | ArgKind::Duration
                | ArgKind::WaitList
                | ArgKind::KernelArgs
                | ArgKind::Index
                | ArgKind::Device
                | ArgKind::Fixed(_),
            ) => Err(wrong(format!("`{w}`"))),
            (RawArg::Qty(q), ArgKind::Size | ArgKind::Duration) => {
                Ok(Arg::Quantity(self.quantity(q, kind)?))
            }
            // A plain whole number, as C writes the index.
            (RawArg::Qty(q), ArgKind::Index | ArgKind::Device | ArgKind::Location) => {
                match (&q.value.value, &q.unit) {
                    (RawNum::Lit(n), None) if *n >= 0.0 && n.fract() == 0.0 && *n < 64.0 => {
                        Ok(Arg::Quantity(Quantity {
                            value: Number::Lit(*n),
                            unit: Unit::None,
                        }))
                    }
                    _ => Err(wrong(describe_qty(self.text, q))),
                }
            }
            (RawArg::Qty(q), _) => Err(wrong(describe_qty(self.text, q))),
        }
    }

    /// One flag word of `kind`; a word of another kind or none is said at its own span.
    fn flag(
        &self,
        a: &Sp<RawArg>,
        w: &str,
        kind: ArgKind,
        wrong: &dyn Fn(String) -> Problem,
    ) -> Res<ClFlag> {
        match ClFlag::parse(w).filter(|f| super::api::flag_kind(*f) == kind) {
            Some(f) => Ok(f),
            None => {
                let mut p = wrong(format!("`{w}`"));
                p.span = a.span.clone();
                Err(p)
            }
        }
    }

    /// A quantity where `kind` (Size, Duration, or anything else for a plain
    /// count) is expected.
    pub(super) fn quantity(&self, q: &RawQty, kind: ArgKind) -> Res<Quantity> {
        let value = self.number(q)?;
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
            return Err(Problem::new(
                q.value.span.clone(),
                Mistake::NeedsUnit {
                    size: want_size,
                    example: self.unit_example(&value, want_size),
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
        if let Number::Param(p) | Number::Scaled(_, p) = &value
            && let Some(pu) = self.param_unit(p)
            && pu != unit
        {
            return Err(Problem::new(
                u.span.clone(),
                Mistake::ParamUnit {
                    name: p.clone(),
                    unit: pu.as_str().to_owned(),
                },
            ));
        }
        Ok(Quantity { value, unit })
    }

    /// The number of a quantity: a literal, or a parameter the lab declares.
    fn number(&self, q: &RawQty) -> Res<Number> {
        match &q.value.value {
            RawNum::Lit(n) => Ok(Number::Lit(*n)),
            RawNum::Param(p) | RawNum::Scaled(_, p) => {
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
                Ok(match &q.value.value {
                    RawNum::Scaled(f, _) => Number::Scaled(*f, p.clone()),
                    _ => Number::Param(p.clone()),
                })
            }
        }
    }

    /// How `value` would read with a unit, for "needs a unit" help.
    fn unit_example(&self, value: &Number, want_size: bool) -> String {
        match (value, want_size) {
            (Number::Param(p), _) => {
                let unit = self
                    .param_unit(p)
                    .map_or(if want_size { "MiB" } else { "ms" }, Unit::as_str);
                format!("{{{p}}} {unit}")
            }
            (Number::Scaled(f, p), _) => {
                let unit = self
                    .param_unit(p)
                    .map_or(if want_size { "MiB" } else { "ms" }, Unit::as_str);
                format!("{f} * {{{p}}} {unit}")
            }
            (Number::Lit(n), true) => format!("{n} MiB"),
            (Number::Lit(n), false) => format!("{n} ms"),
        }
    }

    /// The parameter's unit when it is one scripts can write (`MiB`, `ms`, …).
    fn param_unit(&self, name: &str) -> Option<Unit> {
        self.params
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.unit.script())
    }
}

/// `MB` and friends mean the binary units here; otherwise the nearest spelling.
pub(crate) fn unit_suggestion(unit: &str) -> Option<&'static str> {
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

/// `clEnqueueNDRangeKernel(queue, kernel, …[, wait [event, …]])`, for "write …" help.
pub fn signature(spec: &ApiSpec) -> String {
    signature_of(spec.name, spec.args, None)
}

/// `clEnqueueNDRangeKernel(queue, kernel, buffer, 50 ms)`: the call written with
/// the signature `sig` (a launch's with its kernel's arguments in place, and
/// that kernel's name where the call names one).
pub fn signature_of(name: &str, sig: &[ArgKind], kernel: Option<&str>) -> String {
    let mut required = Vec::new();
    let mut optional = String::new();
    for a in sig {
        let text = match a {
            ArgKind::Obj(k) => k.as_str().to_owned(),
            ArgKind::Objs(k) => format!("{}, …", k.as_str()),
            ArgKind::Size => "64 MiB".into(),
            ArgKind::Duration => "50 ms".into(),
            ArgKind::Kernel => kernel.unwrap_or("spin").into(),
            ArgKind::KernelArgs => "…".into(),
            ArgKind::Bool => "CL_TRUE".into(),
            ArgKind::MemFlag => "CL_MEM_USE_HOST_PTR".into(),
            ArgKind::Index => "0".into(),
            ArgKind::Device => "1".into(),
            ArgKind::EventStatus => "CL_COMPLETE".into(),
            ArgKind::QueueFlag => "CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE".into(),
            ArgKind::WaitList => "wait [event, …]".into(),
            ArgKind::StreamFlag => "cudaStreamNonBlocking".into(),
            ArgKind::HostAllocFlags => "cudaHostAllocMapped".into(),
            ArgKind::Fixed(f) => f.c_name().into(),
            ArgKind::EventFlags => "cudaEventDisableTiming".into(),
            ArgKind::Advice => "cudaMemAdviseSetPreferredLocation".into(),
            ArgKind::Location => "cudaCpuDeviceId".into(),
            ArgKind::Limit => "cudaLimitMallocHeapSize".into(),
        };
        if a.is_optional() {
            optional.push_str(&format!("[, {text}]"));
        } else {
            required.push(text);
        }
    }
    format!("{name}({}{optional})", required.join(", "))
}
