//! Who holds the process's memory at a moment: each byte of the latest
//! reading of the process's own memory (NVML's figure for its processes, or
//! their RSS) falls in one named share, and what no share explains is said as
//! unexplained, with its size. Read from the live index and the measured
//! reserves, never a walk of every object.

use std::collections::BTreeMap;

use crate::trace::ObjKind;

use super::Run;
use super::owners::Owner;
use super::reserves::device_sized_kind;

/// The shares of one reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holders {
    /// When the reading was taken.
    pub at_ns: u64,
    /// The process's memory then.
    pub total: u64,
    /// Objects the program holds whose making call said their size, less
    /// what its frameworks' allocators keep cached in them.
    pub held: u64,
    /// What the frameworks' allocators hold from the driver but the
    /// program's tensors or arrays do not use, by their own latest figures
    /// (at most what the objects hold).
    pub cached: u64,
    /// `held` by who made the objects ([`Owner`]).
    pub held_by: BTreeMap<Owner, u64>,
    /// Such objects it released that the driver has not deleted yet (only
    /// kinds whose deletion the run sees).
    pub released: u64,
    /// Measured reserves of contexts, modules, queues and streams the program
    /// holds ([`super::reserves`]).
    pub reserves_held: u64,
    /// Measured reserves of ones it released that the driver has not
    /// deleted, and of deleted ones whose memory stayed ([`Holders::kept`]).
    pub reserves_released: u64,
    /// Of `reserves_released`, the memory kept after its objects went
    /// ([`super::reserves::Kept`]): no more than the reading leaves room for.
    pub kept: u64,
    /// Such objects alive whose reserve could not be measured.
    pub unmeasured: usize,
    /// What the device's stream-ordered pool keeps after the program freed
    /// it: the pool's reserved less its used, as last read with a call
    /// (`call.cuda`: the agent reads it once the program used the pool).
    pub pool_kept: u64,
    /// A watched program's graph memory: what the device reserved for its
    /// graphs' memory nodes, in use or kept after their frees until a trim
    /// (no ledger object stands for it). 0 for a lab, whose ledger holds its
    /// graphs' allocations.
    pub graphs: u64,
    /// Managed memory the program held (`cuMemAllocManaged`), on the device
    /// or not.
    pub managed: u64,
    /// What the device held for its managed memory at the reading, once it
    /// made some: its pages there and the driver's own memory for them. A
    /// share of `total`, which is NVML's figure for the process and these
    /// (NVML counts them in the device's figure, in no process's). None
    /// where it could not be told (other processes on the device, no
    /// reading of the rest of it before the program made managed memory).
    pub managed_on_device: Option<u64>,
    /// A watched program's resident host memory before its first call of
    /// the API (its latest reading before the agent attached): its own, and
    /// the libraries it had loaded. Only where its memory is its RSS (a CPU
    /// device), and at that reading and those after it.
    pub before_api: u64,
    /// What its resident memory grew by from then to its latest reading
    /// before its first object: the API's runtime its first calls loaded
    /// (and whatever the program itself took meanwhile).
    pub runtime: u64,
    /// What it grew by after its first object between readings while none
    /// of its API's calls ran and no work it queued was outstanding: the
    /// program's own ([`super::quiet`]). Only where its memory is its RSS.
    pub own_between_calls: u64,
}

impl Holders {
    /// What the named shares explain.
    pub fn explained(&self) -> u64 {
        self.before_api
            + self.runtime
            + self.own_between_calls
            + self.held
            + self.cached
            + self.released
            + self.reserves_held
            + self.reserves_released
            + self.pool_kept
            + self.graphs
            + self.managed_on_device.unwrap_or(0)
    }

    /// The reading less what the shares explain: negative when they explain
    /// more than the reading (a share the driver holds elsewhere, or a
    /// reading that lags).
    pub fn unexplained(&self) -> i64 {
        self.total as i64 - self.explained() as i64
    }

    /// The share of the reading the named shares explain, 0 to 1 (1 when the
    /// reading is 0).
    pub fn explained_fraction(&self) -> f64 {
        if self.total == 0 {
            return 1.0;
        }
        (self.explained().min(self.total)) as f64 / self.total as f64
    }
}

/// What is left of objects, as the shares count them: the most alive of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Alive {
    /// Deleted by the driver, or released where the run cannot see deletions.
    Gone,
    /// Released by the program, not deleted by the driver yet.
    Released,
    /// The program holds it.
    Held,
}

impl Run {
    fn alive(&self, id: u64) -> Alive {
        self.alive_among(id, &std::collections::BTreeSet::new())
    }

    /// As [`Run::alive`], where the processes of `gone` have exited: the
    /// exit gave back all they held.
    fn alive_among(&self, id: u64, gone: &std::collections::BTreeSet<u32>) -> Alive {
        if gone.contains(&((id >> 32) as u32)) {
            return Alive::Gone;
        }
        match self.ledger().get(&id) {
            // A stream or module of a context the driver destroyed went
            // with it (simpleDrvRuntime's stream, -2 MiB at exit).
            Some(o) if self.context_destroyed(o) => Alive::Gone,
            Some(o) if o.held() => Alive::Held,
            Some(o) if !o.destroyed() && self.deletions().seen(super::deletions::whose(o)) => {
                Alive::Released
            }
            _ => Alive::Gone,
        }
    }

    /// What a watched program's resident memory held at its last reading
    /// before its first call of the API, at a reading at `t_ns` of `total`:
    /// all of a reading taken before then (composed once a later one
    /// arrived, which moved the last one on: `copybufferkernel`'s reading
    /// at 13.8 ms was 23 MiB "unexplained").
    pub(super) fn before_api_at(&self, t_ns: u64, total: u64) -> u64 {
        match self.readings.before_api {
            Some((t, _)) if t_ns <= t => total,
            Some((_, b)) => b,
            None => 0,
        }
    }

    /// The program's managed pages on the device at its reading at `t_ns`
    /// (0 at any other moment: the reading composed is the latest).
    pub(super) fn managed_on_device_at(&self, t_ns: u64) -> Option<u64> {
        match self.readings.managed {
            (t, managed) if t == t_ns => managed,
            _ => Some(0),
        }
    }

    /// What a watched program's resident memory grew by between its last
    /// reading before its first call of the API and the reading its first
    /// reserve was measured from: the API's runtime its first calls loaded.
    /// The reserve's own step starts at that reading, so nothing is counted
    /// twice; 0 where it starts at the first (the reserve holds the load).
    /// Before the program made any object (a program that only asks which
    /// platforms and devices there are), all its reading holds beyond the
    /// first share is that.
    pub(super) fn runtime_loaded(&self, t_ns: u64, total: u64) -> u64 {
        let Some((before_t, before)) = self.readings.before_api else {
            return 0;
        };
        if self.objects.changed_ns.is_none() && t_ns > before_t {
            return total.saturating_sub(before);
        }
        // The agent read its process's memory right before the call that
        // made the first object (a CPU device's): the runtime ends there.
        if let Some((t, b)) = self.readings.before_first_object {
            return if t > before_t && t <= t_ns {
                b.saturating_sub(before)
            } else {
                0
            };
        }
        self.reserves()
            .measured()
            .filter(|r| !r.by_agent)
            .min_by_key(|r| r.from_ns)
            .filter(|r| r.from_ns > before_t && r.from_ns <= t_ns)
            .map_or(0, |r| r.from_bytes.saturating_sub(before))
    }

    /// Whether `o` belongs to a context the driver destroyed: with it went
    /// everything made in it (`cuCtxDestroy`, `cudaDeviceReset`; an
    /// OpenCL context is destroyed only once nothing made in it is held).
    fn context_destroyed(&self, o: &super::ObjState) -> bool {
        o.kind != ObjKind::Context
            && o.refs.iter().any(|r| {
                self.ledger()
                    .get(r)
                    .is_some_and(|c| c.kind == ObjKind::Context && c.destroyed())
            })
    }

    /// The most alive of `ids`.
    pub fn most_alive(&self, ids: &[u64]) -> Alive {
        ids.iter()
            .map(|id| self.alive(*id))
            .max()
            .unwrap_or(Alive::Gone)
    }

