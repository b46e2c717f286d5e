//! The CUDA calls that order streams, read for [`crate::stream_order`]:
//! what each returned call made, used, recorded, waited for or freed, from
//! its parameter block (the layouts are cuda.h's; each parameter is a
//! pointer-sized slot unless said). Never changes a call, and asks the driver
//! only for a kernel's parameter layout (`cuFuncGetParamInfo`), once per
//! kernel.
//!
//! Nothing is numbered until the program holds stream-ordered memory: a
//! program that never calls `cudaMallocAsync` pays one atomic load a call.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gpulab_events::{ObjKind, UnorderedUse};

use crate::stream_order::Order;
use crate::{ledger, transport};

/// Whether the program holds stream-ordered memory the model knows.
static LIVE: AtomicBool = AtomicBool::new(false);
/// Stream captures begun and not ended: while any is, each call's stream is
/// asked whether it captures (a captured call runs later, in a graph).
static CAPTURES: AtomicUsize = AtomicUsize::new(0);

/// The calls this module reads that nothing else hooks: the hook only
/// passes them here (not on the timeline: a program may poll them).
pub const ORDER_ONLY: &[&str] = &[
    "cuStreamQuery",
    "cuEventQuery",
    "cuLaunchHostFunc",
    "cuStreamAddCallback",
    "cuStreamWaitValue32",
    "cuStreamWaitValue64",
    "cuStreamBatchMemOp",
    "cuWaitExternalSemaphoresAsync",
    "cuStreamBeginCapture",
    "cuStreamBeginCaptureToGraph",
    "cuStreamEndCapture",
    "cuMemsetD16",
    "cuMemsetD16Async",
    "cuMemcpyPeer",
    "cuMemcpyPeerAsync",
];

/// Every call [`at_return`] reads, beside [`ORDER_ONLY`]'s: a hook asks
/// once, at its table, so the others never reach this module.
const READ: &[&str] = &[
    "cuCtxSynchronize",
    "cuCtxDestroy",
    "cuDevicePrimaryCtxReset",
    "cuStreamCreate",
    "cuStreamCreateWithPriority",
    "cuGreenCtxStreamCreate",
    "cuMemAllocAsync",
    "cuMemAllocFromPoolAsync",
    "cuMemFree",
    "cuMemFreeAsync",
    "cuEventDestroy",
    "cuEventRecord",
    "cuEventRecordWithFlags",
    "cuStreamWaitEvent",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cuGraphLaunch",
    "cuLaunchKernel",
    "cuLaunchCooperativeKernel",
    "cuLaunchKernelEx",
    "cuMemcpyHtoDAsync",
    "cuMemsetD8Async",
    "cuMemsetD32Async",
    "cuMemcpyDtoHAsync",
    "cuMemcpyDtoDAsync",
    "cuMemcpyAsync",
    "cuMemcpy2DAsync",
    "cuMemcpy3DAsync",
    "cuMemcpy",
    "cuMemcpyHtoD",
    "cuMemcpyDtoH",
    "cuMemcpyDtoD",
    "cuMemcpy2D",
    "cuMemcpy3D",
    "cuMemsetD8",
    "cuMemsetD32",
];

/// Whether [`at_return`] reads the call `api` (unversioned).
pub fn reads(api: &str) -> bool {
    READ.contains(&api) || ORDER_ONLY.contains(&api)
}

fn with<R>(f: impl FnOnce(&mut Order) -> R) -> R {
    ledger::with_order(|o| {
        let r = f(o);
        LIVE.store(o.live(), Ordering::Relaxed);
        r
    })
}

/// Parameter `i` of a block of pointer-sized slots.
///
/// # Safety
/// `params` has at least `i + 1` slots.
unsafe fn slot(params: *const usize, i: usize) -> usize {
    // SAFETY: the caller's contract.
    unsafe { params.add(i).read_unaligned() }
}

/// A `unsigned int` parameter at byte `at`.
///
/// # Safety
/// `params` has 4 readable bytes at `at`.
unsafe fn u32_at(params: *const usize, at: usize) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { params.cast::<u8>().add(at).cast::<u32>().read_unaligned() }
}

