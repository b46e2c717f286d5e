//! The page's two charts as inline SVG on one time axis: memory above baseline
//! with a dot for each call's reading, and the timeline (host lane, one lane per
//! queue or stream). Every call and device span carries a `<title>`, which a
//! browser shows on hover with no script.

use std::fmt::Write;

use crate::export::svg::{esc, lane_label, tick_label, ticks};
use crate::report::fmt_delta;
use crate::run::Run;
use crate::trace::{Call, CallStatus, DeviceSpan};
use crate::units::MIB_F64 as MIB;

/// Drawing units of the view box; the page scales it to its width.
const WIDTH: f64 = 1000.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 20.0;
const MEMORY_HEIGHT: f64 = 300.0;
const TOP: f64 = 16.0;
const AXIS: f64 = 36.0;
const LANE: f64 = 30.0;
/// What fits left of the plot at the page's font size.
const LANE_LABEL_CHARS: usize = 20;

/// Where the run's time falls across the plot.
struct TimeAxis {
    t0: u64,
    span_ms: f64,
}

impl TimeAxis {
    fn of(run: &Run) -> TimeAxis {
        let t0 = run.t0();
        let last = run
            .end
            .iter()
            .map(|e| e.t_ns)
            .chain(run.calls.iter().map(|c| c.end_ns))
            .chain(run.spans.iter().map(|s| s.end_ns))
            .chain(run.readings.iter().map(|(t, _)| *t))
            .max()
            .unwrap_or(t0);
        TimeAxis {
            t0,
            span_ms: (last.saturating_sub(t0) as f64 / 1e6).max(1e-3),
        }
    }

    fn ms(&self, t: u64) -> f64 {
        (t as f64 - self.t0 as f64) / 1e6
    }

    fn x(&self, t: u64) -> f64 {
        self.x_ms(self.ms(t))
    }

    fn x_ms(&self, ms: f64) -> f64 {
        LEFT + (ms / self.span_ms).clamp(0.0, 1.0) * (WIDTH - LEFT - RIGHT)
    }

