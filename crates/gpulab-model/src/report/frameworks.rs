//! What the frameworks inside a watched program said of their own memory:
//! each allocator's figures at exit and at its highest, and the first
//! allocation one refused ([`crate::run::frameworks`]).

use serde::Serialize;

use crate::run::Run;
use crate::run::frameworks::{Allocator, Figures};
use crate::text::fit;
use crate::trace::Frame;
use crate::units::mib;

use super::format::FRAME_WIDTH;
pub use super::held_then::HeldThenReport;
use super::tensors::TensorsByLine;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AllocatorReport {
    /// `pytorch`, `cupy` or `jax`.
    pub framework: String,
    pub pid: u32,
    /// The framework's own device index.
    pub device: u32,
    /// Its last figures.
    pub at_exit: FiguresReport,
    /// Its figures when it held the most.
    pub highest: FiguresReport,
    /// Its live tensors by line at the highest of the looks the hook took as
    /// its readings rose (`--torch-history`; PyTorch only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensors_at_highest: Option<TensorsByLine>,
}

/// An allocator's figures at one moment, in bytes.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FiguresReport {
    /// When the hook read them, from the program's start.
    pub t_ms: f64,
    /// What the program's tensors or arrays used.
    pub allocated_bytes: u64,
    /// What the allocator held from the driver, used or cached.
    pub reserved_bytes: u64,
    /// `reserved` less `allocated`: kept for reuse, used by nothing.
    pub cached_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
}

impl FiguresReport {
    fn of(f: &Figures, start_ns: u64) -> FiguresReport {
        FiguresReport {
            t_ms: f.t_ns.saturating_sub(start_ns) as f64 / 1e6,
            allocated_bytes: f.allocated,
            reserved_bytes: f.reserved,
            cached_bytes: f.cached(),
            limit_bytes: f.limit,
        }
    }
}

/// The first allocation a framework refused.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FrameworkRefusal {
    pub framework: String,
    pub pid: u32,
    pub device: u32,
    /// When, from the program's start.
    pub t_ms: f64,
    /// The bytes the program asked the framework for.
    pub asked_bytes: u64,
    /// What the device had free, and the most the framework may use, as the
    /// framework read them.
    pub free_bytes: u64,
    pub limit_bytes: u64,
    /// The allocator's latest figures before it refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<FiguresReport>,
    /// The refused thread's stack, innermost first: the line of the
    /// program's own code that asked first (a Python frame), then the native
    /// caller; empty when the agent took none (`--backtrace=off`, or a
    /// recording from before gpulab took it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backtrace: Vec<Frame>,
    /// What the refused process held of device memory then (objects it had
    /// made and not released: its allocators' driver allocations among
    /// them), grouped by where each was made, most bytes first.
    pub held_then: Vec<HeldThenReport>,
    /// The framework's live tensors by line as it refused
    /// (`--torch-history`; PyTorch only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensors_then: Option<TensorsByLine>,
    /// What the text says where `tensors_then` is absent: how to have them,
    /// or that the look was asked for and has not arrived.
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub tensors_note: Option<String>,
}

pub fn allocators(run: &Run) -> Vec<AllocatorReport> {
    let start = start(run);
    let highest: std::collections::BTreeMap<&Allocator, &Figures> =
        run.frameworks().highest().collect();
    let alive: std::collections::BTreeMap<_, _> = run.frameworks().alive_at_highest().collect();
    run.frameworks()
        .latest()
        .map(|(a, f)| AllocatorReport {
            framework: a.framework.as_str().into(),
            pid: a.pid,
            device: a.device,
            at_exit: FiguresReport::of(f, start),
            highest: FiguresReport::of(highest.get(a).copied().unwrap_or(f), start),
            tensors_at_highest: alive.get(a).map(|t| TensorsByLine::at_highest(t, start)),
        })
        .collect()
}

pub fn refusal(run: &Run) -> Option<FrameworkRefusal> {
    let r = run.frameworks().first_refusal()?;
    let start = start(run);
    Some(FrameworkRefusal {
        framework: r.allocator.framework.as_str().into(),
        pid: r.allocator.pid,
        device: r.allocator.device,
        t_ms: r.t_ns.saturating_sub(start) as f64 / 1e6,
        asked_bytes: r.asked,
        free_bytes: r.free,
        limit_bytes: r.limit,
        before: r.before.as_ref().map(|f| FiguresReport::of(f, start)),
        backtrace: super::held_then::frames(run, r.stack),
        held_then: HeldThenReport::of(run, run.frameworks().held_at_first_refusal()),
        tensors_then: run
            .frameworks()
            .alive_at_refusal(&r.allocator)
            .map(|t| TensorsByLine::at_refusal(t, start)),
        tensors_note: tensors_note(run, r.allocator.framework),
    })
}

