//! The claims under a run's figure: each verdict (and how it stands to the
//! lesson) with its name and words, wrapped at words, and the measured values
//! that decided it, wrapped between values so that no number is ever cut.

use super::layout::Shared;
use super::{CHAR_WIDTH, RIGHT, W, text};
use crate::export::decimate::Decimated;
use crate::report::fmt_value;
use crate::trace::{ClaimVerdict, Tone};

/// The claims and their verdicts on this device, each beside the lesson's
/// expectation where the lab states one.
pub(super) fn draw_claims(out: &mut String, d: &Decimated, shared: &Shared, ticks_y: f64) {
    let (s, run) = (&shared.sizes, &d.run);
    let row = s.row();
    let mut y = ticks_y + row * 2.0;
    for c in run.claims() {
        for (colour, x, line) in claim_lines(c, s.text) {
            text(out, x, y, s.text, "start", colour, &line);
            y += row;
        }
    }
}

/// The rows of one claim: its verdict (and how it stands to the lesson), its
/// name and words, then the measured values that decided it, wrapped between
/// values so that no number is ever cut. Only the claim's words give way.
pub(super) fn claim_lines(c: &ClaimVerdict, size: f64) -> Vec<(&'static str, f64, String)> {
    let colour = match c.tone() {
        Tone::Good => "#1a7f37",
        Tone::Finding => "#8e24aa",
        Tone::Bad => "#b3261e",
        Tone::Unsure => "#8a6d00",
        Tone::Neutral => "#57606a",
    };
    let chars = |w: f64| (w / (size * CHAR_WIDTH)).floor() as usize;
    let mut head = format!("{} {}", c.mark(), c.verdict.label());
    if let Some(l) = c.lesson() {
        head.push_str(&format!(" ({})", l.label()));
    }
    let (x0, x1) = (20.0, 20.0 + 4.0 * size * CHAR_WIDTH);
    let room = W - RIGHT - x0;
    let values: Vec<String> = c
        .values
        .iter()
        .map(|(k, v)| format!("{k} = {}", fmt_value(*v)))
        .collect();
    // One row where the values fit whole beside the verdict and some of the
    // claim's words; else the words on one row and the values beneath.
    let lead = format!("{head} — {}: ", c.name);
    let all = values.join(", ");
    let words_room = chars(room).saturating_sub(lead.chars().count() + 3 + all.chars().count());
    if c.text.chars().count() <= words_room && c.reason.is_none() {
        return vec![(colour, x0, format!("{lead}{} — {all}", c.text))];
    }
    // The claim's words whole, wrapped between words: a slide never cuts them.
    let words = format!("{lead}{}", c.text);
    let mut lines: Vec<_> = wrap(&words, chars(room))
        .into_iter()
        .map(|l| (colour, x0, l))
        .collect();
    let width = chars(W - RIGHT - x1).max(1);
    let mut cur = String::new();
    for v in values {
        if !cur.is_empty() && cur.chars().count() + 2 + v.chars().count() > width {
            lines.push(("#222222", x1, std::mem::take(&mut cur) + ","));
        }
        if !cur.is_empty() {
            cur.push_str(", ");
        }
        cur.push_str(&v);
    }
    if !cur.is_empty() {
        lines.push(("#222222", x1, cur));
    }
    if let Some(r) = &c.reason {
        let why = format!("why inconclusive: {r}");
        for l in wrap(&why, chars(W - RIGHT - x1)) {
            lines.push(("#8a6d00", x1, l));
        }
    }
    lines
}

/// `text` in lines of at most `max` characters, broken between words (a
/// word longer than a line is broken where the line ends).
pub(super) fn wrap(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let mut word = word.to_string();
        while word.chars().count() > max {
            if !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
            }
            let head: String = word.chars().take(max).collect();
            word = word.chars().skip(max).collect();
            lines.push(head);
        }
        let n = cur.chars().count();
        if n > 0 && n + 1 + word.chars().count() > max {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(&word);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}
