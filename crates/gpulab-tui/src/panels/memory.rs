//! The memory chart: device memory (or, on a CPU OpenCL device, the worker's host
//! memory) over the run in Braille, y in MiB, with baseline and budget lines and a
//! marker under every call. Readings are decimated per dot column keeping min and
//! max, so 1 kHz sampling costs one pass per frame and never hides a spike.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::braille::Grid;
use super::{Axes, GUTTER, MIB, axis_labels, block, usable};
use crate::runstate::RunState;
use crate::theme::Theme;
use crate::trace::{CallStatus, MemorySource};

pub struct MemoryPanel<'a> {
    pub run: Option<&'a RunState>,
    /// Shared with the other run in compare mode; `None` = this run's own.
    pub axes: Option<Axes>,
    pub theme: Theme,
    pub focused: bool,
    /// The curve's style (the second run of a compare gets another colour).
    pub curve: Style,
}

const BASELINE: u8 = 1;
const BUDGET: u8 = 2;
/// The first of the four share layers ([`Theme::shares`]), bottom to top.
const SHARES: u8 = 3;
const CURVE: u8 = 7;
/// The shares' names in the legend, long and short.
const SHARE_NAMES: [(&str, &str); 4] = [
    ("objects", "obj"),
    ("cache", "cache"),
    ("reserves", "res"),
    ("kept by driver", "kept"),
];

impl MemoryPanel<'_> {
    fn title(&self) -> String {
        let Some(run) = self.run else {
            return "Device memory".into();
        };
        let Some(meta) = run.run.meta() else {
            return "Device memory (MiB)".into();
        };
        if super::gpus::wanted(run.run.ranks()) {
            return "Device memory per GPU, MiB · each process's own (NVML) stacked by rank, \
                    the line: in use by every process"
                .into();
        }
        if meta.watch.is_some() && meta.device.memory_source == MemorySource::Rss {
            // A watched program on no NVIDIA GPU: its resident memory is what is read.
            return "Resident host memory of the program, MiB".into();
        }
        let skipped = super::skipped(&self.axes.unwrap_or_else(|| Axes::of(&[run])));
        if run.cpu_device() {
            return format!(
                "Host memory of the worker, MiB{skipped} (CPU OpenCL device: its memory is host RAM)"
            );
        }
        let total = meta
            .device
            .total_bytes
            .map(|t| format!(" · {:.1} GiB total", t as f64 / crate::units::GIB_F64))
            .unwrap_or_default();
        format!("Device memory, MiB{skipped} · {}{total}", meta.device.name)
    }
}

impl Widget for &MemoryPanel<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let b = block(self.title(), self.focused, self.theme);
        let inner = b.inner(area);
        b.render(area, buf);
        let Some(inner) = usable(inner) else { return };
        if let Some(run) = self.run.filter(|r| super::gpus::wanted(r.run.ranks())) {
            super::gpus::Lanes {
                run,
                axes: self.axes.unwrap_or_else(|| Axes::of(&[run])),
                theme: self.theme,
                curve: self.curve,
            }
            .render(inner, buf);
            return;
        }
        let Some(run) = self.run.filter(|r| !r.run.readings().is_empty()) else {
            self.no_readings(inner, buf);
            return;
        };
        let axes = self.axes.unwrap_or_else(|| Axes::of(&[run]));
        let Some(mut chart) = Chart::new(inner, axes, axes.origin(run)) else {
            return;
        };
        chart.draw_limits(run);
        // Colour tells the shares apart: without it they are left to the
        // findings' numbers.
        let stacked = self.theme.color && chart.draw_shares(run);
        chart.draw_curve(run);
        let [held, cached, reserves, kept] = self.theme.shares();
        let styles = [
            Style::new(),
            self.theme.baseline(),
            self.theme.budget(),
            held,
            cached,
            reserves,
            kept,
            self.curve,
        ];
        chart.grid.render(chart.plot, buf, &styles);
        if stacked {
            self.legend(&chart, buf);
        }
        self.y_labels(&chart, run, buf);
        if chart.extra >= 1 {
            self.call_markers(&chart, run, buf);
        }
        if chart.extra >= 2 {
            self.time_axis(&chart, buf);
        }
    }
}

