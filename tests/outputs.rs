//! What gpulab writes and reads back: recordings, replays, exports, cards, the
//! report format, damaged recordings and the fuzzers.
//!
//! One test binary of the root crate's six: each module below was a binary
//! of its own, and linking each against the whole dependency tree cost more
//! than the tests (#45). `cargo test --test outputs MODULE::` runs one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

mod common;

mod card;
mod corrupt_recordings;
mod export;
mod fuzz;
mod recordings;
mod replay;
mod report_format;
