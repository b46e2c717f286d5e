//! "Who holds it": a watched program's own memory at its highest reading and
//! at its last, split into named shares ([`crate::run::holders`]), with the
//! reserves the run measured. What no share explains is a row of its own.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::run::Run;
use crate::run::holders::{Alive, Holders};
use crate::run::owners::Owner;
use crate::units::{MIB_F64 as MIB, mib};

use super::format::{Table, short_id};

/// Reserves a text or Markdown report lists one by one; the JSON has them all.
const RESERVES_LISTED: usize = 10;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HoldersReport {
    /// At the highest reading of the program's memory (the latest at that value).
    pub at_peak: Option<Shares>,
    /// At the last reading before the program exited (or the latest, while it runs).
    pub at_exit: Option<Shares>,
    /// Every measured reserve: what a context, module, queue or stream holds,
    /// from the program's memory across the call that made it.
    pub reserves: Vec<ReserveReport>,
}

/// One reading, share by share, in bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Shares {
    /// When, from the program's start.
    pub t_ms: f64,
    /// The program's own memory then (the report's `memory_source`).
    pub total_bytes: u64,
    /// A watched program's resident host memory before its first call of
    /// the API (its latest reading before the agent attached), where its
    /// memory is its RSS (a CPU device). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub before_api_bytes: u64,
    /// What its resident memory grew by from then to its latest reading
    /// before its first object: the API's runtime its first calls loaded
    /// (PoCL and its LLVM), with whatever the program took meanwhile.
    /// Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub runtime_loaded_bytes: u64,
    /// Where its memory is its RSS: what that grew by after its first
    /// object between readings while none of its API's calls ran and no
    /// work it queued was outstanding (the program's own, measured while
    /// one thread made its calls). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_between_calls_bytes: u64,
    /// Objects it holds whose size their making call said, less what its
    /// frameworks' allocators keep cached in them.
    pub objects_held_bytes: u64,
    /// `objects_held_bytes` by who called the driver for them (`program`,
    /// `pytorch`, `nccl`, `cublas`, `cudnn`, `cuda_library`, `xla`, `cupy`,
    /// `unknown`), from each making call's calling frame.
    pub objects_held_by: BTreeMap<String, u64>,
    /// What its frameworks' allocators hold from the driver and its tensors
    /// or arrays do not use, by their own figures.
    pub cached_by_allocators_bytes: u64,
    /// Such objects it released that the driver had not deleted.
    pub released_not_deleted_bytes: u64,
    /// Measured reserves of the contexts, modules, queues and streams it held.
    pub reserves_held_bytes: u64,
    /// Measured reserves of ones it released that the driver had not deleted.
    pub reserves_released_bytes: u64,
    /// What the device's stream-ordered pool kept after the program freed it
    /// (`cudaFreeAsync`): the pool's reserved less its used.
    pub kept_by_pool_bytes: u64,
    /// What the device reserved for the program's graphs' memory nodes, in
    /// use or kept after their frees until a trim.
    pub held_by_graphs_bytes: u64,
    /// What the device held for its managed memory, once it made some: its
    /// pages there and the driver's own memory for them. A share of
    /// `total_bytes` (NVML counts them in the device's figure and in no
    /// process's: the reading is the process's figure and these). Absent
    /// when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub managed_on_device_bytes: u64,
    /// It made managed memory and what the device held for it could not be
    /// told at this reading (other processes on the device, no reading of
    /// the rest of the device before): in no share, nor in `total_bytes`.
    /// Absent when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub managed_on_device_untold: bool,
    /// The reading less all of the above (negative when they add up to more).
    pub unexplained_bytes: i64,
    /// Managed memory the program held (`cudaMallocManaged`), on the device
    /// or not. Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub managed_bytes: u64,
    /// Contexts, modules, queues or streams alive whose reserve was not measured.
    pub unmeasured: usize,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The bytes of the objects held, by their owner's JSON name.
pub(crate) fn held_by_names(h: &Holders) -> BTreeMap<String, u64> {
    h.held_by
        .iter()
        .map(|(o, b)| (o.as_str().to_string(), *b))
        .collect()
}