impl MemoryPanel<'_> {
    /// Why there is no curve to draw: no run, no worker yet, or no readings.
    fn no_readings(&self, inner: Rect, buf: &mut Buffer) {
        let text = match self.run {
            Some(r) if r.run.meta().is_none() => "waiting for the worker…",
            Some(_) => "no memory readings in this run",
            None => "no run yet: Enter runs the lab, s steps through it",
        };
        Paragraph::new(Span::styled(text, self.theme.dim())).render(inner, buf);
    }

    /// Y labels: top, bottom, and the baseline's row.
    fn y_labels(&self, chart: &Chart, run: &RunState, buf: &mut Buffer) {
        let (inner, gutter, plot_h) = (chart.inner, chart.gutter, chart.plot.height);
        let label = |mib: f64| format!("{:>w$.1}", mib, w = gutter.saturating_sub(1) as usize);
        let mut put_label = |row: u16, text: String, style: Style| {
            if gutter > 1 && row < plot_h {
                buf.set_stringn(inner.x, inner.y + row, text, gutter as usize - 1, style);
            }
        };
        put_label(0, label(chart.axes.hi), self.theme.dim());
        put_label(plot_h - 1, label(chart.axes.lo), self.theme.dim());
        if let Some(base) = run.run.baseline() {
            let row = (chart.y_of(base as f64 / MIB) / 4) as u16;
            if row > 0 && row + 1 < plot_h {
                put_label(
                    row,
                    format!("{:>w$}", "base", w = gutter as usize - 1),
                    self.theme.baseline(),
                );
            }
        }
    }

    /// The row under the plot: one marker per call column; red where a call failed.
    fn call_markers(&self, chart: &Chart, run: &RunState, buf: &mut Buffer) {
        let w = chart.plot.width as usize;
        let mut marks = vec![0u8; w];
        for c in run.run.calls() {
            if c.status == CallStatus::Directive || c.begin_ns < chart.t0 {
                continue;
            }
            let x = chart.axes.col(chart.t0, c.begin_ns, w);
            let m = if c.status.is_ok() { 1 } else { 2 };
            marks[x] = marks[x].max(m);
        }
        let spans: Vec<Span> = marks
            .iter()
            .map(|m| match m {
                0 => Span::raw(" "),
                1 => Span::styled("╵", self.theme.dim()),
                _ => Span::styled("╵", self.theme.bad()),
            })
            .collect();
        let row = chart.inner.y + chart.plot.height;
        buf.set_stringn(
            chart.inner.x,
            row,
            "calls",
            chart.gutter as usize,
            self.theme.dim(),
        );
        Line::from(spans).render(Rect::new(chart.plot.x, row, chart.plot.width, 1), buf);
    }

    /// What the stacked colours are, on the plot's top row at the right.
    fn legend(&self, chart: &Chart, buf: &mut Buffer) {
        let styles = self.theme.shares();
        let width = chart.plot.width as usize;
        let long: usize = SHARE_NAMES.iter().map(|(n, _)| n.chars().count() + 3).sum();
        let spans: Vec<Span> = SHARE_NAMES
            .iter()
            .zip(styles)
            .flat_map(|((long_name, short), style)| {
                let name = if long < width / 2 { *long_name } else { *short };
                [
                    Span::styled("■", style),
                    Span::styled(format!("{name}  "), self.theme.dim()),
                ]
            })
            .collect();
        let line = Line::from(spans);
        let w = line.width();
        if w + 8 > width {
            return;
        }
        let x = chart.plot.x + (width - w) as u16;
        line.render(Rect::new(x, chart.plot.y, w as u16, 1), buf);
    }

    /// The time axis, two rows under the plot.
    fn time_axis(&self, chart: &Chart, buf: &mut Buffer) {
        let plot = chart.plot;
        buf.set_stringn(
            plot.x,
            chart.inner.y + plot.height + 1,
            axis_labels(&chart.axes, plot.width as usize),
            plot.width as usize,
            self.theme.dim(),
        );
    }
}

/// Where the chart's parts lie inside the panel, and the Braille grid of its plot.
struct Chart {
    inner: Rect,
    /// Columns left of the plot, for the y labels.
    gutter: u16,
    plot: Rect,
    /// Rows under the plot: 1 with the call markers, 2 with the time axis as well.
    extra: u16,
    axes: Axes,
    t0: u64,
    grid: Grid,
}

