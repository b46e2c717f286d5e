//! Reports (in progress).
