//! Events and their JSON Lines form. The only format gpulab writes or reads.

pub mod decimate;
pub mod event;
pub mod jsonl;
pub mod wallclock;

pub use event::*;
pub use jsonl::{Recording, TraceError, read_events, read_recording, to_line};
