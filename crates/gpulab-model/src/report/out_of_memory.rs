//! The moment a watched program ran out of memory: the first call the driver
//! refused, what the agent read inside it (the size asked, the driver's free
//! memory, the calling frame), who held the program's memory then and the other
//! processes on the device; and what `watch --oom FILE` keeps of it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::run::Run;
use crate::run::owners::Owner;
use crate::text::fit;
use crate::trace::Frame;
use crate::units::mib;

use super::format::FRAME_WIDTH;
use super::frameworks::FrameworkRefusal;
use super::holders::Shares;
use super::ranks::RankReport;

/// The moment a watched program ran out of memory, apart from the rest of its
/// report (`watch --oom FILE`): the refused driver call and the framework's
/// refusal, each None when there was none.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OutOfMemory<'a> {
    /// Where, when and by which gpulab the program was watched.
    pub recorded: &'a super::Provenance,
    pub command: &'a [String],
    pub pid: u32,
    pub ran_out: Option<&'a WatchRanOut>,
    pub framework_refused: Option<&'a FrameworkRefusal>,
    /// A program of many processes: the process refused first (its rank,
    /// when its launcher said one); absent when none was refused or the
    /// program is one process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_to_run_out: Option<FirstToRunOut>,
    /// One dump per process of a program of many (a job's ranks): where each
    /// stood when the first was refused, and its own refusal if it had one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<&'a RankReport>,
}

/// The process of a program of many that ran out first.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FirstToRunOut {
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

/// The first call refused for want of memory, and the memory at that moment.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchRanOut {
    pub api: String,
    /// What the driver returned (`CUDA_ERROR_OUT_OF_MEMORY`).
    pub status: String,
    pub pid: u32,
    pub thread: u64,
    /// When the call returned, ms in the run.
    pub t_ms: f64,
    /// Device memory in use by every process, and the device's total, from the
    /// latest reading by then (NVML; the host's for RSS).
    pub device_used_bytes: Option<u64>,
    pub device_total_bytes: Option<u64>,
    /// When that reading was taken, ms in the run.
    pub device_t_ms: Option<f64>,
    /// Who held the program's own memory then.
    pub holders: Option<Shares>,
    /// Without `holders` (no reading of the program's memory could be set
    /// beside that moment): what its objects and measured reserves held when
    /// the call returned, which the run knows without a reading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known: Option<KnownShares>,
    /// The other processes NVML listed on the device by then, with their
    /// bytes (often the cause on a shared card); absent when no list was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_processes: Option<Vec<OtherProcessReport>>,
    /// The bytes the refused call asked for, from its parameters (the agent
    /// read them inside the call); absent from older recordings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked_bytes: Option<u64>,
    /// The device's free memory as the driver said it right after the
    /// refusal (`cuMemGetInfo` on the calling thread, read by the agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_free_bytes: Option<u64>,
    /// Who called the driver for it, from the refused call's calling frame
    /// (as [`AliveGroup::owner`]); absent when no stack was taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The refused call's native stack, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backtrace: Vec<Frame>,
    /// What the refused process held of device memory then, by where each
    /// piece was made, most bytes first.
    pub held_then: Vec<super::held_then::HeldThenReport>,
    /// The program held memory on more than one GPU: the device figures are
    /// the refused process's GPU's, and who held what is said per process.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub spread: bool,
}

/// What the objects and reserves of a program held at a moment without a
/// reading of its memory: no total, so nothing is unexplained or explained.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KnownShares {
    /// Objects it held whose size their making call said, less what its
    /// frameworks' allocators kept cached in them.
    pub objects_held_bytes: u64,
    /// `objects_held_bytes` by who called the driver for them.
    pub objects_held_by: BTreeMap<String, u64>,
    pub cached_by_allocators_bytes: u64,
    /// Measured reserves of the contexts, modules, queues and streams it held
    /// then (measured then or later).
    pub reserves_held_bytes: u64,
    /// Contexts, modules, queues or streams it held whose reserve was not measured.
    pub unmeasured: usize,
}

