//! Verdicts (in progress).
