//! One run as the dashboard holds it: the Run model, plus what the panels need to
//! draw a frame without sorting or searching (memory readings kept in time order,
//! each ledger object's latest state). Built one event at a time, live or replayed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::lab::ObjKind;
use crate::run::Run;
use crate::trace::{DeviceKind, EndStatus, Event, MemorySource, ObjectAction};

/// Where the events come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A worker started from the dashboard.
    Live {
        lab: String,
        variant: String,
        step: bool,
    },
    /// A recording opened read-only.
    Recording(PathBuf),
}

/// The ledger's view of one object, folded from its `object` events.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjState {
    pub kind: ObjKind,
    pub handle: Option<String>,
    pub line: Option<u32>,
    pub bytes: u64,
    /// The lab's references (0 = the lab released it).
    pub refcount: u32,
    pub refs: Vec<u64>,
    pub forgotten: bool,
    /// The driver's destructor callback fired.
    pub destroyed: bool,
}

impl ObjState {
    /// Still the program's: neither released by the lab nor freed by the driver.
    pub fn held(&self) -> bool {
        self.refcount > 0 && !self.destroyed
    }

    pub fn name(&self) -> String {
        self.handle
            .clone()
            .unwrap_or_else(|| self.kind.as_str().to_string())
    }
}

#[derive(Debug, Clone)]
pub struct RunState {
    pub origin: Origin,
    pub run: Run,
    /// (t_ns, bytes) as `Run::readings` defines them, kept sorted by time.
    pub readings: Vec<(u64, u64)>,
    /// Device-wide samples the parent took after the worker exited.
    pub after_exit: Vec<(u64, u64)>,
    pub objects: BTreeMap<u64, ObjState>,
    /// The event channel closed: nothing more will come.
    pub closed: bool,
    /// A recording could not be read.
    pub error: Option<String>,
}

impl RunState {
    pub fn new(origin: Origin) -> RunState {
        RunState {
            origin,
            run: Run::default(),
            readings: Vec::new(),
            after_exit: Vec::new(),
            objects: BTreeMap::new(),
            closed: false,
            error: None,
        }
    }

