//! Playing a recording in slot A: the frame tick moves the play clock, the replay
//! keys move the cursor, and `R` arms recording of the next live run.

use std::path::PathBuf;

use crate::keys::Action;
use crate::playback::Playback;
use crate::runstate::{Feed, RunState};
use crate::terminal::FRAME;
use crate::trace::Event;
use crate::verdict::LessonFill;

use super::{A, App, B, Entry};

impl App {
    /// A recording is in slot A, played back, and it is what the panels show;
    /// in compare mode, recordings on both sides, played back together.
    pub fn replaying(&self) -> bool {
        let recording = |slot: usize| {
            self.slots[slot]
                .as_ref()
                .is_some_and(|r| matches!(r.origin, Feed::Recording(_)))
        };
        if self.compare {
            return self.playback.is_some() && recording(A) && recording(B);
        }
        self.playback.is_some()
            && matches!(self.selected_entry(), Some(Entry::Recording(_)))
            && self
                .shown()
                .is_some_and(|r| matches!(r.origin, Feed::Recording(_)))
    }

    /// The playbacks that replay keys and the tick move, with their runs: A's,
    /// and in compare mode B's too.
    fn playbacks(&mut self) -> Vec<(&mut Playback, &mut RunState)> {
        let [a, b] = &mut self.slots;
        let mut out = Vec::new();
        if let (Some(pb), Some(run)) = (self.playback.as_mut(), a.as_mut()) {
            out.push((pb, run));
        }
        if self.compare
            && let (Some(pb), Some(run)) = (self.playback_b.as_mut(), b.as_mut())
        {
            out.push((pb, run));
        }
        out
    }

    /// The frame tick: a playing recording moves on by one frame of wall time
    /// times its speed. The tick is the play clock, so tests need no real clock.
    pub(super) fn tick(&mut self) {
        let mut moved = false;
        for (pb, run) in self.playbacks() {
            if !pb.paused {
                pb.tick(run, FRAME.as_nanos() as u64);
                moved = true;
            }
        }
        // The clock line in the banner moves even between events.
        self.dirty |= moved;
        // A live call that has not returned for far longer than its lab asked
        // for is shown as stuck; its clock is the worker's (CLOCK_MONOTONIC).
        let now = crate::clock::now_ns();
        for run in self.slots.iter_mut().flatten() {
            self.dirty |= run.check_stuck(now);
        }
    }

    pub(super) fn loaded(
        &mut self,
        slot: usize,
        epoch: u64,
        mut events: Vec<Event>,
        problems: &[String],
    ) {
        let mut lessons = LessonFill::new(&self.labs);
        events.iter_mut().for_each(|e| lessons.fill(e));
        if self.class_mode {
            events = self.with_class_predictions(slot, events);
        }
        let Some(run) = self.live_slot(slot, epoch) else {
            return;
        };
        let (pb, state) = Playback::new(run.origin.clone(), events);
        *run = state;
        match slot {
            A => self.playback = Some(pb),
            _ => self.playback_b = Some(pb),
        }
        if let Some(first) = problems.first() {
            let more = match problems.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            self.message = Some(format!("skipped a damaged line: {first}{more}"));
        }
        self.judge_compared();
        self.dirty = true;
    }

    /// Class mode: a recording of a lab variant the class predicted (a room
    /// without the device replays the shipped one) shows the class's
    /// predictions beside its verdicts, in place of any it was recorded with.
    /// The file itself is never changed.
    fn with_class_predictions(&self, slot: usize, events: Vec<Event>) -> Vec<Event> {
        let Some(Feed::Recording(path)) = self.slots[slot].as_ref().map(|r| &r.origin) else {
            return events;
        };
        let Some((lab, variant)) = self
            .recordings
            .iter()
            .position(|p| p == path)
            .and_then(|i| self.recorded.get(i).cloned().flatten())
        else {
            return events;
        };
        let Some(made) = self.predictions.get(&(lab, variant)) else {
            return events;
        };
        let made: Vec<_> = made.iter().map(|(c, p)| (c.clone(), *p)).collect();
        let mut out = Vec::with_capacity(events.len() + made.len());
        for e in events {
            if matches!(e, Event::Prediction(_)) {
                continue;
            }
            let after = crate::trace::Prediction::after(&e, &made);
            out.push(e);
            out.extend(after);
        }
        out
    }

    /// `gpulab replay FILE`: the recording selected, in slot A, playing from the start.
    pub fn play(&mut self, path: PathBuf, events: Vec<Event>, problems: &[String]) {
        let i = match self.recordings.iter().position(|p| *p == path) {
            Some(i) => i,
            None => {
                self.recordings.insert(0, path.clone());
                self.index_recordings();
                0
            }
        };
        self.filter.clear();
        if let Some(pos) = self
            .entries()
            .iter()
            .position(|e| *e == Entry::Recording(i))
        {
            self.selected = pos;
        }
        self.index_recordings();
        self.leave_compare();
        self.make_room(A);
        self.epochs[A] += 1;
        self.slots[A] = Some(RunState::new(Feed::Recording(path)));
        let epoch = self.epochs[A];
        self.loaded(A, epoch, events, problems);
        if let (Some(pb), Some(run)) = (self.playback.as_mut(), self.slots[A].as_mut()) {
            pb.toggle(run);
        }
    }

    /// A replay key; false when the key is not the replay's (the dashboard's then).
    pub(super) fn replay_action(&mut self, a: Action) -> bool {
        let mut sides = self.playbacks();
        if sides.is_empty() {
            return false;
        }
        if a == Action::PlayPause {
            // Both sides start, stop and start over together, so the compared
            // runs stay on one clock.
            let playing = sides.iter().any(|(pb, _)| !pb.paused);
            let restart = !playing && sides.iter().any(|(pb, _)| pb.at_end());
            for (pb, run) in &mut sides {
                if restart {
                    pb.home(run);
                }
                if playing != pb.paused {
                    pb.toggle(run);
                }
            }
            self.message = None;
            return true;
        }
        for (pb, run) in sides {
            if !replay_one(pb, run, a) {
                return false;
            }
        }
        self.message = None;
        true
    }

    pub(super) fn arm_record(&mut self) {
        self.record_next = !self.record_next;
        self.message = Some(if self.record_next {
            match crate::history::recordings_dir() {
                Some(dir) => format!(
                    "the next run is recorded into {}: r runs it (R again: don't)",
                    dir.display()
                ),
                None => format!(
                    "the next run would be recorded, but there is no data folder: set {}",
                    crate::history::ENV_DIR
                ),
            }
        } else {
            "the next run is not recorded".into()
        });
    }
}

/// A replay key other than play/pause on one side; false when it is not one.
fn replay_one(pb: &mut Playback, run: &mut RunState, a: Action) -> bool {
    match a {
        Action::ScrubBack | Action::ScrubForward => {
            pb.scrub_seconds(run, a == Action::ScrubForward)
        }
        Action::CallBack => pb.step_back(run),
        Action::CallForward => pb.step_forward(run),
        Action::First => pb.home(run),
        Action::Last => pb.end(run),
        Action::Slower => pb.slower(),
        Action::Faster => pb.faster(),
        _ => return false,
    }
    true
}
