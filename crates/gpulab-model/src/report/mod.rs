//! Reports of a run for people and scripts: text, JSON and Markdown, all from the
//! same `Summary`, so the three never disagree. Renders to strings; never prints.
//! `Summary` (here) is what a report shows; `text` and `markdown` say it.

#[cfg(test)]
mod folded_tests;
mod format;
pub mod frameworks;
pub mod held_then;
pub mod holders;
mod markdown;
pub mod out_of_memory;
pub mod ranks;
pub mod tensors;
mod text;
pub mod watch;

pub use format::printable;
pub(crate) use format::{
    fmt_delta, fmt_value, md_code, md_text, memory_label, program_memory_label,
};
pub use markdown::markdown;
pub use text::{side_by_side, text};
pub use watch::WatchReport;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::run::{Finding, Load, Run};
use crate::trace::{CallStatus, ClaimVerdict, EndStatus, MemorySource, Verdict};
use gpulab_lab::{Api, BackendKind, ObjKind};

mod cuda;

use crate::units::MIB_F64 as MIB;

/// Everything a report shows, measured in the run it came from.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Summary {
    /// Where, when and by which gpulab the run was made.
    pub recorded: Provenance,
    pub lab: String,
    pub title: String,
    pub variant: String,
    pub params: BTreeMap<String, f64>,
    pub device: String,
    pub platform: String,
    pub driver: String,
    /// `nvml` (device memory), `rss` (host memory of the worker) or `none`.
    pub memory_source: MemorySource,
    pub lines: Vec<LineRow>,
    /// CUDA runs: the default pool and the device after each line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pool: Vec<cuda::PoolRow>,
    /// The run's first device spans (at most `run::fold::SPANS_LISTED`).
    pub spans: Vec<SpanRow>,
    /// Device spans of the run past those listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub spans_not_listed: u64,
    pub live_at_end: BTreeMap<ObjKind, usize>,
    pub leaked: Vec<LeakRow>,
    pub destroyed: Vec<DestroyRow>,
    pub claims: Vec<ClaimVerdict>,
    /// What was predicted of each claim before the run (class mode, `gpulab
    /// run --predict`), by claim name; shown beside the verdict, never used
    /// to reach it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub predicted: BTreeMap<String, gpulab_events::Predicted>,
    /// The ranges predicted for measured values before the run, each beside
    /// what was measured; never used to reach a verdict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub estimated: Vec<Estimated>,
    pub notes: Vec<String>,
    pub baseline_bytes: Option<u64>,
    pub peak_above_baseline_bytes: Option<u64>,
    /// Device memory the parent saw after the worker exited, against
    /// `after_exit_against` (both device-wide).
    pub after_exit_bytes: Option<i64>,
    /// What `after_exit_bytes` is measured against: `before the worker started`,
    /// or in recordings made before gpulab sampled that early, `the first sample`
    /// (taken after the worker had set up its device).
    pub after_exit_against: Option<String>,
    pub status: String,
    /// How the run ended, as a word to match on (`status` says it in full).
    pub outcome: Outcome,
    /// A run that timed out: the call it was in, and for how long.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlightRow>,
    pub duration_ms: Option<f64>,
    /// `host_ms(tag)` for each tag, as a claim computes it: a tagged block's
    /// whole duration, a tagged line's mean per execution.
    pub host_ms_by_tag: BTreeMap<String, f64>,
    /// When a call failed for want of memory or resources: what the run had
    /// measured at that moment, to tell which ran out.
    pub ran_out: Option<RanOut>,
    /// The error the lab looked for (an `# expect-error` line that returned one,
    /// or the failure an `--until-failure` run reached), when a call returned it.
    pub finding: Option<Finding>,
    /// How busy the host was during the run, when the parent measured it.
    pub load: Option<Load>,
    /// The parent's memory readings in this stream between the run's start and
    /// end (a recording keeps fewer: idle stretches are thinned).
    pub readings: Option<Readings>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Finished,
    Failed,
    Cancelled,
    Crashed,
    Exited,
    /// Ended by gpulab when its time limit passed.
    TimedOut,
    /// The stream has no end: a recording cut short.
    Partial,
}

