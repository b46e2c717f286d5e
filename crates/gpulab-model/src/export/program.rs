//! What the charts of a watched program draw beyond a lab's, for the slide
//! figure and the page alike: who held its memory, stacked under the curve
//! (the run's compositions: objects, an allocator's cache, reserves, what the
//! driver kept; the gap up to the curve is what no share explains), each GPU
//! its processes used as a panel of its own (the one a refusal happened on
//! first) with each process's bytes stacked in its rank's colour under the
//! GPU's memory in use, and each refused allocation marked. Every value is
//! read from the run; SVG elements only, never a whole document.

use std::fmt::Write;

use crate::export::svg::{esc, grouped};
use crate::run::Run;
use crate::run::ranks::{GpuPoint, Ranks};
use crate::units::MIB_F64 as MIB;

/// The shares stacked under the curve, bottom to top, as `SharePoint::stacked`.
pub(crate) const SHARES: [(&str, &str); 4] = [
    ("objects it held", "#9ecae1"),
    ("its allocators' cache", "#a1d99b"),
    ("reserves (contexts, code)", "#fdd0a2"),
    ("kept by the driver", "#d9d9d9"),
];
/// A process's colour, by its place among the program's (rank, then pid).
pub(crate) const PROCESSES: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948",
];
/// What no share explains, stacked on the shares up to the run's reading.
pub(crate) const UNEXPLAINED: (&str, &str) = ("not explained by any share", "#f4a6b7");
/// A refused allocation.
pub(crate) const REFUSED: &str = "#c00000";

/// Where a chart's plot lies and the time it spans.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plot {
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub t0: u64,
    pub span_ns: f64,
}

impl Plot {
    pub fn x(&self, t: u64) -> f64 {
        let f = ((t as f64 - self.t0 as f64) / self.span_ns.max(1.0)).clamp(0.0, 1.0);
        self.left + f * (self.right - self.left)
    }

    /// Each whole column of the plot from `from` to `to`: its left x and the
    /// time at its right edge (a value taken inside a column counts in it).
    fn columns(&self, from: u64, to: u64) -> Vec<(f64, u64)> {
        let (a, b) = (self.x(from).floor(), self.x(to).ceil());
        let width = (self.right - self.left).max(1.0);
        let mut out = Vec::new();
        let mut x = a.max(self.left);
        while x < b.min(self.right) {
            let f = (x + 1.0 - self.left) / width;
            out.push((x, self.t0 + (f * self.span_ns).max(0.0) as u64));
            x += 1.0;
        }
        out
    }
}

/// Bands stacked from `below` to `above`, one pair of values a column, as
/// a closed path of steps.
fn band(out: &mut String, cols: &[(f64, f64, f64)], fill: &str, title: &str) {
    if cols.iter().all(|(_, lo, hi)| (lo - hi).abs() < 0.05) {
        return;
    }
    let mut d = String::new();
    for (i, (x, _, hi)) in cols.iter().enumerate() {
        let _ = write!(
            d,
            "{}{x:.1},{hi:.1} {:.1},{hi:.1} ",
            if i == 0 { "M" } else { "L" },
            x + 1.0
        );
    }
    for (x, lo, _) in cols.iter().rev() {
        let _ = write!(d, "L{:.1},{lo:.1} {x:.1},{lo:.1} ", x + 1.0);
    }
    let _ = write!(
        out,
        r#"<path class="share" d="{}Z" fill="{fill}" stroke="none"><title>{}</title></path>"#,
        d.trim_end(),
        esc(title)
    );
}

/// The run's memory by share stacked under its curve, `y` placing MiB.
/// False when the run took no composition.
pub(crate) fn shares(out: &mut String, run: &Run, plot: &Plot, y: &dyn Fn(f64) -> f64) -> bool {
    let points = run.composition().points();
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return false;
    };
    let cols = plot.columns(first.t_ns, last.t_ns.max(first.t_ns + 1));
    for (i, (name, fill)) in SHARES.iter().enumerate() {
        let stacked: Vec<(f64, f64, f64)> = cols
            .iter()
            .filter_map(|&(x, t)| {
                let p = run.composition().at(t)?.stacked();
                let below: u64 = p[..i].iter().sum();
                let top = below + p[i];
                Some((x, y(below as f64 / MIB), y(top as f64 / MIB)))
            })
            .collect();
        band(out, &stacked, fill, name);
    }
    true
}

