//! A card or a matrix as Markdown: the devices, then one table of claims ×
//! devices (the rows that differ first, under their own heading), each cell a
//! link to the numbers that decided it, listed below.

use std::fmt::Write as _;

use super::link;
use super::{Cell, DEVICE_HEADS, Matrix, Row, column_label, device_cells};
use crate::report::{fmt_value, md_code, md_text};

/// `title` heads it: `gpulab card: host` or `gpulab matrix: 3 devices`.
pub fn markdown(m: &Matrix, title: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {}\n", md_text(title, false));
    let _ = writeln!(
        o,
        "{} claims of {} lab variants on {} devices; {} differ between devices. \
         Made {} on {} by gpulab {}.\n",
        m.rows.len(),
        variants(m),
        m.columns.len(),
        m.differing(),
        md_text(
            m.recorded.at.as_deref().unwrap_or("at an unknown time"),
            false
        ),
        md_text(&m.recorded.host, false),
        md_text(&m.recorded.gpulab_version, false),
    );
    let _ = writeln!(o, "| {} |", DEVICE_HEADS.join(" | "));
    let _ = writeln!(o, "|{}", "---|".repeat(DEVICE_HEADS.len()));
    for c in &m.columns {
        let cells = device_cells(m, c).map(|t| cell_text(&t));
        let _ = writeln!(o, "| {} |", cells.join(" | "));
    }
    for p in &m.problems {
        let _ = writeln!(o, "\n> **not merged:** {}", md_text(p, false));
    }
    if m.columns.len() > 1 {
        for (heading, rows) in groups(m) {
            let _ = writeln!(o, "\n## {heading} ({})\n", rows.len());
            table(m, &rows, &mut o);
        }
    } else {
        let _ = writeln!(o, "\n## Claims\n");
        let all: Vec<(usize, &Row)> = m.rows.iter().enumerate().collect();
        table(m, &all, &mut o);
    }
    let _ = writeln!(
        o,
        "\n## Numbers\n\nWhat each verdict was judged from, as the run measured it.\n"
    );
    for (i, row) in m.rows.iter().enumerate() {
        for (j, cell) in row.cells.iter().enumerate() {
            let Some(cell) = cell else { continue };
            numbers(m, row, cell, (i, j), &mut o);
        }
    }
    o
}

/// The rows of a matrix of several devices, under their headings: those whose
/// verdicts differ, those the devices agree on, those one device ran.
pub(super) fn groups(m: &Matrix) -> [(&'static str, Vec<(usize, &Row)>); 3] {
    let rows = || m.rows.iter().enumerate();
    [
        (
            "Claims whose verdicts differ",
            rows().filter(|(_, r)| r.differs).collect(),
        ),
        (
            "Claims on which the devices agree",
            rows()
                .filter(|(_, r)| !r.differs && r.judged_on > 1)
                .collect(),
        ),
        (
            "Claims only one device ran",
            rows().filter(|(_, r)| r.judged_on < 2).collect(),
        ),
    ]
}

/// How many lab variants the rows come from.
fn variants(m: &Matrix) -> usize {
    let mut seen: Vec<(&str, &str)> = m
        .rows
        .iter()
        .map(|r| (r.lab.as_str(), r.variant.as_str()))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

fn table(m: &Matrix, rows: &[(usize, &Row)], o: &mut String) {
    if rows.is_empty() {
        let _ = writeln!(o, "None.");
        return;
    }
    let heads: Vec<String> = m
        .columns
        .iter()
        .map(|c| cell_text(&column_label(c)))
        .collect();
    let _ = writeln!(o, "| lab | variant | claim | {} |", heads.join(" | "));
    let _ = writeln!(o, "|---|---|---|{}", "---|".repeat(heads.len()));
    for (i, row) in rows {
        let cells: Vec<String> = row
            .cells
            .iter()
            .enumerate()
            .map(|(j, c)| match c {
                Some(c) => format!("[{}](#n-{i}-{j})", said(c)),
                None => "—".to_string(),
            })
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            md_code(&row.lab, true),
            md_code(&row.variant, true),
            cell_text(&row.claim),
            cells.join(" | ")
        );
    }
}

/// The verdict's mark and words, and how it stands to the lesson.
pub(super) fn said(c: &Cell) -> String {
    let lesson = c
        .claim
        .lesson()
        .map(|l| format!(" ({})", l.label()))
        .unwrap_or_default();
    let loaded = if c.loaded.is_some() {
        " · on a loaded host"
    } else {
        ""
    };
    format!("{} {}{lesson}{loaded}", c.claim.mark(), c.verdict.label())
}

/// The values a claim was judged from, `name = value, …` with each name as
/// `code` writes it; `no values` when it read none.
pub(super) fn values_said(cell: &Cell, code: impl Fn(&str) -> String) -> String {
    let values: Vec<String> = cell
        .claim
        .values
        .iter()
        .map(|(k, v)| format!("{} = {}", code(k), fmt_value(*v)))
        .collect();
    if values.is_empty() {
        "no values".to_string()
    } else {
        values.join(", ")
    }
}

fn numbers(m: &Matrix, row: &Row, cell: &Cell, (i, j): (usize, usize), o: &mut String) {
    let _ = writeln!(
        o,
        "- <a id=\"n-{i}-{j}\"></a>**{} · {} · {}** on {}: {} — {} with {}{}{}{}",
        md_text(&row.lab, false),
        md_text(&row.variant, false),
        md_text(&row.claim, false),
        md_text(&column_label(&m.columns[j]), false),
        said(cell),
        md_code(&cell.claim.expr, false),
        values_said(cell, |k| md_code(k, false)),
        cell.claim
            .reason
            .as_deref()
            .map(|r| format!("; why: {}", md_text(r, false)))
            .unwrap_or_default(),
        cell.loaded
            .as_deref()
            .map(|l| format!("; the host was loaded ({})", md_text(l, false)))
            .unwrap_or_default(),
        cell.recording
            .as_deref()
            .and_then(link::target)
            .map(|r| format!(" ([recording]({r}))"))
            .unwrap_or_default(),
    );
}

/// Text for a table cell: shown as it is, one line.
fn cell_text(text: &str) -> String {
    md_text(text, true)
}
