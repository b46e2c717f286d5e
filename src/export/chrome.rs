//! Chrome trace-event JSON (what chrome://tracing and Perfetto open) from a Run:
//! the host lane with every call and its arguments, one track per queue or stream
//! with the device spans, device memory as a counter track (named by what it
//! reads: NVML's device memory, or the worker's RSS on a CPU device), a flow arrow
//! from each enqueue or launch to the device work it started (as Nsight Systems
//! links them), and each object's life as async slices (held by the lab, then held
//! by the driver until destroyed).
//!
//! Events are typed and written straight to the output: a generic JSON tree of a
//! 58 MB recording (200,000 calls) took 2.2 GB and 7.7 s to build.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::run::Run;
use crate::trace::{CallStatus, MemorySource};

const HOST_TID: u64 = 1;
/// Queue tracks sit above every plausible host thread id.
const QUEUE_TID_BASE: u64 = 1000;

/// One trace event; fields a phase does not use are left out.
#[derive(Serialize)]
struct TraceEvent<'a> {
    name: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'a str>,
    ph: &'static str,
    pid: u32,
    tid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    /// Instant events: their scope (`p`, the process).
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    /// Async slices and flows: the id pairing a begin with its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// Flow ends: bind to the slice that encloses them (`e`), the device span.
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    #[serde(skip_serializing_if = "Args::is_none")]
    args: Args<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Args<'a> {
    None,
    Name {
        name: Cow<'a, str>,
    },
    Call {
        line: Option<u32>,
        text: Option<&'a str>,
        driver: &'a str,
        status: Cow<'a, str>,
        tag: Option<&'a str>,
        iteration: &'a [u32],
        mem_before: Option<u64>,
        mem_after: Option<u64>,
    },
    Span {
        line: Option<u32>,
        call_seq: u64,
        queued_us: f64,
    },
    Counter {
        #[serde(rename = "MiB")]
        mib: f64,
    },
    Object {
        bytes: u64,
        line: Option<u32>,
        refs: &'a [u64],
    },
}

impl Args<'_> {
    fn is_none(&self) -> bool {
        matches!(self, Args::None)
    }
}

impl<'a> TraceEvent<'a> {
    fn new(name: impl Into<Cow<'a, str>>, ph: &'static str, pid: u32, tid: u64) -> Self {
        TraceEvent {
            name: name.into(),
            cat: None,
            ph,
            pid,
            tid,
            ts: None,
            dur: None,
            s: None,
            id: None,
            bp: None,
            args: Args::None,
        }
    }
}

#[derive(Serialize)]
struct Claim<'a> {
    name: &'a str,
    /// Whose claim, in a trace of several runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    variant: Option<&'a str>,
    verdict: &'a str,
    values: BTreeMap<&'a str, serde_json::Value>,
}

#[derive(Serialize)]
struct OtherData<'a> {
    gpulab_version: Option<&'a str>,
    device: Option<&'a str>,
    driver: Option<&'a str>,
    claims: Vec<Claim<'a>>,
}

#[derive(Serialize)]
struct Document<'a> {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<TraceEvent<'a>>,
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    #[serde(rename = "otherData")]
    other_data: OtherData<'a>,
}

/// Writes the whole trace as one JSON document to `out`.
pub fn write(run: &Run, out: impl Write) -> serde_json::Result<()> {
    write_all(&[run], out)
}

/// Several runs in one trace (`export --compare`), each a process of its own with
/// its time from its own start, so the two runs line up as Perfetto stacks them.
pub fn write_all(runs: &[&Run], out: impl Write) -> serde_json::Result<()> {
    serde_json::to_writer(out, &document(runs))
}

