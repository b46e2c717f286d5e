//! Reports of a run for people and scripts: text, JSON and Markdown, all from the
//! same `Summary`, so the three never disagree. Renders to strings; never prints.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::lab::ObjKind;
use crate::run::Run;
use crate::trace::{ClaimVerdict, ObjectAction, Verdict};

mod cuda;

const MIB: f64 = 1024.0 * 1024.0;

/// Everything a report shows, measured in the run it came from.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub lab: String,
    pub title: String,
    pub variant: String,
    pub params: BTreeMap<String, f64>,
    pub device: String,
    pub platform: String,
    pub driver: String,
    /// `nvml` (device memory) or `rss` (host memory of the worker).
    pub memory_source: String,
    pub lines: Vec<LineRow>,
    /// CUDA runs: the default pool and the device after each line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pool: Vec<cuda::PoolRow>,
    pub spans: Vec<SpanRow>,
    pub live_at_end: BTreeMap<String, usize>,
    pub leaked: Vec<LeakRow>,
    pub destroyed: Vec<DestroyRow>,
    pub claims: Vec<ClaimVerdict>,
    pub notes: Vec<String>,
    pub baseline_mib: Option<f64>,
    pub peak_above_baseline_mib: Option<f64>,
    /// Memory the parent saw after the worker exited, above the baseline.
    pub after_exit_mib: Option<f64>,
    pub status: String,
    pub duration_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LineRow {
    pub line: u32,
    pub text: String,
    pub tag: Option<String>,
    pub driver: Option<String>,
    pub calls: u32,
    pub result: String,
    pub host_ms: f64,
    pub host_ms_max: f64,
    pub mem_delta_mib: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
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
pub struct LeakRow {
    pub handle: String,
    pub kind: ObjKind,
    pub bytes: u64,
    pub forgotten: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct DestroyRow {
    pub handle: String,
    pub kind: ObjKind,
    /// From the lab's last release to the driver's destructor callback; `None` if it
    /// never fired while the worker lived.
    pub after_release_ms: Option<f64>,
}

impl Summary {
    pub fn of(run: &Run) -> Summary {
        let meta = run.meta.as_ref();
        let lab = meta.and_then(|m| m.lab.as_ref());
        let t0 = run.t0();
        let rel = |t: u64| (t as f64 - t0 as f64) / 1e6;
        let lines = run
            .lines()
            .into_iter()
            .map(|l| LineRow {
                result: if l.calls == 0 {
                    "not run".into()
                } else if let Some(e) = &l.error {
                    if l.expect_error {
                        format!("{e} (expected)")
                    } else {
                        e.clone()
                    }
                } else {
                    "ok".into()
                },
                host_ms: l.host_ms_mean(),
                host_ms_max: l.host_ns_max as f64 / 1e6,
                mem_delta_mib: l.mem_delta.map(|d| d as f64 / MIB),
                line: l.line,
                text: l.text,
                tag: l.tag,
                driver: l.driver,
                calls: l.calls,
            })
            .collect();
        let spans = run
            .spans
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
            .collect();
        let leaked = run
            .end
            .iter()
            .flat_map(|e| e.leaked.iter())
            .map(|l| LeakRow {
                handle: l.handle.clone().unwrap_or_else(|| format!("#{}", l.id)),
                kind: l.kind,
                bytes: l.bytes,
                forgotten: l.forgotten,
            })
            .collect();
        let baseline = run.baseline();
        Summary {
            lab: lab.map(|l| l.id.clone()).unwrap_or_default(),
            title: lab.map(|l| l.title.clone()).unwrap_or_default(),
            variant: lab.map(|l| l.variant.clone()).unwrap_or_default(),
            params: lab.map(|l| l.params.clone()).unwrap_or_default(),
            device: meta.map(|m| m.device.name.clone()).unwrap_or_default(),
            platform: meta.map(|m| m.platform.clone()).unwrap_or_default(),
            driver: meta
                .map(|m| m.device.driver_version.clone())
                .unwrap_or_default(),
            memory_source: meta
                .map(|m| m.device.memory_source.clone())
                .unwrap_or_default(),
            lines,
            pool: cuda::rows(run),
            spans,
            live_at_end: run
                .live_at_end()
                .into_iter()
                .map(|(k, n)| (k.plural().to_string(), n))
                .collect(),
            leaked,
            destroyed: destroyed_rows(run),
            claims: run.claims.clone(),
            notes: run
                .notes
                .iter()
                .map(|n| match n.line {
                    Some(l) => format!("line {l}: {}", n.text),
                    None => n.text.clone(),
                })
                .collect(),
            baseline_mib: baseline.map(|b| b as f64 / MIB),
            peak_above_baseline_mib: run.peak_above_baseline().map(|b| b as f64 / MIB),
            after_exit_mib: after_exit_mib(run),
            status: run
                .end
                .as_ref()
                .map(|e| e.status.label())
                .unwrap_or_else(|| "no end (partial run)".into()),
            duration_ms: run.duration_ns().map(|d| d as f64 / 1e6),
        }
    }
}

/// Device memory after the worker exited, against the level at the start (both
/// device-wide). On a CPU device the worker's memory is its RSS, gone with it.
fn after_exit_mib(run: &Run) -> Option<f64> {
    let meta = run.meta.as_ref()?;
    let end = run.end.as_ref()?;
    if meta.device.memory_source == "rss" {
        return Some(0.0);
    }
    let start = run.samples.iter().find(|s| s.t_ns <= end.t_ns)?;
    let after = run.after_exit()?;
    Some((after.used_bytes as f64 - start.used_bytes as f64) / MIB)
}

fn destroyed_rows(run: &Run) -> Vec<DestroyRow> {
    let mut rows = Vec::new();
    // CUDA has no destructor callbacks: "never destroyed" would be a false finding.
    if run.meta.as_ref().is_some_and(|m| m.backend == "cuda") {
        return rows;
    }
    for created in run
        .objects
        .iter()
        .filter(|o| o.action == ObjectAction::Created)
    {
        if !matches!(created.kind, ObjKind::Buffer | ObjKind::Context) {
            continue;
        }
        let mut last_release = None;
        let mut destroyed = None;
        for o in run.objects.iter().filter(|o| o.id == created.id) {
            match o.action {
                ObjectAction::Released | ObjectAction::CleanedUp => last_release = Some(o.t_ns),
                ObjectAction::Destroyed => destroyed = Some(o.t_ns),
                _ => {}
            }
        }
        let Some(released) = last_release else {
            continue;
        };
        rows.push(DestroyRow {
            handle: created
                .handle
                .clone()
                .unwrap_or_else(|| format!("#{}", created.id)),
            kind: created.kind,
            after_release_ms: destroyed.map(|d| (d as f64 - released as f64) / 1e6),
        });
    }
    rows
}

/// Rows that say the same thing, once each with how many there were (the first
/// row of a group stands for it), in first-seen order.
fn group<T, K: PartialEq>(rows: &[T], key: impl Fn(&T) -> K) -> Vec<(&T, usize)> {
    let mut out: Vec<(K, &T, usize)> = Vec::new();
    for r in rows {
        let k = key(r);
        match out.iter_mut().find(|(g, _, _)| *g == k) {
            Some((_, _, n)) => *n += 1,
            None => out.push((k, r, 1)),
        }
    }
    out.into_iter().map(|(_, r, n)| (r, n)).collect()
}

fn verdict_mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Holds => "✓",
        Verdict::DoesNotHold => "✗",
        Verdict::Inconclusive => "?",
    }
}

