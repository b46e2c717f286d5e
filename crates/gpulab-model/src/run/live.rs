//! What the live-objects panel, the gap analysis and a watched program's
//! findings ask of the ledger, kept up to date as each object event arrives, so
//! that a frame of a run with 200,000 objects alive costs lookups, not a walk
//! of every object (39 ms a frame). Pure data; never prints.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::trace::ObjKind;

use super::ObjState;
use super::deletions::{Whose, whose};
use super::lags::Lags;

/// The ledger's objects, indexed by what the panels ask of them.
#[derive(Debug, Clone, Default)]
pub struct LiveIndex {
    /// Bytes of the objects the program holds, per kind.
    pub held_bytes: BTreeMap<ObjKind, u64>,
    /// Bytes of the objects of a size the program holds, per the stack that
    /// made them (its calling frame names who made them: [`super::owners`]).
    pub held_bytes_by_stack: BTreeMap<Option<u64>, u64>,
    /// The same, per process (an agent's object ids carry its pid in their
    /// upper 32 bits): what each rank of a job holds.
    pub held_bytes_by_pid_stack: BTreeMap<(u32, Option<u64>), u64>,
    /// Objects each process holds, per kind, and their bytes: one rank's
    /// share of the live objects.
    pub held_by_pid: BTreeMap<(u32, ObjKind), (usize, u64)>,
    /// Objects the program holds, per kind.
    pub held: BTreeMap<ObjKind, usize>,
    /// Kinds of which the ledger has seen an object.
    pub made: BTreeSet<ObjKind>,
    /// Forgotten objects the driver has not destroyed, by id.
    pub forgotten: BTreeSet<u64>,
    /// Objects the program released (no references left) and the driver has not
    /// destroyed, per process, API family and kind ([`Whose`]), by id.
    pub pending: BTreeMap<Whose, BTreeSet<u64>>,
    /// Mem handles of some bytes the program no longer holds, by id.
    pub loose_mem_handles: BTreeSet<u64>,
    /// Objects held or forgotten (destroyed or not).
    pub holding: usize,
    /// Events the program holds that refer to a buffer it no longer holds:
    /// (event id, place of the buffer in the event's refs, buffer id).
    pub dangling: BTreeSet<(u64, usize, u64)>,
    /// For each object, the held events that refer to it.
    referrers: HashMap<u64, BTreeSet<u64>>,
    /// Objects per kind, and of those the ones the program released.
    pub made_count: BTreeMap<ObjKind, u64>,
    pub released_count: BTreeMap<ObjKind, u64>,
    /// Objects the program never released, by who made them: (count, bytes).
    pub unreleased: BTreeMap<Maker, (u64, u64)>,
    /// Objects the program released whose destruction has not come, by id.
    pub owed: BTreeSet<u64>,
    /// Their bytes, per process, API family and kind ([`Whose`]): only where
    /// the run sees their deletion are they held by the driver.
    pub owed_bytes: BTreeMap<Whose, u64>,
    /// Objects the program never released that refer to others (what can pin
    /// a released object), by id.
    pub referring: BTreeSet<u64>,
    /// How long each destroyed object outlived its release, per kind, in ns.
    pub outlived_ns: BTreeMap<ObjKind, Lags>,
}

/// Who made an object, as a watched program's findings group what it left
/// alive: kind, the making call's API (`?` when unknown), pid, thread, stack.
pub type Maker = (ObjKind, String, u32, u64, Option<u64>);

/// What one object adds to the index.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Facts {
    kind: ObjKind,
    whose: Whose,
    held: bool,
    bytes: u64,
    stack: Option<u64>,
    forgotten: bool,
    forgotten_alive: bool,
    pending: bool,
    /// A buffer the program does not hold: what a live event may still refer to.
    loose_buffer: bool,
    /// The refs of a held event.
    event_refs: Vec<u64>,
    /// Released by the program (its last reference went).
    released: bool,
    /// Never released: who made it.
    unreleased: Option<Maker>,
    /// Released, and its destruction has not come.
    owed: bool,
    /// Never released, and refers to other objects.
    referring: bool,
    /// Released and destroyed: how long after its release, in ns.
    outlived_ns: Option<u64>,
}