impl Chart {
    /// Lays the chart out in `inner`; `None` when no plot fits.
    fn new(inner: Rect, axes: Axes, t0: u64) -> Option<Chart> {
        let gutter = GUTTER.min(inner.width / 3);
        let plot_w = inner.width.saturating_sub(gutter);
        // Rows: curve, then a call-marker row and the time axis when there is room.
        let extra = match inner.height {
            0..=2 => 0,
            3..=4 => 1,
            _ => 2,
        };
        let plot_h = inner.height - extra;
        if plot_w == 0 || plot_h == 0 {
            return None;
        }
        Some(Chart {
            inner,
            gutter,
            plot: Rect::new(inner.x + gutter, inner.y, plot_w, plot_h),
            extra,
            axes,
            t0,
            grid: Grid::new(plot_w as usize, plot_h as usize),
        })
    }

    /// Dot row of `mib`, 0 at the top.
    fn y_of(&self, mib: f64) -> usize {
        let (axes, gh) = (self.axes, self.grid.height());
        let f = ((mib - axes.lo) / (axes.hi - axes.lo).max(1e-9)).clamp(0.0, 1.0);
        (gh - 1) - (f * (gh - 1) as f64).round() as usize
    }

    /// The baseline, and the budget above it when that fits under the top.
    fn draw_limits(&mut self, run: &RunState) {
        let Some(base) = run.run.baseline() else {
            return;
        };
        let base_mib = base as f64 / MIB;
        let y = self.y_of(base_mib);
        self.grid.hline(y, BASELINE);
        if let Some(budget) = run.run.meta().and_then(|m| m.budget_bytes) {
            let top = base_mib + budget as f64 / MIB;
            if top <= self.axes.hi {
                let y = self.y_of(top);
                self.grid.hline(y, BUDGET);
            }
        }
    }

    /// A watched program's memory by share, stacked under its curve: at each
    /// dot column, the latest composition the run took by then (objects held,
    /// an allocator's cache, reserves, what the driver kept), hatched so the
    /// curve over them stays legible; what no share explains is the gap up
    /// to the curve. False when the run has no composition.
    fn draw_shares(&mut self, run: &RunState) -> bool {
        let points = run.run.composition().points();
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            return false;
        };
        let gw = self.grid.width();
        let (x0, x1) = (
            self.axes.col(self.t0, first.t_ns, gw),
            self.axes.col(self.t0, last.t_ns, gw),
        );
        for x in x0..=x1.min(gw - 1) {
            // The column's right edge: a composition taken inside it counts.
            let t = self.t0 + ((x as u128 + 1) * u128::from(self.axes.dur_ns) / gw as u128) as u64;
            let Some(p) = run.run.composition().at(t) else {
                continue;
            };
            let mut below = 0u64;
            for (layer, share) in (SHARES..).zip(p.stacked()) {
                if share == 0 {
                    continue;
                }
                let (bottom, top) = (
                    self.y_of(below as f64 / MIB),
                    self.y_of((below + share) as f64 / MIB),
                );
                // The row a band meets the one under it in is the lower one's.
                let end = if below == 0 { bottom + 1 } else { bottom };
                below += share;
                for y in top..end {
                    if (x + y) % 2 == 0 {
                        self.grid.set(x, y, layer);
                    }
                }
            }
        }
        true
    }

    /// The readings, decimated to min, max and last per dot column.
    fn draw_curve(&mut self, run: &RunState) {
        let gw = self.grid.width();
        let mut lo = vec![usize::MAX; gw];
        let mut hi = vec![0usize; gw];
        let mut last = vec![usize::MAX; gw];
        // Readings from before the run's start (the parent samples from before the
        // worker exists) are history: only the last of them, the level at the
        // start, is drawn, at the left edge.
        let first = run
            .run
            .readings()
            .iter()
            .rposition(|(t, _)| *t < self.t0)
            .unwrap_or(0);
        for (t, v) in &run.run.readings()[first..] {
            let x = self.axes.col(self.t0, *t, gw);
            let y = self.y_of(*v as f64 / MIB);
            lo[x] = lo[x].min(y);
            hi[x] = hi[x].max(y);
            last[x] = y;
        }
        let end_x = run
            .run
            .readings()
            .last()
            .map(|(t, _)| self.axes.col(self.t0, *t, gw))
            .unwrap_or(0);
        let mut prev: Option<usize> = None;
        for x in 0..=end_x.min(gw - 1) {
            if last[x] == usize::MAX {
                // No reading in this column: memory stayed where it was.
                if let Some(p) = prev {
                    self.grid.set(x, p, CURVE);
                }
                continue;
            }
            let (mut a, mut b) = (lo[x], hi[x]);
            if let Some(p) = prev {
                a = a.min(p);
                b = b.max(p);
            }
            self.grid.vline(x, a, b, CURVE);
            prev = Some(last[x]);
        }
    }
}
