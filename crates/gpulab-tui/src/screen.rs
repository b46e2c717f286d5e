//! A whole frame from the app state: the panels where `layout` puts them, the
//! overlays on top, or a clear message when the terminal is too small.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::app::{A, App, B, Entry, Overlay};
use super::layout::{MIN_H, MIN_W, Panel, Screen, View};
use super::panels::Axes;
use super::panels::banner::ReplayBanner;
use super::panels::help::HelpOverlay;
use super::panels::labs::LabsPanel;
use super::panels::memory::MemoryPanel;
use super::panels::objects::ObjectsPanel;
use super::panels::params::ParamsOverlay;
use super::panels::script::ScriptPanel;
use super::panels::status::StatusBar;
use super::panels::timeline::TimelinePanel;
use super::panels::verdict::VerdictPanel;
use super::playback::Playback;
use super::runstate::{Feed, RunState};
use super::theme::Theme;
use crate::lab::Lab;

pub struct Dashboard<'a> {
    pub app: &'a App,
}

impl Widget for &Dashboard<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.app;
        let banner = app.playback.as_ref().filter(|_| app.replaying());
        let full = area;
        let (banner_row, area) = split_banner(area, banner);
        let screen = screen_in(area, app.view());
        if screen.too_small {
            too_small(full, app.theme, buf);
            return;
        }
        let frame = FrameState::new(app);
        for (panel, slot, rect) in &screen.panels {
            frame.panel(*panel, *slot, *rect, buf);
        }
        frame.status_bar(screen.status, buf);
        if let Some(playback) = banner {
            let row = banner_row.unwrap_or(screen.status);
            ReplayBanner {
                playback,
                theme: app.theme,
            }
            .render(row, buf);
        }
        frame.overlay(area, buf);
    }
}

/// The banner's row, if there is a banner, and the area left for the panels.
fn split_banner(area: Rect, banner: Option<&Playback>) -> (Option<Rect>, Rect) {
    // A replay's banner takes the top row and the panels lay out below it, at
    // every size: the status bar keeps its hints and messages.
    match banner {
        Some(_) if area.height > 1 => (
            Some(Rect::new(area.x, area.y, area.width, 1)),
            Rect::new(area.x, area.y + 1, area.width, area.height - 1),
        ),
        _ => (None, area),
    }
}

/// The layout for `area`, moved down to where `area` starts.
fn screen_in(area: Rect, view: View) -> Screen {
    let mut screen = Screen::new(area.width, area.height, view);
    for (_, _, r) in &mut screen.panels {
        r.y += area.y;
    }
    screen.status.y += area.y;
    screen
}

