//! A CUDA call that names what the program gave up: memory it freed, a stream
//! or an event it destroyed, or stream-ordered memory it frees synchronously.
//! Found at the call's entry from the ledger ([`crate::ledger`]); never asks
//! the driver anything, never changes the call.
//!
//! How sure each finding is decides when it is said:
//! - A destroyed stream or event: at once. Every call that makes one is
//!   watched, so a handle the ledger keeps as gone names nothing of the
//!   program's; and the driver dereferences it (a second `cudaStreamDestroy`
//!   crashed the program on the H200), so it is said before the call goes on.
//! - Freed memory: only if the driver refuses the call. Memory is handed out
//!   by paths the agent does not see (a graph's allocations, another
//!   process's IPC handle, a reserved range mapped), so an address the ledger
//!   saw freed may name memory again: the driver's refusal says it does not.
//!   A refused use of memory still mapped by a pool goes unsaid.
//! - A synchronous free of stream-ordered memory (`cudaFree` of what
//!   `cudaMallocAsync` made): when the driver did it. It is allowed; it waits
//!   for the device where `cudaFreeAsync` would not.

use std::cell::RefCell;

use gpulab_events::{MisuseKind, ObjKind};

use crate::{ledger, transport};

/// What a parameter of a call names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Named {
    Stream,
    Event,
    /// A device address (the typed copies and sets: never a host pointer).
    Memory,
}

/// The handles each watched call names, by parameter index (every parameter
/// before them is pointer-sized in CUPTI's parameter block, as in cuda.h),
/// beyond the handle a freeing call gives up (parameter 0) and a launch's
/// stream, which the caller passes. `cuMemcpy` and `cuMemcpyAsync` are
/// absent: their pointers may be host memory at an address device memory
/// once had.
const NAMES: &[(&str, Names)] = &[
    ("cuMemFreeAsync", &[(1, Named::Stream)]),
    ("cuMemAllocAsync", &[(2, Named::Stream)]),
    ("cuMemAllocFromPoolAsync", &[(3, Named::Stream)]),
    ("cuStreamSynchronize", &[(0, Named::Stream)]),
    (
        "cuStreamWaitEvent",
        &[(0, Named::Stream), (1, Named::Event)],
    ),
    ("cuEventRecord", &[(0, Named::Event), (1, Named::Stream)]),
    (
        "cuEventRecordWithFlags",
        &[(0, Named::Event), (1, Named::Stream)],
    ),
    ("cuEventSynchronize", &[(0, Named::Event)]),
    ("cuGraphLaunch", &[(1, Named::Stream)]),
    ("cuMemcpyHtoD", &[(0, Named::Memory)]),
    ("cuMemcpyDtoH", &[(1, Named::Memory)]),
    ("cuMemcpyDtoD", &[(0, Named::Memory), (1, Named::Memory)]),
    (
        "cuMemcpyHtoDAsync",
        &[(0, Named::Memory), (3, Named::Stream)],
    ),
    (
        "cuMemcpyDtoHAsync",
        &[(1, Named::Memory), (3, Named::Stream)],
    ),
    (
        "cuMemcpyDtoDAsync",
        &[(0, Named::Memory), (1, Named::Memory), (3, Named::Stream)],
    ),
    ("cuMemcpyAsync", &[(3, Named::Stream)]),
    ("cuMemcpy2DAsync", &[(1, Named::Stream)]),
    ("cuMemcpy3DAsync", &[(1, Named::Stream)]),
    ("cuMemsetD8", &[(0, Named::Memory)]),
    ("cuMemsetD32", &[(0, Named::Memory)]),
    ("cuMemsetD8Async", &[(0, Named::Memory), (3, Named::Stream)]),
    (
        "cuMemsetD32Async",
        &[(0, Named::Memory), (3, Named::Stream)],
    ),
];

/// When a finding is said.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Gate {
    /// If the driver refused the call; if it took it, the handle names
    /// something again, and is no longer gone.
    IfRefused,
    /// If the driver did it.
    IfDone,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Found {
    what: MisuseKind,
    object: u64,
    kind: ObjKind,
    handle: usize,
    gate: Gate,
}

thread_local! {
    /// What the call this thread is in was found doing, said at its return.
    static PENDING: RefCell<Vec<Found>> = const { RefCell::new(Vec::new()) };
}

/// The handles one call names: (parameter index, what it names).
pub type Names = &'static [(usize, Named)];

/// What the driver function `api` (unversioned) names, by [`NAMES`].
pub fn names_of(api: &str) -> Names {
    NAMES
        .iter()
        .find(|(n, _)| *n == api)
        .map_or(&[], |(_, at)| *at)
}

