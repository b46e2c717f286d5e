//! A watched program's parts of a slide figure: who held its memory stacked
//! under the curve, a panel per GPU for a program of many processes (the GPU
//! a refusal happened on first), each refused allocation marked across the
//! plot and the lanes, and a title that wraps at words rather than run off
//! the slide. Drawing from `export::program`; layout from the figure.

use std::fmt::Write;

use super::{CHAR_WIDTH, Decimated, LEFT, Place, RIGHT, Shared, W};
use crate::export::program::{self, Plot, Refusal};
use crate::export::svg::{esc, ticks};

/// Lines a title is drawn in, at most.
const TITLE_LINES: usize = 2;

/// `full` in lines of at most `width` at `size`, broken between words; past
/// [`TITLE_LINES`] the last is shortened at a word and ends in `…` (the
/// figure keeps the whole title in a `<title>`). A word longer than a line
/// is broken where the line ends, as a claim's is ([`super::claims::wrap`]).
pub(super) fn title_lines(full: &str, width: f64, size: f64) -> Vec<String> {
    let max = ((width / (size * CHAR_WIDTH)).floor() as usize).max(8);
    let words = full.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut lines = super::claims::wrap(&words, max);
    if lines.len() > TITLE_LINES {
        let rest = lines.split_off(TITLE_LINES - 1).join(" ");
        let mut last = String::new();
        for word in rest.split(' ') {
            if last.chars().count() + 1 + word.chars().count() + 2 > max {
                break;
            }
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(word);
        }
        last.push_str(" …");
        lines.push(last);
    }
    lines
}

fn plot(shared: &Shared, at: &Place, top: f64, bottom: f64) -> Plot {
    Plot {
        left: LEFT,
        right: W - RIGHT,
        top,
        bottom,
        t0: at.t0,
        span_ns: shared.axis.t_max * 1e6,
    }
}

/// The run's memory by share under its curve, on the figure's scale.
pub(super) fn draw_shares(out: &mut String, d: &Decimated, shared: &Shared, at: &Place) {
    if d.run.meta().is_none_or(|m| m.watch.is_none()) {
        return;
    }
    let p = plot(shared, at, at.plot_top, at.plot_bottom);
    let y = |mib: f64| at.y(mib, shared.y_max);
    program::shares(out, &d.run, &p, &y);
    // What no share explains is drawn as the page draws it, never left white.
    program::unexplained(out, &d.run, &p, &y);
}

/// A panel per GPU, stacked in the chart's place, on one scale.
pub(super) fn draw_gpus(
    out: &mut String,
    d: &Decimated,
    gpus: &[u32],
    shared: &Shared,
    at: &Place,
) {
    let s = &shared.sizes;
    let peak = program::gpus_peak_mib(&d.run, gpus);
    let y_max = if peak > 0.0 { peak * 1.1 } else { 1.0 };
    let n = gpus.len().max(1) as f64;
    let gap = s.text * 0.6;
    let each = (at.plot_bottom - at.plot_top - gap * (n - 1.0)) / n;
    for (i, gpu) in gpus.iter().enumerate() {
        let top = at.plot_top + i as f64 * (each + gap);
        // The label's row above the plot of the panel.
        let p = plot(shared, at, top + s.text * 1.6, top + each);
        let y = |mib: f64| p.bottom - (mib / y_max) * (p.bottom - p.top);
        let room = (p.bottom - p.top) / (s.text * 1.4);
        let step = (ticks(y_max).len() as f64 / room.max(1.0)).ceil().max(1.0) as usize;
        for v in ticks(y_max).into_iter().step_by(step) {
            super::memory_tick(out, y(v), v, s.text);
        }
        for ms in ticks(shared.axis.t_max) {
            let x = shared.axis.x(ms);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#f0f0f0"/>"##,
                p.top, p.bottom
            );
        }
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#444444"/><line x1="{LEFT}" y1="{2:.1}" x2="{LEFT}" y2="{0:.1}" stroke="#444444"/>"##,
            p.bottom,
            W - RIGHT,
            p.top
        );
        program::gpu_panel(out, &d.run, *gpu, &p, y_max, s.text);
    }
    let mid = (at.plot_top + at.plot_bottom) / 2.0;
    let _ = write!(
        out,
        r##"<text x="{0}" y="{mid:.1}" font-size="{0}" text-anchor="middle" fill="#333333" transform="rotate(-90 {0} {mid:.1})">{1}</text>"##,
        s.text,
        esc("MiB in use on each GPU")
    );
}

/// Each refused allocation: a line across the plot and the lanes, named.
pub(super) fn draw_refusals(out: &mut String, refusals: &[Refusal], shared: &Shared, at: &Place) {
    let p = plot(shared, at, at.plot_top, at.lanes_bottom);
    // Their words in the band above the plot, which a watched program's
    // figure leaves to them (no claim names its calls).
    program::refusal_marks(out, refusals, &p, Some(at.band_top), shared.sizes.text);
}
