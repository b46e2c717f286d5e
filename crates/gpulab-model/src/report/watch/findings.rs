//! What a watched program's report finds, read from its run: the kinds,
//! what it left alive and who made it, what the driver still holds and what
//! pins it, how each process ended and what arrived of it.

use std::collections::HashMap;

use super::*;

/// The held objects grouped: the chain's kinds without the objects' numbers,
/// the making call and its calling frame make the key.
pub(super) fn held_groups(run: &Run, held: &[HeldObject], pins: &Pins) -> Vec<HeldGroup> {
    type Key = (ObjKind, String, Option<String>, Option<u64>);
    let mut groups: BTreeMap<Key, HeldGroup> = BTreeMap::new();
    for h in held {
        let life = run.ledger().get(&h.id);
        // The first chain that pins it, by kind: read from the ledger, not
        // from the words `pinned_by` says it in.
        let pins = pins
            .to(h.id)
            .first()
            .map(|path| {
                path.iter()
                    .filter_map(|i| run.ledger().get(i).map(|o| o.kind.as_str()))
                    .collect::<Vec<_>>()
                    .join(" -> ")
            })
            .unwrap_or_default();
        let created_by = life.and_then(|l| l.made_by.as_ref()).map(|m| m.api.clone());
        let stack = life.and_then(|l| l.stack);
        let g = groups
            .entry((h.kind, pins.clone(), created_by.clone(), stack))
            .or_insert_with(|| HeldGroup {
                kind: h.kind,
                count: 0,
                bytes: 0,
                reserve_min_bytes: None,
                reserve_max_bytes: None,
                unmeasured: 0,
                pinned_by: pins,
                created_by,
                made_at: stack
                    .and_then(|id| run.stacks().get(&id))
                    .and_then(|frames| frames.first().cloned()),
            });
        g.count += 1;
        g.bytes += h.bytes + h.reserve.as_ref().map_or(0, |r| r.bytes);
        match &h.reserve {
            Some(r) => {
                g.reserve_min_bytes = Some(g.reserve_min_bytes.map_or(r.bytes, |m| m.min(r.bytes)));
                g.reserve_max_bytes = Some(g.reserve_max_bytes.map_or(r.bytes, |m| m.max(r.bytes)));
            }
            None => g.unmeasured += 1,
        }
    }
    let mut out: Vec<HeldGroup> = groups.into_values().collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.bytes));
    out
}

/// Per kind: made, released, alive and its bytes, the peak alive at once.
pub(super) fn kinds(run: &Run) -> Vec<KindReport> {
    let index = &run.live_index();
    let mut kinds: BTreeMap<ObjKind, KindReport> = BTreeMap::new();
    for (&kind, &created) in index.made_count.iter().filter(|(_, n)| **n > 0) {
        let released = index.released_count.get(&kind).copied().unwrap_or(0);
        let peak = run.peak_live().get(&kind).copied().unwrap_or(0);
        kinds.insert(
            kind,
            KindReport {
                kind,
                created,
                released,
                alive_at_exit: created.saturating_sub(released),
                alive_bytes: 0,
                peak_alive: u64::try_from(peak).unwrap_or(0),
            },
        );
    }
    for ((kind, ..), (_, bytes)) in &index.unreleased {
        if let Some(k) = kinds.get_mut(kind) {
            k.alive_bytes += bytes;
        }
    }
    kinds.into_values().collect()
}

