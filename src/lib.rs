//! gpulab: a terminal laboratory for GPU memory lifetime.
//!
//! This crate starts runs and shows them: `source` starts a lab's worker or a
//! watched program and hands its events to a consumer, `watch` runs a program
//! with the agent loaded, `tui` is the dashboard, `history` the recordings on
//! disk. The rest lives in the workspace's crates, re-exported here under the
//! names the code and the tests use (see ARCHITECTURE.md):
//!
//! - `lab` (gpulab-lab): the lab language;
//! - `run`, `verdict`, `report`, `export`, `trace`, `text` (gpulab-model): what
//!   a run means and what is written from it;
//! - `engine` (gpulab-engine) and `backend` (gpulab-backend): the worker and
//!   the only code that calls a GPU API;
//! - `telemetry` (gpulab-telemetry): device memory readings;
//! - `clock`, `dirs`, `machine` (gpulab-host): what this host has.
//!
//! `unsafe` is denied by the workspace's lints (`Cargo.toml`).

pub mod output;

pub use gpulab_source as source;
pub use gpulab_source::{child, history, signals, watch};
pub use gpulab_tui as tui;
pub use gpulab_tui::color;

pub use gpulab_backend as backend;
pub use gpulab_engine as engine;
pub use gpulab_host::{clock, dirs, hostname, machine, multicast};
pub use gpulab_lab as lab;
pub use gpulab_model::{card, class, export, report, run, teaching, text, trace, verdict};
pub use gpulab_telemetry as telemetry;

/// Units (bytes, MiB, ns, ms) from the events crate: one definition for everyone.
pub use gpulab_events::units;
