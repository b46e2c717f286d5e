//! The API vocabulary every event names: kinds of object. Shared by the lab
//! language, the ledger, the agent and every view; knows nothing of them.

use serde::{Deserialize, Serialize};

/// A framework whose own allocator a watched Python program used, as
/// `gpulab watch`'s startup hook read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Framework {
    /// PyTorch's CUDA caching allocator (`torch.cuda.memory_stats`).
    Pytorch,
    /// CuPy's default memory pool.
    Cupy,
    /// JAX's (XLA's) device allocator (`Device.memory_stats`).
    Jax,
}

impl Framework {
    pub const ALL: [Framework; 3] = [Framework::Pytorch, Framework::Cupy, Framework::Jax];

    /// Its name on the wire and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Framework::Pytorch => "pytorch",
            Framework::Cupy => "cupy",
            Framework::Jax => "jax",
        }
    }

    pub fn parse(name: &str) -> Option<Framework> {
        Framework::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// Its name in prose.
    pub fn label(self) -> &'static str {
        match self {
            Framework::Pytorch => "PyTorch",
            Framework::Cupy => "CuPy",
            Framework::Jax => "JAX",
        }
    }
}

/// Kinds of API object the ledger counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Pinned host memory (`cudaMallocHost`, `cudaHostRegister`).
    HostBuffer,
    /// A CUDA memory pool of the lab's own (`cudaMemPoolCreate`).
    Pool,
    /// Physical device memory of the virtual memory API (`cuMemCreate`): it holds
    /// its bytes until released and unmapped everywhere.
    MemHandle,
    /// A reserved range of device virtual addresses (`cuMemAddressReserve`):
    /// no memory of its own until an allocation is mapped into it.
    VaRange,
    /// A CUDA graph being built (`cudaGraphCreate`): it keeps the nodes added to
    /// it, and so the allocations its alloc nodes name.
    Graph,
    /// An executable graph (`cudaGraphInstantiate`): a snapshot of its graph's
    /// nodes, independent of the graph once made.
    GraphExec,
    /// Managed memory (`cuMemAllocManaged`, as `gpulab watch`'s agent sees
    /// it): pages the driver moves between the host and the device as they
    /// are used or prefetched. NVML's figure for a process counts none of
    /// them; the device's free memory counts those on the device.
    Managed,
}

impl ObjKind {
    pub const ALL: [ObjKind; 14] = [
        ObjKind::Context,
        ObjKind::Queue,
        ObjKind::Buffer,
        ObjKind::Program,
        ObjKind::Kernel,
        ObjKind::Event,
        ObjKind::Stream,
        ObjKind::HostBuffer,
        ObjKind::Pool,
        ObjKind::MemHandle,
        ObjKind::VaRange,
        ObjKind::Graph,
        ObjKind::GraphExec,
        ObjKind::Managed,
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
            ObjKind::Pool => "pool",
            ObjKind::MemHandle => "mem_handle",
            ObjKind::VaRange => "va_range",
            ObjKind::Graph => "graph",
            ObjKind::GraphExec => "graph_exec",
            ObjKind::Managed => "managed",
        }
    }

    /// Plural names as claims write them: `live(buffers)`. Not managed
    /// memory: a lab's `cudaMallocManaged` makes a buffer (only `gpulab
    /// watch`'s agent tells the two apart), so a claim on it could only
    /// ever count none.
    pub fn from_plural(s: &str) -> Option<ObjKind> {
        ObjKind::of_labs().find(|k| s == k.plural() || s == k.as_str())
    }

    /// The kinds a lab's ledger has: all but managed memory.
    pub fn of_labs() -> impl Iterator<Item = ObjKind> {
        ObjKind::ALL.into_iter().filter(|k| *k != ObjKind::Managed)
    }

    /// The name for `n` of them: `1 context`, `2 contexts`.
    pub fn counted(self, n: impl TryInto<u64>) -> &'static str {
        if n.try_into().is_ok_and(|n| n == 1) {
            self.as_str()
        } else {
            self.plural()
        }
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
            ObjKind::Pool => "pools",
            ObjKind::MemHandle => "mem_handles",
            ObjKind::VaRange => "va_ranges",
            ObjKind::Graph => "graphs",
            ObjKind::GraphExec => "graph_execs",
            ObjKind::Managed => "managed_allocations",
        }
    }
}