fn fmt_value(v: f64) -> String {
    if v.is_infinite() {
        "never".into()
    } else if v == v.trunc() && v.abs() < 1e9 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn fmt_delta(d: Option<f64>) -> String {
    match d {
        Some(d) if d.abs() < 0.05 => "0".into(),
        Some(d) => format!("{d:+.1}"),
        None => "-".into(),
    }
}

fn memory_label(source: &str) -> &'static str {
    match source {
        "nvml" => "device memory (NVML)",
        "rss" => "host memory of the worker (CPU OpenCL device: its \"device memory\" is host RAM)",
        _ => "no memory telemetry",
    }
}

/// Plain text, for a terminal.
pub fn text(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} — {} [{}]", s.lab, s.title, s.variant);
    let _ = writeln!(
        o,
        "device   {} · {} · driver {}",
        s.device, s.platform, s.driver
    );
    let _ = writeln!(o, "memory   {}", memory_label(&s.memory_source));
    if !s.params.is_empty() {
        let p: Vec<String> = s
            .params
            .iter()
            .map(|(k, v)| format!("{k}={}", fmt_value(*v)))
            .collect();
        let _ = writeln!(o, "params   {}", p.join(" "));
    }
    let width = s
        .lines
        .iter()
        .map(|l| l.text.chars().count())
        .max()
        .unwrap_or(10)
        .clamp(10, 60);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:>5}  {:<width$}  {:<22} {:>10}  {:>10}",
        "line", "call", "result", "host ms", "mem Δ MiB"
    );
    for l in &s.lines {
        let mut text: String = l.text.chars().take(width).collect();
        if l.calls > 1 {
            text = format!("{text} ×{}", l.calls).chars().take(width).collect();
        }
        let host = if l.calls == 0 {
            "-".into()
        } else {
            format!("{:.3}", l.host_ms)
        };
        let _ = writeln!(
            o,
            "{:>5}  {:<width$}  {:<22} {:>10}  {:>10}{}",
            l.line,
            text,
            l.result,
            host,
            fmt_delta(l.mem_delta_mib),
            l.tag
                .as_ref()
                .map(|t| format!("  [{t}]"))
                .unwrap_or_default()
        );
    }
    cuda::text(&s.pool, &mut o);
    if !s.spans.is_empty() {
        let _ = writeln!(o, "\ndevice spans (ms from the start of the run)");
        for sp in s.spans.iter().take(20) {
            let _ = writeln!(
                o,
                "  {:<6} {:<6} line {:<4} {:>9.3} → {:>9.3}  ({:.3} ms)",
                sp.queue,
                sp.name,
                sp.line.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
                sp.begin_ms,
                sp.end_ms,
                sp.duration_ms
            );
        }
        if s.spans.len() > 20 {
            let _ = writeln!(o, "  … {} more", s.spans.len() - 20);
        }
    }
    let counts: Vec<String> = s
        .live_at_end
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(o, "\nlive at end  {}", counts.join(" · "));
    for (l, n) in group(&s.leaked, |l| (l.handle.clone(), l.kind, l.forgotten)) {
        let why = if l.forgotten {
            "forgotten on purpose (`forget`)"
        } else {
            "never released"
        };
        let times = if n > 1 {
            format!(" ×{n}")
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "  leaked {}{times} ({}, {:.1} MiB each): {why}",
            l.handle,
            l.kind.as_str(),
            l.bytes as f64 / MIB
        );
    }
    let bucket = |d: &DestroyRow| match d.after_release_ms {
        None => 0,
        Some(ms) if ms <= 0.0 => 1,
        Some(_) => 2,
    };
    for (d, n) in group(&s.destroyed, |d| (d.handle.clone(), d.kind, bucket(d))) {
        let times = if n > 1 {
            format!(" ×{n}")
        } else {
            String::new()
        };
        let when = match d.after_release_ms {
            None => "never, while the worker lived: something still held it".to_string(),
            Some(ms) if ms <= 0.0 => "during its release call".to_string(),
            Some(ms) => format!("{ms:.3} ms after its release"),
        };
        let _ = writeln!(
            o,
            "  {} {}{times} destroyed by the driver {when}",
            d.kind.as_str(),
            d.handle
        );
    }
    let _ = writeln!(
        o,
        "\nmemory   baseline {}  peak {}  after the worker exited {}",
        s.baseline_mib
            .map(|b| format!("{b:.1} MiB"))
            .unwrap_or_else(|| "-".into()),
        s.peak_above_baseline_mib
            .map(|b| format!("+{b:.1} MiB"))
            .unwrap_or_else(|| "-".into()),
        s.after_exit_mib
            .map(|b| format!("{b:+.1} MiB vs the start"))
            .unwrap_or_else(|| "-".into()),
    );
    for n in &s.notes {
        let _ = writeln!(o, "note     {n}");
    }
    if !s.claims.is_empty() {
        let _ = writeln!(o, "\nclaims (on this device and driver)");
        for c in &s.claims {
            let _ = writeln!(
                o,
                "  {} {} — {}: {}",
                verdict_mark(c.verdict),
                c.verdict.label(),
                c.name,
                c.text
            );
            let vals: Vec<String> = c
                .values
                .iter()
                .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
                .collect();
            let _ = writeln!(o, "      {}    {}", c.expr, vals.join(", "));
            if let Some(r) = &c.reason {
                let _ = writeln!(o, "      why: {r}");
            }
        }
    }
    let _ = writeln!(
        o,
        "\nstatus   {}{}",
        s.status,
        s.duration_ms
            .map(|d| format!(" in {:.3} s", d / 1e3))
            .unwrap_or_default()
    );
    o
}