    /// The shares of the process's memory at `(t_ns, total)`, as the run
    /// stands now.
    pub fn holders_at(&self, t_ns: u64, total: u64) -> Holders {
        let index = &self.live_index();
        // A program of many processes: one that has exited by then holds
        // nothing (its objects stay alive in the ledger, for the report).
        let gone = self.ranks().gone_by(t_ns);
        let of_gone: u64 = index
            .held_by_pid
            .iter()
            .filter(|((pid, kind), _)| gone.contains(pid) && device_sized_kind(*kind))
            .map(|(_, (_, bytes))| *bytes)
            .sum();
        let sized = |m: &std::collections::BTreeMap<ObjKind, u64>| -> u64 {
            m.iter()
                .filter(|(k, _)| device_sized_kind(**k))
                .map(|(_, b)| *b)
                .sum()
        };
        let released: u64 = index
            .owed_bytes
            .iter()
            .filter(|(w, _)| device_sized_kind(w.2) && self.deletions().seen(**w))
            .map(|(_, b)| *b)
            .sum();
        let held = sized(&index.held_bytes).saturating_sub(of_gone);
        let managed_of_gone: u64 = gone
            .iter()
            .filter_map(|pid| index.held_by_pid.get(&(*pid, ObjKind::Managed)))
            .map(|(_, bytes)| *bytes)
            .sum();
        let managed = index
            .held_bytes
            .get(&ObjKind::Managed)
            .map_or(0, |b| b.saturating_sub(managed_of_gone));
        let (held_by, cached) = self.held_by_owner(&gone);
        let mut h = Holders {
            at_ns: t_ns,
            total,
            held: held.saturating_sub(cached),
            cached,
            held_by,
            released,
            managed,
            managed_on_device: self.managed_on_device_at(t_ns),
            own_between_calls: self.own_between_calls_at(t_ns),
            before_api: self.before_api_at(t_ns, total),
            runtime: self.runtime_loaded(t_ns, total),
            pool_kept: self
                .folds
                .last_pool
                .map_or(0, |m| m.pool_reserved.saturating_sub(m.pool_used)),
            graphs: self
                .folds
                .last_pool
                .and_then(|m| m.graph_mem)
                .filter(|_| self.meta.as_ref().is_some_and(|m| m.watch.is_some()))
                .map_or(0, |g| g.reserved),
            ..Holders::default()
        };
        let mut kept = 0;
        for (ids, reserve) in self.reserves().each() {
            match reserve {
                Some(r) => match ids
                    .iter()
                    .map(|id| self.alive_among(*id, &gone))
                    .max()
                    .unwrap_or(Alive::Gone)
                {
                    Alive::Held => h.reserves_held += r.bytes,
                    Alive::Released => h.reserves_released += r.bytes,
                    // Its objects went and the memory did not (NVIDIA's
                    // OpenCL keeps a deleted context's until the exit).
                    Alive::Gone
                        if r.kept.is_some_and(|k| k.at(t_ns))
                            && !ids.iter().any(|id| gone.contains(&((id >> 32) as u32))) =>
                    {
                        h.reserves_released += r.bytes;
                        kept += r.bytes;
                    }
                    Alive::Gone => {}
                },
                None => {
                    h.unmeasured += ids
                        .iter()
                        .filter(|id| self.alive_among(**id, &gone) != Alive::Gone)
                        .count();
                }
            }
        }
        // Memory kept after its objects went is known only from readings
        // that did not fall: one that leaves less room than the kept
        // reserves name says part of them went back since (PoCL's compiler,
        // 136 MiB measured across a build, then 22 MiB given back as the
        // context was destroyed: 103% named at exit). What they keep is
        // what the reading leaves room for.
        h.kept = kept;
        if total > 0 {
            let over = u64::try_from(-h.unexplained()).unwrap_or(0).min(kept);
            h.reserves_released -= over;
            h.kept -= over;
        }
        h
    }

    /// What the measured reserves of `ids` hold (each measurement once),
    /// and how many of `ids` have none measured.
    pub fn reserves_of(&self, ids: &[u64]) -> (u64, usize) {
        let mut bytes = 0;
        let mut measured = std::collections::BTreeSet::new();
        for (of, reserve) in self.reserves().each() {
            if let Some(r) = reserve
                && of.iter().any(|id| ids.contains(id))
            {
                bytes += r.bytes;
                measured.extend(of.iter().copied());
            }
        }
        let unmeasured = ids.iter().filter(|id| !measured.contains(id)).count();
        (bytes, unmeasured)
    }

    /// The bytes of the objects of a size the program holds, by who made
    /// them, less what the frameworks' allocators say they keep cached (taken
    /// from the framework's own objects first; from the rest where their
    /// stacks did not name it); and the cached bytes so taken.
    fn held_by_owner(&self, gone: &std::collections::BTreeSet<u32>) -> (BTreeMap<Owner, u64>, u64) {
        let mut by: BTreeMap<Owner, u64> = BTreeMap::new();
        let owner_of = |stack: &Option<u64>| {
            stack
                .and_then(|id| self.owners().get(&id).copied())
                .unwrap_or(Owner::Unknown)
        };
        for (stack, bytes) in &self.live_index().held_bytes_by_stack {
            *by.entry(owner_of(stack)).or_default() += bytes;
        }
        for ((pid, stack), bytes) in &self.live_index().held_bytes_by_pid_stack {
            if gone.contains(pid)
                && let Some(b) = by.get_mut(&owner_of(stack))
            {
                *b = b.saturating_sub(*bytes);
            }
        }
        by.retain(|_, b| *b > 0);
        let mut cached_taken = 0;
        for framework in self.frameworks().names() {
            let mut cached: u64 = self
                .frameworks()
                .latest()
                .filter(|(a, _)| a.framework == framework)
                .map(|(_, f)| f.cached())
                .sum();
            let own = by
                .keys()
                .copied()
                .find(|o| o.framework() == Some(framework));
            let order = own
                .into_iter()
                .chain([Owner::Unknown, Owner::Program])
                .chain(by.keys().copied().filter(|o| o.framework().is_none()));
            for owner in order.collect::<Vec<_>>() {
                let Some(b) = by.get_mut(&owner) else {
                    continue;
                };
                let take = cached.min(*b);
                *b -= take;
                cached -= take;
                cached_taken += take;
            }
        }
        by.retain(|_, b| *b > 0);
        (by, cached_taken)
    }