/// The handles a call names, read from its parameter block.
///
/// # Safety
/// `params` is null or a parameter block with the layout `at` describes.
unsafe fn named(at: Names, params: *const usize) -> Vec<(usize, Named)> {
    if params.is_null() {
        return Vec::new();
    }
    at.iter()
        // SAFETY: the caller's contract: parameter `i` of this block.
        .map(|&(i, n)| (unsafe { *params.add(i) }, n))
        .collect()
}

/// A watched call entered: what it names that the program gave up. A
/// destroyed stream or event is said now; the rest waits for the call's
/// return ([`at_return`]). `freeing` is the kind a freeing call gives up
/// (its handle is parameter 0); `stream` a launch's stream.
///
/// Costs a launch one atomic load while the program has destroyed no stream
/// or event and freed no memory: the ledger is asked only once it has.
///
/// # Safety
/// `params` is null or the parameter block of the driver function `api`,
/// whose names are `at` ([`names_of`]).
pub unsafe fn at_entry(
    api: &'static str,
    at: Names,
    freeing: Option<ObjKind>,
    stream: Option<usize>,
    params: *const usize,
) {
    let ordered_free = api == "cuMemFree";
    if !ledger::cuda_any_gone() && !ordered_free {
        let _ = PENDING.try_with(|p| p.borrow_mut().clear());
        return;
    }
    let mut found = Vec::new();
    // SAFETY: the caller's contract.
    let mut names = unsafe { named(at, params) };
    names.extend(stream.map(|s| (s, Named::Stream)));
    let freed = match freeing {
        // SAFETY: parameter 0 of a freeing call is the handle it gives up.
        Some(kind) if !params.is_null() => Some((kind, unsafe { *params })),
        _ => None,
    };
    if let Some((kind, handle)) = freed {
        match kind {
            ObjKind::Stream | ObjKind::Event => {
                if let Some(id) = ledger::cuda_gone(kind, handle) {
                    transport::misused_now(api, MisuseKind::DoubleRelease, id, kind);
                }
            }
            ObjKind::Buffer if frees_address(api) => {
                if let Some(id) = ledger::cuda_gone(kind, handle) {
                    found.push(Found {
                        what: MisuseKind::DoubleRelease,
                        object: id,
                        kind,
                        handle,
                        gate: Gate::IfRefused,
                    });
                } else if ordered_free && let Some(id) = ledger::cuda_ordered(kind, handle) {
                    found.push(Found {
                        what: MisuseKind::SyncFreeOfStreamOrdered,
                        object: id,
                        kind,
                        handle,
                        gate: Gate::IfDone,
                    });
                }
            }
            _ => {}
        }
    }
    for (handle, named) in names {
        let kind = match named {
            Named::Stream => ObjKind::Stream,
            Named::Event => ObjKind::Event,
            Named::Memory => ObjKind::Buffer,
        };
        let Some(id) = ledger::cuda_gone(kind, handle) else {
            continue;
        };
        if named == Named::Memory {
            found.push(Found {
                what: MisuseKind::UseAfterRelease,
                object: id,
                kind,
                handle,
                gate: Gate::IfRefused,
            });
        } else {
            transport::misused_now(api, MisuseKind::UseAfterRelease, id, kind);
        }
    }
    // A call made after the thread's locals were destroyed (a static
    // destructor's free at exit, after glibc ran the thread's destructors):
    // what it found goes unsaid rather than abort the program.
    let _ = PENDING.try_with(|p| *p.borrow_mut() = found);
}

/// The calls that free device memory by its address (`cuMemRelease` gives up
/// a handle, which no later call names as an address).
fn frees_address(api: &str) -> bool {
    matches!(api, "cuMemFree" | "cuMemFreeAsync")
}

