//! The ledger: gpulab's own count of the lab's live objects and their bytes, and
//! which object refers to which. It never asks the driver for reference counts:
//! what the driver still holds is the *difference* between this ledger and the
//! device's memory, and that difference is what the labs are about.

use std::collections::BTreeMap;

use gpulab_backend::ObjId;
use gpulab_events::{ObjectAction, ObjectEvent};
use gpulab_lab::ObjKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The lab holds at least one reference.
    Live,
    /// The lab released its last reference.
    Released,
    /// The lab dropped the name without releasing: a deliberate leak.
    Forgotten,
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub id: ObjId,
    pub kind: ObjKind,
    pub handle: Option<String>,
    pub bytes: u64,
    pub refcount: u32,
    pub refs: Vec<ObjId>,
    pub state: State,
    pub line: Option<u32>,
    /// When the driver's destructor callback said the object is gone.
    pub destroyed_ns: Option<u64>,
}

impl Entry {
    /// The `object` event for a change of this entry, as it stands now.
    pub fn event(&self, action: ObjectAction, t_ns: u64, line: Option<u32>) -> ObjectEvent {
        ObjectEvent {
            t_ns,
            id: self.id,
            kind: self.kind,
            action,
            handle: self.handle.clone(),
            bytes: self.bytes,
            refcount: self.refcount,
            refs: self.refs.clone(),
            line,
            stack: None,
        }
    }
}

#[derive(Debug, Default)]
pub struct Ledger {
    entries: BTreeMap<ObjId, Entry>,
    /// Bytes of the entries not released, kept as they change: the budget check
    /// asks for it around every call, and summing every entry ever made cost an
    /// allocating loop ~200 µs a line by its 20,000th iteration (H100).
    live_bytes: u64,
}

impl Ledger {
    pub fn create(
        &mut self,
        id: ObjId,
        kind: ObjKind,
        handle: Option<String>,
        bytes: u64,
        refs: Vec<ObjId>,
        line: Option<u32>,
    ) -> &Entry {
        self.live_bytes += bytes;
        let replaced = self.entries.insert(
            id,
            Entry {
                id,
                kind,
                handle,
                bytes,
                refcount: 1,
                refs,
                state: State::Live,
                line,
                destroyed_ns: None,
            },
        );
        if let Some(old) = replaced
            && old.state != State::Released
        {
            self.live_bytes = self.live_bytes.saturating_sub(old.bytes);
        }
        &self.entries[&id]
    }

    pub fn retain(&mut self, id: ObjId) -> Option<&Entry> {
        let e = self.entries.get_mut(&id)?;
        if e.state == State::Live {
            e.refcount += 1;
        }
        Some(e)
    }

    /// Drops one lab reference; at zero the object counts as released.
    pub fn release(&mut self, id: ObjId) -> Option<&Entry> {
        let e = self.entries.get_mut(&id)?;
        if e.state == State::Live {
            e.refcount = e.refcount.saturating_sub(1);
            if e.refcount == 0 {
                e.state = State::Released;
                self.live_bytes = self.live_bytes.saturating_sub(e.bytes);
            }
        }
        Some(e)
    }

    pub fn forget(&mut self, id: ObjId) -> Option<&Entry> {
        let e = self.entries.get_mut(&id)?;
        if e.state == State::Live {
            e.state = State::Forgotten;
        }
        Some(e)
    }

    pub fn destroyed(&mut self, id: ObjId, t_ns: u64) -> Option<&Entry> {
        let e = self.entries.get_mut(&id)?;
        e.destroyed_ns = Some(t_ns);
        Some(e)
    }

    pub fn get(&self, id: ObjId) -> Option<&Entry> {
        self.entries.get(&id)
    }

    pub fn all(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// Objects the lab has not released (forgotten ones included: they leak).
    pub fn live(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values().filter(|e| e.state != State::Released)
    }

    pub fn live_count(&self, kind: ObjKind) -> usize {
        self.live().filter(|e| e.kind == kind).count()
    }

    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Live objects that refer to `id`: what may keep a released buffer pinned.
    pub fn referrers(&self, id: ObjId) -> Vec<ObjId> {
        self.live()
            .filter(|e| e.refs.contains(&id))
            .map(|e| e.id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retain_and_release_pair_up() {
        let mut l = Ledger::default();
        l.create(1, ObjKind::Buffer, Some("buf".into()), 64, vec![], Some(3));
        l.retain(1);
        assert_eq!(l.release(1).map(|e| e.state), Some(State::Live));
        assert_eq!(l.release(1).map(|e| e.state), Some(State::Released));
        assert_eq!(l.live_count(ObjKind::Buffer), 0);
        // A release past zero (a double free) does not go negative.
        assert_eq!(l.release(1).map(|e| e.refcount), Some(0));
    }

    #[test]
    fn forgotten_objects_stay_live_and_name_their_referrers() {
        let mut l = Ledger::default();
        l.create(1, ObjKind::Buffer, None, 100, vec![], None);
        l.create(2, ObjKind::Event, Some("ev".into()), 0, vec![1], None);
        l.release(1);
        l.forget(2);
        assert_eq!(l.live_count(ObjKind::Event), 1);
        assert_eq!(l.live_bytes(), 0);
        assert_eq!(l.referrers(1), vec![2]);
    }

    /// The kept sum is the sum of the entries not released, whatever order
    /// creates (new ids and reused ones), retains, releases past zero and
    /// forgets come in.
    #[test]
    fn live_bytes_is_the_sum_of_what_is_not_released() {
        let mut l = Ledger::default();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..5_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = x % 40;
            match (x >> 8) % 5 {
                0 | 1 => {
                    l.create(id, ObjKind::Buffer, None, (x >> 16) % 1000, vec![], None);
                }
                2 => {
                    l.retain(id);
                }
                3 => {
                    l.release(id);
                }
                _ => {
                    l.forget(id);
                }
            }
            let walked: u64 = l.live().map(|e| e.bytes).sum();
            assert_eq!(l.live_bytes(), walked, "after step {step}");
        }
    }
}
