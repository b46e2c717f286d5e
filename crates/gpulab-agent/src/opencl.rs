//! The hooks: one function per OpenCL entry the agent watches, each with the exact
//! C signature of its dispatch entry. Each calls the target, then records the call
//! and what it did to the program's objects. None is named `cl*`.

use std::collections::BTreeSet;
use std::ffi::{c_char, c_void};
use std::sync::Mutex;

use gpulab_events::api::{Api, Effect};
use gpulab_events::{MisuseKind, ObjKind, ReadSide};

use crate::clock::now_ns;
use crate::dispatch::{self as d, target};
use crate::ledger;
use crate::transport::{self, Status};

type Handle = *mut c_void;
type Notify = Option<unsafe extern "C" fn(*const c_char, *const c_void, usize, *mut c_void)>;
type BuildNotify = Option<unsafe extern "C" fn(Handle, *mut c_void)>;
type Destructor = unsafe extern "C" fn(Handle, *mut c_void);

const CL_SUCCESS: i32 = 0;
const CL_MEM_SIZE: u32 = 0x1102;

/// The target's entry `$index` as a function of the given C type.
macro_rules! target {
    ($index:expr, fn($($t:ty),* $(,)?) -> $r:ty) => {{
        let entry = target($index);
        // SAFETY: entry `$index` of the loader's dispatch table has exactly this
        // type (cl_icd.h), and hooks are installed only where it is non-null.
        unsafe { std::mem::transmute::<*const c_void, unsafe extern "C" fn($($t),*) -> $r>(entry) }
    }};
}

/// A hook for a creating entry whose last parameter is `cl_int *errcode_ret`:
/// it calls the target with the program's arguments unchanged, writes the status
/// where the program asked for it, and records the call and, on success, the
/// new object `$new` of `$kind` with `$bytes` and `$refs` (expressions over the
/// arguments and `$new`).
macro_rules! creating {
    // A call that moves the process's memory by megabytes (a context, a
    // queue, a link): its resident memory is read on each side of it.
    (read $($rest:tt)*) => { creating!(@hook true, $($rest)*); };
    (@hook $read:expr, $name:ident = $index:expr, $api:literal,
     ($($arg:ident: $ty:ty),* $(,)?), $new:ident => $kind:expr, $bytes:expr, $refs:expr) => {
        #[allow(clippy::too_many_arguments)] // the C signature
        unsafe extern "C" fn $name($($arg: $ty,)* err: *mut i32) -> Handle {
            if $read {
                crate::resident::read($api, ReadSide::Before);
            }
            let begin = now_ns();
            let mut status = CL_SUCCESS;
            let f = target!($index, fn($($ty,)* *mut i32) -> Handle);
            // SAFETY: the program's arguments, passed through unchanged.
            let $new = unsafe { f($($arg,)* &mut status) };
            // SAFETY: `err` is the program's out-parameter.
            unsafe { put(err, status) };
            made($api, begin, status, $new, $kind, $bytes, $refs);
            if $read {
                crate::resident::read($api, ReadSide::After);
            }
            $new
        }
    };
    ($($rest:tt)*) => { creating!(@hook false, $($rest)*); };
}

/// A hook for an enqueue on queue `$q` whose last parameters are the wait list
/// and the event out-parameter: it calls the target with the program's arguments
/// unchanged and records the call and the event it handed out, which refers to
/// the queue and to `$uses` (the buffers or kernel the command uses).
///
/// `waits if $blocking`: a blocking transfer, which waits for the queue's
/// earlier work ([`first_runs_waited`]).
macro_rules! enqueuing {
    ($name:ident = $index:expr, $api:literal,
     ($q:ident: Handle $(, $arg:ident: $ty:ty)* $(,)?), uses $uses:expr
     $(, waits if $blocking:ident)?) => {
        #[allow(clippy::too_many_arguments)] // the C signature
        unsafe extern "C" fn $name(
            $q: Handle,
            $($arg: $ty,)*
            nwait: u32,
            wait: *const Handle,
            event: *mut Handle,
        ) -> i32 {
            let waits = false $(|| $blocking != 0)?;
            let read = waits && first_runs_waited($api);
            let begin = now_ns();
            ledger::check_used(&[$q as usize], ObjKind::Queue);
            // SAFETY: the program's wait list, which the driver reads next.
            unsafe { check_waits(nwait, wait) };
            let f = target!($index, fn(Handle, $($ty,)* u32, *const Handle, *mut Handle) -> i32);
            // SAFETY: the program's arguments, passed through unchanged.
            let status = unsafe { f($q, $($arg,)* nwait, wait, event) };
            // SAFETY: `event` is the program's out-parameter the target wrote.
            let status = unsafe { enqueued($api, begin, status, $q, event, $uses) };
            if read {
                first_runs_read($api);
            }
            status
        }
    };
}

