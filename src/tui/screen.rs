//! A whole frame from the app state: the panels where `layout` puts them, the
//! overlays on top, or a clear message when the terminal is too small.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::app::{A, App, B, Overlay};
use super::layout::{MIN_H, MIN_W, Panel, Screen};
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
use super::runstate::RunState;

pub struct Dashboard<'a> {
    pub app: &'a App,
}

impl Widget for &Dashboard<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let app = self.app;
        // A replay's banner takes the top row and the panels lay out below it;
        // at the smallest size it takes the status bar's row instead.
        let banner = app.playback.as_ref().filter(|_| app.replaying());
        let (banner_row, area) = match banner {
            Some(_) if area.height > MIN_H => (
                Some(Rect::new(area.x, area.y, area.width, 1)),
                Rect::new(area.x, area.y + 1, area.width, area.height - 1),
            ),
            _ => (None, area),
        };
        let mut screen = Screen::new(area.width, area.height, app.compare);
        for (_, _, r) in &mut screen.panels {
            r.y += area.y;
        }
        screen.status.y += area.y;
        if screen.too_small {
            let text = format!(
                "gpulab needs a terminal of at least {MIN_W}×{MIN_H}; this one is {}×{}. Enlarge it, or press q to quit.",
                area.width, area.height
            );
            Paragraph::new(Line::styled(text, app.theme.warn()))
                .wrap(Wrap { trim: true })
                .render(area, buf);
            return;
        }
        let t = app.theme;
        let runs: [Option<&RunState>; 2] = if app.compare {
            [app.slots[A].as_ref(), app.slots[B].as_ref()]
        } else {
            [app.shown(), None]
        };
        // Compare mode: both runs on the same time span and memory range.
        // One pass over the readings for both the chart and the timeline.
        let runs_shown: Vec<&RunState> = runs.iter().flatten().copied().collect();
        let shared = (!runs_shown.is_empty()).then(|| Axes::of(&runs_shown));
        let entries = app.entries();
        let selected_lab = app.selected_lab();
        for (panel, slot, rect) in &screen.panels {
            let run = runs[*slot];
            let lab = match run {
                Some(r) => app.lab_for(r).or(selected_lab),
                None => selected_lab,
            };
            let focused = app.focus == *panel;
            let variant = match (lab, run) {
                (Some(l), Some(r)) => l
                    .variants
                    .iter()
                    .position(|v| v.name == r.variant())
                    .unwrap_or(0),
                (Some(l), None) => app.variant_of(l),
                _ => 0,
            };
            match panel {
                Panel::Labs => LabsPanel {
                    labs: &app.labs,
                    recordings: &app.recordings,
                    entries: &entries,
                    selected: app.selected,
                    variant: selected_lab.map(|l| app.variant_of(l)).unwrap_or(0),
                    filter: &app.filter,
                    filtering: app.filtering,
                    availability: app.availability.as_ref(),
                    theme: t,
                    focused,
                }
                .render(*rect, buf),
                Panel::Script => ScriptPanel {
                    lab,
                    variant,
                    params: lab.and_then(|l| app.params.get(&l.id)),
                    run,
                    scroll: app.script_scroll,
                    theme: t,
                    focused,
                }
                .render(*rect, buf),
                Panel::Memory => MemoryPanel {
                    run,
                    axes: shared,
                    theme: t,
                    focused,
                    curve: if *slot == B { t.memory_b() } else { t.memory() },
                }
                .render(*rect, buf),
                Panel::Objects => ObjectsPanel {
                    run,
                    theme: t,
                    focused,
                }
                .render(*rect, buf),
                Panel::Timeline => TimelinePanel {
                    run,
                    axes: shared,
                    theme: t,
                    focused,
                }
                .render(*rect, buf),
                Panel::Verdict => VerdictPanel {
                    lab,
                    run,
                    scroll: app.verdict_scroll,
                    theme: t,
                    focused,
                }
                .render(*rect, buf),
            }
        }
        StatusBar {
            run: runs[A],
            availability: app.availability.as_ref(),
            sample_hz: app.sample_hz,
            message: app.message.as_deref(),
            mode: app.mode(),
            theme: t,
        }
        .render(screen.status, buf);
        if let Some(playback) = banner {
            let row = banner_row.unwrap_or(screen.status);
            ReplayBanner { playback, theme: t }.render(row, buf);
        }
        match &app.overlay {
            Overlay::None => {}
            Overlay::Help => HelpOverlay { theme: t }.render(area, buf),
            Overlay::Params { selected, typed } => {
                if let Some(lab) = selected_lab {
                    let values = app.params_of(lab);
                    ParamsOverlay {
                        lab,
                        values: &values,
                        selected: *selected,
                        typed,
                        theme: t,
                    }
                    .render(area, buf);
                }
            }
        }
    }
}