impl Outcome {
    pub fn of(status: Option<&EndStatus>) -> Outcome {
        match status {
            Some(EndStatus::Finished) => Outcome::Finished,
            Some(EndStatus::Failed { .. }) => Outcome::Failed,
            Some(EndStatus::Cancelled) => Outcome::Cancelled,
            Some(EndStatus::Crashed { .. }) => Outcome::Crashed,
            Some(EndStatus::Exited { .. }) => Outcome::Exited,
            Some(EndStatus::TimedOut { .. }) => Outcome::TimedOut,
            None => Outcome::Partial,
        }
    }
}

/// The call a run that timed out was in.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InFlightRow {
    /// The C name as the script wrote it.
    pub api: String,
    pub line: Option<u32>,
    /// Iteration indices of the enclosing `repeat` blocks, from 0.
    pub iter: Vec<u32>,
    /// How long the worker had been in it when the limit passed, ms.
    pub for_ms: u64,
    /// The run's time limit, ms.
    pub limit_ms: u64,
}

impl InFlightRow {
    fn of(status: Option<&EndStatus>) -> Option<InFlightRow> {
        let Some(EndStatus::TimedOut {
            limit_ms,
            in_flight: Some(c),
        }) = status
        else {
            return None;
        };
        Some(InFlightRow {
            api: c.api.clone(),
            line: c.line,
            iter: c.iter.clone(),
            for_ms: c.for_ms,
            limit_ms: *limit_ms,
        })
    }
}

/// How often memory was read during the run, from the readings in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Readings {
    pub count: usize,
    pub per_s: f64,
}

impl Readings {
    fn of(run: &Run) -> Option<Readings> {
        run.end()?;
        let stats = &run.sample_stats();
        let (first, last) = (stats.during_first?, stats.during_last?);
        let span = last.saturating_sub(first) as f64 / 1e9;
        let count = usize::try_from(stats.during).unwrap_or(usize::MAX);
        (span > 0.0 && count > 1).then(|| Readings {
            count,
            per_s: (count - 1) as f64 / span,
        })
    }
}

/// The state of the run when a call failed with an out-of-memory or
/// out-of-resources status, from its own measurements.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RanOut {
    pub line: Option<u32>,
    pub api: String,
    pub status: String,
    /// Device memory in use (all processes) and the device's total, from the
    /// last sample before the failure.
    pub device_used_bytes: Option<u64>,
    pub device_total_bytes: Option<u64>,
    /// Objects the lab held when it failed, by kind (only kinds with any).
    pub live: BTreeMap<ObjKind, usize>,
    /// Objects the lab had released whose deletion the driver had not reported
    /// yet (OpenCL buffers and contexts, which have destructor callbacks).
    pub not_yet_destroyed: BTreeMap<ObjKind, usize>,
}

