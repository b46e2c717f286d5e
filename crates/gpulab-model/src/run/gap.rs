//! Why the device holds more than the ledger: causes the run itself can show
//! (forgotten events, events still referring to released buffers, released objects
//! the driver has not destroyed, contexts' own reserve, pool caches, allocations
//! released while still mapped, graph memory). Never a driver refcount.

use crate::trace::{Api, ObjKind};

use super::Run;

/// The ledger against the device, bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    /// Bytes of buffers the program still holds.
    pub ledger: i64,
    /// Latest reading above the baseline.
    pub device: Option<i64>,
    pub causes: Vec<String>,
}

impl Gap {
    /// Device bytes the ledger does not account for.
    pub fn unexplained(&self) -> Option<i64> {
        Some(self.device? - self.ledger)
    }

    /// Large enough to highlight: 4 MiB, or a tenth of what the device holds.
    pub fn notable(&self) -> bool {
        let Some(d) = self.device else { return false };
        let g = d - self.ledger;
        g.abs() > (4 << 20).max(d.abs() / 10)
    }
}

/// Every cause, for a report.
pub fn of(run: &Run) -> Gap {
    within(run, usize::MAX)
}

/// The causes, of which at most `refers` "live event refers to released buffer"
/// lines (one per event and buffer: a run that forgot 200,000 events has that
/// many; a panel shows a screenful). Read from the ledger's index
/// ([`super::LiveIndex`]), never a walk of every object.
pub fn within(run: &Run, refers: usize) -> Gap {
    let ledger = run.live_bytes();
    let device = run.device_above_baseline();
    let mut causes = objects(run, refers);
    let index = &run.live_index();
    let contexts = index.held.get(&ObjKind::Context).copied().unwrap_or(0);
    if contexts > 0 && device.is_some_and(|d| d - ledger > 4 << 20) {
        causes.push(format!(
            "context reserve: {contexts} live context{} hold device memory of their own",
            if contexts == 1 { "" } else { "s" }
        ));
    }
    caches(run, &mut causes);
    mapped(run, &mut causes);
    let anything_held = index.holding > 0;
    // Only when nothing above explains it: then it is the driver's own keeping.
    if causes.is_empty()
        && run.end.is_some()
        && !anything_held
        && device.is_some_and(|d| d - ledger > 4 << 20)
    {
        causes.push(
            "the program holds nothing: the driver keeps this until the worker process exits"
                .into(),
        );
    }
    Gap {
        ledger,
        device,
        causes,
    }
}

/// What the program's objects explain: forgotten ones, live events that refer
/// to released buffers (at most `refers`), releases the driver has not carried
/// out yet.
fn objects(run: &Run, refers: usize) -> Vec<String> {
    let mut causes = Vec::new();
    let objs = &run.ledger();
    let index = &run.live_index();
    // The driver's deletions are seen for this kind (an agent that watches
    // them and saw none is a finding too).
    let destroys = |whose| run.deletions().seen(whose);

    let forgotten = index.forgotten.len();
    if let Some(first) = index.forgotten.first().and_then(|id| objs.get(id)) {
        let line = first
            .line
            .map(|l| format!(" (line {l})"))
            .unwrap_or_default();
        causes.push(format!(
            "{} {}{} forgotten, never released{line}",
            forgotten,
            first.kind.as_str(),
            if forgotten == 1 { "" } else { "s" }
        ));
    }
    for (event, _, buffer) in index.dangling.iter().take(refers) {
        if let (Some(o), Some(buf)) = (objs.get(event), objs.get(buffer)) {
            causes.push(format!(
                "live event {} refers to released buffer {}",
                o.name(),
                buf.name()
            ));
        }
    }
    for kind in [ObjKind::Buffer, ObjKind::Context] {
        // Released objects of this kind whose deletion the run sees: of
        // another family's or process's, a release may be the deletion.
        let seen: Vec<&std::collections::BTreeSet<u64>> = index
            .pending
            .iter()
            .filter(|(w, _)| w.2 == kind && destroys(**w))
            .map(|(_, ids)| ids)
            .collect();
        let pending: usize = seen.iter().map(|p| p.len()).sum();
        if let Some(first) = seen
            .iter()
            .filter_map(|p| p.first())
            .min()
            .and_then(|id| objs.get(id))
        {
            let what = if kind == ObjKind::Buffer {
                "pending free"
            } else {
                "context never destroyed"
            };
            causes.push(format!(
                "{} {} released, not destroyed by the driver yet ({what}{})",
                kind.as_str(),
                first.name(),
                if pending > 1 {
                    format!(", {pending} in all")
                } else {
                    String::new()
                }
            ));
        }
    }
    causes
}

