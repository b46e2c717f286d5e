//! The timeline: the host thread's calls as spans on one lane and each queue's
//! device spans on its own lane, on the same time axis (and the same columns) as
//! the memory chart above it, so waits, serialisation and overlap show at a glance.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Paragraph, Widget};

use super::{Axes, GUTTER, axis_labels, block, fit, usable};
use crate::runstate::RunState;
use crate::theme::Theme;
use crate::trace::CallStatus;

pub struct TimelinePanel<'a> {
    pub run: Option<&'a RunState>,
    pub axes: Option<Axes>,
    pub theme: Theme,
    pub focused: bool,
}

/// A host call this long is a wait worth seeing.
const WAIT_NS: u64 = 1_000_000;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cell {
    Empty,
    InFlight,
    Call,
    /// A host call that has not returned yet.
    Running,
    Wait,
    Copy,
    Kernel,
    Error,
}

/// The lane of work a lab queued whose device span has not come yet (queued or
/// running: the driver reports it only when it is done).
const IN_FLIGHT: &str = "pending";

impl Widget for &TimelinePanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let skipped = self
            .run
            .map(|r| super::skipped(&self.axes.unwrap_or_else(|| Axes::of(&[r]))))
            .unwrap_or_default();
        let b = block(
            format!("Timeline · host calls and device work{skipped}"),
            self.focused,
            self.theme,
        );
        let inner = b.inner(area);
        b.render(area, buf);
        let Some(inner) = usable(inner) else { return };
        let Some(run) = self.run.filter(|r| !r.run.calls().is_empty()) else {
            Paragraph::new(Span::styled("no calls yet", self.theme.dim())).render(inner, buf);
            return;
        };
        let axes = self.axes.unwrap_or_else(|| Axes::of(&[run]));
        let gutter = GUTTER.min(inner.width / 3);
        let w = inner.width.saturating_sub(gutter) as usize;
        if w == 0 {
            return;
        }
        // The time axis where there is a row to spare after the lanes.
        let axis = u16::from(inner.height >= 3 && usize::from(inner.height) > lane_count(run));
        let rows = (inner.height - axis) as usize;
        let lanes = lanes(run, &axes, w);
        self.draw(&lanes, inner, (gutter, rows), buf);
        if rows > 0 {
            self.mark_host(&host_marks(run, &axes, w), &lanes[0].1, inner, gutter, buf);
        }
        if axis == 1 {
            let y = inner.y + inner.height - 1;
            buf.set_stringn(
                inner.x + gutter,
                y,
                axis_labels(&axes, w),
                w,
                self.theme.dim(),
            );
        }
    }
}

/// When each device job a running lab queued began, for those whose span has not
/// come yet. None once the run ended: what never came then is not in flight.
fn in_flight(run: &RunState) -> Vec<u64> {
    if run.run.end().is_some() {
        return Vec::new();
    }
    run.in_flight.values().copied().collect()
}

/// When the line a live lab run is in began, if it has gone on for a while
/// without returning: the previous call's end (the worker starts each line as
/// the last returns). Not in step mode, where the worker may be waiting for
/// the user rather than for a call.
fn blocked_since(run: &RunState) -> Option<u64> {
    if !run.running() || run.step_mode() || run.run.end().is_some() {
        return None;
    }
    run.next_line()?;
    let since = run.run.calls().last()?.end_ns;
    (latest(run).saturating_sub(since) >= WAIT_NS).then_some(since)
}

/// The latest time the run has seen: its last call's end or last reading.
fn latest(run: &RunState) -> u64 {
    let r = &run.run;
    let call = r.calls().last().map_or(0, |c| c.end_ns);
    let reading = r.readings().last().map_or(0, |(t, _)| *t);
    call.max(reading)
}

/// Where on the host lane each call begins, and where the calls a claim can
/// name (the tagged lines) begin, with their tags: the first of each tag only
/// (a tag inside a `repeat` recurs).
struct HostMarks {
    starts: Vec<usize>,
    tags: Vec<(usize, String)>,
}

fn host_marks(run: &RunState, axes: &Axes, w: usize) -> HostMarks {
    let t0 = axes.origin(run);
    let mut marks = HostMarks {
        starts: Vec::new(),
        tags: Vec::new(),
    };
    for c in run.run.calls() {
        // A call of the setup left of the axis marks nothing.
        if matches!(c.status, CallStatus::Directive) || c.end_ns < t0 {
            continue;
        }
        let x = axes.col(t0, c.begin_ns, w);
        marks.starts.push(x);
        if let Some(tag) = &c.tag
            && !marks.tags.iter().any(|(_, t)| t == tag)
        {
            marks.tags.push((x, tag.clone()));
        }
    }
    marks
}

/// How many lanes the timeline of `run` draws: the host's, one per queue or
/// stream name, and one for device work in flight. The layout gives a short
/// terminal's timeline room for them (two streams taking turns is a lesson).
pub fn lane_count(run: &RunState) -> usize {
    let mut names: Vec<&str> = Vec::new();
    for s in run.run.spans() {
        let n = s.queue_name.as_deref().unwrap_or("");
        if !names.contains(&n) {
            names.push(n);
        }
    }
    1 + names.len() + usize::from(!in_flight(run).is_empty())
}