fn ran_out(run: &Run) -> Option<RanOut> {
    let call = run.folds().ran_out.as_ref()?;
    let CallStatus::Error { name, .. } = &call.status else {
        return None;
    };
    let sample = run.sample_stats().at_ran_out.as_ref();
    // The ledger as it stood when the call returned, with what the objects
    // folded out of it since added.
    let (folded, _) = run.ran_out_folded();
    let mut counts = folded.clone();
    let destructors = run.destructors_told();
    for o in run.ledger().values() {
        counts.count(o, call.end_ns, destructors);
    }
    let crate::run::RanOutCounts {
        live,
        not_yet_destroyed,
    } = counts;
    Some(RanOut {
        line: call.line,
        api: call.api.to_string(),
        status: name.clone(),
        device_used_bytes: sample.map(|s| s.used_bytes),
        device_total_bytes: sample
            .and_then(|s| s.total_bytes)
            .or_else(|| run.meta().and_then(|m| m.device.total_bytes)),
        live,
        not_yet_destroyed,
    })
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LineRow {
    pub line: u32,
    pub text: String,
    pub tag: Option<String>,
    pub driver: Option<String>,
    pub calls: u32,
    pub result: String,
    pub host_ms: f64,
    pub host_ms_max: f64,
    pub mem_delta_bytes: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SpanRow {
    pub queue: String,
    pub name: String,
    pub line: Option<u32>,
    /// Relative to the start of the run.
    pub begin_ms: f64,
    pub end_ms: f64,
    pub duration_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LeakRow {
    pub handle: String,
    pub kind: ObjKind,
    pub bytes: u64,
    pub forgotten: bool,
    /// Releases the lab made of it, and the references it still held at the end
    /// (a buffer retained once more than released: released, yet still held).
    pub releases: u32,
    pub refcount: u32,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DestroyRow {
    pub handle: String,
    pub kind: ObjKind,
    /// From the lab's last release to the driver's destructor callback; `None` if it
    /// never fired while the worker lived.
    pub after_release_ms: Option<f64>,
    /// The call in flight when the driver deleted it after its release
    /// (`clFinish at line 47`: a wait let the driver finish what held it);
    /// absent when it went during its own release, between calls, after the
    /// last call or never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub during: Option<String>,
    /// The driver deleted it after the script's last call had returned (as
    /// the worker tore down, or its context went).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub after_last_line: bool,
}

impl Summary {
    pub fn of(run: &Run) -> Summary {
        let meta = run.meta();
        let lab = meta.and_then(|m| m.lab.as_ref());
        let t0 = run.t0();
        let rel = |t: u64| (t as f64 - t0 as f64) / 1e6;
        let lines = line_rows(run);
        let spans = span_rows(run, rel);
        let leaked = leak_rows(run);
        let baseline = run.baseline();
        // The kinds this run's backend has: a CUDA run lists no OpenCL programs.
        let made = |k: ObjKind| run.live_index().made_count.get(&k).is_some_and(|n| *n > 0);
        let kinds: Vec<ObjKind> = match meta {
            Some(m) => Api::kinds_of(m.backend),
            None => ObjKind::ALL.to_vec(),
        }
        .into_iter()
        .filter(|&k| !Api::listed_when_made(k) || made(k))
        .collect();
        Summary {
            recorded: Provenance::of(run),
            lab: lab.map(|l| l.id.clone()).unwrap_or_default(),
            title: lab.map(|l| l.title.clone()).unwrap_or_default(),
            variant: lab.map(|l| l.variant.clone()).unwrap_or_default(),
            params: lab.map(|l| l.params.clone()).unwrap_or_default(),
            device: meta.map(|m| m.device.name.clone()).unwrap_or_default(),
            platform: meta.map(|m| m.platform.clone()).unwrap_or_default(),
            driver: meta
                .map(|m| m.device.driver_version.clone())
                .unwrap_or_default(),
            memory_source: meta.map_or(MemorySource::Unavailable, |m| m.device.memory_source),
            lines,
            pool: cuda::rows(run),
            spans,
            spans_not_listed: run.spans().seen() - run.folds().spans_listed.len() as u64,
            live_at_end: run
                .live_counts()
                .into_iter()
                .filter(|(k, n)| *n > 0 || kinds.contains(k))
                .collect(),
            leaked,
            destroyed: destroyed_rows(run),
            claims: run.claims().to_vec(),
            predicted: run.predictions().clone(),
            estimated: Estimated::of(run),
            notes: run
                .notes()
                .iter()
                .map(|n| match n.line {
                    Some(l) => format!("line {l}: {}", n.text),
                    None => n.text.clone(),
                })
                .chain(run.ran_out_folded().1.then(|| {
                    "objects released after the call that ran out of memory were folded into \
                     counts before its record arrived: what it saw alive may leave some out"
                        .to_string()
                }))
                .collect(),
            baseline_bytes: baseline,
            peak_above_baseline_bytes: run.peak_above_baseline(),
            after_exit_bytes: after_exit(run).map(|(bytes, _)| bytes),
            after_exit_against: after_exit(run).map(|(_, against)| against.to_string()),
            status: run
                .end()
                .as_ref()
                .map(|e| e.status.label())
                .unwrap_or_else(|| "no end (partial run)".into()),
            outcome: Outcome::of(run.end().map(|e| &e.status)),
            in_flight: InFlightRow::of(run.end().map(|e| &e.status)),
            duration_ms: run.duration_ns().map(|d| d as f64 / 1e6),
            host_ms_by_tag: host_ms_by_tag(run),
            ran_out: ran_out(run),
            finding: run.finding(),
            load: run.load().map(Load::of),
            readings: Readings::of(run),
        }
    }
}

/// Each script line with what its calls did.
fn line_rows(run: &Run) -> Vec<LineRow> {
    // The line a run that timed out was stuck in: its last call never returned.
    let stuck = match run.end().map(|e| &e.status) {
        Some(EndStatus::TimedOut {
            in_flight: Some(c), ..
        }) => c.line,
        _ => None,
    };
    run.lines()
        .into_iter()
        .map(|l| LineRow {
            result: if l.calls == 0 && stuck == Some(l.line) {
                "did not return".into()
            } else if l.calls == 0 {
                "not run".into()
            } else if let Some(e) = &l.error {
                if l.expect_error {
                    format!("{e} (expected)")
                } else {
                    e.clone()
                }
            } else if stuck == Some(l.line) {
                "ok, then did not return".into()
            } else {
                "ok".into()
            },
            host_ms: l.host_ms_mean(),
            host_ms_max: l.host_ns_max as f64 / 1e6,
            mem_delta_bytes: l.mem_delta,
            line: l.line,
            text: l.text,
            tag: l.tag,
            driver: l.driver,
            calls: l.calls,
        })
        .collect()
}

/// The device spans the run lists, in ms from its start (`rel`).
fn span_rows(run: &Run, rel: impl Fn(u64) -> f64) -> Vec<SpanRow> {
    run.folds()
        .spans_listed
        .iter()
        .map(|s| SpanRow {
            queue: s
                .queue_name
                .clone()
                .unwrap_or_else(|| format!("#{}", s.queue)),
            name: s.name.clone(),
            line: s.line,
            begin_ms: rel(s.begin_ns),
            end_ms: rel(s.end_ns),
            duration_ms: s.end_ns.saturating_sub(s.begin_ns) as f64 / 1e6,
        })
        .collect()
}

/// What the worker listed as left alive at its end.
fn leak_rows(run: &Run) -> Vec<LeakRow> {
    run.end()
        .iter()
        .flat_map(|e| e.leaked.iter())
        .map(|l| {
            let state = run.ledger().get(&l.id);
            LeakRow {
                handle: l.handle.clone().unwrap_or_else(|| format!("#{}", l.id)),
                kind: l.kind,
                bytes: l.bytes,
                forgotten: l.forgotten,
                releases: state.map_or(0, |s| s.releases),
                refcount: state.map_or(1, |s| s.refcount),
            }
        })
        .collect()
}

/// Where a run was made, by which gpulab and when, from its `meta`: what a
/// table of many runs (a fleet's) needs to tell them apart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Provenance {
    /// The gpulab that ran it (the recording's; the output's own is the
    /// envelope's `gpulab_version`).
    pub gpulab_version: String,
    pub host: String,
    /// UTC, RFC 3339; null in recordings made before it was kept.
    pub at: Option<String>,
}

impl Provenance {
    /// This gpulab on `host`, now: an output measured as it is written
    /// (`doctor`, `list`).
    pub fn here(host: String) -> Provenance {
        Provenance {
            gpulab_version: env!("CARGO_PKG_VERSION").to_string(),
            host,
            at: Some(gpulab_events::wallclock::Utc::now().rfc3339()),
        }
    }

    pub fn of(run: &Run) -> Provenance {
        run.meta()
            .as_ref()
            .map_or_else(Provenance::default, |m| Provenance {
                gpulab_version: m.gpulab_version.clone(),
                host: m.hostname.clone(),
                at: m.recorded_at.clone(),
            })
    }
}

/// `host_ms(tag)` of every tag in the run, by the claims' own definition.
fn host_ms_by_tag(run: &Run) -> BTreeMap<String, f64> {
    let tags: std::collections::BTreeSet<&str> = run
        .blocks()
        .iter()
        .filter_map(|b| b.tag.as_deref())
        .chain(run.folds().tags.keys().map(String::as_str))
        .collect();
    tags.into_iter()
        .filter_map(|tag| Some((tag.to_string(), crate::verdict::host_ms(run, tag).ok()?)))
        .collect()
}

/// Device memory after the worker exited, against the level at the start (both
/// device-wide). On a CPU device the worker's memory is its RSS, gone with it.
fn after_exit(run: &Run) -> Option<(i64, &'static str)> {
    let meta = run.meta()?;
    let end = run.end()?;
    if meta.device.memory_source == MemorySource::Rss {
        return Some((0, "before the worker started"));
    }
    let start = run
        .sample_stats()
        .first
        .as_ref()
        .filter(|s| s.t_ns <= end.t_ns)?;
    let after = run.after_exit()?;
    let against = if start.t_ns < meta.t_ns {
        "before the worker started"
    } else {
        "the first sample"
    };
    Some((after.used_bytes as i64 - start.used_bytes as i64, against))
}

fn destroyed_rows(run: &Run) -> Vec<DestroyRow> {
    let mut rows = Vec::new();
    // CUDA has no destructor callbacks: "never destroyed" would be a false finding.
    if run
        .meta()
        .as_ref()
        .is_some_and(|m| m.backend == BackendKind::Cuda)
    {
        return rows;
    }
    // Only what gpulab asked the driver about can be said never destroyed.
    let asked = run.meta().and_then(|m| m.destruction.clone());
    for (id, kind, handle) in &run.folds().created {
        let Some(state) = run.ledger().get(id) else {
            continue;
        };
        let Some(released) = state.last_release_ns else {
            continue;
        };
        if !state.destruction_watched(asked.as_deref()) {
            continue;
        }
        let destroyed = state.destroyed_ns;
        rows.push(DestroyRow {
            handle: handle.clone().unwrap_or_else(|| format!("#{id}")),
            kind: *kind,
            after_release_ms: destroyed.map(|d| (d as f64 - released as f64) / 1e6),
            during: destroyed
                .filter(|d| *d > released)
                .and_then(|d| destroyed_during(run, d)),
            after_last_line: destroyed
                .is_some_and(|d| d > released && run.calls().iter().all(|c| c.end_ns < d)),
        });
    }
    rows
}

/// The call in flight at `t_ns`: what let the driver delete an object after
/// its release (a wait, another release).
fn destroyed_during(run: &Run, t_ns: u64) -> Option<String> {
    let c = run
        .calls()
        .iter()
        .find(|c| c.begin_ns <= t_ns && t_ns <= c.end_ns && c.status != CallStatus::Directive)?;
    Some(match c.line {
        Some(line) => format!("{} at line {line}", c.api.as_str()),
        None => c.api.as_str().to_string(),
    })
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A range predicted for a measured value, and what was measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Estimated {
    /// The value, as the lab's claims read it (`host_ms(wait)`).
    pub value: String,
    pub lo: f64,
    pub hi: f64,
    /// What the run measured (as the claims that read it were given it);
    /// absent when no claim could read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<f64>,
    /// Whether the measured value is in the range; absent with `measured`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within: Option<bool>,
}

impl Estimated {
    /// Each estimate of `run` beside the value its claims were judged with.
    pub fn of(run: &crate::run::Run) -> Vec<Estimated> {
        run.estimates()
            .iter()
            .map(|e| {
                let measured = run
                    .claims()
                    .iter()
                    .find_map(|c| c.values.get(&e.value).copied())
                    .filter(|v| v.is_finite());
                Estimated {
                    value: e.value.clone(),
                    lo: e.lo,
                    hi: e.hi,
                    measured,
                    within: measured.map(|m| e.holds(m)),
                }
            })
            .collect()
    }

    /// "you estimated host_ms(wait) at 150 to 250 · measured 229.8 (within
    /// your range)".
    pub fn line(&self) -> String {
        let name = self.value.split('(').next().unwrap_or_default();
        let unit = match gpulab_lab::expr::metric_unit(name) {
            "" => String::new(),
            u => format!(" {u}"),
        };
        let outcome = match (self.measured, self.within) {
            (Some(m), Some(true)) => {
                format!("measured {}{unit} (within your range)", fmt_value(m))
            }
            (Some(m), _) => format!("measured {}{unit} (outside your range)", fmt_value(m)),
            (None, _) => "not measured in this run".to_string(),
        };
        format!(
            "you estimated {} at {} to {}{unit} · {outcome}",
            self.value,
            fmt_value(self.lo),
            fmt_value(self.hi)
        )
    }
}

/// A prediction beside the verdict and the lesson: "you predicted: does not
/// hold · the device: holds · the lesson: holds", and whether it was borne out.
pub fn prediction_line(p: gpulab_events::Predicted, c: &ClaimVerdict) -> String {
    let lesson = c
        .expected
        .map(|e| format!(" · the lesson: {}", e.label()))
        .unwrap_or_default();
    let outcome = match c.verdict {
        Verdict::Inconclusive => "the run could not tell",
        v if p.matches(v) => "as predicted",
        _ if p == gpulab_events::Predicted::NotSure => "no prediction made",
        _ => "not as predicted",
    };
    format!(
        "you predicted: {} · the device: {}{lesson} ({outcome})",
        p.label(),
        c.verdict.label()
    )
}
