//! Figures for slides, 16:9 at any count of runs: a legend, then per run its
//! title, device memory over time with the calls its claims name marked and
//! labelled above the plot (labels placed in rows so none overlaps another or a
//! marker, and none leaves the figure), the timeline (a labelled host lane, one
//! lane per queue or stream) on the same time axis, and its claims with their
//! verdicts. Two runs are stacked on shared axes, so cudaFree and cudaFreeAsync
//! compare at a glance. SVG written here; PNG by rasterising it with resvg.
//!
//! Each recording is read twice (`Outline`, then `Decimated`), so a figure of a
//! million calls costs what one of ten thousand does: past a few per pixel
//! column, the memory line is drawn from each column's first, last, lowest and
//! highest reading, and a lane's calls or spans that share a column are one bar
//! whose title says how many it stands for.

use std::fmt::Write;
use std::io;

mod claims;
mod labels;
mod layout;
mod legend;
mod watch;

use claims::{claim_lines, draw_claims};
use labels::{Marker, place};
use layout::{Axis, Place, Shared, Sizes};
use legend::{Drawn, legend};

use crate::export::decimate::{Decimated, MIN_BAR, Mark};
use crate::export::outline::Outline;
use crate::export::svg::{esc, lane_label, merged_title, tick_label, ticks};
use crate::run::Run;
use crate::trace::{Event, MemorySource};
use crate::units::MIB_F64 as MIB;

pub type Result<T, E = FigureError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("rasterising the figure: {0}")]
    Raster(String),
}

/// A 16:9 slide at projector size, readable from the back of a room.
pub const WIDTH: u32 = 1600;
pub const HEIGHT: u32 = 900;

const W: f64 = WIDTH as f64;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 40.0;
/// The plot's width in pixels: the columns the lanes and the line are kept at.
const COLUMNS: usize = (W - LEFT - RIGHT) as usize;
const LEGEND: f64 = 50.0;

const MEMORY: &str = "#1f77b4";
const HOST: &str = "#787878";
const DEVICE: &str = "#d62728";
const MARKER: &str = "#e86a00";

/// DejaVu Sans's mean advance is a little over half its size: labels are
/// placed with this, and a little room to spare.
const CHAR_WIDTH: f64 = 0.6;

/// `t` in ms from a run's start `t0`.
fn rel_ms(t0: u64, t: u64) -> f64 {
    (t as f64 - t0 as f64) / 1e6
}

fn above_baseline(run: &Run, bytes: u64) -> f64 {
    (bytes as f64 - run.baseline().unwrap_or(0) as f64).max(0.0) / MIB
}

fn peak_mib(d: &Decimated) -> f64 {
    d.memory.peak().map_or(0.0, |b| above_baseline(&d.run, b))
}

fn title(run: &Run) -> String {
    let device = run
        .meta()
        .as_ref()
        .map(|m| m.device.name.as_str())
        .unwrap_or("?");
    let meta = run.meta();
    if let Some(w) = meta.and_then(|m| m.watch.as_ref()) {
        // A watched program, not a lab: said so, named by its command line.
        let on = match meta.map(|m| m.device.memory_source) {
            Some(MemorySource::Nvml) => device.to_string(),
            _ => "its processes' host memory".to_string(),
        };
        return format!("program: {} — {on}", w.command.join(" "));
    }
    match meta.and_then(|m| m.lab.as_ref()) {
        Some(l) => format!("{} [{}] — {device}", l.id, l.variant),
        None => device.to_string(),
    }
}

/// `text` cut to what fits in `width` at `size`, with an ellipsis.
fn fit(text: &str, width: f64, size: f64) -> String {
    let max = (width / (size * CHAR_WIDTH)).floor() as usize;
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        cut + "…"
    }
}

fn text(out: &mut String, x: f64, y: f64, size: f64, anchor: &str, fill: &str, body: &str) {
    let _ = write!(
        out,
        r#"<text x="{x:.1}" y="{y:.1}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">{}</text>"#,
        esc(body)
    );
}