/// The host lane, a lane per queue or stream (by script name), and one for
/// device work queued and not yet reported done: what each column shows.
fn lanes(run: &RunState, axes: &Axes, w: usize) -> Vec<(String, Vec<Cell>)> {
    let t0 = axes.origin(run);
    // Queues with the same script name (a loop re-creating `q`) share a lane.
    let mut names: Vec<String> = Vec::new();
    for s in run.run.spans() {
        let n = s
            .queue_name
            .clone()
            .unwrap_or_else(|| format!("queue {}", s.queue));
        if !names.contains(&n) {
            names.push(n);
        }
    }
    // A lab run still going: device work queued and not reported done is drawn
    // from its enqueue to now, open-ended, on a lane of its own (the span, with
    // its real start and end, replaces it when the driver reports it).
    let in_flight = in_flight(run);
    if !in_flight.is_empty() {
        names.push(IN_FLIGHT.into());
    }
    let mut lanes: Vec<(String, Vec<Cell>)> = vec![("host".into(), vec![Cell::Empty; w])];
    lanes.extend(names.iter().map(|n| (n.clone(), vec![Cell::Empty; w])));
    let mark = |lane: &mut Vec<Cell>, b: u64, e: u64, c: Cell| {
        if e < t0 {
            return;
        }
        let (x0, x1) = (axes.col(t0, b, w), axes.col(t0, e, w));
        for cell in &mut lane[x0..=x1.max(x0)] {
            *cell = (*cell).max(c);
        }
    };
    for c in run.run.calls() {
        let kind = match &c.status {
            CallStatus::Directive => continue,
            CallStatus::Error { .. } => Cell::Error,
            CallStatus::Ok if c.end_ns.saturating_sub(c.begin_ns) >= WAIT_NS => Cell::Wait,
            CallStatus::Ok => Cell::Call,
        };
        mark(&mut lanes[0].1, c.begin_ns, c.end_ns, kind);
    }
    // The line the worker is in (a blocking cudaFree, a long sleep) has sent
    // nothing yet: it began when the previous call returned, and is drawn
    // open-ended until it returns.
    if let Some(since) = blocked_since(run) {
        mark(
            &mut lanes[0].1,
            since,
            latest(run).max(since),
            Cell::Running,
        );
    }
    for s in run.run.spans() {
        let n = s
            .queue_name
            .clone()
            .unwrap_or_else(|| format!("queue {}", s.queue));
        let i = names.iter().position(|x| *x == n).unwrap_or(0) + 1;
        let kind = if matches!(s.name.as_str(), "read" | "write" | "copy") {
            Cell::Copy
        } else {
            Cell::Kernel
        };
        mark(&mut lanes[i].1, s.begin_ns, s.end_ns, kind);
    }
    if let Some((_, lane)) = lanes.iter_mut().find(|(n, _)| n == IN_FLIGHT) {
        let now = latest(run);
        for begin in &in_flight {
            mark(lane, *begin, now.max(*begin), Cell::InFlight);
        }
    }
    lanes
}

impl TimelinePanel<'_> {
    /// Over the host lane: a boundary where a call begins right after another
    /// (two long calls do not run together into one bar), and each tagged
    /// call's tag at its start, in reverse video, so the line a claim measures
    /// is found on the timeline without a key.
    fn mark_host(
        &self,
        marks: &HostMarks,
        cells: &[Cell],
        inner: Rect,
        gutter: u16,
        buf: &mut Buffer,
    ) {
        let y = inner.y;
        let x0 = inner.x + gutter;
        for &x in &marks.starts {
            let before = x.checked_sub(1).and_then(|b| cells.get(b));
            if before.is_some_and(|c| matches!(c, Cell::Call | Cell::Wait | Cell::Running))
                && matches!(cells.get(x), Some(Cell::Call | Cell::Wait))
            {
                let style = if cells[x] == Cell::Wait {
                    self.theme.warn()
                } else {
                    self.theme.host()
                };
                buf.set_string(x0 + x as u16, y, "┃", style);
            }
        }
        let mut tags = marks.tags.clone();
        tags.sort_by_key(|(x, _)| *x);
        let label = self.theme.current().add_modifier(Modifier::REVERSED);
        // Each label at its call's start, or just after the label before it
        // where calls are too close for both (they keep their order); cut
        // only at the lane's end.
        let mut free = 0usize;
        for (x, tag) in &tags {
            let at = (*x).max(free);
            let room = cells.len().saturating_sub(at);
            if room == 0 {
                break;
            }
            let text = fit(tag, room);
            let n = text.chars().count();
            buf.set_stringn(x0 + at as u16, y, &text, room, label);
            free = at + n + 1;
        }
    }

    /// The lanes that fit in `rows`, each with its name in the gutter.
    fn draw(
        &self,
        lanes: &[(String, Vec<Cell>)],
        inner: Rect,
        (gutter, rows): (u16, usize),
        buf: &mut Buffer,
    ) {
        let hidden = lanes.len().saturating_sub(rows);
        for (row, (name, cells)) in lanes.iter().take(rows).enumerate() {
            let y = inner.y + row as u16;
            let label = if hidden > 0 && row + 1 == rows {
                format!("+{hidden} more")
            } else {
                name.clone()
            };
            buf.set_stringn(
                inner.x,
                y,
                fit(&label, gutter.saturating_sub(1) as usize),
                gutter as usize,
                self.theme.dim(),
            );
            for (x, c) in cells.iter().enumerate() {
                let (ch, style): (&str, Style) = match c {
                    Cell::Empty => continue,
                    Cell::Call => ("▬", self.theme.host()),
                    Cell::Wait => ("━", self.theme.warn()),
                    Cell::Running => ("┅", self.theme.warn()),
                    Cell::Error => ("✗", self.theme.bad()),
                    Cell::Kernel => ("█", self.theme.device()),
                    Cell::Copy => ("▓", self.theme.device()),
                    Cell::InFlight => ("░", self.theme.device()),
                };
                buf.set_string(inner.x + gutter + x as u16, y, ch, style);
            }
        }
    }
}
