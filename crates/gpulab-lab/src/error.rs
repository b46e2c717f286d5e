//! Errors of the lab module.

use std::path::PathBuf;

use super::diagnostic::Diagnostic;

pub type Result<T, E = LabError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A mistake in a lab file, with its `file:line:col`.
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unknown lab `{id}`{}", did_you_mean(suggestion.as_deref()))]
    UnknownLab {
        id: String,
        suggestion: Option<String>,
    },
    /// The id names a lab file the user gave that does not validate: its own
    /// mistakes say more than "unknown lab".
    #[error("lab `{id}` is in a file with mistakes: {detail}")]
    InvalidLab { id: String, detail: String },
    #[error("lab `{lab}` has no variant `{variant}`{} (variants: {})", did_you_mean(suggestion.as_deref()), known.join(", "))]
    UnknownVariant {
        lab: String,
        variant: String,
        suggestion: Option<String>,
        known: Vec<String>,
    },
    #[error("unknown lesson `{name}`{} (lessons: {}; or give a lesson file's path)", did_you_mean(suggestion.as_deref()), known.join(", "))]
    UnknownLesson {
        name: String,
        suggestion: Option<String>,
        known: Vec<String>,
    },
    #[error("--param {text}: {reason}")]
    BadParam { text: String, reason: String },
}

fn did_you_mean(s: Option<&str>) -> String {
    s.map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}