/// What no share explains: a band from the shares' top up to the reading
/// each composition was taken of, `y` placing MiB. False when no column has
/// a gap (the shares explain all of it, or the run took no composition).
pub(crate) fn unexplained(
    out: &mut String,
    run: &Run,
    plot: &Plot,
    y: &dyn Fn(f64) -> f64,
) -> bool {
    let points = run.composition().points();
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return false;
    };
    let mut gap = false;
    let stacked: Vec<(f64, f64, f64)> = plot
        .columns(first.t_ns, last.t_ns.max(first.t_ns + 1))
        .into_iter()
        .filter_map(|(x, t)| {
            let p = run.composition().at(t)?;
            let explained: u64 = p.stacked().iter().sum();
            gap |= p.total > explained;
            let top = p.total.max(explained);
            Some((x, y(explained as f64 / MIB), y(top as f64 / MIB)))
        })
        .collect();
    band(out, &stacked, UNEXPLAINED.1, UNEXPLAINED.0);
    gap && stacked.iter().any(|(_, lo, hi)| (lo - hi).abs() >= 0.05)
}

/// Whether some composition of `run` has a gap no share explains of a MiB
/// or more (the unit the charts are read in): what a legend names.
pub(crate) fn has_gap(run: &Run) -> bool {
    run.composition()
        .points()
        .iter()
        .any(|p| p.total > p.stacked().iter().sum::<u64>() + crate::units::MIB)
}

/// A refused allocation: when, what, and the GPU its process was on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub t_ns: u64,
    pub label: String,
    pub gpu: Option<u32>,
}

/// Each process's first refused allocation, in time order: the call the
/// driver refused, or where none was, its framework's first refusal (an
/// allocator that refused before asking the driver, at its own limit); a
/// lab's refused call where the run has no processes to tell apart.
pub(crate) fn refusals(run: &Run) -> Vec<Refusal> {
    let ranks = run.ranks();
    let mut out: Vec<Refusal> = ranks
        .members
        .values()
        .filter_map(|m| {
            let r = m.ran_out.as_ref()?;
            Some(refusal(ranks, m.pid, &r.api, r.asked_bytes, r.end_ns))
        })
        .collect();
    if let Some(f) = run.frameworks().first_refusal()
        && ranks
            .members
            .get(&f.allocator.pid)
            .is_none_or(|m| m.ran_out.is_none())
    {
        let who = f.allocator.framework.label();
        out.push(refusal(ranks, f.allocator.pid, who, Some(f.asked), f.t_ns));
    }
    if out.is_empty()
        && let Some(c) = run.folds().ran_out.as_ref()
    {
        out.push(Refusal {
            t_ns: c.end_ns,
            label: format!("out of memory: {} refused", c.api),
            gpu: None,
        });
    }
    out.sort_by_key(|r| r.t_ns);
    out
}

/// Process `pid`'s refusal by `what` (a call, or a framework), its words
/// naming the MiB asked, the process and its GPU where it used one only.
fn refusal(ranks: &Ranks, pid: u32, what: &str, asked: Option<u64>, t_ns: u64) -> Refusal {
    let asked = asked
        .map(|b| format!(" {} MiB", grouped(b.div_ceil(1 << 20))))
        .unwrap_or_default();
    let gpu = ranks
        .members
        .get(&pid)
        .filter(|m| m.gpus_used.len() == 1)
        .and_then(|m| m.gpus_used.first().copied());
    let on = gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default();
    Refusal {
        t_ns,
        label: format!(
            "out of memory: {what} refused{asked}, {}{on}",
            process_name(ranks, pid)
        ),
        gpu,
    }
}

/// A line across the plot at each refusal, its words in rows from
/// `label_top` down (left of the line, near the right edge); without a
/// `label_top`, the line alone from the plot's top, its words on hover.
pub(crate) fn refusal_marks(
    out: &mut String,
    refusals: &[Refusal],
    plot: &Plot,
    label_top: Option<f64>,
    size: f64,
) {
    for (i, r) in refusals.iter().enumerate() {
        let x = plot.x(r.t_ns);
        let _ = write!(
            out,
            r#"<line class="refused" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{REFUSED}" stroke-width="2.5"><title>{}</title></line>"#,
            label_top.map_or(plot.top, |t| t + size * 0.2),
            plot.bottom,
            esc(&r.label)
        );
        let Some(label_top) = label_top else {
            continue;
        };
        let width = r.label.chars().count() as f64 * size * 0.6;
        let (tx, anchor) = if x + 6.0 + width <= plot.right {
            (x + 6.0, "start")
        } else {
            (x - 6.0, "end")
        };
        let _ = write!(
            out,
            r#"<text class="refused" x="{tx:.1}" y="{:.1}" font-size="{size}" text-anchor="{anchor}" fill="{REFUSED}">{}</text>"#,
            label_top + size * (1.0 + i as f64 * 1.2),
            esc(&r.label)
        );
    }
}