/// The call returned `status`: what its entry found is said with its record
/// ([`transport::misused`]) where its gate lets it.
pub fn at_return(status: i32) {
    let found = PENDING
        .try_with(|p| std::mem::take(&mut *p.borrow_mut()))
        .unwrap_or_default();
    for f in found {
        let say = match f.gate {
            Gate::IfRefused => status != 0,
            Gate::IfDone => status == 0,
        };
        if say {
            transport::misused(f.what, f.object, f.kind);
        } else if f.gate == Gate::IfRefused {
            ledger::cuda_not_gone(f.kind, f.handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> Vec<(MisuseKind, u64)> {
        PENDING.with(|p| p.borrow().iter().map(|f| (f.what, f.object)).collect())
    }

    #[test]
    fn every_named_call_is_one_the_agent_watches_by_that_name() {
        for (api, _) in NAMES {
            assert!(
                crate::cuda::watches(api),
                "{api} is not watched: its entry would never be seen"
            );
        }
    }

    #[test]
    fn freed_memory_is_said_only_when_the_driver_refuses_its_use() {
        let _ = transport::take_misused();
        let p = 0x7a00_0000_0000usize;
        let id = ledger::cuda_created(ObjKind::Buffer, p, 1 << 20, Vec::new());
        let freed = ledger::cuda_released_as(ObjKind::Buffer, p, Some(id), true);
        assert_eq!(freed, Some(id));
        // cuMemsetD8(p, 0, n): refused, as the H200's driver refuses it.
        let block = [p, 0, 1 << 20];
        // SAFETY: cuMemsetD8's parameter block.
        unsafe {
            at_entry(
                "cuMemsetD8",
                names_of("cuMemsetD8"),
                None,
                None,
                block.as_ptr(),
            )
        };
        assert_eq!(pending(), vec![(MisuseKind::UseAfterRelease, id)]);
        at_return(1);
        assert_eq!(
            transport::take_misused(),
            vec![(MisuseKind::UseAfterRelease, id, ObjKind::Buffer)]
        );
        // Taken by the driver: the address names memory the agent did not
        // see made, and is forgotten as gone.
        // SAFETY: as above.
        unsafe {
            at_entry(
                "cuMemsetD8",
                names_of("cuMemsetD8"),
                None,
                None,
                block.as_ptr(),
            )
        };
        at_return(0);
        assert!(transport::take_misused().is_empty());
        assert_eq!(ledger::cuda_gone(ObjKind::Buffer, p), None);
    }

    #[test]
    fn a_free_of_freed_memory_and_a_sync_free_of_ordered_memory_are_told_apart() {
        let _ = transport::take_misused();
        let p = 0x7b00_0000_0000usize;
        let id = ledger::cuda_created(ObjKind::Buffer, p, 4096, Vec::new());
        ledger::cuda_released_as(ObjKind::Buffer, p, Some(id), true);
        let block = [p];
        // SAFETY: cuMemFree's parameter block.
        unsafe {
            at_entry(
                "cuMemFree",
                &[],
                Some(ObjKind::Buffer),
                None,
                block.as_ptr(),
            )
        };
        at_return(1);
        assert_eq!(
            transport::take_misused(),
            vec![(MisuseKind::DoubleRelease, id, ObjKind::Buffer)]
        );
        let q = 0x7b00_1000_0000usize;
        let ordered = ledger::cuda_created_ordered(ObjKind::Buffer, q, 4096, Vec::new());
        let block = [q];
        // SAFETY: as above.
        unsafe {
            at_entry(
                "cuMemFree",
                &[],
                Some(ObjKind::Buffer),
                None,
                block.as_ptr(),
            )
        };
        at_return(0);
        assert_eq!(
            transport::take_misused(),
            vec![(
                MisuseKind::SyncFreeOfStreamOrdered,
                ordered,
                ObjKind::Buffer
            )]
        );
        // The same memory freed in stream order: nothing to say.
        let r = 0x7b00_2000_0000usize;
        ledger::cuda_created_ordered(ObjKind::Buffer, r, 4096, Vec::new());
        let block = [r, 0];
        // SAFETY: cuMemFreeAsync's parameter block.
        unsafe {
            at_entry(
                "cuMemFreeAsync",
                names_of("cuMemFreeAsync"),
                Some(ObjKind::Buffer),
                None,
                block.as_ptr(),
            )
        };
        at_return(0);
        assert!(transport::take_misused().is_empty());
    }

    #[test]
    fn new_memory_over_a_freed_address_ends_its_being_gone() {
        let p = 0x7c00_0000_0000usize;
        let id = ledger::cuda_created(ObjKind::Buffer, p + 4096, 4096, Vec::new());
        ledger::cuda_released_as(ObjKind::Buffer, p + 4096, Some(id), true);
        assert_eq!(ledger::cuda_gone(ObjKind::Buffer, p + 4096), Some(id));
        // A larger allocation that starts below it and covers it.
        ledger::cuda_created(ObjKind::Buffer, p, 1 << 16, Vec::new());
        assert_eq!(ledger::cuda_gone(ObjKind::Buffer, p + 4096), None);
    }

    #[test]
    fn memory_freed_by_its_handle_is_never_kept_as_an_address() {
        let h = 0x7d00_0000_0000usize;
        let id = ledger::cuda_created(ObjKind::Buffer, h, 4096, Vec::new());
        // cuMemRelease: the caller does not ask the ledger to remember it.
        ledger::cuda_released_as(ObjKind::Buffer, h, Some(id), false);
        assert_eq!(ledger::cuda_gone(ObjKind::Buffer, h), None);
        assert!(!frees_address("cuMemRelease"));
    }
}