/// What the program never released, grouped by who made it.
pub(super) fn alive_groups(run: &Run, incomplete: &BTreeSet<u32>) -> Vec<AliveGroup> {
    let reporting = run.frameworks().names();
    run.live_index()
        .unreleased
        .iter()
        .map(|((kind, created_by, pid, thread, stack), (count, bytes))| {
            let owner = stack
                .and_then(|id| run.owners().get(&id).copied())
                .unwrap_or(Owner::Unknown);
            AliveGroup {
                kind: *kind,
                count: *count,
                bytes: *bytes,
                created_by: created_by.clone(),
                owner: owner.as_str().into(),
                kept_by_allocator: matches!(
                    kind,
                    ObjKind::Buffer | ObjKind::MemHandle | ObjKind::HostBuffer | ObjKind::Managed
                ) && owner.framework().is_some_and(|f| reporting.contains(&f)),
                kept_by_runtime: owner.keeps_for_its_handles()
                    || matches!(kind, ObjKind::Context | ObjKind::Program | ObjKind::Stream)
                        && (!matches!(owner, Owner::Program | Owner::Unknown)
                            || stack
                                .and_then(|id| run.stacks().get(&id))
                                .and_then(|frames| frames.iter().find(|f| !f.python))
                                .is_some_and(runtime_frame)),
                pid: *pid,
                thread: *thread,
                uncertain: incomplete.contains(pid),
                backtrace: stack
                    .and_then(|id| run.stacks().get(&id))
                    .cloned()
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// A frame in the CUDA runtime: its shared library, or its static copy linked
/// into the program or a library (named `libcudart_static_<hash>`).
pub(super) fn runtime_frame(f: &Frame) -> bool {
    let file = f.module.rsplit('/').next().unwrap_or(&f.module);
    file.starts_with("libcudart")
        || f.function
            .as_deref()
            .is_some_and(|name| name.starts_with("libcudart_static"))
}

/// Objects the program released that the driver has not destroyed yet, and
/// what the program still holds that pins each.
pub(super) fn held(run: &Run, incomplete: &BTreeSet<u32>, pins: &Pins) -> Vec<HeldObject> {
    let start = run.meta().map_or(0, |m| m.t_ns);
    let (lives, index) = (&run.ledger(), &run.live_index());
    let reserves: BTreeMap<u64, crate::run::reserves::Reserve> = run
        .reserves()
        .measured()
        .flat_map(|r| r.ids.clone().into_iter().map(move |id| (id, r.clone())))
        .collect();
    let reserve_of = |id: u64| {
        reserves.get(&id).map(|r| HeldReserve {
            bytes: r.bytes,
            with: r
                .ids
                .iter()
                .filter(|other| **other != id)
                .map(|other| {
                    let kind = lives.get(other).map_or("object", |o| o.kind.as_str());
                    format!("{kind} {}", short_id(*other))
                })
                .collect(),
        })
    };
    index
        .owed
        .iter()
        .filter_map(|id| Some((*id, lives.get(id)?)))
        .filter(|(_, life)| run.deletions().watched(crate::run::deletions::whose(life)))
        .map(|(id, life)| HeldObject {
            id,
            kind: life.kind,
            bytes: life.bytes,
            released_ms: life.released_ns.unwrap_or(start).saturating_sub(start) as f64 / 1e6,
            reserve: reserve_of(id),
            pinned_by: pinned_by(id, lives, pins),
            // Ids carry their process's pid in the upper half.
            uncertain: incomplete.contains(&((id >> 32) as u32)),
        })
        .collect()
}

/// Per kind, how long destroyed objects outlived their release: the count,
/// median and longest the live index keeps, no list sorted.
pub(super) fn outlived(run: &Run) -> Vec<Outlived> {
    run.live_index()
        .outlived_ns
        .iter()
        .filter(|(kind, _)| run.deletions().watched_kind(**kind))
        .filter_map(|(kind, lags)| {
            Some(Outlived {
                kind: *kind,
                count: lags.len() as u64,
                median_ms: lags.median()? as f64 / 1e6,
                max_ms: lags.max()? as f64 / 1e6,
            })
        })
        .collect()
}

/// A note when the peak reading was taken while a call that made a context
/// (or a module, a queue, a stream) ran: what it made is in the ledger only
/// once it returned, so what the reading holds of it is unexplained there.
fn peak_in_the_making(run: &Run) -> Option<String> {
    let peak = run.holders_at_peak()?;
    if peak.unexplained() <= 0 {
        return None;
    }
    let making = run.reserves().being_made_at(peak.at_ns);
    if making.is_empty() {
        return None;
    }
    let names: Vec<String> = making
        .iter()
        .map(|id| {
            let kind = run.ledger().get(id).map_or("object", |o| o.kind.as_str());
            format!("{kind} {}", short_id(*id))
        })
        .collect();
    let (calls, they, were) = if names.len() == 1 {
        ("call", "it", "was")
    } else {
        ("calls", "they", "were")
    };
    Some(format!(
        "the peak reading, at {:.1} ms, was taken while the {calls} that made {} ran: what \
         {they} made is named only once {they} returned, so the {:.1} MiB unexplained there \
         may be what {they} {were} making",
        peak.at_ns.saturating_sub(run.t0()) as f64 / 1e6,
        names.join(" + "),
        peak.unexplained() as f64 / (1u64 << 20) as f64,
    ))
}

/// The stream's notes, and the warnings about what the report cannot vouch for.
pub(super) fn notes_and_warnings(
    run: &Run,
    processes: &[ProcessReport],
) -> (Vec<String>, Vec<String>) {
    let (infos, warned): (Vec<_>, Vec<_>) =
        run.notes_said().partition(|n| n.level == NoteLevel::Info);
    let mut notes: Vec<String> = infos.into_iter().map(|n| n.text.clone()).collect();
    let mut warnings: Vec<String> = warned.into_iter().map(|n| n.text.clone()).collect();
    if processes.is_empty() {
        warnings.push(
            "the agent never reported: the program made no OpenCL call through the ICD \
             loader and initialised no CUDA driver, or its loader ignores OPENCL_LAYERS \
             (ocl-icd before 2.3, or a vendor libOpenCL linked directly), or the processes \
             that made the calls could not reach gpulab (one that changed its user and then \
             started another program cannot map gpulab's memory; a daemon that detached \
             made its calls more than 2 s after the program ended). This report is empty because nothing was seen, not because nothing \
             leaked; `gpulab doctor` checks the loader and libcupti"
                .into(),
        );
    }
    if let Some((t_ns, bytes)) = run.memory_given_back() {
        notes.push(format!(
            "at {:.1} ms the process's memory read 0 while what it made still held {:.1} MiB: \
             the driver gave it back without a free the agent saw (the runtime's teardown at \
             exit, a device reset); who held it is composed up to the reading before",
            t_ns.saturating_sub(run.t0()) as f64 / 1e6,
            bytes as f64 / (1u64 << 20) as f64,
        ));
    }
    if let (n @ 1.., Some(first)) = run.readings_behind() {
        notes.push(format!(
            "{n} reading(s) of the process's memory, the first at {:.1} ms, held less than what \
             the agent had seen made by then (the buffers alone, or within 20 ms of a change): \
             NVML had not counted it yet (or the reading ran ahead of a free's record); who \
             held it is not composed at them",
            first.saturating_sub(run.t0()) as f64 / 1e6,
        ));
    }
    notes.extend(peak_in_the_making(run));
    if run
        .frameworks()
        .names()
        .contains(&gpulab_events::Framework::Jax)
    {
        notes.push(
            "JAX: its allocator tells no observer when it refuses an allocation; an \
             out-of-memory inside its preallocated pool is seen only in the program's own \
             error, and its arrays are not named by line"
                .into(),
        );
    }
    for (framework, why) in run.frameworks().unreadable() {
        warnings.push(format!(
            "{}: gpulab's Python hook cannot read all of its figures, {why}; the driver's view \
             stands without them",
            framework.label()
        ));
    }
    for p in processes {
        for why in p.unwatched.iter().chain(&p.conflicts) {
            warnings.push(format!("pid {}: {why}", p.pid));
        }
        match (p.records, p.dropped) {
            (Some(_), _) if !p.complete() => warnings.push(format!(
                "pid {}: the agent sent {} records but {} arrived; what this report says \
                 of its objects is uncertain",
                p.pid,
                p.records.unwrap_or(0),
                p.received
            )),
            (Some(_), Some(d)) if d > 0 => warnings.push(format!(
                "pid {}: {d} call records were dropped while gpulab was behind (object \
                 records never are): call counts above miss them",
                p.pid
            )),
            (Some(_), _) => {}
            (None, _) => warnings.push(format!(
                "pid {}: still running when gpulab stopped reading its records; what it did \
                 after that is not shown, so what this report says of its objects is uncertain",
                p.pid
            )),
        }
        if let Some(lost) = p.lost {
            warnings.push(format!(
                "pid {}: {lost} records never arrived (the process ended holding them while \
                 gpulab was behind); what this report says of its objects may miss them",
                p.pid
            ));
        }
        if let Some(cut) = p.cut {
            notes.push(format!(
                "pid {}: {cut} record{} a thread was writing when the process ended (it \
                 exited or was killed while that thread was inside a watched call, which \
                 never returned to the program) {} not in this report",
                p.pid,
                if cut == 1 { "" } else { "s" },
                if cut == 1 { "is" } else { "are" },
            ));
        }
    }
    (notes, warnings)
}

/// How the program ended, and its exit code when it exited.
pub(super) fn ended(run: &Run) -> (String, Option<i32>) {
    match run.end().map(|e| &e.status) {
        Some(EndStatus::Finished) => ("exited with status 0".to_string(), Some(0)),
        Some(EndStatus::Exited { code }) => (format!("exited with status {code}"), Some(*code)),
        Some(EndStatus::Cancelled) => ("stopped by gpulab".to_string(), None),
        Some(s) => (s.label(), None),
        None => ("still running when the stream ended".to_string(), None),
    }
}

/// Live objects whose references reach `target`, as `event #3 -> kernel #2`.
pub(super) fn pinned_by(target: u64, lives: &BTreeMap<u64, ObjState>, pins: &Pins) -> Vec<String> {
    pins.to(target)
        .iter()
        .map(|path| {
            path.iter()
                .filter_map(|i| {
                    let kind = lives.get(i)?.kind;
                    Some(format!("{} {}", kind.as_str(), short_id(*i)))
                })
                .collect::<Vec<_>>()
                .join(" -> ")
        })
        .collect()
}

/// Every chain of references from a live object that refers to others (an
/// event, a kernel) to what it reaches, found in one walk from each such
/// object: asking each held object of every referring one made a report of a
/// program with thousands of both take seconds.
///
/// References form short chains (event -> kernel -> buffer -> context); the
/// depth limit keeps a malformed stream from recursing deep. Of the chains
/// from one object to a target, the one kept is the first a depth-first walk
/// of the references, in their order, meets: the object that refers to the
/// target directly, else the first of its references that reaches it.
pub(super) struct Pins {
    /// For each target, a chain from each referring object that reaches it,
    /// in the referring objects' order; a chain ends at the object that
    /// refers to the target.
    chains: HashMap<u64, Vec<Vec<u64>>>,
}

impl Pins {
    pub(super) fn of(lives: &BTreeMap<u64, ObjState>, referring: &BTreeSet<u64>) -> Pins {
        let mut chains: HashMap<u64, Vec<Vec<u64>>> = HashMap::new();
        for &from in referring {
            let mut found: HashMap<u64, Vec<u64>> = HashMap::new();
            let mut path = Vec::new();
            walk(from, lives, 0, &mut path, &mut found);
            for (target, chain) in found {
                chains.entry(target).or_default().push(chain);
            }
        }
        // Each target's chains in the order of the objects they start from.
        for list in chains.values_mut() {
            list.sort_by_key(|chain| chain.first().copied());
        }
        Pins { chains }
    }

    /// The chains that reach `target`, one per live referring object.
    pub(super) fn to(&self, target: u64) -> &[Vec<u64>] {
        self.chains.get(&target).map_or(&[], Vec::as_slice)
    }
}

/// Depth-first from `at`: each target referred to by an object on the way is
/// kept with the first chain that meets it.
fn walk(
    at: u64,
    lives: &BTreeMap<u64, ObjState>,
    depth: usize,
    path: &mut Vec<u64>,
    found: &mut HashMap<u64, Vec<u64>>,
) {
    if depth > 6 {
        return;
    }
    let Some(life) = lives.get(&at) else { return };
    path.push(at);
    for r in &life.refs {
        found.entry(*r).or_insert_with(|| path.clone());
    }
    for r in &life.refs {
        walk(*r, lives, depth + 1, path, found);
    }
    path.pop();
}

pub(super) fn processes(run: &Run) -> Vec<ProcessReport> {
    let mut by_pid: BTreeMap<u32, ProcessReport> = BTreeMap::new();
    for a in run.agents() {
        let p = by_pid.entry(a.pid).or_insert(ProcessReport {
            pid: a.pid,
            parent_pid: a.parent_pid,
            exe: String::new(),
            apis: Vec::new(),
            unwatched: Vec::new(),
            conflicts: Vec::new(),
            records: None,
            dropped: None,
            coalesced: None,
            signal: None,
            lost: None,
            cut: None,
            received: 0,
            observed: None,
        });
        match &a.state {
            AgentState::Attached { exe, .. } => {
                p.exe = exe.clone();
                p.apis.push(a.api.clone());
            }
            // A process that exec'd ends each image: the counts add up.
            AgentState::Detached {
                records,
                dropped,
                coalesced,
                signal,
                lost,
                cut,
                observed,
            } => {
                if let Some(o) = observed {
                    p.observed = Some(p.observed.unwrap_or_default().and(o));
                }
                p.records = Some(p.records.unwrap_or(0) + records);
                p.dropped = Some(p.dropped.unwrap_or(0) + dropped);
                p.coalesced = Some(p.coalesced.unwrap_or(0) + coalesced);
                p.lost = Some(p.lost.unwrap_or(0) + lost).filter(|n| *n > 0);
                p.cut = Some(p.cut.unwrap_or(0) + cut).filter(|n| *n > 0);
                p.signal = *signal;
            }
            AgentState::Unavailable { reason } => {
                p.unwatched.push(format!("{}: {reason}", a.api));
            }
            AgentState::Conflict { reason } => p.conflicts.push(reason.clone()),
            // Folded as they arrive (`Run::unwatched_launches`), not kept.
            AgentState::Launches { .. } => {}
        }
    }
    // What arrived of each process's records: its calls, the objects whose ids
    // carry its pid, its device spans, what its frameworks said, and its
    // `attached` and `unavailable`
    // records (`detached` counts none of itself).
    // (A device span's queue is a stream id of its process, or its default
    // stream, id 0 there: the fold counts it for the pid in its upper half.)
    for (pid, n) in &run.folds().received {
        if let Some(p) = by_pid.get_mut(pid) {
            p.received += n;
        }
    }
    let agents = run
        .agents()
        .iter()
        .filter(|a| !matches!(a.state, AgentState::Detached { .. }));
    for a in agents {
        if let Some(p) = by_pid.get_mut(&a.pid) {
            p.received += 1;
        }
    }
    by_pid.into_values().collect()
}
