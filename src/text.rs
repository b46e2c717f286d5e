//! Text cut to a width, for the panels and the reports alike.

/// Cuts `s` to `w` characters, marking the cut with `…`.
pub fn fit(s: &str, w: usize) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