/// Markdown, for bug reports and notes.
pub fn markdown(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## {} — {} (`{}`)\n", s.lab, s.title, s.variant);
    let _ = writeln!(
        o,
        "- device: {} · {} · driver {}",
        s.device, s.platform, s.driver
    );
    let _ = writeln!(o, "- memory: {}", memory_label(&s.memory_source));
    let p: Vec<String> = s
        .params
        .iter()
        .map(|(k, v)| format!("`{k}={}`", fmt_value(*v)))
        .collect();
    if !p.is_empty() {
        let _ = writeln!(o, "- params: {}", p.join(" "));
    }
    let _ = writeln!(o, "- status: {}\n", s.status);
    let _ = writeln!(
        o,
        "| line | call | result | host ms | mem Δ MiB |\n|---:|---|---|---:|---:|"
    );
    for l in &s.lines {
        let calls = if l.calls > 1 {
            format!(" ×{}", l.calls)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "| {} | `{}`{calls} | {} | {:.3} | {} |",
            l.line,
            l.text.replace('|', "\\|"),
            l.result,
            l.host_ms,
            fmt_delta(l.mem_delta_mib)
        );
    }
    if !s.claims.is_empty() {
        let _ = writeln!(
            o,
            "\n| claim | verdict | expression | values |\n|---|---|---|---|"
        );
        for c in &s.claims {
            let vals: Vec<String> = c
                .values
                .iter()
                .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
                .collect();
            let verdict = match &c.reason {
                Some(r) => format!("{} ({r})", c.verdict.label()),
                None => c.verdict.label().to_string(),
            };
            let _ = writeln!(
                o,
                "| {} | {verdict} | `{}` | {} |",
                c.name,
                c.expr,
                vals.join(", ")
            );
        }
    }
    let counts: Vec<String> = s
        .live_at_end
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(o, "\nLive at end: {}.", counts.join(", "));
    o
}

