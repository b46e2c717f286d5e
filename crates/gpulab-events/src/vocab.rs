//! The API vocabulary every event names: kinds of object. Shared by the lab
//! language, the ledger, the agent and every view; knows nothing of them.

use serde::{Deserialize, Serialize};

/// Kinds of API object the ledger counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjKind {
    Context,
    Queue,
    Buffer,
    Program,
    Kernel,
    Event,
    /// A CUDA stream (`cudaStreamCreate`).
    Stream,
    /// Pinned host memory (`cudaMallocHost`).
    HostBuffer,
}

impl ObjKind {
    pub const ALL: [ObjKind; 8] = [
        ObjKind::Context,
        ObjKind::Queue,
        ObjKind::Buffer,
        ObjKind::Program,
        ObjKind::Kernel,
        ObjKind::Event,
        ObjKind::Stream,
        ObjKind::HostBuffer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ObjKind::Context => "context",
            ObjKind::Queue => "queue",
            ObjKind::Buffer => "buffer",
            ObjKind::Program => "program",
            ObjKind::Kernel => "kernel",
            ObjKind::Event => "event",
            ObjKind::Stream => "stream",
            ObjKind::HostBuffer => "host_buffer",
        }
    }

    /// Plural names as claims write them: `live(buffers)`.
    pub fn from_plural(s: &str) -> Option<ObjKind> {
        ObjKind::ALL
            .into_iter()
            .find(|k| s == k.plural() || s == k.as_str())
    }

    pub fn plural(self) -> &'static str {
        match self {
            ObjKind::Context => "contexts",
            ObjKind::Queue => "queues",
            ObjKind::Buffer => "buffers",
            ObjKind::Program => "programs",
            ObjKind::Kernel => "kernels",
            ObjKind::Event => "events",
            ObjKind::Stream => "streams",
            ObjKind::HostBuffer => "host_buffers",
        }
    }
}
