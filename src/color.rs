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
}