/// What the call `api` (unversioned) did to the streams' order, at its
/// return with `status`; `object` is the ledger id of what it made.
///
/// # Safety
/// `params` is null or the parameter block of the driver function `api`.
pub unsafe fn at_return(api: &'static str, params: *const usize, object: Option<u64>, status: i32) {
    match api {
        "cuStreamBeginCapture" | "cuStreamBeginCaptureToGraph" if status == 0 => {
            CAPTURES.fetch_add(1, Ordering::Relaxed);
        }
        // Ended whatever it returned: a failed end invalidates the capture.
        "cuStreamEndCapture" => {
            let _ =
                CAPTURES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
        _ => {}
    }
    if status != 0 {
        return;
    }
    if api == "cuCtxSynchronize" {
        if LIVE.load(Ordering::Relaxed) {
            with(Order::host_waited_all);
        }
        return;
    }
    if params.is_null() {
        return;
    }
    // SAFETY: the caller's contract, for each arm's layout below.
    unsafe {
        match api {
            // (CUstream *, unsigned Flags[, int priority]); the green
            // context's (CUstream *, CUgreenCtx, unsigned flags, int).
            "cuStreamCreate" | "cuStreamCreateWithPriority" => made(params, 8),
            "cuGreenCtxStreamCreate" => made(params, 16),
            "cuMemAllocAsync" => allocated(api, params, object, 2),
            "cuMemAllocFromPoolAsync" => allocated(api, params, object, 3),
            _ if LIVE.load(Ordering::Relaxed) => ordering(api, params),
            _ => {}
        }
    }
}

/// A stream made: whether it waits for the legacy default stream.
///
/// # Safety
/// `params` is a creating call's block, its flags at byte `flags_at`.
unsafe fn made(params: *const usize, flags_at: usize) {
    /// `CU_STREAM_NON_BLOCKING`.
    const NON_BLOCKING: u32 = 0x1;
    // SAFETY: the caller's contract: parameter 0 is the out-pointer, which
    // the driver wrote before returning success.
    let (out, flags) = unsafe { (slot(params, 0) as *const usize, u32_at(params, flags_at)) };
    if out.is_null() {
        return;
    }
    // SAFETY: as above.
    let stream = unsafe { out.read_unaligned() };
    with(|o| o.stream_made(stream, flags & NON_BLOCKING != 0));
}

/// Stream-ordered memory made: `(CUdeviceptr *, size_t, [pool,] stream)`.
///
/// # Safety
/// `params` is the block of `cuMemAllocAsync` (stream at 2) or
/// `cuMemAllocFromPoolAsync` (at 3).
unsafe fn allocated(
    api: &'static str,
    params: *const usize,
    object: Option<u64>,
    stream_at: usize,
) {
    // A captured allocation has no object: the graph makes it.
    let Some(id) = object else { return };
    // SAFETY: the caller's contract.
    let (out, bytes, stream) = unsafe {
        (
            slot(params, 0) as *const usize,
            slot(params, 1),
            slot(params, stream_at),
        )
    };
    if out.is_null() {
        return;
    }
    // SAFETY: the driver wrote the address before returning success.
    let addr = unsafe { out.read_unaligned() };
    with(|o| o.allocated(addr, bytes, id, stream, api));
}

/// Whether `stream`'s calls are being captured (or the driver would not
/// say): their operations run later, in a graph the model does not see.
fn captured(stream: usize) -> bool {
    if CAPTURES.load(Ordering::Relaxed) == 0 {
        return false;
    }
    type IsCapturing = unsafe extern "C" fn(usize, *mut i32) -> i32;
    static IS: OnceLock<Option<IsCapturing>> = OnceLock::new();
    let is = IS.get_or_init(|| {
        let sym = crate::driver::symbol(c"cuStreamIsCapturing");
        // SAFETY: cuStreamIsCapturing's C type (cuda.h).
        (!sym.is_null())
            .then(|| unsafe { std::mem::transmute_copy::<*mut c_void, IsCapturing>(&sym) })
    });
    let Some(is) = is else { return true };
    let mut state = 0i32;
    // SAFETY: a capture-safe query of the program's own stream.
    let status = unsafe { is(stream, &mut state) };
    status != 0 || state != 0
}

/// A call made while stream-ordered memory is live.
///
/// # Safety
/// `params` is the parameter block of the driver function `api`.
unsafe fn ordering(api: &'static str, params: *const usize) {
    // SAFETY: the caller's contract, for each arm's layout.
    let p = |i: usize| unsafe { slot(params, i) };
    match api {
        "cuMemFree" => {
            let addr = p(0);
            with(|o| o.freed_sync(addr));
        }
        "cuMemFreeAsync" => {
            let (addr, stream) = (p(0), p(1));
            if captured(stream) {
                return;
            }
            if let Some(u) = with(|o| o.freed(addr, stream)) {
                let on = ledger::cuda_id_of(ObjKind::Stream, u.after.stream);
                transport::unordered_free(
                    api,
                    u.object,
                    UnorderedUse {
                        api: u.after.call.into(),
                        stream: on,
                    },
                );
            }
        }
        "cuCtxDestroy" | "cuDevicePrimaryCtxReset" => with(Order::forget_memory),
        "cuEventDestroy" => {
            let event = p(0);
            with(|o| o.event_gone(event));
        }
        "cuEventRecord" | "cuEventRecordWithFlags" => {
            let (event, stream) = (p(0), p(1));
            if captured(stream) {
                with(|o| o.recorded_unseen(event));
            } else {
                with(|o| o.recorded(event, stream));
            }
        }
        "cuStreamWaitEvent" => {
            let (stream, event) = (p(0), p(1));
            if !captured(stream) {
                with(|o| o.waits(stream, event));
            }
        }
        "cuStreamSynchronize" | "cuStreamQuery" | "cuLaunchHostFunc" | "cuStreamAddCallback" => {
            // A host function or callback may tell the host its stream got
            // there by a path the agent does not see: taken as the host
            // knowing it now.
            let stream = p(0);
            with(|o| o.host_waited_stream(stream));
        }
        "cuEventSynchronize" | "cuEventQuery" => {
            let event = p(0);
            with(|o| o.host_waited_event(event));
        }
        "cuStreamWaitValue32" | "cuStreamWaitValue64" | "cuStreamBatchMemOp" => {
            let stream = p(0);
            with(|o| o.waits_unseen(stream));
        }
        // (const CUexternalSemaphore *, const params *, unsigned, stream).
        "cuWaitExternalSemaphoresAsync" => {
            let stream = p(3);
            with(|o| o.waits_unseen(stream));
        }
        "cuGraphLaunch" => {
            let stream = p(1);
            with(|o| {
                o.events_unseen();
                o.waits_unseen(stream);
                o.op(stream);
            });
        }
        "cuLaunchKernel" | "cuLaunchCooperativeKernel" | "cuLaunchKernelEx" => {
            // SAFETY: the caller's contract: a launch's block.
            unsafe { launched(api, params) }
        }
        // The typed copies and sets name device memory; (dst, src, bytes,
        // stream) for the copies, (dst, value, count, stream) for the sets.
        "cuMemcpyHtoDAsync" | "cuMemsetD8Async" | "cuMemsetD16Async" | "cuMemsetD32Async" => {
            uses(api, p(3), &[p(0)]);
        }
        "cuMemcpyDtoHAsync" => uses(api, p(3), &[p(1)]),
        "cuMemcpyDtoDAsync" | "cuMemcpyAsync" => uses(api, p(3), &[p(0), p(1)]),
        // (dst, dstContext, src, srcContext, bytes, stream).
        "cuMemcpyPeerAsync" => uses(api, p(5), &[p(0), p(2)]),
        // A descriptor names the memory: an operation whose uses are unread.
        "cuMemcpy2DAsync" | "cuMemcpy3DAsync" => uses(api, p(1), &[]),
        // Synchronous copies and sets: on the legacy stream, after all
        // before them, and (taken as) waited for by the host.
        "cuMemcpy" | "cuMemcpyHtoD" | "cuMemcpyDtoH" | "cuMemcpyDtoD" | "cuMemcpy2D"
        | "cuMemcpy3D" | "cuMemcpyPeer" | "cuMemsetD8" | "cuMemsetD16" | "cuMemsetD32" => {
            with(|o| {
                o.op(0);
                o.host_waited_all();
            });
        }
        _ => {}
    }
}

/// One operation on `stream` that named `addrs`.
fn uses(api: &'static str, stream: usize, addrs: &[usize]) {
    if captured(stream) {
        return;
    }
    with(|o| {
        let op = o.op(stream);
        o.used(op, stream, addrs, api);
    });
}

/// A kernel launched: its arguments' pointer-sized words name the memory it
/// uses (a pointer inside a struct passed by value too).
///
/// # Safety
/// `params` is the block of `cuLaunchKernel` or `cuLaunchCooperativeKernel`
/// (f, 7 unsigned ints, then the stream at byte 40, the arguments at 48, and
/// for the first, `extra` at 56), or of `cuLaunchKernelEx` (config, f,
/// arguments, extra; the config's stream at byte 32).
unsafe fn launched(api: &'static str, params: *const usize) {
    // SAFETY: the caller's contract, per layout.
    let (function, stream, args, extra) = unsafe {
        match api {
            "cuLaunchKernelEx" => {
                let config = slot(params, 0) as *const u8;
                if config.is_null() {
                    return;
                }
                let stream = config.add(32).cast::<usize>().read_unaligned();
                (slot(params, 1), stream, slot(params, 2), slot(params, 3))
            }
            "cuLaunchKernel" => (
                slot(params, 0),
                slot(params, 5),
                slot(params, 6),
                slot(params, 7),
            ),
            _ => (slot(params, 0), slot(params, 5), slot(params, 6), 0),
        }
    };
    if captured(stream) {
        return;
    }
    let layout = layout_of(function);
    let mut words = Vec::new();
    // SAFETY: the driver took the launch: `args` has one value pointer per
    // parameter of the layout, or `extra` a buffer the layout's offsets read.
    unsafe { argument_words(&layout, args, extra, &mut words) };
    uses(api, stream, &words);
}

/// The most words read of one argument (a struct passed by value).
const WORDS_PER_ARGUMENT: usize = 64;

/// The pointer-sized words of a launch's arguments.
///
/// # Safety
/// `args` is null or holds a pointer to each parameter's value; `extra` is
/// null or a `CU_LAUNCH_PARAM_END`-terminated list whose buffer holds the
/// parameters at the layout's offsets.
unsafe fn argument_words(
    layout: &[(usize, usize)],
    args: usize,
    extra: usize,
    out: &mut Vec<usize>,
) {
    let read = |base: *const u8, size: usize, out: &mut Vec<usize>| {
        for w in 0..(size / 8).min(WORDS_PER_ARGUMENT) {
            // SAFETY: within the argument's `size` bytes.
            out.push(unsafe { base.add(w * 8).cast::<usize>().read_unaligned() });
        }
    };
    if args != 0 {
        let values = args as *const *const u8;
        for (i, &(_, size)) in layout.iter().enumerate() {
            // SAFETY: the caller's contract: one value pointer per parameter.
            let value = unsafe { values.add(i).read_unaligned() };
            if !value.is_null() {
                read(value, size, out);
            }
        }
        return;
    }
    if extra == 0 {
        return;
    }
    /// `CU_LAUNCH_PARAM_END`, `..._BUFFER_POINTER`.
    const END: usize = 0;
    const BUFFER: usize = 1;
    let list = extra as *const usize;
    for pair in 0..16 {
        // SAFETY: the caller's contract: key/value pairs up to END.
        let (k, v) = unsafe { (list.add(2 * pair).read_unaligned(), list.add(2 * pair + 1)) };
        match k {
            END => return,
            BUFFER => {
                // SAFETY: as above.
                let buffer = unsafe { v.read_unaligned() } as *const u8;
                if buffer.is_null() {
                    return;
                }
                for &(offset, size) in layout {
                    // SAFETY: the parameter at its offset of the buffer.
                    read(unsafe { buffer.add(offset) }, size, out);
                }
                return;
            }
            _ => {}
        }
    }
}

type ParamInfo = unsafe extern "C" fn(usize, usize, *mut usize, *mut usize) -> i32;

thread_local! {
    /// Each kernel's parameters (offset, size), as the driver said them.
    static LAYOUTS: RefCell<HashMap<usize, Vec<(usize, usize)>>> = RefCell::new(HashMap::new());
}

/// The (offset, size) of each parameter of `function` (a `CUfunction`, or a
/// `CUkernel` as the runtime launches one): empty if the driver cannot say
/// (before CUDA 12.4), and then the launch names no memory.
fn layout_of(function: usize) -> Vec<(usize, usize)> {
    if let Ok(Some(known)) = LAYOUTS.try_with(|l| l.borrow().get(&function).cloned()) {
        return known;
    }
    static INFO: OnceLock<[Option<ParamInfo>; 2]> = OnceLock::new();
    let info = INFO.get_or_init(|| {
        [c"cuFuncGetParamInfo", c"cuKernelGetParamInfo"].map(|name| {
            let sym = crate::driver::symbol(name);
            // SAFETY: both have this C type (cuda.h).
            (!sym.is_null())
                .then(|| unsafe { std::mem::transmute_copy::<*mut c_void, ParamInfo>(&sym) })
        })
    });
    let mut layout = Vec::new();
    for f in info.iter().flatten() {
        for i in 0..256 {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: a query of the program's own kernel into our locals.
            if unsafe { f(function, i, &mut offset, &mut size) } != 0 {
                break;
            }
            layout.push((offset, size));
        }
        if !layout.is_empty() {
            break;
        }
    }
    let _ = LAYOUTS.try_with(|l| l.borrow_mut().insert(function, layout.clone()));
    layout
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each call read is one the agent hooks by that name, so none is
    /// silently never seen.
    #[test]
    fn every_call_read_is_hooked_by_that_name() {
        for api in READ {
            assert!(crate::cuda::watches(api), "{api} is read but not hooked");
        }
        for api in ORDER_ONLY {
            assert!(!crate::cuda::watches(api), "{api} is hooked twice");
        }
    }
}
