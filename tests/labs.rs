//! Labs run on the device: OpenCL and CUDA labs, variants compared, lab files,
//! the run source, long runs, clean-up, faults, bad input and the command line.
//!
//! One test binary of the root crate's six: each module below was a binary
//! of its own, and linking each against the whole dependency tree cost more
//! than the tests (#45). `cargo test --test labs MODULE::` runs one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test or a benchmark fails by panicking"
)]

mod common;

mod bad_input;
mod big_run;
mod class;
mod cleanup;
mod cli;
mod cross_variant;
mod cuda_labs;
mod faults;
mod lab_files;
mod opencl_labs;
mod run_source;
