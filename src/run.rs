//! The Run model: events folded into what a report or a dashboard shows. Pure
//! data; live runs, recordings and replays all build it the same way, one event at
//! a time.

use std::collections::BTreeMap;

use crate::lab::ObjKind;
use crate::trace::{
    AgentEvent, Block, Call, CallStatus, ClaimVerdict, DeviceSpan, End, Event, Meta, Note,
    ObjectAction, ObjectEvent, Sample,
};

#[derive(Debug, Clone, Default)]
pub struct Run {
    pub meta: Option<Meta>,
    pub calls: Vec<Call>,
    pub objects: Vec<ObjectEvent>,
    pub spans: Vec<DeviceSpan>,
    pub blocks: Vec<Block>,
    pub samples: Vec<Sample>,
    pub notes: Vec<Note>,
    pub claims: Vec<ClaimVerdict>,
    pub end: Option<End>,
    /// Agents in a watched program's processes, as they attached and detached.
    pub agents: Vec<AgentEvent>,
    /// Live objects per kind right now, as the ledger's events say.
    pub live: BTreeMap<ObjKind, i64>,
    /// Bytes of live buffers right now.
    pub live_bytes: i64,
}

/// One script line with everything its executions did.
#[derive(Debug, Clone, PartialEq)]
pub struct LineSummary {
    pub line: u32,
    pub text: String,
    pub tag: Option<String>,
    pub driver: Option<String>,
    pub calls: u32,
    pub errors: u32,
    /// The last error's name, when any execution failed.
    pub error: Option<String>,
    pub expect_error: bool,
    pub host_ns_total: u64,
    pub host_ns_max: u64,
    /// Sum over executions of memory after minus before, bytes.
    pub mem_delta: Option<i64>,
}

impl LineSummary {
    pub fn host_ms_mean(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.host_ns_total as f64 / self.calls as f64 / 1e6
        }
    }
}

impl Run {
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Run {
        let mut run = Run::default();
        for e in events {
            run.apply(e);
        }
        run
    }

    /// Folds one event in.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Meta(m) => self.meta = Some(m.as_ref().clone()),
            Event::Call(c) => self.calls.push(c.clone()),
            Event::Object(o) => {
                let (count, bytes) = match o.action {
                    ObjectAction::Created => (1, o.bytes as i64),
                    ObjectAction::Released | ObjectAction::CleanedUp if o.refcount == 0 => {
                        (-1, -(o.bytes as i64))
                    }
                    _ => (0, 0),
                };
                *self.live.entry(o.kind).or_default() += count;
                self.live_bytes += bytes;
                self.objects.push(o.clone());
            }
            Event::DeviceSpan(s) => self.spans.push(s.clone()),
            Event::Block(b) => self.blocks.push(b.clone()),
            Event::Sample(s) => self.samples.push(s.clone()),
            Event::Note(n) => self.notes.push(n.clone()),
            Event::Claim(c) => self.claims.push(c.clone()),
            Event::End(e) => self.end = Some(e.clone()),
            Event::Agent(a) => self.agents.push(a.clone()),
        }
    }

    pub fn lab_id(&self) -> Option<&str> {
        self.meta.as_ref()?.lab.as_ref().map(|l| l.id.as_str())
    }

    pub fn variant(&self) -> Option<&str> {
        self.meta.as_ref()?.lab.as_ref().map(|l| l.variant.as_str())
    }

    pub fn baseline(&self) -> Option<u64> {
        self.meta.as_ref()?.baseline_bytes
    }

    /// Start of the run: the meta event's time, else the first call's.
    pub fn t0(&self) -> u64 {
        self.meta
            .as_ref()
            .map(|m| m.t_ns)
            .or_else(|| self.calls.first().map(|c| c.begin_ns))
            .unwrap_or(0)
    }

    /// Every execution of the line(s) carrying `tag`, in order.
    pub fn tagged_calls<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a Call> + 'a {
        self.calls
            .iter()
            .filter(move |c| c.tag.as_deref() == Some(tag))
    }

    pub fn tagged_block(&self, tag: &str) -> Option<&Block> {
        self.blocks.iter().find(|b| b.tag.as_deref() == Some(tag))
    }

    /// Memory readings in time order: the worker's own (around each call) and the
    /// parent's samples. Values are what the run calls "device memory".
    pub fn readings(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> =
            Vec::with_capacity(self.calls.len() * 2 + self.samples.len());
        for c in &self.calls {
            if let Some(m) = c.mem_before {
                out.push((c.begin_ns, m));
            }
            if let Some(m) = c.mem_after {
                out.push((c.end_ns, m));
            }
        }
        let end_ns = self.end.as_ref().map(|e| e.t_ns);
        for s in &self.samples {
            // After the worker ended its own reading of "its memory" is gone; samples
            // past the end describe the device, not the run.
            if end_ns.is_some_and(|e| s.t_ns > e) {
                continue;
            }
            out.push((s.t_ns, s.process_bytes.unwrap_or(s.used_bytes)));
        }
        out.sort_by_key(|(t, _)| *t);
        out
    }

    /// Highest memory reading of the run above the baseline, bytes.
    pub fn peak_above_baseline(&self) -> Option<u64> {
        let base = self.baseline()?;
        self.readings()
            .iter()
            .map(|(_, v)| v.saturating_sub(base))
            .max()
    }

    /// Samples the parent took after the worker was gone.
    pub fn after_exit(&self) -> Option<&Sample> {
        let end = self.end.as_ref()?.t_ns;
        self.samples.iter().rev().find(|s| s.t_ns > end)
    }

    /// One summary per script line, in script order (lines that never ran too).
    pub fn lines(&self) -> Vec<LineSummary> {
        let mut by_line: BTreeMap<u32, LineSummary> = BTreeMap::new();
        if let Some(lab) = self.meta.as_ref().and_then(|m| m.lab.as_ref()) {
            for (line, text) in &lab.script {
                by_line.insert(*line, LineSummary::empty(*line, text.clone()));
            }
        }
        for c in &self.calls {
            let Some(line) = c.line else { continue };
            let s = by_line
                .entry(line)
                .or_insert_with(|| LineSummary::empty(line, c.api.clone()));
            s.calls += 1;
            s.tag = c.tag.clone();
            s.expect_error = c.expect_error;
            if c.status != CallStatus::Directive {
                s.driver = Some(c.driver.clone());
            }
            if let CallStatus::Error { name, .. } = &c.status {
                s.errors += 1;
                s.error = Some(name.clone());
            }
            let d = c.end_ns.saturating_sub(c.begin_ns);
            s.host_ns_total += d;
            s.host_ns_max = s.host_ns_max.max(d);
            if let (Some(b), Some(a)) = (c.mem_before, c.mem_after) {
                *s.mem_delta.get_or_insert(0) += a as i64 - b as i64;
            }
        }
        for b in &self.blocks {
            if let Some(s) = by_line.get_mut(&b.line) {
                s.tag = b.tag.clone();
                s.calls = b.iterations;
                s.host_ns_total = b.end_ns.saturating_sub(b.begin_ns);
                s.host_ns_max = s.host_ns_total;
                s.mem_delta = match (b.mem_before, b.mem_after) {
                    (Some(x), Some(y)) => Some(y as i64 - x as i64),
                    _ => None,
                };
            }
        }
        by_line.into_values().collect()
    }

    /// Live objects per kind at the end: the worker's own list of what was left.
    pub fn live_at_end(&self) -> BTreeMap<ObjKind, usize> {
        let mut out: BTreeMap<ObjKind, usize> = ObjKind::ALL.iter().map(|k| (*k, 0)).collect();
        if let Some(end) = &self.end {
            for l in &end.leaked {
                *out.entry(l.kind).or_default() += 1;
            }
        } else {
            for (k, n) in &self.live {
                out.insert(*k, (*n).max(0) as usize);
            }
        }
        out
    }

    pub fn duration_ns(&self) -> Option<u64> {
        Some(self.end.as_ref()?.t_ns.saturating_sub(self.t0()))
    }
}

