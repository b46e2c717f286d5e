//! Starting, stepping, comparing and cancelling runs, and opening recordings:
//! the app's side of it, as effects the loop carries out.

use std::collections::BTreeMap;

use crate::lab::Lab;
use crate::source::{Keeper, Recorder, RunRequest, Steer};
use crate::trace::Predicted;

use super::{A, App, B, Cmd, Entry};
use crate::runstate::{Feed, RunState};

impl App {
    pub(super) fn cancel_all(&mut self) -> Vec<Cmd> {
        (0..2)
            .filter(|s| self.slots[*s].as_ref().is_some_and(RunState::running))
            .map(|slot| Cmd::Cancel { slot })
            .collect()
    }

    pub(super) fn blocked(&mut self, lab: &Lab) -> bool {
        let why = match &self.availability {
            None => Some(
                "still asking the worker side which devices exist; try again in a moment"
                    .to_string(),
            ),
            Some(a) => a.blocker(lab.backend),
        };
        if let Some(why) = &why {
            let offer = match self.selected_lab_recording() {
                Some(_) => "; o replays its recording",
                None => "",
            };
            self.message = Some(format!("{} cannot run here: {why}{offer}", lab.id));
        }
        why.is_some()
    }

    pub(super) fn run_or_continue(&mut self) -> Vec<Cmd> {
        if let Some(run) = self.slots[A].as_ref().filter(|r| r.running()) {
            if run.step_mode() {
                return vec![Cmd::Control {
                    slot: A,
                    cmd: Steer::Run,
                }];
            }
            self.message = Some("a run is in progress: Esc cancels it".into());
            return Vec::new();
        }
        if self.running() {
            self.message = Some("a run is in progress: Esc cancels it".into());
            return Vec::new();
        }
        match self.selected_entry() {
            Some(Entry::Lab(i)) => self.start_lab(i, false),
            Some(Entry::Invalid(i)) => {
                self.say_invalid(i);
                Vec::new()
            }
            Some(Entry::Recording(i)) => {
                self.leave_compare();
                self.open(A, i)
            }
            None => Vec::new(),
        }
    }

    pub(super) fn step(&mut self) -> Vec<Cmd> {
        if let Some(run) = self.slots[A].as_ref().filter(|r| r.running()) {
            if run.step_mode() {
                return vec![Cmd::Control {
                    slot: A,
                    cmd: Steer::Step,
                }];
            }
            self.message = Some(
                "this run is not in step mode: Esc cancels it, then s starts a stepped run".into(),
            );
            return Vec::new();
        }
        match self.selected_entry() {
            Some(Entry::Lab(i)) if !self.running() => self.start_lab(i, true),
            _ => Vec::new(),
        }
    }

    pub(super) fn start_lab(&mut self, i: usize, step: bool) -> Vec<Cmd> {
        let Some(lab) = self.labs.get(i).cloned() else {
            return Vec::new();
        };
        if self.blocked(&lab) {
            return Vec::new();
        }
        self.leave_compare();
        // A lesson's step zoomed the verdict panel for the predictions: the
        // run is watched on the whole dashboard.
        if self.lesson.is_some() {
            self.zoom = false;
        }
        let v = self.variant_of(&lab);
        let Some(req) = self.request(&lab, v, step) else {
            return Vec::new();
        };
        vec![self.start_in(A, req)]
    }

    /// A run of the lab's `variant`th variant (None where it has none).
    pub(super) fn request(&self, lab: &Lab, variant: usize, step: bool) -> Option<RunRequest> {
        let params = self.params_of(lab);
        let name = &lab.variants.get(variant)?.name;
        let mut req = RunRequest::new(lab.clone(), name, params, self.sample_hz).ok()?;
        // The default limit of `gpulab run` (a stepped run has none).
        req.time_limit = Some(req.variant().plan(&req.params).time_limit());
        req.device = self.device.clone();
        req.step = step;
        Some(req)
    }

    pub(super) fn start_in(&mut self, slot: usize, req: RunRequest) -> Cmd {
        self.make_room(slot);
        self.epochs[slot] += 1;
        self.forget_playback(slot);
        let record = std::mem::take(&mut self.record_next);
        let mut state = RunState::new(Feed::Live {
            lab: req.lab.id.clone(),
            variant: req.variant_name().to_string(),
            step: req.step,
        });
        // The run's claims are judged here, on the dashboard's own fold, once
        // its stream has ended.
        state.keeper = Keeper::new(Some(req.lab.clone()));
        state.stuck_after = Some(req.variant().plan(&req.params).stuck_after());
        // Class mode: what was predicted goes into the run after its header.
        if self.class_mode
            && let Some(made) = self
                .predictions
                .get(&(req.lab.id.clone(), req.variant_name().to_string()))
        {
            state.predicted = made.iter().map(|(c, p)| (c.clone(), *p)).collect();
        }
        self.slots[slot] = Some(state);
        self.script_scroll = 0;
        Cmd::Start {
            slot,
            epoch: self.epochs[slot],
            req: Box::new(req),
            record,
        }
    }

    /// The live run in `slot` (if it is still the one of `epoch`) is also
    /// written into `recording`.
    pub fn record_to(&mut self, slot: usize, epoch: u64, recording: Recorder) {
        if let Some(run) = self.live_slot(slot, epoch) {
            run.keeper.record_to(recording);
        }
    }