/// CUDA: what the pools and the graphs keep, as the worker read them after the
/// latest line.
fn caches(run: &Run, causes: &mut Vec<String>) {
    // CUDA: the default pool's own bookkeeping, as the worker read it after the
    // latest line. Memory the pool reserved but has not handed out is its cache.
    if let Some(pool) = &run.folds.last_pool {
        let cached = pool.pool_reserved.saturating_sub(pool.pool_used);
        if cached > 4 << 20 {
            causes.push(format!(
                "pool cache: {:.1} MiB freed, kept by the default pool for reuse (cudaMemPoolTrimTo gives it back)",
                crate::units::mib(cached)
            ));
        }
    }
    // The lab's own pool, read the same way.
    if let Some(own) = run
        .calls()
        .iter()
        .rev()
        .find_map(|c| c.cuda.as_ref())
        .and_then(|m| m.custom_pool)
    {
        let cached = own.reserved.saturating_sub(own.used);
        if cached > 4 << 20 {
            causes.push(format!(
                "pool cache: {:.1} MiB freed, kept by the lab's own pool (its release threshold; cudaMemPoolTrimTo gives it back)",
                crate::units::mib(cached)
            ));
        }
    }
    // CUDA graphs: the device's graph memory, read after the latest line. What
    // graph allocations still use is theirs until freed; the rest is kept for
    // the graphs' next launches until cudaDeviceGraphMemTrim.
    if let Some(g) = run
        .calls()
        .iter()
        .rev()
        .find_map(|c| c.cuda.as_ref())
        .and_then(|m| m.graph_mem)
    {
        if g.used > 4 << 20 {
            causes.push(format!(
                "graph allocations: {:.1} MiB allocated by graph launches and not freed yet",
                crate::units::mib(g.used)
            ));
        }
        let kept = g.reserved.saturating_sub(g.used);
        if kept > 4 << 20 {
            causes.push(format!(
                "graph memory: {:.1} MiB freed, kept by the device for graphs (cudaDeviceGraphMemTrim gives it back)",
                crate::units::mib(kept)
            ));
        }
    }
}

/// CUDA's virtual memory API: a handle released while still mapped.
fn mapped(run: &Run, causes: &mut Vec<String>) {
    let (objs, index) = (&run.ledger(), &run.live_index());
    // CUDA's virtual memory API: a mapping keeps its physical allocation, so a
    // handle released while still mapped holds its memory until cuMemUnmap.
    let ok_calls = |api: Api| {
        run.calls()
            .iter()
            .filter(|c| {
                c.api.api() == Some(api) && matches!(c.status, crate::trace::CallStatus::Ok)
            })
            .count()
    };
    let still_mapped = ok_calls(Api::CuMemMap) > ok_calls(Api::CuMemUnmap);
    if still_mapped
        && let Some(mem) = index.loose_mem_handles.first().and_then(|id| objs.get(id))
        && index.held.get(&ObjKind::VaRange).is_some_and(|n| *n > 0)
    {
        causes.push(format!(
            "mem handle {} released while mapped: the mapping keeps its {:.1} MiB until cuMemUnmap",
            mem.name(),
            crate::units::mib(mem.bytes)
        ));
    }
}