/// What the agent knows of kernels' first runs, under one lock. A CPU device
/// compiles a kernel for its work-group size when it first runs it, in its
/// own threads (PoCL: 9 MiB kept and 16 MiB more while its compiler ran,
/// inside the `clFinish` after Hands On OpenCL's `vadd` enqueued its
/// kernel): the next call that waits for the queue has the process's
/// resident memory read on each side of it.
struct FirstRuns {
    /// The kernels (their ledger ids) enqueued so far, up to [`KEPT`]: past
    /// it a first run is no longer told apart and the waits are not read.
    kernels: BTreeSet<u64>,
    /// A kernel ran for the first time and no call has waited since.
    unwaited: bool,
    /// Buffers (their ledger ids) something has used: a transfer from the
    /// host, a fill or copy into them, a kernel. A kernel that is the first
    /// to use one may touch its pages for the first time (PoCL takes a
    /// buffer's memory untouched: Hands On OpenCL's matmul wrote its 4 MiB
    /// result buffer first in the `clFinish` after its first kernel, which
    /// then read as 4 MiB of compiled code). Up to [`KEPT`] * 16; past it,
    /// every buffer counts as used.
    used: BTreeSet<u64>,
    /// Buffer handles made from the host's memory (`CL_MEM_COPY_HOST_PTR`,
    /// `CL_MEM_USE_HOST_PTR`): filled when made. Each buffer made at a
    /// handle says again whether it was.
    made_filled: BTreeSet<usize>,
    /// Bytes of buffers kernels enqueued since the last wait were the first
    /// to use.
    touched: u64,
}

static FIRST_RUNS: Mutex<FirstRuns> = Mutex::new(FirstRuns {
    kernels: BTreeSet::new(),
    unwaited: false,
    used: BTreeSet::new(),
    made_filled: BTreeSet::new(),
    touched: 0,
});
const KEPT: usize = 4096;
const CL_MEM_USE_HOST_PTR: u64 = 1 << 3;
const CL_MEM_COPY_HOST_PTR: u64 = 1 << 5;

fn first_runs() -> std::sync::MutexGuard<'static, FirstRuns> {
    FIRST_RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

impl FirstRuns {
    /// Buffers `ids` (with their bytes) were used: those not used before
    /// count, when a kernel used them, as first touched by the work a wait
    /// will wait for.
    fn used(&mut self, ids: impl Iterator<Item = (u64, u64)>, by_kernel: bool) {
        for (id, bytes) in ids {
            if self.used.len() < KEPT * 16 && self.used.insert(id) && by_kernel {
                self.touched += bytes;
            }
        }
    }
}

/// A buffer was made at `handle` with `flags`.
fn made_buffer(handle: Handle, flags: u64) {
    let mut runs = first_runs();
    if flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0 {
        if runs.made_filled.len() < KEPT * 16 {
            runs.made_filled.insert(handle as usize);
        }
    } else {
        runs.made_filled.remove(&(handle as usize));
    }
}

/// Kernel `k` was enqueued with `uses` (its id, then its arguments'): its
/// first run is noted, and the buffers it is the first to use.
fn ran(k: Handle, uses: Vec<u64>) -> Vec<u64> {
    ledger::check_used(&[k as usize], ObjKind::Kernel);
    ledger::check_kernel_args(k as usize);
    let Some(&id) = uses.first() else {
        return uses;
    };
    let args = ledger::kernel_buffers(k as usize);
    let mut runs = first_runs();
    let filled = &runs.made_filled;
    let args: Vec<(u64, u64)> = args
        .into_iter()
        .map(|a| {
            (
                a.id,
                if filled.contains(&a.handle) {
                    0
                } else {
                    a.bytes
                },
            )
        })
        .collect();
    runs.used(args.into_iter(), true);
    if runs.kernels.len() < KEPT && runs.kernels.insert(id) {
        runs.unwaited = true;
    }
    uses
}

/// A transfer or fill into buffers `uses`: used, not by a kernel.
fn filled(uses: Vec<u64>) -> Vec<u64> {
    first_runs().used(uses.iter().map(|id| (*id, 0)), false);
    uses
}

/// A call that waits for queued work begins: when a kernel's first run is
/// among it, the resident memory is read before it (true: read it after,
/// with [`first_runs_read`]).
fn first_runs_waited(api: &'static str) -> bool {
    let read = {
        let mut runs = first_runs();
        let read = std::mem::take(&mut runs.unwaited);
        if !read {
            // Buffers first touched by kernels that ran before: done with
            // by this wait, no part of a later one's.
            runs.touched = 0;
        }
        read
    };
    if read {
        crate::resident::read(api, ReadSide::Before);
    }
    read
}

/// The wait [`first_runs_waited`] read before returned: read after, with the
/// buffers the kernels it waited for were the first to use.
fn first_runs_read(api: &'static str) {
    let touched = std::mem::take(&mut first_runs().touched);
    crate::resident::read_beside(api, ReadSide::After, Some(touched));
}