/// Which GPU API a stream's calls belong to. On the wire: `opencl`, `cuda`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum BackendKind {
    #[serde(rename = "opencl")]
    OpenCl,
    #[serde(rename = "cuda")]
    Cuda,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::OpenCl => "opencl",
            BackendKind::Cuda => "cuda",
        }
    }

    /// The backend an agent event's `api` names.
    pub fn from_api(api: &str) -> Option<BackendKind> {
        match api {
            "opencl" => Some(BackendKind::OpenCl),
            "cuda" => Some(BackendKind::Cuda),
            _ => None,
        }
    }
}

/// What kind of device ran the work. On the wire: `gpu`, `cpu`, `other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    Gpu,
    Cpu,
    Other,
}

impl DeviceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::Cpu => "cpu",
            DeviceKind::Other => "other",
        }
    }
}

/// What a memory figure measures. On the wire: `nvml`, `rss`, `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// Device memory as NVIDIA's management library reports it.
    Nvml,
    /// Resident host memory of a process: what a CPU OpenCL device allocates from.
    Rss,
    /// Nothing could measure this device's memory (a note in the stream says why).
    #[serde(rename = "none")]
    Unavailable,
}

impl MemorySource {
    pub fn as_str(self) -> &'static str {
        match self {
            MemorySource::Nvml => "nvml",
            MemorySource::Rss => "rss",
            MemorySource::Unavailable => "none",
        }
    }
}

macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
display_as_str!(ObjKind, BackendKind, DeviceKind, MemorySource);