/// Several variants of one lab, one column each.
pub fn side_by_side(summaries: &[Summary]) -> String {
    let mut o = String::new();
    if summaries.is_empty() {
        return o;
    }
    let col = 24;
    let mut row = |label: &str, cells: Vec<String>| {
        let _ = write!(o, "{label:<28}");
        for c in cells {
            let c: String = c.chars().take(col - 1).collect();
            let _ = write!(o, "{c:<col$}");
        }
        let _ = writeln!(o);
    };
    row(
        "variant",
        summaries.iter().map(|s| s.variant.clone()).collect(),
    );
    row(
        "status",
        summaries.iter().map(|s| s.status.clone()).collect(),
    );
    row(
        "duration ms",
        summaries
            .iter()
            .map(|s| s.duration_ms.map(|d| format!("{d:.1}")).unwrap_or_default())
            .collect(),
    );
    row(
        "peak MiB above baseline",
        summaries
            .iter()
            .map(|s| {
                s.peak_above_baseline_mib
                    .map(|d| format!("{d:.1}"))
                    .unwrap_or_default()
            })
            .collect(),
    );
    let mut tags: Vec<String> = Vec::new();
    for s in summaries {
        for l in &s.lines {
            if let Some(t) = &l.tag
                && !tags.contains(t)
            {
                tags.push(t.clone());
            }
        }
    }
    for t in &tags {
        row(
            &format!("host ms [{t}]"),
            summaries
                .iter()
                .map(|s| {
                    s.lines
                        .iter()
                        .find(|l| l.tag.as_ref() == Some(t))
                        .map(|l| format!("{:.3}", l.host_ms))
                        .unwrap_or_else(|| "-".into())
                })
                .collect(),
        );
    }
    let mut claims: Vec<String> = Vec::new();
    for s in summaries {
        for c in &s.claims {
            if !claims.contains(&c.name) {
                claims.push(c.name.clone());
            }
        }
    }
    for name in &claims {
        row(
            name,
            summaries
                .iter()
                .map(|s| {
                    s.claims
                        .iter()
                        .find(|c| &c.name == name)
                        .map(|c| format!("{} {}", verdict_mark(c.verdict), c.verdict.label()))
                        .unwrap_or_else(|| "-".into())
                })
                .collect(),
        );
    }
    row(
        "leaked objects",
        summaries
            .iter()
            .map(|s| s.leaked.len().to_string())
            .collect(),
    );
    o
}