/// The message shown instead of the panels on a terminal below the minimum size.
fn too_small(area: Rect, theme: Theme, buf: &mut Buffer) {
    let text = format!(
        "gpulab needs a terminal of at least {MIN_W}×{MIN_H}; this one is {}×{}. Enlarge it, or press q to quit.",
        area.width, area.height
    );
    Paragraph::new(Line::styled(text, theme.warn()))
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

/// How far the verdict panels scroll at the app's size before the longest's
/// last line is at its bottom (PgDn stops there, as a pager does).
pub fn verdict_scroll_max(app: &App) -> u16 {
    let f = FrameState::new(app);
    let top = u16::from(app.replaying());
    let screen = Screen::new(app.size.0, app.size.1.saturating_sub(top), app.view());
    (0..2)
        .filter_map(|slot| {
            let rect = screen.get(Panel::Verdict, slot)?;
            let run = f.runs[slot];
            let (lab, variant) = f.lab_and_variant(run);
            Some(
                VerdictPanel {
                    lab,
                    variant,
                    run,
                    rank: app.rank,
                    scroll: 0,
                    theme: app.theme,
                    focused: false,
                    class_mode: app.class_mode,
                    predicted: app.predicted_here(),
                    step: app.step_shown(),
                }
                .max_scroll(rect),
            )
        })
        .max()
        .unwrap_or(0)
}

/// What every panel of one frame reads, worked out once per frame.
struct FrameState<'a> {
    app: &'a App,
    /// The run in each slot: A and B in compare mode, else the shown run in A.
    runs: [Option<&'a RunState>; 2],
    /// Compare mode: both runs on the same time span and memory range.
    shared: Option<Axes>,
    entries: Vec<Entry>,
    selected_lab: Option<&'a Lab>,
    lab_recording: Option<std::path::PathBuf>,
}

impl<'a> FrameState<'a> {
    fn new(app: &'a App) -> FrameState<'a> {
        let runs: [Option<&RunState>; 2] = if app.compare {
            [app.slots[A].as_ref(), app.slots[B].as_ref()]
        } else {
            [app.shown(), None]
        };
        // One pass over the readings for both the chart and the timeline.
        let runs_shown: Vec<&RunState> = runs.iter().flatten().copied().collect();
        let shared = (!runs_shown.is_empty()).then(|| Axes::of(&runs_shown));
        FrameState {
            app,
            runs,
            shared,
            entries: app.entries(),
            selected_lab: app.selected_lab(),
            lab_recording: app
                .selected_lab_recording()
                .and_then(|i| app.recordings.get(i).cloned()),
        }
    }

    /// The lab a slot's panels show, and the index of its variant.
    fn lab_and_variant(&self, run: Option<&RunState>) -> (Option<&'a Lab>, usize) {
        let app = self.app;
        let lab = match run {
            // A watched program has no lab: the selected one's script and claims
            // are not about it.
            Some(r) if matches!(r.origin, Feed::Watched { .. }) => None,
            Some(r) => app.lab_for(r).or(self.selected_lab),
            None => self.selected_lab,
        };
        let variant = match (lab, run) {
            (Some(l), Some(r)) => l
                .variants
                .iter()
                .position(|v| v.name == r.variant())
                .unwrap_or(0),
            (Some(l), None) => app.variant_of(l),
            _ => 0,
        };
        (lab, variant)
    }

    fn panel(&self, panel: Panel, slot: usize, rect: Rect, buf: &mut Buffer) {
        let app = self.app;
        let t = app.theme;
        let run = self.runs[slot];
        let (lab, variant) = self.lab_and_variant(run);
        let focused = app.focus == panel;
        match panel {
            Panel::Labs => LabsPanel {
                labs: &app.labs,
                invalid: &app.invalid,
                recordings: &app.recording_labels,
                entries: &self.entries,
                selected: app.selected,
                variant: self.selected_lab.map(|l| app.variant_of(l)).unwrap_or(0),
                filter: &app.filter,
                filtering: app.filtering,
                availability: app.availability.as_ref(),
                lab_recording: self.lab_recording.as_deref(),
                theme: t,
                focused,
            }
            .render(rect, buf),
            Panel::Script => ScriptPanel {
                lab,
                variant,
                params: lab.and_then(|l| app.params.get(&l.id)),
                run,
                scroll: app.script_scroll,
                theme: t,
                focused,
            }
            .render(rect, buf),
            Panel::Memory => MemoryPanel {
                run,
                axes: self.shared,
                theme: t,
                focused,
                curve: if slot == B { t.memory_b() } else { t.memory() },
            }
            .render(rect, buf),
            Panel::Objects => ObjectsPanel {
                run,
                rank: app.rank,
                theme: t,
                focused,
            }
            .render(rect, buf),
            Panel::Timeline => TimelinePanel {
                run,
                axes: self.shared,
                theme: t,
                focused,
            }
            .render(rect, buf),
            Panel::Verdict => VerdictPanel {
                lab,
                variant,
                run,
                rank: app.rank,
                scroll: app.verdict_scroll,
                theme: t,
                focused,
                class_mode: app.class_mode,
                predicted: app.predicted_here(),
                step: app.step_shown(),
            }
            .render(rect, buf),
        }
    }

    fn status_bar(&self, rect: Rect, buf: &mut Buffer) {
        let app = self.app;
        StatusBar {
            run: self.runs[A],
            availability: app.availability.as_ref(),
            sample_hz: app.sample_hz,
            message: app.message.as_deref(),
            mode: app.mode(),
            theme: app.theme,
        }
        .render(rect, buf);
    }

    /// The help or parameters overlay, when one is open, over `area`.
    fn overlay(&self, area: Rect, buf: &mut Buffer) {
        let app = self.app;
        match &app.overlay {
            Overlay::None => {}
            Overlay::Help => HelpOverlay {
                theme: app.theme,
                scroll: app.help_scroll,
            }
            .render(area, buf),
            Overlay::Params { selected, typed } => {
                if let Some(lab) = self.selected_lab {
                    let values = app.params_of(lab);
                    ParamsOverlay {
                        lab,
                        values: &values,
                        selected: *selected,
                        typed,
                        theme: app.theme,
                    }
                    .render(area, buf);
                }
            }
        }
    }
}