/// Every hook and the entry it replaces.
#[expect(
    clippy::too_many_lines,
    reason = "a catalog: one entry per hooked OpenCL call"
)]
pub fn hooks() -> Vec<(usize, *const c_void)> {
    vec![
        (d::CREATE_CONTEXT, create_context as *const c_void),
        (
            d::CREATE_CONTEXT_FROM_TYPE,
            create_context_from_type as *const c_void,
        ),
        (d::RETAIN_CONTEXT, retain_context as *const c_void),
        (d::RELEASE_CONTEXT, release_context as *const c_void),
        (
            d::CREATE_COMMAND_QUEUE,
            create_command_queue as *const c_void,
        ),
        (
            d::CREATE_COMMAND_QUEUE_WITH_PROPERTIES,
            create_command_queue_with_properties as *const c_void,
        ),
        (
            d::RETAIN_COMMAND_QUEUE,
            retain_command_queue as *const c_void,
        ),
        (
            d::RELEASE_COMMAND_QUEUE,
            release_command_queue as *const c_void,
        ),
        (d::CREATE_BUFFER, create_buffer as *const c_void),
        (
            d::CREATE_BUFFER_WITH_PROPERTIES,
            create_buffer_with_properties as *const c_void,
        ),
        (d::CREATE_SUB_BUFFER, create_sub_buffer as *const c_void),
        (d::CREATE_IMAGE, create_image as *const c_void),
        (
            d::CREATE_IMAGE_WITH_PROPERTIES,
            create_image_with_properties as *const c_void,
        ),
        (d::CREATE_IMAGE_2D, create_image_2d as *const c_void),
        (d::CREATE_IMAGE_3D, create_image_3d as *const c_void),
        (d::RETAIN_MEM_OBJECT, retain_mem_object as *const c_void),
        (d::RELEASE_MEM_OBJECT, release_mem_object as *const c_void),
        (
            d::CREATE_PROGRAM_WITH_SOURCE,
            create_program_with_source as *const c_void,
        ),
        (
            d::CREATE_PROGRAM_WITH_BINARY,
            create_program_with_binary as *const c_void,
        ),
        (
            d::CREATE_PROGRAM_WITH_IL,
            create_program_with_il as *const c_void,
        ),
        (
            d::CREATE_PROGRAM_WITH_BUILT_IN_KERNELS,
            create_program_with_built_in_kernels as *const c_void,
        ),
        (d::LINK_PROGRAM, link_program as *const c_void),
        (d::BUILD_PROGRAM, build_program as *const c_void),
        (d::RETAIN_PROGRAM, retain_program as *const c_void),
        (d::RELEASE_PROGRAM, release_program as *const c_void),
        (d::CREATE_KERNEL, create_kernel as *const c_void),
        (
            d::CREATE_KERNELS_IN_PROGRAM,
            create_kernels_in_program as *const c_void,
        ),
        (d::RETAIN_KERNEL, retain_kernel as *const c_void),
        (d::RELEASE_KERNEL, release_kernel as *const c_void),
        (d::SET_KERNEL_ARG, set_kernel_arg as *const c_void),
        (d::CREATE_USER_EVENT, create_user_event as *const c_void),
        (d::RETAIN_EVENT, retain_event as *const c_void),
        (d::RELEASE_EVENT, release_event as *const c_void),
        (d::WAIT_FOR_EVENTS, wait_for_events as *const c_void),
        (d::FLUSH, flush as *const c_void),
        (d::FINISH, finish as *const c_void),
        (d::ENQUEUE_READ_BUFFER, enqueue_read_buffer as *const c_void),
        (
            d::ENQUEUE_WRITE_BUFFER,
            enqueue_write_buffer as *const c_void,
        ),
        (d::ENQUEUE_COPY_BUFFER, enqueue_copy_buffer as *const c_void),
        (d::ENQUEUE_FILL_BUFFER, enqueue_fill_buffer as *const c_void),
        (
            d::ENQUEUE_READ_BUFFER_RECT,
            enqueue_read_buffer_rect as *const c_void,
        ),
        (
            d::ENQUEUE_WRITE_BUFFER_RECT,
            enqueue_write_buffer_rect as *const c_void,
        ),
        (
            d::ENQUEUE_COPY_BUFFER_RECT,
            enqueue_copy_buffer_rect as *const c_void,
        ),
        (d::ENQUEUE_MAP_BUFFER, enqueue_map_buffer as *const c_void),
        (
            d::ENQUEUE_UNMAP_MEM_OBJECT,
            enqueue_unmap_mem_object as *const c_void,
        ),
        (
            d::ENQUEUE_MIGRATE_MEM_OBJECTS,
            enqueue_migrate_mem_objects as *const c_void,
        ),
        (
            d::ENQUEUE_ND_RANGE_KERNEL,
            enqueue_nd_range_kernel as *const c_void,
        ),
        (d::ENQUEUE_TASK, enqueue_task as *const c_void),
        (d::ENQUEUE_MARKER, enqueue_marker as *const c_void),
        (
            d::ENQUEUE_MARKER_WITH_WAIT_LIST,
            enqueue_marker_with_wait_list as *const c_void,
        ),
        (
            d::ENQUEUE_BARRIER_WITH_WAIT_LIST,
            enqueue_barrier_with_wait_list as *const c_void,
        ),
    ]
}

// --- what every hook does after the target returned -------------------------

/// Writes `status` where the program asked for it.
///
/// # Safety
/// `out` is null or points to a writable `cl_int`, as the OpenCL API requires.
unsafe fn put(out: *mut i32, status: i32) {
    if !out.is_null() {
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { *out = status };
    }
}

/// What a creating call returns when the device has no memory for it:
/// `CL_MEM_OBJECT_ALLOCATION_FAILURE`, `CL_OUT_OF_RESOURCES`.
const REFUSALS: [i32; 2] = [-4, -5];

/// A creating call returned: record the call and, on success, the new object.
fn made(
    api: &'static str,
    begin: u64,
    status: i32,
    handle: Handle,
    kind: ObjKind,
    bytes: u64,
    refs: Vec<u64>,
) {
    let t0 = crate::cost::after_target();
    let object = (status == CL_SUCCESS && !handle.is_null())
        .then(|| ledger::created(handle as usize, kind, bytes, refs));
    // The driver's free memory is no OpenCL query: the size and stack alone.
    let refused = (bytes > 0 && REFUSALS.contains(&status)).then(|| {
        Box::new(transport::Refused {
            asked: Some(bytes),
            free: None,
            stack: crate::stack::capture(kind),
            stack_id: None,
        })
    });
    transport::call_measured(
        api,
        api,
        begin,
        Status::OpenCl(status),
        object,
        None,
        false,
        refused,
        None,
    );
    if let Some(id) = object {
        watch_destruction(handle, kind, id, bytes);
    }
    crate::cost::hook_done(t0);
}