/// Where a refusal has no look at its tensors: for PyTorch, how to have one,
/// or, under `--torch-history`, that it has not arrived (PyTorch's first
/// snapshot imports `torch._inductor`, which takes seconds) or never did.
fn tensors_note(run: &Run, framework: gpulab_events::Framework) -> Option<String> {
    if framework != gpulab_events::Framework::Pytorch {
        return None;
    }
    let asked = run
        .meta()
        .and_then(|m| m.watch.as_ref())
        .is_some_and(|w| w.torch_history);
    Some(
        match (asked, run.end().is_some()) {
            (false, _) => {
                "  its tensors by the line that allocated them: run with --torch-history \
                 (PyTorch's memory history, which costs each allocation its Python stack)"
            }
            (true, false) => {
                "  its tensors by the line that allocated them: PyTorch's snapshot at the \
                 refusal has not arrived yet (its first imports torch._inductor: seconds)"
            }
            (true, true) => {
                "  its tensors by the line that allocated them: no look at the refusal \
                 arrived (see the warnings)"
            }
        }
        .into(),
    )
}

fn start(run: &Run) -> u64 {
    run.meta().map_or(0, |m| m.t_ns)
}

fn label(framework: &str) -> &str {
    gpulab_events::Framework::parse(framework).map_or(framework, |f| f.label())
}

impl AllocatorReport {
    /// Its figures, then its live tensors by line at its highest look.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![self.line()];
        if let Some(t) = &self.tensors_at_highest {
            let looks = t.looks.unwrap_or(1);
            out.extend(t.lines(&format!(
                "its tensors alive at the highest of {looks} look{} as its readings rose",
                if looks == 1 { "" } else { "s" }
            )));
        }
        out
    }

    pub fn line(&self) -> String {
        let (e, h) = (&self.at_exit, &self.highest);
        format!(
            "{} (pid {}, device {}) said: {:.1} MiB in use by the program, {:.1} MiB reserved \
             from the driver ({:.1} MiB cached) at {:.1} ms; at most {:.1} MiB reserved \
             ({:.1} in use) at {:.1} ms{}",
            label(&self.framework),
            self.pid,
            self.device,
            mib(e.allocated_bytes),
            mib(e.reserved_bytes),
            mib(e.cached_bytes),
            e.t_ms,
            mib(h.reserved_bytes),
            mib(h.allocated_bytes),
            h.t_ms,
            e.limit_bytes
                .map(|l| format!("; its limit {:.1} MiB", mib(l)))
                .unwrap_or_default()
        )
    }
}

impl FrameworkRefusal {
    /// The report's lines: the refusal, then up to
    /// [`super::held_then::LISTED`] places of what the process held.
    pub fn lines(&self) -> Vec<String> {
        let mut out = self.lead_lines();
        out.extend(self.held_lines(super::held_then::LISTED));
        out.extend(self.tensor_lines());
        out
    }

    /// Its live tensors by line as it refused; for PyTorch without them, how
    /// to have them.
    pub fn tensor_lines(&self) -> Vec<String> {
        match &self.tensors_then {
            Some(t) => t.lines(&format!(
                "{}'s tensors alive as it refused",
                label(&self.framework)
            )),
            None => self.tensors_note.iter().cloned().collect(),
        }
    }

    /// What the process held then, `listed` places at most (the dashboard's
    /// findings panel says them below the ranks' lines).
    pub fn held_lines(&self, listed: usize) -> Vec<String> {
        HeldThenReport::lines(&self.held_then, listed)
    }

    /// The refusal: what was asked and by which line, and the allocator's
    /// figures before it.
    pub fn lead_lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "{} refused {:.1} MiB (pid {}, device {}) at {:.1} ms: the device had {:.1} MiB \
             free of {:.1} MiB it may use",
            label(&self.framework),
            mib(self.asked_bytes),
            self.pid,
            self.device,
            self.t_ms,
            mib(self.free_bytes),
            mib(self.limit_bytes)
        )];
        if let Some(f) = self.backtrace.first() {
            out.push(format!("  asked at {}", fit(&f.describe(), FRAME_WIDTH)));
        }
        if let Some(b) = &self.before {
            out.push(format!(
                "  its allocator before (read at {:.1} ms): {:.1} MiB in use by the program, \
                 {:.1} MiB reserved, {:.1} MiB of it cached",
                b.t_ms,
                mib(b.allocated_bytes),
                mib(b.reserved_bytes),
                mib(b.cached_bytes)
            ));
        }
        out
    }
}
