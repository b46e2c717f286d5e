//! A watched program per process and per GPU: what each rank of a job held on
//! which GPU at its peak and when memory ran out (`gpulab watch -- torchrun …`).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::run::Run;
use crate::run::views::Unviewed;

use super::holders::HoldersReport;
use crate::run::owners::Owner;
use crate::run::ranks::{Member, Moment};
use crate::trace::Rank;
use crate::units::mib;

/// One process of the program that held memory on a GPU or said its rank.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RankReport {
    pub pid: u32,
    pub parent_pid: u32,
    pub exe: String,
    /// Its rank, as its launcher told it; absent outside a job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<Rank>,
    /// The GPUs (NVML indices) NVML ever listed it on.
    pub gpus: Vec<u32>,
    /// When it held the most device memory on all GPUs together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak: Option<MomentReport>,
    /// Its first call refused for want of memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ran_out: Option<RankRanOut>,
    /// Where it stood when the program's first refusal came (in this
    /// process or another).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_first_ran_out: Option<MomentReport>,
    /// The bytes of the objects of a size it still held when the stream
    /// ended (what it never released, as its agent reported it), by who
    /// made them.
    pub objects_at_end_bytes: u64,
    pub objects_at_end_by: BTreeMap<String, u64>,
    /// Who held its memory, composed as a program of its own: its events,
    /// and the readings of the one GPU NVML listed it on (its bytes there,
    /// the program's other processes as the rest of the GPU). Absent on a
    /// host of one GPU (the program's table is of every process together)
    /// and where it could not be composed apart (`not_composed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holders: Option<HoldersReport>,
    /// Why it was not composed apart, on a host of many GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_composed: Option<String>,
}

/// A process at one moment: NVML's bytes of it on each GPU, and what its own
/// objects held then.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MomentReport {
    /// ms in the run.
    pub t_ms: f64,
    /// Its bytes on each GPU it was listed on (NVML, the latest reading by
    /// then), by NVML index.
    pub on_gpu: Vec<OnGpu>,
    /// All of them together.
    pub device_bytes: u64,
    /// The bytes of the objects of a size it held then, as its agent had
    /// reported them.
    pub objects_bytes: u64,
    /// `objects_bytes` by who called the driver for them (`nccl`, `pytorch`,
    /// `program`, …; `unknown` without a stack).
    pub objects_by: BTreeMap<String, u64>,
    /// `device_bytes` less `objects_bytes`: its context, modules and what no
    /// object the agent saw accounts for; negative when the objects were
    /// reported ahead of the reading.
    pub outside_objects_bytes: i64,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OnGpu {
    pub gpu: u32,
    pub bytes: u64,
}

/// A process's first refused call.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RankRanOut {
    pub api: String,
    pub status: String,
    /// ms in the run, when the call returned.
    pub t_ms: f64,
    /// The program's first refusal of all.
    pub first: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_free_bytes: Option<u64>,
    pub then: MomentReport,
}

/// A GPU of the host, as the watch read it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GpuReport {
    /// NVML's index.
    pub index: u32,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    pub total_bytes: u64,
    /// In use by every process before the program started.
    pub baseline_bytes: u64,
    /// The most in use by every process while it ran.
    pub peak_used_bytes: u64,
    /// The most the program's processes held on it together (NVML's
    /// per-process figures, summed at one reading).
    pub program_peak_bytes: u64,
    /// The program's processes NVML listed on it.
    pub pids: Vec<u32>,
}

/// The program's processes worth a line each, by rank then pid; empty for a
/// program of one process on one GPU outside a job.
pub fn ranks(run: &Run) -> Vec<RankReport> {
    if !run.ranks().worth_showing() {
        return Vec::new();
    }
    let start = run.meta().map_or(0, |m| m.t_ns);
    let first = run.ranks().first_ran_out.map(|(pid, _)| pid);
    let index = |pos: u32| {
        run.ranks()
            .gpus
            .get(pos as usize)
            .map_or(pos, |g| g.meta.index)
    };
    let moment = |m: &Moment| moment_report(m, start, &index);
    let mut out: Vec<RankReport> = run
        .ranks()
        .members
        .values()
        .filter(|m| !m.gpus_used.is_empty() || m.rank.is_some() || m.ran_out.is_some())
        .map(|m: &Member| RankReport {
            pid: m.pid,
            parent_pid: m.parent_pid,
            exe: m.exe.clone(),
            rank: m.rank.clone(),
            gpus: m.gpus_used.iter().map(|&g| index(g)).collect(),
            peak: m.peak.as_ref().map(&moment),
            ran_out: m.ran_out.as_ref().map(|r| RankRanOut {
                api: r.api.clone(),
                status: r.status.clone(),
                t_ms: r.end_ns.saturating_sub(start) as f64 / 1e6,
                first: first == Some(m.pid),
                asked_bytes: r.asked_bytes,
                driver_free_bytes: r.driver_free_bytes,
                then: moment(&r.moment),
            }),
            at_first_ran_out: m.at_first_ran_out.as_ref().map(&moment),
            objects_at_end_bytes: run.held_by_process(m.pid).values().sum(),
            objects_at_end_by: by_name(&run.held_by_process(m.pid)),
            holders: run
                .views()
                .and_then(|v| v.get(m.pid))
                .and_then(|v| HoldersReport::of(&v.run)),
            not_composed: run
                .views()
                .and_then(|v| v.unviewed(m.pid))
                .filter(|_| !m.gpus_used.is_empty())
                .map(Unviewed::text),
        })
        .collect();
    out.sort_by_key(|r| (r.rank.as_ref().map_or(u32::MAX, |k| k.rank), r.pid));
    out
}

