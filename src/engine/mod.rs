//! The engine (in progress).
