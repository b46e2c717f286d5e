//! Every mistake a lab file can hold, and the one table that words them. Parsers and
//! validation only say *what* is wrong and *where* (a byte span); `Diagnostic` turns
//! that into `file:line:col: message; help`.

use std::ops::Range;

use super::api::ObjKind;
use gpulab_events::BackendKind;

/// Byte offsets into the lab file's text.
pub type Span = Range<usize>;

/// A mistake and the bytes of the file it is about.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub span: Span,
    pub mistake: Mistake,
}

impl Problem {
    pub fn new(span: Span, mistake: Mistake) -> Problem {
        Problem { span, mistake }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Mistake {
    // --- TOML shape ---
    Toml {
        message: String,
    },
    /// A claim adds, subtracts or compares values measured in different units.
    MixedUnits {
        left: String,
        left_unit: &'static str,
        right: String,
        right_unit: &'static str,
    },
    /// A multi-line string (`"""` or `'''`) that runs on over the next key: it
    /// was never closed where its text ended.
    UnclosedString {
        delimiter: &'static str,
        swallowed: String,
        line: usize,
    },
    DuplicateKey {
        key: String,
    },
    UnknownKey {
        key: String,
        table: &'static str,
        suggestion: Option<&'static str>,
    },
    MissingKey {
        key: &'static str,
        table: &'static str,
    },
    WrongType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    /// `[variants]` where `[[variants]]` was meant.
    NotArrayOfTables {
        key: &'static str,
    },
    NotFinite {
        key: &'static str,
    },
    // --- header ---
    BadId {
        /// "lab" or "lesson".
        what: &'static str,
        id: String,
    },
    UnknownBackend {
        name: String,
        suggestion: Option<&'static str>,
    },
    MultiLine {
        key: &'static str,
    },
    Empty {
        key: &'static str,
    },
    BadName {
        what: &'static str,
        name: String,
        rule: &'static str,
    },
    Duplicate {
        what: &'static str,
        name: String,
        first_line: u32,
    },
    ParamIsMetric {
        name: String,
    },
    DefaultOutOfRange {
        name: String,
        default: f64,
        min: f64,
        max: f64,
    },
    MinAboveMax {
        name: String,
        min: f64,
        max: f64,
    },
    NoVariants,
    // --- script lines ---
    EmptyScript {
        variant: String,
    },
    ScriptSyntax {
        expected: String,
        found: String,
    },
    BadTag,
    /// A word in a line's comment that is nearly, not exactly, one of the marks
    /// (`expect-error`, `stop-on-error`): a misspelt mark would change nothing.
    UnknownMark {
        word: String,
        suggestion: &'static str,
    },
    TagOnClose,
    UnclosedRepeat,
    StrayClose,
    /// `repeat` blocks nested deeper than `MAX_REPEAT_DEPTH`.
    RepeatTooDeep {
        limit: usize,
    },
    /// A `repeat` that could run more than `MAX_REPEAT_COUNT` times.
    RepeatTooMany {
        count: f64,
        limit: u64,
    },
    /// A `sleep` that could last longer than `MAX_SLEEP_MS`.
    SleepTooLong {
        ms: f64,
        limit_ms: u64,
    },
    /// A parameter bound or default no lab can mean (1e300, infinite).
    ParamTooLarge {
        name: String,
        value: f64,
        limit: f64,
    },
    /// A claim with more operators and parentheses than `MAX_EXPR_OPERATORS`.
    ExprTooLong {
        limit: usize,
    },
    BadRepeatCount {
        count: f64,
    },
    UnknownCall {
        name: String,
        suggestion: Option<&'static str>,
    },
    /// A real OpenCL or CUDA call (`known_calls.txt`) that gpulab's catalog
    /// lacks: not a typo.
    NotInCatalog {
        name: String,
        api: &'static str,
        /// The catalog's calls of the same API nearest to it.
        nearest: Vec<&'static str>,
    },
    OtherBackend {
        call: &'static str,
        call_backend: BackendKind,
        lab_backend: BackendKind,
    },
    ArgCount {
        call: &'static str,
        expected: usize,
        at_least: bool,
        /// Optional trailing arguments the call also takes (a flag, a wait list).
        optional: usize,
        found: usize,
        signature: String,
        /// A launch's kernel and what it takes (`copy`: two buffers, …).
        kernel: Option<(&'static str, &'static str)>,
    },
    ArgType {
        call: &'static str,
        position: usize,
        expected: String,
        found: String,
    },
    NeedsUnit {
        size: bool,
        example: String,
    },
    WrongUnit {
        unit: String,
        expected: String,
    },
    UnknownUnit {
        unit: String,
        suggestion: Option<&'static str>,
    },
    UnknownParam {
        name: String,
        suggestion: Option<String>,
    },
    ParamUnit {
        name: String,
        unit: String,
    },
    UnknownKernel {
        name: String,
        suggestion: Option<&'static str>,
    },
    /// A kernel that calls the device's `malloc`, in a lab whose API has none.
    KernelNeedsDeviceHeap {
        name: &'static str,
    },
    UndefinedHandle {
        name: String,
        suggestion: Option<String>,
    },
    WrongKind {
        name: String,
        is: ObjKind,
        call: &'static str,
        expected: String,
        /// Host memory given to a release of another kind: the call that
        /// made it and the call that frees it.
        goes_back: Option<(&'static str, &'static str)>,
    },
    UseAfterRelease {
        name: String,
        line: u32,
        earlier_iteration: bool,
    },
    UseAfterForget {
        name: String,
        line: u32,
    },
    DoubleRelease {
        name: String,
        line: u32,
        earlier_iteration: bool,
    },
    BindsNothing {
        call: &'static str,
    },
    /// `clEnqueueUnmapMemObject` of a buffer with no open mapping.
    NotMapped {
        name: String,
    },
    /// The lab's last reference to a buffer released while a mapping of it is open.
    ReleasedWhileMapped {
        name: String,
        line: u32,
    },
    /// `clSetKernelArg` of an argument index the kernel's buffers do not reach.
    KernelArgIndex {
        kernel: &'static str,
        index: u32,
        buffers: usize,
    },
    /// `clSetUserEventStatus` of an event that is not a user event.
    NotUserEvent {
        name: String,
    },
    /// `clSetUserEventStatus` of a user event already set.
    UserEventSetTwice {
        name: String,
        line: u32,
    },
    /// A wait for work that waits for a user event the script has not set.
    WaitsForever {
        call: &'static str,
        user_event: String,
    },
    /// `clCreateKernel` of a kernel its program's source does not define.
    KernelNotInProgram {
        kernel: String,
        program: String,
        source: &'static str,
    },
    /// A use of a virtual address range (`cuMemSetAccess`, `cuMemUnmap`, a memset)
    /// with no allocation mapped into it.
    RangeNotMapped {
        name: String,
        unmapped_at: Option<u32>,
    },
    /// `cuMemMap` into a range that already has an allocation mapped.
    AlreadyMapped {
        name: String,
        line: u32,
    },
    /// `cuMemAddressFree` of a range an allocation is still mapped into.
    RangeFreedWhileMapped {
        name: String,
        line: u32,
    },
    /// A metric that reads what a call answered, on a tag whose line answers
    /// nothing it reads (`pattern(t)` where `t` is a `clFinish`).
    MetricReadsNothing {
        metric: &'static str,
        tag: String,
        line_is: &'static str,
        reads: String,
    },
    /// The host's `memset` of device memory that is not managed: a C program
    /// would crash on it.
    HostTouchOfDeviceMemory {
        name: String,
        made_by: &'static str,
    },
    /// `cudaHostGetDevicePointer` of `malloc`'d memory: the driver does not know it.
    PageableHasNoDevicePointer {
        name: String,
    },
    /// A device pointer of pinned host memory given to a free: it has no
    /// allocation of its own.
    FreeOfDevicePointer {
        name: String,
        host: String,
        release: &'static str,
    },
    /// Host memory released by the call that does not pair with the one
    /// that made it (`cudaFreeHost` of registered memory, `free` of pinned).
    WrongHostRelease {
        name: String,
        made_by: &'static str,
        release: &'static str,
    },
    /// An SVM pointer given to a call that takes a `cl_mem`.
    SvmIsNotAMemObject {
        name: String,
        call: &'static str,
        instead: &'static str,
    },
    /// A `cl_mem` given to a call that takes an SVM pointer.
    NotSvm {
        name: String,
        call: &'static str,
        made_by: &'static str,
    },
    /// A use outside its graph of an allocation that no launch has mapped yet.
    GraphAllocNotLaunched {
        name: String,
        node_line: u32,
    },
    /// A use outside its graph, a free, or a second free node, of an allocation
    /// that a free node of its own graph frees.
    GraphAllocFreedInGraph {
        name: String,
        line: u32,
    },
    /// A free node for a buffer that is not an allocation of the same graph.
    FreeNodeNotOwn {
        name: String,
        graph: String,
    },
    /// A node added to a graph while an exec instantiated from it lives: the
    /// exec would not run it.
    NodeAfterInstantiate {
        graph: String,
        exec: String,
        line: u32,
    },
    /// A second exec of a graph with memory nodes while the first lives.
    InstantiatedTwice {
        graph: String,
        exec: String,
        line: u32,
    },
    /// A launch of an exec whose allocation from an earlier launch is not freed.
    RelaunchWithLiveAlloc {
        exec: String,
        name: String,
        line: u32,
    },
    /// A launch of an exec with a node that names a buffer released since.
    GraphNamesDead {
        exec: String,
        name: String,
        node_line: u32,
        line: u32,
    },
    /// `clCreateSubBuffer` of a sub-buffer (the driver answers CL_INVALID_MEM_OBJECT).
    SubBufferOfSubBuffer {
        name: String,
        parent: String,
    },
    ForgetUndefined {
        name: String,
        suggestion: Option<String>,
    },
    DuplicateTag {
        tag: String,
        first_line: u32,
    },
    // --- claims ---
    ExprSyntax {
        expected: String,
        found: String,
    },
    ExprType {
        message: &'static str,
    },
    UnknownMetric {
        name: String,
        suggestion: Option<&'static str>,
    },
    MetricNeedsArg {
        name: &'static str,
        arg: &'static str,
    },
    MetricTakesNoArg {
        name: &'static str,
    },
    TagNotInVariant {
        tag: String,
        variant: String,
        suggestion: Option<String>,
    },
    UnknownKind {
        kind: String,
    },
    BareVariable {
        name: String,
        suggestion: Option<String>,
    },
    UnknownVariant {
        name: String,
        suggestion: Option<String>,
    },
    /// `expect = { v = … }` for a variant the claim does not apply to.
    ExpectOutsideClaim {
        variant: String,
        /// The claim's variants, quoted and joined.
        applies: String,
    },
    /// `expect` says something other than `holds` or `does not hold`.
    BadExpect {
        found: String,
    },
    /// `… in variant V` in a claim that applies to `V` itself.
    ComparesWithItself {
        variant: String,
        /// The claim's other variants, quoted and joined, for the help.
        others: String,
    },
    /// `param in variant V`: a parameter has one value in every variant.
    ParamInVariant {
        name: String,
    },
    // --- lesson files ---
    /// A lesson's step names a lab no lab file defines.
    UnknownLab {
        id: String,
        suggestion: Option<String>,
    },
    /// A step's `minutes` is not a whole number from 1 to 120.
    BadMinutes {
        found: f64,
    },
    /// A lesson without a `[[steps]]`.
    NoSteps,
}

fn did_you_mean(s: Option<&str>) -> Option<String> {
    s.map(|s| format!("did you mean `{s}`?"))
}

fn kinds_list() -> String {
    ObjKind::of_labs()
        .map(|k| k.plural())
        .collect::<Vec<_>>()
        .join(", ")
}

fn earlier(flag: bool) -> &'static str {
    if flag {
        ", in an earlier iteration of its `repeat`"
    } else {
        ""
    }
}

fn backend_name(b: BackendKind) -> &'static str {
    match b {
        BackendKind::OpenCl => "an OpenCL",
        BackendKind::Cuda => "a CUDA",
    }
}

