//! Events and their JSON Lines form. The only format gpulab writes or reads.

pub mod decimate;
pub mod event;
pub mod jsonl;

pub use event::*;
pub use jsonl::{TraceError, read_events, to_line};
