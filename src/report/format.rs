//! Small formatting rules shared by the text and Markdown reports.

use crate::trace::{MemorySource, Verdict};

/// Rows that say the same thing, once each with how many there were (the first
/// row of a group stands for it), in first-seen order.
pub(super) fn group<T, K: PartialEq>(rows: &[T], key: impl Fn(&T) -> K) -> Vec<(&T, usize)> {
    let mut out: Vec<(K, &T, usize)> = Vec::new();
    for r in rows {
        let k = key(r);
        match out.iter_mut().find(|(g, _, _)| *g == k) {
            Some((_, _, n)) => *n += 1,
            None => out.push((k, r, 1)),
        }
    }
    out.into_iter().map(|(_, r, n)| (r, n)).collect()
}

pub(super) fn verdict_mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Holds => "✓",
        Verdict::DoesNotHold => "✗",
        Verdict::Inconclusive => "?",
    }
}

pub(crate) fn fmt_value(v: f64) -> String {
    if v.is_infinite() {
        "never".into()
    } else if v == v.trunc() && v.abs() < 1e9 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// `text` safe to print on a terminal: control characters other than newline and
/// tab are written out (`\u{1b}`), so a recording or lab file (shared files) cannot
/// clear the screen, set the title or hide the cursor through a report.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

pub(crate) fn fmt_delta(d: Option<f64>) -> String {
    match d {
        Some(d) if d.abs() < 0.05 => "0".into(),
        Some(d) => format!("{d:+.1}"),
        None => "-".into(),
    }
}

pub(crate) fn memory_label(source: MemorySource) -> &'static str {
    match source {
        MemorySource::Nvml => "device memory (NVML)",
        MemorySource::Rss => {
            "host memory of the worker (CPU OpenCL device: its \"device memory\" is host RAM)"
        }
        MemorySource::Unavailable => "no memory telemetry",
    }
}
