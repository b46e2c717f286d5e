//! Each process of a program spread over a host's GPUs, composed as a program
//! of its own: a rank of a torchrun job holds its context, modules, NCCL's
//! buffers and PyTorch's cache on its GPU, and who holds that is the same
//! question the single-process composition answers, asked of its events and
//! of its GPU's readings alone.
//!
//! A view of process P is a [`Run`] fed P's own events (calls, objects,
//! stacks, spans, device reads, framework figures, its agent's attach and
//! detach) and, as its samples, the readings of the one GPU NVML lists it on:
//! that GPU's memory in use, P's bytes as NVML's per-process figure, and the
//! program's other processes on that GPU as the rest of the device. Which GPU
//! is known only once NVML lists P; until then P's events, and every GPU's
//! readings, wait in a bounded queue of its own, and are played into its view
//! in the order they arrived once it is. A process NVML lists on more than one
//! GPU has no view (a figure of one GPU set against objects on both would
//! explain nothing): it is said so.
//!
//! Views are kept on a host of more than one GPU only (where a program can
//! spread); a view keeps no views of its own.

use std::collections::BTreeMap;

use crate::trace::{
    AgentEvent, Event, GpuMeta, GpuReading, MemorySource, Meta, OtherProcess, ProcessBytes, Sample,
};

use super::Run;

/// The most processes a program is viewed in (each view is a run of its
/// own); those after are said not viewed.
pub const MAX_VIEWS: usize = 16;
/// The most events a process's queue keeps before NVML lists it on a GPU;
/// past it the process is not viewed (a process that makes that many calls
/// without a context holds nothing on a GPU to compose).
pub const QUEUE_KEPT: usize = 16_384;
/// The most events all the queues keep together (a hostile recording of
/// many processes that never reach a GPU stays bounded).
pub const QUEUED_KEPT: usize = 65_536;

/// The views of a watched program's processes.
#[derive(Debug, Clone)]
pub struct Views {
    /// The program's stream's meta, which each view's is made from.
    meta: Meta,
    /// Each GPU's latest reading, by position: where a process's queue starts.
    latest: Vec<Option<GpuReading>>,
    /// Processes NVML has not listed on a GPU yet, with their queue.
    waiting: BTreeMap<u32, Vec<Event>>,
    /// Composed processes, by pid.
    views: BTreeMap<u32, View>,
    /// Processes without a view, and why.
    unviewed: BTreeMap<u32, Unviewed>,
}

/// One process composed on its GPU.
#[derive(Debug, Clone)]
pub struct View {
    /// The GPU's position in the program's `meta.gpus`.
    pub gpu: u32,
    pub run: Run,
    /// The program's other processes on the GPU as last sent to the view.
    others: Option<Vec<OtherProcess>>,
}

/// Why a process of the program has no view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unviewed {
    /// NVML listed it on more than one GPU.
    OnManyGpus,
    /// Its queue filled before NVML listed it on a GPU.
    QueueFull,
    /// The program had [`MAX_VIEWS`] processes viewed or waiting already.
    TooMany,
}

impl Unviewed {
    pub fn text(self) -> String {
        match self {
            Unviewed::OnManyGpus => "it held memory on more than one GPU, and one GPU's figure \
                                     set against objects on several would explain nothing"
                .to_string(),
            Unviewed::QueueFull => format!(
                "too many of its events came before NVML listed it on a GPU ({QUEUE_KEPT} of \
                 its own, {QUEUED_KEPT} of all processes waiting), more than gpulab keeps to \
                 compose it"
            ),
            Unviewed::TooMany => format!(
                "the program had {MAX_VIEWS} processes composed apart already, the most gpulab \
                 keeps"
            ),
        }
    }
}

impl Views {
    /// Views for the program of `meta`: on a host of more than one GPU, of a
    /// watched program.
    pub fn of(meta: &Meta) -> Option<Views> {
        (meta.watch.is_some() && meta.gpus.len() > 1).then(|| Views {
            meta: meta.clone(),
            latest: vec![None; meta.gpus.len()],
            waiting: BTreeMap::new(),
            views: BTreeMap::new(),
            unviewed: BTreeMap::new(),
        })
    }

