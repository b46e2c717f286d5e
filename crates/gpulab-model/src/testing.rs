//! What the model's unit tests build their runs from: one `Meta` and one
//! `LabMeta` with every field the tests do not care about filled in once,
//! so a test names only what it is about (`Meta { backend, ..meta() }`).

use crate::trace::{
    BackendKind, DeviceKind, DeviceMeta, FORMAT_VERSION, GpuReading, LabMeta, MemorySource, Meta,
    ProcessBytes, WatchMeta,
};

/// A CUDA run on a GPU read by NVML, no lab, no watched program.
pub(crate) fn meta() -> Meta {
    Meta {
        format_version: FORMAT_VERSION,
        gpulab_version: "test".into(),
        t_ns: 0,
        pid: 1,
        hostname: "h".into(),
        backend: BackendKind::Cuda,
        platform: "p".into(),
        device: DeviceMeta {
            name: "d".into(),
            vendor: "v".into(),
            driver_version: "1".into(),
            kind: DeviceKind::Gpu,
            total_bytes: None,
            memory_source: MemorySource::Nvml,
            pci_bus_id: None,
            clock_error_ns: None,
        },
        lab: None,
        baseline_bytes: None,
        budget_bytes: None,
        recorded_at: None,
        watch: None,
        destruction: None,
        gpus: Vec::new(),
    }
}

/// A CPU device whose memory is the process's RSS (PoCL).
pub(crate) fn cpu_meta() -> Meta {
    let mut m = meta();
    m.backend = BackendKind::OpenCl;
    m.device.kind = DeviceKind::Cpu;
    m.device.memory_source = MemorySource::Rss;
    m
}

/// A lab's variant with these script lines.
pub(crate) fn lab(id: &str, script: Vec<(u32, String)>) -> LabMeta {
    LabMeta {
        id: id.into(),
        title: "t".into(),
        variant: "v".into(),
        params: Default::default(),
        script,
        stepped: false,
        until_failure: false,
        every_gpu: false,
    }
}

/// `gpulab watch -- command`, the program's pid `pid`.
pub(crate) fn watched(command: &str, pid: u32) -> WatchMeta {
    WatchMeta {
        command: vec![command.into()],
        pid,
        torch_history: false,
    }
}

/// xorshift64*: a fixed seed gives the same generated run on every machine.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// NVML's reading of GPU `gpu` at `t_ns` listing the program's processes
/// with their bytes: in use, those and `rest` beside them.
pub(crate) fn gpu_reading(t_ns: u64, gpu: u32, rest: u64, listed: &[(u32, u64)]) -> GpuReading {
    GpuReading {
        t_ns,
        gpu,
        used_bytes: rest + listed.iter().map(|(_, b)| b).sum::<u64>(),
        processes: Some(
            listed
                .iter()
                .map(|&(pid, b)| ProcessBytes {
                    pid,
                    bytes: Some(b),
                })
                .collect(),
        ),
    }
}
