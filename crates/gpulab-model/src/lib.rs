//! What a run means: the `Run` a stream of events folds into (`run`), the claims
//! judged over it (`verdict`), and what is written from it (`report`, `export`).
//! Events in, data out: nothing here starts a process, calls a GPU API or
//! prints; `trace` adds to the events crate what gpulab does with a stream
//! (thinning a recording, the sink its producers send into).

pub mod card;
pub mod class;
pub mod export;
pub mod report;
pub mod run;
pub mod teaching;
pub mod text;
pub mod trace;
pub mod verdict;

#[cfg(test)]
mod testing;

/// Units (bytes, MiB, ns, ms) from the events crate: one definition for everyone.
pub use gpulab_events::units;
