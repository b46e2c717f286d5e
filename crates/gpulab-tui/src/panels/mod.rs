//! One widget per panel, each a small view type drawn with `impl Widget for &Panel`
//! from the Run model and view state; nothing here changes state or reads a clock.

pub mod banner;
pub mod braille;
pub mod gpus;
pub mod help;
pub mod labs;
pub mod memory;
pub mod objects;
pub mod params;
pub mod script;
pub mod status;
pub mod timeline;
pub mod verdict;

use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::{Block, BorderType, Borders};

use super::runstate::RunState;
use super::theme::Theme;

pub use crate::units::MIB_F64 as MIB;

/// Width of the label gutter left of the memory chart and the timeline lanes, so
/// both panels put the same instant in the same column.
pub const GUTTER: u16 = 8;

/// A panel's frame. The focused one is drawn with a thick border and its
/// title marked `▶`, so the focus shows without colour (a projector, a
/// monochrome terminal, `NO_COLOR`), and in colour too.
pub fn block<'a>(title: impl Into<String>, focused: bool, theme: Theme) -> Block<'a> {
    let (border, style, mark) = if focused {
        (BorderType::Thick, theme.focused_border(), "▶ ")
    } else {
        (BorderType::Rounded, theme.border(), "")
    };
    Block::default()
        .borders(Borders::ALL)
        .border_type(border)
        .border_style(style)
        .title(Span::styled(
            format!(" {mark}{} ", title.into()),
            theme.title(),
        ))
}

/// The time span and memory range shared by the panels of one run, or of two
/// runs in compare mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axes {
    /// Length of the time axis, ns (at least 1).
    pub dur_ns: u64,
    /// Where the time axis starts after the run's start, ns: a lab's setup
    /// (a context, a program built by PoCL's compiler) that took most of the
    /// run is left of it, and the panels say how long it took. 0 otherwise.
    pub skip_ns: u64,
    /// Memory range, MiB.
    pub lo: f64,
    pub hi: f64,
}

impl Axes {
    pub fn of(runs: &[&RunState]) -> Axes {
        let mut dur = 1u64;
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for r in runs {
            dur = dur.max(r.duration_ns());
            for (_, v) in r.run.readings() {
                let v = *v as f64 / MIB;
                lo = lo.min(v);
                hi = hi.max(v);
            }
            if let Some(b) = r.run.baseline() {
                let b = b as f64 / MIB;
                lo = lo.min(b);
                hi = hi.max(b);
                // The budget line only when it is near the data: a 64 GiB budget
                // would flatten a 256 MiB curve into the floor.
                if let Some(budget) = r.run.meta().and_then(|m| m.budget_bytes) {
                    let top = b + budget as f64 / MIB;
                    if top <= hi + (hi - b).max(1.0) {
                        hi = hi.max(top);
                    }
                }
            }
        }
        if !lo.is_finite() || !hi.is_finite() {
            return Axes {
                dur_ns: dur,
                skip_ns: 0,
                lo: 0.0,
                hi: 1.0,
            };
        }
        let span = (hi - lo).max(1.0);
        let skip = match runs {
            [one] => setup_ns(one, dur),
            _ => 0,
        };
        Axes {
            dur_ns: dur - skip,
            skip_ns: skip,
            lo: (lo - span * 0.05).max(0.0),
            hi: hi + span * 0.08,
        }
    }

    /// Where the panels' time axis starts, in the run's time (ns since the
    /// epoch of its clock).
    pub fn origin(&self, run: &RunState) -> u64 {
        run.t0() + self.skip_ns
    }

    /// Column (0..width) of `t_ns` after `t0` (the axis's [`Axes::origin`]).
    pub fn col(&self, t0: u64, t: u64, width: usize) -> usize {
        if width == 0 {
            return 0;
        }
        // f64, not integer division: this runs once per reading per frame.
        let c = t.saturating_sub(t0) as f64 * width as f64 / self.dur_ns.max(1) as f64;
        (c as usize).min(width - 1)
    }
}

pub fn fmt_mib(bytes: f64) -> String {
    let mib = bytes / MIB;
    if mib.abs() >= 10_240.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

pub fn fmt_signed_mib(bytes: i64) -> String {
    let s = fmt_mib(bytes as f64);
    if bytes > 0 { format!("+{s}") } else { s }
}

/// `850 ms`, `1.2 s`, `35 µs`.
pub fn fmt_dur(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 1.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.0} µs", ns as f64 / 1e3)
    }
}

pub use crate::text::fit;

/// How much of a lab run's axis its setup takes away from the lesson: the
/// time before its first line that gives the device work, less a twentieth
/// of the rest as a margin, when that setup took over a third of the run;
/// else 0. One run alone: two compared share an axis from their starts.
fn setup_ns(run: &RunState, dur: u64) -> u64 {
    use crate::lab::Api;
    if run.run.meta().is_none_or(|m| m.lab.is_none()) {
        return 0;
    }
    let t0 = run.t0();
    let Some(first) = run
        .run
        .calls()
        .iter()
        .find(|c| c.api.api().is_some_and(Api::queues_device_work))
    else {
        return 0;
    };
    let setup = first.begin_ns.saturating_sub(t0);
    if setup * 3 <= dur {
        return 0;
    }
    setup.saturating_sub((dur - setup.min(dur)) / 20)
}

/// The words a panel's title adds when its axis starts after the run's start.
pub fn skipped(axes: &Axes) -> String {
    if axes.skip_ns == 0 {
        return String::new();
    }
    format!(" · from {}, after the setup", fmt_dur(axes.skip_ns))
}

/// The time axis under a chart or lanes: its start (`0`, or where a lab's
/// setup ended), the middle and the end, each from the run's start.
pub fn axis_labels(axes: &Axes, width: usize) -> String {
    let (skip, dur_ns) = (axes.skip_ns, axes.dur_ns);
    let mut row = vec![' '; width];
    let mut put = |at: usize, text: &str| {
        let n = text.chars().count();
        let at = at.min(width.saturating_sub(n));
        for (i, c) in text.chars().enumerate() {
            if let Some(slot) = row.get_mut(at + i) {
                *slot = c;
            }
        }
    };
    put(
        0,
        &if skip == 0 {
            "0".to_string()
        } else {
            fmt_dur(skip)
        },
    );
    if width >= 24 {
        let mid = fmt_dur(skip + dur_ns / 2);
        put((width / 2).saturating_sub(mid.chars().count() / 2), &mid);
    }
    if width >= 8 {
        let end = fmt_dur(skip + dur_ns);
        put(width, &end);
    }
    row.into_iter().collect()
}

/// The inner area of a panel, or `None` when nothing fits in it.
pub fn usable(inner: Rect) -> Option<Rect> {
    (inner.width > 0 && inner.height > 0).then_some(inner)
}