impl Mistake {
    /// The message and, where there is one, a help text.
    #[expect(
        clippy::too_many_lines,
        reason = "a catalog: the words of each kind of mistake"
    )]
    pub fn words(&self) -> (String, Option<String>) {
        use Mistake as M;
        match self {
            M::Toml { message } => (format!("invalid TOML: {message}"), None),
            M::DuplicateKey { key } => (
                format!("`{key}` is defined twice"),
                Some("remove one of them".into()),
            ),
            M::UnknownKey {
                key,
                table,
                suggestion,
            } => (
                format!("unknown key `{key}` in {table}"),
                did_you_mean(*suggestion),
            ),
            M::MissingKey { key, table } => {
                let article = if key.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                (format!("{table} needs {article} `{key}` key"), None)
            }
            M::MixedUnits {
                left,
                left_unit,
                right,
                right_unit,
            } => (
                format!("this claim sets `{left}` ({left_unit}) against `{right}` ({right_unit})"),
                Some(
                    "convert one side to the other's unit (1 MiB = 1024 KiB = 1,048,576 B; \
                     1 s = 1000 ms = 1,000,000 us), or give the parameter the unit the metric has"
                        .into(),
                ),
            ),
            M::UnclosedString {
                delimiter,
                swallowed,
                line,
            } => (
                format!(
                    "this {delimiter} string is never closed: it runs on over `{swallowed}` on line {line}"
                ),
                Some(format!("close it with {delimiter} where its text ends")),
            ),
            M::WrongType {
                key,
                expected,
                found,
            } => (format!("`{key}` must be {expected}, found {found}"), None),
            M::NotArrayOfTables { key } => (
                format!("`{key}` must be an array of tables"),
                Some(format!("write each one under its own `[[{key}]]` header")),
            ),
            M::NotFinite { key } => (format!("`{key}` must be a finite number"), None),
            M::BadId { what, id } => (
                format!("{what} id `{id}` may only hold lower-case letters, digits and `-`"),
                Some(format!(
                    "try `{}`",
                    id.to_ascii_lowercase()
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                        .collect::<String>()
                )),
            ),
            M::UnknownBackend { name, suggestion } => (
                format!("unknown backend `{name}` (opencl | cuda)"),
                did_you_mean(*suggestion),
            ),
            M::MultiLine { key } => (
                format!("`{key}` must fit on one line"),
                Some("longer text belongs in [teaching]".into()),
            ),
            M::Empty { key } => (format!("`{key}` must not be empty"), None),
            M::BadName { what, name, rule } => (format!("{what} name `{name}` {rule}"), None),
            M::Duplicate {
                what,
                name,
                first_line,
            } => (
                format!("{what} `{name}` is already defined on line {first_line}"),
                None,
            ),
            M::ParamIsMetric { name } => (
                format!("parameter `{name}` has the name of a metric"),
                Some("claims could not tell them apart; rename the parameter".into()),
            ),
            M::DefaultOutOfRange {
                name,
                default,
                min,
                max,
            } => (
                format!("default {default} of `{name}` is outside its range {min}..={max}"),
                None,
            ),
            M::MinAboveMax { name, min, max } => {
                (format!("`{name}` has min {min} above max {max}"), None)
            }
            M::NoVariants => ("a lab needs at least one `[[variants]]`".into(), None),
            M::EmptyScript { variant } => (
                format!("variant `{variant}` has an empty script"),
                Some("write one API call a line, e.g. `ctx = clCreateContext()`".into()),
            ),
            M::ScriptSyntax { expected, found } => {
                (format!("expected {expected}, found {found}"), None)
            }
            M::BadTag => (
                "expected a tag after `name:`".into(),
                Some("a tag is a word of letters, digits and `_`: `# name: release`".into()),
            ),
            M::UnknownMark { word, suggestion } => (
                format!("unknown mark `{word}` in a comment"),
                did_you_mean(Some(suggestion)),
            ),
            M::TagOnClose => (
                "a tag on `}` tags nothing".into(),
                Some("put `# name: …` on the `repeat` line to tag the block".into()),
            ),
            M::UnclosedRepeat => (
                "this `repeat {` is never closed".into(),
                Some("add a line with `}` after its body".into()),
            ),
            M::StrayClose => ("`}` without a `repeat {` to close".into(), None),
            M::RepeatTooDeep { limit } => (
                format!("`repeat` blocks nest at most {limit} deep"),
                Some(
                    "checking a lab walks every nesting level twice, so each level doubles \
                     the work: flatten the loops, or multiply their counts into one"
                        .into(),
                ),
            ),
            M::RepeatTooMany { count, limit } => (
                format!(
                    "this `repeat`'s body can run {count} times (counting the loops around \
                     it); at most {limit} are allowed"
                ),
                Some(
                    "gpulab keeps every iteration's calls for the report: lower the count \
                     (or the parameter's `max`)"
                        .into(),
                ),
            ),
            M::SleepTooLong { ms, limit_ms } => (
                format!(
                    "this `sleep` can last {:.0} s; at most {} s are allowed",
                    ms / 1e3,
                    limit_ms / 1000
                ),
                Some("lower the duration (or the parameter's `max`)".into()),
            ),
            M::ParamTooLarge { name, value, limit } => (
                format!("parameter `{name}`: {value:e} is not a value a lab can use"),
                Some(format!("keep `default`, `min` and `max` within ±{limit:e}")),
            ),
            M::ExprTooLong { limit } => (
                format!("a claim may use at most {limit} operators and parentheses"),
                Some("split it into several claims".into()),
            ),
            M::BadRepeatCount { count } => {
                (format!("repeat count {count} is not a whole number"), None)
            }
            M::UnknownCall { name, suggestion } => {
                (format!("unknown call `{name}`"), did_you_mean(*suggestion))
            }
            M::NotInCatalog { name, api, nearest } => (
                format!("`{name}` is a real {api} call that gpulab's catalog does not have (yet)"),
                Some(if nearest.is_empty() {
                    "`gpulab list` shows the labs, docs/lab-format.md every call a lab may make".into()
                } else {
                    format!(
                        "the nearest {api} calls it has: {}",
                        nearest.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                    )
                }),
            ),
            M::OtherBackend {
                call,
                call_backend,
                lab_backend,
            } => (
                format!(
                    "`{call}` is {} call, but this lab's backend is `{}`",
                    backend_name(*call_backend),
                    lab_backend.as_str()
                ),
                None,
            ),
            M::ArgCount {
                call,
                expected,
                at_least,
                optional,
                found,
                signature,
                kernel,
            } => {
                let most = expected + optional;
                let plural = if most == 1 && kernel.is_none() || *expected == 1 && kernel.is_some() {
                    ""
                } else {
                    "s"
                };
                let least = if *at_least { "at least " } else { "" };
                let count = match (optional, kernel) {
                    (0, _) => expected.to_string(),
                    (_, Some(_)) => expected.to_string(),
                    (1, None) => format!("{expected} or {most}"),
                    _ => format!("{expected} to {most}"),
                };
                let wait = match (optional, kernel) {
                    (1.., Some(_)) => " (and an optional wait list)",
                    _ => "",
                };
                let with = match kernel {
                    Some((k, takes)) => format!(" with kernel `{k}` (it takes {takes})"),
                    None => String::new(),
                };
                (
                    format!("`{call}`{with} takes {least}{count} argument{plural}{wait}, found {found}"),
                    Some(format!("write `{signature}`")),
                )
            }
            M::ArgType {
                call,
                position,
                expected,
                found,
            } => (
                format!("argument {position} of `{call}` must be {expected}, found {found}"),
                None,
            ),
            M::NeedsUnit { size, example } => (
                if *size {
                    "a size needs a unit (B, KiB, MiB, GiB)".into()
                } else {
                    "a duration needs a unit (us, ms, s)".into()
                },
                Some(format!("write `{example}`")),
            ),
            M::WrongUnit { unit, expected } => (
                format!("`{unit}` is the wrong unit here: expected {expected}"),
                None,
            ),
            M::UnknownUnit { unit, suggestion } => (
                format!("unknown unit `{unit}` (B, KiB, MiB, GiB, us, ms, s)"),
                did_you_mean(*suggestion),
            ),
            M::UnknownParam { name, suggestion } => (
                format!("unknown parameter `{{{name}}}`"),
                did_you_mean(suggestion.as_deref()),
            ),
            M::ParamUnit { name, unit } => (
                format!("parameter `{name}` is in {unit}"),
                Some(format!("write `{{{name}}} {unit}`")),
            ),
            M::UnknownKernel { name, suggestion } => (
                format!("unknown kernel `{name}`"),
                did_you_mean(*suggestion).or_else(|| {
                    let names: Vec<&str> = crate::api::KERNELS.iter().map(|k| k.name).collect();
                    Some(format!("the kernels are: {}", names.join(", ")))
                }),
            ),
            M::KernelNeedsDeviceHeap { name } => (
                format!("kernel `{name}` calls `malloc` in device code, which OpenCL C does not have"),
                Some(format!(
                    "use it in a CUDA lab: `cudaLaunchKernel(s, {name}, buf)`, after `cudaDeviceSetLimit(cudaLimitMallocHeapSize, 64 MiB)` if its heap should be larger"
                )),
            ),
            M::UndefinedHandle { name, suggestion } => (
                format!("`{name}` is not defined"),
                did_you_mean(suggestion.as_deref()),
            ),
            M::WrongKind {
                name,
                is,
                call,
                expected,
                goes_back,
            } => (
                format!(
                    "`{name}` is a {} handle, but `{call}` expects {expected} here",
                    is.as_str()
                ),
                // Host memory has its own free, by how it was made.
                goes_back.map(|(made, free)| {
                    format!("memory from `{made}` goes back with `{free}({name})`")
                }),
            ),
            M::UseAfterRelease {
                name,
                line,
                earlier_iteration,
            } => (
                format!(
                    "`{name}` is used after it was released on line {line}{}",
                    earlier(*earlier_iteration)
                ),
                Some("if that is the lesson, end the line with `# expect-error`".into()),
            ),
            M::UseAfterForget { name, line } => (
                format!("`{name}` was forgotten on line {line} and has no object any more"),
                None,
            ),
            M::DoubleRelease {
                name,
                line,
                earlier_iteration,
            } => (
                format!(
                    "`{name}` is released again; it was released on line {line}{}",
                    earlier(*earlier_iteration)
                ),
                Some(
                    "if the double release is the lesson, end the line with `# expect-error`"
                        .into(),
                ),
            ),
            M::NotMapped { name } => (
                format!("`{name}` is not mapped: no `clEnqueueMapBuffer` of it is open here"),
                Some("map it first (`clEnqueueMapBuffer(q, buf, CL_TRUE)`), or end the line with `# expect-error` if the mistake is the lesson".into()),
            ),
            M::ReleasedWhileMapped { name, line } => (
                format!("`{name}` is released while the mapping of line {line} is still open; its unmap needs the buffer"),
                Some(format!("unmap it first: `clEnqueueUnmapMemObject(q, {name})`, or end the line with `# expect-error`")),
            ),
            M::KernelArgIndex {
                kernel,
                index,
                buffers,
            } => (
                format!("kernel `{kernel}` has {buffers} buffer argument{}; there is no argument {index} to set", if *buffers == 1 { "" } else { "s" }),
                Some(match buffers {
                    1 => "its one buffer argument is 0".to_owned(),
                    n => format!("its buffer arguments are 0 to {}", n - 1),
                }),
            ),
            M::NotUserEvent { name } => (
                format!("`{name}` is not a user event: only `clCreateUserEvent` makes one the host can set"),
                Some(format!("make it with `{name} = clCreateUserEvent(ctx)`")),
            ),
            M::UserEventSetTwice { name, line } => (
                format!("user event `{name}` was already set on line {line}; a user event is set once (the driver answers CL_INVALID_OPERATION)"),
                Some("end the line with `# expect-error` if the mistake is the lesson".into()),
            ),
            M::WaitsForever {
                call,
                user_event,
            } => (
                format!("`{call}` would wait forever: the work it waits for waits for user event `{user_event}`, which the script has not set"),
                Some(format!("set it first: `clSetUserEventStatus({user_event}, CL_COMPLETE)`")),
            ),
            M::KernelNotInProgram {
                kernel,
                program,
                source,
            } => (
                format!("program `{program}` is built from `labs/kernels/{source}.cl`, which defines no kernel `{kernel}`"),
                Some(format!("write `clCreateKernel({program}, {source})`, or make a program from `{kernel}`: `clCreateProgramWithSource(ctx, {kernel})`")),
            ),
            M::RangeNotMapped { name, unmapped_at } => (
                match unmapped_at {
                    Some(at) => format!("`{name}` has no allocation mapped into it: line {at} unmapped it"),
                    None => format!("`{name}` has no allocation mapped into it here"),
                },
                Some(format!("map one first: `cuMemMap({name}, mem)`, or end the line with `# expect-error` if the mistake is the lesson")),
            ),
            M::AlreadyMapped { name, line } => (
                format!("`{name}` already has the allocation mapped at line {line} in it"),
                Some(format!("unmap it first: `cuMemUnmap({name})`, or reserve another range")),
            ),
            M::RangeFreedWhileMapped { name, line } => (
                format!("`{name}` is freed while the allocation mapped at line {line} is still in it; cuMemAddressFree needs the range unmapped"),
                Some(format!("unmap it first: `cuMemUnmap({name})`, or end the line with `# expect-error`")),
            ),
            M::MetricReadsNothing { metric, tag, line_is, reads } => (
                format!("`{metric}({tag})` reads what a call answered, but `{tag}` is a `{line_is}` line, which answers nothing it reads"),
                Some(format!("tag a line of `{reads}`")),
            ),
            M::HostTouchOfDeviceMemory { name, made_by } => (
                format!("`{name}` is device memory from `{made_by}`: the host cannot write it with `memset` (a C program would crash)"),
                Some("only managed memory (`cudaMallocManaged`) is the host's to touch; from the device, write `cudaMemsetAsync`".into()),
            ),
            M::PageableHasNoDevicePointer { name } => (
                format!("`{name}` is pageable memory from `malloc`, which the driver does not know: only pinned memory has a device pointer"),
                Some("allocate it with `cudaHostAlloc(…, cudaHostAllocMapped)`, or end the line with `# expect-error` to see the driver's answer".into()),
            ),
            M::FreeOfDevicePointer { name, host, release } => (
                format!("`{name}` is the device's address of `{host}`'s host memory: it has no allocation of its own to free"),
                Some(format!("free the host memory instead: `{release}({host})`; `{name}` goes with it")),
            ),
            M::WrongHostRelease {
                name,
                made_by,
                release,
            } => (
                format!("`{name}` was made by {made_by}: {release} gives it back, not this call"),
                Some(format!("write `{release}({name})`, or end the line with `# expect-error` if the mistake is the lesson")),
            ),
            M::SvmIsNotAMemObject {
                name,
                call,
                instead,
            } => (
                format!("`{name}` is shared virtual memory (clSVMAlloc): a pointer, not a cl_mem, so {call} cannot take it"),
                Some(format!("{instead}; or end the line with `# expect-error` if the mistake is the lesson")),
            ),
            M::NotSvm {
                name,
                call,
                made_by,
            } => (
                format!("`{name}` was made by {made_by}: a cl_mem, not shared virtual memory, so {call} cannot take it"),
                Some(match *call {
                    "clSetKernelArgSVMPointer" => format!("set it with `clSetKernelArg(k, i, {name})`"),
                    _ => format!("release it with `clReleaseMemObject({name})`, or make it with `clSVMAlloc(ctx, 64 MiB)`"),
                }),
            ),
            M::GraphAllocNotLaunched { name, node_line } => (
                format!("`{name}` is the allocation of the alloc node at line {node_line}: it has memory only once its graph has been launched"),
                Some(format!("launch an exec of the graph first (`cudaGraphLaunch(e, s)`), or use it in a node of the graph: `cudaGraphAddMemsetNode(g, {name})`")),
            ),
            M::GraphAllocFreedInGraph { name, line } => (
                format!("`{name}` is freed by its graph's free node at line {line}: only that graph's nodes between its alloc and free nodes may name it"),
                Some(format!("drop the free node to use `{name}` after the launch (then free it with `cudaFreeAsync({name}, s)`), or end the line with `# expect-error`")),
            ),
            M::FreeNodeNotOwn { name, graph } => (
                format!("`{name}` is not an allocation of graph `{graph}`; gpulab's free node frees what an alloc node of the same graph made"),
                Some(format!("free it with `cudaFreeAsync({name}, s)`, or make it with `cudaGraphAddMemAllocNode({graph}, …)`")),
            ),
            M::NodeAfterInstantiate { graph, exec, line } => (
                format!("`{graph}` was instantiated as `{exec}` at line {line}: a node added now is not in that exec, which runs the graph as it was then"),
                Some(format!("add every node before `cudaGraphInstantiate`, or destroy the exec first (`cudaGraphExecDestroy({exec})`) and instantiate again")),
            ),
            M::InstantiatedTwice { graph, exec, line } => (
                format!("`{graph}` has memory nodes and is already instantiated as `{exec}` (line {line}): CUDA allows one exec of such a graph at a time"),
                Some(format!("destroy it first: `cudaGraphExecDestroy({exec})`, or end the line with `# expect-error`")),
            ),
            M::RelaunchWithLiveAlloc { exec, name, line } => (
                format!("`{exec}` allocates `{name}` again, and the launch at line {line} left it allocated: the driver refuses this launch (CUDA_ERROR_INVALID_VALUE)"),
                Some(format!("free it first: `cudaFreeAsync({name}, s)`, or add a free node for it before instantiating; end the line with `# expect-error` if the refusal is the lesson")),
            ),
            M::GraphNamesDead {
                exec,
                name,
                node_line,
                line,
            } => (
                format!("`{exec}` runs the node of line {node_line}, which names `{name}`, released at line {line}"),
                Some(format!("launch before releasing `{name}`, or end the line with `# expect-error`")),
            ),
            M::SubBufferOfSubBuffer { name, parent } => (
                format!("`{name}` is a sub-buffer (of `{parent}`); OpenCL makes sub-buffers of buffers only"),
                Some(format!("make the region a sub-buffer of `{parent}`")),
            ),
            M::BindsNothing { call } => (
                format!("`{call}` returns no object to name"),
                Some(format!("drop the `name =` before `{call}`")),
            ),
            M::ForgetUndefined { name, suggestion } => (
                format!("`forget {name}`: `{name}` is not defined"),
                did_you_mean(suggestion.as_deref()),
            ),
            M::DuplicateTag { tag, first_line } => (
                format!("tag `{tag}` is already used on line {first_line} of this variant"),
                None,
            ),
            M::ExprSyntax { expected, found } => (
                format!("in claim expression: expected {expected}, found {found}"),
                None,
            ),
            M::ExprType { message } => (format!("in claim expression: {message}"), None),
            M::UnknownMetric { name, suggestion } => (
                format!("unknown metric `{name}`"),
                did_you_mean(*suggestion),
            ),
            M::MetricNeedsArg { name, arg } => (
                format!("metric `{name}` needs {arg}"),
                Some(format!("write `{name}(…)`")),
            ),
            M::MetricTakesNoArg { name } => (
                format!("metric `{name}` takes no argument"),
                Some(format!("write `{name}` alone")),
            ),
            M::TagNotInVariant {
                tag,
                variant,
                suggestion,
            } => (
                format!("tag `{tag}` is not defined in variant `{variant}`"),
                did_you_mean(suggestion.as_deref()).or(Some(
                    "tag a line with `# name: …`, or limit the claim with `variants = [...]`"
                        .into(),
                )),
            ),
            M::UnknownKind { kind } => (
                format!("unknown object kind `{kind}`"),
                Some(format!("kinds are: {}", kinds_list())),
            ),
            M::BareVariable { name, suggestion } => (
                format!("`{name}` is neither a parameter nor a metric without argument"),
                did_you_mean(suggestion.as_deref()),
            ),
            M::UnknownVariant { name, suggestion } => (
                format!("unknown variant `{name}`"),
                did_you_mean(suggestion.as_deref()),
            ),
            M::ExpectOutsideClaim { variant, applies } => (
                format!("the claim does not apply to variant `{variant}`, so it expects nothing there"),
                Some(format!("the claim applies to {applies}")),
            ),
            M::BadExpect { found } => (
                format!("`expect` is `{found}`: a claim is expected to be `holds`, `does not hold` or `either`"),
                Some("write what the lesson expects the verdict to be, in the verdict's own words (`either` where implementations differ)".into()),
            ),
            M::ComparesWithItself { variant, others } => (
                format!(
                    "the claim compares with variant `{variant}` but also applies to `{variant}`, \
                     where it would compare the variant with itself"
                ),
                Some(if others.is_empty() {
                    "compare with another variant".into()
                } else {
                    format!("limit the claim with `variants = [{others}]`")
                }),
            ),
            M::UnknownLab { id, suggestion } => (
                format!("unknown lab `{id}`"),
                did_you_mean(suggestion.as_deref())
                    .or(Some("`gpulab list` shows the labs a lesson can use".into())),
            ),
            M::BadMinutes { found } => (
                format!("`minutes` is {found}: a step takes a whole number of minutes, 1 to 120"),
                None,
            ),
            M::NoSteps => (
                "a lesson needs at least one `[[steps]]`".into(),
                Some("each step names a `lab`, its `variant`, `minutes`, a `question` and a `hint`".into()),
            ),
            M::ParamInVariant { name } => (
                format!("parameter `{name}` has the same value in every variant"),
                Some(format!("write `{name}` alone")),
            ),
        }
    }
}
