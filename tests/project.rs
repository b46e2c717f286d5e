//! The project itself: its layers, its package and its deployment scripts.
//!
//! One test binary of the root crate's six: each module below was a binary
//! of its own, and linking each against the whole dependency tree cost more
//! than the tests (#45). `cargo test --test project MODULE::` runs one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

mod common;

mod architecture;
mod deploy;
mod packaging;
