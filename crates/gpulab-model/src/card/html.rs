//! A card or a matrix as one self-contained page, in the style of `export
//! --html`: the devices, the claims × devices table (the rows that differ
//! first), each cell coloured by how it stands to the lesson and linking the
//! numbers that decided it.

use std::fmt::Write as _;

use super::link;
use super::markdown::{groups, said, values_said};
use super::{DEVICE_HEADS, Matrix, Row, column_label, device_cells};
use crate::export::esc;
use crate::export::html::{head, lesson_class};

pub fn html(m: &Matrix, title: &str) -> String {
    let mut o = head(title);
    let _ = writeln!(
        o,
        "<p class=\"sub\">{} claims on {} devices; {} differ between devices. Made {} on {} by gpulab {}.</p>",
        m.rows.len(),
        m.columns.len(),
        m.differing(),
        esc(m.recorded.at.as_deref().unwrap_or("at an unknown time")),
        esc(&m.recorded.host),
        esc(&m.recorded.gpulab_version),
    );
    let _ = writeln!(
        o,
        "<table class=\"facts\"><thead><tr><th>{}</th></tr></thead><tbody>",
        DEVICE_HEADS.join("</th><th>")
    );
    for c in &m.columns {
        let cells = device_cells(m, c).map(|t| esc(&t));
        let _ = writeln!(o, "<tr><td>{}</td></tr>", cells.join("</td><td>"));
    }
    o.push_str("</tbody></table>\n");
    for p in &m.problems {
        let _ = writeln!(o, "<p class=\"bad\">not merged: {}</p>", esc(p));
    }
    if m.columns.len() > 1 {
        for (heading, rows) in groups(m) {
            let _ = writeln!(o, "<h2>{heading} ({})</h2>", rows.len());
            table(m, &rows, &mut o);
        }
    } else {
        o.push_str("<h2>Claims</h2>\n");
        let all: Vec<(usize, &Row)> = m.rows.iter().enumerate().collect();
        table(m, &all, &mut o);
    }
    o.push_str("<h2>Numbers</h2>\n<ul>\n");
    for (i, row) in m.rows.iter().enumerate() {
        for (j, cell) in row.cells.iter().enumerate() {
            let Some(cell) = cell else { continue };
            let _ = writeln!(
                o,
                "<li id=\"n-{i}-{j}\"><b>{} · {} · {}</b> on {}: <span class=\"{}\">{}</span> — <code>{}</code> with {}{}{}</li>",
                esc(&row.lab),
                esc(&row.variant),
                esc(&row.claim),
                esc(&column_label(&m.columns[j])),
                lesson_class(&cell.claim),
                esc(&said(cell)),
                esc(&cell.claim.expr),
                values_said(cell, |k| format!("<code>{}</code>", esc(k))),
                cell.claim
                    .reason
                    .as_deref()
                    .map(|r| format!("; why: {}", esc(r)))
                    .unwrap_or_default(),
                cell.recording
                    .as_deref()
                    .and_then(link::target)
                    .map(|r| format!(" (<a href=\"{0}\">recording</a>)", esc(&r)))
                    .unwrap_or_default(),
            );
        }
    }
    o.push_str("</ul>\n</body></html>\n");
    o
}

fn table(m: &Matrix, rows: &[(usize, &Row)], o: &mut String) {
    if rows.is_empty() {
        o.push_str("<p>None.</p>\n");
        return;
    }
    o.push_str("<table class=\"lines\"><thead><tr><th>lab</th><th>variant</th><th>claim</th>");
    for c in &m.columns {
        let _ = write!(o, "<th>{}</th>", esc(&column_label(c)));
    }
    o.push_str("</tr></thead><tbody>\n");
    for (i, row) in rows {
        let _ = write!(
            o,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td title=\"{}\">{}</td>",
            esc(&row.lab),
            esc(&row.variant),
            esc(&row.text),
            esc(&row.claim)
        );
        for (j, cell) in row.cells.iter().enumerate() {
            match cell {
                Some(c) => {
                    let _ = write!(
                        o,
                        "<td><a class=\"{}\" href=\"#n-{i}-{j}\">{}</a></td>",
                        lesson_class(&c.claim),
                        esc(&said(c))
                    );
                }
                None => o.push_str("<td>—</td>"),
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table>\n");
}