/// A process outside the program that held device memory.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OtherProcessReport {
    pub pid: u32,
    /// Its name, where gpulab's host could read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its bytes, when NVML said them.
    pub bytes: Option<u64>,
}

impl WatchRanOut {
    pub(crate) fn of(run: &Run) -> Option<WatchRanOut> {
        let call = run.folds().ran_out.as_ref()?;
        let status = match &call.status {
            crate::trace::CallStatus::Error { name, .. } => name.clone(),
            _ => return None,
        };
        let start = run.meta().map_or(0, |m| m.t_ns);
        let sample = run.sample_stats().at_ran_out.as_ref();
        let refused = call.refused.as_ref();
        let backtrace = refused
            .and_then(|r| r.stack)
            .and_then(|id| run.stacks().get(&id))
            .cloned()
            .unwrap_or_default();
        Some(WatchRanOut {
            asked_bytes: refused.and_then(|r| r.asked_bytes),
            driver_free_bytes: refused.and_then(|r| r.free_bytes),
            owner: (!backtrace.is_empty()).then(|| Owner::of(&backtrace).as_str().to_string()),
            backtrace,
            held_then: super::held_then::HeldThenReport::of(run, &run.folds().held_at_ran_out),
            api: call.api.to_string(),
            status,
            pid: call.pid,
            thread: call.thread,
            t_ms: call.end_ns.saturating_sub(start) as f64 / 1e6,
            device_used_bytes: sample.map(|s| s.used_bytes),
            device_total_bytes: sample.and_then(|s| s.total_bytes),
            device_t_ms: sample.map(|s| s.t_ns.saturating_sub(start) as f64 / 1e6),
            holders: run
                .holders_at_ran_out()
                .as_ref()
                .map(|h| Shares::of(h, start)),
            known: run
                .known_at_ran_out()
                .as_ref()
                .filter(|_| run.holders_at_ran_out().is_none())
                .map(|h| {
                    let (reserves, unmeasured) = run.reserves_of(run.unsized_at_ran_out());
                    KnownShares {
                        objects_held_bytes: h.held,
                        objects_held_by: super::holders::held_by_names(h),
                        cached_by_allocators_bytes: h.cached,
                        reserves_held_bytes: reserves,
                        unmeasured,
                    }
                }),
            spread: false,
            other_processes: run.sample_stats().others_at(call.end_ns).map(|others| {
                others
                    .iter()
                    .map(|o| OtherProcessReport {
                        pid: o.pid,
                        name: o.name.clone(),
                        bytes: o.bytes,
                    })
                    .collect()
            }),
        })
    }

    /// For a program spread over GPUs: the device figures are those of the
    /// GPU the refused process was on (when it was on one), and no share of
    /// one GPU's reading is set against objects on all of them.
    pub(crate) fn on_its_gpu(mut self, run: &Run) -> WatchRanOut {
        let start = run.meta().map_or(0, |m| m.t_ns);
        let end_ns = start + (self.t_ms * 1e6) as u64;
        let gpu = run
            .ranks()
            .members
            .get(&self.pid)
            .filter(|m| m.gpus_used.len() == 1)
            .and_then(|m| m.gpus_used.first().copied());
        let reading = gpu.and_then(|g| Some((g, run.ranks().reading_at(g, end_ns)?)));
        self.device_used_bytes = reading.map(|(_, p)| p.used);
        self.device_total_bytes = gpu
            .and_then(|g| run.ranks().gpus.get(g as usize))
            .map(|l| l.meta.total_bytes);
        self.device_t_ms = reading.map(|(_, p)| p.t_ns.saturating_sub(start) as f64 / 1e6);
        self.holders = None;
        self.known = None;
        self.other_processes = None;
        self.spread = true;
        self
    }