/// The kinds whose deletion the driver will report to [`watch_destruction`].
pub fn destruction_watched() -> Vec<ObjKind> {
    [
        (ObjKind::Context, d::SET_CONTEXT_DESTRUCTOR_CALLBACK),
        (ObjKind::Buffer, d::SET_MEM_OBJECT_DESTRUCTOR_CALLBACK),
    ]
    .into_iter()
    .filter(|(_, index)| !target(*index).is_null())
    .map(|(kind, _)| kind)
    .collect()
}

/// Asks the driver to say when it really deletes a buffer or context. The
/// callback holds no reference, so the object's lifetime is the program's own.
fn watch_destruction(handle: Handle, kind: ObjKind, id: u64, bytes: u64) {
    let (index, callback): (usize, Destructor) = match kind {
        ObjKind::Buffer => (d::SET_MEM_OBJECT_DESTRUCTOR_CALLBACK, mem_destroyed),
        ObjKind::Context => (d::SET_CONTEXT_DESTRUCTOR_CALLBACK, context_destroyed),
        _ => return,
    };
    if target(index).is_null() {
        return;
    }
    let tag = Box::into_raw(Box::new((id, bytes))) as *mut c_void;
    let set = target!(index, fn(Handle, Destructor, *mut c_void) -> i32);
    // SAFETY: `handle` is a live object the driver just returned; `tag` is ours.
    if unsafe { set(handle, callback, tag) } != CL_SUCCESS {
        // SAFETY: the driver refused the callback, so it will never see `tag`.
        drop(unsafe { Box::from_raw(tag as *mut (u64, u64)) });
    }
}

unsafe extern "C" fn mem_destroyed(_mem: Handle, tag: *mut c_void) {
    // SAFETY: `tag` is the box `watch_destruction` leaked for this one callback.
    let (id, bytes) = *unsafe { Box::from_raw(tag as *mut (u64, u64)) };
    ledger::destroyed(id, ObjKind::Buffer, bytes);
}

unsafe extern "C" fn context_destroyed(_ctx: Handle, tag: *mut c_void) {
    // SAFETY: as in `mem_destroyed`.
    let (id, bytes) = *unsafe { Box::from_raw(tag as *mut (u64, u64)) };
    ledger::destroyed(id, ObjKind::Context, bytes);
}

/// A retain or release returned; `id` is the object the handle named before
/// the call (another thread may have been given the handle since).
fn counted(
    api: &'static str,
    begin: u64,
    status: i32,
    (handle, id): (Handle, Option<u64>),
    retain: bool,
) -> i32 {
    let t0 = crate::cost::after_target();
    let object = if status != CL_SUCCESS {
        None
    } else if retain {
        ledger::retained_as(handle as usize, id)
    } else {
        ledger::released_as(handle as usize, id)
    };
    transport::call(api, begin, Status::OpenCl(status), object);
    crate::cost::hook_done(t0);
    status
}

/// An enqueue returned: the call, and the event it handed out, which refers to the
/// queue, the kernel and the buffers the command uses.
///
/// # Safety
/// `event` is null or points to the `cl_event` the target just wrote.
unsafe fn enqueued(
    api: &'static str,
    begin: u64,
    status: i32,
    queue: Handle,
    event: *mut Handle,
    uses: Vec<u64>,
) -> i32 {
    let handle = if status == CL_SUCCESS && !event.is_null() {
        // SAFETY: non-null event pointers were written by the target on success.
        unsafe { *event }
    } else {
        std::ptr::null_mut()
    };
    if handle.is_null() {
        return plain(api, begin, status);
    }
    let refs = ledger::id_of(queue as usize, ObjKind::Queue)
        .into_iter()
        .chain(uses)
        .collect();
    made(api, begin, status, handle, ObjKind::Event, 0, refs);
    status
}

/// A call that creates nothing and releases nothing.
fn plain(api: &'static str, begin: u64, status: i32) -> i32 {
    let t0 = crate::cost::after_target();
    transport::call(api, begin, Status::OpenCl(status), None);
    crate::cost::hook_done(t0);
    status
}

/// The events of a wait list, each one the program released said used after
/// its release.
///
/// # Safety
/// `list` is null or points to `n` event handles (what the driver reads).
unsafe fn check_waits(n: u32, list: *const Handle) {
    if n == 0 || list.is_null() {
        return;
    }
    // SAFETY: as the caller says.
    let events = unsafe { std::slice::from_raw_parts(list, n as usize) };
    let handles: Vec<usize> = events.iter().map(|e| *e as usize).collect();
    ledger::check_used(&handles, ObjKind::Event);
}

/// The ledger ids of the live buffers among `handles`; a released one is
/// said used after its release.
fn buffers(handles: &[Handle]) -> Vec<u64> {
    let raw: Vec<usize> = handles.iter().map(|h| *h as usize).collect();
    ledger::check_used(&raw, ObjKind::Buffer);
    handles
        .iter()
        .filter_map(|h| ledger::id_of(*h as usize, ObjKind::Buffer))
        .collect()
}

