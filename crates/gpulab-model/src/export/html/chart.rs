//! The page's two charts as inline SVG on one time axis: memory above baseline
//! with a dot for each call's reading, and the timeline (host lane, one lane per
//! queue or stream). Every call and device span carries a `<title>`, which a
//! browser shows on hover with no script. Past a few per column of the plot, the
//! calls and spans that share a column are one mark, whose title says how many
//! it stands for and what they did. A watched program's findings (who held
//! its memory, its refusals) are drawn on them from `findings`.

use std::fmt::Write;

use super::axis::{self, AXIS, LEFT, TOP, TimeAxis, WIDTH, cursor};
use super::findings::{self, Findings};
use crate::export::decimate::{Decimated, MIN_BAR, Mark};
use crate::export::program::{self, Refusal};
use crate::export::svg::{esc, lane_label, merged_title, ticks};
use crate::report::fmt_delta;
use crate::run::Run;
use crate::trace::{Call, CallStatus, DeviceSpan};
use crate::units::MIB_F64 as MIB;

const MEMORY_HEIGHT: f64 = 300.0;
const LANE: f64 = 30.0;
/// What fits left of the plot at the page's font size.
const LANE_LABEL_CHARS: usize = 20;

/// What hovering a call shows: its line, the call, its host time and what memory
/// did across it.
fn call_title(run: &Run, axis: &TimeAxis, c: &Call) -> String {
    let mut t = match c.line {
        Some(l) => format!("line {l}: {}", c.api),
        None => c.api.to_string(),
    };
    if c.api != c.driver && !c.driver.is_empty() {
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
    if run.meta().is_some_and(|m| m.watch.is_some()) {
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

/// A mark of several calls on the memory chart: what its title adds, the range
/// of the readings after them.
fn readings_title(m: &Mark, above: impl Fn(u64) -> f64) -> String {
    match m.values {
        Some((low, high)) if low != high => format!(
            "\nmemory after them {:.1} to {:.1} MiB above baseline",
            above(low),
            above(high)
        ),
        Some((v, _)) => format!("\nmemory after them {:.1} MiB above baseline", above(v)),
        None => String::new(),
    }
}

/// Memory above the run's baseline over time, one dot per call that read it
/// (per column, where they are too many); a watched program's shares stacked
/// under it, and each refusal marked, its words in a band above the plot.
pub(super) fn memory(d: &Decimated, axis: &TimeAxis, unit_label: &str, f: &Findings) -> String {
    let run = &d.run;
    let base = run.baseline().unwrap_or(0) as f64 / MIB;
    let above = |bytes: u64| (bytes as f64 / MIB - base).max(0.0);
    let peak = d.memory.peak().map_or(0.0, above);
    let y_max = if peak > 0.0 { peak * 1.1 } else { 1.0 };
    let words = findings::words_height(f.refusals.len());
    let (top, height) = (TOP + words, MEMORY_HEIGHT + words);
    let bottom = height - AXIS - 14.0;
    let y = |mib: f64| bottom - (mib / y_max) * (bottom - top);

    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart memory-chart" viewBox="0 0 {WIDTH} {height}" data-top="{top}" data-bottom="{bottom}" data-max="{y_max}" role="img" aria-label="memory above baseline over time">"#
    );
    for v in ticks(y_max) {
        axis::memory_tick(&mut out, y(v), v);
    }
    axis::memory_label(&mut out, top, bottom, unit_label);
    let plot = axis.plot(top, bottom);
    if f.shares {
        // A share past the top of the curve's scale stops at its top.
        let y_share = |mib: f64| y(mib.min(y_max));
        program::shares(&mut out, run, &plot, &y_share);
        program::unexplained(&mut out, run, &plot, &y_share);
    }
    let points: Vec<String> = d
        .memory
        .points()
        .into_iter()
        .map(|(t, b)| format!("{:.1},{:.1}", axis.x(t), y(above(b))))
        .collect();
    let _ = write!(
        out,
        r#"<polyline class="memory" points="{}"/>"#,
        points.join(" ")
    );
    let dot = |out: &mut String, tagged: bool, x: f64, after: u64, title: &str| {
        let _ = write!(
            out,
            r#"<circle class="call{}" cx="{x:.1}" cy="{:.1}" r="4"><title>{}</title></circle>"#,
            if tagged { " tagged" } else { "" },
            y(above(after)),
            esc(title)
        );
    };
    match d.calls() {
        Some(calls) => {
            for c in calls {
                let Some(after) = c.mem_after else { continue };
                let title = call_title(run, axis, c);
                dot(&mut out, c.tag.is_some(), axis.x(c.end_ns), after, &title);
            }
        }
        // A dot per column at its highest reading: the line shows the lowest.
        None => {
            for m in d.dots.iter() {
                let Some((_, high)) = m.values else { continue };
                let mut title = merged_title(m, ("call", "calls"), "host", |t| axis.ms(t));
                title.push_str(&readings_title(m, above));
                dot(&mut out, m.tagged, m.high_x, high, &title);
            }
        }
    }
    program::refusal_marks(&mut out, &f.refusals, &plot, Some(TOP), findings::SIZE);
    axis.draw(&mut out, bottom);
    cursor(&mut out, top, bottom);
    out.push_str("</svg>");
    out
}

/// The host lane above one lane per queue or stream, on the memory chart's
/// axis, each refusal a line across them.
pub(super) fn timeline(d: &Decimated, axis: &TimeAxis, refusals: &[Refusal]) -> String {
    let run = &d.run;
    // One lane per queue name: a lab that makes a queue `q` in each iteration of a
    // loop draws one lane `q`, as its script reads.
    let queues = &d.lanes;
    let lanes = 1 + queues.len();
    let bottom = TOP + lanes as f64 * LANE;
    let height = bottom + AXIS + 14.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart timeline" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="timeline of host calls and device work">"#
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
    let bar = |out: &mut String, class: &str, lane: usize, x0: f64, x1: f64, title: &str| {
        let _ = write!(
            out,
            r#"<rect class="{class}" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
            lane_top(lane) + 4.0,
            (x1 - x0).max(MIN_BAR),
            LANE - 8.0,
            esc(title)
        );
    };
    let host_class = |failed: bool| if failed { "host failed" } else { "host" };
    match d.calls() {
        Some(calls) => {
            for c in calls {
                let class = host_class(matches!(c.status, CallStatus::Error { .. }));
                let (x0, x1) = (axis.x(c.begin_ns), axis.x(c.end_ns));
                bar(&mut out, class, 0, x0, x1, &call_title(run, axis, c));
            }
        }
        None => {
            for m in d.host.iter() {
                let title = merged_title(m, ("call", "calls"), "host", |t| axis.ms(t));
                bar(&mut out, host_class(m.failed > 0), 0, m.x0, m.x1, &title);
            }
        }
    }
    match d.spans() {
        Some(spans) => {
            for (lane, s) in spans {
                let title = span_title(axis, s, &lane_label(run, &queues[*lane]));
                let (x0, x1) = (axis.x(s.begin_ns), axis.x(s.end_ns));
                bar(&mut out, "device", lane + 1, x0, x1, &title);
            }
        }
        None => {
            for (lane, marks) in d.device.iter().enumerate() {
                let name = lane_label(run, &queues[lane]);
                for m in marks.iter() {
                    let what = ("device span", "device spans");
                    let title = merged_title(m, what, "on the device", |t| axis.ms(t));
                    bar(
                        &mut out,
                        "device",
                        lane + 1,
                        m.x0,
                        m.x1,
                        &format!("{name}: {title}"),
                    );
                }
            }
        }
    }
    program::refusal_marks(
        &mut out,
        refusals,
        &axis.plot(TOP, bottom),
        None,
        findings::SIZE,
    );
    axis.draw(&mut out, bottom);
    cursor(&mut out, TOP, bottom);
    out.push_str("</svg>");
    out
}
