//! A watched program of many processes — a torchrun or MPI job, a fork per
//! GPU — seen per process and per GPU: each process's rank (what its launcher
//! told it), its bytes on every GPU (NVML's per-process figure, read from
//! outside), and what its own objects held then, by who made them (NCCL,
//! PyTorch, the program), from the agent inside it.
//!
//! Two moments are kept per process, because its memory at exit says nothing
//! (the exit gives it all back): its peak (the most bytes it held on all GPUs
//! together), and when memory ran out — its own refused call, and for every
//! other process the moment the first one was refused (when one rank runs out,
//! the others wait in a collective holding what they hold).

use std::collections::BTreeMap;

use crate::trace::{GpuMeta, GpuReading, ProcessBytes, Rank};

use super::owners::Owner;

/// Most readings kept per GPU; past it, neighbours are merged two into one,
/// keeping the one with more memory in use (the chart keeps its peaks).
const LANE_POINTS: usize = 16_384;

/// Every process and every GPU of a watched program.
#[derive(Debug, Clone, Default)]
pub struct Ranks {
    /// Each process whose agent reported, by pid.
    pub members: BTreeMap<u32, Member>,
    /// Each GPU the stream read, in `meta.gpus` order.
    pub gpus: Vec<GpuLane>,
    /// The process refused first for want of memory, and when.
    pub first_ran_out: Option<(u32, u64)>,
}

/// One process of the program.
#[derive(Debug, Clone, Default)]
pub struct Member {
    pub pid: u32,
    pub parent_pid: u32,
    pub exe: String,
    pub rank: Option<Rank>,
    /// Its bytes on each GPU (by position) as last read; a GPU whose list no
    /// longer names it is gone from here.
    pub on_gpu: BTreeMap<u32, u64>,
    /// The GPUs NVML ever listed it on.
    pub gpus_used: std::collections::BTreeSet<u32>,
    /// The most it held on all GPUs together.
    pub peak_bytes: u64,
    /// When it held them (taken by the run, with its objects then).
    pub peak: Option<Moment>,
    /// Its first call refused for want of memory.
    pub ran_out: Option<RanOutCall>,
    /// Where it stood when the first process of the program was refused.
    pub at_first_ran_out: Option<Moment>,
    /// When its agent said its last record (it is exiting).
    pub detached_ns: Option<u64>,
    /// When it held nothing any more: the first GPU reading after its
    /// detach that no longer lists it; its detach, when no GPU ever listed it.
    pub gone_ns: Option<u64>,
}

/// A process at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Moment {
    pub t_ns: u64,
    /// Its bytes on each GPU (by position), NVML's latest by then.
    pub on_gpu: BTreeMap<u32, u64>,
    /// The bytes of its objects of a size, by who made them, as its agent had
    /// reported them when the reading arrived.
    pub held_by: BTreeMap<Owner, u64>,
}

impl Moment {
    /// Its bytes on all GPUs.
    pub fn total(&self) -> u64 {
        self.on_gpu.values().sum()
    }

    pub fn held(&self) -> u64 {
        self.held_by.values().sum()
    }
}

/// A refused call of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct RanOutCall {
    pub api: String,
    pub status: String,
    pub end_ns: u64,
    pub asked_bytes: Option<u64>,
    pub driver_free_bytes: Option<u64>,
    pub moment: Moment,
}

/// One GPU and its readings.
#[derive(Debug, Clone)]
pub struct GpuLane {
    pub meta: GpuMeta,
    pub points: Vec<GpuPoint>,
    pub peak_used: u64,
    /// The most the program's processes held on it together, at one reading.
    pub program_peak: u64,
}

/// A reading of a GPU: memory in use by every process, and the program's
/// processes' bytes (None: NVML could not list them).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuPoint {
    pub t_ns: u64,
    pub used: u64,
    pub processes: Option<Vec<ProcessBytes>>,
}

impl GpuLane {
    fn push(&mut self, p: GpuPoint) {
        self.peak_used = self.peak_used.max(p.used);
        let program: u64 = p.processes.iter().flatten().filter_map(|p| p.bytes).sum();
        self.program_peak = self.program_peak.max(program);
        if self.points.len() >= LANE_POINTS {
            let old = std::mem::take(&mut self.points);
            self.points = old
                .chunks(2)
                .filter_map(|pair| pair.iter().max_by_key(|p| p.used).cloned())
                .collect();
        }
        self.points.push(p);
    }

    /// The program's processes' bytes on it at the latest reading.
    pub fn latest_processes(&self) -> Option<&[ProcessBytes]> {
        self.points.last()?.processes.as_deref()
    }
}