/// A memory object's size as the driver reports it (images, buffers made from
/// properties).
fn mem_size(mem: Handle) -> u64 {
    if mem.is_null() || target(d::GET_MEM_OBJECT_INFO).is_null() {
        return 0;
    }
    let info = target!(
        d::GET_MEM_OBJECT_INFO,
        fn(Handle, u32, usize, *mut c_void, *mut usize) -> i32
    );
    let mut size: usize = 0;
    // SAFETY: `mem` is a live memory object; the value is one size_t.
    let status = unsafe {
        info(
            mem,
            CL_MEM_SIZE,
            size_of::<usize>(),
            (&raw mut size).cast(),
            std::ptr::null_mut(),
        )
    };
    if status == CL_SUCCESS { size as u64 } else { 0 }
}

// --- contexts -----------------------------------------------------------------

creating!(
    read create_context = d::CREATE_CONTEXT, "clCreateContext",
    (
        props: *const isize,
        ndev: u32,
        devices: *const Handle,
        notify: Notify,
        user: *mut c_void,
    ),
    ctx => ObjKind::Context, 0, Vec::new()
);

creating!(
    read create_context_from_type = d::CREATE_CONTEXT_FROM_TYPE, "clCreateContextFromType",
    (props: *const isize, ty: u64, notify: Notify, user: *mut c_void),
    ctx => ObjKind::Context, 0, Vec::new()
);

/// Retain and release hooks: all share one shape.
/// A retain or release: its name and which of the two it is come from the
/// events crate's vocabulary, as the lab's calls of the same name do.
macro_rules! refcount_hook {
    ($name:ident, $index:expr, $api:expr) => {
        unsafe extern "C" fn $name(object: Handle) -> i32 {
            let begin = now_ns();
            let f = target!($index, fn(Handle) -> i32);
            // Which object the handle names now: once the call returns, the
            // driver may have given it to another thread's new object.
            let id = ledger::opencl_id(object as usize);
            let retain = matches!($api.effect(), Effect::Retain(_));
            if let (None, Effect::Retain(kind) | Effect::Release(kind)) = (id, $api.effect())
                && let Some(gone) = ledger::gone(object as usize, kind)
            {
                let what = if retain {
                    MisuseKind::RetainAfterRelease
                } else {
                    MisuseKind::DoubleRelease
                };
                transport::misused(what, gone, kind);
            }
            // SAFETY: the program's argument, passed through unchanged.
            let status = unsafe { f(object) };
            counted($api.name(), begin, status, (object, id), retain)
        }
    };
}

refcount_hook!(retain_context, d::RETAIN_CONTEXT, Api::ClRetainContext);
refcount_hook!(release_context, d::RELEASE_CONTEXT, Api::ClReleaseContext);
refcount_hook!(
    retain_command_queue,
    d::RETAIN_COMMAND_QUEUE,
    Api::ClRetainCommandQueue
);
refcount_hook!(
    release_command_queue,
    d::RELEASE_COMMAND_QUEUE,
    Api::ClReleaseCommandQueue
);
refcount_hook!(
    retain_mem_object,
    d::RETAIN_MEM_OBJECT,
    Api::ClRetainMemObject
);
refcount_hook!(
    release_mem_object,
    d::RELEASE_MEM_OBJECT,
    Api::ClReleaseMemObject
);
refcount_hook!(retain_program, d::RETAIN_PROGRAM, Api::ClRetainProgram);
refcount_hook!(release_program, d::RELEASE_PROGRAM, Api::ClReleaseProgram);
refcount_hook!(retain_kernel, d::RETAIN_KERNEL, Api::ClRetainKernel);
refcount_hook!(release_kernel, d::RELEASE_KERNEL, Api::ClReleaseKernel);
refcount_hook!(retain_event, d::RETAIN_EVENT, Api::ClRetainEvent);
refcount_hook!(release_event, d::RELEASE_EVENT, Api::ClReleaseEvent);

// --- queues -------------------------------------------------------------------

creating!(
    read create_command_queue = d::CREATE_COMMAND_QUEUE, "clCreateCommandQueue",
    (ctx: Handle, dev: Handle, props: u64),
    q => ObjKind::Queue, 0, context_ref(ctx)
);

creating!(
    read create_command_queue_with_properties = d::CREATE_COMMAND_QUEUE_WITH_PROPERTIES, "clCreateCommandQueueWithProperties",
    (ctx: Handle, dev: Handle, props: *const u64),
    q => ObjKind::Queue, 0, context_ref(ctx)
);

unsafe extern "C" fn flush(q: Handle) -> i32 {
    let begin = now_ns();
    let f = target!(d::FLUSH, fn(Handle) -> i32);
    // SAFETY: the program's argument, passed through unchanged.
    plain("clFlush", begin, unsafe { f(q) })
}

unsafe extern "C" fn finish(q: Handle) -> i32 {
    let read = first_runs_waited("clFinish");
    let begin = now_ns();
    let f = target!(d::FINISH, fn(Handle) -> i32);
    // SAFETY: the program's argument, passed through unchanged.
    let status = plain("clFinish", begin, unsafe { f(q) });
    if read {
        first_runs_read("clFinish");
    }
    status
}

// --- memory objects -----------------------------------------------------------

fn context_ref(ctx: Handle) -> Vec<u64> {
    ledger::id_of(ctx as usize, ObjKind::Context)
        .into_iter()
        .collect()
}

