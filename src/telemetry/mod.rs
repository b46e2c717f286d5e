//! Telemetry: reads how much memory one device holds — NVML for NVIDIA GPUs, the
//! worker's RSS for CPU OpenCL devices — and samples it on a thread of its own.
//! Knows nothing of labs, never prints, never calls a GPU API beyond NVML queries.
#![deny(unsafe_code)]

mod nvml;
mod probe;
mod procfs;
mod ring;
mod sampler;

pub use nvml::normalize_pci_bus_id;
pub use probe::{Probe, Reading};
pub use procfs::{host_rss_bytes, self_rss_bytes};
pub use ring::Ring;
pub use sampler::{MAX_HZ, RING_CAPACITY, Sampler, SamplerHandle};

pub type Result<T, E = TelemetryError> = std::result::Result<T, E>;

/// Why a reading could not be taken. Cloneable so a sampler can keep its last one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TelemetryError {
    /// The process exited; its memory is unknown from here, which is not 0 bytes.
    #[error("process {pid} has exited; stopped sampling its memory")]
    ProcessGone { pid: u32 },
    #[error("reading {path}: {why}")]
    Io { path: String, why: String },
    #[error("{path}: unexpected contents")]
    Parse { path: String },
    #[error("NVML: {0}")]
    Nvml(String),
    /// The probe has no memory source for this device (see its notes).
    #[error("no memory telemetry for this device")]
    NoSource,
}
