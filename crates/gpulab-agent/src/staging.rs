//! A process's overflow list: records that found its segment of the ring
//! full, waiting for room. Calls and spans beyond its room are dropped
//! (counted); object records never are. A run of reference changes of one
//! object still waiting merges into its latest, so the list is never longer
//! than the calls it has room for plus the objects in flux, and an object's
//! creation, its last release and its deletion always go out.

use std::collections::{HashMap, VecDeque};

use gpulab_events::ObjectAction;
use gpulab_events::wire::ObjectRecord;

use crate::queue::Record;

/// Calls and spans waiting in staging; beyond this they are dropped and counted.
const STAGED_CALLS: usize = 1 << 14;

/// Records waiting for room, oldest first.
#[derive(Default)]
pub struct Staging {
    items: VecDeque<Record>,
    /// The absolute index of `items[0]`.
    base: u64,
    /// Per object id, the absolute index of its last staged reference change.
    changes: HashMap<u64, u64>,
    /// Staged calls and spans.
    calls: usize,
}

/// What staging did with a record.
#[derive(Debug, PartialEq, Eq)]
pub enum Staged {
    Queued,
    /// Merged into the object's reference change already waiting.
    Coalesced,
    /// A call or span with no room left.
    Dropped,
}

impl Staging {
    pub fn push(&mut self, record: Record) -> Staged {
        match &record {
            r if r.droppable() => {
                if self.calls >= STAGED_CALLS {
                    return Staged::Dropped;
                }
                self.calls += 1;
            }
            Record::Object { object: o, .. }
                if matches!(o.action, ObjectAction::Retained | ObjectAction::Released) =>
            {
                if let Some(waiting) = self.waiting_change(o.id) {
                    (
                        waiting.action,
                        waiting.refcount,
                        waiting.t_ns,
                        waiting.bytes,
                    ) = (o.action, o.refcount, o.t_ns, o.bytes);
                    return Staged::Coalesced;
                }
                let at = self.base + self.items.len() as u64;
                self.changes.insert(o.id, at);
            }
            Record::Object { object: o, .. } => {
                // Nothing merges across a creation or a deletion.
                self.changes.remove(&o.id);
            }
            Record::Call { .. }
            | Record::Stack { .. }
            | Record::Span(_)
            | Record::Read { .. }
            | Record::Agent { .. }
            | Record::Misuse { .. }
            | Record::Framework { .. } => {}
        }
        self.items.push_back(record);
        Staged::Queued
    }

    /// The object's reference change still waiting, unless it is the
    /// program's last release (a later record must not hide that).
    fn waiting_change(&mut self, id: u64) -> Option<&mut ObjectRecord> {
        let at = *self.changes.get(&id)?;
        let i = usize::try_from(at.checked_sub(self.base)?).ok()?;
        match self.items.get_mut(i)? {
            Record::Object { object, .. } if object.refcount > 0 => Some(object),
            _ => None,
        }
    }

    /// The oldest record, left in place.
    pub fn front(&self) -> Option<&Record> {
        self.items.front()
    }

    pub fn pop(&mut self) -> Option<Record> {
        let record = self.items.pop_front()?;
        let at = self.base;
        self.base += 1;
        match &record {
            r if r.droppable() => self.calls -= 1,
            Record::Object { object, .. } if self.changes.get(&object.id) == Some(&at) => {
                self.changes.remove(&object.id);
            }
            _ => {}
        }
        Some(record)
    }

    /// Records held that are never dropped.
    pub fn kept(&self) -> usize {
        self.items.len() - self.calls
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Status;
    use gpulab_events::ObjKind;

    fn object(id: u64, action: ObjectAction, refcount: u32) -> Record {
        Record::Object {
            object: ObjectRecord {
                t_ns: u64::from(refcount),
                id,
                kind: ObjKind::Buffer,
                action,
                bytes: 64,
                refcount,
                stack: None,
                refs: Vec::new(),
            },
            stack: None,
        }
    }

    fn call() -> Record {
        Record::Call {
            call: gpulab_events::wire::CallRecord {
                seq: 0,
                thread: 1,
                api: "clRetainMemObject",
                driver: "clRetainMemObject",
                begin_ns: 0,
                end_ns: 0,
                status: Status::OpenCl(0),
                object: None,
                memory_step: None,
                freed_unseen: false,
            },
            refused: None,
            pool: None,
        }
    }

    fn state(r: &Record) -> (u64, ObjectAction, u32) {
        match r {
            Record::Object { object: o, .. } => (o.id, o.action, o.refcount),
            _ => panic!("not an object record"),
        }
    }

    #[test]
    fn reference_changes_waiting_merge_into_the_latest_and_the_last_release_stays() {
        use ObjectAction::*;
        let mut s = Staging::default();
        assert_eq!(s.push(object(1, Created, 1)), Staged::Queued);
        assert_eq!(s.push(object(1, Retained, 2)), Staged::Queued);
        assert_eq!(s.push(object(1, Released, 1)), Staged::Coalesced);
        for _ in 0..1000 {
            assert_eq!(s.push(object(1, Retained, 2)), Staged::Coalesced);
            assert_eq!(s.push(object(1, Released, 1)), Staged::Coalesced);
        }
        assert_eq!(s.push(object(1, Released, 0)), Staged::Coalesced);
        // The last release is never merged away, nor what follows it.
        assert_eq!(s.push(object(1, Retained, 1)), Staged::Queued);
        assert_eq!(s.push(object(1, Destroyed, 0)), Staged::Queued);
        assert_eq!(s.len(), 4);
        let out: Vec<_> = std::iter::from_fn(|| s.pop()).map(|r| state(&r)).collect();
        assert_eq!(
            out,
            vec![
                (1, Created, 1),
                (1, Released, 0),
                (1, Retained, 1),
                (1, Destroyed, 0)
            ]
        );
    }

    #[test]
    fn objects_never_merge_across_one_another_and_are_never_dropped() {
        use ObjectAction::*;
        let mut s = Staging::default();
        for _ in 0..STAGED_CALLS {
            assert_eq!(s.push(call()), Staged::Queued);
        }
        assert_eq!(s.push(call()), Staged::Dropped, "calls beyond the room");
        for id in 0..50_000u64 {
            assert_eq!(s.push(object(id, Created, 1)), Staged::Queued);
        }
        assert_eq!(s.push(object(7, Retained, 2)), Staged::Queued);
        assert_eq!(s.push(object(8, Retained, 2)), Staged::Queued);
        assert_eq!(s.push(object(7, Released, 1)), Staged::Coalesced);
        assert_eq!(s.len(), STAGED_CALLS + 50_002);
        // Once written, a change is no longer merged into.
        while s.len() > 2 {
            s.pop();
        }
        assert_eq!(state(&s.pop().expect("7")), (7, Released, 1));
        assert_eq!(s.push(object(8, Released, 1)), Staged::Coalesced);
        assert_eq!(s.push(object(7, Retained, 2)), Staged::Queued);
        assert_eq!(s.calls, 0);
    }
}
