//! Where the page's charts lie: the view box's units, the plot's margins,
//! the run's time across the plot and its ticks, and the scrub cursor. The
//! charts (`chart`) and a watched program's findings (`findings`) both draw
//! on it.

use std::fmt::Write;

use crate::export::outline::Outline;
use crate::export::program::Plot;
use crate::export::svg::{esc, tick_label, ticks};

/// Drawing units of the view box; the page scales it to its width.
pub(super) const WIDTH: f64 = 1000.0;
pub(super) const LEFT: f64 = 150.0;
pub(super) const RIGHT: f64 = 20.0;
/// The plot's width in drawing units: the columns lanes and the line are kept at.
pub(super) const COLUMNS: usize = (WIDTH - LEFT - RIGHT) as usize;
pub(super) const TOP: f64 = 16.0;
/// Room under a plot for the time axis's ticks and words (and 14 more).
pub(super) const AXIS: f64 = 36.0;

/// Where the run's time falls across the plot: from its start to the latest
/// call, span, reading or end.
#[derive(Debug, Clone, Copy)]
pub(super) struct TimeAxis {
    t0: u64,
    span_ms: f64,
}

impl TimeAxis {
    pub(super) fn of(o: &Outline) -> TimeAxis {
        let t0 = o.t0();
        TimeAxis {
            t0,
            span_ms: (o.read_end().saturating_sub(t0) as f64 / 1e6).max(1e-3),
        }
    }

    /// Each run's own start, and one length for all: the longest, so runs
    /// compared on one page share the scale of their time axis.
    pub(super) fn shared(outlines: &[&Outline]) -> Vec<TimeAxis> {
        let mut axes: Vec<TimeAxis> = outlines.iter().map(|o| TimeAxis::of(o)).collect();
        let span = axes.iter().map(|a| a.span_ms).fold(1e-3, f64::max);
        for a in &mut axes {
            a.span_ms = span;
        }
        axes
    }

    pub(super) fn ms(&self, t: u64) -> f64 {
        (t as f64 - self.t0 as f64) / 1e6
    }

    pub(super) fn x(&self, t: u64) -> f64 {
        self.x_ms(self.ms(t))
    }

    /// The plot between `top` and `bottom`, for the drawing the figure shares.
    pub(super) fn plot(&self, top: f64, bottom: f64) -> Plot {
        Plot {
            left: LEFT,
            right: WIDTH - RIGHT,
            top,
            bottom,
            t0: self.t0,
            span_ns: self.span_ms * 1e6,
        }
    }

    pub(super) fn x_ms(&self, ms: f64) -> f64 {
        LEFT + (ms / self.span_ms).clamp(0.0, 1.0) * (WIDTH - LEFT - RIGHT)
    }

    /// Tick marks and their labels along the bottom at `y`.
    pub(super) fn draw(&self, out: &mut String, y: f64) {
        let _ = write!(
            out,
            r#"<line class="axis" x1="{LEFT}" y1="{y}" x2="{}" y2="{y}"/>"#,
            WIDTH - RIGHT
        );
        for ms in ticks(self.span_ms) {
            let x = self.x_ms(ms);
            let _ = write!(
                out,
                r#"<line class="axis" x1="{x:.1}" y1="{y}" x2="{x:.1}" y2="{}"/><text class="tick" x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
                y + 5.0,
                y + 18.0,
                tick_label(ms)
            );
        }
        let _ = write!(
            out,
            r#"<text class="desc" x="{}" y="{}" text-anchor="end">ms from the start of the run</text>"#,
            WIDTH - RIGHT,
            y + 32.0
        );
    }
}

/// The scrub cursor, hidden until the page's script moves it.
pub(super) fn cursor(out: &mut String, top: f64, bottom: f64) {
    let _ = write!(
        out,
        r#"<line class="cursor" x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{bottom}"/>"#
    );
}

/// What the page's zoom and scrub script needs of the charts' axis: the run's
/// length and where the plot lies in drawing units.
pub(super) fn view_attributes(axis: &TimeAxis) -> String {
    format!(
        r#"data-span-ms="{}" data-left="{LEFT}" data-plot="{}""#,
        axis.span_ms,
        WIDTH - LEFT - RIGHT
    )
}

/// One memory tick of a chart: its grid line across the plot at `y`, and
/// `mib` left of it.
pub(super) fn memory_tick(out: &mut String, y: f64, mib: f64) {
    let _ = write!(
        out,
        r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{right}" y2="{y:.1}"/><text class="tick" x="{label}" y="{at:.1}" text-anchor="end">{tick}</text>"#,
        right = WIDTH - RIGHT,
        label = LEFT - 8.0,
        at = y + 5.0,
        tick = tick_label(mib)
    );
}

/// A memory chart's unit, upright along its left edge between `top` and `bottom`.
pub(super) fn memory_label(out: &mut String, top: f64, bottom: f64, unit: &str) {
    let _ = write!(
        out,
        r#"<text class="desc" x="14" y="{0:.1}" transform="rotate(-90 14 {0:.1})" text-anchor="middle">{1}</text>"#,
        (top + bottom) / 2.0,
        esc(unit)
    );
}