    /// Who held the program's memory when the call was refused, as far as
    /// it is known.
    fn holders_lines(&self, out: &mut Vec<String>) {
        if let Some(h) = &self.holders {
            out.push(format!(
                "  this program held {:.1} MiB (its reading at {:.1} ms): objects {:.1}, \
                 reserves {:.1}, released but kept by the driver {:.1}, unexplained {:.1} MiB",
                mib(h.total_bytes),
                h.t_ms,
                mib(h.objects_held_bytes),
                mib(h.reserves_held_bytes),
                mib(h.released_not_deleted_bytes
                    + h.reserves_released_bytes
                    + h.kept_by_pool_bytes
                    + h.held_by_graphs_bytes),
                h.unexplained_bytes as f64 / f64::from(1 << 20)
            ));
            // Only from one reading: the device's and the program's figures of
            // different moments do not subtract.
            if let Some(used) = self.device_used_bytes
                && self.device_t_ms == Some(h.t_ms)
            {
                out.push(format!(
                    "  every other process and the driver held the other {:.1} MiB in use",
                    mib(used.saturating_sub(h.total_bytes))
                ));
            }
        } else if let Some(k) = &self.known {
            let unmeasured = match k.unmeasured {
                0 => String::new(),
                n => format!(" ({n} not measured)"),
            };
            out.push(format!(
                "  its objects then held {:.1} MiB and its reserves {:.1} MiB{unmeasured}; what else \
                 it held is not known: no reading of its memory was taken between its last change \
                 before the refused call and its next one",
                mib(k.objects_held_bytes + k.cached_by_allocators_bytes),
                mib(k.reserves_held_bytes),
            ));
        } else if self.spread {
            out.push(
                "  who held memory then: each process on its own GPU, below (the program \
                 held memory on more than one GPU)"
                    .into(),
            );
        } else {
            out.push(
                "  who held its memory then is not known: no reading of it was taken between \
                 its last change before the refused call and its next one"
                    .into(),
            );
        }
    }

    /// What it says first, in a report's words.
    /// The report's lines: the refusal, then up to
    /// [`super::held_then::LISTED`] places of what the process held.
    pub fn lines(&self) -> Vec<String> {
        let mut out = self.lead_lines();
        out.extend(self.held_lines(super::held_then::LISTED));
        out
    }

    /// What the process held then, `listed` places at most.
    pub fn held_lines(&self, listed: usize) -> Vec<String> {
        super::held_then::HeldThenReport::lines(&self.held_then, listed)
    }

    /// The refused call, its stack, and the device and the program then.
    pub fn lead_lines(&self) -> Vec<String> {
        let asked = self
            .asked_bytes
            .map_or_else(String::new, |b| format!(" of {:.1} MiB", mib(b)));
        let by = match self.owner.as_deref() {
            None | Some("program" | "unknown") => String::new(),
            Some(owner) => format!(", through {}", Owner::label_of(owner)),
        };
        let mut out = vec![format!(
            "ran out of memory: {}{asked}{by} (pid {}, thread {}) returned {} at {:.1} ms",
            self.api, self.pid, self.thread, self.status, self.t_ms
        )];
        for f in &self.backtrace {
            out.push(format!("    at {}", fit(&f.describe(), FRAME_WIDTH)));
        }
        if let Some(free) = self.driver_free_bytes {
            out.push(format!(
                "  the driver said {:.1} MiB free right after it refused (cuMemGetInfo in the call)",
                mib(free)
            ));
        }
        if let (Some(used), Some(total), Some(at)) = (
            self.device_used_bytes,
            self.device_total_bytes,
            self.device_t_ms,
        ) {
            out.push(format!(
                "  the device then: {:.1} MiB in use by every process, {:.1} MiB free of {:.1} MiB \
                 (its reading at {at:.1} ms)",
                mib(used),
                mib(total.saturating_sub(used)),
                mib(total)
            ));
        }
        self.holders_lines(&mut out);
        match self.other_processes.as_deref() {
            Some([]) => out.push("  no other process held device memory then".into()),
            Some(others) => {
                let each: Vec<String> = others
                    .iter()
                    .map(|o| {
                        format!(
                            "{} (pid {}) {}",
                            o.name.as_deref().unwrap_or("a process"),
                            o.pid,
                            o.bytes
                                .map_or("bytes not said".into(), |b| format!("{:.1} MiB", mib(b)))
                        )
                    })
                    .collect();
                out.push(format!(
                    "  other processes on the device then (NVML's latest list by then): {}",
                    each.join("; ")
                ));
            }
            None => {}
        }
        out
    }
}