fn document<'a>(runs: &[&'a Run]) -> Document<'a> {
    let mut events = Vec::new();
    let mut timed = Vec::new();
    let mut pids = Vec::new();
    for run in runs {
        // Two recordings may carry the same worker pid; a process is one track.
        let mut pid = run.meta.as_ref().map_or(0, |m| m.pid);
        while pids.contains(&pid) {
            pid = pid.wrapping_add(1);
        }
        pids.push(pid);
        process(run, pid, &mut events, &mut timed);
    }
    timed.sort_by(|a, b| {
        a.ts.unwrap_or(f64::MIN)
            .total_cmp(&b.ts.unwrap_or(f64::MIN))
    });
    events.extend(timed);
    let first = runs.first().and_then(|r| r.meta.as_ref());
    let several = runs.len() > 1;
    Document {
        trace_events: events,
        display_time_unit: "ms",
        other_data: OtherData {
            gpulab_version: first.map(|m| m.gpulab_version.as_str()),
            device: first.map(|m| m.device.name.as_str()),
            driver: first.map(|m| m.device.driver_version.as_str()),
            claims: runs
                .iter()
                .flat_map(|run| {
                    let variant = run.variant().filter(|_| several);
                    run.claims.iter().map(move |c| Claim {
                        name: &c.name,
                        variant,
                        verdict: c.verdict.label(),
                        values: c
                            .values
                            .iter()
                            .map(|(k, v)| {
                                let v = if v.is_finite() {
                                    serde_json::json!(v)
                                } else {
                                    serde_json::json!("never")
                                };
                                (k.as_str(), v)
                            })
                            .collect(),
                    })
                })
                .collect(),
        },
    }
}

/// One run's tracks: its metadata into `events`, everything timed into `timed`.
fn process<'a>(
    run: &'a Run,
    pid: u32,
    events: &mut Vec<TraceEvent<'a>>,
    timed: &mut Vec<TraceEvent<'a>>,
) {
    let t0 = run.t0();
    let us = |t: u64| (t as f64 - t0 as f64) / 1e3;
    let end_ns = run
        .end
        .as_ref()
        .map(|e| e.t_ns)
        .or_else(|| run.calls.last().map(|c| c.end_ns))
        .unwrap_or(t0);

    let title = match (&run.meta, run.meta.as_ref().and_then(|m| m.lab.as_ref())) {
        (Some(m), Some(l)) => format!("gpulab · {} [{}] · {}", l.id, l.variant, m.device.name),
        (Some(m), None) => format!("gpulab · {}", m.device.name),
        _ => "gpulab".to_string(),
    };
    let named = |name: &'static str, tid: u64, value: Cow<'static, str>| TraceEvent {
        args: Args::Name { name: value },
        ..TraceEvent::new(name, "M", pid, tid)
    };
    events.push(named("process_name", 0, title.into()));
    events.push(named("thread_name", HOST_TID, "host".into()));
    let mut queues: Vec<(u64, String)> = Vec::new();
    for s in &run.spans {
        if !queues.iter().any(|(q, _)| *q == s.queue) {
            let name = s
                .queue_name
                .clone()
                .unwrap_or_else(|| format!("#{}", s.queue));
            queues.push((s.queue, name));
        }
    }
    for (q, name) in &queues {
        events.push(named(
            "thread_name",
            QUEUE_TID_BASE + q,
            format!("queue {name}").into(),
        ));
    }

    let script: BTreeMap<u32, &str> = run
        .meta
        .as_ref()
        .and_then(|m| m.lab.as_ref())
        .map(|l| l.script.iter().map(|(n, t)| (*n, t.as_str())).collect())
        .unwrap_or_default();
    for c in &run.calls {
        let status: Cow<str> = match &c.status {
            CallStatus::Ok => "ok".into(),
            CallStatus::Directive => "directive".into(),
            CallStatus::Error { name, code } => format!("{name} ({code})").into(),
        };
        timed.push(TraceEvent {
            cat: Some("call"),
            ts: Some(us(c.begin_ns)),
            dur: Some(c.end_ns.saturating_sub(c.begin_ns) as f64 / 1e3),
            args: Args::Call {
                line: c.line,
                text: c.line.and_then(|l| script.get(&l).copied()),
                driver: &c.driver,
                status,
                tag: c.tag.as_deref(),
                iteration: &c.iter,
                mem_before: c.mem_before,
                mem_after: c.mem_after,
            },
            ..TraceEvent::new(c.api.as_str(), "X", pid, HOST_TID)
        });
    }
    for s in &run.spans {
        timed.push(TraceEvent {
            cat: Some("device"),
            ts: Some(us(s.begin_ns)),
            dur: Some(s.end_ns.saturating_sub(s.begin_ns) as f64 / 1e3),
            args: Args::Span {
                line: s.line,
                call_seq: s.call_seq,
                queued_us: us(s.queued_ns),
            },
            ..TraceEvent::new(s.name.as_str(), "X", pid, QUEUE_TID_BASE + s.queue)
        });
    }
    flows(run, timed, pid, &us);
    let counter = counter_name(run);
    for &(t, bytes) in &run.readings {
        timed.push(TraceEvent {
            ts: Some(us(t)),
            args: Args::Counter {
                mib: crate::units::mib(bytes),
            },
            ..TraceEvent::new(counter, "C", pid, 0)
        });
    }
    for n in &run.notes {
        timed.push(TraceEvent {
            cat: Some("note"),
            ts: Some(us(n.t_ns)),
            s: Some("p"),
            ..TraceEvent::new(n.text.as_str(), "i", pid, HOST_TID)
        });
    }
    lifetimes(run, timed, pid, &us, end_ns);
}

