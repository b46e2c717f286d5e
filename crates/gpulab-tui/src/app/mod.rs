//! The dashboard's state machine: messages in (keys, mouse, run events, the doctor's
//! answer), state changed, commands out ([`Cmd`]: start a worker, step it, cancel
//! it, open a recording). Never touches a terminal, a worker or a clock, so tests drive it
//! with key sequences alone.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseEvent, MouseEventKind};

use crate::lab::{Lab, Params};
use crate::source::{RunRequest, Steer};
use crate::trace::Event;

mod across;
mod edit;
mod lesson;
mod recorded;
mod replay;
mod runs;

pub use lesson::{InLesson, StepShown};

use super::keys::{self, Action, Mode};
use super::layout::{Panel, Screen};
use super::playback::Playback;
use super::runstate::{Feed, RunState};
use super::theme::Theme;
use crate::source::Availability;

/// Slot of the run on the left (and only) side, and of the compared one.
pub const A: usize = 0;
pub const B: usize = 1;

#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize(u16, u16),
    /// Events of the live run in `slot`, a batch as the source sent it; `epoch`
    /// tells a replaced run's stragglers apart. The batch's place on the way
    /// ([`super::in_flight`]) is freed when the message is dropped.
    Run {
        slot: usize,
        epoch: u64,
        events: Vec<Event>,
        ticket: super::in_flight::Ticket,
    },
    /// A recording was read: its events (damaged lines skipped, and named).
    Loaded {
        slot: usize,
        epoch: u64,
        events: Vec<Event>,
        problems: Vec<String>,
    },
    /// The run's stream ended (with why, for a recording that could not be read).
    Closed {
        slot: usize,
        epoch: u64,
        error: Option<String>,
    },
    Doctor(Availability),
    Tick,
    /// SIGTERM, SIGHUP or SIGINT from outside: quit as `q` does, so the terminal
    /// is restored and live runs are cancelled.
    Terminate,
}