impl Ranks {
    /// The processes that used a GPU in the order their colours go, in the
    /// dashboard and the exports alike: by rank, then pid.
    pub fn colour_order(&self) -> Vec<u32> {
        let mut pids: Vec<(u32, u32)> = self
            .members
            .values()
            .filter(|m| !m.gpus_used.is_empty())
            .map(|m| (m.rank.as_ref().map_or(u32::MAX, |r| r.rank), m.pid))
            .collect();
        pids.sort_unstable();
        pids.into_iter().map(|(_, pid)| pid).collect()
    }

    /// The GPUs of a stream's `meta`.
    pub fn start(&mut self, gpus: &[GpuMeta]) {
        self.gpus = gpus
            .iter()
            .map(|meta| GpuLane {
                meta: meta.clone(),
                points: Vec::new(),
                peak_used: meta.baseline_bytes,
                program_peak: 0,
            })
            .collect();
    }

    /// An agent attached in process `pid`.
    pub fn attached(&mut self, pid: u32, parent_pid: u32, exe: &str, rank: Option<&Rank>) {
        let m = self.member(pid);
        m.parent_pid = parent_pid;
        m.exe = exe.to_string();
        if rank.is_some() {
            m.rank = rank.cloned();
        }
    }

    /// Process `pid`'s agent said its last record at `t_ns`; true when that
    /// makes it gone (no GPU lists it).
    pub fn detached(&mut self, pid: u32, t_ns: u64) -> bool {
        let m = self.member(pid);
        m.detached_ns = Some(t_ns);
        if m.on_gpu.is_empty() && m.gone_ns.is_none() {
            m.gone_ns = Some(t_ns);
            return true;
        }
        false
    }

    /// The processes that held nothing any more by `t_ns`.
    pub fn gone_by(&self, t_ns: u64) -> std::collections::BTreeSet<u32> {
        self.members
            .values()
            .filter(|m| m.gone_ns.is_some_and(|g| g <= t_ns))
            .map(|m| m.pid)
            .collect()
    }

    /// Makes sure `pid` has a place (a process refused before its agent's
    /// `attached` arrived).
    pub fn attached_if_unseen(&mut self, pid: u32) {
        self.member(pid);
    }

    fn member(&mut self, pid: u32) -> &mut Member {
        self.members.entry(pid).or_insert_with(|| Member {
            pid,
            ..Member::default()
        })
    }

    /// A reading of a GPU; returns the processes whose bytes on all GPUs
    /// together passed their peak with it (their moment is for the caller to
    /// take, with their objects).
    pub fn reading(&mut self, g: &GpuReading) -> Vec<u32> {
        let Some(lane) = self.gpus.get_mut(g.gpu as usize) else {
            return Vec::new();
        };
        lane.push(GpuPoint {
            t_ns: g.t_ns,
            used: g.used_bytes,
            processes: g.processes.clone(),
        });
        let Some(processes) = &g.processes else {
            return Vec::new();
        };
        // Gone from this GPU's list: nothing there any more.
        for m in self.members.values_mut() {
            if !processes.iter().any(|p| p.pid == m.pid) {
                m.on_gpu.remove(&g.gpu);
            }
        }
        for m in self.members.values_mut() {
            if m.detached_ns.is_some() && m.gone_ns.is_none() && m.on_gpu.is_empty() {
                m.gone_ns = Some(g.t_ns);
            }
        }
        let mut peaked = Vec::new();
        for p in processes {
            let m = self.member(p.pid);
            m.gpus_used.insert(g.gpu);
            match p.bytes {
                Some(b) => {
                    m.on_gpu.insert(g.gpu, b);
                }
                None => {
                    m.on_gpu.remove(&g.gpu);
                }
            }
            let total: u64 = m.on_gpu.values().sum();
            if total > m.peak_bytes {
                m.peak_bytes = total;
                peaked.push(p.pid);
            }
        }
        peaked
    }

    /// `pid` at `t_ns`, with `held_by` of its objects.
    pub fn moment(&self, pid: u32, t_ns: u64, held_by: BTreeMap<Owner, u64>) -> Moment {
        Moment {
            t_ns,
            on_gpu: self
                .members
                .get(&pid)
                .map(|m| m.on_gpu.clone())
                .unwrap_or_default(),
            held_by,
        }
    }

    /// The GPUs (positions) the program's processes were listed on.
    pub fn gpus_used(&self) -> std::collections::BTreeSet<u32> {
        self.members
            .values()
            .flat_map(|m| m.gpus_used.iter().copied())
            .collect()
    }

