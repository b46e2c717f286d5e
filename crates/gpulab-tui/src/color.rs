//! Whether output is coloured: one rule for `--color`, `NO_COLOR` and whether the
//! stream is a terminal, used by every command and by the dashboard. Never prints.

use std::ffi::OsStr;

/// `--color WHEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// Colour on a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    Always,
    Never,
}

/// The rule. An explicit `--color always|never` wins over the environment (as
/// no-color.org asks of command-line flags); under `auto`, a non-empty `NO_COLOR`
/// turns colour off, and so does a stream that is not a terminal.
pub fn enabled(choice: Choice, no_color: Option<&OsStr>, terminal: bool) -> bool {
    match choice {
        Choice::Always => true,
        Choice::Never => false,
        Choice::Auto => terminal && no_color.is_none_or(OsStr::is_empty),
    }
}

/// Coloured text safe to print: the colour sequences a renderer of gpulab's
/// put in (SGR, `ESC [ digits ; m`) kept, everything else that would act on a
/// terminal written out as `printable` does (a lab file's line quoted in a
/// diagnostic is a file others made).
pub fn printable_styled(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\u{1b}'
            && let Some(body) = rest.strip_prefix("\u{1b}[")
            && let Some(end) = body.find(|c: char| !(c.is_ascii_digit() || c == ';'))
            && body[end..].starts_with('m')
        {
            let len = 2 + end + 1;
            out.push_str(&rest[..len]);
            rest = &rest[len..];
            continue;
        }
        out.push_str(&crate::report::printable(&c.to_string()));
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The rule with this process's `NO_COLOR`, for a stream that is or is not a
/// terminal.
pub fn for_stream(choice: Choice, terminal: bool) -> bool {
    enabled(choice, std::env::var_os("NO_COLOR").as_deref(), terminal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_colours_a_terminal_unless_no_color_is_set_non_empty() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert!(enabled(Choice::Auto, None, true));
        assert!(
            enabled(Choice::Auto, empty, true),
            "empty NO_COLOR is unset"
        );
        assert!(!enabled(Choice::Auto, set, true));
        assert!(!enabled(Choice::Auto, None, false), "a pipe or file");
        assert!(!enabled(Choice::Auto, set, false));
    }

    #[test]
    fn an_explicit_choice_wins_over_no_color_and_the_stream() {
        for no_color in [None, Some(OsStr::new("1"))] {
            for terminal in [false, true] {
                assert!(enabled(Choice::Always, no_color, terminal));
                assert!(!enabled(Choice::Never, no_color, terminal));
            }
        }
    }

    #[test]
    fn colours_stay_and_everything_else_that_acts_is_written_out() {
        let styled = "\u{1b}[1;31merror\u{1b}[0m: x\u{1b}]0;title\u{7} \u{202e}y\u{1b}[2J";
        assert_eq!(
            printable_styled(styled),
            "\u{1b}[1;31merror\u{1b}[0m: x\\u{1b}]0;title\\u{7} \\u{202e}y\\u{1b}[2J"
        );
        assert_eq!(printable_styled("plain ✓"), "plain ✓");
        assert_eq!(printable_styled("\u{1b}"), "\\u{1b}");
    }
}