fn moment_report(m: &Moment, start: u64, index: &dyn Fn(u32) -> u32) -> MomentReport {
    let device_bytes = m.total();
    let objects_bytes = m.held();
    MomentReport {
        t_ms: m.t_ns.saturating_sub(start) as f64 / 1e6,
        on_gpu: m
            .on_gpu
            .iter()
            .map(|(&g, &bytes)| OnGpu {
                gpu: index(g),
                bytes,
            })
            .collect(),
        device_bytes,
        objects_bytes,
        objects_by: by_name(&m.held_by),
        outside_objects_bytes: device_bytes as i64 - objects_bytes as i64,
    }
}

fn by_name(by: &BTreeMap<Owner, u64>) -> BTreeMap<String, u64> {
    by.iter()
        .map(|(o, b)| (o.as_str().to_string(), *b))
        .collect()
}

/// `NCCL 1024.0, PyTorch 64.0`: largest first, in MiB.
fn owners_line(by: &BTreeMap<String, u64>) -> String {
    let mut by: Vec<(&String, &u64)> = by.iter().filter(|(_, b)| **b > 0).collect();
    by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    by.iter()
        .map(|(o, b)| format!("{} {:.1}", Owner::label_of(o), mib(**b)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every GPU the stream read.
pub fn gpus(run: &Run) -> Vec<GpuReport> {
    run.ranks()
        .gpus
        .iter()
        .enumerate()
        .map(|(pos, lane)| GpuReport {
            index: lane.meta.index,
            name: lane.meta.name.clone(),
            pci_bus_id: lane.meta.pci_bus_id.clone(),
            total_bytes: lane.meta.total_bytes,
            baseline_bytes: lane.meta.baseline_bytes,
            peak_used_bytes: lane.peak_used,
            program_peak_bytes: lane.program_peak,
            pids: run
                .ranks()
                .members
                .values()
                .filter(|m| m.gpus_used.contains(&(pos as u32)))
                .map(|m| m.pid)
                .collect(),
        })
        .collect()
}

impl GpuReport {
    /// `GPU 1 NVIDIA H200 (00000000:00:07.0): the program's processes held at most …`
    pub fn line(&self) -> String {
        format!(
            "GPU {} {}{}: the program's processes held at most {:.1} MiB at once (NVML); \
             at most {:.1} MiB in use by every process, {:.1} MiB before the program started, \
             of {:.1} MiB",
            self.index,
            self.name,
            self.pci_bus_id
                .as_ref()
                .map(|b| format!(" ({b})"))
                .unwrap_or_default(),
            mib(self.program_peak_bytes),
            mib(self.peak_used_bytes),
            mib(self.baseline_bytes),
            mib(self.total_bytes)
        )
    }
}

impl RankReport {
    /// `rank 1 of 2 (pid 4242, python3)`, or `pid 4242 (python3)` outside a job.
    pub fn who(&self) -> String {
        let exe = self.exe.rsplit('/').next().unwrap_or(&self.exe);
        let exe = if exe.is_empty() { "?" } else { exe };
        match &self.rank {
            Some(r) => format!(
                "rank {}{} (pid {}, {exe})",
                r.rank,
                r.world_size.map(|w| format!(" of {w}")).unwrap_or_default(),
                self.pid
            ),
            None => format!("pid {} ({exe})", self.pid),
        }
    }

    /// The report's lines for it; `nvml`: the watch read the host's GPUs.
    pub fn lines(&self, nvml: bool) -> Vec<String> {
        let mut out = vec![format!(
            "  {}{}",
            self.who(),
            match self.gpus.as_slice() {
                [] if nvml => ", on no GPU NVML listed".to_string(),
                [] => ", no GPU readings (NVML sees no GPU here)".to_string(),
                gpus => format!(
                    ", on GPU {}",
                    gpus.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        )];
        if let Some(p) = &self.peak {
            out.push(format!("    at its peak, {}", p.line()));
        }
        if let Some(r) = &self.ran_out {
            let mut line = format!(
                "    ran out{} at {:.1} ms: {} returned {}",
                if r.first { " first" } else { "" },
                r.t_ms,
                r.api,
                r.status
            );
            if let Some(asked) = r.asked_bytes {
                let _ = write!(line, " for {:.1} MiB", mib(asked));
            }
            if let Some(free) = r.driver_free_bytes {
                let _ = write!(line, " with {:.1} MiB free", mib(free));
            }
            out.push(line);
            out.push(format!("      then {}", r.then.line()));
        } else if let Some(m) = &self.at_first_ran_out {
            out.push(format!(
                "    when the first process ran out ({:.1} ms), {}",
                m.t_ms,
                m.line()
            ));
        }
        if self.objects_at_end_bytes > 0 {
            out.push(format!(
                "    at the end, its objects still held {:.1} MiB ({})",
                mib(self.objects_at_end_bytes),
                owners_line(&self.objects_at_end_by)
            ));
        }
        if let Some(h) = &self.holders {
            out.push(
                "    who holds it, this process alone on its GPU (MiB; each reserve in the JSON \
                 report):"
                    .to_string(),
            );
            out.extend(h.brief().into_iter().map(|l| format!("      {l}")));
        } else if let Some(why) = &self.not_composed {
            out.push(format!("    not composed apart: {why}"));
        }
        out
    }
}

impl MomentReport {
    /// `1536.0 MiB on GPU 0 (NVML): objects 1088.0 MiB (NCCL 1024.0, PyTorch 64.0), 448.0 MiB outside them`
    pub fn line(&self) -> String {
        let on = self
            .on_gpu
            .iter()
            .map(|g| format!("{:.1} MiB on GPU {}", mib(g.bytes), g.gpu))
            .collect::<Vec<_>>()
            .join(" + ");
        let on = if on.is_empty() {
            "nothing NVML listed".to_string()
        } else {
            format!("{on} (NVML)")
        };
        let mut by: Vec<(&String, &u64)> =
            self.objects_by.iter().filter(|(_, b)| **b > 0).collect();
        by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let by = by
            .iter()
            .map(|(o, b)| format!("{} {:.1}", Owner::label_of(o), mib(**b)))
            .collect::<Vec<_>>()
            .join(", ");
        let mut line = format!("{on}: its objects {:.1} MiB", mib(self.objects_bytes));
        if !by.is_empty() {
            let _ = write!(line, " ({by})");
        }
        if self.outside_objects_bytes >= 0 {
            let _ = write!(
                line,
                ", {:.1} MiB in no object (its context, modules, what the agent did not see)",
                mib(self.outside_objects_bytes as u64)
            );
        } else {
            let _ = write!(
                line,
                ", {:.1} MiB more than NVML's figure (objects reported before the reading)",
                mib(self.outside_objects_bytes.unsigned_abs())
            );
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use crate::trace::{
        AgentEvent, AgentState, BackendKind, Call, CallStatus, Event, Frame, GpuMeta, GpuReading,
        Meta, ObjKind, ObjectAction, ObjectEvent, ProcessBytes, Refusal, Stack,
    };

    const MIB: u64 = 1 << 20;
    const MS: u64 = 1_000_000;

    fn attached(pid: u32, rank: u32) -> Event {
        Event::Agent(AgentEvent {
            t_ns: MS,
            pid,
            parent_pid: 1,
            api: "cuda".into(),
            state: AgentState::Attached {
                exe: "/usr/bin/python3".into(),
                destruction: Vec::new(),
                rank: Some(Rank {
                    rank,
                    local_rank: Some(rank),
                    world_size: Some(2),
                    from: "RANK".into(),
                }),
            },
        })
    }

    fn stack(id: u64, module: &str) -> Event {
        Event::Stack(Stack {
            t_ns: MS,
            id,
            frames: vec![Frame {
                module: module.into(),
                address: 0x10,
                build_id: None,
                function: None,
                location: None,
                python: false,
            }],
        })
    }

    fn buffer(t: u64, pid: u32, n: u64, mib: u64, stack: u64) -> Event {
        Event::Object(ObjectEvent {
            t_ns: t * MS,
            id: (u64::from(pid) << 32) | n,
            kind: ObjKind::Buffer,
            action: ObjectAction::Created,
            handle: None,
            bytes: mib * MIB,
            refcount: 1,
            refs: Vec::new(),
            line: None,
            stack: Some(stack),
        })
    }

    fn reading(t: u64, gpu: u32, procs: &[(u32, u64)]) -> Event {
        Event::GpuReading(GpuReading {
            t_ns: t * MS,
            gpu,
            used_bytes: procs.iter().map(|p| p.1).sum::<u64>() * MIB,
            processes: Some(
                procs
                    .iter()
                    .map(|&(pid, mib)| ProcessBytes {
                        pid,
                        bytes: Some(mib * MIB),
                    })
                    .collect(),
            ),
        })
    }

    /// Two ranks of a job, one GPU each: NCCL's buffers and PyTorch's apart
    /// per rank, rank 1 refused first, rank 0's place at that moment kept.
    fn job() -> Run {
        let mut meta = Meta {
            backend: BackendKind::OpenCl,
            platform: String::new(),
            baseline_bytes: Some(0),
            watch: Some(testing::watched("torchrun", 1)),
            ..testing::meta()
        };
        meta.device.name = "NVIDIA H200".into();
        meta.device.vendor = "NVIDIA Corporation".into();
        meta.device.driver_version = "580".into();
        meta.device.total_bytes = Some(140 << 30);
        meta.gpus = (0..2)
            .map(|index| GpuMeta {
                index,
                name: "NVIDIA H200".into(),
                pci_bus_id: None,
                total_bytes: 140 << 30,
                baseline_bytes: 0,
            })
            .collect();
        let events = vec![
            Event::Meta(Box::new(meta)),
            attached(100, 0),
            attached(101, 1),
            stack(
                1,
                "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
            ),
            stack(
                2,
                "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
            ),
            buffer(10, 100, 1, 1024, 1),
            buffer(11, 100, 2, 64, 2),
            buffer(10, 101, 1, 1024, 1),
            buffer(11, 101, 2, 128, 2),
            reading(20, 0, &[(100, 1600)]),
            reading(20, 1, &[(101, 1700)]),
            Event::Call(Call {
                seq: 9,
                pid: 101,
                begin_ns: 30 * MS,
                end_ns: 31 * MS,
                api: "cuMemAlloc_v2".into(),
                status: CallStatus::Error {
                    code: 2,
                    name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
                },
                refused: Some(Box::new(Refusal {
                    asked_bytes: Some(200 << 30),
                    free_bytes: Some(100 << 30),
                    stack: None,
                })),
                ..Call::default()
            }),
        ];
        Run::from_events(&events)
    }

    #[test]
    fn each_rank_has_its_gpu_its_nccl_share_and_the_first_to_run_out_is_named() {
        let run = job();
        let ranks = ranks(&run);
        assert_eq!(ranks.len(), 2);
        let (r0, r1) = (&ranks[0], &ranks[1]);
        assert_eq!((r0.pid, r0.gpus.as_slice()), (100, &[0][..]));
        assert_eq!((r1.pid, r1.gpus.as_slice()), (101, &[1][..]));
        let peak = r0.peak.as_ref().expect("rank 0 peaked");
        assert_eq!(peak.device_bytes, 1600 * MIB);
        assert_eq!(peak.objects_by["nccl"], 1024 * MIB);
        assert_eq!(peak.objects_by["pytorch"], 64 * MIB);
        assert_eq!(
            peak.outside_objects_bytes,
            (1600 - 1088) as i64 * MIB as i64
        );
        let out = r1.ran_out.as_ref().expect("rank 1 ran out");
        assert!(out.first);
        assert_eq!(out.asked_bytes, Some(200 << 30));
        assert_eq!(out.then.objects_by["pytorch"], 128 * MIB);
        assert!(r0.ran_out.is_none());
        let then = r0.at_first_ran_out.as_ref().expect("rank 0's place then");
        assert_eq!(then.device_bytes, 1600 * MIB);
        let text = r1.lines(true).join("\n");
        assert!(
            text.contains("rank 1 of 2 (pid 101, python3), on GPU 1"),
            "{text}"
        );
        assert!(text.contains("ran out first at 31.0 ms"), "{text}");
        assert!(text.contains("NCCL 1024.0"), "{text}");
    }

    #[test]
    fn the_oom_record_names_the_rank_first_to_run_out_and_keeps_one_dump_per_rank() {
        let report = crate::report::WatchReport::from_run(&job());
        let oom = serde_json::to_value(report.out_of_memory()).expect("serialises");
        assert_eq!(oom["first_to_run_out"]["rank"], 1);
        assert_eq!(oom["first_to_run_out"]["pid"], 101);
        assert_eq!(oom["ranks"].as_array().map(Vec::len), Some(2));
        assert_eq!(oom["ranks"][0]["at_first_ran_out"]["on_gpu"][0]["gpu"], 0);
    }
}
