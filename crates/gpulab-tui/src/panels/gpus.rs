//! The memory chart of a program of many processes: one lane per GPU it used,
//! each process's bytes on that GPU (NVML's per-process figure) stacked in its
//! rank's colour under the GPU's memory in use by every process. A torchrun
//! job on two GPUs is two lanes of one rank each; two ranks sharing a GPU are
//! two bands of one lane.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::braille::Grid;
use super::{Axes, GUTTER, MIB, axis_labels};
use crate::run::ranks::{GpuLane, Ranks};
use crate::runstate::RunState;
use crate::theme::Theme;

/// Rows a lane needs: its label and a row of plot.
const LANE_ROWS: u16 = 2;
/// The layer of the curve of memory in use on the GPU by every process.
const USED: u8 = 7;

/// Draw lanes instead of the one chart: the program's processes held memory
/// on more than one GPU or on another than GPU 0 (the one chart's), or more
/// than one of them on one GPU.
pub fn wanted(ranks: &Ranks) -> bool {
    let on_gpus = ranks
        .members
        .values()
        .filter(|m| !m.gpus_used.is_empty())
        .count();
    ranks.spread() || on_gpus > 1
}

/// `r1` for rank 1, the pid outside a job.
pub fn short_name(ranks: &Ranks, pid: u32) -> String {
    match ranks.members.get(&pid).and_then(|m| m.rank.as_ref()) {
        Some(r) => format!("r{}", r.rank),
        None => format!("pid {pid}"),
    }
}

pub struct Lanes<'a> {
    pub run: &'a RunState,
    pub axes: Axes,
    pub theme: Theme,
    pub curve: Style,
}