    /// The view of process `pid`.
    pub fn get(&self, pid: u32) -> Option<&View> {
        self.views.get(&pid)
    }

    /// Every view, by pid.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &View)> {
        self.views.iter().map(|(pid, v)| (*pid, v))
    }

    /// Why process `pid` has no view, where one was refused.
    pub fn unviewed(&self, pid: u32) -> Option<Unviewed> {
        self.unviewed.get(&pid).copied()
    }

    /// One event of the program's stream, in the order it arrived.
    pub fn event(&mut self, e: &Event) {
        match e {
            Event::GpuReading(g) => self.gpu_reading(g),
            Event::End(_) => {
                for v in self.views.values_mut() {
                    v.run.apply(e);
                }
            }
            _ => {
                if let Some(pid) = pid_of(e) {
                    self.own(pid, e);
                }
            }
        }
    }

    /// An event of process `pid`'s own.
    fn own(&mut self, pid: u32, e: &Event) {
        if let Some(v) = self.views.get_mut(&pid) {
            v.run.apply(e);
            return;
        }
        if self.unviewed.contains_key(&pid) {
            return;
        }
        if !self.waiting.contains_key(&pid) {
            if self.waiting.len() + self.views.len() >= MAX_VIEWS {
                self.unviewed.insert(pid, Unviewed::TooMany);
                return;
            }
            let queue = self.latest.iter().flatten().cloned().map(Event::GpuReading);
            self.waiting.insert(pid, queue.collect());
        }
        let queued: usize = self.waiting.values().map(Vec::len).sum();
        let full = self.waiting.get_mut(&pid).is_some_and(|q| {
            q.push(e.clone());
            q.len() >= QUEUE_KEPT || queued >= QUEUED_KEPT
        });
        if full {
            self.waiting.remove(&pid);
            self.unviewed.insert(pid, Unviewed::QueueFull);
            return;
        }
        // NVML listed it before its agent's first event arrived.
        let on: Vec<u32> = self
            .latest
            .iter()
            .flatten()
            .filter(|g| lists(g, pid))
            .map(|g| g.gpu)
            .collect();
        match on.as_slice() {
            [] => {}
            [gpu] => self.start(pid, *gpu),
            _ => {
                self.waiting.remove(&pid);
                self.unviewed.insert(pid, Unviewed::OnManyGpus);
            }
        }
    }

    /// Process `pid`'s view on GPU `gpu`, from its queue.
    fn start(&mut self, pid: u32, gpu: u32) {
        if let Some(queue) = self.waiting.remove(&pid) {
            self.views
                .insert(pid, View::start(&self.meta, pid, gpu, queue));
        }
    }

    fn gpu_reading(&mut self, g: &GpuReading) {
        if let Some(slot) = self.latest.get_mut(g.gpu as usize) {
            *slot = Some(g.clone());
        } else {
            return;
        }
        let listed: Vec<u32> = g
            .processes
            .iter()
            .flatten()
            .filter(|p| lists(g, p.pid))
            .map(|p| p.pid)
            .collect();
        // A viewed process listed on a second GPU is viewed no more.
        for pid in &listed {
            if self.views.get(pid).is_some_and(|v| v.gpu != g.gpu) {
                self.views.remove(pid);
                self.unviewed.insert(*pid, Unviewed::OnManyGpus);
            }
        }
        for (pid, v) in self.views.iter_mut() {
            if v.gpu == g.gpu {
                v.feed(*pid, g, self.meta.gpus.get(g.gpu as usize));
            }
        }
        for queue in self.waiting.values_mut() {
            queue.push(Event::GpuReading(g.clone()));
        }
        // A process that never reaches a GPU waits on every reading: bounded.
        let full: Vec<u32> = self
            .waiting
            .iter()
            .filter(|(_, q)| q.len() >= QUEUE_KEPT)
            .map(|(pid, _)| *pid)
            .collect();
        for pid in full {
            self.waiting.remove(&pid);
            self.unviewed.insert(pid, Unviewed::QueueFull);
        }
        for pid in listed {
            self.start(pid, g.gpu);
        }
    }
}