impl Shares {
    pub(crate) fn of(h: &Holders, start_ns: u64) -> Shares {
        Shares {
            t_ms: h.at_ns.saturating_sub(start_ns) as f64 / 1e6,
            total_bytes: h.total,
            before_api_bytes: h.before_api,
            runtime_loaded_bytes: h.runtime,
            own_between_calls_bytes: h.own_between_calls,
            objects_held_bytes: h.held,
            objects_held_by: held_by_names(h),
            cached_by_allocators_bytes: h.cached,
            released_not_deleted_bytes: h.released,
            reserves_held_bytes: h.reserves_held,
            reserves_released_bytes: h.reserves_released,
            kept_by_pool_bytes: h.pool_kept,
            held_by_graphs_bytes: h.graphs,
            managed_on_device_bytes: h.managed_on_device.unwrap_or(0),
            managed_on_device_untold: h.managed_on_device.is_none(),
            unexplained_bytes: h.unexplained(),
            managed_bytes: h.managed,
            unmeasured: h.unmeasured,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReserveReport {
    /// The objects it belongs to (`context #3`); several when they were made
    /// with no reading between them.
    pub objects: Vec<String>,
    pub bytes: u64,
    /// `held`, `released, not deleted` or `deleted`.
    pub state: String,
    /// The readings it was measured between, from the program's start (the
    /// call's span, when the agent measured it).
    pub from_ms: f64,
    pub to_ms: f64,
    /// `readings` (the sampler's, on each side of the making call), `agent`
    /// (the device's free memory, read by the agent right before and after
    /// the call), or `agent_at_launch` (the same around a function's first
    /// launch: its code, loaded into the context then; on a CPU device the
    /// process's resident memory across the wait for a kernel's first run,
    /// which compiled it, less the buffers it was the first to use).
    pub measured_by: String,
    /// Its objects went and the memory did not: the first reading after
    /// them fell by less than half of it (NVIDIA's OpenCL keeps a deleted
    /// context's memory until the process exits). From that reading, in ms
    /// from the program's start, counted as "reserves released, kept".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_from_ms: Option<f64>,
    /// The reading at which it fell after all; absent while it has not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_until_ms: Option<f64>,
}

// Each row: its name, its figure, and whether it is shown only
// where it held something at the peak or at exit (what the program
// held before its API, the runtime, the pool, the graphs, managed
// pages: most programs have none).
type Row = (&'static str, fn(&Shares) -> f64, bool);
const ROWS: [Row; 13] = [
    ("the program's memory", |s| s.total_bytes as f64, false),
    ("before its API's use", |s| s.before_api_bytes as f64, true),
    ("its API's runtime", |s| s.runtime_loaded_bytes as f64, true),
    (
        "its own, between calls",
        |s| s.own_between_calls_bytes as f64,
        true,
    ),
    ("objects it holds", |s| s.objects_held_bytes as f64, false),
    (
        "cached by allocators",
        |s| s.cached_by_allocators_bytes as f64,
        false,
    ),
    (
        "released, not deleted",
        |s| s.released_not_deleted_bytes as f64,
        false,
    ),
    ("reserves it holds", |s| s.reserves_held_bytes as f64, false),
    (
        "reserves released, kept",
        |s| s.reserves_released_bytes as f64,
        false,
    ),
    ("kept by CUDA's pool", |s| s.kept_by_pool_bytes as f64, true),
    (
        "held by CUDA graphs",
        |s| s.held_by_graphs_bytes as f64,
        true,
    ),
    (
        "managed memory on device",
        |s| s.managed_on_device_bytes as f64,
        true,
    ),
    ("unexplained", |s| s.unexplained_bytes as f64, false),
];

impl HoldersReport {
    /// None for a run with no reading of the program's own memory.
    pub fn of(run: &Run) -> Option<HoldersReport> {
        let at_exit = run.holders()?;
        let start = run.meta().map_or(0, |m| m.t_ns);
        let ms = |t: u64| t.saturating_sub(start) as f64 / 1e6;
        // Said only of a reserve whose objects all went: while one is held,
        // the memory is its.
        let kept = |r: &crate::run::reserves::Reserve| {
            r.kept.filter(|_| run.most_alive(&r.ids) == Alive::Gone)
        };
        let reserves = run
            .reserves()
            .measured()
            .map(|r| ReserveReport {
                objects: r
                    .ids
                    .iter()
                    .map(|id| {
                        let kind = run.ledger().get(id).map_or("object", |o| o.kind.as_str());
                        format!("{kind} {}", short_id(*id))
                    })
                    .collect(),
                bytes: r.bytes,
                state: state(run, &r.ids).into(),
                from_ms: ms(r.from_ns),
                to_ms: ms(r.to_ns),
                measured_by: match (r.by_agent, r.at_launch) {
                    (true, true) => "agent_at_launch",
                    (true, false) => "agent",
                    (false, _) => "readings",
                }
                .into(),
                kept_from_ms: kept(&r).map(|k| ms(k.from_ns)),
                kept_until_ms: kept(&r).and_then(|k| k.until_ns).map(ms),
            })
            .collect();
        Some(HoldersReport {
            at_peak: run.holders_at_peak().map(|h| Shares::of(h, start)),
            at_exit: Some(Shares::of(&at_exit, start)),
            reserves,
        })
    }

    /// The shares at the peak and at exit side by side.
    pub(crate) fn table(&self) -> Table {
        let columns = [&self.at_peak, &self.at_exit];
        let rows = ROWS
            .iter()
            .filter(|(_, figure, optional)| {
                !optional
                    || columns
                        .iter()
                        .any(|s| s.as_ref().is_some_and(|s| figure(s) != 0.0))
            })
            .map(|(name, figure, _)| {
                let cell = |s: &Option<Shares>| {
                    s.as_ref()
                        .map_or("-".to_string(), |s| format!("{:.2}", figure(s) / MIB))
                };
                vec![name.to_string(), cell(&self.at_peak), cell(&self.at_exit)]
            })
            .collect();
        Table {
            columns: &[
                ("MiB", 24, false),
                ("at the peak", 12, true),
                ("at exit", 12, true),
            ],
            rows,
        }
    }

    /// The table in a line a moment: `at its peak (9418.8 ms), 1976.0 MiB,
    /// 100.0% named: objects it holds 998.0 (NCCL 484.0, PyTorch 514.0), …`
    /// (the shares that held something, MiB), for one process among many.
    pub(crate) fn brief(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (when, shares) in [("at its peak", &self.at_peak), ("at exit", &self.at_exit)] {
            let Some(s) = shares else { continue };
            let named = if s.total_bytes == 0 {
                100.0
            } else {
                100.0 * (s.total_bytes as f64 - s.unexplained_bytes as f64) / s.total_bytes as f64
            };
            let parts: Vec<String> = ROWS[1..]
                .iter()
                .filter(|(_, figure, _)| figure(s) != 0.0)
                .map(|(name, figure, _)| {
                    let mut part = format!("{name} {:.1}", figure(s) / MIB);
                    if *name == "objects it holds" && !s.objects_held_by.is_empty() {
                        let by: Vec<String> = s
                            .objects_held_by
                            .iter()
                            .map(|(o, b)| format!("{} {:.1}", Owner::label_of(o), mib(*b)))
                            .collect();
                        let _ = write!(part, " ({})", by.join(", "));
                    }
                    part
                })
                .collect();
            out.push(format!(
                "{when} ({:.1} ms), {:.1} MiB, {named:.1}% named: {}",
                s.t_ms,
                mib(s.total_bytes),
                parts.join(", ")
            ));
        }
        out
    }

    /// What the program's managed memory was, and where what the device held
    /// for it is said (or why it is not).
    fn managed_line(&self) -> Option<String> {
        let managed = |s: &Option<Shares>| s.as_ref().map_or(0, |s| s.managed_bytes);
        let untold = [&self.at_peak, &self.at_exit]
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| s.managed_on_device_untold));
        let on_device = [&self.at_peak, &self.at_exit]
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| s.managed_on_device_bytes > 0));
        if managed(&self.at_peak) == 0 && managed(&self.at_exit) == 0 && !on_device && !untold {
            return None;
        }
        Some(format!(
            "managed memory the program held (cudaMallocManaged): {:.2} MiB at the peak and \
                 {:.2} MiB at exit. {}",
            mib(managed(&self.at_peak)),
            mib(managed(&self.at_exit)),
            if untold {
                "What the device held for it is not told at every moment (other processes \
                     on the device, or no reading of the rest of it before the program made \
                     managed memory): NVML counts managed pages in no process's figure, so \
                     where it is not told they are in no share above, nor in the program's \
                     memory"
            } else {
                "What the device held for it, its pages there and the driver's own memory \
                     for them (kept after a free), is the row \"managed memory on device\": \
                     NVML counts it in the device's figure and in no process's, so the \
                     program's memory is its NVML figure and this, the device's figure less \
                     what the rest of the device held before the program made managed memory"
            }
        ))
    }

