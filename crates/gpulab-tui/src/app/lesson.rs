//! A lesson in the dashboard (`gpulab --lesson NAME`): its steps in order, each
//! a lab variant with a question asked before the run and a hint opened with
//! the verdicts. Class mode is on throughout, so nothing on screen gives the
//! answer before the run; `>` and `<` move between the steps.

use crate::lab::lesson::{Lesson, Step};

use super::{App, Entry};
use crate::layout::Panel;

/// Below this many rows the verdict panel is too short for a step's question
/// and claims: it is zoomed while the class predicts.
const SMALL: u16 = 32;

/// The lesson the dashboard follows, and the step the class is on.
#[derive(Debug, Clone)]
pub struct InLesson {
    pub lesson: Lesson,
    pub step: usize,
}

/// What the verdict panel says of the lesson: the step the class is on, and
/// whether the selection shows it.
#[derive(Debug, Clone, Copy)]
pub struct StepShown<'a> {
    pub title: &'a str,
    pub intro: &'a str,
    /// From 0.
    pub index: usize,
    pub count: usize,
    pub step: &'a Step,
    /// The selection is this step's lab variant (or a recording of it): its
    /// question and hint apply to what the panels show.
    pub here: bool,
}

impl App {
    /// Follows `lesson` from its first step, in class mode.
    pub fn open_lesson(&mut self, lesson: Lesson) {
        self.class_mode = true;
        self.lesson = Some(InLesson { lesson, step: 0 });
        self.go_to_step(0);
    }

    /// Selects step `k`'s lab with its variant (a filter that hides it is
    /// cleared), and says what to do there.
    pub(super) fn go_to_step(&mut self, k: usize) {
        let Some(in_lesson) = self.lesson.as_mut() else {
            self.message = Some("no lesson is open: gpulab --lesson NAME opens one".into());
            return;
        };
        let count = in_lesson.lesson.steps.len();
        let k = k.min(count.saturating_sub(1));
        in_lesson.step = k;
        let Some(step) = in_lesson.lesson.steps.get(k).cloned() else {
            return;
        };
        self.filter.clear();
        self.filtering = false;
        self.select_lab(&step.lab, Some(&step.variant), None);
        self.script_scroll = 0;
        self.verdict_scroll = 0;
        self.focus = Panel::Verdict;
        self.fit_lesson();
        self.message = Some(format!(
            "step {} of {count}: {} [{}], {} min · predict each claim with its number, then \
             Enter runs (o: its recording)",
            k + 1,
            step.lab,
            step.variant,
            step.minutes
        ));
    }

    /// The question and the claims to predict are in the verdict panel: on a
    /// small terminal it takes the screen while the class predicts, until the
    /// step's run starts (a resize then changes nothing).
    pub(super) fn fit_lesson(&mut self) {
        let predicting = self.lesson.is_some()
            && self.focus == Panel::Verdict
            && self.shown().is_none()
            && self.step_shown().is_some_and(|s| s.here);
        if predicting {
            self.zoom = self.size.1 < SMALL;
        }
    }

    /// `>` / `<`: the next or the previous step.
    pub(super) fn move_step(&mut self, forward: bool) {
        let Some(at) = self.lesson.as_ref().map(|l| l.step) else {
            self.message = Some("no lesson is open: gpulab --lesson NAME opens one".into());
            return;
        };
        let last = self
            .lesson
            .as_ref()
            .map_or(0, |l| l.lesson.steps.len().saturating_sub(1));
        match (forward, at) {
            (true, k) if k >= last => {
                self.message = Some("that was the lesson's last step".into());
            }
            (false, 0) => self.message = Some("this is the lesson's first step".into()),
            (true, k) => self.go_to_step(k + 1),
            (false, k) => self.go_to_step(k - 1),
        }
    }

    /// The lesson's current step, for the verdict panel.
    pub fn step_shown(&self) -> Option<StepShown<'_>> {
        let l = self.lesson.as_ref()?;
        let step = l.lesson.steps.get(l.step)?;
        let here = self
            .selected_variant()
            .is_some_and(|(lab, v)| lab.id == step.lab && v.name == step.variant);
        Some(StepShown {
            title: &l.lesson.title,
            intro: &l.lesson.intro,
            index: l.step,
            count: l.lesson.steps.len(),
            step,
            here,
        })
    }

    /// The lab and variant the selection shows: a lab's chosen variant, or
    /// the variant a recording ran.
    pub fn selected_variant(&self) -> Option<(&crate::lab::Lab, &crate::lab::Variant)> {
        match self.selected_entry()? {
            Entry::Lab(i) => {
                let lab = self.labs.get(i)?;
                Some((lab, lab.variants.get(self.variant_of(lab))?))
            }
            Entry::Invalid(_) => None,
            Entry::Recording(i) => {
                let (id, name) = self.recorded.get(i)?.as_ref()?;
                let lab = self.labs.iter().find(|l| &l.id == id)?;
                Some((lab, lab.variants.iter().find(|v| &v.name == name)?))
            }
        }
    }
}
