//! Text cut to a width, for the panels and the reports alike.

/// Cuts `s` to `w` characters, marking the cut with `…`. What would act
/// instead of showing (an escape, U+202E) is written out first: names come
/// from recordings others made.
pub fn fit(s: &str, w: usize) -> String {
    let s = gpulab_events::printable::printable(s);
    let s = s.as_ref();
    if s.chars().count() <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(w - 1).collect();
    out.push('…');
    out
}

/// Breaks `s` at spaces into lines of at most `w` characters, at most `max`
/// lines; the last one shown is cut with `…` when text is left over. A word longer
/// than a line is cut.
pub fn wrap(s: &str, w: usize, max: usize) -> Vec<String> {
    let s = gpulab_events::printable::printable(s);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in s.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > w {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    let cut = lines.len() > max;
    lines.truncate(max);
    if let Some(last) = lines.last_mut() {
        let whole = last.chars().count() <= w;
        *last = if cut && whole {
            fit(&format!("{last} …"), w)
        } else {
            fit(last, w)
        };
    }
    lines.iter_mut().for_each(|l| *l = fit(l, w));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_and_marks_what_is_left_out() {
        assert_eq!(wrap("one two three", 7, 3), vec!["one two", "three"]);
        assert_eq!(wrap("one two three four", 7, 1), vec!["one tw…"]);
        assert_eq!(wrap("abcdefghij", 4, 2), vec!["abc…"]);
        assert!(wrap("", 4, 2).is_empty());
        for l in wrap(
            "a mistake: unknown call `clFinsh`; did you mean `clFinish`?",
            12,
            3,
        ) {
            assert!(l.chars().count() <= 12, "{l}");
        }
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary() {
        assert_eq!(fit("main (a.c:3)", 160), "main (a.c:3)");
        let long = "é".repeat(200);
        let cut = fit(&long, 160);
        assert_eq!(cut.chars().count(), 160);
        assert!(cut.ends_with('…'));
        assert_eq!(fit("abcd", 4), "abcd");
        assert_eq!(fit("abcde", 4), "abc…");
    }
}