    pub fn from_events<'a>(origin: Origin, events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut s = RunState::new(origin);
        for e in events {
            s.apply(e);
        }
        s.closed = true;
        s
    }

    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Call(c) => {
                if let Some(m) = c.mem_before {
                    self.insert_reading(c.begin_ns, m);
                }
                if let Some(m) = c.mem_after {
                    self.insert_reading(c.end_ns, m);
                }
            }
            Event::Sample(s) => {
                if self.run.end.as_ref().is_some_and(|e| s.t_ns > e.t_ns) {
                    self.after_exit.push((s.t_ns, s.used_bytes));
                } else {
                    self.insert_reading(s.t_ns, s.process_bytes.unwrap_or(s.used_bytes));
                }
            }
            Event::Object(o) => {
                let st = self.objects.entry(o.id).or_insert_with(|| ObjState {
                    kind: o.kind,
                    handle: o.handle.clone(),
                    line: o.line,
                    bytes: o.bytes,
                    refcount: 0,
                    refs: o.refs.clone(),
                    forgotten: false,
                    destroyed: false,
                });
                match o.action {
                    ObjectAction::Destroyed => st.destroyed = true,
                    ObjectAction::Forgotten => st.forgotten = true,
                    _ => st.refcount = o.refcount,
                }
                if !o.refs.is_empty() {
                    st.refs = o.refs.clone();
                }
            }
            _ => {}
        }
        self.run.apply(event);
    }

    /// Arrivals are nearly in time order (worker readings lag the sampler by a
    /// call at most), so this is an append almost always.
    fn insert_reading(&mut self, t: u64, v: u64) {
        if self.readings.last().is_none_or(|(lt, _)| *lt <= t) {
            self.readings.push((t, v));
        } else {
            let pos = self.readings.partition_point(|(lt, _)| *lt <= t);
            self.readings.insert(pos, (t, v));
        }
    }

    pub fn running(&self) -> bool {
        !self.closed && matches!(self.origin, Origin::Live { .. })
    }

    pub fn step_mode(&self) -> bool {
        matches!(self.origin, Origin::Live { step: true, .. })
    }

    pub fn variant(&self) -> String {
        match (&self.origin, self.run.variant()) {
            (_, Some(v)) => v.to_string(),
            (Origin::Live { variant, .. }, None) => variant.clone(),
            (Origin::Recording(_), None) => String::new(),
        }
    }

    pub fn lab_id(&self) -> Option<String> {
        match (&self.origin, self.run.lab_id()) {
            (_, Some(id)) => Some(id.to_string()),
            (Origin::Live { lab, .. }, None) => Some(lab.clone()),
            (Origin::Recording(_), None) => None,
        }
    }

    /// Start of the time axis.
    pub fn t0(&self) -> u64 {
        self.run.t0()
    }

    /// Latest time any event speaks of: the right end of the axis. Never the wall
    /// clock, so a frame depends on the events alone.
    pub fn t_last(&self) -> u64 {
        let mut t = self.t0();
        if let Some((rt, _)) = self.readings.last() {
            t = t.max(*rt);
        }
        if let Some(c) = self.run.calls.last() {
            t = t.max(c.end_ns);
        }
        for s in self.run.spans.iter().rev().take(8) {
            t = t.max(s.end_ns);
        }
        if let Some(e) = &self.run.end {
            t = t.max(e.t_ns);
        }
        t
    }

    pub fn duration_ns(&self) -> u64 {
        self.t_last().saturating_sub(self.t0())
    }

    pub fn cpu_device(&self) -> bool {
        self.run.meta.as_ref().is_some_and(|m| {
            m.device.memory_source == MemorySource::Rss || m.device.kind == DeviceKind::Cpu
        })
    }

    /// Script line the worker will run next (what step mode pauses before).
    pub fn next_line(&self) -> Option<u32> {
        if self.run.end.is_some() {
            return None;
        }
        let script = &self.run.meta.as_ref()?.lab.as_ref()?.script;
        match self.run.calls.last().and_then(|c| c.line) {
            None => script.first().map(|(l, _)| *l),
            Some(last) => {
                let pos = script.iter().position(|(l, _)| *l == last)?;
                script.get(pos + 1).map(|(l, _)| *l)
            }
        }
    }

    /// Latest memory reading above the baseline, bytes (negative when below).
    pub fn device_above_baseline(&self) -> Option<i64> {
        let base = self.run.baseline()?;
        let (_, v) = self.readings.last()?;
        Some(*v as i64 - base as i64)
    }

    /// One word for the state: running, paused, finished, failed, cancelled…
    pub fn status_word(&self) -> String {
        if let Some(e) = &self.error {
            return format!("unreadable: {e}");
        }
        match self.run.end.as_ref().map(|e| &e.status) {
            Some(s @ EndStatus::Failed { .. }) | Some(s @ EndStatus::Crashed { .. }) => s.label(),
            Some(s) => s.label(),
            None if self.closed => "ended without an end event (partial)".into(),
            // A recording played back, before its end.
            None if matches!(self.origin, Origin::Recording(_)) => "replaying".into(),
            None if self.step_mode() => "paused (step mode)".into(),
            None if self.run.meta.is_none() => "starting".into(),
            None => "running".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Event, Sample};

    fn sample(t: u64, v: u64) -> Event {
        Event::Sample(Sample {
            t_ns: t,
            source: MemorySource::Rss,
            used_bytes: v,
            total_bytes: None,
            process_bytes: Some(v),
        })
    }

    #[test]
    fn readings_stay_sorted_when_events_arrive_out_of_order() {
        let s = RunState::from_events(
            Origin::Recording("x".into()),
            &[sample(10, 1), sample(30, 3), sample(20, 2)],
        );
        assert_eq!(s.readings, vec![(10, 1), (20, 2), (30, 3)]);
    }
}