creating!(
    create_buffer = d::CREATE_BUFFER, "clCreateBuffer",
    (ctx: Handle, flags: u64, size: usize, host: *mut c_void),
    mem => ObjKind::Buffer, size as u64, {
        made_buffer(mem, flags);
        context_ref(ctx)
    }
);

creating!(
    create_buffer_with_properties = d::CREATE_BUFFER_WITH_PROPERTIES, "clCreateBufferWithProperties",
    (ctx: Handle, props: *const u64, flags: u64, size: usize, host: *mut c_void),
    mem => ObjKind::Buffer, size as u64, {
        made_buffer(mem, flags);
        context_ref(ctx)
    }
);

// A sub-buffer allocates nothing of its own: 0 bytes, and it refers to its parent.
creating!(
    create_sub_buffer = d::CREATE_SUB_BUFFER, "clCreateSubBuffer",
    (parent: Handle, flags: u64, ty: u32, info: *const c_void),
    mem => ObjKind::Buffer, 0, buffers(&[parent])
);

creating!(
    create_image = d::CREATE_IMAGE, "clCreateImage",
    (ctx: Handle, flags: u64, format: *const c_void, desc: *const c_void, host: *mut c_void),
    mem => ObjKind::Buffer, mem_size(mem), context_ref(ctx)
);

creating!(
    create_image_with_properties = d::CREATE_IMAGE_WITH_PROPERTIES, "clCreateImageWithProperties",
    (
        ctx: Handle,
        props: *const u64,
        flags: u64,
        format: *const c_void,
        desc: *const c_void,
        host: *mut c_void,
    ),
    mem => ObjKind::Buffer, mem_size(mem), context_ref(ctx)
);

creating!(
    create_image_2d = d::CREATE_IMAGE_2D, "clCreateImage2D",
    (
        ctx: Handle,
        flags: u64,
        format: *const c_void,
        w: usize,
        h: usize,
        pitch: usize,
        host: *mut c_void,
    ),
    mem => ObjKind::Buffer, mem_size(mem), context_ref(ctx)
);

creating!(
    create_image_3d = d::CREATE_IMAGE_3D, "clCreateImage3D",
    (
        ctx: Handle,
        flags: u64,
        format: *const c_void,
        w: usize,
        h: usize,
        depth: usize,
        row: usize,
        slice: usize,
        host: *mut c_void,
    ),
    mem => ObjKind::Buffer, mem_size(mem), context_ref(ctx)
);

// --- programs and kernels -----------------------------------------------------

creating!(
    create_program_with_source = d::CREATE_PROGRAM_WITH_SOURCE, "clCreateProgramWithSource",
    (ctx: Handle, count: u32, strings: *const *const c_char, lengths: *const usize),
    p => ObjKind::Program, 0, context_ref(ctx)
);

creating!(
    create_program_with_binary = d::CREATE_PROGRAM_WITH_BINARY, "clCreateProgramWithBinary",
    (
        ctx: Handle,
        ndev: u32,
        devices: *const Handle,
        lengths: *const usize,
        binaries: *const *const u8,
        binary_status: *mut i32,
    ),
    p => ObjKind::Program, 0, context_ref(ctx)
);

creating!(
    create_program_with_il = d::CREATE_PROGRAM_WITH_IL, "clCreateProgramWithIL",
    (ctx: Handle, il: *const c_void, len: usize),
    p => ObjKind::Program, 0, context_ref(ctx)
);

creating!(
    create_program_with_built_in_kernels = d::CREATE_PROGRAM_WITH_BUILT_IN_KERNELS, "clCreateProgramWithBuiltInKernels",
    (ctx: Handle, ndev: u32, devices: *const Handle, names: *const c_char),
    p => ObjKind::Program, 0, context_ref(ctx)
);

creating!(
    read link_program = d::LINK_PROGRAM, "clLinkProgram",
    (
        ctx: Handle,
        ndev: u32,
        devices: *const Handle,
        options: *const c_char,
        ninputs: u32,
        inputs: *const Handle,
        notify: BuildNotify,
        user: *mut c_void,
    ),
    p => ObjKind::Program, 0, context_ref(ctx)
);

unsafe extern "C" fn build_program(
    p: Handle,
    ndev: u32,
    devices: *const Handle,
    options: *const c_char,
    notify: BuildNotify,
    user: *mut c_void,
) -> i32 {
    // PoCL's compiler runs in the process: its memory moves across the build.
    crate::resident::read("clBuildProgram", ReadSide::Before);
    let begin = now_ns();
    let f = target!(
        d::BUILD_PROGRAM,
        fn(Handle, u32, *const Handle, *const c_char, BuildNotify, *mut c_void) -> i32
    );
    // SAFETY: the program's arguments, passed through unchanged.
    let status = plain("clBuildProgram", begin, unsafe {
        f(p, ndev, devices, options, notify, user)
    });
    crate::resident::read("clBuildProgram", ReadSide::After);
    status
}

creating!(
    create_kernel = d::CREATE_KERNEL, "clCreateKernel",
    (p: Handle, name: *const c_char),
    k => ObjKind::Kernel, 0, ledger::id_of(p as usize, ObjKind::Program).into_iter().collect()
);