    /// Tick marks and their labels along the bottom at `y`.
    fn draw(&self, out: &mut String, y: f64) {
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

/// What hovering a call shows: its line, the call, its host time and what memory
/// did across it.
fn call_title(run: &Run, axis: &TimeAxis, c: &Call) -> String {
    let mut t = match c.line {
        Some(l) => format!("line {l}: {}", c.api),
        None => c.api.clone(),
    };
    if c.driver != c.api && !c.driver.is_empty() {
        let _ = write!(t, " → {}", c.driver);
    }
    if !c.iter.is_empty() {
        let iter: Vec<String> = c.iter.iter().map(u32::to_string).collect();
        let _ = write!(t, " (iteration {})", iter.join("."));
    }
    let _ = write!(
        t,
        "\nhost {:.3} ms, at {:.3} ms",
        c.end_ns.saturating_sub(c.begin_ns) as f64 / 1e6,
        axis.ms(c.begin_ns)
    );
    if let (Some(b), Some(a)) = (c.mem_before, c.mem_after) {
        let _ = write!(
            t,
            "\nmemory {} MiB",
            fmt_delta(Some((a as f64 - b as f64) / MIB))
        );
    }
    if let CallStatus::Error { name, .. } = &c.status {
        let _ = write!(t, "\nreturned {name}");
    }
    if run.meta.as_ref().is_some_and(|m| m.watch.is_some()) {
        let _ = write!(t, "\nprocess {}", c.pid);
    }
    t
}

fn span_title(axis: &TimeAxis, s: &DeviceSpan, lane: &str) -> String {
    let mut t = format!("{lane}: {}", s.name);
    if let Some(l) = s.line {
        let _ = write!(t, " (line {l})");
    }
    let _ = write!(
        t,
        "\non the device {:.3} ms, from {:.3} to {:.3} ms",
        s.end_ns.saturating_sub(s.begin_ns) as f64 / 1e6,
        axis.ms(s.begin_ns),
        axis.ms(s.end_ns)
    );
    t
}

/// Memory above the run's baseline over time, one dot per call that read it.
pub(super) fn memory(run: &Run, unit_label: &str) -> String {
    let axis = TimeAxis::of(run);
    let base = run.baseline().unwrap_or(0) as f64 / MIB;
    let above = |bytes: u64| (bytes as f64 / MIB - base).max(0.0);
    let peak = run
        .readings
        .iter()
        .map(|(_, b)| above(*b))
        .fold(0.0, f64::max);
    let y_max = if peak > 0.0 { peak * 1.1 } else { 1.0 };
    let bottom = MEMORY_HEIGHT - AXIS - 14.0;
    let y = |mib: f64| bottom - (mib / y_max) * (bottom - TOP);

    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart" viewBox="0 0 {WIDTH} {MEMORY_HEIGHT}" role="img" aria-label="memory above baseline over time">"#
    );
    for v in ticks(y_max) {
        let _ = write!(
            out,
            r#"<line class="grid" x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}"/><text class="tick" x="{2}" y="{3:.1}" text-anchor="end">{4}</text>"#,
            y(v),
            WIDTH - RIGHT,
            LEFT - 8.0,
            y(v) + 5.0,
            tick_label(v)
        );
    }
    let _ = write!(
        out,
        r#"<text class="desc" x="14" y="{0:.1}" transform="rotate(-90 14 {0:.1})" text-anchor="middle">{1}</text>"#,
        (TOP + bottom) / 2.0,
        esc(unit_label)
    );
    let points: Vec<String> = run
        .readings
        .iter()
        .map(|&(t, b)| format!("{:.1},{:.1}", axis.x(t), y(above(b))))
        .collect();
    let _ = write!(
        out,
        r#"<polyline class="memory" points="{}"/>"#,
        points.join(" ")
    );
    for c in run
        .calls
        .iter()
        .filter(|c| c.status != CallStatus::Directive)
    {
        let Some(after) = c.mem_after else { continue };
        let _ = write!(
            out,
            r#"<circle class="call{}" cx="{:.1}" cy="{:.1}" r="4"><title>{}</title></circle>"#,
            if c.tag.is_some() { " tagged" } else { "" },
            axis.x(c.end_ns),
            y(above(after)),
            esc(&call_title(run, &axis, c))
        );
    }
    axis.draw(&mut out, bottom);
    out.push_str("</svg>");
    out
}

/// The host lane above one lane per queue or stream, on the memory chart's axis.
pub(super) fn timeline(run: &Run) -> String {
    let axis = TimeAxis::of(run);
    // One lane per queue name: a lab that makes a queue `q` in each iteration of a
    // loop draws one lane `q`, as its script reads.
    let lane_name = |s: &DeviceSpan| {
        s.queue_name
            .clone()
            .unwrap_or_else(|| format!("#{}", s.queue))
    };
    let mut queues: Vec<String> = Vec::new();
    for s in &run.spans {
        let name = lane_name(s);
        if !queues.contains(&name) {
            queues.push(name);
        }
    }
    let lanes = 1 + queues.len();
    let bottom = TOP + lanes as f64 * LANE;
    let height = bottom + AXIS + 14.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="timeline of host calls and device work">"#
    );
    let lane_top = |lane: usize| TOP + lane as f64 * LANE;
    // A long queue name is cut to fit the margin; hovering it shows it whole.
    let label = |out: &mut String, lane: usize, text: &str| {
        let shown: String = if text.chars().count() > LANE_LABEL_CHARS {
            let cut: String = text.chars().take(LANE_LABEL_CHARS - 1).collect();
            cut + "…"
        } else {
            text.to_string()
        };
        let _ = write!(
            out,
            r#"<text class="lane" x="{}" y="{:.1}" text-anchor="end"><title>{}</title>{}</text>"#,
            LEFT - 8.0,
            lane_top(lane) + LANE / 2.0 + 5.0,
            esc(text),
            esc(&shown)
        );
    };
    label(&mut out, 0, "host calls");
    for (i, name) in queues.iter().enumerate() {
        let lane = lane_label(run, name);
        label(&mut out, i + 1, &lane);
    }
    // A call of a few microseconds in a run of seconds still gets a visible sliver.
    let min_width = 1.5;
    let bar = |out: &mut String, class: &str, lane: usize, x0: f64, x1: f64, title: &str| {
        let _ = write!(
            out,
            r#"<rect class="{class}" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
            lane_top(lane) + 4.0,
            (x1 - x0).max(min_width),
            LANE - 8.0,
            esc(title)
        );
    };
    for c in run
        .calls
        .iter()
        .filter(|c| c.status != CallStatus::Directive)
    {
        let class = if matches!(c.status, CallStatus::Error { .. }) {
            "host failed"
        } else {
            "host"
        };
        bar(
            &mut out,
            class,
            0,
            axis.x(c.begin_ns),
            axis.x(c.end_ns),
            &call_title(run, &axis, c),
        );
    }
    for s in &run.spans {
        let name = lane_name(s);
        let Some(lane) = queues.iter().position(|q| *q == name) else {
            continue;
        };
        bar(
            &mut out,
            "device",
            lane + 1,
            axis.x(s.begin_ns),
            axis.x(s.end_ns),
            &span_title(&axis, s, &lane_label(run, &name)),
        );
    }
    axis.draw(&mut out, bottom);
    out.push_str("</svg>");
    out
}