    /// What the table does not say: when, unmeasured reserves, and the
    /// largest reserves one by one.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(p), Some(e)) = (&self.at_peak, &self.at_exit) {
            out.push(format!(
                "at the peak: the reading at {:.1} ms; at exit: the last reading, at {:.1} ms",
                p.t_ms, e.t_ms
            ));
        }
        for (when, shares) in [("at the peak", &self.at_peak), ("at exit", &self.at_exit)] {
            if let Some(s) = shares
                && (s.objects_held_by.len() > 1 || s.objects_held_by.keys().any(|o| o != "program"))
            {
                let by: Vec<String> = s
                    .objects_held_by
                    .iter()
                    .map(|(o, b)| format!("{} {:.2} MiB", Owner::label_of(o), mib(*b)))
                    .collect();
                out.push(format!(
                    "objects it holds {when}, by who made them: {}",
                    by.join("; ")
                ));
            }
        }
        if [&self.at_peak, &self.at_exit]
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| s.before_api_bytes > 0))
        {
            out.push(
                "before its API's use: the process's resident memory at its last reading before \
                 its first call of the API (its own and the libraries it had loaded), a share of \
                 every reading after; its API's runtime: what that memory grew by until its last \
                 reading before its first object (the runtime its first calls loaded, and what \
                 the program took meanwhile)"
                    .into(),
            );
        }
        if [&self.at_peak, &self.at_exit]
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| s.own_between_calls_bytes > 0))
        {
            out.push(
                "its own, between calls: what its memory grew by between two readings while no \
                 call of its API ran and no work it queued was outstanding (memory it took \
                 itself, as a program writing its own arrays for the first time)"
                    .into(),
            );
        }
        out.extend(self.managed_line());
        let unmeasured = self.at_exit.as_ref().map_or(0, |s| s.unmeasured);
        if unmeasured > 0 {
            out.push(format!(
                "{unmeasured} context(s), module(s), queue(s) or stream(s) alive at exit whose \
                 reserve could not be measured (no reading on each side of the call that made it)"
            ));
        }
        let mut largest: Vec<&ReserveReport> = self.reserves.iter().collect();
        largest.sort_by_key(|r| std::cmp::Reverse(r.bytes));
        for r in largest.iter().take(RESERVES_LISTED) {
            let how = match r.measured_by.as_str() {
                "agent_at_launch" => {
                    "code loaded or compiled at a function's first launch or first use, read by the agent"
                }
                "agent" => "measured by the agent across the call",
                _ => "measured between the readings",
            };
            let kept = match (r.kept_from_ms, r.kept_until_ms) {
                (Some(from), None) => {
                    format!(
                        "; the memory stayed after: kept by the driver from the reading at {from:.1} ms"
                    )
                }
                (Some(from), Some(until)) => format!(
                    "; the memory stayed after: kept by the driver from the reading at {from:.1} ms until the one at {until:.1} ms"
                ),
                _ => String::new(),
            };
            out.push(format!(
                "reserve of {}: {:.2} MiB ({}), {how} at {:.1} and {:.1} ms{kept}",
                r.objects.join(" + "),
                mib(r.bytes),
                r.state,
                r.from_ms,
                r.to_ms
            ));
        }
        if largest.len() > RESERVES_LISTED {
            out.push(format!(
                "and {} more reserves (the JSON report lists them all)",
                largest.len() - RESERVES_LISTED
            ));
        }
        out
    }
}

/// What became of a reserve's objects, the most alive of them first.
fn state(run: &Run, ids: &[u64]) -> &'static str {
    match run.most_alive(ids) {
        Alive::Held => "held",
        Alive::Released => "released, not deleted",
        Alive::Gone
            if ids
                .iter()
                .all(|id| run.ledger().get(id).is_some_and(|o| o.destroyed())) =>
        {
            "deleted"
        }
        Alive::Gone => "released",
    }
}
