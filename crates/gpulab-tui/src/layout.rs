//! Where each panel goes for a terminal size: one function used by drawing and by
//! the mouse (which panel is under the pointer), so the two never disagree.

use ratatui::layout::{Constraint, Layout, Rect};

/// Smallest terminal the dashboard draws in; below it, a message says so.
pub const MIN_W: u16 = 80;
pub const MIN_H: u16 = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Panel {
    Labs,
    Script,
    Memory,
    Objects,
    Timeline,
    Verdict,
}

impl Panel {
    const ORDER: [Panel; 6] = [
        Panel::Labs,
        Panel::Script,
        Panel::Memory,
        Panel::Objects,
        Panel::Timeline,
        Panel::Verdict,
    ];

    pub fn cycle(self, forward: bool) -> Panel {
        let i = Self::ORDER.iter().position(|p| *p == self).unwrap_or(0);
        let n = Self::ORDER.len();
        Self::ORDER[if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        }]
    }
}

/// What of the app's state decides the layout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct View {
    /// Two runs side by side.
    pub compare: bool,
    /// `z`: this panel alone fills the body (one per run in compare mode).
    pub zoom: Option<Panel>,
    /// A replay banner takes a row above the area laid out.
    pub banner: bool,
    /// The most timeline lanes a run shown draws (host, queues, in flight).
    pub lanes: u16,
    /// A program `watch --dashboard` started is shown: its objects, not the
    /// lab list, get the left column (the list keeps a few rows to pick a lab).
    pub watched: bool,
}

/// Rows the lab list keeps while a watched program's objects fill the column.
const LABS_WHILE_WATCHED: u16 = 5;

/// Below this height the column gives the script most of the room and the
/// verdicts and timeline their fewest useful rows (80x24 has 23 under the bar).
pub const COMPACT_H: u16 = 32;

/// The panels of one frame: (panel, run slot, area).
#[derive(Debug, Clone)]
pub struct Screen {
    pub area: Rect,
    pub status: Rect,
    pub panels: Vec<(Panel, usize, Rect)>,
    pub too_small: bool,
}

impl Screen {
    pub fn new(w: u16, h: u16, view: View) -> Screen {
        let compare = view.compare;
        let area = Rect::new(0, 0, w, h);
        if w < MIN_W || h + u16::from(view.banner) < MIN_H {
            return Screen {
                area,
                status: Rect::default(),
                panels: Vec::new(),
                too_small: true,
            };
        }
        let [body, status] =
            Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(area);
        let mut panels = Vec::new();
        if let Some(panel) = view.zoom {
            if compare && panel != Panel::Labs && panel != Panel::Objects {
                let [l, r] = Layout::horizontal([Constraint::Ratio(1, 2); 2]).areas(body);
                panels.push((panel, 0, l));
                panels.push((panel, 1, r));
            } else {
                panels.push((panel, 0, body));
            }
        } else if compare {
            let [l, r] = Layout::horizontal([Constraint::Ratio(1, 2); 2]).areas(body);
            for (slot, col) in [l, r].into_iter().enumerate() {
                let [script, memory, timeline, verdict] = column(col, view.lanes);
                panels.push((Panel::Script, slot, script));
                panels.push((Panel::Memory, slot, memory));
                panels.push((Panel::Timeline, slot, timeline));
                panels.push((Panel::Verdict, slot, verdict));
            }
        } else {
            let lw = (w / 4).clamp(24, 40);
            let [left, right] =
                Layout::horizontal([Constraint::Length(lw), Constraint::Min(1)]).areas(body);
            let objects_h = if view.watched {
                body.height.saturating_sub(LABS_WHILE_WATCHED)
            } else {
                (body.height / 2).min(20)
            };
            let [labs, objects] =
                Layout::vertical([Constraint::Min(3), Constraint::Length(objects_h)]).areas(left);
            panels.push((Panel::Labs, 0, labs));
            panels.push((Panel::Objects, 0, objects));
            let [script, memory, timeline, verdict] = column(right, view.lanes);
            panels.push((Panel::Script, 0, script));
            panels.push((Panel::Memory, 0, memory));
            panels.push((Panel::Timeline, 0, timeline));
            panels.push((Panel::Verdict, 0, verdict));
        }
        Screen {
            area,
            status,
            panels,
            too_small: false,
        }
    }

    pub fn panel_at(&self, x: u16, y: u16) -> Option<Panel> {
        self.panels
            .iter()
            .find(|(_, _, r)| x >= r.x && x < r.right() && y >= r.y && y < r.bottom())
            .map(|(p, _, _)| *p)
    }

    pub fn get(&self, panel: Panel, slot: usize) -> Option<Rect> {
        self.panels
            .iter()
            .find(|(p, s, _)| *p == panel && *s == slot)
            .map(|(_, _, r)| *r)
    }
}

/// Script, memory, timeline and verdicts stacked; the chart gets the most room,
/// except on a short terminal, where the script does (its per-line results are
/// the lesson) and `z` zooms any panel.
fn column(area: Rect, lanes: u16) -> [Rect; 4] {
    let h = area.height;
    if h + 1 < COMPACT_H {
        // 23 rows at 80x24: script 7 (a header and 5 lines around the one
        // running), chart 8 (five rows of curve: a step of a lab reads), two
        // lanes, two lines of verdicts; every panel scrolls or zooms. A run of
        // two streams gets its third lane from the script (a line fewer).
        let timeline = (lanes + 2).clamp(4, 5);
        let verdict = 4;
        let memory = (h.saturating_sub(timeline + verdict) / 2 + 1).max(6);
        return Layout::vertical([
            Constraint::Min(3),
            Constraint::Length(memory),
            Constraint::Length(timeline),
            Constraint::Length(verdict),
        ])
        .areas(area);
    }
    let timeline = if h >= 40 { 7 } else { 5 };
    let script = (h.saturating_sub(timeline) * 3 / 10).max(5);
    let memory = (h.saturating_sub(timeline) * 4 / 10).max(6);
    Layout::vertical([
        Constraint::Length(script),
        Constraint::Length(memory),
        Constraint::Length(timeline),
        Constraint::Min(3),
    ])
    .areas(area)
}
