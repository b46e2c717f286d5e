//! The one place `file:line:col` messages are made and rendered (miette), so every
//! mistake in a lab file reads the same way.

use std::fmt;

/// A mistake in a lab file. `Display` gives the one-line form
/// `file:line:col: message`; `render` adds the offending line with a caret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    /// 1-based.
    pub line: u32,
    /// 1-based, in characters.
    pub col: u32,
    /// Length of the offending text in characters (at least 1).
    pub len: u32,
    pub message: String,
    /// "did you mean `clFinish`?" and the like.
    pub help: Option<String>,
    /// The whole offending line, for the caret display.
    pub source_line: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.message)?;
        if let Some(help) = &self.help {
            write!(f, "; {help}")?;
        }
        Ok(())
    }
}
