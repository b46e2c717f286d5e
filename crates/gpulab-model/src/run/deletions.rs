//! Whose deletions the run sees: per process and API family, the kinds of
//! object the driver is seen to delete. An OpenCL loader layer in a process
//! reports each buffer's deletion; CUDA's `cuMemFree` in the same process
//! deletes at once and reports nothing more, so "released, not deleted yet"
//! can be said of an object only where its own agent watches its kind.

use std::collections::BTreeSet;

use crate::trace::{BackendKind, ObjKind};

use super::objects::ObjState;

/// An object's process, the family of the API that made it (`None` when its
/// making call never arrived) and its kind: what decides whether its deletion
/// can be seen.
pub type Whose = (u32, Option<BackendKind>, ObjKind);

/// The family of the API `call` belongs to: OpenCL's calls are `cl*`.
pub fn family_of_call(call: &str) -> BackendKind {
    if call.starts_with("cl") {
        BackendKind::OpenCl
    } else {
        BackendKind::Cuda
    }
}

/// Whose object `o` is.
pub fn whose(o: &ObjState) -> Whose {
    (
        (o.id >> 32) as u32,
        o.made_by.as_ref().map(|m| family_of_call(&m.api)),
        o.kind,
    )
}

/// The deletions a run can see.
#[derive(Debug, Clone, Default)]
pub struct Deletions {
    /// Said by an agent when it attached: it watches the driver delete these.
    watched: BTreeSet<(u32, BackendKind, ObjKind)>,
    /// Seen: the driver deleted one of these (a lab's worker, or an agent).
    destroyed: BTreeSet<Whose>,
}

impl Deletions {
    /// Process `pid`'s agent for `family` watches the deletion of `kinds`.
    pub(super) fn watch(&mut self, pid: u32, family: BackendKind, kinds: &[ObjKind]) {
        self.watched
            .extend(kinds.iter().map(|kind| (pid, family, *kind)));
    }

    /// The driver deleted an object of `whose`.
    pub(super) fn destroyed(&mut self, whose: Whose) {
        self.destroyed.insert(whose);
    }

    /// Whether an agent watches the deletion of objects of `whose`. Of an
    /// object whose making call is unknown, any agent of its process counts.
    pub fn watched(&self, (pid, family, kind): Whose) -> bool {
        match family {
            Some(f) => self.watched.contains(&(pid, f, kind)),
            None => [BackendKind::OpenCl, BackendKind::Cuda]
                .into_iter()
                .any(|f| self.watched.contains(&(pid, f, kind))),
        }
    }

    /// Whether the run sees the driver delete objects of `whose`: their
    /// agent watches it, or the driver deleted one like it.
    pub fn seen(&self, whose @ (pid, family, kind): Whose) -> bool {
        self.watched(whose)
            || match family {
                Some(_) => {
                    self.destroyed.contains(&whose) || self.destroyed.contains(&(pid, None, kind))
                }
                None => self
                    .destroyed
                    .range((pid, None, kind)..)
                    .take_while(|(p, ..)| *p == pid)
                    .any(|(_, _, k)| *k == kind),
            }
    }

    /// Whether some agent watches the deletion of `kind`.
    pub fn watched_kind(&self, kind: ObjKind) -> bool {
        self.watched.iter().any(|(_, _, k)| *k == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CL: Option<BackendKind> = Some(BackendKind::OpenCl);
    const CU: Option<BackendKind> = Some(BackendKind::Cuda);

    #[test]
    fn an_opencl_agent_does_not_watch_the_deletion_of_cuda_buffers_in_its_process() {
        let mut d = Deletions::default();
        d.watch(7, BackendKind::OpenCl, &[ObjKind::Buffer, ObjKind::Context]);
        assert!(d.seen((7, CL, ObjKind::Buffer)));
        assert!(!d.seen((7, CU, ObjKind::Buffer)));
        assert!(!d.seen((8, CL, ObjKind::Buffer)), "another process");
        assert!(!d.seen((7, CL, ObjKind::Event)));
        // Made by a call gpulab never heard of: its process's agents count.
        assert!(d.seen((7, None, ObjKind::Buffer)));
        assert!(d.watched_kind(ObjKind::Context));
    }

    #[test]
    fn a_deletion_seen_counts_for_its_process_and_family() {
        let mut d = Deletions::default();
        d.destroyed((0, CL, ObjKind::Buffer));
        assert!(d.seen((0, CL, ObjKind::Buffer)));
        assert!(d.seen((0, None, ObjKind::Buffer)));
        assert!(!d.seen((0, CU, ObjKind::Buffer)));
        assert!(!d.seen((1, CL, ObjKind::Buffer)));
        assert!(!d.watched((0, CL, ObjKind::Buffer)), "seen is not watched");
        d.destroyed((2, None, ObjKind::Context));
        assert!(d.seen((2, CU, ObjKind::Context)));
        assert!(!d.seen((2, CU, ObjKind::Buffer)));
    }

    #[test]
    fn families_are_told_by_the_making_call() {
        assert_eq!(family_of_call("clCreateBuffer"), BackendKind::OpenCl);
        assert_eq!(family_of_call("cuMemAlloc_v2"), BackendKind::Cuda);
        assert_eq!(family_of_call("cudaMalloc"), BackendKind::Cuda);
        assert_eq!(family_of_call("ncclCommInitRank"), BackendKind::Cuda);
    }
}
