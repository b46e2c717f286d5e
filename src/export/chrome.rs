//! Chrome trace-event JSON (what chrome://tracing and Perfetto open) from a Run:
//! the host lane with every call and its arguments, one track per queue or stream
//! with the device spans, device memory as a counter track, and each object's life
//! as async slices (held by the lab, then held by the driver until destroyed).

use serde_json::{Value, json};

use crate::run::Run;
use crate::trace::{CallStatus, ObjectAction};

const HOST_TID: u64 = 1;
/// Queue tracks sit above every plausible host thread id.
const QUEUE_TID_BASE: u64 = 1000;

/// The whole trace as one JSON document.
pub fn trace(run: &Run) -> Value {
    let t0 = run.t0();
    let us = |t: u64| (t as f64 - t0 as f64) / 1e3;
    let pid = run.meta.as_ref().map_or(0, |m| m.pid);
    let end_ns = run
        .end
        .as_ref()
        .map(|e| e.t_ns)
        .or_else(|| run.calls.last().map(|c| c.end_ns))
        .unwrap_or(t0);
    let mut events: Vec<Value> = Vec::new();

    let title = match (&run.meta, run.meta.as_ref().and_then(|m| m.lab.as_ref())) {
        (Some(m), Some(l)) => format!("gpulab · {} [{}] · {}", l.id, l.variant, m.device.name),
        (Some(m), None) => format!("gpulab · {}", m.device.name),
        _ => "gpulab".to_string(),
    };
    events.push(
        json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": title}}),
    );
    events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": HOST_TID, "args": {"name": "host"}}));
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
        events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": QUEUE_TID_BASE + q, "args": {"name": format!("queue {name}")}}));
    }

    let mut timed: Vec<Value> = Vec::new();
    let script = run
        .meta
        .as_ref()
        .and_then(|m| m.lab.as_ref())
        .map(|l| &l.script);
    for c in &run.calls {
        let text = script.and_then(|s| {
            s.iter()
                .find(|(l, _)| Some(*l) == c.line)
                .map(|(_, t)| t.clone())
        });
        let status = match &c.status {
            CallStatus::Ok => "ok".to_string(),
            CallStatus::Directive => "directive".to_string(),
            CallStatus::Error { name, code } => format!("{name} ({code})"),
        };
        timed.push(json!({
            "name": c.api, "cat": "call", "ph": "X", "pid": pid, "tid": HOST_TID,
            "ts": us(c.begin_ns), "dur": (c.end_ns.saturating_sub(c.begin_ns)) as f64 / 1e3,
            "args": {
                "line": c.line, "text": text, "driver": c.driver, "status": status,
                "tag": c.tag, "iteration": c.iter, "mem_before": c.mem_before, "mem_after": c.mem_after,
            },
        }));
    }
    for s in &run.spans {
        timed.push(json!({
            "name": s.name, "cat": "device", "ph": "X", "pid": pid, "tid": QUEUE_TID_BASE + s.queue,
            "ts": us(s.begin_ns), "dur": (s.end_ns.saturating_sub(s.begin_ns)) as f64 / 1e3,
            "args": {"line": s.line, "call_seq": s.call_seq, "queued_us": us(s.queued_ns)},
        }));
    }
    for &(t, bytes) in &run.readings {
        timed.push(json!({
            "name": "device memory", "ph": "C", "pid": pid, "tid": 0, "ts": us(t),
            "args": {"MiB": crate::units::mib(bytes)},
        }));
    }
    for n in &run.notes {
        timed.push(json!({"name": n.text, "cat": "note", "ph": "i", "s": "p", "pid": pid, "tid": HOST_TID, "ts": us(n.t_ns)}));
    }
    lifetimes(run, &mut timed, pid, &us, end_ns);

    timed.sort_by(|a, b| ts(a).total_cmp(&ts(b)));
    events.extend(timed);
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "gpulab_version": run.meta.as_ref().map(|m| m.gpulab_version.clone()),
            "device": run.meta.as_ref().map(|m| m.device.name.clone()),
            "driver": run.meta.as_ref().map(|m| m.device.driver_version.clone()),
            "claims": run.claims.iter().map(|c| json!({"name": c.name, "verdict": c.verdict.label(), "values": c.values.iter().map(|(k, v)| (k.clone(), if v.is_finite() { json!(v) } else { json!("never") })).collect::<serde_json::Map<_, _>>()})).collect::<Vec<_>>(),
        },
    })
}

fn ts(v: &Value) -> f64 {
    v.get("ts").and_then(Value::as_f64).unwrap_or(f64::MIN)
}

/// Each object: "held by the lab" from creation to its last release, then "held by
/// the driver" until the destructor fired (or the run ended without it).
fn lifetimes(run: &Run, out: &mut Vec<Value>, pid: u32, us: &impl Fn(u64) -> f64, end_ns: u64) {
    let mut ids: Vec<u64> = run.objects.iter().map(|o| o.id).collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        let evs: Vec<_> = run.objects.iter().filter(|o| o.id == id).collect();
        let Some(created) = evs.iter().find(|o| o.action == ObjectAction::Created) else {
            continue;
        };
        let name = format!(
            "{} {}",
            created.kind.as_str(),
            created.handle.clone().unwrap_or_else(|| format!("#{id}"))
        );
        let released = evs
            .iter()
            .filter(|o| {
                matches!(o.action, ObjectAction::Released | ObjectAction::CleanedUp)
                    && o.refcount == 0
            })
            .map(|o| o.t_ns)
            .next_back();
        let destroyed = evs
            .iter()
            .find(|o| o.action == ObjectAction::Destroyed)
            .map(|o| o.t_ns);
        let mut slice = |label: &str, from: u64, to: u64| {
            let to = to.max(from);
            let idv = format!("{id}-{label}");
            let args = json!({"bytes": created.bytes, "line": created.line, "refs": created.refs});
            out.push(json!({"name": name, "cat": label, "ph": "b", "id": idv, "pid": pid, "tid": HOST_TID, "ts": us(from), "args": args}));
            out.push(json!({"name": name, "cat": label, "ph": "e", "id": idv, "pid": pid, "tid": HOST_TID, "ts": us(to)}));
        };
        let lab_end = released.unwrap_or(end_ns);
        slice("held by the lab", created.t_ns, lab_end);
        if let Some(r) = released {
            match destroyed {
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