/// What the app asks its loop to do, which the app itself cannot: start, steer
/// or cancel a run, open a recording (an Elm command; not an API call's
/// `Effect` on the ledger).
#[derive(Debug, Clone)]
pub enum Cmd {
    Start {
        slot: usize,
        epoch: u64,
        req: Box<RunRequest>,
        /// `R` asked for this run to be recorded to a file.
        record: bool,
    },
    Open {
        slot: usize,
        epoch: u64,
        path: PathBuf,
    },
    Control {
        slot: usize,
        cmd: Steer,
    },
    Cancel {
        slot: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Lab(usize),
    /// A lab file in a user folder that has mistakes: listed, greyed, not runnable.
    Invalid(usize),
    Recording(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help,
    Params { selected: usize, typed: String },
}

pub struct App {
    pub labs: Vec<Lab>,
    /// User lab files with mistakes: the id each claims and its first mistake.
    pub invalid: Vec<(String, String)>,
    pub recordings: Vec<PathBuf>,
    /// `None` until the doctor has answered.
    pub availability: Option<Availability>,
    /// Index into `entries()`.
    pub selected: usize,
    pub filter: String,
    pub filtering: bool,
    /// Chosen variant per lab id.
    pub variants: BTreeMap<String, usize>,
    /// Parameter values per lab id, when changed from the defaults.
    pub params: BTreeMap<String, Params>,
    pub slots: [Option<RunState>; 2],
    /// The recording in slot A, played back.
    pub playback: Option<Playback>,
    /// The recording in slot B in compare mode, played back beside A's.
    pub playback_b: Option<Playback>,
    /// The lab and variant each recording ran (by index into `recordings`), as
    /// its file name says; worked out when the list changes, not per frame.
    pub recorded: Vec<Option<(String, String)>>,
    /// Per recording, the name the list shows (`recordings::label`), made once:
    /// the list and its filter read it every frame.
    pub recording_labels: Vec<String>,
    /// `z`: the focused panel fills the screen (Tab picks another).
    pub zoom: bool,
    /// `n`: the process (a job's rank) the objects and findings panels show
    /// alone; None: every process.
    pub rank: Option<u32>,
    /// `R` was pressed: the next run started is recorded to a file.
    pub record_next: bool,
    epochs: [u64; 2],
    pub compare: bool,
    /// The compared variant starts when the first one is done: two workers at once
    /// would disturb each other's timings.
    queued: Option<Box<RunRequest>>,
    pub overlay: Overlay,
    pub focus: Panel,
    pub script_scroll: u16,
    pub verdict_scroll: u16,
    pub help_scroll: u16,
    pub message: Option<String>,
    pub sample_hz: f64,
    pub device: Option<String>,
    pub size: (u16, u16),
    pub theme: Theme,
    pub quit: bool,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// A live run's events arrived since the last frame, and nothing else
    /// changed: the loop draws those less often (`event_loop::Pace`).
    pub streamed: bool,
    /// Mouse reporting asked of the terminal (`m` toggles it): while it is on, the
    /// terminal's own text selection needs Shift.
    pub mouse: bool,
    /// The program `watch --dashboard` followed, once another run took slot A
    /// after it ended: kept for the report printed when the dashboard closes.
    watched_program: Option<RunState>,
    /// Class mode (`--class`, `C`): before a run, the lesson and what it
    /// expects are hidden and each claim is predicted (its number cycles
    /// holds, does not hold, not sure, none); the run records the
    /// predictions, and its verdicts show beside them.
    pub class_mode: bool,
    /// Predictions by lab id and variant name, then claim name.
    pub predictions: BTreeMap<(String, String), BTreeMap<String, crate::trace::Predicted>>,
    /// Each lab variant's last finished run, by lab id and variant name, once
    /// another run took slot A: going back to the lab shows it.
    last_runs: BTreeMap<(String, String), RunState>,
    /// The lesson followed (`--lesson`), and its step.
    pub lesson: Option<InLesson>,
}

impl App {
    pub fn new(labs: Vec<Lab>, recordings: Vec<PathBuf>, theme: Theme) -> App {
        let mut app = App {
            labs,
            invalid: Vec::new(),
            recordings,
            availability: None,
            selected: 0,
            filter: String::new(),
            filtering: false,
            variants: BTreeMap::new(),
            params: BTreeMap::new(),
            slots: [None, None],
            playback: None,
            playback_b: None,
            recorded: Vec::new(),
            recording_labels: Vec::new(),
            zoom: false,
            rank: None,
            record_next: false,
            epochs: [0, 0],
            compare: false,
            queued: None,
            overlay: Overlay::None,
            focus: Panel::Labs,
            script_scroll: 0,
            verdict_scroll: 0,
            help_scroll: 0,
            message: None,
            sample_hz: 1000.0,
            device: None,
            size: (80, 24),
            theme,
            quit: false,
            dirty: true,
            streamed: false,
            mouse: true,
            watched_program: None,
            class_mode: false,
            predictions: BTreeMap::new(),
            last_runs: BTreeMap::new(),
            lesson: None,
        };
        app.index_recordings();
        app
    }

    /// Opens on a lab (`--lab`), with a variant and parameters already checked.
    pub fn select_lab(&mut self, id: &str, variant: Option<&str>, params: Option<Params>) {
        if let Some(i) = self.labs.iter().position(|l| l.id == id) {
            if let Some(v) =
                variant.and_then(|v| self.labs[i].variants.iter().position(|x| x.name == v))
            {
                self.variants.insert(id.to_string(), v);
            }
            if let Some(p) = params {
                self.params.insert(id.to_string(), p);
            }
            if let Some(pos) = self.entries().iter().position(|e| *e == Entry::Lab(i)) {
                self.selected = pos;
            }
        }
    }

    pub fn entries(&self) -> Vec<Entry> {
        let f = self.filter.to_lowercase();
        let hit = |s: &str| f.is_empty() || s.to_lowercase().contains(&f);
        let labs = self.labs.iter().enumerate();
        let labs = labs.filter(|(_, l)| hit(&l.id) || hit(&l.title) || hit(l.backend.as_str()));
        let invalid = self.invalid.iter().enumerate();
        let invalid = invalid.filter(|(_, (id, _))| hit(id));
        // A recording matches by the name the list shows or by its file
        // (`nvidia-h100/cl-finish--no-wait`), as a user may know either.
        let recs = self.recording_labels.iter().enumerate();
        let recs = recs.filter(|(i, label)| {
            let file = self.recordings.get(*i).map(|p| {
                let parts: Vec<_> = p.iter().rev().take(2).collect();
                parts
                    .iter()
                    .rev()
                    .map(|c| c.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/")
            });
            hit(label) || file.is_some_and(|f| hit(&f))
        });
        labs.map(|(i, _)| Entry::Lab(i))
            .chain(invalid.map(|(i, _)| Entry::Invalid(i)))
            .chain(recs.map(|(i, _)| Entry::Recording(i)))
            .collect()
    }

    pub fn selected_entry(&self) -> Option<Entry> {
        self.entries().get(self.selected).copied()
    }

    /// The lab of the selection: the lab itself, or the one a recording ran.
    pub fn selected_lab(&self) -> Option<&Lab> {
        match self.selected_entry()? {
            Entry::Lab(i) => self.labs.get(i),
            Entry::Invalid(_) => None,
            Entry::Recording(_) => {
                let id = self.shown().and_then(|s| s.lab_id())?;
                self.labs.iter().find(|l| l.id == id)
            }
        }
    }

    pub fn lab_for(&self, run: &RunState) -> Option<&Lab> {
        let id = run.lab_id()?;
        self.labs.iter().find(|l| l.id == id)
    }

    pub fn variant_of(&self, lab: &Lab) -> usize {
        self.variants
            .get(&lab.id)
            .copied()
            .unwrap_or(0)
            .min(lab.variants.len().saturating_sub(1))
    }

    pub fn params_of(&self, lab: &Lab) -> Params {
        self.params
            .get(&lab.id)
            .cloned()
            .unwrap_or_else(|| lab.default_params())
    }

    /// The run the panels show: the one in slot A when it belongs to the selection
    /// (or is still running, or compare mode is on).
    pub fn shown(&self) -> Option<&RunState> {
        let run = self.slots[A].as_ref()?;
        if self.compare || run.running() {
            return Some(run);
        }
        let belongs = match (self.selected_entry()?, &run.origin) {
            // After `v` the panels show the chosen variant, not the results of
            // the one that ran before (`V` brings those back).
            (Entry::Lab(i), Feed::Live { lab, variant, .. }) => self.labs.get(i).is_some_and(|l| {
                &l.id == lab && l.variants.get(self.variant_of(l)).map(|v| &v.name) == Some(variant)
            }),
            (Entry::Recording(i), Feed::Recording(p)) => self.recordings.get(i) == Some(p),
            // The program `watch --dashboard` started stays in view whatever is selected.
            (_, Feed::Watched { .. }) => true,
            _ => false,
        };
        if belongs {
            return Some(run);
        }
        // The selected lab variant's last run, kept when another took A
        // (a lab's entry: a recording's lab is found through what is shown).
        let Entry::Lab(i) = self.selected_entry()? else {
            return None;
        };
        let lab = self.labs.get(i)?;
        let variant = lab.variants.get(self.variant_of(lab))?;
        self.last_runs.get(&(lab.id.clone(), variant.name.clone()))
    }

    /// What the layout needs of the state: compare mode, and the zoomed panel.
    pub fn view(&self) -> super::layout::View {
        super::layout::View {
            compare: self.compare,
            zoom: self.zoom.then_some(self.focus),
            banner: self.replaying(),
            lanes: self
                .slots
                .iter()
                .flatten()
                .map(|r| crate::panels::timeline::lane_count(r) as u16)
                .max()
                .unwrap_or(1),
            watched: self.slots[A]
                .as_ref()
                .is_some_and(|r| matches!(r.origin, super::runstate::Feed::Watched { .. })),
        }
    }

    /// A program `watch --dashboard` started still runs.
    pub fn watching(&self) -> bool {
        self.slots
            .iter()
            .flatten()
            .any(|r| matches!(r.origin, super::runstate::Feed::Watched { .. }) && r.running())
    }

    pub fn running(&self) -> bool {
        self.slots.iter().flatten().any(RunState::running) || self.queued.is_some()
    }

    pub fn mode(&self) -> Mode {
        match (&self.overlay, self.filtering) {
            (Overlay::Params { .. }, _) => Mode::Params,
            (_, true) => Mode::Filter,
            _ if self.replaying() => Mode::Replay,
            _ => Mode::Main,
        }
    }

    /// Folds one message in; what the loop must do about it comes back.
    /// Each run's findings as it stands, for the next frame
    /// ([`RunState::refresh_findings`]).
    pub fn refresh_findings(&mut self) {
        for run in self.slots.iter_mut().flatten() {
            run.refresh_findings();
        }
    }

    pub fn update(&mut self, msg: Msg) -> Vec<Cmd> {
        match msg {
            Msg::Tick => {
                self.tick();
                Vec::new()
            }
            Msg::Terminate => {
                self.quit = true;
                self.queued = None;
                self.cancel_all()
            }
            Msg::Loaded {
                slot,
                epoch,
                events,
                problems,
            } => {
                self.loaded(slot, epoch, events, &problems);
                Vec::new()
            }
            Msg::Resize(w, h) => {
                self.size = (w, h);
                self.fit_lesson();
                self.dirty = true;
                Vec::new()
            }
            Msg::Doctor(a) => {
                self.availability = Some(a);
                self.dirty = true;
                Vec::new()
            }
            Msg::Run {
                slot,
                epoch,
                events,
                ticket: _,
            } => {
                if let Some(run) = self.live_slot(slot, epoch) {
                    for event in events {
                        run.take(event);
                    }
                    self.streamed = true;
                }
                Vec::new()
            }
            Msg::Closed { slot, epoch, error } => self.closed(slot, epoch, error),
            Msg::Mouse(m) => {
                self.mouse(m);
                Vec::new()
            }
            Msg::Key(k) => {
                self.dirty = true;
                self.key(k)
            }
        }
    }

    /// A run's stream has ended: its claims judged, its files finished, and
    /// what they became said and listed.
    fn closed(&mut self, slot: usize, epoch: u64, error: Option<String>) -> Vec<Cmd> {
        let mut out = Vec::new();
        let Some(run) = self.live_slot(slot, epoch) else {
            return out;
        };
        run.close(error);
        let (problems, recorded) = (run.recording_problems.clone(), run.recorded.clone());
        self.dirty = true;
        if !problems.is_empty() {
            self.message = Some(problems.join("; "));
        } else if let Some(dir) = crate::history::recordings_dir()
            && let Some(p) = recorded.iter().find(|p| p.starts_with(&dir))
        {
            // "recording this run to …" said while it ran; now it is done.
            self.message = Some(format!(
                "recorded this run to {} (in the list under recordings)",
                p.display()
            ));
        }
        if self.message.is_none()
            && let Some(s) = self.step_shown().filter(|s| s.here)
        {
            let next = if s.index + 1 < s.count {
                "; > the next step"
            } else {
                "; that was the lesson's last step"
            };
            self.message = Some(format!(
                "step {} of {}: the verdicts are in with the hint (z: on the whole screen){next}",
                s.index + 1,
                s.count
            ));
        }
        if let Some(h) = crate::history::dir() {
            for p in recorded.iter().filter(|p| p.starts_with(&h)) {
                self.add_history(p.clone(), &h);
            }
        }
        if slot == A
            && let Some(req) = self.queued.take()
        {
            out.push(self.start_in(B, *req));
        }
        self.judge_compared();
        out
    }

    pub(super) fn live_slot(&mut self, slot: usize, epoch: u64) -> Option<&mut RunState> {
        if self.epochs.get(slot) != Some(&epoch) {
            return None;
        }
        self.slots.get_mut(slot)?.as_mut()
    }

    fn key(&mut self, k: KeyEvent) -> Vec<Cmd> {
        if self.overlay == Overlay::Help {
            // Scroll keys scroll a help taller than the screen; any other key
            // closes it, and never acts behind it.
            let by: i32 = match k.code {
                KeyCode::Down | KeyCode::Char('j') => 1,
                KeyCode::Up | KeyCode::Char('k') => -1,
                KeyCode::PageDown => 10,
                KeyCode::PageUp => -10,
                _ => 0,
            };
            if by == 0 {
                self.overlay = Overlay::None;
                self.help_scroll = 0;
            } else {
                self.help_scroll = (i32::from(self.help_scroll) + by).clamp(0, 200) as u16;
            }
            return Vec::new();
        }
        let mode = self.mode();
        if mode == Mode::Main
            && self.class_mode
            && let KeyCode::Char(c @ '1'..='9') = k.code
        {
            self.predict(usize::from(c as u8 - b'1'));
            return Vec::new();
        }
        if matches!(mode, Mode::Main | Mode::Replay)
            && self.lesson.is_some()
            && k.code == KeyCode::Char('<')
        {
            self.message = None;
            self.move_step(false);
            return Vec::new();
        }
        match mode {
            Mode::Filter => match k.code {
                KeyCode::Char(c) if keys::action(&k, mode).is_none() && !c.is_control() => {
                    self.filter.push(c);
                    self.selected = 0;
                    return Vec::new();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                    self.selected = 0;
                    return Vec::new();
                }
                _ => {}
            },
            Mode::Params => match k.code {
                KeyCode::Char(c) if c.is_ascii_digit() || c == '.' => {
                    if let Overlay::Params { typed, .. } = &mut self.overlay {
                        typed.push(c);
                    }
                    return Vec::new();
                }
                KeyCode::Backspace => {
                    if let Overlay::Params { typed, .. } = &mut self.overlay {
                        typed.pop();
                    }
                    return Vec::new();
                }
                _ => {}
            },
            Mode::Main | Mode::Replay => {}
        }
        match keys::action(&k, mode) {
            Some(a) => self.act(a, mode),
            None => Vec::new(),
        }
    }

    fn act(&mut self, a: Action, mode: Mode) -> Vec<Cmd> {
        match mode {
            Mode::Filter => {
                match a {
                    Action::Run => self.filtering = false,
                    Action::Cancel => {
                        self.filter.clear();
                        self.filtering = false;
                    }
                    Action::Up | Action::Down => self.move_selection(a),
                    _ => {}
                }
                return Vec::new();
            }
            Mode::Params => {
                self.param_action(a);
                return Vec::new();
            }
            Mode::Replay => {
                if self.replay_action(a) {
                    return Vec::new();
                }
            }
            Mode::Main => {}
        }
        self.message = None;
        match a {
            Action::Quit => {
                self.quit = true;
                self.queued = None;
                return self.cancel_all();
            }
            Action::Help => self.overlay = Overlay::Help,
            Action::Up | Action::Down | Action::First | Action::Last => self.move_selection(a),
            Action::Filter => self.filtering = true,
            Action::Run => return self.run_or_continue(),
            Action::Step => return self.step(),
            Action::Cancel => {
                if self.watching() {
                    // The program is not gpulab's worker: Esc stops it as q does
                    // (SIGTERM to its process group, by `watch`), and says so
                    // only once it has been stopped, in the report.
                    self.quit = true;
                    self.queued = None;
                    return Vec::new();
                }
                if self.running() {
                    self.queued = None;
                    self.message = Some(
                        "cancelled: the worker was killed; the driver takes its memory back".into(),
                    );
                    return self.cancel_all();
                }
                if self.compare {
                    self.leave_compare();
                    self.message = Some("compare mode left: the first run stays shown".into());
                } else if self.zoom {
                    self.zoom = false;
                } else if !self.filter.is_empty() {
                    self.filter.clear();
                    self.selected = 0;
                }
            }
            Action::NextVariant | Action::PrevVariant => {
                self.cycle_variant(a == Action::NextVariant)
            }
            Action::Params => self.open_params(),
            Action::Compare => return self.compare(),
            Action::FocusNext | Action::FocusPrev => {
                self.focus = self.focus.cycle(a == Action::FocusNext);
            }
            Action::PageUp | Action::PageDown => {
                // The Verdicts panel's title offers PgUp/PgDn: they scroll it
                // whatever has the focus, unless the Script panel has it.
                let up = a == Action::PageUp;
                let panel = match self.focus {
                    Panel::Script => Panel::Script,
                    _ => Panel::Verdict,
                };
                self.scroll(panel, if up { -5 } else { 5 });
            }
            Action::Record => self.arm_record(),
            Action::OpenRecording => return self.open_lab_recording(),
            Action::Zoom => self.zoom = !self.zoom,
            Action::NextRank => self.cycle_rank(),
            Action::NextStep => self.move_step(true),
            Action::ClassMode => {
                self.class_mode = !self.class_mode;
                self.message = Some(if self.class_mode {
                    "class mode: predict each claim with its number, then Enter runs".into()
                } else {
                    "class mode off: the lesson shows before the run".into()
                });
            }
            Action::Mouse => {
                self.mouse = !self.mouse;
                self.message = Some(if self.mouse {
                    "mouse on: the wheel scrolls the panel under the pointer".into()
                } else {
                    "mouse off: select text with the mouse as usual; m turns it back on".into()
                });
            }
            _ => {}
        }
        Vec::new()
    }

    fn move_selection(&mut self, a: Action) {
        let n = self.entries().len();
        if n == 0 {
            return;
        }
        self.selected = match a {
            Action::Up => self.selected.saturating_sub(1),
            Action::First => 0,
            Action::Last => n - 1,
            _ => (self.selected + 1).min(n - 1),
        };
        self.script_scroll = 0;
        self.verdict_scroll = 0;
    }

    pub fn scroll(&mut self, panel: Panel, by: i32) {
        let apply = |v: u16| (i32::from(v) + by).clamp(0, 10_000) as u16;
        match panel {
            Panel::Labs => {
                for _ in 0..by.unsigned_abs() {
                    self.move_selection(if by < 0 { Action::Up } else { Action::Down });
                }
            }
            Panel::Script => self.script_scroll = apply(self.script_scroll),
            // Stopped at the text's end when the frame is drawn
            // ([`crate::event_loop::draw`]): the layout knows its length.
            Panel::Verdict => self.verdict_scroll = apply(self.verdict_scroll),
            _ => {}
        }
        self.dirty = true;
    }

    /// The wheel scrolls the panel under the pointer; a click focuses it, as
    /// Tab would (htop and gitui: the keys then act on what was clicked).
    fn mouse(&mut self, m: MouseEvent) {
        // A replay's banner takes the top row.
        let top = u16::from(self.replaying());
        let screen = Screen::new(self.size.0, self.size.1.saturating_sub(top), self.view());
        let Some(panel) = screen.panel_at(m.column, m.row.saturating_sub(top)) else {
            return;
        };
        let by = match m.kind {
            MouseEventKind::ScrollUp => -1,
            MouseEventKind::ScrollDown => 1,
            MouseEventKind::Down(ratatui::crossterm::event::MouseButton::Left) => {
                if self.focus != panel {
                    self.focus = panel;
                    self.dirty = true;
                }
                return;
            }
            _ => return,
        };
        self.scroll(panel, by * if panel == Panel::Labs { 1 } else { 3 });
    }
}
