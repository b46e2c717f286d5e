//! Objects a watched program is done with, folded out of the ledger into
//! counts, so that gpulab's memory follows what is alive, not what was ever
//! made (#44: 600k buffers made and released cost 311 MB before).
//!
//! An object leaves the ledger once nothing can still be said of it alone:
//! an agent's object (a lab's are few and its verdicts read every one) of a
//! sized kind (contexts, programs, queues and streams carry reserves, and are
//! few), released by the program, destroyed by the driver or of a kind whose
//! destruction no agent watches (then nothing more will come of it), not
//! forgotten alive, not reached by the references of a live object
//! (through released ones: a report names what pins what), and gone for
//! [`SETTLE_NS`] of the program's time (records of one process arrive in the
//! order they were written; a call's record comes right after the call). What
//! it added to the per-kind counts, the peak, the lags and who made what stays
//! in the live index, which counts and never lists them. The ledger is swept
//! when it has doubled since the last sweep, so a sweep costs each object a
//! constant, and a run of fewer than [`SWEEP_FROM`] objects is never swept:
//! every shipped recording folds exactly as before.

use std::collections::BTreeMap;

use crate::trace::ObjKind;

use super::objects::ObjState;
use super::reserves::unsized_kind;

/// How long an object must have been gone before it is folded.
pub const SETTLE_NS: u64 = 100_000_000;
/// The ledger's size below which it is never swept.
pub const SWEEP_FROM: usize = 16_384;

/// What the folded objects leave behind.
#[derive(Debug, Clone, Default)]
pub struct Gone {
    /// Objects folded so far.
    folded: u64,
    /// The latest time one of them was gone at, of those folded before a
    /// call ran out of memory.
    horizon_ns: Option<u64>,
    /// The ledger's size at which it is swept next.
    next_sweep: usize,
    /// Of the folded objects, those the call that ran out of memory saw
    /// alive, and those released then but not yet destroyed, per kind (that
    /// call known when they were folded).
    pub(super) at_ran_out: RanOutCounts,
}

/// Objects alive, and released but not yet destroyed, per kind, when the
/// first call that ran out of memory returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RanOutCounts {
    pub live: BTreeMap<ObjKind, usize>,
    pub not_yet_destroyed: BTreeMap<ObjKind, usize>,
}

impl RanOutCounts {
    /// Counts `o` as the call that ended at `end_ns` saw it. `destructors`:
    /// the driver tells when it deletes buffers and contexts.
    pub fn count(&mut self, o: &ObjState, end_ns: u64, destructors: bool) {
        if o.created_ns > end_ns {
            return;
        }
        match o.released_ns {
            Some(t) if t <= end_ns => {
                let pending = destructors
                    && matches!(o.kind, ObjKind::Buffer | ObjKind::Context)
                    && o.destroyed_ns.is_none_or(|d| d > end_ns);
                if pending {
                    *self.not_yet_destroyed.entry(o.kind).or_default() += 1;
                }
            }
            _ => *self.live.entry(o.kind).or_default() += 1,
        }
    }
}

/// How many references deep a report follows what pins an object.
const PIN_DEPTH: usize = 8;

/// Every object `from`'s references reach, [`PIN_DEPTH`] deep.
pub fn reached(
    ledger: &BTreeMap<u64, ObjState>,
    from: &std::collections::BTreeSet<u64>,
) -> std::collections::HashSet<u64> {
    let mut seen = std::collections::HashSet::new();
    let mut level: Vec<u64> = from.iter().copied().collect();
    for _ in 0..PIN_DEPTH {
        let mut next = Vec::new();
        for id in level {
            for r in ledger.get(&id).map_or(&[][..], |o| &o.refs[..]) {
                if seen.insert(*r) {
                    next.push(*r);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    seen
}

impl Gone {
    /// Whether the ledger, now `len` objects long, is due a sweep.
    pub fn due(&self, len: usize) -> bool {
        len >= self.next_sweep.max(SWEEP_FROM)
    }

    /// After a sweep left `len` objects.
    pub fn swept(&mut self, len: usize) {
        self.next_sweep = len.saturating_mul(2).max(SWEEP_FROM);
    }

    /// Whether `o` may leave the ledger at `now_ns`, of the objects nothing
    /// else names (see the module doc). `watched`: some agent watches the
    /// destruction of `o`'s kind.
    pub fn foldable(o: &ObjState, now_ns: u64, watched: bool) -> bool {
        let Some(released) = o.released_ns else {
            return false;
        };
        let gone_at = o.destroyed_ns.unwrap_or(released).max(released);
        o.id >> 32 != 0
            && !unsized_kind(o.kind)
            && o.refcount == 0
            && (o.destroyed() || !watched)
            && !o.forgotten
            && gone_at.saturating_add(SETTLE_NS) <= now_ns
    }

    /// Takes `o` out of the ledger's story: counted, and what the ran-out
    /// call saw of it kept when that call is known.
    pub fn fold(&mut self, o: &ObjState, ran_out: Option<(u64, bool)>) {
        self.folded += 1;
        match ran_out {
            Some((end_ns, destructors)) => self.at_ran_out.count(o, end_ns, destructors),
            None => {
                let released = o.released_ns.unwrap_or(o.created_ns);
                let gone_at = o.destroyed_ns.unwrap_or(released).max(released);
                self.horizon_ns = self.horizon_ns.max(Some(gone_at));
            }
        }
    }

    /// A ledger never swept ([`super::Run::keeping_all`]).
    pub fn never() -> Gone {
        Gone {
            next_sweep: usize::MAX,
            ..Gone::default()
        }
    }

    /// Objects folded so far.
    pub fn folded(&self) -> u64 {
        self.folded
    }

    /// Whether objects gone after `end_ns` were folded before the call that
    /// ran out of memory then was known: what it saw may leave them out.
    pub fn folded_past(&self, end_ns: u64) -> bool {
        self.horizon_ns.is_some_and(|h| h > end_ns)
    }
}
