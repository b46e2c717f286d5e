//! Text from files others made (recordings, cards, lab files), made safe to
//! show: on a terminal, in a report, in the dashboard. It never decides what a
//! text means; it only writes out the characters that would act instead of
//! showing.

use std::borrow::Cow;

/// Whether `c` would act on a terminal or reorder what is shown instead of
/// appearing as itself: control characters other than newline and tab (an
/// escape sequence can clear the screen, set the title, hide the cursor) and
/// the invisible Unicode formatting characters that reorder or hide text
/// (U+202E RIGHT-TO-LEFT OVERRIDE makes `exe.txt` read `txt.exe`: the
/// "Trojan Source" characters, zero-width characters, the byte order mark).
pub fn acts(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// `text` with every character that [`acts`] written out (`\u{1b}`,
/// `\u{202e}`), so a shared file cannot act through what gpulab prints.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if acts(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_reordering_are_written_out_and_the_rest_kept() {
        assert!(matches!(
            printable("clFinish · 3 MiB\n\tok"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            printable("a\u{1b}]0;owned\u{7}b"),
            "a\\u{1b}]0;owned\\u{7}b"
        );
        assert_eq!(printable("exe\u{202e}txt"), "exe\\u{202e}txt");
        assert_eq!(printable("\u{feff}x\u{200b}"), "\\u{feff}x\\u{200b}");
        assert_eq!(printable("Grüße, 名前, ✓"), "Grüße, 名前, ✓");
    }

    /// Every character, one at a time: what remains acts on nothing.
    #[test]
    fn nothing_that_acts_survives() {
        for c in (0u32..0x11_0000).filter_map(char::from_u32) {
            let shown = printable(&c.to_string()).into_owned();
            assert!(!shown.chars().any(acts), "{:?} -> {shown:?}", c);
        }
    }
}
