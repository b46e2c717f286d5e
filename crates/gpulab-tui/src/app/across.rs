//! Claims that compare variants, judged when the two runs of a compare are both
//! complete: live, once the second worker's stream closed; recordings, once both
//! files are read (appended to each playback, so they show at its end as the
//! recorded verdicts do). Each side gets the verdicts of its own claims.

use crate::run::Run;
use crate::runstate::Feed;
use crate::trace::Event;

use super::{A, App, B};

impl App {
    /// Judges the compared runs' claims across variants, when both are complete.
    pub(super) fn judge_compared(&mut self) {
        if !self.compare {
            return;
        }
        let Some(runs) = self.compared_runs() else {
            return;
        };
        let lab_id = runs[A].lab_id();
        if lab_id.is_none() || lab_id != runs[B].lab_id() {
            return;
        }
        let Some(lab) = self.labs.iter().find(|l| Some(l.id.as_str()) == lab_id) else {
            return;
        };
        let judged = crate::verdict::judge_across(lab, &[&runs[A], &runs[B]]);
        for (slot, verdict) in judged {
            let event = Event::Claim(verdict);
            let playback = match slot {
                A => self.playback.as_mut(),
                _ => self.playback_b.as_mut(),
            };
            match (playback, self.slots[slot].as_mut()) {
                (Some(pb), Some(run)) => pb.append(run, event),
                (None, Some(run)) => run.apply(&event),
                _ => {}
            }
        }
        self.dirty = true;
    }

    /// Both sides' whole runs: live ones once their streams closed, recordings
    /// once read (the whole file, wherever the play cursor is).
    fn compared_runs(&self) -> Option<[Run; 2]> {
        let side = |slot: usize| {
            let state = self.slots[slot].as_ref()?;
            let playback = match slot {
                A => self.playback.as_ref(),
                _ => self.playback_b.as_ref(),
            };
            match (&state.origin, playback) {
                (Feed::Recording(_), Some(pb)) => Some(Run::from_events(pb.events())),
                (Feed::Live { .. }, _) if state.closed => Some(state.run.clone()),
                _ => None,
            }
        };
        Some([side(A)?, side(B)?])
    }
}