impl Facts {
    fn of(o: &ObjState) -> Facts {
        let held = o.held();
        Facts {
            kind: o.kind,
            whose: whose(o),
            held,
            bytes: o.bytes,
            stack: o.stack,
            forgotten: o.forgotten,
            forgotten_alive: o.forgotten && !o.destroyed(),
            pending: o.refcount == 0 && !o.destroyed(),
            loose_buffer: o.kind == ObjKind::Buffer && !held,
            event_refs: if o.kind == ObjKind::Event && held {
                o.refs.clone()
            } else {
                Vec::new()
            },
            released: o.released_ns.is_some(),
            unreleased: o.released_ns.is_none().then(|| maker(o)),
            owed: o.released_ns.is_some() && o.destroyed_ns.is_none(),
            referring: o.released_ns.is_none() && !o.refs.is_empty(),
            outlived_ns: match (o.released_ns, o.destroyed_ns) {
                (Some(r), Some(d)) => Some(d.saturating_sub(r)),
                _ => None,
            },
        }
    }
}

/// Who made `o`, as [`Maker`] says.
/// Without its making call (dropped while gpulab was behind), an agent's
/// object still names its process: its id's upper half (a lab's ids have
/// none).
pub fn maker(o: &ObjState) -> Maker {
    let (api, pid, thread) = o
        .made_by
        .as_ref()
        .map_or((UNSEEN_MAKER, (o.id >> 32) as u32, 0), |m| {
            (m.api.as_str(), m.pid, m.thread)
        });
    (o.kind, api.to_string(), pid, thread, o.stack)
}

/// The maker of an object whose making call never arrived.
pub const UNSEEN_MAKER: &str = "?";

/// How a text names an object's maker (`through` the library that called
/// for it, when one did): an unseen one says why it is unseen.
pub fn maker_text(api: &str, through: &str, pid: u32, thread: u64) -> String {
    if api == UNSEEN_MAKER {
        format!("a call whose record gpulab dropped while it was behind{through} (pid {pid})")
    } else {
        format!("{api}{through} (pid {pid}, thread {thread})")
    }
}

/// Objects of one kind made at one stack that a process held at a moment
/// (a refusal): their count and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldThen {
    pub kind: ObjKind,
    pub stack: Option<u64>,
    pub count: u64,
    pub bytes: u64,
}

impl LiveIndex {
    /// The object's facts before its latest event, for [`LiveIndex::update`].
    pub(super) fn before(ledger: &BTreeMap<u64, ObjState>, id: u64) -> Option<Facts> {
        ledger.get(&id).map(Facts::of)
    }

