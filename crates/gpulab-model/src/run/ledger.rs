//! The run's part that keeps its objects: the ledger of each one's latest
//! state ([`super::objects`]), its live index, the counts per kind, and what
//! was folded away ([`gone`]).

use std::collections::BTreeMap;

use crate::trace::{Call, ObjKind, ObjectAction, ObjectEvent};

use super::deletions::{Deletions, whose};
use super::gone::{self, Gone};
use super::live::LiveIndex;
use super::objects::{MadeBy, ObjState, apply};

/// The run's part that keeps its objects: each one's latest state (the
/// ledger), the index the panels and reports ask, the counts per kind, and
/// the objects folded away once the program is done with them ([`gone`]).
#[derive(Debug, Clone, Default)]
pub(super) struct Ledger {
    /// Each object's latest state, by id: every one a lab made; of a watched
    /// program's, those not folded away.
    pub(super) ledger: BTreeMap<u64, ObjState>,
    pub(super) index: LiveIndex,
    /// Live objects per kind right now, as the events say.
    pub(super) live: BTreeMap<ObjKind, i64>,
    /// The most objects of each kind alive at one time so far.
    pub(super) peak_live: BTreeMap<ObjKind, i64>,
    /// Bytes of live buffers right now.
    pub(super) live_bytes: i64,
    /// Objects the worker listed as left at the end, per kind.
    pub(super) leaked: BTreeMap<ObjKind, usize>,
    /// The time of the latest object event that can move a share: of an
    /// object of a size, or of a holder of a reserve. (A stream's event made
    /// and destroyed after a reading moved no share: NCCL makes them between
    /// every two readings, and the reading stays composable.)
    pub(super) changed_ns: Option<u64>,
    pub(super) gone: Gone,
    /// Whose deletions the run sees, per process, API family and kind.
    pub(super) deletions: Deletions,
    /// Per process, the latest time the life of a holder of a reserve (a
    /// context, module, queue or stream) ended: released or destroyed.
    reserve_ended: BTreeMap<u32, u64>,
    /// Counts every change of what a composition reads of the objects.
    changes: u64,
}

impl Ledger {
    pub(super) fn never_folding() -> Ledger {
        Ledger {
            gone: Gone::never(),
            ..Ledger::default()
        }
    }

    /// Changes so far of what the objects tell who holds memory.
    pub(super) fn changes(&self) -> u64 {
        self.changes
    }

    /// Folds an object event in; `call`: the call that made it, when it came
    /// first (a lab's worker sends it first).
    pub(super) fn event(&mut self, o: &ObjectEvent, call: Option<&Call>) {
        self.changes += 1;
        if o.bytes > 0 || super::reserves::unsized_kind(o.kind) {
            self.changed_ns = self.changed_ns.max(Some(o.t_ns));
        }
        let (count, bytes) = if o.action == ObjectAction::Created {
            (1, o.bytes as i64)
        } else if o.ends_life() {
            (-1, -(o.bytes as i64))
        } else {
            (0, 0)
        };
        let live = self.live.entry(o.kind).or_default();
        *live += count;
        let peak = self.peak_live.entry(o.kind).or_default();
        *peak = (*peak).max(*live);
        self.live_bytes += bytes;
        if super::reserves::unsized_kind(o.kind)
            && (o.ends_life() || o.action == ObjectAction::Destroyed)
        {
            let pid = (o.id >> 32) as u32;
            let t = self.reserve_ended.entry(pid).or_default();
            *t = (*t).max(o.t_ns);
        }
        let before = LiveIndex::before(&self.ledger, o.id);
        apply(&mut self.ledger, o);
        if o.action == ObjectAction::Created
            && let Some(c) = call
            && let Some(st) = self.ledger.get_mut(&o.id)
        {
            st.made_by = Some(MadeBy::of(c));
        }
        if o.action == ObjectAction::Destroyed
            && let Some(st) = self.ledger.get(&o.id)
        {
            self.deletions.destroyed(whose(st));
        }
        self.index.update(&self.ledger, o.id, before);
    }

    /// Whether `id` is in the ledger and no call has been named its maker
    /// yet (an agent sends an object's creation before the call that made it).
    pub(super) fn unmade(&self, id: u64) -> bool {
        self.ledger.get(&id).is_some_and(|st| st.made_by.is_none())
    }

    /// The call `c` made `id`.
    pub(super) fn made_by(&mut self, id: u64, c: &Call) {
        self.changes += 1;
        let before = LiveIndex::before(&self.ledger, id);
        if let Some(st) = self.ledger.get_mut(&id) {
            st.made_by = Some(MadeBy::of(c));
        }
        self.index.update(&self.ledger, id, before);
    }

    /// Whether process `pid` ended the life of a holder of a reserve between
    /// `begin_ns` and `end_ns` (a call that spans that moment ended it).
    pub(super) fn reserve_ended_within(&self, pid: u32, begin_ns: u64, end_ns: u64) -> bool {
        self.reserve_ended
            .get(&pid)
            .is_some_and(|t| (begin_ns..=end_ns).contains(t))
    }

    /// Bytes of `id`, when the ledger has it.
    pub(super) fn bytes(&self, id: u64) -> Option<u64> {
        self.ledger.get(&id).map(|o| o.bytes)
    }

    /// The device memory of object `id`: its bytes, or 0 for pinned host
    /// memory.
    pub(super) fn device_bytes(&self, id: u64) -> Option<u64> {
        self.ledger.get(&id).map(|o| {
            if super::reserves::device_sized_kind(o.kind) {
                o.bytes
            } else {
                0
            }
        })
    }

    /// What the worker listed as left at its end.
    pub(super) fn left(&mut self, leaked: impl IntoIterator<Item = ObjKind>) {
        self.leaked.clear();
        for kind in leaked {
            *self.leaked.entry(kind).or_default() += 1;
        }
    }

    /// Folds the objects the program is done with out of the ledger, when it
    /// has doubled since the last sweep ([`gone`]). `watched`: the kinds whose
    /// deletion some agent watches; `ran_out`: when the first call that ran
    /// out of memory returned, and whether the driver tells deletions;
    /// `keep`: an object a composition waits on; `created`: the lab's list of
    /// made objects, which names only what the ledger holds.
    pub(super) fn fold_gone(
        &mut self,
        now_ns: u64,
        ran_out: Option<(u64, bool)>,
        keep: Option<u64>,
        created: &mut Vec<(u64, ObjKind, Option<String>)>,
    ) {
        if !self.gone.due(self.ledger.len()) {
            return;
        }
        // What a live object's references reach, however many released
        // objects lie between: the report names those paths (what pins what).
        let pinned = gone::reached(&self.ledger, &self.index.referring);
        let foldable: Vec<u64> = self
            .ledger
            .values()
            .filter(|o| {
                Gone::foldable(o, now_ns, self.deletions.watched(whose(o)))
                    && Some(o.id) != keep
                    && !pinned.contains(&o.id)
                    && !self.index.is_referred(o.id)
            })
            .map(|o| o.id)
            .collect();
        if foldable.is_empty() {
            self.gone.swept(self.ledger.len());
            return;
        }
        for id in foldable {
            if let Some(o) = self.ledger.remove(&id) {
                self.index.forget(&o);
                self.gone.fold(&o, ran_out);
            }
        }
        let ledger = &self.ledger;
        created.retain(|(id, ..)| ledger.contains_key(id));
        self.gone.swept(self.ledger.len());
    }
}