impl Lanes<'_> {
    pub fn render(&self, inner: Rect, buf: &mut Buffer) {
        let ranks = &self.run.run.ranks();
        let used = ranks.gpus_used();
        let lanes: Vec<(u32, &GpuLane)> = used
            .iter()
            .filter_map(|&g| Some((g, ranks.gpus.get(g as usize)?)))
            .collect();
        if lanes.is_empty() || inner.height < LANE_ROWS {
            return;
        }
        let order = ranks.colour_order();
        // One scale for every lane: the GPUs side by side compare.
        let hi = lanes
            .iter()
            .map(|(_, l)| l.peak_used)
            .max()
            .unwrap_or(0)
            .max(1) as f64
            / MIB;
        let all = LANE_ROWS * lanes.len() as u16;
        let with_axis = inner.height > all;
        // Lanes that do not fit leave their last row to say so.
        let rows = if inner.height >= all {
            inner.height - u16::from(with_axis)
        } else {
            inner.height - 1
        };
        let shown = ((rows / LANE_ROWS).max(1) as usize).min(lanes.len());
        let each = rows / shown as u16;
        for (i, (g, lane)) in lanes.iter().take(shown).enumerate() {
            let area = Rect::new(inner.x, inner.y + each * i as u16, inner.width, each);
            self.lane(*g, lane, &order, hi, area, buf);
        }
        let gutter = GUTTER.min(inner.width / 3);
        let bottom = inner.y + inner.height - 1;
        if shown < lanes.len() {
            buf.set_stringn(
                inner.x,
                bottom,
                format!(
                    "+{} GPUs below (z: this panel fills the screen)",
                    lanes.len() - shown
                ),
                inner.width as usize,
                self.theme.warn(),
            );
        } else if with_axis {
            let w = inner.width.saturating_sub(gutter);
            buf.set_stringn(
                inner.x + gutter,
                bottom,
                axis_labels(&self.axes, w as usize),
                w as usize,
                self.theme.dim(),
            );
        }
    }

    /// A lane's first row: the GPU, and the colour of each process on it.
    fn label(
        &self,
        lane: &GpuLane,
        on: &[u32],
        color_of: &dyn Fn(u32) -> Style,
        area: Rect,
        buf: &mut Buffer,
    ) {
        let (t, ranks) = (self.theme, &self.run.run.ranks());
        let mut label = vec![Span::styled(
            format!(
                "GPU {} {} · {:.0} MiB at most in use ",
                lane.meta.index,
                lane.meta.name,
                lane.peak_used as f64 / MIB
            ),
            t.title(),
        )];
        for pid in on {
            label.push(Span::styled("■", color_of(*pid)));
            label.push(Span::styled(
                format!("{} ", short_name(ranks, *pid)),
                t.dim(),
            ));
        }
        Line::from(label).render(Rect::new(area.x, area.y, area.width, 1), buf);
    }

    /// One GPU: its label row, then its processes stacked under its curve.
    fn lane(&self, gpu: u32, lane: &GpuLane, order: &[u32], hi: f64, area: Rect, buf: &mut Buffer) {
        let t = self.theme;
        let ranks = &self.run.run.ranks();
        let colors = t.ranks();
        let color_of = |pid: u32| {
            order
                .iter()
                .position(|p| *p == pid)
                .map_or(t.dim(), |i| colors[i % colors.len()])
        };
        let on: Vec<u32> = order
            .iter()
            .copied()
            .filter(|pid| {
                ranks
                    .members
                    .get(pid)
                    .is_some_and(|m| m.gpus_used.contains(&gpu))
            })
            .collect();
        self.label(lane, &on, &color_of, area, buf);
        let gutter = GUTTER.min(area.width / 3);
        let plot = Rect::new(
            area.x + gutter,
            area.y + 1,
            area.width.saturating_sub(gutter),
            area.height.saturating_sub(1),
        );
        if plot.width == 0 || plot.height == 0 {
            return;
        }
        buf.set_stringn(
            area.x,
            plot.y,
            format!("{:>w$.0}", hi, w = gutter.saturating_sub(1) as usize),
            gutter.saturating_sub(1) as usize,
            t.dim(),
        );
        let mut grid = Grid::new(plot.width as usize, plot.height as usize);
        let (gw, gh) = (grid.width(), grid.height());
        let y_of = |mib: f64| {
            let f = (mib / hi).clamp(0.0, 1.0);
            (gh - 1) - (f * (gh - 1) as f64).round() as usize
        };
        let t0 = self.run.t0();
        let last = lane.points.last().map_or(t0, |p| p.t_ns);
        let x_end = self.axes.col(t0, last, gw);
        let mut prev: Option<usize> = None;
        for x in 0..=x_end.min(gw - 1) {
            let edge = t0 + ((x as u128 + 1) * u128::from(self.axes.dur_ns) / gw as u128) as u64;
            let i = lane.points.partition_point(|p| p.t_ns <= edge);
            let Some(p) = i.checked_sub(1).and_then(|i| lane.points.get(i)) else {
                continue;
            };
            let mut below = 0u64;
            for pid in &on {
                let Some(bytes) = p
                    .processes
                    .iter()
                    .flatten()
                    .find(|b| b.pid == *pid)
                    .and_then(|b| b.bytes)
                else {
                    continue;
                };
                let layer = order
                    .iter()
                    .position(|o| o == pid)
                    .map_or(0, |i| (i % 6) as u8 + 1);
                let (bottom, top) = (y_of(below as f64 / MIB), y_of((below + bytes) as f64 / MIB));
                let end = if below == 0 { bottom + 1 } else { bottom };
                for y in top..end {
                    if (x + y) % 2 == 0 {
                        grid.set(x, y, layer);
                    }
                }
                below += bytes;
            }
            let y = y_of(p.used as f64 / MIB);
            let (a, b) = prev.map_or((y, y), |q| (q.min(y), q.max(y)));
            grid.vline(x, a, b, USED);
            prev = Some(y);
        }
        let mut styles = vec![Style::new()];
        styles.extend(colors);
        styles.push(self.curve);
        grid.render(plot, buf, &styles);
    }
}