    /// Takes in the change one event made to object `id` of `ledger`.
    pub(super) fn update(
        &mut self,
        ledger: &BTreeMap<u64, ObjState>,
        id: u64,
        before: Option<Facts>,
    ) {
        let Some(after) = ledger.get(&id).map(Facts::of) else {
            return;
        };
        if before.as_ref() == Some(&after) {
            return;
        }
        if let Some(b) = &before {
            self.count(id, b, -1);
        }
        self.count(id, &after, 1);
        let old_refs = before.as_ref().map_or(&[][..], |b| &b.event_refs[..]);
        if old_refs != after.event_refs.as_slice() {
            for r in old_refs {
                if let Some(set) = self.referrers.get_mut(r) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.referrers.remove(r);
                    }
                }
            }
            for r in &after.event_refs {
                self.referrers.entry(*r).or_default().insert(id);
            }
            self.relink(ledger, id, &after.event_refs);
        }
        if before.as_ref().map(|b| b.loose_buffer) != Some(after.loose_buffer) {
            let events: Vec<u64> = self
                .referrers
                .get(&id)
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            for e in events {
                let refs = ledger.get(&e).map(|o| o.refs.clone()).unwrap_or_default();
                for (pos, r) in refs.iter().enumerate().filter(|(_, r)| **r == id) {
                    if after.loose_buffer {
                        self.dangling.insert((e, pos, *r));
                    } else {
                        self.dangling.remove(&(e, pos, *r));
                    }
                }
            }
        }
    }

    /// What a held object counts for in its process's share (an agent's
    /// object ids carry the pid in their upper 32 bits).
    fn count_in_process(&mut self, id: u64, f: &Facts, add: bool) {
        let pid = (id >> 32) as u32;
        let step = |n: u64, by: u64| {
            if add { n + by } else { n.saturating_sub(by) }
        };
        let (n, b) = self.held_by_pid.entry((pid, f.kind)).or_default();
        (*n, *b) = (step(*n as u64, 1) as usize, step(*b, f.bytes));
        if *n == 0 {
            self.held_by_pid.remove(&(pid, f.kind));
        }
        if super::reserves::device_sized_kind(f.kind) {
            let b = self
                .held_bytes_by_pid_stack
                .entry((pid, f.stack))
                .or_default();
            *b = step(*b, f.bytes);
            if *b == 0 {
                self.held_bytes_by_pid_stack.remove(&(pid, f.stack));
            }
        }
    }

    /// Adds (`sign` 1) or takes away (-1) what one object's facts count for.
    fn count(&mut self, id: u64, f: &Facts, sign: i64) {
        let add = sign > 0;
        if f.held {
            self.count_in_process(id, f, add);
        }
        if add {
            self.made.insert(f.kind);
        }
        if f.held {
            let n = self.held.entry(f.kind).or_default();
            *n = if add { *n + 1 } else { n.saturating_sub(1) };
            let b = self.held_bytes.entry(f.kind).or_default();
            *b = if add {
                *b + f.bytes
            } else {
                b.saturating_sub(f.bytes)
            };
            // Pinned host memory (`cuMemHostAlloc`) is the host's: no share
            // of the device memory the holders explain.
            if super::reserves::device_sized_kind(f.kind) {
                let b = self.held_bytes_by_stack.entry(f.stack).or_default();
                *b = if add {
                    *b + f.bytes
                } else {
                    b.saturating_sub(f.bytes)
                };
                if *b == 0 {
                    self.held_bytes_by_stack.remove(&f.stack);
                }
            }
        }
        if f.held || f.forgotten {
            self.holding = if add {
                self.holding + 1
            } else {
                self.holding.saturating_sub(1)
            };
        }
        let set = |s: &mut BTreeSet<u64>| {
            if add {
                s.insert(id);
            } else {
                s.remove(&id);
            }
        };
        if f.forgotten_alive {
            set(&mut self.forgotten);
        }
        if f.pending {
            set(self.pending.entry(f.whose).or_default());
        }
        if f.kind == ObjKind::MemHandle && !f.held && f.bytes > 0 {
            set(&mut self.loose_mem_handles);
        }
        if f.owed {
            set(&mut self.owed);
            let b = self.owed_bytes.entry(f.whose).or_default();
            *b = if add {
                *b + f.bytes
            } else {
                b.saturating_sub(f.bytes)
            };
        }
        if f.referring {
            set(&mut self.referring);
        }
        let bump = |m: &mut BTreeMap<ObjKind, u64>| {
            let n = m.entry(f.kind).or_default();
            *n = if add { *n + 1 } else { n.saturating_sub(1) };
        };
        bump(&mut self.made_count);
        if f.released {
            bump(&mut self.released_count);
        }
        if let Some(m) = &f.unreleased {
            let (n, b) = self.unreleased.entry(m.clone()).or_default();
            if add {
                *n += 1;
                *b += f.bytes;
            } else {
                *n = n.saturating_sub(1);
                *b = b.saturating_sub(f.bytes);
            }
            if *n == 0 {
                self.unreleased.remove(m);
            }
        }
        if let Some(lag) = f.outlived_ns {
            let lags = self.outlived_ns.entry(f.kind).or_default();
            if add {
                lags.insert(lag);
            } else {
                lags.remove(lag);
            }
        }
    }

    /// What process `pid` holds of device memory now: objects it made and never
    /// released, with bytes, by kind and the stack that made them, most bytes
    /// first (the same bytes in the stacks' order).
    pub fn held_by(&self, pid: u32) -> Vec<HeldThen> {
        let mut by: BTreeMap<(ObjKind, Option<u64>), (u64, u64)> = BTreeMap::new();
        for ((kind, _, p, _, stack), (count, bytes)) in &self.unreleased {
            if *p == pid && *bytes > 0 && *kind != ObjKind::HostBuffer {
                let e = by.entry((*kind, *stack)).or_default();
                e.0 += count;
                e.1 += bytes;
            }
        }
        let mut held: Vec<HeldThen> = by
            .into_iter()
            .map(|((kind, stack), (count, bytes))| HeldThen {
                kind,
                stack,
                count,
                bytes,
            })
            .collect();
        held.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.stack.cmp(&b.stack)));
        held
    }

    /// Whether a held event refers to object `id`.
    pub fn is_referred(&self, id: u64) -> bool {
        self.referrers.get(&id).is_some_and(|r| !r.is_empty())
    }

    /// Forgets object `o`, folded out of the ledger: what it adds to the
    /// counts, the lags and the groups stays; the sets that list objects by id
    /// let it go (a folded object is released, so only those of a released
    /// object can name it).
    pub(super) fn forget(&mut self, o: &ObjState) {
        let f = Facts::of(o);
        if f.pending
            && let Some(p) = self.pending.get_mut(&f.whose)
        {
            p.remove(&o.id);
        }
        if f.owed && self.owed.remove(&o.id) {
            let b = self.owed_bytes.entry(f.whose).or_default();
            *b = b.saturating_sub(f.bytes);
        }
        self.loose_mem_handles.remove(&o.id);
        self.forgotten.remove(&o.id);
        self.referrers.remove(&o.id);
    }

    /// The dangling pairs of event `id`, from its refs now.
    fn relink(&mut self, ledger: &BTreeMap<u64, ObjState>, id: u64, refs: &[u64]) {
        let stale: Vec<_> = self
            .dangling
            .range((id, 0, 0)..=(id, usize::MAX, u64::MAX))
            .copied()
            .collect();
        for p in stale {
            self.dangling.remove(&p);
        }
        for (pos, r) in refs.iter().enumerate() {
            if ledger
                .get(r)
                .is_some_and(|b| b.kind == ObjKind::Buffer && !b.held())
            {
                self.dangling.insert((id, pos, *r));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Run;
    use super::*;
    use crate::trace::{Event, ObjectAction, ObjectEvent};

    #[test]
    fn an_object_whose_making_call_was_dropped_still_names_its_process() {
        let mut run = Run::default();
        run.apply(&Event::Object(ObjectEvent {
            t_ns: 1,
            id: (77 << 32) | 5,
            kind: ObjKind::Buffer,
            action: ObjectAction::Created,
            handle: None,
            bytes: 64,
            refcount: 1,
            refs: Vec::new(),
            line: None,
            stack: None,
        }));
        let (kind, api, pid, thread, _) = maker(&run.ledger()[&((77 << 32) | 5)]);
        assert_eq!(
            (kind, api.as_str(), pid, thread),
            (ObjKind::Buffer, UNSEEN_MAKER, 77, 0)
        );
        let said = maker_text(&api, "", pid, thread);
        assert!(
            said.contains("dropped") && said.contains("pid 77"),
            "{said}"
        );
        assert_eq!(
            maker_text("clCreateBuffer", ", through PyTorch", 7, 9),
            "clCreateBuffer, through PyTorch (pid 7, thread 9)"
        );
    }

    /// The index as a walk of every object would find it.
    fn walked(ledger: &BTreeMap<u64, ObjState>) -> LiveIndex {
        let mut x = LiveIndex::default();
        for o in ledger.values() {
            x.made.insert(o.kind);
            if o.held() {
                *x.held.entry(o.kind).or_default() += 1;
                *x.held_bytes.entry(o.kind).or_default() += o.bytes;
            }
            if o.held() || o.forgotten {
                x.holding += 1;
            }
            if o.forgotten && !o.destroyed() {
                x.forgotten.insert(o.id);
            }
            if o.refcount == 0 && !o.destroyed() {
                x.pending.entry(whose(o)).or_default().insert(o.id);
            }
            if o.kind == ObjKind::MemHandle && !o.held() && o.bytes > 0 {
                x.loose_mem_handles.insert(o.id);
            }
            *x.made_count.entry(o.kind).or_default() += 1;
            if o.released_ns.is_none() && !o.refs.is_empty() {
                x.referring.insert(o.id);
            }
            match (o.released_ns, o.destroyed_ns) {
                (None, _) => {
                    let g = x.unreleased.entry(maker(o)).or_default();
                    g.0 += 1;
                    g.1 += o.bytes;
                }
                (Some(r), d) => {
                    *x.released_count.entry(o.kind).or_default() += 1;
                    match d {
                        None => {
                            x.owed.insert(o.id);
                            *x.owed_bytes.entry(whose(o)).or_default() += o.bytes;
                        }
                        Some(d) => x
                            .outlived_ns
                            .entry(o.kind)
                            .or_default()
                            .insert(d - r.min(d)),
                    }
                }
            }
            if o.kind == ObjKind::Event && o.held() {
                for (pos, r) in o.refs.iter().enumerate() {
                    if ledger
                        .get(r)
                        .is_some_and(|b| b.kind == ObjKind::Buffer && !b.held())
                    {
                        x.dangling.insert((o.id, pos, *r));
                    }
                }
            }
        }
        x
    }

    fn same(a: &LiveIndex, b: &LiveIndex) -> bool {
        let nonzero = |m: &BTreeMap<ObjKind, usize>| {
            m.iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (*k, *n))
                .collect::<Vec<_>>()
        };
        let nonzero_bytes = |m: &BTreeMap<ObjKind, u64>| {
            m.iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (*k, *n))
                .collect::<Vec<_>>()
        };
        let nonempty = |m: &BTreeMap<Whose, BTreeSet<u64>>| {
            m.iter()
                .filter(|(_, s)| !s.is_empty())
                .map(|(k, s)| (*k, s.clone()))
                .collect::<Vec<_>>()
        };
        let owed = |m: &BTreeMap<Whose, u64>| {
            m.iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (*k, *n))
                .collect::<Vec<_>>()
        };
        let counts = nonzero_bytes;
        let lags = |m: &BTreeMap<ObjKind, Lags>| {
            m.iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (*k, v.sorted()))
                .collect::<Vec<_>>()
        };
        nonzero(&a.held) == nonzero(&b.held)
            && counts(&a.made_count) == counts(&b.made_count)
            && counts(&a.released_count) == counts(&b.released_count)
            && a.unreleased == b.unreleased
            && a.owed == b.owed
            && owed(&a.owed_bytes) == owed(&b.owed_bytes)
            && a.referring == b.referring
            && lags(&a.outlived_ns) == lags(&b.outlived_ns)
            && nonzero_bytes(&a.held_bytes) == nonzero_bytes(&b.held_bytes)
            && a.made == b.made
            && a.holding == b.holding
            && a.forgotten == b.forgotten
            && nonempty(&a.pending) == nonempty(&b.pending)
            && a.loose_mem_handles == b.loose_mem_handles
            && a.dangling == b.dangling
    }

    /// Random object events over a few ids of every kind, in any order (an event
    /// before the buffer it refers to, a destroy before its release, a retain
    /// after a release): after each one the folded index is the walked one.
    #[test]
    fn the_folded_index_is_what_a_walk_of_the_ledger_finds() {
        let kinds = [
            ObjKind::Buffer,
            ObjKind::Event,
            ObjKind::Context,
            ObjKind::MemHandle,
            ObjKind::VaRange,
        ];
        let actions = [
            ObjectAction::Created,
            ObjectAction::Retained,
            ObjectAction::Released,
            ObjectAction::Destroyed,
            ObjectAction::Forgotten,
            ObjectAction::CleanedUp,
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut run = Run::default();
        let mut dangled = 0;
        for step in 0..5_000 {
            let id = next(24);
            // An id keeps its kind, as the ledger's objects do.
            let kind = kinds[(id % kinds.len() as u64) as usize];
            let refs = match kind {
                // Mostly to buffers (the ids that are multiples of 5).
                ObjKind::Event if next(3) > 0 => (0..1 + next(3))
                    .map(|_| if next(3) > 0 { next(5) * 5 } else { next(24) })
                    .collect(),
                _ => vec![],
            };
            let o = ObjectEvent {
                t_ns: step,
                id,
                kind,
                action: actions[next(actions.len() as u64) as usize],
                handle: None,
                bytes: next(3) << 20,
                refcount: next(3) as u32,
                refs,
                line: None,
                stack: None,
            };
            run.apply(&Event::Object(o.clone()));
            // An agent's making call comes after the object, of either family
            // (the index keeps owed bytes per process, family and kind). By
            // the step, so the objects' own draws stay as they were.
            if o.action == ObjectAction::Created && step % 3 > 0 {
                run.apply(&Event::Call(crate::trace::Call {
                    seq: step,
                    begin_ns: step,
                    end_ns: step,
                    api: ["clCreateBuffer", "cuMemAlloc_v2"][(step % 3 - 1) as usize].into(),
                    object: Some(id),
                    ..crate::trace::Call::default()
                }));
            }
            let want = walked(run.ledger());
            assert!(
                same(run.live_index(), &want),
                "step {step}, after {o:?}:\n{:?}\n{want:?}",
                run.live_index()
            );
            dangled += usize::from(!want.dangling.is_empty());
        }
        assert!(dangled > 50, "{dangled}");
    }
}