impl View {
    /// The view of `pid` on GPU `gpu` (a position in `meta.gpus`), its queue
    /// played into it.
    fn start(meta: &Meta, pid: u32, gpu: u32, queue: Vec<Event>) -> View {
        let mut view = View {
            gpu,
            run: Run::default(),
            others: None,
        };
        let gpu_meta = meta.gpus.get(gpu as usize);
        view.run
            .apply(&Event::Meta(Box::new(meta_on(meta, gpu_meta))));
        for e in queue {
            match &e {
                Event::GpuReading(g) if g.gpu == gpu => view.feed(pid, g, gpu_meta),
                Event::GpuReading(_) => {}
                _ => view.run.apply(&e),
            }
        }
        view
    }

    /// A reading of its GPU, as its view's sample: the GPU's memory in use,
    /// the process's NVML figure, and the program's other processes there as
    /// the rest of the device (said when they change).
    fn feed(&mut self, pid: u32, g: &GpuReading, gpu: Option<&GpuMeta>) {
        let processes = g.processes.as_deref().unwrap_or_default();
        let own = processes.iter().find(|p| p.pid == pid);
        let others: Vec<OtherProcess> = processes
            .iter()
            .filter(|p| p.pid != pid)
            .map(|p| OtherProcess {
                pid: p.pid,
                name: None,
                bytes: p.bytes,
            })
            .collect();
        let changed = self.others.as_ref() != Some(&others);
        if changed {
            self.others = Some(others.clone());
        }
        self.run.apply(&Event::Sample(Sample {
            t_ns: g.t_ns,
            source: MemorySource::Nvml,
            used_bytes: g.used_bytes,
            total_bytes: gpu.map(|m| m.total_bytes),
            process_bytes: g
                .processes
                .as_ref()
                .map(|_| own.and_then(|p| p.bytes).unwrap_or(0)),
            others: changed.then_some(others),
        }));
        self.run.apply(&Event::GpuReading(GpuReading {
            t_ns: g.t_ns,
            gpu: 0,
            used_bytes: g.used_bytes,
            processes: g.processes.as_ref().map(|_| {
                own.into_iter()
                    .map(|p| ProcessBytes {
                        pid: p.pid,
                        bytes: p.bytes,
                    })
                    .collect()
            }),
        }));
    }
}

/// The meta of a view on GPU `gpu`: the program's, its device that GPU.
fn meta_on(meta: &Meta, gpu: Option<&GpuMeta>) -> Meta {
    let mut m = meta.clone();
    if let Some(g) = gpu {
        m.device.name = g.name.clone();
        m.device.total_bytes = Some(g.total_bytes);
        m.device.pci_bus_id = g.pci_bus_id.clone();
        m.device.memory_source = MemorySource::Nvml;
        m.baseline_bytes = Some(g.baseline_bytes);
        m.gpus = vec![g.clone()];
    } else {
        m.gpus = Vec::new();
    }
    m
}

/// Whether reading `g` lists process `pid` with memory on its GPU.
fn lists(g: &GpuReading, pid: u32) -> bool {
    g.processes
        .iter()
        .flatten()
        .any(|p| p.pid == pid && p.bytes.is_some_and(|b| b > 0))
}

