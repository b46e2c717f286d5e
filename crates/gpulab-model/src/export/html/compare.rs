//! `export --html OUT FILE --compare OTHER`: one page of two recordings, two
//! variants of a lab side by side (or one variant on two devices): their
//! facts in two columns, each run's memory chart and timeline on one time
//! scale under one zoom and scrub, and each claim's verdict in both, beside
//! the lab's lesson. The verdicts are the recorded ones.

use std::fmt::Write;

use super::{Extras, Page, charts, esc, foot, head, teaching};
use crate::report::{Summary, fmt_value, memory_label, program_memory_label};
use crate::trace::ClaimVerdict;
use crate::units::mib;

/// The compare page of `a` and `b` (read with [`Page::read_pair`]).
pub fn compare(a: &Page, b: &Page, extras: Extras) -> String {
    let (sa, sb) = (Summary::of(&a.drawn.run), Summary::of(&b.drawn.run));
    let (na, nb) = (name(&a.drawn.run, &sa), name(&b.drawn.run, &sb));
    let heading = if sa.lab == sb.lab && !sa.lab.is_empty() {
        format!("{}: {} and {}", sa.lab, sa.variant, sb.variant)
    } else {
        format!("{na} and {nb}")
    };
    let mut out = head(&heading);
    if !sa.title.is_empty() {
        let _ = writeln!(out, r#"<p class="sub">{}</p>"#, esc(&sa.title));
    }
    facts(
        &mut out,
        [&sa, &sb],
        [&na, &nb],
        [&a.drawn.run, &b.drawn.run],
    );
    out.push_str("<h2>Memory and timeline</h2>\n");
    charts(
        &mut out,
        &[(&a.drawn, &a.axis, &na), (&b.drawn, &b.axis, &nb)],
    );
    claims(&mut out, [&sa, &sb], [&na, &nb]);
    if let Some(t) = extras.teaching {
        teaching(&mut out, t);
    }
    foot(&mut out, &[&a.drawn.run, &b.drawn.run]);
    out
}

/// What a run is called on the page: its variant, and its device where the
/// two differ the reader sees that in the facts.
fn name(run: &crate::run::Run, s: &Summary) -> String {
    match run.meta().and_then(|m| m.watch.as_ref()) {
        Some(w) => w.command.join(" "),
        None if s.variant.is_empty() => s.device.clone(),
        None => s.variant.clone(),
    }
}

fn facts(out: &mut String, s: [&Summary; 2], names: [&str; 2], runs: [&crate::run::Run; 2]) {
    let memory = |i: usize| {
        let watched = runs[i].meta().is_some_and(|m| m.watch.is_some());
        if watched {
            program_memory_label(s[i].memory_source)
        } else {
            memory_label(s[i].memory_source)
        }
        .to_string()
    };
    let rows: Vec<(&str, [String; 2])> = vec![
        ("device", [s[0].device.clone(), s[1].device.clone()]),
        ("driver", [s[0].driver.clone(), s[1].driver.clone()]),
        ("memory", [memory(0), memory(1)]),
        ("ended", [s[0].status.clone(), s[1].status.clone()]),
        (
            "duration",
            [0, 1].map(|i| {
                s[i].duration_ms
                    .map_or("-".into(), |d| format!("{d:.1} ms"))
            }),
        ),
        (
            "peak above baseline",
            [0, 1].map(|i| {
                s[i].peak_above_baseline_bytes
                    .map_or("-".into(), |p| format!("{:.1} MiB", mib(p)))
            }),
        ),
        (
            "parameters",
            [0, 1].map(|i| {
                s[i].params
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
        ),
    ];
    let _ = writeln!(
        out,
        "<table class=\"facts\"><thead><tr><th></th><th>{}</th><th>{}</th></tr></thead><tbody>",
        esc(names[0]),
        esc(names[1])
    );
    for (k, [x, y]) in &rows {
        let _ = writeln!(
            out,
            "<tr><th>{k}</th><td>{}</td><td>{}</td></tr>",
            esc(x),
            esc(y)
        );
    }
    out.push_str("</tbody></table>\n");
}

/// Each claim of either run, its verdict in each beside the lesson.
fn claims(out: &mut String, s: [&Summary; 2], names: [&str; 2]) {
    let mut order: Vec<&str> = Vec::new();
    for c in s[0].claims.iter().chain(&s[1].claims) {
        if !order.contains(&c.name.as_str()) {
            order.push(&c.name);
        }
    }
    if order.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h2>Claims</h2>\n<table class=\"claims\"><thead><tr><th>claim</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        esc(names[0]),
        esc(names[1])
    );
    for name in order {
        let cell = |i: usize| match s[i].claims.iter().find(|c| c.name == name) {
            Some(c) => verdict_cell(c),
            None => "<td>— (does not apply)</td>".to_string(),
        };
        let text = s
            .iter()
            .flat_map(|x| &x.claims)
            .find(|c| c.name == name)
            .map_or(String::new(), |c| c.text.clone());
        let _ = writeln!(
            out,
            "<tr><td><b>{}</b><br>{}</td>{}{}</tr>",
            esc(name),
            esc(&text),
            cell(0),
            cell(1)
        );
    }
    out.push_str("</tbody></table>\n");
}

fn verdict_cell(c: &ClaimVerdict) -> String {
    let class = super::lesson_class(c);
    let lesson = c
        .lesson()
        .map_or(String::new(), |l| format!("<br>{}", l.label()));
    let values: Vec<String> = c
        .values
        .iter()
        .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
        .collect();
    format!(
        "<td><span class=\"verdict {class}\">{} {}</span>{lesson}<br><small>{}</small></td>",
        c.mark(),
        c.verdict.label(),
        esc(&values.join(", "))
    )
}
