//! One run as the dashboard holds it: the Run model (which keeps what a frame needs
//! without sorting or searching) and where its events come from. Built one event
//! at a time, live or replayed.

use std::path::PathBuf;

use std::collections::BTreeMap;

use crate::lab::api::Api;
use crate::report::watch::WatchReport;
use crate::run::{Finding, Run};
use crate::source::Keeper;
use crate::trace::{CallStatus, DeviceKind, EndStatus, Event, MemorySource};

/// Where the events come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Feed {
    /// A worker started from the dashboard.
    Live {
        lab: String,
        variant: String,
        step: bool,
    },
    /// A recording opened read-only.
    Recording(PathBuf),
    /// A program `gpulab watch --dashboard` started, live.
    Watched { command: String },
}

/// A run's fold, and beside it what its session keeps (its recordings, and
/// the lab whose claims are judged when the stream ends): the dashboard's
/// half of a [`crate::source::Session`].
#[derive(Debug)]
pub struct RunState {
    pub origin: Feed,
    pub run: Run,
    pub keeper: Keeper,
    /// What went wrong with the run's recordings, once they are finished.
    pub recording_problems: Vec<String>,
    /// The files the run was written to whole, once it closed (the history's,
    /// and the one `R` asked for).
    pub recorded: Vec<std::path::PathBuf>,
    /// The event channel closed: nothing more will come.
    pub closed: bool,
    /// A recording could not be read.
    pub error: Option<String>,
    /// Device work a lab queued whose span has not come yet, by the seq of the
    /// call that queued it: its enqueue time. Kept as events arrive, so a frame
    /// reads it without scanning the calls.
    pub in_flight: BTreeMap<u64, u64>,
    /// The error the lab looked for, found once when the run ends (the calls
    /// are all in by then), so a frame never scans them.
    pub finding: Option<Finding>,
    /// A live lab run: how long one call may be in flight before it is shown
    /// as stuck (the lab's plan: five times what its script asks for, at
    /// least 5 s).
    pub stuck_after: Option<std::time::Duration>,
    /// The call the run is stuck in, as the frame tick last found it.
    pub stuck: Option<Stuck>,
    /// A watched program's findings (its report, as `watch` would print it)
    /// as the run stood when the loop last prepared a frame
    /// ([`RunState::refresh_findings`]): the verdict panel reads them and
    /// builds nothing.
    findings: Option<WatchReport>,
    /// Events were folded since the findings were taken.
    findings_stale: bool,
    /// Class mode: what was predicted of each claim before the run, taken
    /// into the run (and its recordings) right after its header.
    pub predicted: Vec<(String, crate::trace::Predicted)>,
}

/// A live call in flight far longer than its lab asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub line: Option<u32>,
    pub api: String,
    /// Whole seconds it has been in flight.
    pub secs: u64,
}

impl RunState {
    pub fn new(origin: Feed) -> RunState {
        RunState {
            origin,
            run: Run::default(),
            keeper: Keeper::default(),
            recording_problems: Vec::new(),
            recorded: Vec::new(),
            closed: false,
            error: None,
            in_flight: BTreeMap::new(),
            finding: None,
            stuck_after: None,
            stuck: None,
            findings: None,
            findings_stale: false,
            predicted: Vec::new(),
        }
    }

    /// The watched program's findings so far (`gpulab watch`'s report, as it
    /// would print it at the last frame); None before the first frame, and
    /// for a lab.
    pub fn findings(&self) -> Option<&WatchReport> {
        self.findings.as_ref()
    }

    /// Takes a watched program's findings again when events came since: once
    /// a frame at most, by the loop before it draws, not by a panel.
    pub fn refresh_findings(&mut self) {
        let watched = self.run.meta().is_some_and(|m| m.watch.is_some());
        if self.findings_stale && watched {
            self.findings = Some(WatchReport::from_run(&self.run));
        }
        self.findings_stale = false;
    }