unsafe extern "C" fn create_kernels_in_program(
    p: Handle,
    n: u32,
    kernels: *mut Handle,
    n_ret: *mut u32,
) -> i32 {
    let begin = now_ns();
    let mut made_n: u32 = 0;
    let f = target!(
        d::CREATE_KERNELS_IN_PROGRAM,
        fn(Handle, u32, *mut Handle, *mut u32) -> i32
    );
    // SAFETY: the program's arguments; our count replaces its (optional) pointer.
    let status = unsafe { f(p, n, kernels, &mut made_n) };
    if !n_ret.is_null() {
        // SAFETY: the program's out-parameter.
        unsafe { *n_ret = made_n };
    }
    if status != CL_SUCCESS || kernels.is_null() {
        return plain("clCreateKernelsInProgram", begin, status);
    }
    let program = ledger::id_of(p as usize, ObjKind::Program);
    let mut first = None;
    for i in 0..made_n.min(n) as usize {
        // SAFETY: on success the target wrote `made_n` (<= n) kernels.
        let k = unsafe { *kernels.add(i) };
        if !k.is_null() {
            let id = ledger::created(
                k as usize,
                ObjKind::Kernel,
                0,
                program.into_iter().collect(),
            );
            first.get_or_insert(id);
        }
    }
    transport::call(
        "clCreateKernelsInProgram",
        begin,
        Status::OpenCl(status),
        first,
    );
    status
}

unsafe extern "C" fn set_kernel_arg(
    k: Handle,
    index: u32,
    size: usize,
    value: *const c_void,
) -> i32 {
    let begin = now_ns();
    let f = target!(
        d::SET_KERNEL_ARG,
        fn(Handle, u32, usize, *const c_void) -> i32
    );
    let handle = (size == size_of::<usize>() && !value.is_null())
        // SAFETY: the API lets the driver read `size` bytes at `value`.
        .then(|| unsafe { (value as *const usize).read_unaligned() });
    // A buffer the program released, set as an argument: said whatever the
    // driver answers (one that still holds it for queued work takes it). A
    // pointer-sized scalar equal to a released handle's address would be
    // mistaken for it; no program passes one.
    if let Some(h) = handle {
        ledger::check_used(&[h], ObjKind::Buffer);
    }
    // SAFETY: the program's arguments, passed through unchanged.
    let status = unsafe { f(k, index, size, value) };
    if status == CL_SUCCESS {
        ledger::set_arg(k as usize, index, handle);
    }
    plain("clSetKernelArg", begin, status)
}

// --- events -------------------------------------------------------------------

creating!(
    create_user_event = d::CREATE_USER_EVENT, "clCreateUserEvent",
    (ctx: Handle),
    e => ObjKind::Event, 0, context_ref(ctx)
);

unsafe extern "C" fn wait_for_events(n: u32, list: *const Handle) -> i32 {
    let read = first_runs_waited("clWaitForEvents");
    let begin = now_ns();
    // SAFETY: the program's list, which the driver reads next.
    unsafe { check_waits(n, list) };
    let f = target!(d::WAIT_FOR_EVENTS, fn(u32, *const Handle) -> i32);
    // SAFETY: the program's arguments, passed through unchanged.
    let status = plain("clWaitForEvents", begin, unsafe { f(n, list) });
    if read {
        first_runs_read("clWaitForEvents");
    }
    status
}

// --- enqueues -----------------------------------------------------------------

enqueuing!(
    enqueue_read_buffer = d::ENQUEUE_READ_BUFFER, "clEnqueueReadBuffer",
    (q: Handle, mem: Handle, blocking: u32, offset: usize, size: usize, ptr: *mut c_void),
    uses buffers(&[mem]), waits if blocking
);

enqueuing!(
    enqueue_write_buffer = d::ENQUEUE_WRITE_BUFFER, "clEnqueueWriteBuffer",
    (q: Handle, mem: Handle, blocking: u32, offset: usize, size: usize, ptr: *const c_void),
    uses filled(buffers(&[mem])), waits if blocking
);

enqueuing!(
    enqueue_copy_buffer = d::ENQUEUE_COPY_BUFFER, "clEnqueueCopyBuffer",
    (q: Handle, src: Handle, dst: Handle, src_off: usize, dst_off: usize, size: usize),
    uses { filled(buffers(&[dst])); buffers(&[src, dst]) }
);

enqueuing!(
    enqueue_fill_buffer = d::ENQUEUE_FILL_BUFFER, "clEnqueueFillBuffer",
    (
        q: Handle,
        mem: Handle,
        pattern: *const c_void,
        pattern_size: usize,
        offset: usize,
        size: usize,
    ),
    uses filled(buffers(&[mem]))
);

enqueuing!(
    enqueue_read_buffer_rect = d::ENQUEUE_READ_BUFFER_RECT, "clEnqueueReadBufferRect",
    (
        q: Handle,
        mem: Handle,
        blocking: u32,
        buf_origin: *const usize,
        host_origin: *const usize,
        region: *const usize,
        buf_row: usize,
        buf_slice: usize,
        host_row: usize,
        host_slice: usize,
        ptr: *mut c_void,
    ),
    uses buffers(&[mem]), waits if blocking
);

enqueuing!(
    enqueue_write_buffer_rect = d::ENQUEUE_WRITE_BUFFER_RECT, "clEnqueueWriteBufferRect",
    (
        q: Handle,
        mem: Handle,
        blocking: u32,
        buf_origin: *const usize,
        host_origin: *const usize,
        region: *const usize,
        buf_row: usize,
        buf_slice: usize,
        host_row: usize,
        host_slice: usize,
        ptr: *const c_void,
    ),
    uses filled(buffers(&[mem])), waits if blocking
);