impl LineSummary {
    fn empty(line: u32, text: String) -> Self {
        LineSummary {
            line,
            text,
            tag: None,
            driver: None,
            calls: 0,
            errors: 0,
            error: None,
            expect_error: false,
            host_ns_total: 0,
            host_ns_max: 0,
            mem_delta: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::*;

    fn call(seq: u64, line: u32, begin: u64, end: u64, mem: (u64, u64)) -> Event {
        Event::Call(Call {
            seq,
            pid: 1,
            thread: 0,
            line: Some(line),
            iter: vec![],
            tag: None,
            api: "clFinish".into(),
            driver: "clFinish".into(),
            begin_ns: begin,
            end_ns: end,
            status: CallStatus::Ok,
            expect_error: false,
            mem_before: Some(mem.0),
            mem_after: Some(mem.1),
            object: None,
            cuda: None,
        })
    }

    #[test]
    fn lines_sum_their_executions() {
        let run = Run::from_events(&[
            call(0, 4, 0, 1_000_000, (10, 20)),
            call(1, 4, 2_000_000, 5_000_000, (20, 25)),
            call(2, 5, 6_000_000, 7_000_000, (25, 5)),
        ]);
        let lines = run.lines();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].calls, 2);
        assert_eq!(lines[0].mem_delta, Some(15));
        assert!((lines[0].host_ms_mean() - 2.0).abs() < 1e-9);
        assert_eq!(lines[1].mem_delta, Some(-20));
    }

    #[test]
    fn object_events_keep_live_counts() {
        let obj = |action, refcount| {
            Event::Object(ObjectEvent {
                t_ns: 0,
                id: 1,
                kind: ObjKind::Buffer,
                action,
                handle: Some("buf".into()),
                bytes: 64,
                refcount,
                refs: vec![],
                line: None,
            })
        };
        let run = Run::from_events(&[
            obj(ObjectAction::Created, 1),
            obj(ObjectAction::Retained, 2),
            obj(ObjectAction::Released, 1),
        ]);
        assert_eq!(run.live[&ObjKind::Buffer], 1);
        assert_eq!(run.live_bytes, 64);
        let run = Run::from_events(&[
            obj(ObjectAction::Created, 1),
            obj(ObjectAction::Released, 0),
        ]);
        assert_eq!(run.live[&ObjKind::Buffer], 0);
    }
}
