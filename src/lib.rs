//! gpulab: a terminal laboratory for GPU memory lifetime.
//!
//! The worker side runs `lab` → `engine` → `backend`; the parent side runs
//! `source` (spawns workers, owns telemetry) → `trace` (events) → `run` (the Run
//! model) → `report`. Nothing here prints except `report` rendering to strings.
//!
//! `unsafe` is denied by the workspace's lints (`Cargo.toml`); `backend/` and
//! `machine/icd*.rs` allow it, each block saying why it holds.

pub mod backend;
pub mod clock;
pub mod color;
pub mod dirs;
pub mod engine;
pub mod export;
pub mod history;
pub mod lab;
pub mod machine;
pub mod report;
pub mod run;
pub mod signals;
pub mod source;
pub mod telemetry;
pub mod text;
pub mod trace;
pub mod tui;
pub mod verdict;
pub mod watch;

/// Units (bytes, MiB, ns, ms) from the events crate: one definition for everyone.
pub use gpulab_events::units;
