//! Every NVIDIA GPU of the host, for `gpulab watch`: a program of many
//! processes (a torchrun job, an MPI job, a plain fork per GPU) spreads its
//! memory over several GPUs, and NVML says each process's bytes on each.
//!
//! Read from outside the program, like the rest of this crate: a reading is
//! sent when a GPU's memory in use or its list of the program's processes
//! changed, so a job on eight GPUs costs the stream nothing while it is still.

use std::collections::BTreeMap;

use gpulab_events::{GpuMeta, GpuReading, ProcessBytes};
use gpulab_host::clock::now_ns;
use nvml_wrapper::Device;

use super::nvml::{LIST_EVERY_NS, compute_processes, shared};

/// Every GPU NVML opened, with what was last said of each.
pub struct Gpus {
    gpus: Vec<Gpu>,
}

struct Gpu {
    device: Device<'static>,
    meta: GpuMeta,
    /// Memory in use when the process list was last read, and when.
    listed: Option<(u64, u64)>,
    /// What was last sent: memory in use and the program's processes.
    said: Option<(u64, Option<Vec<ProcessBytes>>)>,
}

impl std::fmt::Debug for Gpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.gpus.iter().map(|g| &g.meta))
            .finish()
    }
}

impl Gpus {
    /// Every NVIDIA GPU NVML sees, each with its memory in use now (the
    /// baseline, so open them before the program starts). None without NVML
    /// or without a GPU it can read.
    pub fn open() -> Option<Gpus> {
        let nvml = shared().ok()?;
        let count = nvml.device_count().ok()?;
        let gpus: Vec<Gpu> = (0..count)
            .filter_map(|index| {
                let device = nvml.device_by_index(index).ok()?;
                let mem = device.memory_info().ok()?;
                let meta = GpuMeta {
                    index,
                    name: device
                        .name()
                        .unwrap_or_else(|_| format!("NVIDIA GPU {index}")),
                    pci_bus_id: device.pci_info().ok().map(|p| p.bus_id),
                    total_bytes: mem.total,
                    baseline_bytes: mem.used,
                };
                Some(Gpu {
                    device,
                    meta,
                    listed: None,
                    said: None,
                })
            })
            .collect();
        (!gpus.is_empty()).then_some(Gpus { gpus })
    }

    /// What the stream's `meta` says of them.
    pub fn metas(&self) -> Vec<GpuMeta> {
        self.gpus.iter().map(|g| g.meta.clone()).collect()
    }

    /// Reads every GPU; returns a reading for each whose memory in use or
    /// whose processes of the program (`in_program` says which pids are)
    /// changed since it last said them. A GPU NVML cannot read this time is
    /// left out until it can.
    pub fn read(&mut self, in_program: &mut dyn FnMut(u32) -> bool) -> Vec<GpuReading> {
        let mut out = Vec::new();
        for (position, gpu) in self.gpus.iter_mut().enumerate() {
            let t_ns = now_ns();
            let Ok(mem) = gpu.device.memory_info() else {
                continue;
            };
            // The list costs ~20x a memory reading, and a process's bytes are
            // part of `used`: read it when `used` moved, or it is old.
            let stale = gpu.listed.is_none_or(|(at, used)| {
                used != mem.used || t_ns.saturating_sub(at) >= LIST_EVERY_NS
            });
            let (t_ns, processes) = if stale {
                let listed = compute_processes(&gpu.device);
                let t = now_ns();
                gpu.listed = Some((t, mem.used));
                (t, listed.map(|l| of_program(&l, in_program)))
            } else {
                let kept = gpu.said.as_ref().and_then(|(_, p)| p.clone());
                (t_ns, kept)
            };
            let now = (mem.used, processes);
            if gpu.said.as_ref() == Some(&now) {
                continue;
            }
            out.push(GpuReading {
                t_ns,
                gpu: position as u32,
                used_bytes: now.0,
                processes: now.1.clone(),
            });
            gpu.said = Some(now);
        }
        out
    }
}

/// The program's processes of `listed`, each once, by pid (a process listed
/// once per MIG instance: its bytes are the sum).
fn of_program(
    listed: &[(u32, Option<u64>)],
    in_program: &mut dyn FnMut(u32) -> bool,
) -> Vec<ProcessBytes> {
    let mut by_pid: BTreeMap<u32, Option<u64>> = BTreeMap::new();
    for &(pid, bytes) in listed {
        if !in_program(pid) {
            continue;
        }
        by_pid
            .entry(pid)
            .and_modify(|b| {
                *b = match (*b, bytes) {
                    (Some(x), Some(y)) => Some(x + y),
                    (x, y) => x.or(y),
                }
            })
            .or_insert(bytes);
    }
    by_pid
        .into_iter()
        .map(|(pid, bytes)| ProcessBytes { pid, bytes })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_programs_processes_are_kept_each_once() {
        let listed = [
            (30, Some(100)),
            (10, Some(5)),
            (99, Some(7)),
            (10, Some(6)),
            (20, None),
        ];
        let mut ours = |pid| pid != 99;
        let kept = of_program(&listed, &mut ours);
        let pairs: Vec<(u32, Option<u64>)> = kept.iter().map(|p| (p.pid, p.bytes)).collect();
        assert_eq!(pairs, vec![(10, Some(11)), (20, None), (30, Some(100))]);
    }
}
