//! The figure's legend: which marks its runs draw (a lab's, a watched
//! program's shares, GPUs and refusals), each named once, in rows that wrap
//! at the slide's width. Never names a mark the figure does not draw.

use std::fmt::Write;

use super::layout::Sizes;
use super::{CHAR_WIDTH, DEVICE, HOST, LEFT, LEGEND, MARKER, MEMORY, RIGHT, W, text};
use crate::export::decimate::Decimated;

/// Which marks a figure draws, so its legend names those and no others.
pub(super) struct Drawn {
    /// Every run is a watched program: its baseline is the device before it started.
    watched: bool,
    markers: bool,
    host: bool,
    device: bool,
    /// A run's memory by share is stacked under its curve.
    shares: bool,
    /// A run's shares leave a gap of a MiB or more unexplained.
    unexplained: bool,
    /// A run is drawn as a panel per GPU.
    gpus: bool,
    /// A run had an allocation refused.
    refused: bool,
}

impl Drawn {
    pub(super) fn of(runs: &[Decimated]) -> Drawn {
        let program = crate::export::program::refusals;
        Drawn {
            watched: runs
                .iter()
                .all(|d| d.run.meta().is_some_and(|m| m.watch.is_some())),
            markers: runs.iter().any(|d| !d.tagged().is_empty()),
            host: runs
                .iter()
                .any(|d| d.host.iter().next().is_some() || !d.run.calls().is_empty()),
            device: runs.iter().any(|d| !d.lanes.is_empty()),
            shares: runs.iter().any(|d| {
                d.run.meta().is_some_and(|m| m.watch.is_some())
                    && !d.run.composition().points().is_empty()
                    && crate::export::program::gpus(&d.run, &program(&d.run)).is_empty()
            }),
            unexplained: runs.iter().any(|d| {
                d.run.meta().is_some_and(|m| m.watch.is_some())
                    && crate::export::program::gpus(&d.run, &program(&d.run)).is_empty()
                    && crate::export::program::has_gap(&d.run)
            }),
            gpus: runs
                .iter()
                .any(|d| !crate::export::program::gpus(&d.run, &program(&d.run)).is_empty()),
            refused: runs.iter().any(|d| !program(&d.run).is_empty()),
        }
    }
}

/// One legend entry: how its swatch is drawn, and its words.
enum Swatch {
    Line(&'static str),
    Dashed,
    Bar(&'static str),
}

/// The legend, in as many rows as its entries need; returns its height.
pub(super) fn legend(out: &mut String, s: &Sizes, drawn: &Drawn) -> f64 {
    let line = match (drawn.watched, drawn.gpus) {
        (_, true) => "memory in use on the GPU (every process); bands: each process's",
        (true, false) => "memory above its level before the program started",
        (false, false) => "memory above baseline",
    };
    let mut items: Vec<(Swatch, &str)> = vec![(Swatch::Line(MEMORY), line)];
    if drawn.shares {
        for (name, fill) in crate::export::program::SHARES {
            items.push((Swatch::Bar(fill), name));
        }
        if drawn.unexplained {
            let (name, fill) = crate::export::program::UNEXPLAINED;
            items.push((Swatch::Bar(fill), name));
        }
    }
    if drawn.refused {
        items.push((
            Swatch::Line(crate::export::program::REFUSED),
            "allocation refused (out of memory)",
        ));
    }
    if drawn.markers {
        items.push((Swatch::Dashed, "a call a claim names"));
    }
    if drawn.host {
        items.push((Swatch::Bar(HOST), "host call"));
    }
    if drawn.device {
        items.push((Swatch::Bar(DEVICE), "device work"));
    }
    let row_h = s.text * 1.5;
    let mut x = LEFT;
    let mut y = LEGEND / 2.0 + s.text / 3.0;
    for (swatch, label) in items {
        let width = 38.0 + label.chars().count() as f64 * s.text * CHAR_WIDTH;
        if x > LEFT && x + width > W - RIGHT {
            x = LEFT;
            y += row_h;
        }
        let mid = y - s.text / 3.0;
        match swatch {
            Swatch::Line(colour) => {
                let _ = write!(
                    out,
                    r#"<line x1="{x}" y1="{mid}" x2="{}" y2="{mid}" stroke="{colour}" stroke-width="3"/>"#,
                    x + 30.0
                );
            }
            Swatch::Dashed => {
                let _ = write!(
                    out,
                    r#"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="{MARKER}" stroke-width="2" stroke-dasharray="5 4"/>"#,
                    x + 15.0,
                    mid - s.text / 2.0,
                    mid + s.text / 2.0
                );
            }
            Swatch::Bar(fill) => {
                let _ = write!(
                    out,
                    r#"<rect x="{x}" y="{}" width="30" height="{}" fill="{fill}"/>"#,
                    mid - s.text / 3.0,
                    s.text * 2.0 / 3.0
                );
            }
        }
        text(out, x + 38.0, y, s.text, "start", "#222222", label);
        x += width + 40.0;
    }
    LEGEND + (y - (LEGEND / 2.0 + s.text / 3.0))
}
