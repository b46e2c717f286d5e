//! What a watched program's page shows beyond a lab's, as its figure does:
//! who held its memory stacked under the curve (and the gap no share
//! explains), a chart per GPU for a program of many processes (the refused
//! rank's GPU first, each process's bytes stacked in its rank's colour), and
//! each refused allocation marked. The drawing is `export::program`'s; no
//! number here is the page's own.

use std::fmt::Write;

use super::axis::{self, AXIS, TOP, TimeAxis, WIDTH};
use crate::export::decimate::Decimated;
use crate::export::program::{self, Refusal};
use crate::export::svg::{esc, ticks};
use crate::run::Run;

/// The charts' text size, in drawing units (the `.tick` class's 13px).
pub(super) const SIZE: f64 = 13.0;
/// A GPU chart's plot height, in drawing units.
const GPU_PLOT: f64 = 180.0;

/// What one run's charts draw beyond a lab's.
#[derive(Debug, Clone)]
pub(super) struct Findings {
    /// Each process's first refused allocation (a lab's refused call).
    pub refusals: Vec<Refusal>,
    /// A chart each, in this order; none where one chart tells it all.
    pub gpus: Vec<u32>,
    /// Its memory by share is stacked under the curve.
    pub shares: bool,
    /// The shares (and the gap no share explains) its compositions hold
    /// anywhere, bottom to top, for the legend.
    pub named: Vec<(&'static str, &'static str)>,
}

impl Findings {
    pub fn of(run: &Run) -> Findings {
        let refusals = program::refusals(run);
        let gpus = program::gpus(run, &refusals);
        let shares = gpus.is_empty()
            && run.meta().is_some_and(|m| m.watch.is_some())
            && !run.composition().points().is_empty();
        let points = run.composition().points();
        let mut named: Vec<(&str, &str)> = program::SHARES
            .iter()
            .enumerate()
            .filter(|(i, _)| points.iter().any(|p| p.stacked()[*i] > 0))
            .map(|(_, share)| *share)
            .collect();
        // A gap under a MiB, the page's unit, is not worth a name.
        if program::has_gap(run) {
            named.push(program::UNEXPLAINED);
        }
        if !shares {
            named.clear();
        }
        Findings {
            refusals,
            gpus,
            shares,
            named,
        }
    }
}

/// The height of the band of `n` refusals' words above a plot.
pub(super) fn words_height(n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        n as f64 * SIZE * 1.2 + SIZE * 0.5
    }
}

/// What the curve of a run's charts is, for the page's legend.
pub(super) fn curve_words(f: &Findings, watched: bool) -> &'static str {
    match (f.gpus.is_empty(), watched) {
        (false, _) => {
            "memory in use on the GPU (every process), above its level before the program"
        }
        (true, true) => "memory above its level before the program started",
        (true, false) => "memory above baseline",
    }
}

/// The legend of what a run's findings add: each share (and the gap), or
/// each process in its colour, and the refusal; empty when there is none.
pub(super) fn legend(run: &Run, f: &Findings) -> String {
    let swatch = |fill: &str, words: &str| {
        format!(
            r#"<span><i class="sw" style="background:{fill}"></i>{}</span>"#,
            esc(words)
        )
    };
    let mut items: Vec<String> = Vec::new();
    if f.shares {
        items.push("<span>under it, who held it:</span>".to_string());
        for (name, fill) in &f.named {
            items.push(swatch(fill, name));
        }
    }
    if !f.gpus.is_empty() {
        items.push("<span>under it, each process's own bytes:</span>".to_string());
        let ranks = run.ranks();
        for (i, pid) in ranks.colour_order().into_iter().enumerate() {
            let fill = program::PROCESSES[i % program::PROCESSES.len()];
            items.push(swatch(fill, &program::process_name(ranks, pid)));
        }
    }
    if !f.refusals.is_empty() {
        items.push(format!(
            r#"<span><i class="sw refused" style="background:{}"></i>allocation refused (out of memory)</span>"#,
            program::REFUSED
        ));
    }
    if items.is_empty() {
        return String::new();
    }
    format!("<p class=\"legend\">{}</p>\n", items.concat())
}

/// A chart per GPU in the findings' order, on one scale: each process's
/// bytes stacked in its colour under the GPU's memory in use, each refusal
/// a line across it, its words above the first chart.
pub(super) fn gpu_charts(d: &Decimated, axis: &TimeAxis, f: &Findings) -> String {
    let run = &d.run;
    let peak = program::gpus_peak_mib(run, &f.gpus);
    let y_max = if peak > 0.0 { peak * 1.1 } else { 1.0 };
    let mut out = String::new();
    for (i, gpu) in f.gpus.iter().enumerate() {
        let words = if i == 0 {
            words_height(f.refusals.len())
        } else {
            0.0
        };
        // The GPU's name and its processes in a row above the plot.
        let top = TOP + words + SIZE * 1.6;
        let bottom = top + GPU_PLOT;
        let height = bottom + AXIS + 14.0;
        let y = |mib: f64| bottom - (mib / y_max).clamp(0.0, 1.0) * (bottom - top);
        let plot = axis.plot(top, bottom);
        let _ = write!(
            out,
            r#"<svg class="chart memory-chart gpu-chart" viewBox="0 0 {WIDTH} {height}" data-top="{top}" data-bottom="{bottom}" data-max="{y_max}" data-name="GPU {gpu}" role="img" aria-label="memory in use on GPU {gpu} over time, by process">"#
        );
        for v in ticks(y_max) {
            axis::memory_tick(&mut out, y(v), v);
        }
        axis::memory_label(&mut out, top, bottom, "MiB above baseline");
        program::gpu_panel(&mut out, run, *gpu, &plot, y_max, SIZE);
        let label_top = (i == 0).then_some(TOP);
        program::refusal_marks(&mut out, &f.refusals, &plot, label_top, SIZE);
        axis.draw(&mut out, bottom);
        axis::cursor(&mut out, top, bottom);
        out.push_str("</svg>");
    }
    out
}