/// The name of an OpenCL status code as the specification spells it
/// (`CL_INVALID_MEM_OBJECT`), or `None` for a code the standard does not define.
/// Written here once, so an agent and the lab backend name errors alike.
pub fn opencl_status_name(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "CL_SUCCESS",
        -1 => "CL_DEVICE_NOT_FOUND",
        -2 => "CL_DEVICE_NOT_AVAILABLE",
        -3 => "CL_COMPILER_NOT_AVAILABLE",
        -4 => "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        -5 => "CL_OUT_OF_RESOURCES",
        -6 => "CL_OUT_OF_HOST_MEMORY",
        -7 => "CL_PROFILING_INFO_NOT_AVAILABLE",
        -8 => "CL_MEM_COPY_OVERLAP",
        -9 => "CL_IMAGE_FORMAT_MISMATCH",
        -10 => "CL_IMAGE_FORMAT_NOT_SUPPORTED",
        -11 => "CL_BUILD_PROGRAM_FAILURE",
        -12 => "CL_MAP_FAILURE",
        -13 => "CL_MISALIGNED_SUB_BUFFER_OFFSET",
        -14 => "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
        -15 => "CL_COMPILE_PROGRAM_FAILURE",
        -16 => "CL_LINKER_NOT_AVAILABLE",
        -17 => "CL_LINK_PROGRAM_FAILURE",
        -18 => "CL_DEVICE_PARTITION_FAILED",
        -19 => "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
        -30 => "CL_INVALID_VALUE",
        -31 => "CL_INVALID_DEVICE_TYPE",
        -32 => "CL_INVALID_PLATFORM",
        -33 => "CL_INVALID_DEVICE",
        -34 => "CL_INVALID_CONTEXT",
        -35 => "CL_INVALID_QUEUE_PROPERTIES",
        -36 => "CL_INVALID_COMMAND_QUEUE",
        -37 => "CL_INVALID_HOST_PTR",
        -38 => "CL_INVALID_MEM_OBJECT",
        -39 => "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
        -40 => "CL_INVALID_IMAGE_SIZE",
        -41 => "CL_INVALID_SAMPLER",
        -42 => "CL_INVALID_BINARY",
        -43 => "CL_INVALID_BUILD_OPTIONS",
        -44 => "CL_INVALID_PROGRAM",
        -45 => "CL_INVALID_PROGRAM_EXECUTABLE",
        -46 => "CL_INVALID_KERNEL_NAME",
        -47 => "CL_INVALID_KERNEL_DEFINITION",
        -48 => "CL_INVALID_KERNEL",
        -49 => "CL_INVALID_ARG_INDEX",
        -50 => "CL_INVALID_ARG_VALUE",
        -51 => "CL_INVALID_ARG_SIZE",
        -52 => "CL_INVALID_KERNEL_ARGS",
        -53 => "CL_INVALID_WORK_DIMENSION",
        -54 => "CL_INVALID_WORK_GROUP_SIZE",
        -55 => "CL_INVALID_WORK_ITEM_SIZE",
        -56 => "CL_INVALID_GLOBAL_OFFSET",
        -57 => "CL_INVALID_EVENT_WAIT_LIST",
        -58 => "CL_INVALID_EVENT",
        -59 => "CL_INVALID_OPERATION",
        -60 => "CL_INVALID_GL_OBJECT",
        -61 => "CL_INVALID_BUFFER_SIZE",
        -62 => "CL_INVALID_MIP_LEVEL",
        -63 => "CL_INVALID_GLOBAL_WORK_SIZE",
        -64 => "CL_INVALID_PROPERTY",
        -65 => "CL_INVALID_IMAGE_DESCRIPTOR",
        -66 => "CL_INVALID_COMPILER_OPTIONS",
        -67 => "CL_INVALID_LINKER_OPTIONS",
        -68 => "CL_INVALID_DEVICE_PARTITION_COUNT",
        -69 => "CL_INVALID_PIPE_SIZE",
        -70 => "CL_INVALID_DEVICE_QUEUE",
        -71 => "CL_INVALID_SPEC_ID",
        -72 => "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
        -1000 => "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR",
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_keep_their_wire_names() {
        for (json, kind) in [
            ("\"opencl\"", BackendKind::OpenCl),
            ("\"cuda\"", BackendKind::Cuda),
        ] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), json);
            assert_eq!(serde_json::from_str::<BackendKind>(json).unwrap(), kind);
            assert_eq!(json.trim_matches('"'), kind.as_str());
        }
        for kind in [DeviceKind::Gpu, DeviceKind::Cpu, DeviceKind::Other] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{kind}\""));
        }
        for src in [
            MemorySource::Nvml,
            MemorySource::Rss,
            MemorySource::Unavailable,
        ] {
            assert_eq!(serde_json::to_string(&src).unwrap(), format!("\"{src}\""));
        }
        assert!(serde_json::from_str::<MemorySource>("\"worker\"").is_err());
    }

    #[test]
    fn opencl_status_names_follow_the_spec_and_leave_unknown_codes_alone() {
        assert_eq!(opencl_status_name(0), Some("CL_SUCCESS"));
        assert_eq!(opencl_status_name(-38), Some("CL_INVALID_MEM_OBJECT"));
        assert_eq!(opencl_status_name(-1001), Some("CL_PLATFORM_NOT_FOUND_KHR"));
        assert_eq!(opencl_status_name(-20), None);
        assert_eq!(opencl_status_name(7), None);
    }
}

#[cfg(test)]
mod framework_tests {
    use super::Framework;

    #[test]
    fn every_framework_reads_back_from_its_name() {
        for f in Framework::ALL {
            assert_eq!(Framework::parse(f.as_str()), Some(f));
        }
        assert_eq!(Framework::parse("torch"), None);
    }
}