/// The figure of one recording, or of several stacked on shared axes. Each
/// recording is a function that hands over its events in order, from the start,
/// each time it is called: it is read twice.
pub fn svg<R>(recordings: &[R]) -> io::Result<String>
where
    R: Fn(&mut dyn FnMut(Event)) -> io::Result<()>,
{
    let outlines = recordings
        .iter()
        .map(Outline::of)
        .collect::<io::Result<Vec<_>>>()?;
    let axis = Axis {
        t_max: outlines
            .iter()
            .map(|o| rel_ms(o.t0(), o.drawn_end()))
            .fold(1e-3, f64::max),
    };
    let runs = recordings
        .iter()
        .zip(&outlines)
        .map(|(r, o)| {
            let t0 = o.t0();
            Decimated::fold(r, o, COLUMNS, |t| axis.x(rel_ms(t0, t)))
        })
        .collect::<io::Result<Vec<_>>>()?;
    Ok(draw(&runs, axis))
}

fn draw(runs: &[Decimated], axis: Axis) -> String {
    let n = runs.len().max(1);
    let peak = runs.iter().map(peak_mib).fold(0.0, f64::max);
    let shared = Shared {
        axis,
        y_max: if peak > 0.0 { peak * 1.1 } else { 1.0 },
        claim_rows: runs
            .iter()
            .map(|r| {
                let text = Sizes::for_runs(n).text;
                r.run
                    .claims()
                    .iter()
                    .map(|c| claim_lines(c, text).len())
                    .sum()
            })
            .max()
            .unwrap_or(0),
        sizes: Sizes::for_runs(n),
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif"><rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
    );
    let legend_h = legend(&mut out, &shared.sizes, &Drawn::of(runs));
    let panel = (HEIGHT as f64 - legend_h) / n as f64;
    for (i, d) in runs.iter().enumerate() {
        draw_run(&mut out, d, legend_h + i as f64 * panel, panel, &shared);
    }
    out.push_str("</svg>\n");
    out
}

fn draw_run(out: &mut String, d: &Decimated, top: f64, height: f64, shared: &Shared) {
    let size = shared.sizes.title;
    let full = title(&d.run);
    let lines = watch::title_lines(&full, W - 40.0, size);
    let (at, title_y) = Place::of(d, top, height, shared, lines.len());
    // The whole title on hover where its lines wrapped or shortened it.
    let whole = lines.len() == 1 && lines[0] == full;
    if !whole {
        let _ = write!(out, "<g><title>{}</title>", esc(&full));
    }
    for (i, line) in lines.iter().enumerate() {
        let y = title_y + i as f64 * size * 1.2;
        text(out, W / 2.0, y, size, "middle", "#111111", line);
    }
    if !whole {
        out.push_str("</g>");
    }
    let refusals = crate::export::program::refusals(&d.run);
    let gpus = crate::export::program::gpus(&d.run, &refusals);
    if gpus.is_empty() {
        draw_grid(out, d, shared, &at);
        watch::draw_shares(out, d, shared, &at);
        draw_curve(out, d, shared, &at);
    } else {
        watch::draw_gpus(out, d, &gpus, shared, &at);
    }
    draw_markers(out, d, shared, &at);
    watch::draw_refusals(out, &refusals, shared, &at);
    let ticks_y = draw_timeline(out, d, shared, &at);
    draw_claims(out, d, shared, ticks_y);
}

/// One memory tick: its grid line across the plot at `y`, and `mib` beside it.
pub(super) fn memory_tick(out: &mut String, y: f64, mib: f64, size: f64) {
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{y:.1}" x2="{right}" y2="{y:.1}" stroke="#e4e4e4"/>"##,
        right = W - RIGHT
    );
    text(
        out,
        LEFT - 10.0,
        y + size / 3.0,
        size,
        "end",
        "#333333",
        &tick_label(mib),
    );
}