/// What the memory counter reads, by the run's memory source: NVML's device memory,
/// or on a CPU device (and for a watched program) a process's resident memory.
fn counter_name(run: &Run) -> &'static str {
    let Some(meta) = &run.meta else {
        return "device memory";
    };
    match (meta.device.memory_source, meta.watch.is_some()) {
        (MemorySource::Rss, true) => "program RSS",
        (MemorySource::Rss, false) => "worker RSS",
        _ => "device memory",
    }
}

/// An arrow from each enqueue or launch on the host lane to the device span it
/// started: a flow start inside the call's slice, its end bound to the span.
fn flows<'a>(run: &'a Run, out: &mut Vec<TraceEvent<'a>>, pid: u32, us: &impl Fn(u64) -> f64) {
    let calls: BTreeMap<u64, (u64, u64)> = run
        .calls
        .iter()
        .map(|c| (c.seq, (c.begin_ns, c.end_ns)))
        .collect();
    for (i, s) in run.spans.iter().enumerate() {
        let Some(&(begin, end)) = calls.get(&s.call_seq) else {
            continue;
        };
        let id = Some(format!("flow-{i}"));
        out.push(TraceEvent {
            cat: Some("flow"),
            ts: Some(us(begin + (end.saturating_sub(begin)) / 2)),
            id: id.clone(),
            ..TraceEvent::new(s.name.as_str(), "s", pid, HOST_TID)
        });
        out.push(TraceEvent {
            cat: Some("flow"),
            ts: Some(us(s.begin_ns)),
            id,
            bp: Some("e"),
            ..TraceEvent::new(s.name.as_str(), "f", pid, QUEUE_TID_BASE + s.queue)
        });
    }
}

/// Each object: "held by the lab" from creation to its last release, then "held by
/// the driver" until the destructor fired (or the run ended without it), from the
/// ledger the run folded.
fn lifetimes<'a>(
    run: &'a Run,
    out: &mut Vec<TraceEvent<'a>>,
    pid: u32,
    us: &impl Fn(u64) -> f64,
    end_ns: u64,
) {
    for (id, life) in &run.ledger {
        let name = format!(
            "{} {}",
            life.kind.as_str(),
            life.handle.clone().unwrap_or_else(|| format!("#{id}"))
        );
        let mut slice = |label: &'static str, from: u64, to: u64| {
            let to = to.max(from);
            let idv = format!("{id}-{label}");
            out.push(TraceEvent {
                cat: Some(label),
                ts: Some(us(from)),
                id: Some(idv.clone()),
                args: Args::Object {
                    bytes: life.bytes,
                    line: life.line,
                    refs: &life.refs,
                },
                ..TraceEvent::new(name.clone(), "b", pid, HOST_TID)
            });
            out.push(TraceEvent {
                cat: Some(label),
                ts: Some(us(to)),
                id: Some(idv),
                ..TraceEvent::new(name.clone(), "e", pid, HOST_TID)
            });
        };
        let released = life.released_ns;
        slice(
            "held by the lab",
            life.created_ns,
            released.unwrap_or(end_ns),
        );
        if let Some(r) = released {
            match life.destroyed_ns {
                Some(d) if d > r => slice("held by the driver", r, d),
                Some(_) => {}
                None => slice(
                    "held by the driver (never destroyed while the worker lived)",
                    r,
                    end_ns,
                ),
            }
        }
    }
}