    /// Whether the call in flight has been so far longer than the lab asked
    /// for that the run looks stuck, at `now_ns`; true when that changed what
    /// the screen says. Whole seconds, so a stuck run redraws once a second.
    pub fn check_stuck(&mut self, now_ns: u64) -> bool {
        let stuck = match (&self.run.in_flight(), self.stuck_after, &self.run.end()) {
            (Some(c), Some(after), None) => {
                let for_ns = now_ns.saturating_sub(c.t_ns);
                (u128::from(for_ns) >= after.as_nanos()).then(|| Stuck {
                    line: c.line,
                    api: c.api.as_str().to_string(),
                    secs: for_ns / 1_000_000_000,
                })
            }
            _ => None,
        };
        let changed = stuck != self.stuck;
        self.stuck = stuck;
        changed
    }

    pub fn from_events<'a>(origin: Feed, events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut s = RunState::new(origin);
        for e in events {
            s.apply(e);
        }
        s.closed = true;
        s.refresh_findings();
        s
    }

    /// Folds `event` and records it; after the run's header, the
    /// predictions made before it.
    pub fn take(&mut self, event: Event) {
        let after = crate::trace::Prediction::after(&event, &self.predicted);
        self.apply(&event);
        self.keeper.push(event);
        if !after.is_empty() {
            self.predicted.clear();
        }
        for e in after {
            self.take(e);
        }
    }

    /// The stream has ended: the lab's claims judged and folded in, the
    /// recordings finished.
    pub fn close(&mut self, error: Option<String>) {
        self.closed = true;
        self.error = error;
        for claim in self.keeper.close(&self.run) {
            self.apply(&claim);
        }
        let keeper = std::mem::take(&mut self.keeper);
        let recorded = keeper.finish();
        self.recording_problems = recorded
            .iter()
            .filter_map(crate::source::Recorded::problem)
            .collect();
        self.recorded = recorded
            .iter()
            .filter_map(|r| match r {
                crate::source::Recorded::Whole(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
    }

    pub fn apply(&mut self, event: &Event) {
        self.run.apply(event);
        self.findings_stale = true;
        match event {
            Event::Call(c)
                if c.line.is_some()
                    && c.status == CallStatus::Ok
                    && c.api.api().is_some_and(Api::queues_device_work) =>
            {
                self.in_flight.insert(c.seq, c.begin_ns);
            }
            Event::DeviceSpan(s) => {
                self.in_flight.remove(&s.call_seq);
            }
            Event::End(_) => {
                self.in_flight.clear();
                self.finding = self.run.finding();
            }
            _ => {}
        }
    }

    pub fn running(&self) -> bool {
        !self.closed && matches!(self.origin, Feed::Live { .. } | Feed::Watched { .. })
    }

    pub fn step_mode(&self) -> bool {
        matches!(self.origin, Feed::Live { step: true, .. })
    }

    /// The run was stepped: started so here, or recorded so.
    pub fn stepped(&self) -> bool {
        self.step_mode()
            || self
                .run
                .meta()
                .as_ref()
                .and_then(|m| m.lab.as_ref())
                .is_some_and(|l| l.stepped)
    }

    pub fn variant(&self) -> String {
        match (&self.origin, self.run.variant()) {
            (_, Some(v)) => v.to_string(),
            (Feed::Live { variant, .. }, None) => variant.clone(),
            (Feed::Recording(_) | Feed::Watched { .. }, None) => String::new(),
        }
    }

    pub fn lab_id(&self) -> Option<String> {
        match (&self.origin, self.run.lab_id()) {
            (_, Some(id)) => Some(id.to_string()),
            (Feed::Live { lab, .. }, None) => Some(lab.clone()),
            (Feed::Recording(_) | Feed::Watched { .. }, None) => None,
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
        if let Some((rt, _)) = self.run.readings().last() {
            t = t.max(*rt);
        }
        if let Some(c) = self.run.calls().last() {
            t = t.max(c.end_ns);
        }
        for lane in &self.run.ranks().gpus {
            if let Some(p) = lane.points.last() {
                t = t.max(p.t_ns);
            }
        }
        for s in self.run.spans().iter().rev().take(8) {
            t = t.max(s.end_ns);
        }
        if let Some(e) = &self.run.end() {
            t = t.max(e.t_ns);
        }
        t
    }

    pub fn duration_ns(&self) -> u64 {
        self.t_last().saturating_sub(self.t0())
    }

    pub fn cpu_device(&self) -> bool {
        self.run.meta().is_some_and(|m| {
            m.device.memory_source == MemorySource::Rss || m.device.kind == DeviceKind::Cpu
        })
    }

    /// Script line the worker will run next (what step mode pauses before).
    pub fn next_line(&self) -> Option<u32> {
        if self.run.end().is_some() {
            return None;
        }
        // The call the worker is in now, when it said so.
        if let Some(line) = self.run.in_flight().and_then(|c| c.line) {
            return Some(line);
        }
        let script = &self.run.meta()?.lab.as_ref()?.script;
        match self.run.calls().last().and_then(|c| c.line) {
            None => script.first().map(|(l, _)| *l),
            Some(last) => {
                let pos = script.iter().position(|(l, _)| *l == last)?;
                script.get(pos + 1).map(|(l, _)| *l)
            }
        }
    }

    /// Latest memory reading above the baseline, bytes (negative when below).
    pub fn device_above_baseline(&self) -> Option<i64> {
        self.run.device_above_baseline()
    }

    /// One word for the state: running, paused, finished, failed, cancelled…
    pub fn status_word(&self) -> String {
        if let Some(e) = &self.error {
            return format!("unreadable: {e}");
        }
        match self.run.end().map(|e| &e.status) {
            Some(s @ EndStatus::Failed { .. }) | Some(s @ EndStatus::Crashed { .. }) => s.label(),
            Some(s) => s.label(),
            None if self.closed => "ended without an end event (partial)".into(),
            // A recording played back, before its end.
            None if matches!(self.origin, Feed::Recording(_)) => "replaying".into(),
            None if let Some(st) = &self.stuck => {
                format!("stuck {} s in {} · Esc ends it", st.secs, st.api)
            }
            None if self.step_mode() => "paused (step mode)".into(),
            None if self.run.meta().is_none() => "starting".into(),
            None => "running".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Call, Calling};

    const S: u64 = 1_000_000_000;

    /// A live call shows as stuck once it has been in flight longer than the
    /// lab's plan allows, by name, line and whole seconds; the answer ends it,
    /// and a run without a plan (a recording) is never stuck.
    #[test]
    fn a_call_in_flight_too_long_is_stuck_until_it_returns() {
        let mut state = RunState::new(Feed::Live {
            lab: "cl-forgotten-events".into(),
            variant: "released".into(),
            step: false,
        });
        state.apply(&Event::Calling(Calling {
            seq: 83,
            line: Some(84),
            iter: vec![16],
            api: "clReleaseContext".into(),
            t_ns: 100 * S,
        }));
        assert!(!state.check_stuck(200 * S), "no plan, never stuck");
        state.stuck_after = Some(std::time::Duration::from_secs(5));
        assert!(!state.check_stuck(104 * S));
        assert_eq!(state.status_word(), "starting", "no meta yet");
        assert!(state.check_stuck(112 * S));
        assert_eq!(
            state.status_word(),
            "stuck 12 s in clReleaseContext · Esc ends it"
        );
        assert_eq!(state.stuck.as_ref().and_then(|s| s.line), Some(84));
        assert!(!state.check_stuck(112 * S + S / 2), "redrawn once a second");
        assert_eq!(state.next_line(), Some(84));
        state.apply(&Event::Call(Call {
            seq: 83,
            line: Some(84),
            api: "clReleaseContext".into(),
            begin_ns: 100 * S,
            end_ns: 113 * S,
            ..Call::default()
        }));
        assert!(state.check_stuck(114 * S));
        assert_eq!(state.stuck, None);
    }
}
