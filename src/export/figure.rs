//! Figures for slides: device memory over time with the calls marked, and the
//! timeline (host lane, one lane per queue) beneath on the same time axis. Two runs
//! side by side share both axes, so cudaFree and cudaFreeAsync compare at a glance.
//! SVG through plotters; PNG by rasterising that SVG with resvg.

use plotters::prelude::*;

use crate::run::Run;
use crate::trace::{CallStatus, MemorySource};

pub type Result<T, E = FigureError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("drawing the figure: {0}")]
    Draw(String),
    #[error("rasterising the figure: {0}")]
    Raster(String),
}

/// Projector-sized: readable from the back of a room.
pub const WIDTH: u32 = 1600;
pub const HEIGHT: u32 = 900;

use crate::units::MIB_F64 as MIB;
const MEMORY: RGBColor = RGBColor(31, 119, 180);
const HOST: RGBColor = RGBColor(120, 120, 120);
const DEVICE: RGBColor = RGBColor(214, 39, 40);
const MARKER: RGBColor = RGBColor(255, 127, 14);

fn draw_err(e: impl std::fmt::Display) -> FigureError {
    FigureError::Draw(e.to_string())
}

/// The figure of one run, or of several side by side on shared axes.
pub fn svg(runs: &[&Run]) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH * runs.len().max(1) as u32, HEIGHT))
            .into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let t_max = runs.iter().map(|r| span_ms(r)).fold(1.0, f64::max);
        let y_max = runs.iter().map(|r| peak_mib(r)).fold(1.0, f64::max) * 1.1;
        let columns = root.split_evenly((1, runs.len().max(1)));
        for (run, area) in runs.iter().zip(columns.iter()) {
            draw_run(run, area, t_max, y_max)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok(out)
}

/// DejaVu Sans (Bitstream Vera license, `assets/fonts/DejaVuSans.LICENSE`).
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
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

fn rel_ms(run: &Run, t: u64) -> f64 {
    (t as f64 - run.t0() as f64) / 1e6
}

fn span_ms(run: &Run) -> f64 {
    let last = run
        .end
        .as_ref()
        .map(|e| e.t_ns)
        .into_iter()
        .chain(run.calls.iter().map(|c| c.end_ns))
        .chain(run.spans.iter().map(|s| s.end_ns))
        .max()
        .unwrap_or(run.t0());
    rel_ms(run, last)
}

fn baseline(run: &Run) -> f64 {
    run.baseline().unwrap_or(0) as f64 / MIB
}

fn peak_mib(run: &Run) -> f64 {
    run.peak_above_baseline().unwrap_or(0) as f64 / MIB
}

fn title(run: &Run) -> String {
    let lab = run.meta.as_ref().and_then(|m| m.lab.as_ref());
    let device = run
        .meta
        .as_ref()
        .map(|m| m.device.name.as_str())
        .unwrap_or("?");
    match lab {
        Some(l) => format!("{} [{}] — {device}", l.id, l.variant),
        None => device.to_string(),
    }
}

fn draw_run<DB: DrawingBackend>(
    run: &Run,
    area: &DrawingArea<DB, plotters::coord::Shift>,
    t_max: f64,
    y_max: f64,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (upper, lower) = area.split_vertically((HEIGHT as f64 * 0.62) as u32);
    let base = baseline(run);
    let memory_label = match run.meta.as_ref().map(|m| m.device.memory_source) {
        Some(MemorySource::Rss) => "host memory of the worker above baseline, MiB",
        _ => "device memory above baseline, MiB",
    };
    let mut chart = ChartBuilder::on(&upper)
        .caption(title(run), ("sans-serif", 30))
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .y_desc(memory_label)
        .x_desc("ms from the start of the run")
        .label_style(("sans-serif", 20))
        .axis_desc_style(("sans-serif", 22))
        .draw()
        .map_err(draw_err)?;
    let points: Vec<(f64, f64)> = run
        .readings
        .iter()
        .map(|&(t, b)| (rel_ms(run, t), (b as f64 / MIB - base).max(0.0)))
        .collect();
    chart
        .draw_series(LineSeries::new(points, MEMORY.stroke_width(3)))
        .map_err(draw_err)?;
    // Tagged calls are the ones the lab's claims talk about: mark and name them.
    let tagged = run
        .calls
        .iter()
        .filter(|c| c.tag.is_some() && c.iter.first().is_none_or(|i| *i == 0));
    for (i, c) in tagged.enumerate() {
        let x = rel_ms(run, c.end_ns);
        chart
            .draw_series(LineSeries::new(
                [(x, 0.0), (x, y_max)],
                MARKER.stroke_width(2),
            ))
            .map_err(draw_err)?;
        let label = format!("{} [{}]", c.api, c.tag.as_deref().unwrap_or(""));
        chart
            // Staggered, so markers close in time keep readable labels.
            .draw_series([Text::new(
                label,
                (x, y_max * (0.97 - 0.06 * (i % 4) as f64)),
                ("sans-serif", 18).into_font().color(&MARKER),
            )])
            .map_err(draw_err)?;
    }

    // The timeline: lane 0 is the host, then one lane per queue or stream.
    let mut queues: Vec<(u64, String)> = Vec::new();
    for s in &run.spans {
        if !queues.iter().any(|(q, _)| *q == s.queue) {
            queues.push((
                s.queue,
                s.queue_name
                    .clone()
                    .unwrap_or_else(|| format!("#{}", s.queue)),
            ));
        }
    }
    let lanes = 1 + queues.len();
    let mut timeline = ChartBuilder::on(&lower)
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..t_max, 0.0..lanes as f64)
        .map_err(draw_err)?;
    let lane_names: Vec<String> = std::iter::once("host".to_string())
        .chain(queues.iter().map(|(_, n)| format!("queue {n}")))
        .collect();
    timeline
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(lanes * 2 + 1)
        .y_label_formatter(&|y| {
            let lane = y.floor() as usize;
            if (y - lane as f64 - 0.5).abs() < 0.01 {
                lane_names
                    .get(lanes - 1 - lane)
                    .cloned()
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 20))
        .x_desc("ms from the start of the run")
        .axis_desc_style(("sans-serif", 22))
        .draw()
        .map_err(draw_err)?;
    let lane_y = |lane: usize| (lanes - 1 - lane) as f64;
    timeline
        .draw_series(
            run.calls
                .iter()
                .filter(|c| c.status != CallStatus::Directive)
                .map(|c| {
                    let (x0, x1) = (
                        rel_ms(run, c.begin_ns),
                        rel_ms(run, c.end_ns).max(rel_ms(run, c.begin_ns) + t_max * 0.001),
                    );
                    let y = lane_y(0);
                    Rectangle::new([(x0, y + 0.15), (x1, y + 0.85)], HOST.filled())
                }),
        )
        .map_err(draw_err)?;
    timeline
        .draw_series(run.spans.iter().map(|s| {
            let lane = 1 + queues.iter().position(|(q, _)| *q == s.queue).unwrap_or(0);
            let y = lane_y(lane);
            Rectangle::new(
                [
                    (rel_ms(run, s.begin_ns), y + 0.15),
                    (rel_ms(run, s.end_ns), y + 0.85),
                ],
                DEVICE.filled(),
            )
        }))
        .map_err(draw_err)?;
    Ok(())
}
