//! Telemetry: reads how much memory one device holds — NVML for NVIDIA GPUs, the
//! worker's RSS for CPU OpenCL devices — and samples it on a thread of its own.
//! Knows nothing of labs, never prints, never calls a GPU API beyond NVML queries.
#![deny(unsafe_code)]

mod gpus;
mod nvml;
mod probe;
mod procfs;
mod sampler;

pub use gpus::Gpus;
pub use nvml::{BeforeRun, Gpu0, normalize_pci_bus_id, warm_up as warm_up_nvml};
pub use probe::Probe;
pub use procfs::{cpu_waiting_us, host_rss_bytes, load_avg, process_tree, self_rss_bytes};
pub use sampler::{IDLE_HZ, MAX_HZ, Pacer, SETTLE, Sampler, SamplerHandle};

use gpulab_events::{MemorySource, Sample};

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

/// One memory reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// CLOCK_MONOTONIC ns, taken right before the read; for an NVML reading
    /// whose process figure came from the process list, right after that
    /// list was read (the device's figure, read before it, is that much older).
    pub t_ns: u64,
    /// Device memory in use by all processes (NVML), or the worker's RSS.
    pub used_bytes: u64,
    pub total_bytes: Option<u64>,
    /// The worker's own usage, where the source can tell it apart.
    pub process_bytes: Option<u64>,
    /// `watch`: the other processes on the device, when their list changed.
    pub others: Option<Vec<gpulab_events::OtherProcess>>,
}

impl Reading {
    /// The `sample` event for this reading; `source` is the probe's `source()`.
    pub fn into_sample(self, source: MemorySource) -> Sample {
        Sample {
            t_ns: self.t_ns,
            source,
            used_bytes: self.used_bytes,
            total_bytes: self.total_bytes,
            process_bytes: self.process_bytes,
            others: self.others,
        }
    }
}
