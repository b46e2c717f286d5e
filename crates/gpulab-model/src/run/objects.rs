//! Each ledger object's latest state, folded from its `object` events: what the
//! live-objects panel, the gap analysis and the watch report all read.

use std::collections::BTreeMap;

use crate::trace::{Call, ObjKind, ObjectAction, ObjectEvent};

/// One object as the stream tells it so far.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjState {
    pub id: u64,
    pub kind: ObjKind,
    pub handle: Option<String>,
    pub line: Option<u32>,
    pub bytes: u64,
    /// The program's references (0 = it released the object).
    pub refcount: u32,
    /// Releases the program made of it (a `clRelease*` that left references
    /// counts too), for "released once, still held".
    pub releases: u32,
    /// Objects this one refers to (an event to its queue, kernel and buffer).
    pub refs: Vec<u64>,
    pub forgotten: bool,
    /// When it was made (its first event).
    pub created_ns: u64,
    /// When the program's last reference went, if it has.
    pub released_ns: Option<u64>,
    /// When the driver's destructor callback fired, if it has.
    pub destroyed_ns: Option<u64>,
    /// The latest release (or clean-up) of it, even one that left references.
    pub last_release_ns: Option<u64>,
    /// The call that made it, where the stream names one.
    pub made_by: Option<MadeBy>,
    /// The native stack that made it ([`crate::run::Run::stacks`]).
    pub stack: Option<u64>,
}

/// The call that created an object: its API name and who called it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeBy {
    pub api: String,
    pub pid: u32,
    pub thread: u64,
}

impl MadeBy {
    pub fn of(c: &Call) -> MadeBy {
        MadeBy {
            api: c.api.to_string(),
            pid: c.pid,
            thread: c.thread,
        }
    }
}

impl ObjState {
    fn new(o: &ObjectEvent) -> ObjState {
        ObjState {
            id: o.id,
            kind: o.kind,
            handle: o.handle.clone(),
            line: o.line,
            bytes: o.bytes,
            refcount: 0,
            releases: 0,
            refs: o.refs.clone(),
            forgotten: false,
            created_ns: o.t_ns,
            released_ns: None,
            destroyed_ns: None,
            last_release_ns: None,
            made_by: None,
            stack: o.stack,
        }
    }

    pub fn destroyed(&self) -> bool {
        self.destroyed_ns.is_some()
    }

    /// Whether the driver was asked to say when it is destroyed: its kind is
    /// one the worker watched (`asked`; a stream from before it said so
    /// watched every kind), and its making call made something a destructor
    /// callback can watch (not an SVM pointer).
    pub fn destruction_watched(&self, asked: Option<&[ObjKind]>) -> bool {
        let kind_asked = asked.is_none_or(|kinds| kinds.contains(&self.kind));
        let observable = self
            .made_by
            .as_ref()
            .and_then(|m| gpulab_events::Api::named(&m.api))
            .is_none_or(gpulab_events::Api::destruction_observable);
        kind_asked && observable
    }

    /// Still the program's: neither released by it nor freed by the driver.
    pub fn held(&self) -> bool {
        self.refcount > 0 && !self.destroyed()
    }

    /// The script's name for it, else its number (`#6`; an agent's ids carry the
    /// pid in their upper half, left out here), for text that says the kind.
    pub fn name(&self) -> String {
        self.handle
            .clone()
            .unwrap_or_else(|| format!("#{}", self.id & 0xffff_ffff))
    }
}

/// Folds `o` into the states by id.
pub(crate) fn apply(states: &mut BTreeMap<u64, ObjState>, o: &ObjectEvent) {
    let st = states.entry(o.id).or_insert_with(|| ObjState::new(o));
    match o.action {
        ObjectAction::Destroyed => st.destroyed_ns = Some(o.t_ns),
        ObjectAction::Forgotten => st.forgotten = true,
        ObjectAction::Released => {
            st.refcount = o.refcount;
            st.releases += 1;
        }
        _ => st.refcount = o.refcount,
    }
    if matches!(o.action, ObjectAction::Released | ObjectAction::CleanedUp) {
        st.last_release_ns = Some(o.t_ns);
    }
    if o.ends_life() {
        st.released_ns = Some(o.t_ns);
    }
    if !o.refs.is_empty() {
        st.refs = o.refs.clone();
    }
}
