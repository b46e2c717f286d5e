//! The dashboard: its state, each panel and screen (`TestBackend` + insta), and
//! end to end in tmux.
//!
//! One test binary of the root crate's six: each module below was a binary
//! of its own, and linking each against the whole dependency tree cost more
//! than the tests (#45). `cargo test --test dashboard MODULE::` runs one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

mod common;

mod dashboard_panels;
mod dashboard_screens;
mod dashboard_state;
mod dashboard_tmux;