    /// Another run is about to take `slot`: the program `watch --dashboard`
    /// followed there is kept for its report.
    pub(super) fn make_room(&mut self, slot: usize) {
        if let Some(watched) =
            self.slots[slot].take_if(|r| matches!(r.origin, Feed::Watched { .. }))
        {
            self.watched_program = Some(watched);
        }
        // A lab's finished run is kept for when its lab is shown again.
        if slot == A
            && let Some(done) =
                self.slots[A].take_if(|r| r.closed && matches!(r.origin, Feed::Live { .. }))
            && let Feed::Live { lab, variant, .. } = &done.origin
        {
            self.last_runs.insert((lab.clone(), variant.clone()), done);
        }
    }

    /// The run of the program `watch --dashboard` followed, wherever it is now.
    pub fn take_watched(&mut self) -> Option<RunState> {
        let in_a = self.slots[A].take_if(|r| matches!(r.origin, Feed::Watched { .. }));
        self.watched_program.take().or(in_a)
    }

    fn forget_playback(&mut self, slot: usize) {
        match slot {
            A => self.playback = None,
            _ => self.playback_b = None,
        }
    }

    /// Slot A now shows the program `gpulab watch --dashboard` starts; its events
    /// come as `Msg::Run` with the epoch returned, and go into `keeper`'s
    /// recordings.
    pub fn watch(&mut self, command: &str, keeper: Keeper) -> (usize, u64) {
        self.epochs[A] += 1;
        self.playback = None;
        let mut state = RunState::new(Feed::Watched {
            command: command.to_string(),
        });
        state.keeper = keeper;
        self.slots[A] = Some(state);
        (A, self.epochs[A])
    }

    pub(super) fn open(&mut self, slot: usize, i: usize) -> Vec<Cmd> {
        let Some(path) = self.recordings.get(i).cloned() else {
            return Vec::new();
        };
        self.make_room(slot);
        self.epochs[slot] += 1;
        self.forget_playback(slot);
        self.slots[slot] = Some(RunState::new(Feed::Recording(path.clone())));
        vec![Cmd::Open {
            slot,
            epoch: self.epochs[slot],
            path,
        }]
    }

    pub(super) fn compare(&mut self) -> Vec<Cmd> {
        if self.running() {
            self.message = Some("a run is in progress: Esc cancels it".into());
            return Vec::new();
        }
        match self.selected_entry() {
            Some(Entry::Lab(i)) => {
                let Some(lab) = self.labs.get(i).cloned() else {
                    return Vec::new();
                };
                if lab.variants.len() < 2 {
                    self.message = Some(format!("{} has one variant: nothing to compare", lab.id));
                    return Vec::new();
                }
                if self.blocked(&lab) {
                    return Vec::new();
                }
                let v = self.variant_of(&lab);
                let (Some(first), Some(second)) = (
                    self.request(&lab, v, false),
                    self.request(&lab, (v + 1) % lab.variants.len(), false),
                ) else {
                    return Vec::new();
                };
                self.queued = Some(Box::new(second));
                self.slots[B] = None;
                self.compare = true;
                vec![self.start_in(A, first)]
            }
            Some(Entry::Recording(i)) => self.compare_recordings(i),
            Some(Entry::Invalid(i)) => {
                self.say_invalid(i);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// An invalid lab file cannot run: the status line says its first mistake.
    fn say_invalid(&mut self, i: usize) {
        if let Some((_, why)) = self.invalid.get(i) {
            self.message = Some(format!("cannot run: {why}"));
        }
    }
}

impl App {
    /// The selected lab's claims in the variant shown (its chosen one, or
    /// the one a selected recording ran), in the order the verdict panel
    /// numbers them.
    pub fn claims_shown(&self) -> Vec<&crate::lab::Claim> {
        let Some((lab, variant)) = self.selected_variant() else {
            return Vec::new();
        };
        lab.claims
            .iter()
            .filter(|c| c.applies_to(&variant.name))
            .collect()
    }

    /// The predictions made for the lab variant shown.
    pub fn predicted_here(&self) -> Option<&BTreeMap<String, Predicted>> {
        let (lab, variant) = self.selected_variant()?;
        self.predictions
            .get(&(lab.id.clone(), variant.name.clone()))
    }

    /// Class mode: claim `n` (from 0) of the selected lab's variant goes to
    /// its next prediction: holds, does not hold, not sure, then none.
    pub(super) fn predict(&mut self, n: usize) {
        let Some(claim) = self.claims_shown().get(n).map(|c| c.name.clone()) else {
            return;
        };
        let Some((lab, variant)) = self.selected_variant() else {
            return;
        };
        let key = (lab.id.clone(), variant.name.clone());
        let made = self.predictions.entry(key).or_default();
        let next = match made.get(&claim) {
            None => Some(Predicted::Holds),
            Some(Predicted::Holds) => Some(Predicted::DoesNotHold),
            Some(Predicted::DoesNotHold) => Some(Predicted::NotSure),
            Some(Predicted::NotSure) => None,
        };
        match next {
            Some(p) => made.insert(claim, p),
            None => made.remove(&claim),
        };
        self.dirty = true;
    }
}
