//! Playing a recording in slot A: the frame tick moves the play clock, the replay
//! keys move the cursor, and `R` arms recording of the next live run.

use std::path::PathBuf;

use crate::trace::Event;
use crate::tui::keys::Action;
use crate::tui::playback::Playback;
use crate::tui::runstate::{Origin, RunState};
use crate::tui::terminal::FRAME;

use super::{A, App, B, Entry};

impl App {
    /// A recording is in slot A, played back, and it is what the panels show.
    pub fn replaying(&self) -> bool {
        self.playback.is_some()
            && !self.compare
            && matches!(self.selected_entry(), Some(Entry::Recording(_)))
            && self
                .shown()
                .is_some_and(|r| matches!(r.origin, Origin::Recording(_)))
    }

    /// The frame tick: a playing recording moves on by one frame of wall time
    /// times its speed. The tick is the play clock, so tests need no real clock.
    pub(super) fn tick(&mut self) {
        if let (Some(pb), Some(run)) = (self.playback.as_mut(), self.slots[A].as_mut())
            && !pb.paused
        {
            pb.tick(run, FRAME.as_nanos() as u64);
            // The clock line in the banner moves even between events.
            self.dirty = true;
        }
    }

    pub(super) fn loaded(
        &mut self,
        slot: usize,
        epoch: u64,
        events: Vec<Event>,
        problems: &[String],
    ) {
        let Some(run) = self.live_slot(slot, epoch) else {
            return;
        };
        let (pb, state) = Playback::new(run.origin.clone(), events);
        *run = state;
        if slot == A {
            self.playback = Some(pb);
        }
        if let Some(first) = problems.first() {
            let more = match problems.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            self.message = Some(format!("skipped a damaged line: {first}{more}"));
        }
        self.dirty = true;
    }

    /// `gpulab replay FILE`: the recording selected, in slot A, playing from the start.
    pub fn play(&mut self, path: PathBuf, events: Vec<Event>, problems: &[String]) {
        let i = match self.recordings.iter().position(|p| *p == path) {
            Some(i) => i,
            None => {
                self.recordings.insert(0, path.clone());
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
        self.compare = false;
        self.slots[B] = None;
        self.epochs[A] += 1;
        self.slots[A] = Some(RunState::new(Origin::Recording(path)));
        let epoch = self.epochs[A];
        self.loaded(A, epoch, events, problems);
        if let (Some(pb), Some(run)) = (self.playback.as_mut(), self.slots[A].as_mut()) {
            pb.toggle(run);
        }
    }

    /// A replay key; false when the key is not the replay's (the dashboard's then).
    pub(super) fn replay_action(&mut self, a: Action) -> bool {
        let (Some(pb), Some(run)) = (self.playback.as_mut(), self.slots[A].as_mut()) else {
            return false;
        };
        match a {
            Action::PlayPause => pb.toggle(run),
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
        self.message = None;
        true
    }

    pub(super) fn arm_record(&mut self) {
        self.record_next = !self.record_next;
        self.message = Some(if self.record_next {
            "the next run is recorded to a file: r runs it (R again: don't)".into()
        } else {
            "the next run is not recorded".into()
        });
    }
}