/// The process an event of an agent's is of.
fn pid_of(e: &Event) -> Option<u32> {
    let of_id = |id: u64| (id >> 32) as u32;
    match e {
        Event::Call(c) => Some(c.pid),
        Event::Object(o) => Some(of_id(o.id)),
        Event::DeviceSpan(s) => Some(of_id(s.queue)),
        Event::Stack(s) => Some(of_id(s.id)),
        Event::Framework(f) => Some(f.pid),
        Event::DeviceRead(r) => Some(r.pid),
        Event::Agent(AgentEvent { pid, .. }) => Some(*pid),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Rng, meta, watched};
    use crate::trace::{
        AgentState, Call, CallStatus, End, EndStatus, ObjKind, ObjectAction, ObjectEvent, Rank,
    };

    const MIB: u64 = 1 << 20;
    const MS: u64 = 1_000_000;

    /// `gpulab watch -- torchrun …` on a host of `gpus` GPUs.
    fn job_meta(gpus: u32) -> Meta {
        Meta {
            watch: Some(watched("torchrun", 1)),
            gpus: (0..gpus)
                .map(|index| GpuMeta {
                    index,
                    name: "H200".into(),
                    pci_bus_id: None,
                    total_bytes: 140 << 30,
                    baseline_bytes: 0,
                })
                .collect(),
            ..meta()
        }
    }

    fn attached(t: u64, pid: u32, rank: u32) -> Event {
        Event::Agent(AgentEvent {
            t_ns: t,
            pid,
            parent_pid: 1,
            api: "cuda".into(),
            state: AgentState::Attached {
                exe: "python3".into(),
                destruction: vec![ObjKind::Context],
                rank: Some(Rank {
                    rank,
                    local_rank: Some(rank),
                    world_size: None,
                    from: "RANK".into(),
                }),
            },
        })
    }

    fn object(t: u64, pid: u32, id: u64, kind: ObjKind, action: ObjectAction, bytes: u64) -> Event {
        Event::Object(ObjectEvent {
            t_ns: t,
            id: (u64::from(pid) << 32) | id,
            kind,
            action,
            handle: None,
            bytes,
            refcount: u32::from(action == ObjectAction::Created),
            refs: Vec::new(),
            line: None,
            stack: None,
        })
    }

    fn call(begin: u64, end: u64, pid: u32, api: &str, id: u64) -> Event {
        Event::Call(Call {
            pid,
            begin_ns: begin,
            end_ns: end,
            api: api.into(),
            status: CallStatus::Ok,
            object: Some((u64::from(pid) << 32) | id),
            ..Call::default()
        })
    }

    fn reading(t: u64, gpu: u32, listed: &[(u32, u64)]) -> Event {
        Event::GpuReading(crate::testing::gpu_reading(t, gpu, 4 * MIB, listed))
    }

    fn end(t: u64) -> Event {
        Event::End(End {
            t_ns: t,
            status: EndStatus::Finished,
            leaked: Vec::new(),
        })
    }

    /// One rank's life on its own GPU: a context of its own size, then
    /// buffers made and freed, NVML's reading of its GPU after each change.
    /// Returns its events in time order and the most it held.
    fn rank_life(rng: &mut Rng, pid: u32, gpu: u32) -> (Vec<Event>, u64) {
        let mut t = 10 * MS + rng.below(50) * MS;
        let context = (300 + rng.below(400)) * MIB;
        let mut events = vec![
            attached(t, pid, gpu),
            reading(t + MS, gpu, &[]),
            object(
                t + 3 * MS,
                pid,
                1,
                ObjKind::Context,
                ObjectAction::Created,
                0,
            ),
            call(t + 2 * MS, t + 4 * MS, pid, "cuDevicePrimaryCtxRetain", 1),
            reading(t + 6 * MS, gpu, &[(pid, context)]),
        ];
        t += 10 * MS;
        let (mut held, mut live, mut most) = (context, Vec::new(), context);
        for id in 2..2 + rng.below(12) {
            if !live.is_empty() && rng.chance(30) {
                let (id, bytes) = live.swap_remove(rng.below(live.len() as u64) as usize);
                events.push(object(
                    t,
                    pid,
                    id,
                    ObjKind::Buffer,
                    ObjectAction::Released,
                    bytes,
                ));
                events.push(call(t, t + MS / 10, pid, "cuMemFree", id));
                held -= bytes;
            } else {
                let bytes = (1 + rng.below(64)) * 2 * MIB;
                events.push(object(
                    t,
                    pid,
                    id,
                    ObjKind::Buffer,
                    ObjectAction::Created,
                    bytes,
                ));
                events.push(call(t, t + MS / 10, pid, "cuMemAlloc", id));
                live.push((id, bytes));
                held += bytes;
            }
            most = most.max(held);
            events.push(reading(t + 2 * MS, gpu, &[(pid, held)]));
            t += 5 * MS + rng.below(20) * MS;
        }
        (events, most)
    }

    /// Many ranks' lives merged as a reader merges their records: each
    /// rank's in its own order, the ranks' interleaved at random.
    fn merged(rng: &mut Rng, mut lives: Vec<Vec<Event>>) -> Vec<Event> {
        let mut out = Vec::new();
        for life in &mut lives {
            life.reverse();
        }
        while lives.iter().any(|l| !l.is_empty()) {
            let open: Vec<usize> = (0..lives.len()).filter(|&i| !lives[i].is_empty()).collect();
            let pick = open[rng.below(open.len() as u64) as usize];
            if let Some(e) = lives[pick].pop() {
                out.push(e);
            }
        }
        out
    }

    /// A job of two to four ranks, one per GPU, over 200 seeds: each rank
    /// composed apart names all of its memory at its peak and at exit, and
    /// its peak is the most NVML said it held.
    #[test]
    fn each_rank_of_a_generated_job_is_named_whole_on_its_gpu() {
        for seed in 1..=200u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let ranks = 2 + rng.below(3) as u32;
            let mut lives = Vec::new();
            let mut most = BTreeMap::new();
            for r in 0..ranks {
                let (events, peak) = rank_life(&mut rng, 100 + r, r);
                lives.push(events);
                most.insert(100 + r, peak);
            }
            let mut events = vec![Event::Meta(Box::new(job_meta(ranks)))];
            events.extend(merged(&mut rng, lives));
            events.push(end(10_000 * MS));
            let run = Run::from_events(&events);
            let views = run.views().expect("views on a host of many GPUs");
            for (pid, peak) in most {
                let v = views
                    .get(pid)
                    .unwrap_or_else(|| panic!("seed {seed}: pid {pid} not composed"));
                assert_eq!(v.gpu, pid - 100, "seed {seed}");
                let at_peak = v.run.holders_at_peak().expect("a peak");
                let at_exit = v.run.holders().expect("an exit");
                assert_eq!(at_peak.total, peak, "seed {seed} pid {pid}: {at_peak:?}");
                for h in [at_peak, &at_exit] {
                    assert_eq!(h.unexplained(), 0, "seed {seed} pid {pid}: {h:?}");
                }
            }
        }
    }

    /// A process NVML lists on two GPUs is said, not composed; one listed
    /// before its agent's first record arrived is composed from then.
    #[test]
    fn a_process_on_two_gpus_is_not_composed_apart() {
        let events = vec![
            Event::Meta(Box::new(job_meta(2))),
            reading(MS, 0, &[(7, 530 * MIB)]),
            attached(2 * MS, 7, 0),
            attached(2 * MS, 8, 1),
            reading(3 * MS, 1, &[(7, 530 * MIB), (8, 530 * MIB)]),
            end(10 * MS),
        ];
        let run = Run::from_events(&events);
        let views = run.views().expect("views");
        assert_eq!(views.unviewed(7), Some(Unviewed::OnManyGpus));
        assert!(views.get(7).is_none());
        assert_eq!(views.get(8).map(|v| v.gpu), Some(1));
    }

    /// A process that makes more calls than a queue keeps before any GPU
    /// lists it, and processes past the most viewed, are said, not kept.
    #[test]
    fn what_is_not_kept_is_said() {
        let mut events = vec![Event::Meta(Box::new(job_meta(2))), attached(0, 7, 0)];
        for i in 0..QUEUE_KEPT as u64 {
            events.push(call(i, i + 1, 7, "cuDeviceGetAttribute", 0));
        }
        for pid in 0..MAX_VIEWS as u32 + 1 {
            events.push(attached(MS, 1_000 + pid, 0));
        }
        let run = Run::from_events(&events);
        let views = run.views().expect("views");
        assert_eq!(views.unviewed(7), Some(Unviewed::QueueFull));
        assert_eq!(
            views.unviewed(1_000 + MAX_VIEWS as u32),
            Some(Unviewed::TooMany)
        );
        assert!(Unviewed::TooMany.text().contains("16"));
        // A process that never reaches a GPU waits on every reading: its
        // queue is bounded by them too.
        let mut events = vec![Event::Meta(Box::new(job_meta(2))), attached(0, 9, 0)];
        for i in 0..QUEUE_KEPT as u64 {
            events.push(reading(i * MS, 0, &[(8, (i % 7 + 1) * MIB)]));
        }
        let run = Run::from_events(&events);
        assert_eq!(
            run.views().and_then(|v| v.unviewed(9)),
            Some(Unviewed::QueueFull)
        );
    }

    /// One GPU: no views (the program's table is of all its processes).
    #[test]
    fn a_host_of_one_gpu_keeps_no_views() {
        let run = Run::from_events(&[Event::Meta(Box::new(job_meta(1)))]);
        assert!(run.views().is_none());
    }
}