/// Grid, axes and tick labels.
fn draw_grid(out: &mut String, d: &Decimated, shared: &Shared, at: &Place) {
    let (axis, y_max, s, run) = (&shared.axis, shared.y_max, &shared.sizes, &d.run);
    let y = |mib: f64| at.y(mib, y_max);
    let (plot_top, plot_bottom, lanes_bottom) = (at.plot_top, at.plot_bottom, at.lanes_bottom);
    for v in ticks(y_max) {
        memory_tick(out, y(v), v, s.text);
    }
    let watched = run.meta().is_some_and(|m| m.watch.is_some());
    let source = match (run.meta().map(|m| m.device.memory_source), watched) {
        (Some(MemorySource::Rss), false) => "worker RSS, MiB",
        (Some(MemorySource::Rss), true) => "program RSS, MiB",
        (_, true) => "device memory, MiB above pre-start",
        _ => "device memory, MiB",
    };
    let mid = (plot_top + plot_bottom) / 2.0;
    let _ = write!(
        out,
        r##"<text x="{0}" y="{mid:.1}" font-size="{1}" text-anchor="middle" fill="#333333" transform="rotate(-90 {0} {mid:.1})">{2}</text>"##,
        s.text,
        s.text,
        esc(source)
    );
    let ms_ticks = ticks(axis.t_max);
    for ms in &ms_ticks {
        let x = axis.x(*ms);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{plot_top:.1}" x2="{x:.1}" y2="{lanes_bottom:.1}" stroke="#f0f0f0"/>"##
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{plot_bottom:.1}" x2="{0}" y2="{plot_bottom:.1}" stroke="#444444"/><line x1="{LEFT}" y1="{plot_top:.1}" x2="{LEFT}" y2="{plot_bottom:.1}" stroke="#444444"/>"##,
        W - RIGHT
    );
}

/// The memory curve.
fn draw_curve(out: &mut String, d: &Decimated, shared: &Shared, at: &Place) {
    let run = &d.run;
    let x = |t: u64| shared.axis.x(rel_ms(at.t0, t));
    let y = |mib: f64| at.y(mib, shared.y_max);
    let points: Vec<String> = d
        .memory
        .points()
        .into_iter()
        .map(|(t, b)| format!("{:.1},{:.1}", x(t), y(above_baseline(run, b))))
        .collect();
    let _ = write!(
        out,
        r#"<polyline points="{}" fill="none" stroke="{MEMORY}" stroke-width="3"/>"#,
        points.join(" ")
    );
}

/// The calls the claims name: a marker each, labelled in the band above.
fn draw_markers(out: &mut String, d: &Decimated, shared: &Shared, at: &Place) {
    let s = &shared.sizes;
    let (row, band_top, plot_top, plot_bottom) = (at.row, at.band_top, at.plot_top, at.plot_bottom);
    let mut tagged = d.tagged();
    tagged.sort_by(|a, b| a.x.total_cmp(&b.x));
    let markers: Vec<Marker> = tagged
        .iter()
        .map(|t| Marker {
            x: t.x,
            label: t.label.clone(),
        })
        .collect();
    for ((m, t), (label_row, text_x, anchor)) in
        markers
            .iter()
            .zip(&tagged)
            .zip(place(&markers, s.label_rows, s.text))
    {
        let line_top = match label_row {
            Some(r) => band_top + r as f64 * row + row * 0.25,
            None => plot_top,
        };
        let _ = write!(
            out,
            r#"<line x1="{0:.1}" y1="{line_top:.1}" x2="{0:.1}" y2="{plot_bottom:.1}" stroke="{MARKER}" stroke-width="2" stroke-dasharray="5 4""#,
            m.x
        );
        if t.count > 1 {
            let _ = write!(
                out,
                "><title>{} calls</title></line>",
                crate::export::svg::grouped(t.count)
            );
        } else {
            out.push_str("/>");
        }
        if let Some(r) = label_row {
            text(
                out,
                text_x,
                band_top + (r + 1) as f64 * row - row * 0.25,
                s.text,
                anchor,
                MARKER,
                &m.label,
            );
        }
    }
}