enqueuing!(
    enqueue_copy_buffer_rect = d::ENQUEUE_COPY_BUFFER_RECT, "clEnqueueCopyBufferRect",
    (
        q: Handle,
        src: Handle,
        dst: Handle,
        src_origin: *const usize,
        dst_origin: *const usize,
        region: *const usize,
        src_row: usize,
        src_slice: usize,
        dst_row: usize,
        dst_slice: usize,
    ),
    uses buffers(&[src, dst])
);

#[allow(clippy::too_many_arguments)] // the C signature
unsafe extern "C" fn enqueue_map_buffer(
    q: Handle,
    mem: Handle,
    blocking: u32,
    flags: u64,
    offset: usize,
    size: usize,
    nwait: u32,
    wait: *const Handle,
    event: *mut Handle,
    err: *mut i32,
) -> *mut c_void {
    let begin = now_ns();
    let mut status = CL_SUCCESS;
    let f = target!(
        d::ENQUEUE_MAP_BUFFER,
        fn(
            Handle,
            Handle,
            u32,
            u64,
            usize,
            usize,
            u32,
            *const Handle,
            *mut Handle,
            *mut i32,
        ) -> *mut c_void
    );
    // SAFETY: the program's arguments, passed through unchanged.
    let ptr = unsafe {
        f(
            q,
            mem,
            blocking,
            flags,
            offset,
            size,
            nwait,
            wait,
            event,
            &mut status,
        )
    };
    // SAFETY: `err` is the program's out-parameter.
    unsafe { put(err, status) };
    // SAFETY: `event` is the program's out-parameter the target wrote.
    unsafe {
        enqueued(
            "clEnqueueMapBuffer",
            begin,
            status,
            q,
            event,
            buffers(&[mem]),
        )
    };
    ptr
}

unsafe extern "C" fn enqueue_unmap_mem_object(
    q: Handle,
    mem: Handle,
    mapped: *mut c_void,
    nwait: u32,
    wait: *const Handle,
    event: *mut Handle,
) -> i32 {
    let begin = now_ns();
    let f = target!(
        d::ENQUEUE_UNMAP_MEM_OBJECT,
        fn(Handle, Handle, *mut c_void, u32, *const Handle, *mut Handle) -> i32
    );
    // SAFETY: the program's arguments, passed through unchanged.
    let status = unsafe { f(q, mem, mapped, nwait, wait, event) };
    // SAFETY: `event` is the program's out-parameter the target wrote.
    unsafe {
        enqueued(
            "clEnqueueUnmapMemObject",
            begin,
            status,
            q,
            event,
            buffers(&[mem]),
        )
    }
}

#[allow(clippy::too_many_arguments)] // the C signature
unsafe extern "C" fn enqueue_migrate_mem_objects(
    q: Handle,
    n: u32,
    mems: *const Handle,
    flags: u64,
    nwait: u32,
    wait: *const Handle,
    event: *mut Handle,
) -> i32 {
    let begin = now_ns();
    let f = target!(
        d::ENQUEUE_MIGRATE_MEM_OBJECTS,
        fn(Handle, u32, *const Handle, u64, u32, *const Handle, *mut Handle) -> i32
    );
    // SAFETY: the program's arguments, passed through unchanged.
    let status = unsafe { f(q, n, mems, flags, nwait, wait, event) };
    let used = if mems.is_null() {
        Vec::new()
    } else {
        // SAFETY: the API requires `mems` to hold `n` handles.
        buffers(unsafe { std::slice::from_raw_parts(mems, n as usize) })
    };
    // SAFETY: `event` is the program's out-parameter the target wrote.
    unsafe { enqueued("clEnqueueMigrateMemObjects", begin, status, q, event, used) }
}

enqueuing!(
    enqueue_nd_range_kernel = d::ENQUEUE_ND_RANGE_KERNEL, "clEnqueueNDRangeKernel",
    (
        q: Handle,
        k: Handle,
        dims: u32,
        offset: *const usize,
        global: *const usize,
        local: *const usize,
    ),
    uses ran(k, ledger::kernel_and_args(k as usize))
);

enqueuing!(
    enqueue_task = d::ENQUEUE_TASK, "clEnqueueTask",
    (q: Handle, k: Handle),
    uses ran(k, ledger::kernel_and_args(k as usize))
);

unsafe extern "C" fn enqueue_marker(q: Handle, event: *mut Handle) -> i32 {
    let begin = now_ns();
    let f = target!(d::ENQUEUE_MARKER, fn(Handle, *mut Handle) -> i32);
    // SAFETY: the program's arguments, passed through unchanged.
    let status = unsafe { f(q, event) };
    // SAFETY: `event` is the program's out-parameter the target wrote.
    unsafe { enqueued("clEnqueueMarker", begin, status, q, event, Vec::new()) }
}

enqueuing!(
    enqueue_marker_with_wait_list = d::ENQUEUE_MARKER_WITH_WAIT_LIST, "clEnqueueMarkerWithWaitList",
    (q: Handle),
    uses Vec::new()
);

enqueuing!(
    enqueue_barrier_with_wait_list = d::ENQUEUE_BARRIER_WITH_WAIT_LIST, "clEnqueueBarrierWithWaitList",
    (q: Handle),
    uses Vec::new()
);
