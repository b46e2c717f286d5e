//! gpulab's event stream, the one stable format: the event types and their JSON
//! Lines form, the API vocabulary they name, and wall-clock dates. Live runs,
//! recordings, replays, exports and agents inside other programs all speak it.
//!
//! The leaf of the workspace: it knows no lab format, no GPU API and no UI, and
//! depends on serde alone (a check in `tests/leaf.rs` keeps it so), so a small
//! agent library can link it.

pub mod api;
pub mod device;
pub mod event;
pub mod jsonl;
pub mod platforms;
pub mod printable;
pub mod protocol;
pub mod ring;
pub mod units;
pub mod vocab;
pub mod wallclock;
pub mod wire;

pub use api::{Api, ApiInfo, CallName, ClFlag, Effect, KernelSpec};
pub use device::DeviceInfo;
pub use event::*;
pub use jsonl::{Recording, TraceError, read_events, read_recording, stream_recording, to_line};
pub use vocab::{BackendKind, DeviceKind, Framework, MemorySource, ObjKind};
