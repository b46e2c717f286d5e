//! The program's API objects as the agent saw them: each handle the driver gave
//! the program, mapped to an id, a kind and the references the program holds.
//! Every change goes out as an object record while the ledger is locked, so
//! records of one object never overtake each other.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gpulab_events::{ObjKind, ObjectAction};

use crate::transport;

struct Entry {
    id: u64,
    kind: ObjKind,
    /// References the program holds: 1 at creation, +1 per retain, -1 per release.
    refs: u32,
    bytes: u64,
    /// For a kernel: the buffer set as each argument, by argument index.
    args: Vec<(u32, Arg)>,
    /// CUDA memory a stream-ordered allocation made (`cuMemAllocAsync`).
    ordered: bool,
}

/// Where a handle is unique. OpenCL handles are pointers to distinct driver
/// objects; CUDA hands out device addresses, host addresses and opaque handles
/// that may coincide across kinds, so each CUDA kind has a space of its own.
/// A buffer a kernel's argument names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Arg {
    pub id: u64,
    pub bytes: u64,
    pub handle: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Space {
    OpenCl,
    Cuda(ObjKind),
}

type Key = (Space, usize);

type Objects = Option<HashMap<Key, Entry>>;

static OBJECTS: Mutex<Objects> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Handles the program released to its last reference, with the object each
/// named, until the driver hands the handle out again: a call that names one
/// uses an object that is no longer the program's. Every OpenCL handle; CUDA
/// streams, events and device memory when the program destroyed or freed them
/// ([`cuda_released_as`] says which). At most
/// [`GONE_KEPT`], the oldest forgotten first (a use of one that old goes
/// unseen, never misnamed).
struct Gone {
    by_handle: BTreeMap<Key, (u64, ObjKind)>,
    order: std::collections::VecDeque<Key>,
}

const GONE_KEPT: usize = 1 << 16;

static GONE: Mutex<Option<Gone>> = Mutex::new(None);

/// Under the ledger's lock (taken first, always in this order).
fn with_gone<R>(f: impl FnOnce(&mut Gone) -> R) -> R {
    let mut guard = GONE.lock().unwrap_or_else(|e| e.into_inner());
    let gone = guard.get_or_insert_with(|| Gone {
        by_handle: BTreeMap::new(),
        order: std::collections::VecDeque::new(),
    });
    f(gone)
}

/// Set in a child forked without exec: the parent's objects are not the
/// child's to release, so its first use of the ledger starts it empty.
static FORKED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The ledger's lock, held by the forking thread across `fork`.
    static HELD: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Objects>>> =
        const { std::cell::RefCell::new(None) };
}

/// Before `fork`: takes the ledger's lock, so the child never inherits it held
/// by a thread that does not exist there.
extern "C" fn before_fork() {
    let guard = OBJECTS.lock().unwrap_or_else(|e| e.into_inner());
    // Past the thread's locals (a fork from a static destructor at exit) the
    // lock is let go at once: the child may then inherit it held.
    let _ = HELD.try_with(|h| *h.borrow_mut() = Some(guard));
}

/// After `fork`, in the parent: gives the lock back.
extern "C" fn after_fork_in_parent() {
    let _ = HELD.try_with(|h| h.borrow_mut().take());
}

/// After `fork`, in the child: gives the lock back and marks the ledger stale.
extern "C" fn after_fork_in_child() {
    let _ = HELD.try_with(|h| h.borrow_mut().take());
    FORKED.store(true, Ordering::Relaxed);
}

fn with<R>(f: impl FnOnce(&mut HashMap<Key, Entry>) -> R) -> R {
    static WATCH_FORKS: Once = Once::new();
    WATCH_FORKS.call_once(|| {
        // SAFETY: the handlers only lock and unlock the ledger's mutex, on the
        // forking thread, and store to an atomic.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_in_parent),
                Some(after_fork_in_child),
            )
        };
    });
    let mut guard = OBJECTS.lock().unwrap_or_else(|e| e.into_inner());
    let objects = guard.get_or_insert_with(HashMap::new);
    if FORKED.swap(false, Ordering::Relaxed) {
        objects.clear();
        with_gone(|g| {
            g.by_handle.clear();
            g.order.clear();
        });
        *ORDER.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
    f(objects)
}

