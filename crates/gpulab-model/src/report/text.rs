//! The plain-text report, and several variants side by side.

use std::fmt::Write as _;

use super::format::{counts_said, fmt_delta, fmt_value, group, memory_label};
use super::{DestroyRow, LeakRow, LineRow, MIB, Summary, cuda};
use crate::trace::{ClaimVerdict, Lesson, MemorySource};
use crate::units::{mib, signed_mib};

/// Spans listed in full before the rest are counted in one line.
const SPANS_SHOWN: usize = 20;

/// Plain text, for a terminal.
pub fn text(s: &Summary) -> String {
    let mut o = String::new();
    header(s, &mut o);
    line_table(&s.lines, &mut o);
    cuda::text(&s.pool, &mut o);
    spans(s, &mut o);
    objects_at_end(s, &mut o);
    memory(s, &mut o);
    for n in &s.notes {
        let _ = writeln!(o, "note     {n}");
    }
    ran_out(s, &mut o);
    if let Some(f) = &s.finding {
        let _ = writeln!(o, "\nfinding  {}", f.said);
    }
    claims(s, &mut o);
    let _ = writeln!(
        o,
        "\nstatus   {}{}",
        s.status,
        s.duration_ms
            .filter(|_| s.outcome != super::Outcome::TimedOut)
            .map(|d| format!(" in {:.3} s", d / 1e3))
            .unwrap_or_default()
    );
    o
}

/// What the run had measured when a call failed for want of memory or
/// resources, and which of them the numbers say ran out.
fn ran_out(s: &Summary, o: &mut String) {
    let Some(r) = &s.ran_out else { return };
    let at = r.line.map(|l| format!(" at line {l}")).unwrap_or_default();
    let _ = writeln!(o, "\nran out  {} returned {}{at}", r.api, r.status);
    // On a CPU device the figure is the worker's RSS against the host's RAM.
    let (what, of) = if s.memory_source == MemorySource::Rss {
        ("memory (the worker's RSS)", "host RAM")
    } else {
        ("device memory", "the device's")
    };
    let free = match (r.device_used_bytes.map(mib), r.device_total_bytes.map(mib)) {
        (Some(used), Some(total)) if total > 0.0 => {
            let free = total - used;
            let _ = writeln!(
                o,
                "         {what}: {used:.1} MiB in use of {of} {total:.1} MiB ({:.0}% free)",
                100.0 * free / total
            );
            Some(free / total)
        }
        _ => {
            let _ = writeln!(o, "         {what}: not measured in this run");
            None
        }
    };
    let held = counts_said(&r.live);
    if !held.is_empty() {
        let _ = writeln!(o, "         the lab held: {held}");
    }
    let pending = counts_said(&r.not_yet_destroyed);
    if !pending.is_empty() {
        let _ = writeln!(
            o,
            "         released by the lab, not yet destroyed by the driver: {pending}"
        );
    }
    let why = match free {
        Some(f) if f >= 0.10 => format!(
            "{what} was not what ran out: a limit on objects or on other resources was \
             reached first"
        ),
        Some(_) => format!("{what} was nearly full"),
        None => format!("whether {what} was full is not known here"),
    };
    let _ = writeln!(o, "         {why}");
}

/// The lab, the device, the memory source and the parameters.
fn header(s: &Summary, o: &mut String) {
    let _ = writeln!(o, "{} — {} [{}]", s.lab, s.title, s.variant);
    let _ = writeln!(
        o,
        "device   {} · {} · driver {}",
        s.device, s.platform, s.driver
    );
    let _ = writeln!(o, "memory   {}", memory_label(s.memory_source));
    if !s.params.is_empty() {
        let p: Vec<String> = s
            .params
            .iter()
            .map(|(k, v)| format!("{k}={}", fmt_value(*v)))
            .collect();
        let _ = writeln!(o, "params   {}", p.join(" "));
    }
}

/// One row per script line: its call, result, host time and memory change.
fn line_table(lines: &[LineRow], o: &mut String) {
    let width = lines
        .iter()
        .map(|l| l.text.chars().count())
        .max()
        .unwrap_or(10)
        .clamp(10, 60);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:>5}  {:<width$}  {:<22} {:>10}  {:>10}",
        "line", "call", "result", "host ms", "mem Δ MiB"
    );
    for l in lines {
        line_row(l, width, o);
    }
}

fn line_row(l: &LineRow, width: usize, o: &mut String) {
    let mut text: String = l.text.chars().take(width).collect();
    if l.calls > 1 {
        text = format!("{text} ×{}", l.calls).chars().take(width).collect();
    }
    let host = if l.calls == 0 {
        "-".into()
    } else {
        format!("{:.3}", l.host_ms)
    };
    let _ = writeln!(
        o,
        "{:>5}  {:<width$}  {:<22} {:>10}  {:>10}{}",
        l.line,
        text,
        l.result,
        host,
        fmt_delta(l.mem_delta_bytes.map(signed_mib)),
        l.tag
            .as_ref()
            .map(|t| format!("  [{t}]"))
            .unwrap_or_default()
    );
}

