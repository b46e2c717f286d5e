//! Watching programs gpulab did not write: the agent, its harms, the generated
//! hostile programs, the soak, Python, CUDA and ranks.
//!
//! One test binary of the root crate's six: each module below was a binary
//! of its own, and linking each against the whole dependency tree cost more
//! than the tests (#45). `cargo test --test watching MODULE::` runs one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

mod common;

mod watch;
mod watch_agent;
mod watch_cuda;
mod watch_harms;
mod watch_hostile;
mod watch_python;
mod watch_ranks;
mod watch_soak;