/// The timeline: the host lane, then one lane per queue or stream, and the
/// time axis under them. Returns where the tick labels are.
fn draw_timeline(out: &mut String, d: &Decimated, shared: &Shared, at: &Place) -> f64 {
    let (axis, s, run, t0) = (&shared.axis, &shared.sizes, &d.run, at.t0);
    let (row, lanes_top, lanes_bottom) = (at.row, at.lanes_top, at.lanes_bottom);
    let x = |t: u64| axis.x(rel_ms(t0, t));
    let queues = &d.lanes;
    let ms_ticks = ticks(axis.t_max);
    let lane_y = |lane: usize| lanes_top + lane as f64 * s.lane;
    let names =
        std::iter::once("host calls".to_string()).chain(queues.iter().map(|q| lane_label(run, q)));
    for (lane, name) in names.enumerate() {
        text(
            out,
            LEFT - 10.0,
            lane_y(lane) + s.lane / 2.0 + s.text / 3.0,
            s.text,
            "end",
            "#333333",
            &fit(&name, LEFT - 16.0, s.text),
        );
    }
    let rect = |out: &mut String, lane: usize, x0: f64, x1: f64, fill: &str| {
        let _ = write!(
            out,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}""#,
            lane_y(lane) + s.lane * 0.15,
            (x1 - x0).max(MIN_BAR),
            s.lane * 0.7
        );
    };
    let bar = |out: &mut String, lane: usize, x0: f64, x1: f64, fill: &str| {
        rect(out, lane, x0, x1, fill);
        out.push_str("/>");
    };
    // A bar that stands for several calls or spans says so on hover.
    let merged = |out: &mut String, lane: usize, m: &Mark, fill: &str, what, busy| {
        rect(out, lane, m.x0, m.x1, fill);
        let title = merged_title(m, what, busy, |t| rel_ms(t0, t));
        let _ = write!(out, "><title>{}</title></rect>", esc(&title));
    };
    match d.calls() {
        Some(calls) => {
            for c in calls {
                bar(out, 0, x(c.begin_ns), x(c.end_ns), HOST);
            }
        }
        None => {
            for m in d.host.iter() {
                merged(out, 0, m, HOST, ("call", "calls"), "host");
            }
        }
    }
    match d.spans() {
        Some(spans) => {
            for (q, sp) in spans {
                bar(out, q + 1, x(sp.begin_ns), x(sp.end_ns), DEVICE);
            }
        }
        None => {
            let what = ("device span", "device spans");
            for (q, lane) in d.device.iter().enumerate() {
                for m in lane.iter() {
                    merged(out, q + 1, m, DEVICE, what, "on the device");
                }
            }
        }
    }
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{lanes_bottom:.1}" x2="{0}" y2="{lanes_bottom:.1}" stroke="#444444"/>"##,
        W - RIGHT
    );
    let ticks_y = lanes_bottom + row;
    for ms in &ms_ticks {
        text(
            out,
            axis.x(*ms),
            ticks_y,
            s.text,
            "middle",
            "#333333",
            &tick_label(*ms),
        );
    }
    text(
        out,
        W - RIGHT,
        ticks_y + row,
        s.text,
        "end",
        "#555555",
        "ms from the start of the run",
    );

    ticks_y
}

/// DejaVu Sans (Bitstream Vera license, `assets/fonts/DejaVuSans.LICENSE`).
const FONT: &[u8] = include_bytes!("../../../fonts/DejaVuSans.ttf");
const FONT_FAMILY: &str = "DejaVu Sans";

/// PNG bytes of the same figure.
pub fn png(svg: &str) -> Result<Vec<u8>> {
    let mut opt = resvg::usvg::Options::default();
    // The figure's one font travels with gpulab: containers and CI images often
    // have no fonts at all, and the PNG then had every label missing.
    let db = opt.fontdb_mut();
    db.load_font_data(FONT.to_vec());
    db.set_sans_serif_family(FONT_FAMILY);
    if db.faces().next().is_none() {
        return Err(FigureError::Raster(
            "the embedded font could not be loaded, so no text could be drawn".into(),
        ));
    }
    let tree =
        resvg::usvg::Tree::from_str(svg, &opt).map_err(|e| FigureError::Raster(e.to_string()))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| FigureError::Raster("empty figure".into()))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| FigureError::Raster(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    use claims::wrap;

    #[test]
    fn claims_and_titles_wrap_at_words_and_keep_every_word() {
        let text = "the release waits for the kernel that still uses the buffer";
        let lines = wrap(text, 20);
        assert!(lines.iter().all(|l| l.chars().count() <= 20), "{lines:?}");
        assert_eq!(lines.join(" "), text);
        let long = "python3 -m torch.distributed.run --nproc-per-node 2 x.py ".repeat(6);
        let t = watch::title_lines(&long, 600.0, 30.0);
        assert_eq!(t.len(), 2);
        assert!(t.iter().all(|l| l.chars().count() <= 33), "{t:?}");
        assert!(t[1].ends_with(" …"));
        assert!(long.starts_with(&t[0]));
        assert_eq!(
            watch::title_lines("short title", 600.0, 30.0),
            ["short title"]
        );
    }

    #[test]
    fn long_text_is_cut_to_its_width() {
        assert_eq!(fit("short", 1000.0, 20.0), "short");
        let cut = fit(&"x".repeat(200), 120.0, 20.0);
        assert_eq!(cut.chars().count(), 10);
        assert!(cut.ends_with('…'));
    }
}