    /// The one-GPU figures (the sampler reads GPU 0) do not describe the
    /// program: it held memory on more than one GPU, or on another GPU than
    /// GPU 0 (`CUDA_VISIBLE_DEVICES=1`). One GPU's readings cannot then be
    /// set against all its objects.
    pub fn spread(&self) -> bool {
        let used = self.gpus_used();
        used.len() > 1 || used.iter().any(|&g| g != 0)
    }

    /// GPU `gpu`'s latest reading by `t_ns`.
    pub fn reading_at(&self, gpu: u32, t_ns: u64) -> Option<&GpuPoint> {
        let lane = self.gpus.get(gpu as usize)?;
        let after = lane.points.partition_point(|p| p.t_ns <= t_ns);
        after.checked_sub(1).and_then(|i| lane.points.get(i))
    }

    /// A process or GPU to show apart: more than one process held memory on
    /// a GPU, or a process said its rank, or the one-GPU figures do not
    /// describe the program ([`Ranks::spread`]).
    pub fn worth_showing(&self) -> bool {
        let on_gpus = self
            .members
            .values()
            .filter(|m| !m.gpus_used.is_empty())
            .count();
        on_gpus > 1 || self.spread() || self.members.values().any(|m| m.rank.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32) -> GpuMeta {
        GpuMeta {
            index,
            name: format!("GPU {index}"),
            pci_bus_id: None,
            total_bytes: 1 << 40,
            baseline_bytes: 100,
        }
    }

    fn reading(t: u64, gpu: u32, used: u64, procs: &[(u32, u64)]) -> GpuReading {
        GpuReading {
            t_ns: t,
            gpu,
            used_bytes: used,
            processes: Some(
                procs
                    .iter()
                    .map(|&(pid, b)| ProcessBytes {
                        pid,
                        bytes: Some(b),
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn each_process_is_followed_on_each_gpu_and_its_peak_found() {
        let mut r = Ranks::default();
        r.start(&[gpu(0), gpu(1)]);
        assert_eq!(r.reading(&reading(1, 0, 500, &[(10, 400)])), vec![10]);
        assert_eq!(r.reading(&reading(2, 1, 900, &[(11, 800)])), vec![11]);
        // Process 10 now on both GPUs: its total passes its peak.
        assert_eq!(
            r.reading(&reading(3, 1, 1000, &[(10, 100), (11, 800)])),
            vec![10]
        );
        assert_eq!(r.members[&10].on_gpu, BTreeMap::from([(0, 400), (1, 100)]));
        // Gone from GPU 1's list: nothing of it is there any more.
        assert!(r.reading(&reading(4, 1, 800, &[(11, 800)])).is_empty());
        assert_eq!(r.members[&10].on_gpu, BTreeMap::from([(0, 400)]));
        assert_eq!(
            r.members[&10].gpus_used,
            std::collections::BTreeSet::from([0, 1])
        );
        assert_eq!(r.gpus[1].peak_used, 1000);
        assert!(r.worth_showing());
    }

    #[test]
    fn one_process_on_gpu_0_is_the_one_chart_and_on_gpu_1_is_not() {
        let mut on0 = Ranks::default();
        on0.start(&[gpu(0), gpu(1)]);
        on0.reading(&reading(1, 0, 500, &[(10, 400)]));
        assert!(!on0.spread() && !on0.worth_showing());
        let mut on1 = Ranks::default();
        on1.start(&[gpu(0), gpu(1)]);
        on1.reading(&reading(1, 1, 500, &[(10, 400)]));
        assert!(on1.spread() && on1.worth_showing());
    }

    #[test]
    fn a_reading_of_a_gpu_the_meta_never_named_is_left_out() {
        let mut r = Ranks::default();
        r.start(&[gpu(0)]);
        assert!(r.reading(&reading(1, 7, 5, &[(10, 4)])).is_empty());
        assert!(r.members.is_empty());
        assert!(!r.worth_showing());
    }

    #[test]
    fn a_long_lane_is_thinned_keeping_its_peaks() {
        let mut lane = GpuLane {
            meta: gpu(0),
            points: Vec::new(),
            peak_used: 0,
            program_peak: 0,
        };
        for i in 0..(LANE_POINTS as u64 + 10) {
            let used = if i == 5001 { 1 << 30 } else { i };
            lane.push(GpuPoint {
                t_ns: i,
                used,
                processes: None,
            });
        }
        assert!(lane.points.len() <= LANE_POINTS);
        assert!(lane.points.iter().any(|p| p.used == 1 << 30));
        assert_eq!(lane.peak_used, 1 << 30);
    }
}