/// The GPUs to draw a panel each for, the first refusal's first: none where
/// one chart tells it all (one process on GPU 0 at most).
pub(crate) fn gpus(run: &Run, refusals: &[Refusal]) -> Vec<u32> {
    let ranks = run.ranks();
    let on_gpus = ranks
        .members
        .values()
        .filter(|m| !m.gpus_used.is_empty())
        .count();
    if !(ranks.spread() || on_gpus > 1) {
        return Vec::new();
    }
    let mut used: Vec<u32> = ranks
        .gpus_used()
        .into_iter()
        .filter(|g| ranks.gpus.get(*g as usize).is_some())
        .collect();
    if let Some(first) = refusals.iter().find_map(|r| r.gpu)
        && let Some(i) = used.iter().position(|g| *g == first)
    {
        let g = used.remove(i);
        used.insert(0, g);
    }
    used
}

/// A process as a legend names it: `rank 1 (pid 937)`.
pub(crate) fn process_name(ranks: &Ranks, pid: u32) -> String {
    match ranks.members.get(&pid).and_then(|m| m.rank.as_ref()) {
        Some(r) => format!("rank {} (pid {pid})", r.rank),
        None => format!("pid {pid}"),
    }
}

/// The most any drawn GPU had in use, MiB (one scale for all panels).
pub(crate) fn gpus_peak_mib(run: &Run, gpus: &[u32]) -> f64 {
    gpus.iter()
        .filter_map(|g| run.ranks().gpus.get(*g as usize))
        .map(|l| l.peak_used.max(l.program_peak) as f64 / MIB)
        .fold(0.0, f64::max)
}

/// One GPU's panel in `plot`: its label, its processes' bytes stacked, its
/// memory in use by every process as a line, on a scale to `y_max` MiB.
pub(crate) fn gpu_panel(out: &mut String, run: &Run, gpu: u32, plot: &Plot, y_max: f64, size: f64) {
    let ranks = run.ranks();
    let Some(lane) = ranks.gpus.get(gpu as usize) else {
        return;
    };
    let y = |mib: f64| plot.bottom - (mib / y_max).clamp(0.0, 1.0) * (plot.bottom - plot.top);
    let order = ranks.colour_order();
    let on: Vec<(usize, u32)> = order
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, pid)| {
            ranks
                .members
                .get(pid)
                .is_some_and(|m| m.gpus_used.contains(&gpu))
        })
        .collect();
    let (Some(first), Some(last)) = (lane.points.first(), lane.points.last()) else {
        return;
    };
    let at = |t: u64| -> Option<&GpuPoint> {
        let i = lane.points.partition_point(|p| p.t_ns <= t);
        i.checked_sub(1).and_then(|i| lane.points.get(i))
    };
    let cols = plot.columns(first.t_ns, last.t_ns.max(first.t_ns + 1));
    let bytes_of = |p: &GpuPoint, pid: u32| {
        p.processes
            .iter()
            .flatten()
            .find(|b| b.pid == pid)
            .and_then(|b| b.bytes)
            .unwrap_or(0)
    };
    for (k, &(colour, pid)) in on.iter().enumerate() {
        let stacked: Vec<(f64, f64, f64)> = cols
            .iter()
            .filter_map(|&(x, t)| {
                let p = at(t)?;
                let below: u64 = on[..k].iter().map(|&(_, q)| bytes_of(p, q)).sum();
                let top = below + bytes_of(p, pid);
                Some((x, y(below as f64 / MIB), y(top as f64 / MIB)))
            })
            .collect();
        let fill = PROCESSES[colour % PROCESSES.len()];
        band(out, &stacked, fill, &process_name(ranks, pid));
    }
    let line: Vec<String> = cols
        .iter()
        .filter_map(|&(x, t)| {
            let p = at(t)?;
            let v = y(p.used.saturating_sub(lane.meta.baseline_bytes) as f64 / MIB);
            Some(format!("{x:.1},{v:.1} {:.1},{v:.1}", x + 1.0))
        })
        .collect();
    let _ = write!(
        out,
        r##"<polyline class="gpu-used" points="{}" fill="none" stroke="#1f77b4" stroke-width="2.5"/>"##,
        line.join(" ")
    );
    let label = format!(
        "GPU {} · {} · {} MiB at most in use:",
        lane.meta.index,
        lane.meta.name,
        grouped((lane.peak_used as f64 / MIB).round() as u64)
    );
    let ty = plot.top - size * 0.4;
    let _ = write!(
        out,
        r##"<text x="{:.1}" y="{ty:.1}" font-size="{size}" fill="#222222">{}</text>"##,
        plot.left + 6.0,
        esc(&label)
    );
    // Each process on it, in its colour.
    let mut x = plot.left + 6.0 + (label.chars().count() as f64 + 1.0) * size * 0.6;
    for &(colour, pid) in &on {
        let name = process_name(ranks, pid);
        let _ = write!(
            out,
            r##"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{ty:.1}" font-size="{size}" fill="#222222">{}</text>"##,
            ty - size * 0.75,
            size * 0.8,
            size * 0.8,
            PROCESSES[colour % PROCESSES.len()],
            x + size,
            esc(&name)
        );
        x += size + (name.chars().count() as f64 + 2.0) * size * 0.6;
    }
}