/// The first device spans, with a count of the rest.
fn spans(s: &Summary, o: &mut String) {
    if s.spans.is_empty() {
        return;
    }
    let _ = writeln!(o, "\ndevice spans (ms from the start of the run)");
    for sp in s.spans.iter().take(SPANS_SHOWN) {
        let _ = writeln!(
            o,
            "  {:<6} {:<6} line {:<4} {:>9.3} → {:>9.3}  ({:.3} ms)",
            sp.queue,
            sp.name,
            sp.line.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
            sp.begin_ms,
            sp.end_ms,
            sp.duration_ms
        );
    }
    let all = s.spans.len() as u64 + s.spans_not_listed;
    if all > SPANS_SHOWN as u64 {
        let _ = writeln!(o, "  … {} more", all - SPANS_SHOWN as u64);
    }
}

/// Live counts at the end, then the leaked and the driver-destroyed objects.
fn objects_at_end(s: &Summary, o: &mut String) {
    let counts: Vec<String> = s
        .live_at_end
        .iter()
        .map(|(k, n)| format!("{} {n}", k.plural()))
        .collect();
    let _ = writeln!(o, "\nlive at end  {}", counts.join(" · "));
    for (l, n) in group(&s.leaked, |l| {
        (
            l.handle.clone(),
            l.kind,
            l.forgotten,
            l.releases,
            l.refcount,
        )
    }) {
        leaked(l, n, o);
    }
    let destroy_key = |d: &DestroyRow| (d.handle.clone(), d.kind, destroy_bucket(d));
    for (d, n) in group(&s.destroyed, destroy_key) {
        destroyed(d, n, o);
    }
}

/// ` ×n` after a row that stands for `n` alike, nothing for one.
fn times(n: usize) -> String {
    if n > 1 {
        format!(" ×{n}")
    } else {
        String::new()
    }
}

fn leaked(l: &LeakRow, n: usize, o: &mut String) {
    let why = if l.forgotten {
        "forgotten on purpose (`forget`)".to_string()
    } else if l.releases > 0 {
        format!(
            "released {}, yet {} reference{} still held (retained more often than released)",
            match l.releases {
                1 => "once".to_string(),
                n => format!("{n} times"),
            },
            l.refcount,
            if l.refcount == 1 { "" } else { "s" }
        )
    } else {
        "never released".to_string()
    };
    let _ = writeln!(
        o,
        "  leaked {}{} ({}, {:.1} MiB each): {why}",
        l.handle,
        times(n),
        l.kind.as_str(),
        l.bytes as f64 / MIB
    );
}

/// Groups destructions as `destroyed` words them: never, during the release, or after it.
fn destroy_bucket(d: &DestroyRow) -> u8 {
    match d.after_release_ms {
        None => 0,
        Some(ms) if ms <= 0.0 => 1,
        Some(_) => 2,
    }
}

fn destroyed(d: &DestroyRow, n: usize, o: &mut String) {
    let when = match d.after_release_ms {
        None => "never, while the worker lived: something still held it".to_string(),
        Some(ms) if ms <= 0.0 => "during its release call".to_string(),
        Some(ms) => match (&d.during, d.after_last_line) {
            (Some(during), _) => format!("{ms:.3} ms after its release, during {during}"),
            (None, true) => format!("{ms:.3} ms after its release, after the script's last line"),
            (None, false) => format!("{ms:.3} ms after its release"),
        },
    };
    let _ = writeln!(
        o,
        "  {} {}{} destroyed by the driver {when}",
        d.kind.as_str(),
        d.handle,
        times(n)
    );
}

/// Baseline, peak, and what came back after the worker exited.
fn memory(s: &Summary, o: &mut String) {
    let _ = writeln!(
        o,
        "\nmemory   baseline {}  peak {}  after the worker exited {}",
        s.baseline_bytes
            .map(|b| format!("{:.1} MiB", mib(b)))
            .unwrap_or_else(|| "-".into()),
        s.peak_above_baseline_bytes
            .map(|b| format!("+{:.1} MiB", mib(b)))
            .unwrap_or_else(|| "-".into()),
        s.after_exit_bytes
            .map(signed_mib)
            .map(|b| {
                let against = s.after_exit_against.as_deref().unwrap_or("the start");
                if b <= 4.0 {
                    format!("back ({b:+.1} MiB vs {against})")
                } else {
                    format!("{b:+.1} MiB vs {against}: not all of it came back")
                }
            })
            .unwrap_or_else(|| "-".into()),
    );
}

