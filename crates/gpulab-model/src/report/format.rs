//! Small formatting rules shared by the text and Markdown reports.

use crate::trace::MemorySource;

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

pub(crate) fn fmt_value(v: f64) -> String {
    if v.is_infinite() {
        "never".into()
    } else if v == v.trunc() && v.abs() < 1e9 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// `text` safe to print on a terminal or in the dashboard: control characters
/// and invisible reordering characters are written out (`\u{1b}`), so a
/// recording or lab file (shared files) cannot clear the screen, set the title
/// or reorder a name through a report.
pub use gpulab_events::printable::printable;

/// Counts by kind in words, `3 buffers, 1 context`; empty when there are none.
pub(crate) fn counts_said(
    counts: &std::collections::BTreeMap<gpulab_lab::ObjKind, usize>,
) -> String {
    let said: Vec<String> = counts
        .iter()
        .map(|(k, n)| format!("{n} {}", k.counted(*n)))
        .collect();
    said.join(", ")
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

/// What the memory curve of a watched program reads: not a lab's worker.
pub(crate) fn program_memory_label(source: MemorySource) -> &'static str {
    match source {
        MemorySource::Nvml => {
            "device memory of the GPU (NVML), against its level before the program started"
        }
        MemorySource::Rss => "resident host memory of the program's processes (no NVIDIA GPU read)",
        MemorySource::Unavailable => "no memory telemetry",
    }
}

/// `text` as a Markdown code span whatever it holds: fenced with one backtick
/// more than its longest run of them (CommonMark), padded where it starts or
/// ends with one, and in a table cell with `|` escaped (GFM splits cells on it
/// even inside code). Command lines and API names come from the program.
pub(crate) fn md_code(text: &str, in_table: bool) -> String {
    // One line, nothing that acts: a code span shows text as it is otherwise.
    let text = printable(text).replace(['\n', '\r'], " ");
    let text = text.as_str();
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    let text = if in_table {
        text.replace('|', "\\|")
    } else {
        text.to_string()
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// `text` as Markdown shows it, literally: one line, nothing that acts, the
/// characters HTML reads (`<`, `>`, `&`) as entities and every character
/// Markdown reads as markup backslash-escaped, so a name from a file others
/// made (a device called `<script>`, a host called `[x](javascript:…)`) is
/// shown, never run or linked. `in_table`: `|` too.
pub(crate) fn md_text(text: &str, in_table: bool) -> String {
    let text = printable(text);
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            '|' if in_table => out.push_str("\\|"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '#' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A table the text and the Markdown report both write, from the same cells:
/// per column its title, the width text pads it to, and whether it is
/// right-aligned (a number).
pub(crate) struct Table {
    pub columns: &'static [(&'static str, usize, bool)],
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Padded columns one space apart, the titles first; each line ends in a
    /// newline.
    pub fn text(&self) -> String {
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let padded: Vec<String> = cells
                .zip(self.columns)
                .map(|(cell, &(_, width, right))| match right {
                    true => format!("{cell:>width$}"),
                    false => format!("{cell:<width$}"),
                })
                .collect();
            padded.join(" ") + "\n"
        };
        let mut out = line(&mut self.columns.iter().map(|c| c.0));
        for row in &self.rows {
            out += &line(&mut row.iter().map(String::as_str));
        }
        out
    }

    /// A GitHub-flavoured Markdown table; cells are written as given.
    pub fn markdown(&self) -> String {
        let titles: Vec<&str> = self.columns.iter().map(|c| c.0).collect();
        let rule: Vec<&str> = self
            .columns
            .iter()
            .map(|c| if c.2 { "---:" } else { "---" })
            .collect();
        let mut out = format!("| {} |\n|{}|\n", titles.join(" | "), rule.join("|"));
        for row in &self.rows {
            out += &format!("| {} |\n", row.join(" | "));
        }
        out
    }
}

/// Ids from an agent carry the pid in their upper half; the lower half is short.
pub fn short_id(id: u64) -> String {
    format!("#{}", id & 0xffff_ffff)
}

/// A text report's frame is cut to this many characters (C++ template names
/// run to thousands); JSON and Markdown keep it whole.
pub(crate) const FRAME_WIDTH: usize = 160;