    /// The shares at the latest reading of the process's memory whose
    /// composition was taken, if any; for a watched program, the latest
    /// taken while it ran.
    pub fn holders(&self) -> Option<Holders> {
        self.holders_recent().back().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::Run;
    use crate::testing;
    use crate::trace::{
        AgentEvent, AgentState, Call, CallStatus, DeviceRead, End, EndStatus, Event, GpuReading,
        MemorySource, ObjKind, ObjectAction, ObjectEvent, OtherProcess, ProcessBytes, ReadSide,
        Sample,
    };

    const MIB: u64 = 1 << 20;
    /// The tests count time in milliseconds.
    const MS: u64 = 1_000_000;

    fn sample(t: u64, bytes: u64) -> Event {
        Event::Sample(Sample {
            t_ns: t * MS,
            source: MemorySource::Nvml,
            used_bytes: bytes + 1000 * MIB,
            total_bytes: None,
            process_bytes: Some(bytes),
            others: None,
        })
    }

    /// A CUDA agent attached in `exe`, watching contexts' deletion (as CUPTI
    /// reports it).
    fn cuda_attached(exe: &str) -> Event {
        Event::Agent(AgentEvent {
            t_ns: 0,
            pid: 7,
            parent_pid: 1,
            api: "cuda".into(),
            state: AgentState::Attached {
                exe: exe.into(),
                destruction: vec![ObjKind::Context],
                rank: None,
            },
        })
    }

    /// The stream's end: the last reading is composed then.
    fn ended(mut events: Vec<Event>) -> Vec<Event> {
        events.push(Event::End(End {
            t_ns: 10_000 * MS,
            status: EndStatus::Finished,
            leaked: Vec::new(),
        }));
        events
    }

    /// An agent's object ids carry its process's pid (7) in their upper half.
    const OF_PID: u64 = 7 << 32;

    fn call(seq: u64, t: u64, api: &str, object: u64) -> Event {
        Event::Call(Call {
            seq,
            pid: 7,
            begin_ns: t * MS,
            end_ns: (t + 5) * MS,
            api: api.into(),
            status: CallStatus::Ok,
            object: Some(OF_PID | object),
            ..Call::default()
        })
    }

    fn object(t: u64, id: u64, kind: ObjKind, action: ObjectAction, bytes: u64) -> Event {
        let refcount = u32::from(action == ObjectAction::Created);
        Event::Object(ObjectEvent {
            t_ns: t * MS,
            id: OF_PID | id,
            kind,
            action,
            handle: None,
            bytes,
            refcount,
            refs: Vec::new(),
            line: None,
            stack: None,
        })
    }

    /// Seed 001's loop, twice: a context (518 MiB of its own), a 64 MiB buffer,
    /// both released; the buffer is deleted, the context is not (an event
    /// nobody released pins it).
    fn seed_001() -> Vec<Event> {
        let mut events = vec![Event::Agent(AgentEvent {
            t_ns: 0,
            pid: 7,
            parent_pid: 1,
            api: "opencl".into(),
            state: AgentState::Attached {
                exe: "seed001".into(),
                destruction: vec![ObjKind::Context, ObjKind::Buffer],
                rank: None,
            },
        })];
        let mut t = 100;
        let mut mem = 0;
        events.push(sample(t - 50, mem));
        for task in 0..2u64 {
            let (ctx, buf) = (10 + task * 2, 11 + task * 2);
            events.push(call(task * 4, t, "clCreateContext", ctx));
            events.push(object(
                t + 5,
                ctx,
                ObjKind::Context,
                ObjectAction::Created,
                0,
            ));
            mem += 518 * MIB;
            events.push(sample(t + 10, mem));
            events.push(call(task * 4 + 1, t + 20, "clCreateBuffer", buf));
            events.push(object(
                t + 25,
                buf,
                ObjKind::Buffer,
                ObjectAction::Created,
                64 * MIB,
            ));
            mem += 64 * MIB;
            events.push(sample(t + 30, mem));
            events.push(object(
                t + 40,
                buf,
                ObjKind::Buffer,
                ObjectAction::Released,
                64 * MIB,
            ));
            events.push(object(
                t + 41,
                buf,
                ObjKind::Buffer,
                ObjectAction::Destroyed,
                64 * MIB,
            ));
            mem -= 64 * MIB;
            events.push(object(
                t + 42,
                ctx,
                ObjKind::Context,
                ObjectAction::Released,
                0,
            ));
            events.push(sample(t + 50, mem));
            t += 100;
        }
        events
    }

    /// Seen on the H100 (`cuda_oom 8192`): every reading between the
    /// context's making call and the frees that followed the refusal fell
    /// inside an allocation or a free; the first one outside came after the
    /// second cuMemFree. A CUDA buffer is gone when it is freed (no agent
    /// reports its deletion), so the freed blocks leave the context's
    /// measurement then, and the context holds its own 530 MiB.
    #[test]
    fn buffers_freed_inside_a_contexts_measurement_leave_it() {
        let mut events = vec![cuda_attached("cuda_oom")];
        let block = 8192 * MIB;
        events.push(sample(10, 0));
        // The object comes before its call, as an agent sends them.
        events.push(object(30, 1, ObjKind::Context, ObjectAction::Created, 0));
        events.push(call(0, 20, "cuDevicePrimaryCtxRetain", 1));
        for (i, t) in [40u64, 50, 60].into_iter().enumerate() {
            let id = 2 + i as u64;
            events.push(object(
                t + 5,
                id,
                ObjKind::Buffer,
                ObjectAction::Created,
                block,
            ));
            events.push(call(1 + i as u64, t, "cuMemAlloc", id));
        }
        for (i, t) in [70u64, 80, 90].into_iter().enumerate() {
            let id = 2 + i as u64;
            events.push(object(
                t + 5,
                id,
                ObjKind::Buffer,
                ObjectAction::Released,
                block,
            ));
            events.push(call(4 + i as u64, t, "cuMemFree", id));
            if i == 1 {
                // After the second free's call, before its record arrived.
                events.push(sample(t + 7, 530 * MIB + block));
            }
        }
        events.push(sample(100, 530 * MIB));
        let run = Run::from_events(&ended(events));
        let measured: Vec<u64> = run.reserves().measured().map(|r| r.bytes).collect();
        assert_eq!(measured, [530 * MIB]);
        assert_eq!(run.holders().map(|h| h.unexplained()), Some(0));
    }

    /// `cudaFreeAsync` gives a block to the device's pool, which keeps it:
    /// the pool's reserved less its used, as the last call read them, is a
    /// share of its own, and a trim gives it back.
    #[test]
    fn what_the_stream_ordered_pool_keeps_after_a_free_is_a_share() {
        use crate::trace::CudaMemory;
        let pool = |seq: u64, t: u64, api: &str, reserved: u64, used: u64| {
            Event::Call(Call {
                seq,
                begin_ns: t * MS,
                end_ns: (t + 1) * MS,
                api: api.into(),
                status: CallStatus::Ok,
                cuda: Some(CudaMemory {
                    pool_reserved: reserved,
                    pool_used: used,
                    free: 0,
                    total: 0,
                    custom_pool: None,
                    graph_mem: None,
                }),
                ..Call::default()
            })
        };
        let block = 256 * MIB;
        let mut events = vec![cuda_attached("pool_keep")];
        events.push(sample(5, 0));
        events.push(object(10, 1, ObjKind::Buffer, ObjectAction::Created, block));
        events.push(pool(0, 10, "cuMemAllocAsync", block, block));
        events.push(sample(20, block));
        events.push(object(
            30,
            1,
            ObjKind::Buffer,
            ObjectAction::Released,
            block,
        ));
        events.push(pool(1, 30, "cuMemFreeAsync", block, 0));
        events.push(sample(40, block));
        let kept = Run::from_events(&ended(events.clone()))
            .holders()
            .expect("a reading");
        assert_eq!(
            (kept.held, kept.pool_kept, kept.unexplained()),
            (0, block, 0)
        );
        events.push(pool(2, 50, "cuMemPoolTrimTo", 0, 0));
        events.push(sample(60, 0));
        let trimmed = Run::from_events(&ended(events))
            .holders()
            .expect("a reading");
        assert_eq!((trimmed.pool_kept, trimmed.unexplained()), (0, 0));
    }

    #[test]
    fn pinned_contexts_hold_their_measured_reserve() {
        let run = Run::from_events(&ended(seed_001()));
        let h = run.holders().expect("a reading");
        assert_eq!(h.total, 2 * 518 * MIB);
        assert_eq!(h.reserves_released, 2 * 518 * MIB, "{h:?}");
        assert_eq!((h.held, h.released, h.reserves_held), (0, 0, 0));
        assert_eq!(h.unexplained(), 0);
        assert_eq!(h.unmeasured, 0);
        assert!((h.explained_fraction() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_peak_keeps_its_composition() {
        let run = Run::from_events(&ended(seed_001()));
        let peak = run.holders_at_peak().expect("a peak");
        assert_eq!(peak.total, 518 * MIB + 518 * MIB + 64 * MIB);
        assert_eq!(peak.held, 64 * MIB);
        assert_eq!(peak.reserves_held, 518 * MIB);
        assert_eq!(peak.reserves_released, 518 * MIB);
        assert_eq!(peak.unexplained(), 0);
    }

    #[test]
    fn what_no_share_explains_is_said() {
        let mut events = seed_001();
        // 100 MiB more than anything the run saw made.
        events.push(sample(1000, 2 * 518 * MIB + 100 * MIB));
        let run = Run::from_events(&ended(events));
        let h = run.holders().expect("a reading");
        assert_eq!(h.unexplained(), (100 * MIB) as i64);
    }

    /// A CUDA program's first moments: nothing, then a context (object 1)
    /// `api` made by 25 ms, and a reading of its 530 MiB at 30 ms.
    fn a_context(exe: &str, api: &str) -> Vec<Event> {
        vec![
            cuda_attached(exe),
            sample(10, 0),
            call(0, 20, api, 1),
            object(22, 1, ObjKind::Context, ObjectAction::Created, 0),
            sample(30, 530 * MIB),
        ]
    }

    /// `vadd_abc` on NVIDIA's OpenCL: the only readings above nothing fell
    /// inside `clCreateContext` (30 of its 514 MiB) and inside the
    /// teardown of `clReleaseContext`. A reading inside a context's making
    /// call is no moment of the program (the context held part of what it
    /// would, the ledger none): it is taken back when the call arrives,
    /// the peak's composition with it.
    #[test]
    fn a_reading_taken_while_a_context_was_made_is_no_moment() {
        let events = vec![
            cuda_attached("vadd_abc"),
            sample(10, 0),
            object(22, 1, ObjKind::Context, ObjectAction::Created, 0),
            sample(23, 30 * MIB),
            call(0, 20, "cuCtxCreate", 1),
            sample(40, 530 * MIB),
        ];
        let run = Run::from_events(&ended(events.clone()));
        assert!(
            run.holders_recent().iter().all(|h| h.at_ns != 23 * MS),
            "{:?}",
            run.holders_recent()
        );
        let peak = run.holders_at_peak().expect("a peak");
        assert_eq!((peak.at_ns, peak.unexplained()), (40 * MS, 0), "{peak:?}");
        // Without the later reading, no peak is of the one inside.
        let inside_only = Run::from_events(&ended(events[..5].to_vec()));
        assert!(
            inside_only
                .holders_at_peak()
                .is_none_or(|p| p.at_ns != 23 * MS),
            "{:?}",
            inside_only.holders_at_peak()
        );
    }

    /// UnifiedMemoryPerf on the H200: a context, then 64 MiB of managed
    /// memory, which NVML's figure for the process never counts. Counted as
    /// an object, it made the context's reserve 64 MiB less and the
    /// composition name more than the reading (8% named at the peak).
    #[test]
    fn managed_memory_is_said_beside_the_shares_not_in_them() {
        let mut events = a_context("UnifiedMemoryPerf", "cuDevicePrimaryCtxRetain");
        events.extend([
            call(1, 40, "cuMemAllocManaged", 2),
            object(42, 2, ObjKind::Managed, ObjectAction::Created, 64 * MIB),
            sample(50, 530 * MIB),
            sample(60, 530 * MIB),
        ]);
        let run = Run::from_events(&ended(events));
        let h = run.holders().expect("a reading");
        assert_eq!((h.held, h.managed), (0, 64 * MIB), "{h:?}");
        assert_eq!(h.reserves_held, 530 * MIB, "{h:?}");
        assert_eq!(h.unexplained(), 0, "{h:?}");
    }

    /// The H200 around 256 MiB of managed memory (`.dev`'s probe, no
    /// gpulab): NVML's device figure moved by 256 MiB after a prefetch and
    /// again after a free, the process's by nothing. The pages on the device
    /// are the device's figure less what the rest of it held before (612
    /// MiB beside a 530 MiB context); with another process on the device
    /// they are not told, and said so.
    #[test]
    fn managed_pages_on_the_device_are_the_device_less_its_rest() {
        let h200 = |t: u64, used: u64| nvml(t, used * MIB, Some(530 * MIB));
        let run_of = |neighbour: bool| {
            let mut events = a_context("UnifiedMemoryPerf", "cuDevicePrimaryCtxRetain");
            events.extend([
                Event::Sample(Sample {
                    others: Some(other_processes(neighbour)),
                    t_ns: 30 * MS,
                    source: MemorySource::Nvml,
                    used_bytes: 1_142 * MIB,
                    total_bytes: None,
                    process_bytes: Some(530 * MIB),
                }),
                h200(31, 1_142),
                h200(32, 1_142),
                call(1, 40, "cuMemAllocManaged", 2),
                object(42, 2, ObjKind::Managed, ObjectAction::Created, 256 * MIB),
                h200(50, 1_142),
                // Prefetched: NVML's figure for the process the same.
                h200(60, 1_398),
                h200(70, 1_398),
            ]);
            Run::from_events(&ended(events))
        };
        let run = run_of(false);
        let h = run.holders().expect("a reading");
        assert_eq!((h.total, h.managed), (786 * MIB, 256 * MIB), "{h:?}");
        assert_eq!(h.managed_on_device, Some(256 * MIB), "{h:?}");
        assert_eq!(h.unexplained(), 0, "{h:?}");
        let peak = run.holders_at_peak().expect("a peak");
        assert_eq!(peak.total, 786 * MIB, "the peak counts the pages");
        // Before the prefetch none was on the device.
        let before: Vec<_> = run
            .holders_recent()
            .iter()
            .filter(|h| h.at_ns == 50 * MS)
            .map(|h| h.managed_on_device)
            .collect();
        assert_eq!(before, vec![Some(0)]);
        let crowded = run_of(true);
        let h = crowded.holders().expect("a reading");
        assert_eq!((h.total, h.managed_on_device), (530 * MIB, None), "{h:?}");
    }

    /// The CUDA runtime's teardown at exit gives a buffer (and its context)
    /// back with no free the agent sees: the reading of 0 after it is not a
    /// moment of objects that are gone (it used to leave "at exit" 64 MiB
    /// named against nothing, unexplained -64 MiB), and the run says so.
    #[test]
    fn memory_given_back_without_a_free_is_said_not_composed() {
        let events = vec![
            cuda_attached("vectorAdd"),
            sample(10, 0),
            call(0, 20, "cuMemAlloc", 1),
            object(25, 1, ObjKind::Buffer, ObjectAction::Created, 64 * MIB),
            sample(30, 64 * MIB),
            sample(40, 64 * MIB),
            // The process's memory as NVML reads it after the teardown.
            sample(50, 0),
            sample(60, 0),
        ];
        let run = Run::from_events(&ended(events));
        let at_exit = run.holders().expect("a reading");
        assert_eq!((at_exit.at_ns, at_exit.total), (40 * MS, 64 * MIB));
        assert_eq!(at_exit.held, 64 * MIB);
        assert_eq!(at_exit.unexplained(), 0);
        assert_eq!(run.memory_given_back(), Some((50 * MS, 64 * MIB)));
        // Every composition taken adds up, none below zero.
        for h in run.holders_recent() {
            assert!(h.unexplained() >= 0 && h.explained() <= h.total, "{h:?}");
        }
        // Nothing held, a reading of 0 is a moment like any other.
        let empty = Run::from_events(&ended(vec![sample(10, 0), sample(20, 0)]));
        assert_eq!(empty.memory_given_back(), None);
        assert_eq!(empty.holders().map(|h| h.total), Some(0));
    }

    /// A reading that holds less than the buffers the agent saw made is
    /// behind the records (XLA's 105 GiB preallocation named against a
    /// reading of 562 MiB): not composed, and counted; the next composes
    /// afresh.
    #[test]
    fn a_reading_that_holds_less_than_the_buffers_made_is_not_composed() {
        let events = vec![
            cuda_attached("lagging"),
            sample(10, 0),
            object(24, 1, ObjKind::Context, ObjectAction::Created, 0),
            call(0, 20, "cuDevicePrimaryCtxRetain", 1),
            sample(30, 530 * MIB),
            object(40, 2, ObjKind::Buffer, ObjectAction::Created, 1024 * MIB),
            call(1, 40, "cuMemAlloc_v2", 2),
            // The driver had not counted the buffer yet.
            sample(50, 530 * MIB),
            sample(60, 1554 * MIB),
        ];
        let run = Run::from_events(&ended(events));
        for h in run.holders_recent() {
            assert!(h.unexplained() >= 0, "{h:?}");
        }
        assert_eq!(run.readings_behind(), (1, Some(50 * MS)));
        let h = run.holders().expect("a reading");
        assert_eq!(
            (h.at_ns, h.held, h.reserves_held),
            (60 * MS, 1024 * MIB, 530 * MIB)
        );
        assert_eq!(h.unexplained(), 0);
        let peak = run.holders_at_peak().expect("a peak");
        assert_eq!((peak.at_ns, peak.unexplained()), (60 * MS, 0));
    }

    /// NVML counts a change milliseconds after the driver made it: a reading
    /// taken within 20 ms of a step the agent read, that holds less than the
    /// shares name, is behind the records and not composed; one that still
    /// does later is composed, and its excess said.
    #[test]
    fn a_reading_that_lags_a_step_the_agent_read_is_not_composed() {
        let module = |t: u64, step: u64| {
            Event::Call(Call {
                seq: 1,
                pid: 7,
                begin_ns: t * MS,
                end_ns: (t + 5) * MS,
                api: "cuModuleLoadData".into(),
                status: CallStatus::Ok,
                object: Some(OF_PID | 2),
                memory_step: Some((step * MIB) as i64),
                ..Call::default()
            })
        };
        let events = |late: u64| {
            vec![
                cuda_attached("lagging"),
                sample(10, 0),
                object(24, 1, ObjKind::Context, ObjectAction::Created, 0),
                call(0, 20, "cuDevicePrimaryCtxRetain", 1),
                sample(30, 530 * MIB),
                object(44, 2, ObjKind::Program, ObjectAction::Created, 0),
                module(40, 64),
                sample(50, 530 * MIB),
                sample(45 + late, 530 * MIB),
            ]
        };
        let run = Run::from_events(&ended(events(40)));
        assert_eq!(run.readings_behind(), (1, Some(50 * MS)));
        let at: Vec<u64> = run.holders_recent().iter().map(|h| h.at_ns / MS).collect();
        assert_eq!(at, [10, 30, 85]);
        // 40 ms after the step the reading is the driver's: composed, and
        // what it cannot hold is said.
        let h = run.holders().expect("a reading");
        assert_eq!(h.unexplained(), -((64 * MIB) as i64));
    }

    /// A stream-ordered pool's block is no device memory of its own: its
    /// free gives nothing back (the pool keeps it until a synchronisation),
    /// and its allocation may reuse what the pool kept. A module's step
    /// across such a call with no read of the pool measures nothing (on the
    /// H100, `cuda-free-wait` had its module hold the 64 MiB block the pool
    /// kept: 594 MiB named against 530 at exit); with the pool read at the
    /// call, its reserve's move is taken out of the step.
    #[test]
    fn a_pools_blocks_move_no_reserve() {
        let pooled = |seq: u64, t: u64, api: &str, id: u64, read: Option<u64>| {
            Event::Call(Call {
                seq,
                pid: 7,
                begin_ns: t * MS,
                end_ns: (t + 1) * MS,
                api: api.into(),
                status: CallStatus::Ok,
                object: Some(OF_PID | id),
                cuda: read.map(|reserved| crate::trace::CudaMemory {
                    pool_reserved: reserved,
                    pool_used: 0,
                    free: 0,
                    total: 0,
                    custom_pool: None,
                    graph_mem: None,
                }),
                ..Call::default()
            })
        };
        let events = |read: bool| {
            vec![
                cuda_attached("free_wait"),
                sample(10, 0),
                object(24, 1, ObjKind::Program, ObjectAction::Created, 0),
                call(0, 20, "cuLibraryLoadData", 1),
                object(30, 2, ObjKind::Buffer, ObjectAction::Created, 64 * MIB),
                pooled(1, 30, "cuMemAllocAsync", 2, read.then_some(64 * MIB)),
                object(35, 2, ObjKind::Buffer, ObjectAction::Released, 64 * MIB),
                pooled(2, 35, "cuMemFreeAsync", 2, read.then_some(64 * MIB)),
                // The pool keeps the block: the memory did not fall.
                sample(60, 64 * MIB),
            ]
        };
        let unread = Run::from_events(&ended(events(false)));
        assert_eq!(unread.reserves().measured().count(), 0, "nothing measured");
        let read = Run::from_events(&ended(events(true)));
        let r: Vec<u64> = read.reserves().measured().map(|r| r.bytes).collect();
        assert_eq!(r, [0]);
        let h = read.holders().expect("a reading");
        assert_eq!((h.pool_kept, h.unexplained()), (64 * MIB, 0), "{h:?}");
    }

    /// A process where both agents attached (hwloc inside MPI_Init listed
    /// OpenCL devices, then the program used CUDA): the OpenCL agent watches
    /// buffers' deletion, CUDA's `cuMemFree` deletes at once. A CUDA buffer
    /// freed is gone, not "released, not deleted" (torch_lightning_boring
    /// had 98 MiB so at exit, -96 MiB unexplained); an OpenCL one released
    /// and not deleted is still held by the driver.
    #[test]
    fn a_release_is_a_deletion_where_its_own_api_reports_none() {
        let opencl = Event::Agent(AgentEvent {
            t_ns: 1,
            pid: 7,
            parent_pid: 1,
            api: "opencl".into(),
            state: AgentState::Attached {
                exe: "python3".into(),
                destruction: vec![ObjKind::Context, ObjKind::Buffer],
                rank: None,
            },
        });
        let events = vec![
            cuda_attached("python3"),
            opencl,
            sample(10, 0),
            object(20, 1, ObjKind::Buffer, ObjectAction::Created, 98 * MIB),
            call(0, 20, "cuMemAlloc_v2", 1),
            object(30, 2, ObjKind::Buffer, ObjectAction::Created, 2 * MIB),
            call(1, 30, "clCreateBuffer", 2),
            sample(40, 100 * MIB),
            object(50, 1, ObjKind::Buffer, ObjectAction::Released, 98 * MIB),
            call(2, 50, "cuMemFree_v2", 1),
            object(60, 2, ObjKind::Buffer, ObjectAction::Released, 2 * MIB),
            call(3, 60, "clReleaseMemObject", 2),
            sample(70, 2 * MIB),
            sample(80, 2 * MIB),
        ];
        let run = Run::from_events(&ended(events));
        let at_exit = run.holders().expect("a reading");
        assert_eq!(at_exit.total, 2 * MIB);
        assert_eq!(
            (at_exit.held, at_exit.released),
            (0, 2 * MIB),
            "{at_exit:?}"
        );
        assert_eq!(at_exit.unexplained(), 0);
        assert!(!run.deletion_watched(OF_PID | 1, ObjKind::Buffer));
        assert!(run.deletion_watched(OF_PID | 2, ObjKind::Buffer));
    }

    /// An OpenCL agent attached in `exe` at 0, watching the deletion of
    /// contexts and buffers.
    fn opencl_attached(exe: &str) -> Event {
        Event::Agent(AgentEvent {
            t_ns: 0,
            pid: 7,
            parent_pid: 1,
            api: "opencl".into(),
            state: AgentState::Attached {
                exe: exe.into(),
                destruction: vec![ObjKind::Context, ObjKind::Buffer],
                rank: None,
            },
        })
    }

    /// NVIDIA's OpenCL deletes a released context at once and keeps its
    /// memory until the process exits (Hands On OpenCL's vadd_abc on the
    /// H200 showed 0% named at its peak, then 0% at exit): the reading after
    /// the deletion did not fall, so the reserve is kept by the driver.
    #[test]
    fn of_equal_peak_readings_the_one_the_shares_explain_stands() {
        let events = vec![
            opencl_attached("vadd_abc"),
            sample(10, 0),
            object(24, 1, ObjKind::Context, ObjectAction::Created, 0),
            call(0, 20, "clCreateContext", 1),
            sample(30, 518 * MIB),
            object(40, 1, ObjKind::Context, ObjectAction::Released, 0),
            object(40, 1, ObjKind::Context, ObjectAction::Destroyed, 0),
            call(1, 40, "clReleaseContext", 1),
            sample(50, 518 * MIB),
        ];
        let run = Run::from_events(&ended(events));
        let peak = run.holders_at_peak().expect("a peak");
        assert_eq!(peak.total, 518 * MIB);
        assert_eq!(peak.unexplained(), 0, "{peak:?}");
        let exit = run.holders().expect("a reading");
        assert_eq!(exit.at_ns, 50 * MS);
        assert_eq!((exit.reserves_held, exit.reserves_released), (0, 518 * MIB));
        assert_eq!(exit.unexplained(), 0);
        let kept = run.reserves().measured().next().and_then(|r| r.kept);
        assert_eq!(kept.map(|k| (k.from_ns, k.until_ns)), Some((50 * MS, None)));
    }

    /// simpleDrvRuntime on the H200 (200% named at exit): its second
    /// context's memory stayed a reading after its deletion, fell by a
    /// fifth at the next, and was gone at the one after. A composition that
    /// counted it as kept was carried to the later readings, whose shares
    /// had not changed since, though the memory had stopped being kept.
    #[test]
    fn memory_kept_after_a_deletion_is_not_counted_past_the_reading_it_fell_at() {
        let events = vec![
            opencl_attached("teardown"),
            sample(10, 0),
            object(12, 2, ObjKind::Buffer, ObjectAction::Created, 100 * MIB),
            call(0, 11, "clCreateBuffer", 2),
            sample(20, 100 * MIB),
            object(24, 1, ObjKind::Context, ObjectAction::Created, 0),
            call(1, 20, "clCreateContext", 1),
            sample(30, 618 * MIB),
            object(40, 1, ObjKind::Context, ObjectAction::Released, 0),
            object(40, 1, ObjKind::Context, ObjectAction::Destroyed, 0),
            call(2, 40, "clReleaseContext", 1),
            sample(50, 618 * MIB),
            sample(60, 500 * MIB),
            sample(70, 100 * MIB),
            sample(80, 100 * MIB),
        ];
        let run = Run::from_events(&ended(events));
        let kept = run.reserves().measured().find_map(|r| r.kept);
        assert_eq!(
            kept.map(|k| (k.from_ns, k.until_ns)),
            Some((50 * MS, Some(70 * MS)))
        );
        for h in run.holders_recent().iter().filter(|h| h.at_ns >= 70 * MS) {
            assert_eq!(h.reserves_released, 0, "{h:?}");
            assert_eq!(h.unexplained(), 0, "{h:?}");
        }
        let exit = run.holders().expect("composed");
        assert_eq!((exit.at_ns, exit.held), (80 * MS, 100 * MIB));
    }

    /// 64 MiB made at 25 and read at 30; the reading at 40 sees it gone.
    fn a_buffer_gone_by_40() -> Vec<Event> {
        vec![
            sample(10, 0),
            call(0, 20, "cuMemAlloc", 1),
            object(25, 1, ObjKind::Buffer, ObjectAction::Created, 64 * MIB),
            sample(30, 64 * MIB),
            sample(40, 0),
        ]
    }

    #[test]
    fn a_reading_that_runs_ahead_of_a_free_waits_for_it() {
        // The sampler sees a buffer's memory go before the agent's record of
        // its release arrives.
        let mut events = a_buffer_gone_by_40();
        events.extend([
            object(35, 1, ObjKind::Buffer, ObjectAction::Released, 64 * MIB),
            object(35, 1, ObjKind::Buffer, ObjectAction::Destroyed, 64 * MIB),
        ]);
        let run = Run::from_events(&ended(events));
        let h = run.holders().expect("a reading");
        assert_eq!((h.at_ns, h.total, h.held), (40 * MS, 0, 0));
        assert_eq!(h.unexplained(), 0);
    }

    #[test]
    fn a_reading_taken_while_a_free_ran_is_not_composed() {
        // An agent sends the release, then the free's call: the reading at 40
        // was taken while the free (35 to 45) ran.
        let mut events = a_buffer_gone_by_40();
        events.extend([
            object(45, 1, ObjKind::Buffer, ObjectAction::Released, 64 * MIB),
            Event::Call(Call {
                seq: 1,
                begin_ns: 35 * MS,
                end_ns: 45 * MS,
                api: "cuMemFree".into(),
                status: CallStatus::Ok,
                object: Some(1),
                ..Call::default()
            }),
            sample(50, 0),
        ]);
        let run = Run::from_events(&ended(events));
        let h = run.holders().expect("a reading");
        assert_eq!((h.at_ns, h.total, h.held), (50 * MS, 0, 0));
        let kept: Vec<u64> = run.holders_recent().iter().map(|h| h.at_ns / MS).collect();
        assert_eq!(kept, vec![10, 30, 50], "the reading at 40 is not composed");
    }

    /// Without an agent that watches deletions, a release is the end of its
    /// object: no buffer is "released, not deleted". Seed 001's contexts are
    /// pinned by events, and the readings after their release did not fall:
    /// their reserves are kept (by the readings, not by a deletion seen).
    #[test]
    fn a_kind_whose_deletion_is_not_seen_is_not_counted_as_released() {
        let events: Vec<Event> = seed_001()
            .into_iter()
            .filter(|e| !matches!(e, Event::Agent(_)))
            .filter(|e| !matches!(e, Event::Object(o) if o.action == ObjectAction::Destroyed))
            .collect();
        let run = Run::from_events(&ended(events));
        let h = run.holders().expect("a reading");
        assert_eq!(h.released, 0);
        assert_eq!(h.reserves_released, 2 * 518 * MIB, "{h:?}");
        assert!(run.reserves().measured().all(|r| r.kept.is_some()));
        assert_eq!(h.unexplained(), 0);
    }

    /// PyTorch's allocator made two buffers, the program one of its own; the
    /// allocator says it uses 60 MiB of its 100: the 40 it keeps cached come
    /// out of its own buffers, never the program's.
    #[test]
    fn an_allocators_cache_comes_out_of_its_own_objects() {
        use crate::trace::{Frame, FrameworkEvent, FrameworkSaid, Stack};
        use gpulab_events::Framework;
        let stack = |id: u64, module: &str| {
            Event::Stack(Stack {
                t_ns: 0,
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
        };
        let made = |t: u64, id: u64, bytes: u64, by: u64| {
            let mut e = object(t, id, ObjKind::Buffer, ObjectAction::Created, bytes);
            if let Event::Object(o) = &mut e {
                o.stack = Some(by);
            }
            e
        };
        let events = ended(vec![
            stack(1, "/venv/torch/lib/libc10_cuda.so"),
            stack(2, "/home/u/train"),
            made(10, 100, 80 * MIB, 1),
            made(11, 101, 20 * MIB, 1),
            made(12, 102, 10 * MIB, 2),
            Event::Framework(FrameworkEvent {
                t_ns: 20 * MS,
                pid: 7,
                framework: Framework::Pytorch,
                device: 0,
                said: FrameworkSaid::Memory {
                    allocated: 60 * MIB,
                    reserved: 100 * MIB,
                    limit: None,
                },
            }),
            sample(30, 110 * MIB),
        ]);
        let run = Run::from_events(&events);
        let h = run.holders().expect("composed");
        assert_eq!(h.cached, 40 * MIB);
        assert_eq!(h.held, 70 * MIB);
        let by: Vec<(&str, u64)> = h.held_by.iter().map(|(o, b)| (o.as_str(), *b)).collect();
        assert_eq!(by, [("program", 10 * MIB), ("pytorch", 60 * MIB)]);
        assert_eq!(h.unexplained(), 0);
    }

    /// A reading of a CPU device's program: its RSS, `bytes`, at `t` ms.
    fn rss(t: u64, bytes: u64) -> Event {
        Event::Sample(Sample {
            t_ns: t * MS,
            source: MemorySource::Rss,
            used_bytes: bytes,
            total_bytes: None,
            process_bytes: Some(bytes),
            others: None,
        })
    }

    /// NVML's list of the device's other processes: another one (holding
    /// nothing yet) with `neighbour`, else none.
    fn other_processes(neighbour: bool) -> Vec<OtherProcess> {
        if !neighbour {
            return Vec::new();
        }
        vec![OtherProcess {
            pid: 99,
            name: None,
            bytes: Some(0),
        }]
    }

    fn nvml(t: u64, used: u64, own: Option<u64>) -> Event {
        Event::Sample(Sample {
            t_ns: t * MS,
            source: MemorySource::Nvml,
            used_bytes: used,
            total_bytes: None,
            process_bytes: own,
            others: None,
        })
    }

    fn read(t: u64, api: &str, side: ReadSide, used: u64) -> Event {
        let total = 140 << 30;
        Event::DeviceRead(DeviceRead {
            t_ns: t * MS,
            pid: 7,
            api: api.into(),
            side,
            free_bytes: total - used,
            total_bytes: total,
            resident_bytes: None,
            first_touched_bytes: None,
        })
    }

    /// vectorAddDrv on the H200, as its recording had it: `cuCtxCreate`
    /// takes 112 ms while NVML's figure climbs, the program destroys the
    /// context 3 ms after, and the destruction takes 57 ms; no sample falls
    /// between. NVML counts 9 MiB of the device beside the process's; with
    /// `neighbour`, another process on the device takes 512 MiB between the
    /// sample inside the making call and the agent's reads.
    fn short_driver_program(reads: bool, neighbour: bool) -> Run {
        let ctx_call = |seq, api: &str, begin: u64, end: u64, object| {
            Event::Call(Call {
                seq,
                pid: 7,
                begin_ns: begin * MS,
                end_ns: end * MS,
                api: api.into(),
                status: CallStatus::Ok,
                object,
                ..Call::default()
            })
        };
        let other = if neighbour { 512 * MIB } else { 0 };
        let alone = Event::Sample(Sample {
            t_ns: 10 * MS,
            source: MemorySource::Nvml,
            used_bytes: 0,
            total_bytes: None,
            process_bytes: None,
            others: Some(other_processes(neighbour)),
        });
        let mut events = vec![
            alone,
            cuda_attached("vectorAddDrv"),
            nvml(60, 0, None),
            nvml(140, 22 * MIB, None),
            // Inside cuCtxCreate (100..212 ms).
            nvml(207, 531 * MIB, Some(522 * MIB)),
            // NVML's reading of the GPU 3 ms later: the same 9 MiB beside.
            Event::GpuReading(GpuReading {
                t_ns: 210 * MS,
                gpu: 0,
                used_bytes: 539 * MIB,
                processes: Some(vec![ProcessBytes {
                    pid: 7,
                    bytes: Some(530 * MIB),
                }]),
            }),
            object(211, 1, ObjKind::Context, ObjectAction::Created, 0),
            ctx_call(0, "cuCtxCreate", 100, 212, Some(OF_PID | 1)),
        ];
        if reads {
            events.push(read(213, "cuCtxCreate", ReadSide::After, 540 * MIB + other));
        }
        events.push(object(
            214,
            2,
            ObjKind::Buffer,
            ObjectAction::Created,
            2 * MIB,
        ));
        events.push(call(1, 213, "cuMemAlloc", 2).clone());
        if reads {
            events.push(read(
                215,
                "cuCtxDestroy",
                ReadSide::Before,
                542 * MIB + other,
            ));
        }
        events.extend([
            object(216, 1, ObjKind::Context, ObjectAction::Released, 0),
            object(216, 1, ObjKind::Context, ObjectAction::Destroyed, 0),
            // Inside cuCtxDestroy (216..272 ms).
            nvml(218, 453 * MIB + other, Some(442 * MIB)),
            nvml(270, 433 * MIB + other, Some(0)),
            ctx_call(2, "cuCtxDestroy", 216, 272, None),
            nvml(275, 3 * MIB + other, Some(0)),
        ]);
        Run::from_events(&ended(events))
    }

    #[test]
    fn a_context_made_and_destroyed_between_two_samples_is_named_from_the_agents_reads() {
        // NVML alone: its highest reading fell inside the making call, no
        // moment of the program's (the context held part of what it would,
        // the ledger none): no composition names it.
        let alone = short_driver_program(false, false);
        assert!(
            alone.holders_at_peak().is_none_or(|p| p.total == 0),
            "{:?}",
            alone.holders_at_peak()
        );
        // With the agent's reads: the device's figure less the 9 MiB NVML
        // counted beside the program.
        let read = short_driver_program(true, false);
        let peak = read.holders_at_peak().expect("composed");
        assert_eq!(peak.total, 533 * MIB, "{peak:?}");
        assert_eq!(peak.at_ns, 215 * MS, "the last moment before it went");
        assert_eq!(peak.unexplained(), 0, "{peak:?}");
        let agent = read.agent_peak().expect("read");
        assert_eq!(
            (agent.bytes, agent.api.as_str()),
            (533 * MIB, "cuCtxDestroy")
        );
    }

    /// simpleDrvRuntime: a stream made in a second context, which the
    /// program destroys without destroying the stream; the stream's 2 MiB
    /// went with the context (it was -2 MiB unexplained at exit).
    #[test]
    fn what_a_destroyed_context_held_went_with_it() {
        let in_context = |t: u64, id: u64, ctx: u64| {
            let Event::Object(mut o) = object(t, id, ObjKind::Stream, ObjectAction::Created, 0)
            else {
                unreachable!()
            };
            o.refs = vec![OF_PID | ctx];
            Event::Object(o)
        };
        let mut events = a_context("simpleDrvRuntime", "cuCtxCreate");
        events.extend([
            call(1, 40, "cuCtxCreate", 2),
            object(44, 2, ObjKind::Context, ObjectAction::Created, 0),
            sample(50, 1060 * MIB),
            call(2, 60, "cuStreamCreate", 3),
            in_context(64, 3, 2),
            sample(70, 1062 * MIB),
            object(80, 2, ObjKind::Context, ObjectAction::Released, 0),
            object(81, 2, ObjKind::Context, ObjectAction::Destroyed, 0),
            call(3, 80, "cuCtxDestroy", 2),
            sample(90, 530 * MIB),
            sample(100, 530 * MIB),
        ]);
        let run = Run::from_events(&ended(events));
        let peak = run.holders_at_peak().expect("composed");
        assert_eq!((peak.total, peak.reserves_held), (1062 * MIB, 1062 * MIB));
        let at_exit = run.holders().expect("composed");
        assert_eq!(at_exit.reserves_held, 530 * MIB, "{at_exit:?}");
        assert_eq!(at_exit.unexplained(), 0, "{at_exit:?}");
    }

    /// A watched OpenCL program on PoCL, whose memory is its RSS: 0.5 MiB
    /// before its first OpenCL call, 67 MiB once that call loaded PoCL and
    /// its LLVM, then a context's 12 MiB. The first two were unexplained
    /// (16-27% named in 4 of 25 runs of Hands On OpenCL's vadd).
    #[test]
    fn what_the_process_held_before_its_api_and_the_runtime_are_shares() {
        let meta = Event::Meta(Box::new(crate::trace::Meta {
            pid: 7,
            platform: "Portable Computing Language".into(),
            watch: Some(testing::watched("./vadd", 7)),
            ..testing::cpu_meta()
        }));
        let mut attached = seed_001().remove(0);
        if let Event::Agent(a) = &mut attached {
            a.t_ns = 15 * MS;
        }
        let events = vec![
            meta,
            rss(10, MIB / 2),
            attached,
            rss(20, 67 * MIB),
            call(0, 30, "clCreateContext", 1),
            object(32, 1, ObjKind::Context, ObjectAction::Created, 0),
            rss(40, 79 * MIB),
        ];
        let run = Run::from_events(&ended(events));
        let h = run.holders().expect("composed");
        assert_eq!((h.before_api, h.runtime), (MIB / 2, 67 * MIB - MIB / 2));
        assert_eq!(h.reserves_held, 12 * MIB, "{h:?}");
        assert_eq!(h.unexplained(), 0, "{h:?}");
    }

    /// Every reading taken before the program's first call of its API is
    /// all "before its API's use", each composed once the next arrived
    /// (which became the last such reading): `copybufferkernel`'s reading
    /// at 13.8 ms was 23 MiB unexplained, the next one's time being the
    /// last before the API.
    #[test]
    fn every_reading_before_the_api_is_all_the_programs_own() {
        let mut attached = seed_001().remove(0);
        if let Event::Agent(a) = &mut attached {
            a.t_ns = 35 * MS;
        }
        let events = vec![
            Event::Meta(Box::new(crate::trace::Meta {
                pid: 7,
                watch: Some(testing::watched("./copybufferkernel", 7)),
                ..testing::cpu_meta()
            })),
            rss(10, 5 * MIB),
            rss(20, 23 * MIB),
            rss(30, 38 * MIB),
            attached,
            rss(40, 64 * MIB),
        ];
        let run = Run::from_events(&ended(events));
        let before: Vec<(u64, u64, i64)> = run
            .holders_recent()
            .iter()
            .filter(|h| h.at_ns < 35 * MS)
            .map(|h| (h.at_ns / MS, h.before_api / MIB, h.unexplained()))
            .collect();
        assert_eq!(before, vec![(10, 5, 0), (20, 23, 0), (30, 38, 0)]);
    }

    /// Hands On OpenCL's matmul on PoCL: each `clBuildProgram` ran PoCL's
    /// compiler in the process (7 MiB at the first, about 2 at each later
    /// one). The step across a build is its program's, with a reading
    /// between the making call and the build or not.
    #[test]
    fn a_programs_build_on_a_cpu_device_is_its_programs_reserve() {
        for reading_between in [false, true] {
            let mut attached = seed_001().remove(0);
            if let Event::Agent(a) = &mut attached {
                a.t_ns = 15 * MS;
            }
            let mut events = vec![
                Event::Meta(Box::new(crate::trace::Meta {
                    pid: 7,
                    watch: Some(testing::watched("./mult", 7)),
                    ..testing::cpu_meta()
                })),
                rss(10, 60 * MIB),
                attached,
                rss(16, 60 * MIB),
                call(0, 20, "clCreateProgramWithSource", 1),
                object(21, 1, ObjKind::Program, ObjectAction::Created, 0),
            ];
            if reading_between {
                events.push(rss(25, 60 * MIB));
            }
            events.extend([
                Event::Call(Call {
                    seq: 1,
                    pid: 7,
                    begin_ns: 30 * MS,
                    end_ns: 80 * MS,
                    api: "clBuildProgram".into(),
                    status: CallStatus::Ok,
                    ..Call::default()
                }),
                rss(90, 67 * MIB),
                rss(100, 67 * MIB),
            ]);
            let run = Run::from_events(&ended(events));
            let h = run.holders().expect("composed");
            assert_eq!(
                h.reserves_held,
                7 * MIB,
                "reading between: {reading_between}: {h:?}"
            );
            assert_eq!(h.unexplained(), 0, "{h:?}");
            let ids: Vec<Vec<u64>> = run.reserves().measured().map(|r| r.ids).collect();
            assert!(ids.iter().all(|i| i.len() == 1), "{ids:?}");
        }
    }

    /// `cl_copybuffer` on a loaded host (PoCL, 45 ms): no sample fell between
    /// PoCL's load and its context, nor on either side of the context's and
    /// the queue's making calls (21.8% named). The agent's reads of its
    /// process's resident memory on each side of them measure each call's
    /// step, and the read before the first names where the runtime ended;
    /// on a GPU device (NVML's figures) they are no figure of its memory.
    #[test]
    fn the_agents_resident_reads_measure_a_cpu_devices_calls() {
        let run_on = |meta: crate::trace::Meta, inside: u64| {
            let mut attached = seed_001().remove(0);
            if let Event::Agent(a) = &mut attached {
                a.t_ns = 15 * MS;
            }
            let events = vec![
                Event::Meta(Box::new(meta)),
                rss(10, 7 * MIB),
                attached,
                resident(33, "clCreateContext", ReadSide::Before, 64 * MIB),
                object(34, 1, ObjKind::Context, ObjectAction::Created, 0),
                call(0, 33, "clCreateContext", 1),
                resident(39, "clCreateContext", ReadSide::After, 72 * MIB),
                resident(40, "clCreateCommandQueue", ReadSide::Before, 72 * MIB),
                object(41, 2, ObjKind::Queue, ObjectAction::Created, 0),
                call(1, 40, "clCreateCommandQueue", 2),
                resident(46, "clCreateCommandQueue", ReadSide::After, 73 * MIB),
                object(47, 3, ObjKind::Buffer, ObjectAction::Created, 4 * MIB),
                call(2, 47, "clCreateBuffer", 3),
                rss(60, 77 * MIB),
                // A build (PoCL's compiler in the process, 7 MiB), and the
                // program's last reading taken while it ran.
                object(61, 4, ObjKind::Program, ObjectAction::Created, 0),
                call(3, 61, "clCreateProgramWithSource", 4),
                rss(67, 77 * MIB),
                resident(70, "clBuildProgram", ReadSide::Before, 77 * MIB),
                rss(85, inside),
                Event::Call(Call {
                    seq: 4,
                    pid: 7,
                    begin_ns: 70 * MS,
                    end_ns: 88 * MS,
                    api: "clBuildProgram".into(),
                    status: CallStatus::Ok,
                    ..Call::default()
                }),
                resident(89, "clBuildProgram", ReadSide::After, 84 * MIB),
            ];
            let mut run = Run::default();
            let (last, before) = events.split_last().expect("events");
            for e in before {
                run.apply(e);
            }
            // Before the build's read after it, its reading inside it is
            // short of the step; with it, composed again.
            let short = run.holders().map(|h| (h.at_ns, h.unexplained()));
            run.apply(last);
            (Run::folding(run, &ended(Vec::new())), short)
        };
        let watched = testing::watched("./copybuffer", 7);
        let cpu_meta = crate::trace::Meta {
            pid: 7,
            watch: Some(watched.clone()),
            ..testing::cpu_meta()
        };
        // Taken before the build grew: with its step counted the shares
        // name 7 MiB beyond it, and it is taken back; the peak and the
        // latest are the reading before the build.
        let (early, _) = run_on(cpu_meta.clone(), 77 * MIB);
        let h = early.holders().expect("composed");
        assert_eq!((h.at_ns, h.unexplained()), (67 * MS, 0), "{h:?}");
        let peak = early.holders_at_peak().expect("a peak");
        assert!(peak.at_ns < 70 * MS && peak.unexplained() == 0, "{peak:?}");
        let (cpu, short) = run_on(cpu_meta, 84 * MIB);
        assert_eq!(short, Some((85 * MS, (7 * MIB) as i64)));
        let h = cpu.holders().expect("composed");
        assert_eq!((h.before_api, h.runtime), (7 * MIB, 57 * MIB), "{h:?}");
        assert_eq!((h.reserves_held, h.held), (16 * MIB, 4 * MIB), "{h:?}");
        assert_eq!((h.at_ns, h.unexplained()), (85 * MS, 0), "{h:?}");
        assert!(cpu.reserves().measured().all(|r| r.by_agent));
        // NVML's figures: the reads measure nothing.
        let (gpu, _) = run_on(
            crate::trace::Meta {
                pid: 7,
                watch: Some(watched),
                ..testing::meta()
            },
            84 * MIB,
        );
        assert!(gpu.reserves().measured().all(|r| !r.by_agent));
    }

    /// The agent's read of its process's resident memory on `side` of `api`.
    fn resident(t: u64, api: &str, side: ReadSide, bytes: u64) -> Event {
        Event::DeviceRead(DeviceRead {
            t_ns: t * MS,
            pid: 7,
            api: api.into(),
            side,
            free_bytes: 0,
            total_bytes: 0,
            resident_bytes: Some(bytes),
            first_touched_bytes: None,
        })
    }

    /// A watched PoCL program `exe` up to its context: 7 MiB before its
    /// first OpenCL call (the agent attached at 15 ms), PoCL loaded (64),
    /// then a context of 8 MiB read by the agent across its call.
    fn pocl_context(exe: &str) -> Vec<Event> {
        let mut attached = seed_001().remove(0);
        if let Event::Agent(a) = &mut attached {
            a.t_ns = 15 * MS;
        }
        vec![
            Event::Meta(Box::new(crate::trace::Meta {
                pid: 7,
                watch: Some(testing::watched(exe, 7)),
                ..testing::cpu_meta()
            })),
            rss(10, 7 * MIB),
            attached,
            rss(20, 64 * MIB),
            resident(33, "clCreateContext", ReadSide::Before, 64 * MIB),
            object(34, 1, ObjKind::Context, ObjectAction::Created, 0),
            call(0, 33, "clCreateContext", 1),
            resident(39, "clCreateContext", ReadSide::After, 72 * MIB),
        ]
    }

    /// A PoCL program's life on a CPU device, as the agent reads it: 7 MiB
    /// before its first call, PoCL loaded (64), a context (8 MiB) and a build
    /// of `build` MiB measured across their calls by the agent's resident
    /// reads, the build's last reading taken while it ran (holding 1 MiB of
    /// scratch beyond its end), the program and the context released, and a
    /// reading after the teardown that did not fall.
    fn pocl_teardown(build: u64) -> Vec<Event> {
        let built = (72 + build) * MIB;
        let mut events = pocl_context("./vadd_chain");
        events.extend([
            object(41, 2, ObjKind::Program, ObjectAction::Created, 0),
            call(1, 40, "clCreateProgramWithSource", 2),
            resident(50, "clBuildProgram", ReadSide::Before, 72 * MIB),
            rss(70, built + MIB),
            Event::Call(Call {
                seq: 2,
                pid: 7,
                begin_ns: 50 * MS,
                end_ns: 88 * MS,
                api: "clBuildProgram".into(),
                status: CallStatus::Ok,
                ..Call::default()
            }),
            resident(89, "clBuildProgram", ReadSide::After, built),
            object(90, 2, ObjKind::Program, ObjectAction::Released, 0),
            call(3, 90, "clReleaseProgram", 2),
            object(95, 1, ObjKind::Context, ObjectAction::Released, 0),
            object(96, 1, ObjKind::Context, ObjectAction::Destroyed, 0),
            call(4, 95, "clReleaseContext", 1),
            rss(110, built),
        ]);
        events
    }

    /// Hands On OpenCL's `vadd_chain` on PoCL (80% named in 5 of 8 runs):
    /// its only readings between its context and its teardown were taken
    /// while its build ran, the last of them already holding the program's
    /// 7 MiB. As the "before" of the context's release it made the memory
    /// seem to fall by all of the build's step when it stood still. A
    /// reading inside a call whose step the agent read is no side of a
    /// measurement: the reading after the teardown keeps both reserves.
    ///
    /// The same when the reading after the teardown arrives before the
    /// context's deletion does (the sampler runs ahead of the agent's
    /// records: 89.7% named in one run of eight).
    #[test]
    fn a_reading_inside_a_measured_call_is_no_side_of_what_went_after() {
        for ahead in [false, true] {
            let mut events = pocl_teardown(7);
            if ahead {
                let last = events.pop().expect("the reading after");
                let at = events
                    .iter()
                    .position(|e| matches!(e, Event::Object(o) if o.kind == ObjKind::Context && o.action == ObjectAction::Released))
                    .expect("the context's release");
                events.insert(at, last);
            }
            let run = Run::from_events(&ended(events));
            let kept: Vec<bool> = run
                .reserves()
                .measured()
                .map(|r| r.kept.is_some())
                .collect();
            assert_eq!(
                kept,
                vec![true, true],
                "context and program kept, ahead: {ahead}"
            );
            let h = run.holders().expect("composed");
            assert_eq!(h.at_ns, 110 * MS);
            assert_eq!(h.reserves_released, 15 * MIB, "ahead: {ahead}: {h:?}");
            assert_eq!(h.unexplained(), 0, "{h:?}");
        }
    }

    /// PoCL's `copybufferkernel`: a context (8 MiB), a 4 MiB buffer, a build
    /// (7 MiB), the program released, then the buffer freed by a call from
    /// 96 to 99 ms, a reading at `at`, the context released, and a reading
    /// after the teardown that did not fall.
    fn pocl_buffer_freed(at: u64) -> Vec<Event> {
        let mut events = pocl_context("./copybufferkernel");
        events.extend([
            object(41, 3, ObjKind::Buffer, ObjectAction::Created, 4 * MIB),
            call(1, 40, "clCreateBuffer", 3),
            rss(50, 76 * MIB),
            object(59, 2, ObjKind::Program, ObjectAction::Created, 0),
            call(2, 55, "clCreateProgramWithSource", 2),
            resident(62, "clBuildProgram", ReadSide::Before, 76 * MIB),
            Event::Call(Call {
                seq: 3,
                pid: 7,
                begin_ns: 62 * MS,
                end_ns: 80 * MS,
                api: "clBuildProgram".into(),
                status: CallStatus::Ok,
                ..Call::default()
            }),
            resident(81, "clBuildProgram", ReadSide::After, 83 * MIB),
            rss(85, 83 * MIB),
            object(90, 2, ObjKind::Program, ObjectAction::Released, 0),
            call(4, 88, "clReleaseProgram", 2),
            rss(at, 79 * MIB),
            object(99, 3, ObjKind::Buffer, ObjectAction::Destroyed, 4 * MIB),
            object(99, 3, ObjKind::Buffer, ObjectAction::Released, 4 * MIB),
            Event::Call(Call {
                seq: 5,
                pid: 7,
                begin_ns: 96 * MS,
                end_ns: 99 * MS,
                api: "clReleaseMemObject".into(),
                status: CallStatus::Ok,
                object: Some(OF_PID | 3),
                ..Call::default()
            }),
            object(101, 1, ObjKind::Context, ObjectAction::Released, 0),
            object(101, 1, ObjKind::Context, ObjectAction::Destroyed, 0),
            call(6, 100, "clReleaseContext", 1),
            rss(110, 79 * MIB),
        ]);
        events
    }

    /// PoCL's `copybufferkernel` (90% named at exit in one run of eight): a
    /// reading taken while `clReleaseMemObject` gave a 4 MiB buffer back,
    /// or after it and before its record arrived, was the first after the
    /// program's release, so its 7 MiB seemed gone. Once the call's span and
    /// the free are known the reading is no side, or counts the free, and
    /// the one after the teardown keeps the program's memory.
    #[test]
    fn a_reading_inside_a_free_that_arrives_later_is_no_side_of_what_went() {
        for at in [97, 100] {
            let run = Run::from_events(&ended(pocl_buffer_freed(at)));
            let h = run.holders().expect("composed");
            assert_eq!(h.at_ns, 110 * MS);
            assert_eq!(
                (h.held, h.reserves_released),
                (0, 15 * MIB),
                "at {at}: {h:?}"
            );
            assert_eq!(h.unexplained(), 0, "{h:?}");
        }
    }

    /// The sampler's readings and the agent's records reach gpulab in two
    /// streams, each in its own order, interleaved however the threads ran.
    /// Whatever the interleaving, who held the memory at the last reading
    /// is the same: each teardown above, 200 interleavings each.
    #[test]
    fn who_holds_it_at_exit_does_not_depend_on_which_stream_came_first() {
        let mut cooled = pocl_teardown(40);
        cooled.push(rss(120, (72 + 40 - 12) * MIB));
        let scenarios = [
            ("vadd_chain", pocl_teardown(7)),
            ("vadd, no cache", cooled),
            ("copybufferkernel, inside", pocl_buffer_freed(97)),
            ("copybufferkernel, after", pocl_buffer_freed(100)),
        ];
        let exit = |events: &[Event]| {
            let run = Run::from_events(&ended(events.to_vec()));
            let h = run.holders().expect("composed");
            (
                h.at_ns,
                h.held,
                h.reserves_held,
                h.reserves_released,
                h.unexplained(),
            )
        };
        let mut rng = testing::Rng(0x9e37_79b9_7f4a_7c15);
        for (name, events) in scenarios {
            let want = exit(&events);
            let (meta, rest) = events.split_first().expect("a meta");
            let (samples, records): (Vec<&Event>, Vec<&Event>) =
                rest.iter().partition(|e| matches!(e, Event::Sample(_)));
            for seed in 0..200 {
                let (mut s, mut r) = (samples.iter().peekable(), records.iter().peekable());
                let mut mixed = vec![meta.clone()];
                while s.peek().is_some() || r.peek().is_some() {
                    let from_samples = r.peek().is_none() || (s.peek().is_some() && rng.chance(50));
                    let next = if from_samples { s.next() } else { r.next() };
                    mixed.extend(next.map(|e| (*e).clone()));
                }
                assert_eq!(exit(&mixed), want, "{name}, interleaving {seed}");
            }
        }
    }

    /// Hands On OpenCL's `vadd` on PoCL with its compiler's cache off (103%
    /// named at exit): a build of 136 MiB kept after its program went, then
    /// 22 MiB given back as the context was destroyed. Less than half of the
    /// build's, so still kept; but no more of it than the reading holds.
    #[test]
    fn memory_kept_after_its_objects_went_is_no_more_than_the_reading_holds() {
        let mut events = pocl_teardown(40);
        events.push(rss(120, (72 + 40 - 12) * MIB));
        let run = Run::from_events(&ended(events));
        let h = run.holders().expect("composed");
        assert_eq!(h.at_ns, 120 * MS);
        assert_eq!(h.reserves_released, 36 * MIB, "{h:?}");
        assert_eq!(h.unexplained(), 0, "{h:?}");
        assert!(
            run.holders_recent().iter().all(|h| h.unexplained() >= 0),
            "{:?}",
            run.holders_recent()
        );
    }

    /// NVML reads the device's figure and the processes' apart: while a
    /// context is being made they disagree (118 MiB in use on the device,
    /// 543 MiB of it the program's), and one such reading says nothing of
    /// the rest of the device. Two in a row that agree do.
    #[test]
    fn the_rest_of_the_device_is_taken_from_two_readings_that_agree() {
        let mut run = Run::default();
        run.apply(&nvml(10, 118 * MIB, Some(543 * MIB)));
        run.apply(&nvml(20, 560 * MIB, Some(551 * MIB)));
        assert_eq!(run.readings.others, None, "one sane reading is not enough");
        run.apply(&nvml(30, 561 * MIB, Some(552 * MIB)));
        assert_eq!(run.readings.others, Some(9 * MIB));
    }

    #[test]
    fn a_read_is_not_set_against_a_device_whose_other_processes_moved() {
        // Another process took 512 MiB after NVML's sample: the agent's
        // reads hold it, and the next sample's rest of the device says so.
        let run = short_driver_program(true, true);
        assert!(run.agent_peak().is_none(), "{:?}", run.agent_peak());
        let peak = run.holders_at_peak();
        assert!(peak.is_none_or(|p| p.total < 540 * MIB), "{peak:?}");
    }
}