static ORDER: Mutex<Option<crate::stream_order::Order>> = Mutex::new(None);

/// The streams' order ([`crate::stream_order`]), under the ledger's lock
/// (taken first, always in this order), so a fork never leaves it held.
pub fn with_order<R>(f: impl FnOnce(&mut crate::stream_order::Order) -> R) -> R {
    with(|_| {
        let mut guard = ORDER.lock().unwrap_or_else(|e| e.into_inner());
        f(guard.get_or_insert_with(Default::default))
    })
}

/// Ids carry the process id in their upper half, so the objects of a program's
/// processes never clash in one stream.
fn new_id() -> u64 {
    let pid = u64::from(transport::pid().unwrap_or(0));
    (pid << 32) | NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The driver gave the program a new OpenCL object. Returns its id.
pub fn created(handle: usize, kind: ObjKind, bytes: u64, refs: Vec<u64>) -> u64 {
    create((Space::OpenCl, handle), kind, bytes, refs, false)
}

/// The driver gave the program a new CUDA object. Returns its id.
pub fn cuda_created(kind: ObjKind, handle: usize, bytes: u64, refs: Vec<u64>) -> u64 {
    create(
        (Space::Cuda(handles_of(kind)), handle),
        kind,
        bytes,
        refs,
        false,
    )
}

/// [`cuda_created`], of memory a stream-ordered allocation made: a
/// synchronous free of it is said ([`cuda_ordered`]).
pub fn cuda_created_ordered(kind: ObjKind, handle: usize, bytes: u64, refs: Vec<u64>) -> u64 {
    create(
        (Space::Cuda(handles_of(kind)), handle),
        kind,
        bytes,
        refs,
        true,
    )
}

/// The kind whose handles `kind`'s share: managed memory's pointers are
/// device pointers, freed by `cuMemFree` as a buffer's are.
fn handles_of(kind: ObjKind) -> ObjKind {
    match kind {
        ObjKind::Managed => ObjKind::Buffer,
        kind => kind,
    }
}

/// The program freed or destroyed a CUDA object; CUDA counts no references, so
/// this ends the program's hold. None for a handle the agent never saw made.
pub fn cuda_released(kind: ObjKind, handle: usize) -> Option<u64> {
    release((Space::Cuda(kind), handle))
}

/// [`cuda_released`], of object `id`, which the handle named when the freeing
/// call entered: when a new allocation got the handle since, that one ended
/// `id` already ([`create`]), and this books nothing. With `remember`, the
/// handle is kept as gone ([`cuda_gone`]) until the driver gives it again.
pub fn cuda_released_as(
    kind: ObjKind,
    handle: usize,
    id: Option<u64>,
    remember: bool,
) -> Option<u64> {
    let key = (Space::Cuda(kind), handle);
    let released = release_of(key, Some(id?))?;
    if remember {
        with(|objects| {
            if !objects.contains_key(&key) {
                keep_gone(key, released, kind);
            }
        });
    }
    Some(released)
}

/// The object a CUDA handle of `kind` named when the program freed or
/// destroyed it, if the driver has not given the handle out again since.
pub fn cuda_gone(kind: ObjKind, handle: usize) -> Option<u64> {
    let key = (Space::Cuda(handles_of(kind)), handle);
    with(|objects| {
        if objects.contains_key(&key) {
            return None;
        }
        with_gone(|g| g.by_handle.get(&key).map(|(id, _)| *id))
    })
}

/// The driver took a CUDA handle of `kind` the ledger kept as gone for a
/// live one (something the agent does not see gave it out again): it is no
/// longer gone.
pub fn cuda_not_gone(kind: ObjKind, handle: usize) {
    let key = (Space::Cuda(handles_of(kind)), handle);
    with(|_| with_gone(|g| g.by_handle.remove(&key)));
}

/// The id of live CUDA memory that a stream-ordered allocation made.
pub fn cuda_ordered(kind: ObjKind, handle: usize) -> Option<u64> {
    with(|objects| {
        objects
            .get(&(Space::Cuda(handles_of(kind)), handle))
            .filter(|e| e.ordered)
            .map(|e| e.id)
    })
}

/// The id of a live CUDA handle of `kind`.
pub fn cuda_id_of(kind: ObjKind, handle: usize) -> Option<u64> {
    with(|objects| objects.get(&(Space::Cuda(kind), handle)).map(|e| e.id))
}

fn create(key: Key, kind: ObjKind, bytes: u64, refs: Vec<u64>, ordered: bool) -> u64 {
    let id = new_id();
    with(|objects| {
        // A handle the driver hands out again belongs to a new object, and the
        // driver hands it out only once the old one is gone: whoever released
        // that one last is still inside the release call on another thread, and
        // books nothing when it returns (`released_as`). The old object's end
        // goes out here, before the new one's start.
        with_gone(|g| {
            g.by_handle.remove(&key);
            // New device memory covers its whole range: an address inside it
            // that named freed memory names this allocation now.
            if let (Space::Cuda(ObjKind::Buffer), start) = key
                && bytes > 0
            {
                let end = start.saturating_add(usize::try_from(bytes).unwrap_or(usize::MAX));
                let inside: Vec<Key> = g
                    .by_handle
                    .range(key..(key.0, end))
                    .map(|(k, _)| *k)
                    .collect();
                for k in inside {
                    g.by_handle.remove(&k);
                }
            }
        });
        if let Some(old) = objects.remove(&key)
            && old.refs > 0
        {
            transport::object(
                old.id,
                old.kind,
                ObjectAction::Released,
                old.bytes,
                0,
                Vec::new(),
            );
        }
        objects.insert(
            key,
            Entry {
                id,
                kind,
                refs: 1,
                bytes,
                args: Vec::new(),
                ordered,
            },
        );
        transport::object(id, kind, ObjectAction::Created, bytes, 1, refs);
    });
    id
}

/// The id the ledger knows an OpenCL handle by now, whatever its kind: what a
/// retain or release hook reads *before* the driver's call, so that the
/// change it books after goes to that object even if the driver has by then
/// handed the handle to a new one on another thread.
pub fn opencl_id(handle: usize) -> Option<u64> {
    with(|objects| objects.get(&(Space::OpenCl, handle)).map(|e| e.id))
}

/// The program gave a reference back to object `id`, which the handle named
/// before the call; at zero the handle is no longer its own. When it names another, that one was made after the driver freed
/// `id`, whose end [`create`] already sent: nothing more to book.
pub fn released_as(handle: usize, id: Option<u64>) -> Option<u64> {
    release_of((Space::OpenCl, handle), Some(id?))
}

/// The program took another reference to object `id`, which the handle named
/// before the call. None for a handle the agent never saw made.
pub fn retained_as(handle: usize, id: Option<u64>) -> Option<u64> {
    let id = id?;
    with(|objects| {
        let e = objects
            .get_mut(&(Space::OpenCl, handle))
            .filter(|e| e.id == id)?;
        e.refs = e.refs.saturating_add(1);
        transport::object(
            e.id,
            e.kind,
            ObjectAction::Retained,
            e.bytes,
            e.refs,
            Vec::new(),
        );
        Some(e.id)
    })
}

fn release(key: Key) -> Option<u64> {
    release_of(key, None)
}

/// A release of the object under `key`; with `expected`, only if it is that
/// object (checked under the same lock as the change).
fn release_of(key: Key, expected: Option<u64>) -> Option<u64> {
    with(|objects| {
        let e = objects
            .get_mut(&key)
            .filter(|e| expected.is_none_or(|id| e.id == id))?;
        e.refs = e.refs.saturating_sub(1);
        let (id, kind, bytes, refs) = (e.id, e.kind, e.bytes, e.refs);
        if refs == 0 {
            objects.remove(&key);
            if key.0 == Space::OpenCl {
                keep_gone(key, id, kind);
            }
        }
        transport::object(id, kind, ObjectAction::Released, bytes, refs, Vec::new());
        Some(id)
    })
}

/// Whether a CUDA handle was ever kept as gone: until one is, no CUDA call
/// can name one, and the hooks need not ask ([`cuda_any_gone`]).
static CUDA_GONE: AtomicBool = AtomicBool::new(false);

/// Whether the program ever destroyed a CUDA stream or event or freed memory
/// by its address (one atomic load).
pub fn cuda_any_gone() -> bool {
    CUDA_GONE.load(Ordering::Relaxed)
}

/// Keeps `key` as gone, naming object `id` (under the ledger's lock).
fn keep_gone(key: Key, id: u64, kind: ObjKind) {
    if matches!(key.0, Space::Cuda(_)) {
        CUDA_GONE.store(true, Ordering::Relaxed);
    }
    with_gone(|g| {
        if g.by_handle.insert(key, (id, kind)).is_none() {
            g.order.push_back(key);
        }
        while g.order.len() > GONE_KEPT {
            if let Some(old) = g.order.pop_front() {
                g.by_handle.remove(&old);
            }
        }
    });
}

/// The object of `kind` an OpenCL handle named when the program released
/// it to its last reference, if the handle names no object since.
pub fn gone(handle: usize, kind: ObjKind) -> Option<u64> {
    with(|objects| {
        if objects.contains_key(&(Space::OpenCl, handle)) {
            return None;
        }
        with_gone(|g| g.by_handle.get(&(Space::OpenCl, handle)).copied())
            .filter(|(_, k)| *k == kind)
            .map(|(id, _)| id)
    })
}

/// A call uses OpenCL handles `handles` as objects of `kind`: each one the
/// program had released is said to be used after its release.
pub fn check_used(handles: &[usize], kind: ObjKind) {
    for &h in handles {
        if let Some(id) = gone(h, kind) {
            transport::misused(gpulab_events::MisuseKind::UseAfterRelease, id, kind);
        }
    }
}

/// A kernel is enqueued: each buffer its arguments were set to that the
/// program has released since is said used after its release.
pub fn check_kernel_args(kernel: usize) {
    let args = kernel_buffers(kernel);
    for a in args {
        if gone(a.handle, ObjKind::Buffer) == Some(a.id) {
            transport::misused(
                gpulab_events::MisuseKind::UseAfterRelease,
                a.id,
                ObjKind::Buffer,
            );
        }
    }
}

/// The id of a live handle of `kind`.
pub fn id_of(handle: usize, kind: ObjKind) -> Option<u64> {
    with(|objects| {
        objects
            .get(&(Space::OpenCl, handle))
            .filter(|e| e.kind == kind)
            .map(|e| e.id)
    })
}

/// `clSetKernelArg` with a value that may be a buffer handle: remember which buffer
/// the kernel will use, so an event can name kernel -> buffer.
pub fn set_arg(kernel: usize, index: u32, value: Option<usize>) {
    with(|objects| {
        let buffer = value.and_then(|v| {
            objects
                .get(&(Space::OpenCl, v))
                .filter(|e| e.kind == ObjKind::Buffer)
                .map(|e| Arg {
                    id: e.id,
                    bytes: e.bytes,
                    handle: v,
                })
        });
        if let Some(k) = objects.get_mut(&(Space::OpenCl, kernel)) {
            k.args.retain(|(i, _)| *i != index);
            if let Some(b) = buffer {
                k.args.push((index, b));
            }
        }
    })
}

/// A kernel's id followed by the buffers its arguments name.
pub fn kernel_and_args(kernel: usize) -> Vec<u64> {
    with(|objects| match objects.get(&(Space::OpenCl, kernel)) {
        Some(k) => std::iter::once(k.id)
            .chain(k.args.iter().map(|(_, b)| b.id))
            .collect(),
        None => Vec::new(),
    })
}

/// The buffers a kernel's arguments name.
pub fn kernel_buffers(kernel: usize) -> Vec<Arg> {
    with(|objects| match objects.get(&(Space::OpenCl, kernel)) {
        Some(k) => k.args.iter().map(|(_, b)| *b).collect(),
        None => Vec::new(),
    })
}

/// The driver deleted the object `id` (a destructor callback fired).
pub fn destroyed(id: u64, kind: ObjKind, bytes: u64) {
    transport::object(id, kind, ObjectAction::Destroyed, bytes, 0, Vec::new());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release as the hook makes it: of the object the handle names now.
    fn released(handle: usize) -> Option<u64> {
        released_as(handle, opencl_id(handle))
    }

    fn retained(handle: usize) -> Option<u64> {
        retained_as(handle, opencl_id(handle))
    }

    #[test]
    fn a_handle_lives_from_create_to_its_last_release_and_can_be_reused() {
        let a = created(0x10, ObjKind::Buffer, 64, Vec::new());
        assert_eq!(id_of(0x10, ObjKind::Buffer), Some(a));
        assert_eq!(id_of(0x10, ObjKind::Event), None);
        assert_eq!(retained(0x10), Some(a));
        assert_eq!(released(0x10), Some(a));
        assert_eq!(id_of(0x10, ObjKind::Buffer), Some(a), "one reference left");
        assert_eq!(released(0x10), Some(a));
        assert_eq!(id_of(0x10, ObjKind::Buffer), None);
        assert_eq!(
            released(0x10),
            None,
            "a released handle is not the program's"
        );
        let b = created(0x10, ObjKind::Buffer, 64, Vec::new());
        assert_ne!(a, b);
    }

    /// #51: a handle released to its last reference is remembered with the
    /// object it named until the driver hands it out again; a use of it as
    /// that kind is a use after release (once per call), of another kind or
    /// after its reuse it is none.
    #[test]
    fn a_released_handle_is_known_gone_until_it_is_given_again() {
        let _ = crate::transport::take_misused();
        let a = created(0x70, ObjKind::Buffer, 64, Vec::new());
        assert_eq!(gone(0x70, ObjKind::Buffer), None, "alive");
        assert_eq!(released(0x70), Some(a));
        assert_eq!(gone(0x70, ObjKind::Buffer), Some(a));
        assert_eq!(gone(0x70, ObjKind::Event), None, "another kind");
        check_used(&[0x70, 0x70], ObjKind::Buffer);
        check_used(&[0x70], ObjKind::Queue);
        assert_eq!(
            crate::transport::take_misused(),
            [(
                gpulab_events::MisuseKind::UseAfterRelease,
                a,
                ObjKind::Buffer
            )]
        );
        // A kernel whose argument was set to it, enqueued after its release.
        let k = created(0x71, ObjKind::Kernel, 0, Vec::new());
        let b = created(0x72, ObjKind::Buffer, 8, Vec::new());
        set_arg(0x71, 0, Some(0x72));
        check_kernel_args(0x71);
        assert!(crate::transport::take_misused().is_empty(), "b is alive");
        assert_eq!(released(0x72), Some(b));
        check_kernel_args(0x71);
        assert_eq!(
            crate::transport::take_misused(),
            [(
                gpulab_events::MisuseKind::UseAfterRelease,
                b,
                ObjKind::Buffer
            )]
        );
        assert_eq!(released(0x71), Some(k));
        // The driver gives the handle to a new object: it is that one's.
        let c = created(0x70, ObjKind::Buffer, 64, Vec::new());
        assert_eq!(gone(0x70, ObjKind::Buffer), None);
        check_used(&[0x70], ObjKind::Buffer);
        assert!(crate::transport::take_misused().is_empty());
        assert_eq!(released(0x70), Some(c));
    }

    /// Thread A releases a buffer; inside A's call the driver frees it and
    /// hands its handle to thread B's new buffer, whose create hook books it
    /// first. A's release, booked after its call, must end A's buffer, never
    /// B's: B's stays alive, A's is released exactly once.
    #[test]
    fn a_handle_given_again_during_a_release_ends_the_old_object_only() {
        let a = created(0x50, ObjKind::Buffer, 8, Vec::new());
        let before = opencl_id(0x50);
        assert_eq!(before, Some(a));
        // The driver frees 0x50 and gives it to B, whose hook runs first.
        let b = created(0x50, ObjKind::Buffer, 16, Vec::new());
        assert_eq!(
            released_as(0x50, before),
            None,
            "A's release books nothing more"
        );
        assert_eq!(id_of(0x50, ObjKind::Buffer), Some(b), "B's buffer is alive");
        assert_eq!(released_as(0x50, Some(b)), Some(b));
        assert_eq!(id_of(0x50, ObjKind::Buffer), None);
        assert_eq!(retained_as(0x50, Some(b)), None);
    }

    /// The same for CUDA: a `cuMemFree` on one thread, the address handed to
    /// another thread's `cuMemAlloc` before the free returned.
    #[test]
    fn a_cuda_address_given_again_during_a_free_ends_the_old_allocation_only() {
        let a = cuda_created(ObjKind::Buffer, 0x5_0000, 64, Vec::new());
        let entered = cuda_id_of(ObjKind::Buffer, 0x5_0000);
        let b = cuda_created(ObjKind::Buffer, 0x5_0000, 128, Vec::new());
        assert_ne!(a, b);
        assert_eq!(
            cuda_released_as(ObjKind::Buffer, 0x5_0000, entered, true),
            None
        );
        assert_eq!(cuda_id_of(ObjKind::Buffer, 0x5_0000), Some(b));
        assert_eq!(
            cuda_released_as(ObjKind::Buffer, 0x5_0000, Some(b), true),
            Some(b)
        );
    }

    #[test]
    fn cuda_handles_of_different_kinds_never_collide() {
        // A device address and an event handle may have the same value.
        let buf = cuda_created(ObjKind::Buffer, 0x7000, 1 << 20, Vec::new());
        let ev = cuda_created(ObjKind::Event, 0x7000, 0, Vec::new());
        assert_ne!(buf, ev);
        assert_eq!(cuda_id_of(ObjKind::Buffer, 0x7000), Some(buf));
        assert_eq!(cuda_released(ObjKind::Event, 0x7000), Some(ev));
        assert_eq!(cuda_id_of(ObjKind::Event, 0x7000), None, "one free ends it");
        assert_eq!(cuda_id_of(ObjKind::Buffer, 0x7000), Some(buf));
        assert_eq!(cuda_released(ObjKind::Buffer, 0x7000), Some(buf));
        assert_eq!(cuda_released(ObjKind::Buffer, 0x7000), None);
        // And none with OpenCL's handles.
        let cl = created(0x7000, ObjKind::Buffer, 8, Vec::new());
        assert_eq!(cuda_id_of(ObjKind::Buffer, 0x7000), None);
        assert_eq!(released(0x7000), Some(cl));
    }

    #[test]
    fn kernels_remember_the_buffers_their_arguments_name() {
        let buf = created(0x20, ObjKind::Buffer, 8, Vec::new());
        let k = created(0x30, ObjKind::Kernel, 0, Vec::new());
        set_arg(0x30, 0, Some(0x20));
        set_arg(0x30, 1, Some(0x999));
        assert_eq!(kernel_and_args(0x30), vec![k, buf]);
        set_arg(0x30, 0, None);
        assert_eq!(kernel_and_args(0x30), vec![k]);
    }
}