/// Each claim's verdict, its expression with the measured values, and why.
fn claims(s: &Summary, o: &mut String) {
    if s.claims.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nclaims (on this device and driver)");
    if let Some(w) = s.load.as_ref().and_then(|l| l.warning()) {
        let _ = writeln!(o, "  ! {w}");
    }
    for c in &s.claims {
        let lesson = c
            .lesson()
            .map(|l| format!(" ({})", l.label()))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  {} {}{lesson} — {}: {}",
            c.mark(),
            c.verdict.label(),
            c.name,
            c.text
        );
        if let Some(p) = s.predicted.get(&c.name) {
            let _ = writeln!(o, "      {}", super::prediction_line(*p, c));
        }
        let vals: Vec<String> = c
            .values
            .iter()
            .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
            .collect();
        let _ = writeln!(o, "      {}    {}", c.expr, vals.join(", "));
        if let Some(r) = &c.reason {
            let _ = writeln!(o, "      why: {r}");
        }
    }
    for e in &s.estimated {
        let _ = writeln!(o, "  {}", e.line());
    }
}

/// Several variants of one lab, one column each.
pub fn side_by_side(summaries: &[Summary]) -> String {
    let mut o = String::new();
    if summaries.is_empty() {
        return o;
    }
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |label: &str, cells: Vec<String>| rows.push((label.to_string(), cells));
    row(
        "variant",
        summaries.iter().map(|s| s.variant.clone()).collect(),
    );
    row(
        "status",
        summaries.iter().map(|s| s.status.clone()).collect(),
    );
    row(
        "duration ms",
        summaries
            .iter()
            .map(|s| s.duration_ms.map(|d| format!("{d:.1}")).unwrap_or_default())
            .collect(),
    );
    row(
        "peak MiB above baseline",
        summaries
            .iter()
            .map(|s| {
                s.peak_above_baseline_bytes
                    .map(|d| format!("{:.1}", mib(d)))
                    .unwrap_or_default()
            })
            .collect(),
    );
    let mut tags: Vec<String> = Vec::new();
    for s in summaries {
        for l in &s.lines {
            if let Some(t) = &l.tag
                && !tags.contains(t)
            {
                tags.push(t.clone());
            }
        }
    }
    // Named and computed as in a claim: a block's whole duration, a line's mean.
    for t in &tags {
        row(
            &format!("host_ms({t})"),
            summaries
                .iter()
                .map(|s| {
                    s.host_ms_by_tag
                        .get(t)
                        .map(|ms| format!("{ms:.3}"))
                        .unwrap_or_else(|| "-".into())
                })
                .collect(),
        );
    }
    let mut claims: Vec<String> = Vec::new();
    for s in summaries {
        for c in &s.claims {
            if !claims.contains(&c.name) {
                claims.push(c.name.clone());
            }
        }
    }
    for name in &claims {
        row(
            name,
            summaries
                .iter()
                .map(|s| {
                    s.claims
                        .iter()
                        .find(|c| &c.name == name)
                        .map(|c| format!("{} {}", c.mark(), c.verdict.label()))
                        .unwrap_or_else(|| "-".into())
                })
                .collect(),
        );
    }
    row(
        "leaked objects",
        summaries
            .iter()
            .map(|s| s.leaked.len().to_string())
            .collect(),
    );
    o.push_str(&table(rows));
    o.push_str(&lesson_key(summaries));
    o
}

/// Under a side-by-side table, what its marks mean against the lab's lesson,
/// for the marks it shows; empty when no claim states a lesson.
fn lesson_key(summaries: &[Summary]) -> String {
    let mut said: Vec<Lesson> = Vec::new();
    for l in summaries
        .iter()
        .flat_map(|s| &s.claims)
        .filter_map(ClaimVerdict::lesson)
    {
        if !said.contains(&l) {
            said.push(l);
        }
    }
    if said.is_empty() {
        return String::new();
    }
    said.sort_by_key(|l| *l as u8);
    let key: Vec<String> = said
        .iter()
        .map(|l| format!("{} {}", l.mark(), l.label()))
        .collect();
    format!("  against the lab's lesson: {}\n", key.join("; "))
}

/// Rows under their labels, a column of 24 per variant. The label column fits
/// the longest label (a long claim name or tag), never less than 28, so no
/// label runs into the first variant's column.
fn table(rows: Vec<(String, Vec<String>)>) -> String {
    let mut o = String::new();
    let width = rows
        .iter()
        .map(|(l, _)| l.chars().count() + 2)
        .max()
        .unwrap_or(0)
        .max(28);
    let col = 24;
    for (label, cells) in rows {
        let _ = write!(o, "{label:<width$}");
        for c in cells {
            let c: String = c.chars().take(col - 1).collect();
            let _ = write!(o, "{c:<col$}");
        }
        let _ = writeln!(o);
    }
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_label_widens_the_label_column_instead_of_running_into_the_cells() {
        let rows = vec![
            ("variant".to_string(), vec!["a".to_string()]),
            (
                "a-claim-name-longer-than-twenty-eight".to_string(),
                vec!["✓ holds".to_string()],
            ),
        ];
        let text = super::table(rows);
        let lines: Vec<&str> = text.lines().collect();
        // The 37-character label and two spaces: each row's cell starts in
        // column 39.
        assert_eq!(lines[0].chars().nth(39), Some('a'), "{text}");
        assert_eq!(lines[1].chars().nth(39), Some('✓'), "{text}");
        assert_eq!(lines[1].chars().nth(38), Some(' '), "{text}");
    }
}
