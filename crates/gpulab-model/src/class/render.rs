//! The class's table as Markdown (class.md) and as one page for the projector
//! (class.html): large type, one row per claim, the most missed first.

use std::fmt::Write as _;

use super::{Class, ClassRow};
use crate::export::esc;
use crate::export::html::head;

/// "12 holds · 3 does not hold · 1 not sure · 2 none".
fn predicted(r: &ClassRow) -> String {
    let p = &r.predicted;
    let mut out = vec![
        format!("{} holds", p.holds),
        format!("{} does not hold", p.does_not_hold),
    ];
    if p.not_sure > 0 {
        out.push(format!("{} not sure", p.not_sure));
    }
    if p.none > 0 {
        out.push(format!("{} none", p.none));
    }
    out.join(" · ")
}

/// "NVIDIA H200: 9 holds; cpu-…: 2 holds, 1 inconclusive".
fn showed(r: &ClassRow) -> String {
    r.devices
        .iter()
        .map(|d| {
            let mut parts = Vec::new();
            for (n, word) in [
                (d.holds, "holds"),
                (d.does_not_hold, "does not hold"),
                (d.inconclusive, "inconclusive"),
            ] {
                if n > 0 {
                    parts.push(format!("{n} {word}"));
                }
            }
            if d.loaded > 0 {
                parts.push(format!("{} on a loaded host", d.loaded));
            }
            format!("{}: {}", d.device, parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// "7 of 12 (58%)", or "—" where nothing was judged.
fn right(r: &ClassRow) -> String {
    match r.right_share {
        Some(s) => format!("{} of {} ({:.0}%)", r.right, r.judged, s * 100.0),
        None => "—".into(),
    }
}

/// "5 of 8 (62%)".
fn within(e: &super::EstimateRow) -> String {
    format!(
        "{} of {} ({:.0}%)",
        e.within,
        e.estimates,
        e.within as f64 * 100.0 / e.estimates.max(1) as f64
    )
}

/// "0.004 to 0.012", one figure when the runs agree, and how many measured
/// nothing.
fn measured(e: &super::EstimateRow) -> String {
    let range = match (e.measured_lo, e.measured_hi) {
        (Some(lo), Some(hi)) if lo == hi => crate::report::fmt_value(lo),
        (Some(lo), Some(hi)) => format!(
            "{} to {}",
            crate::report::fmt_value(lo),
            crate::report::fmt_value(hi)
        ),
        _ => "—".into(),
    };
    match e.unmeasured {
        0 => range,
        n => format!("{range} ({n} not measured)"),
    }
}

fn lesson(r: &ClassRow) -> &'static str {
    r.lesson.map_or("—", |l| l.label())
}

/// What the table is of, in words.
fn summary(c: &Class) -> String {
    format!(
        "{} runs, {} with predictions; set aside: {}",
        c.runs,
        c.predicting_runs,
        c.set_aside.len()
    )
}

pub fn markdown(c: &Class, title: &str) -> String {
    let mut o = format!("# {title}\n\n{}.\n\n", summary(c));
    o.push_str(
        "| lab · variant · claim | predicted | the devices showed | the lesson | right |\n\
         |---|---|---|---|---|\n",
    );
    for r in &c.rows {
        let _ = writeln!(
            o,
            "| {} · {} · {}: {} | {} | {} | {} | {} |",
            r.lab,
            r.variant,
            r.claim,
            r.text.replace('|', "\\|"),
            predicted(r),
            showed(r),
            lesson(r),
            right(r)
        );
    }
    if !c.estimates.is_empty() {
        o.push_str(
            "\n| lab · variant · value | ranges predicted | within their range | measured |\n\
             |---|---|---|---|\n",
        );
        for e in &c.estimates {
            let _ = writeln!(
                o,
                "| {} · {} · `{}` | {} | {} | {} |",
                e.lab,
                e.variant,
                e.value,
                e.estimates,
                within(e),
                measured(e)
            );
        }
    }
    if !c.set_aside.is_empty() {
        o.push_str("\nSet aside:\n\n");
        for s in &c.set_aside {
            let _ = writeln!(o, "- `{}`: {}", s.file, s.why);
        }
    }
    o
}

pub fn html(c: &Class, title: &str) -> String {
    let mut o = head(title);
    let _ = writeln!(
        o,
        "<p class=\"sub\">{}. Made {} on {} by gpulab {}.</p>",
        esc(&summary(c)),
        esc(c.recorded.at.as_deref().unwrap_or("at an unknown time")),
        esc(&c.recorded.host),
        esc(&c.recorded.gpulab_version),
    );
    // Large enough to read from the back of a room.
    o.push_str(
        "<style>table.class{font-size:1.4em;border-collapse:collapse}\
         table.class td,table.class th{padding:.4em .7em;border-bottom:1px solid #ccc;\
         text-align:left;vertical-align:top}.share{font-weight:bold;white-space:nowrap}</style>\n\
         <table class=\"class\"><thead><tr><th>lab · variant · claim</th><th>predicted</th>\
         <th>the devices showed</th><th>the lesson</th><th>right</th></tr></thead><tbody>\n",
    );
    for r in &c.rows {
        let _ = writeln!(
            o,
            "<tr><td><b>{} · {} · {}</b><br>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"share\">{}</td></tr>",
            esc(&r.lab),
            esc(&r.variant),
            esc(&r.claim),
            esc(&r.text),
            esc(&predicted(r)),
            esc(&showed(r)),
            esc(lesson(r)),
            esc(&right(r))
        );
    }
    o.push_str("</tbody></table>\n");
    if !c.estimates.is_empty() {
        o.push_str(
            "<table class=\"class\"><thead><tr><th>lab · variant · value</th>\
             <th>ranges predicted</th><th>within their range</th><th>measured</th></tr></thead><tbody>\n",
        );
        for e in &c.estimates {
            let _ = writeln!(
                o,
                "<tr><td><b>{} · {}</b> <code>{}</code></td><td>{}</td><td class=\"share\">{}</td><td>{}</td></tr>",
                esc(&e.lab),
                esc(&e.variant),
                esc(&e.value),
                e.estimates,
                esc(&within(e)),
                esc(&measured(e))
            );
        }
        o.push_str("</tbody></table>\n");
    }
    if !c.set_aside.is_empty() {
        o.push_str("<h2>Set aside</h2>\n<ul>\n");
        for s in &c.set_aside {
            let _ = writeln!(o, "<li><code>{}</code>: {}</li>", esc(&s.file), esc(&s.why));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</body></html>\n");
    o
}
