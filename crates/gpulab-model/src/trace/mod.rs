//! Events and their JSON Lines form: the `gpulab-events` crate (the one format
//! gpulab writes or reads), plus what only gpulab does with a stream.

pub mod decimate;
pub mod sink;

pub use gpulab_events::*;
pub use gpulab_events::{event, jsonl, protocol, wallclock};
