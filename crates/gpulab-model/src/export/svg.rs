//! What the page's charts and the slide figures share: text made safe for SVG
//! and HTML, round tick steps for their axes, and what a mark that stands for
//! many calls says.

use std::fmt::Write;

use crate::export::decimate::Mark;
use crate::report::printable;
use crate::run::Run;
use crate::trace::BackendKind;

/// A device lane's label: CUDA has streams, OpenCL queues. A stream the runtime
/// names itself ("the default stream") keeps its name.
pub(crate) fn lane_label(run: &Run, name: &str) -> String {
    let cuda = run
        .meta()
        .as_ref()
        .is_some_and(|m| m.backend == BackendKind::Cuda);
    if name.contains("stream") {
        name.to_string()
    } else if cuda {
        format!("stream {name}")
    } else {
        format!("queue {name}")
    }
}

/// `text` as SVG/HTML text or attribute value: markup characters escaped,
/// control characters written out as `report` does for a terminal. A recording
/// and a lab file are shared files.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in printable(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// About five round steps (1, 2 or 5 times a power of ten) from 0 to `max`.
pub(crate) fn ticks(max: f64) -> Vec<f64> {
    if !(max.is_finite() && max > 0.0) {
        return vec![0.0];
    }
    let raw = max / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power);
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|v| *v <= max * 1.0001)
        .collect()
}

/// `100`, `2.5`, `0.05`: no trailing `.0`.
pub(crate) fn tick_label(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `1,234,567`: a count a reader takes in at a glance.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What a mark merged from calls or device spans stands for, as its title says
/// it: how many (`what` names one and several), when, under which names, their
/// time summed (`busy` says whose), and how many failed. `ms` is a time on the
/// chart's axis.
pub(crate) fn merged_title(
    m: &Mark,
    what: (&str, &str),
    busy: &str,
    ms: impl Fn(u64) -> f64,
) -> String {
    let noun = if m.count == 1 { what.0 } else { what.1 };
    let mut t = format!(
        "{} {noun}, from {:.3} to {:.3} ms\n",
        grouped(m.count),
        ms(m.begin_ns),
        ms(m.end_ns)
    );
    let mut names: Vec<String> = m
        .names
        .iter()
        .map(|(name, n)| format!("{name} ×{}", grouped(*n)))
        .collect();
    if m.other_names > 0 {
        names.push(format!("others ×{}", grouped(m.other_names)));
    }
    t.push_str(&names.join(", "));
    let _ = write!(t, "\n{busy} {:.3} ms in all", m.busy_ns as f64 / 1e6);
    if m.failed > 0 {
        let _ = write!(t, "\n{} returned an error", grouped(m.failed));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.3), vec![0.0, 0.1, 0.2, 0.30000000000000004]);
        assert_eq!(ticks(f64::NAN), vec![0.0]);
        assert_eq!(tick_label(100.0), "100");
        assert_eq!(tick_label(0.05), "0.05");
    }

    #[test]
    fn counts_are_grouped_in_thousands() {
        let got: Vec<String> = [0, 7, 999, 1_000, 12_345, 1_000_003]
            .into_iter()
            .map(grouped)
            .collect();
        assert_eq!(got, ["0", "7", "999", "1,000", "12,345", "1,000,003"]);
    }

    #[test]
    fn control_characters_are_written_out() {
        assert_eq!(esc("a\u{1b}[2Jb & c"), "a\\u{1b}[2Jb &amp; c");
    }
}
