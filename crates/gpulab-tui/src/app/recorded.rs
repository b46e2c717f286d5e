//! Which lab variant each recording ran, as its file name says
//! (`<lab>--<variant>.jsonl`, or a history or fixture name ending so), and what
//! that offers: `o` opens the selected lab's recording (on a laptop without CUDA,
//! the shipped H100 one), `c` on a recording opens the lab's other variant's
//! recording beside it.

use std::path::{Path, PathBuf};

use super::{A, App, B, Cmd, Entry};
use crate::recordings;

impl App {
    /// Works out `recorded` again; called whenever `recordings` changes.
    pub fn index_recordings(&mut self) {
        self.recorded = self
            .recordings
            .iter()
            .map(|p| self.lab_variant_named(p))
            .collect();
        self.recording_labels = self
            .recordings
            .iter()
            .map(|p| recordings::label(p))
            .collect();
    }

    /// A run of this session kept in the history: listed at once, first of
    /// the history (newest first), not only after a restart.
    pub fn add_history(&mut self, path: PathBuf, history: &Path) {
        if self.recordings.contains(&path) {
            return;
        }
        let at = self
            .recordings
            .iter()
            .position(|p| p.starts_with(history))
            .unwrap_or(self.recordings.len());
        self.recordings.insert(at, path);
        self.index_recordings();
    }

    /// A recording made while the dashboard runs (`R`): listed, newest first
    /// among the ones after the shipped recordings.
    pub fn add_recording(&mut self, path: PathBuf) {
        if !self.recordings.contains(&path) {
            self.recordings.push(path);
            self.index_recordings();
        }
    }

    fn lab_variant_named(&self, path: &Path) -> Option<(String, String)> {
        // A watched program's recording ran no lab, whatever it is called.
        if recordings::label(path).starts_with("watch ") {
            return None;
        }
        let stem = path.file_stem()?.to_string_lossy();
        self.labs.iter().find_map(|lab| {
            lab.variants.iter().find_map(|v| {
                let key = format!("{}--{}", lab.id, v.name);
                let hit = stem == key.as_str()
                    || stem
                        .strip_suffix(key.as_str())
                        .is_some_and(|rest| rest.ends_with('-'));
                hit.then(|| (lab.id.clone(), v.name.clone()))
            })
        })
    }

    /// The recording of `lab`'s `variant`: one in the same folder as `near` when
    /// there is one (the same run of cards), else one of the same device (as
    /// its folder names it: `h200`'s OpenCL card run beside its CUDA one),
    /// else the first listed (shipped ones first).
    pub fn recording_of(&self, lab: &str, variant: &str, near: Option<&Path>) -> Option<usize> {
        let hits: Vec<usize> = (0..self.recorded.len())
            .filter(|&i| {
                self.recorded[i]
                    .as_ref()
                    .is_some_and(|(l, v)| l == lab && v == variant)
            })
            .collect();
        let folder = near.and_then(Path::parent);
        let device = near.and_then(recordings::device);
        hits.iter()
            .copied()
            .find(|&i| folder.is_some() && self.recordings[i].parent() == folder)
            .or_else(|| {
                hits.iter().copied().find(|&i| {
                    device.is_some() && recordings::device(&self.recordings[i]) == device
                })
            })
            .or_else(|| hits.first().copied())
    }

    /// The recording `o` opens for the selected lab: its chosen variant's.
    pub fn selected_lab_recording(&self) -> Option<usize> {
        let Some(Entry::Lab(i)) = self.selected_entry() else {
            return None;
        };
        let lab = self.labs.get(i)?;
        let v = lab.variants.get(self.variant_of(lab))?;
        self.recording_of(&lab.id, &v.name, None)
    }

    /// `o` on a lab: its recording, selected and opened in replay.
    pub(super) fn open_lab_recording(&mut self) -> Vec<Cmd> {
        let Some(Entry::Lab(li)) = self.selected_entry() else {
            self.message = Some("o opens a lab's recording: select a lab first".into());
            return Vec::new();
        };
        if self.running() {
            self.message = Some("a run is in progress: Esc cancels it".into());
            return Vec::new();
        }
        let Some(ri) = self.selected_lab_recording() else {
            let id = self.labs.get(li).map(|l| l.id.clone()).unwrap_or_default();
            self.message = Some(format!("no recording of {id}'s chosen variant here"));
            return Vec::new();
        };
        self.select_recording(ri);
        self.leave_compare();
        let fx = self.open(A, ri);
        self.message = Some(format!(
            "replaying {}: Space plays it from the start",
            recordings::label(&self.recordings[ri])
        ));
        fx
    }

    /// Moves the selection to recording `ri`, clearing a filter that hides it.
    fn select_recording(&mut self, ri: usize) {
        if !self.entries().contains(&Entry::Recording(ri)) {
            self.filter.clear();
            self.filtering = false;
        }
        if let Some(pos) = self
            .entries()
            .iter()
            .position(|e| *e == Entry::Recording(ri))
        {
            self.selected = pos;
        }
        self.script_scroll = 0;
        self.verdict_scroll = 0;
    }

    /// `c` on recording `i`: beside it, the recording of its lab's next variant
    /// (never itself), both played back on the same axes.
    pub(super) fn compare_recordings(&mut self, i: usize) -> Vec<Cmd> {
        let Some((lab_id, variant)) = self.recorded.get(i).cloned().flatten() else {
            self.message =
                Some("this recording names no lab variant: nothing to compare it with".into());
            return Vec::new();
        };
        let Some(lab) = self.labs.iter().find(|l| l.id == lab_id) else {
            return Vec::new();
        };
        let n = lab.variants.len();
        let v = lab
            .variants
            .iter()
            .position(|x| x.name == variant)
            .unwrap_or(0);
        let others = (1..n).map(|k| &lab.variants[(v + k) % n].name);
        let near = self.recordings.get(i).map(PathBuf::as_path);
        let other = others
            .filter_map(|name| self.recording_of(&lab_id, name, near))
            .find(|&j| j != i);
        let Some(j) = other else {
            self.message = Some(format!(
                "no recording of another variant of {lab_id} here: nothing to compare with"
            ));
            return Vec::new();
        };
        let mut fx = Vec::new();
        let a_is_i = self.slots[A].as_ref().is_some_and(|r| {
            matches!(&r.origin, crate::runstate::Feed::Recording(p)
                if Some(p) == self.recordings.get(i))
        }) && self.playback.is_some();
        if !a_is_i {
            fx.extend(self.open(A, i));
        }
        self.compare = true;
        fx.extend(self.open(B, j));
        self.message = Some(format!(
            "comparing with {}: Space plays both, Esc leaves compare mode",
            recordings::label(&self.recordings[j])
        ));
        fx
    }

    /// Back to one run: slot A stays, B goes.
    pub(super) fn leave_compare(&mut self) {
        self.compare = false;
        self.slots[B] = None;
        self.playback_b = None;
        self.queued = None;
    }
}
