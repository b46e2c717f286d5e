//! Backends: the only code that calls a GPU API. The engine drives one through the
//! `Backend` trait, one call per script line; a backend never decides what a lab
//! means, it only does the call and reports what the driver said.
#![allow(unsafe_code, reason = "the OpenCL and CUDA driver APIs are C")]

pub mod cuda;
pub mod discover;
pub mod opencl;
pub mod pattern;

use gpulab_events::BackendKind;
use gpulab_events::CudaMemory;
use gpulab_events::ObjKind;
use gpulab_events::api::{Api, ClFlag};

pub type Result<T, E = BackendError> = std::result::Result<T, E>;

/// Backend-assigned id of an API object; the ledger uses the same id.
pub type ObjId = u64;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// No library, platform or device: `gpulab doctor` explains.
    #[error("{what}: {why}")]
    Unavailable { what: String, why: String },
    /// The device was found but setting it up failed.
    #[error("{0}")]
    Setup(String),
}

/// A status code the driver returned, with its name (`CL_INVALID_MEM_OBJECT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverError {
    pub code: i64,
    pub name: String,
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.code)
    }
}

/// The device a backend opened, as the meta event reports it.
pub use gpulab_events::{DeviceInfo, DeviceKind};

/// A resolved argument of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Obj(ObjId),
    Objs(Vec<ObjId>),
    Bytes(u64),
    Ms(f64),
    /// A kernel's argument index (`clSetKernelArg(k, 0, buf)`).
    Index(u32),
    Kernel(String),
    Bool(bool),
    Flag(ClFlag),
    /// Flags C ORs together (`cudaHostAllocMapped | cudaHostAllocWriteCombined`).
    Flags(Vec<ClFlag>),
    /// The events an enqueue waits for (`wait [e1, e2]`).
    Wait(Vec<ObjId>),
}

/// What a successful call produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// The new object, for calls that create one (an enqueue bound to a name creates
    /// its event).
    pub created: Option<ObjId>,
    /// Bytes the new object holds on the device.
    pub bytes: u64,
    /// What the call answered beside its status, for a claim to read
    /// (`gpulab_events::Call::returned`); a read-back's pattern check comes
    /// later, from `Backend::read_back`.
    pub returned: Option<f64>,
}

/// Things the driver tells us after the fact, collected by `Backend::drain`.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// Device work finished; times are host CLOCK_MONOTONIC ns.
    Span {
        call_seq: u64,
        queue: ObjId,
        name: String,
        queued_ns: u64,
        begin_ns: u64,
        end_ns: u64,
    },
    /// The implementation destroyed the object (destructor callback).
    Destroyed { obj: ObjId, t_ns: u64 },
    /// A callback a lab's call installed has run, on the implementation's
    /// thread at `t_ns`; `what` says what it did, as the report words it.
    Callback {
        call_seq: u64,
        t_ns: u64,
        what: String,
    },
}

/// One device, driven one call at a time.
pub trait Backend {
    fn device(&self) -> &DeviceInfo;

    /// Error bound of the device-to-host clock mapping, when known.
    fn clock_error_ns(&self) -> Option<u64> {
        None
    }

    /// Do one call. `want_event` is set when the script binds the call's event to a
    /// name; otherwise any event gpulab needs for profiling is its own, released as
    /// soon as it has been read.
    fn call(
        &mut self,
        seq: u64,
        api: Api,
        operands: &[Operand],
        want_event: bool,
    ) -> std::result::Result<Outcome, DriverError>;

    /// What the call just made read back (a blocking read, a synchronous copy
    /// to the host), checked against the pattern kernel's values: asked once
    /// the call's end has been timed, so gpulab's check never counts as the
    /// call's time. `None` when the call read nothing back.
    fn read_back(&mut self) -> Option<f64> {
        None
    }

    /// The share of the words of host buffer `obj` that hold the pattern
    /// kernel's values (`verify h`); `None` when `obj` is no host buffer of
    /// this backend's.
    fn verify_pattern(&self, _obj: ObjId) -> Option<f64> {
        None
    }

    /// Spans and destructor callbacks that arrived since the last drain.
    fn drain(&mut self) -> Vec<Notice>;

    /// Wait up to `timeout_ms` for outstanding device work to report its spans
    /// (called once at the end of a script; never releases a lab object).
    fn settle(&mut self, timeout_ms: u64);

    /// The kinds of object whose destruction the driver tells gpulab about
    /// (OpenCL's destructor callbacks). CUDA has no such callback, so the end of a
    /// CUDA run never waits for one, and a claim on a kind not listed here is
    /// inconclusive rather than judged from callbacks that were never asked for.
    fn destruction_watched(&self) -> Vec<ObjKind> {
        Vec::new()
    }

    /// What the reader of this run should know about how the backend measures
    /// on this platform (a callback left out for a driver's sake, say).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Which API this backend drives (picks the release call gpulab's cleanup uses).
    fn kind(&self) -> BackendKind {
        BackendKind::OpenCl
    }

    /// Whether an unexpected error ends the script. OpenCL: every error (a lab
    /// built on a failed call teaches nothing). CUDA: only an error that leaves the
    /// context unusable; others are the driver's answer, and the lab goes on.
    fn error_ends_run(&self, _e: &DriverError) -> bool {
        true
    }

    /// True after a sticky error: every further call would fail, so gpulab's
    /// cleanup is skipped and the worker's exit hands the memory back.
    fn context_lost(&self) -> bool {
        false
    }

    /// CUDA's view of device memory after a call: the default pool's reserved and
    /// used bytes, and `cuMemGetInfo`. `None` where the backend has no such view.
    /// `device_used` is the device-wide figure the worker just read (NVML), when
    /// it has one: while it stays put, a device-wide figure of the backend's own
    /// cannot have moved either and need not be read again.
    fn cuda_memory(&mut self, _device_used: Option<u64>) -> Option<CudaMemory> {
        None
    }
}
