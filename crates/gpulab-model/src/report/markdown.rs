//! The Markdown report, for bug reports and notes.

use std::fmt::Write as _;

use super::Summary;
use super::format::{counts_said, fmt_delta, fmt_value, md_code, md_text, memory_label};
use crate::units::{mib, signed_mib};

/// Markdown, for bug reports and notes.
pub fn markdown(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "## {} — {} ({})\n",
        s.lab,
        s.title,
        md_code(&s.variant, false)
    );
    let _ = writeln!(
        o,
        "- device: {} · {} · driver {}",
        s.device, s.platform, s.driver
    );
    let _ = writeln!(o, "- memory: {}", memory_label(s.memory_source));
    let p: Vec<String> = s
        .params
        .iter()
        .map(|(k, v)| md_code(&format!("{k}={}", fmt_value(*v)), false))
        .collect();
    if !p.is_empty() {
        let _ = writeln!(o, "- params: {}", p.join(" "));
    }
    let _ = writeln!(o, "- status: {}", s.status);
    if let Some(f) = &s.finding {
        let _ = writeln!(o, "- finding: {}", f.said);
    }
    if let Some(r) = &s.ran_out {
        let used = match (r.device_used_bytes.map(mib), r.device_total_bytes.map(mib)) {
            (Some(u), Some(t)) => format!("{u:.1} of {t:.1} MiB in use"),
            _ => "memory not measured".into(),
        };
        let held = counts_said(&r.live);
        let _ = writeln!(
            o,
            "- ran out: {} returned {} with {used}; the lab held {}",
            md_code(&r.api, false),
            md_code(&r.status, false),
            if held.is_empty() { "nothing" } else { &held }
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "| line | call | result | host ms | mem Δ MiB |\n|---:|---|---|---:|---:|"
    );
    for l in &s.lines {
        let calls = if l.calls > 1 {
            format!(" ×{}", l.calls)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "| {} | {}{calls} | {} | {:.3} | {} |",
            l.line,
            md_code(&l.text, true),
            l.result,
            l.host_ms,
            fmt_delta(l.mem_delta_bytes.map(signed_mib))
        );
    }
    if !s.claims.is_empty() {
        claims(s, &mut o);
    }
    let counts: Vec<String> = s
        .live_at_end
        .iter()
        .map(|(k, n)| format!("{} {n}", k.plural()))
        .collect();
    let _ = writeln!(o, "\nLive at end: {}.", counts.join(", "));
    o
}

/// The claims' table, each verdict beside its prediction and the lesson,
/// then the ranges predicted and the host's load.
fn claims(s: &Summary, o: &mut String) {
    let _ = writeln!(
        o,
        "\n| claim | verdict | lesson | expression | values |\n|---|---|---|---|---|"
    );
    for c in &s.claims {
        let vals: Vec<String> = c
            .values
            .iter()
            .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
            .collect();
        let verdict = match &c.reason {
            Some(r) => format!("{} ({r})", c.verdict.label()),
            None => c.verdict.label().to_string(),
        };
        let lesson = c.lesson().map_or("—", |l| l.label());
        let verdict = match s.predicted.get(&c.name) {
            Some(p) => format!("{verdict}; {}", super::prediction_line(*p, c)),
            None => verdict,
        };
        let _ = writeln!(
            o,
            "| {} | {verdict} | {lesson} | {} | {} |",
            c.name,
            md_code(&c.expr, true),
            vals.join(", ")
        );
    }
    for e in &s.estimated {
        let _ = writeln!(o, "\n{}.", md_text(&e.line(), false));
    }
    if let Some(w) = s.load.as_ref().and_then(|l| l.warning()) {
        let _ = writeln!(o, "\n**Note:** {w}.");
    }
}
