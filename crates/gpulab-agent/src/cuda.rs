//! CUDA through CUPTI. `gpulab watch` names this library in
//! `CUDA_INJECTION64_PATH`, so the CUDA driver loads it inside the program's first
//! `cuInit` and calls [`InitializeInjection`]. The agent then opens the libcupti
//! that `GPULAB_CUPTI` names and subscribes to driver-API callbacks: every CUDA
//! user goes through the driver (static or shared cudart, PyTorch, CuPy, raw
//! driver code), so one subscription sees them all.
//!
//! Only the calls in [`WATCHED`] are enabled, each by the callback id CUPTI itself
//! gives its name, so the table follows the installed CUPTI rather than a header
//! compiled in here. Contexts come from CUPTI's resource callbacks, which fire
//! for primary contexts too.

use std::alloc::Layout;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use gpulab_events::{CudaMemory, DeviceSpan, ObjKind, PoolMemory, ReadSide};

use crate::clock::now_ns;
use crate::driver::symbol as driver_symbol;
use crate::ledger;
use crate::transport::{self, Family, Refused, Status};

/// The environment variable naming the libcupti to load.
pub const CUPTI_ENV: &str = "GPULAB_CUPTI";
/// Set to `1`, the agent also asks CUPTI for kernel activity records: device
/// spans on the timeline. Opt-in, because CUPTI then instruments every module
/// the program loads.
pub const SPANS_ENV: &str = "GPULAB_DEVICE_SPANS";

const CUPTI_SUCCESS: i32 = 0;
const CUDA_ERROR_OUT_OF_MEMORY: i32 = 2;
const CUPTI_ERROR_MULTIPLE_SUBSCRIBERS: i32 = 39;
const DOMAIN_DRIVER_API: u32 = 1;
const DOMAIN_RESOURCE: u32 = 3;
const API_ENTER: u32 = 0;
const RESOURCE_CONTEXT_CREATED: u32 = 1;
const RESOURCE_CONTEXT_DESTROY_STARTING: u32 = 2;
const RESOURCE_MODULE_LOADED: u32 = 6;
/// Set to `all`, the agent watches every kernel launch, not only those of
/// functions new to the process ([`crate::launches`]).
pub const LAUNCHES_ENV: &str = "GPULAB_LAUNCHES";
/// Driver callback ids asked for names; CUDA 13.0 has about 800.
const MAX_CBID: u32 = 4096;
const ACTIVITY_KIND_KERNEL: u32 = 3;
const ACTIVITY_KIND_CONCURRENT_KERNEL: u32 = 10;
const ACTIVITY_FLAG_FLUSH_FORCED: u32 = 1;
/// Bytes of one activity buffer handed to CUPTI (it asks for more as they fill).
const ACTIVITY_BUFFER: usize = 1 << 20;
/// Launches waiting for their kernel's record; beyond this the oldest are forgotten.
const MAX_PENDING_LAUNCHES: usize = 1 << 16;

/// `CUpti_CallbackData` (cupti_callbacks.h), what a driver-API callback gets.
#[repr(C)]
struct CallbackData {
    site: u32,
    function_name: *const c_char,
    params: *const c_void,
    return_value: *const c_void,
    symbol_name: *const c_char,
    context: *mut c_void,
    context_uid: u32,
    /// One slot per call, kept from its enter callback to its exit callback.
    correlation_data: *mut u64,
    correlation_id: u32,
}

/// `CUpti_ResourceData`: the context, and the stream for stream callbacks.
#[repr(C)]
struct ResourceData {
    context: *mut c_void,
    handle: *mut c_void,
    descriptor: *mut c_void,
}

type Callback = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
type Subscribe = unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void) -> i32;
type SubscribeV2 =
    unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void, *mut c_void) -> i32;
type EnableCallback = unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> i32;
type GetCallbackName = unsafe extern "C" fn(u32, u32, *mut *const c_char) -> i32;
type GetResultString = unsafe extern "C" fn(i32, *mut *const c_char) -> i32;
type GetErrorName = unsafe extern "C" fn(i32, *mut *const c_char) -> i32;
type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type BufferCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type RegisterCallbacks = unsafe extern "C" fn(BufferRequested, BufferCompleted) -> i32;
type ActivityEnable = unsafe extern "C" fn(u32) -> i32;
type GetNextRecord = unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> i32;
type FlushAll = unsafe extern "C" fn(u32) -> i32;
type Timestamp = unsafe extern "C" fn() -> u64;
type RegisterTimestamp = unsafe extern "C" fn(Timestamp) -> i32;
type GetTimestamp = unsafe extern "C" fn(*mut u64) -> i32;

/// What a watched driver call does to the program's objects. Every creating call
/// of the driver API writes the new handle through its first parameter, and
/// every freeing call takes the handle as its first parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// Parameter 0 points to the new handle.
    Make { kind: ObjKind, size: Size },
    /// Parameter 0 is the handle the program gives up.
    Free(ObjKind),
    /// Only the call, for the host timeline.
    Call,
    /// A kernel launch: with device spans on, its kernel's activity record is
    /// matched to it. The stream is at byte `stream_at` of the parameters (or of
    /// the launch config parameter 0 points to, for `cuLaunchKernelEx`).
    Launch { stream_at: StreamAt },
    /// A call that loads the code of the function or module it names where
    /// the driver loads lazily (an attribute read or set, an occupancy query,
    /// a global's address): the handle is parameter `handle_at`. Only its
    /// first call per handle is recorded, with the memory it took (NCCL sets
    /// its kernels' attributes at start-up, loading 190 MiB of code with no
    /// launch).
    Load { handle_at: usize },
    /// Read for the streams' order only ([`crate::cuda_order::ORDER_ONLY`]):
    /// not on the timeline.
    Order,
}

/// Where a launch names its stream.
#[derive(Clone, Copy, Debug, PartialEq)]
enum StreamAt {
    /// A `CUstream` parameter at this byte offset.
    Param(usize),
    /// `CUlaunchConfig *` as parameter 0, its `hStream` at this byte offset.
    Config(usize),
}

/// Where a creating call's size in bytes is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Size {
    None,
    /// Parameter `n`, a `size_t`; the parameters before it are pointer-sized.
    At(usize),
    /// `cuMemAllocPitch`: the pitch written through parameter 1, times parameter 3.
    Pitch,
}

use ObjKind::{Buffer, Event, HostBuffer, Program, Stream};
use Role::{Call, Free, Launch, Load, Make, Order};

/// The driver calls the agent enables, by the name CUPTI gives them. A creating
/// or freeing call names its exact version (parameters differ between versions);
/// a timeline-only call matches every version and per-thread-stream form.
const WATCHED: &[(&str, Role)] = &[
    (
        "cuMemAlloc_v2",
        Make {
            kind: Buffer,
            size: Size::At(1),
        },
    ),
    (
        "cuMemAllocAsync",
        Make {
            kind: Buffer,
            size: Size::At(1),
        },
    ),
    (
        "cuMemAllocFromPoolAsync",
        Make {
            kind: Buffer,
            size: Size::At(1),
        },
    ),
    (
        "cuMemAllocManaged",
        Make {
            kind: ObjKind::Managed,
            size: Size::At(1),
        },
    ),
    (
        "cuMemAllocPitch_v2",
        Make {
            kind: Buffer,
            size: Size::Pitch,
        },
    ),
    (
        "cuMemCreate",
        Make {
            kind: Buffer,
            size: Size::At(1),
        },
    ),
    (
        "cuMemAllocHost_v2",
        Make {
            kind: HostBuffer,
            size: Size::At(1),
        },
    ),
    (
        "cuMemHostAlloc",
        Make {
            kind: HostBuffer,
            size: Size::At(1),
        },
    ),
    (
        "cuEventCreate",
        Make {
            kind: Event,
            size: Size::None,
        },
    ),
    // Streams and events made by calls other than their own creating ones:
    // each destroyed as any other, and a handle one of them hands out may be
    // one a destroyed object had ([`crate::cuda_misuse`]).
    (
        "cuEventCreateFromEGLSync",
        Make {
            kind: Event,
            size: Size::None,
        },
    ),
    (
        "cuIpcOpenEventHandle",
        Make {
            kind: Event,
            size: Size::None,
        },
    ),
    (
        "cuGreenCtxStreamCreate",
        Make {
            kind: Stream,
            size: Size::None,
        },
    ),
    (
        "cuStreamCreate",
        Make {
            kind: Stream,
            size: Size::None,
        },
    ),
    (
        "cuStreamCreateWithPriority",
        Make {
            kind: Stream,
            size: Size::None,
        },
    ),
    (
        "cuModuleLoad",
        Make {
            kind: Program,
            size: Size::None,
        },
    ),
    (
        "cuModuleLoadData",
        Make {
            kind: Program,
            size: Size::None,
        },
    ),
    (
        "cuModuleLoadDataEx",
        Make {
            kind: Program,
            size: Size::None,
        },
    ),
    (
        "cuModuleLoadFatBinary",
        Make {
            kind: Program,
            size: Size::None,
        },
    ),
    (
        "cuLibraryLoadData",
        Make {
            kind: Program,
            size: Size::None,
        },
    ),
    (
        "cuLibraryLoadFromFile",
        Make {
            kind: Program,
            size: Size::None,
        },
    ),
    ("cuMemFree_v2", Free(Buffer)),
    ("cuMemFreeAsync", Free(Buffer)),
    ("cuMemRelease", Free(Buffer)),
    ("cuMemFreeHost", Free(HostBuffer)),
    ("cuEventDestroy_v2", Free(Event)),
    ("cuStreamDestroy_v2", Free(Stream)),
    ("cuModuleUnload", Free(Program)),
    ("cuLibraryUnload", Free(Program)),
    ("cuDevicePrimaryCtxRetain", Call),
    ("cuDevicePrimaryCtxRelease", Call),
    ("cuDevicePrimaryCtxReset", Call),
    ("cuCtxCreate", Call),
    ("cuCtxDestroy", Call),
    ("cuCtxSynchronize", Call),
    ("cuStreamSynchronize", Call),
    ("cuStreamWaitEvent", Call),
    ("cuEventRecord", Call),
    ("cuEventRecordWithFlags", Call),
    ("cuEventSynchronize", Call),
    // (f, gridDimX..Z, blockDimX..Z, sharedMemBytes: 8 + 7 * 4, padded) then hStream.
    (
        "cuLaunchKernel",
        Launch {
            stream_at: StreamAt::Param(40),
        },
    ),
    (
        "cuLaunchCooperativeKernel",
        Launch {
            stream_at: StreamAt::Param(40),
        },
    ),
    // CUlaunchConfig: grid and block (6 * 4), sharedMemBytes, padding, hStream.
    (
        "cuLaunchKernelEx",
        Launch {
            stream_at: StreamAt::Config(32),
        },
    ),
    // The parameter blocks: `cuKernelGetAttribute(int *pi, attrib, CUkernel,
    // CUdevice)`, `cuKernelSetAttribute(attrib, int val, CUkernel, CUdevice)`
    // (two ints, then the kernel at byte 8), and so on (cuda.h).
    ("cuFuncGetAttribute", Load { handle_at: 2 }),
    ("cuFuncSetAttribute", Load { handle_at: 0 }),
    ("cuFuncSetCacheConfig", Load { handle_at: 0 }),
    ("cuFuncLoad", Load { handle_at: 0 }),
    ("cuKernelGetAttribute", Load { handle_at: 2 }),
    ("cuKernelSetAttribute", Load { handle_at: 1 }),
    ("cuKernelSetCacheConfig", Load { handle_at: 0 }),
    ("cuKernelGetFunction", Load { handle_at: 1 }),
    ("cuLibraryGetModule", Load { handle_at: 1 }),
    ("cuLibraryGetGlobal", Load { handle_at: 2 }),
    ("cuModuleGetGlobal_v2", Load { handle_at: 2 }),
    (
        "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        Load { handle_at: 1 },
    ),
    (
        "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
        Load { handle_at: 1 },
    ),
    ("cuOccupancyMaxPotentialBlockSize", Load { handle_at: 2 }),
    (
        "cuOccupancyMaxPotentialBlockSizeWithFlags",
        Load { handle_at: 2 },
    ),
    ("cuGraphLaunch", Call),
    ("cuDeviceGraphMemTrim", Call),
    ("cuMemcpy", Call),
    ("cuMemcpyAsync", Call),
    ("cuMemcpyHtoD", Call),
    ("cuMemcpyDtoH", Call),
    ("cuMemcpyDtoD", Call),
    ("cuMemcpyHtoDAsync", Call),
    ("cuMemcpyDtoHAsync", Call),
    ("cuMemcpyDtoDAsync", Call),
    ("cuMemcpy2D", Call),
    ("cuMemcpy2DAsync", Call),
    ("cuMemcpy3D", Call),
    ("cuMemcpy3DAsync", Call),
    ("cuMemsetD8", Call),
    ("cuMemsetD32", Call),
    ("cuMemsetD8Async", Call),
    ("cuMemsetD32Async", Call),
    ("cuMemPrefetchAsync", Call),
    ("cuMemHostRegister", Call),
    ("cuMemHostUnregister", Call),
    ("cuMemPoolCreate", Call),
    ("cuMemPoolDestroy", Call),
    ("cuMemPoolTrimTo", Call),
    ("cuMemPoolSetAttribute", Call),
    ("cuDeviceSetMemPool", Call),
    ("cuMemMap", Call),
    ("cuMemUnmap", Call),
    ("cuMemAddressReserve", Call),
    ("cuMemAddressFree", Call),
];

/// A watched callback id: the name the program wrote (`cuMemAlloc`), the name
/// the driver exports (`cuMemAlloc_v2`), and what it does.
#[derive(Debug)]
struct Hook {
    api: &'static str,
    driver: &'static str,
    role: Role,
    /// The handles the call names that a misuse check reads
    /// ([`crate::cuda_misuse`]), looked up once here, not at every call.
    names: crate::cuda_misuse::Names,
    /// Whether the streams' order reads it ([`crate::cuda_order::reads`]).
    orders: bool,
}

/// Hooks by driver callback id.
static HOOKS: OnceLock<Vec<Option<Hook>>> = OnceLock::new();

thread_local! {
    /// The callback id of the watched call this thread entered, plus one (0:
    /// none). A call whose entry was not seen (its callbacks were turned on
    /// while it ran) is not recorded at its return.
    static ENTERED: Cell<u32> = const { Cell::new(0) };
    /// Whether the call this thread is in is read on each side
    /// ([`measured`]): a function's first launch or first use, a module,
    /// library or stream made.
    static FIRST_USE: Cell<bool> = const { Cell::new(false) };
    /// The device's free memory when a measured call entered ([`measured`]).
    static FREE_BEFORE: Cell<Option<u64>> = const { Cell::new(None) };
    /// A context the driver made inside the call this thread is in (the primary
    /// context appears inside the program's first runtime call); that call made it.
    static MADE_CONTEXT: Cell<Option<u64>> = const { Cell::new(None) };
    /// A freeing call this thread is in: its handle, and the object the
    /// handle named when the call entered (the driver may hand the handle to
    /// another thread's new allocation before the call returns).
    static FREEING: Cell<Option<(usize, Option<u64>)>> = const { Cell::new(None) };
    /// The thread's last free of device memory named a pointer (not null)
    /// that no allocation the agent saw made: said with its call.
    static FREED_UNSEEN: Cell<bool> = const { Cell::new(false) };
}

/// What the driver exports under `name`, if the agent watches it: the name
/// without the per-thread-stream suffix, then, for timeline-only calls, without
/// its version.
fn hook_for(name: &str) -> Option<(&'static str, Role)> {
    let name = name
        .strip_suffix("_ptsz")
        .or_else(|| name.strip_suffix("_ptds"))
        .unwrap_or(name);
    let unversioned = match name.rsplit_once("_v") {
        Some((base, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    };
    let found = WATCHED.iter().find(|(n, _)| *n == name).or_else(|| {
        WATCHED
            .iter()
            .find(|(n, e)| *n == unversioned && matches!(e, Call | Launch { .. }))
    });
    match found {
        Some(found) => Some((unversioned_name(found.0), found.1)),
        None => crate::cuda_order::ORDER_ONLY
            .iter()
            .find(|n| **n == unversioned)
            .map(|n| (*n, Order)),
    }
}

/// Whether the agent hooks the driver call CUPTI names `api` (unversioned).
#[cfg(test)]
pub fn watches(api: &str) -> bool {
    WATCHED.iter().any(|(n, _)| unversioned_name(n) == api)
}

/// `cuMemAlloc_v2` -> `cuMemAlloc`: what the program's source says.
fn unversioned_name(name: &'static str) -> &'static str {
    match name.rsplit_once("_v") {
        Some((base, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// Hooks by callback id from (id, name) pairs.
fn table(names: impl IntoIterator<Item = (u32, String)>) -> Vec<Option<Hook>> {
    let mut hooks: Vec<Option<Hook>> = Vec::new();
    for (cbid, name) in names {
        let Some((api, role)) = hook_for(&name) else {
            continue;
        };
        let i = cbid as usize;
        if hooks.len() <= i {
            hooks.resize_with(i + 1, || None);
        }
        // A few dozen names, kept for the life of the process.
        let driver: &'static str = Box::leak(name.into_boxed_str());
        let names = crate::cuda_misuse::names_of(api);
        hooks[i] = Some(Hook {
            api,
            driver,
            role,
            names,
            orders: crate::cuda_order::reads(api),
        });
    }
    hooks
}

/// Called by the CUDA driver inside the program's first `cuInit`. Returns 1
/// (success) in every case: the program must run whether or not it is watched.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> i32 {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if !transport::start() {
            return; // loaded without `gpulab watch`: do nothing
        }
        match subscribe() {
            Ok(()) => transport::attached(Family::Cuda, vec![ObjKind::Context]),
            Err(reason) => transport::unavailable(Family::Cuda, reason),
        }
    });
    1
}

/// A library opened for the rest of the process: it is never closed, since
/// CUPTI calls back through it until the process ends.
struct Library(*mut c_void);

impl Library {
    fn open(path: &str) -> Result<Library, String> {
        let c = CString::new(path).map_err(|_| format!("{path}: not a path"))?;
        // SAFETY: `c` is a valid C string; dlopen has no other precondition.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("cannot load {path}: {}", dl_error()));
        }
        Ok(Library(handle))
    }

    /// The symbol `name` as a function pointer of type `F`.
    ///
    /// # Safety
    /// `F` must be the exact C type of the symbol.
    unsafe fn get<F: Copy>(&self, name: &CStr) -> Result<F, String> {
        // SAFETY: the handle is open; `name` is a C string.
        let sym = unsafe { libc::dlsym(self.0, name.as_ptr()) };
        if sym.is_null() {
            return Err(format!("libcupti has no {}", name.to_string_lossy()));
        }
        debug_assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
        // SAFETY: a non-null symbol of type `F`, by the caller's contract.
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&sym) })
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a C string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-null, NUL-terminated.
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// Opens libcupti, enables the watched callbacks and the context callbacks.
fn subscribe() -> Result<(), String> {
    // A libcupti the program loaded already (PyTorch links its wheel's) is the
    // one to use: two CUPTIs in one process would each refuse the other's
    // subscriber, and the program's profiler would be refused unseen.
    let path = match crate::got::loaded_file("libcupti.so") {
        Some(theirs) => theirs,
        None => std::env::var(CUPTI_ENV).map_err(|_| {
            "no libcupti was found for this program, so its CUDA calls go unseen: \
             install the CUDA toolkit's CUPTI or `pip install nvidia-cuda-cupti`, \
             or give `gpulab watch --cupti PATH`"
                .to_string()
        })?,
    };
    let lib = Library::open(&path)?;
    // SAFETY: the CUPTI API's C types (cupti_callbacks.h, cupti_result.h).
    let (subscribe, enable, name_of, result_string) = unsafe {
        (
            lib.get::<Subscribe>(c"cuptiSubscribe")?,
            lib.get::<EnableCallback>(c"cuptiEnableCallback")?,
            lib.get::<GetCallbackName>(c"cuptiGetCallbackName")?,
            lib.get::<GetResultString>(c"cuptiGetResultString")?,
        )
    };
    let says = |code: i32| {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: `s` is a writable out-pointer.
        if unsafe { result_string(code, &mut s) } == CUPTI_SUCCESS && !s.is_null() {
            // SAFETY: CUPTI returns a static C string.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        } else {
            format!("CUPTI error {code}")
        }
    };

    let names = (1..MAX_CBID).filter_map(|cbid| {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: `s` is a writable out-pointer; an unknown id is an error status.
        let ok = unsafe { name_of(DOMAIN_DRIVER_API, cbid, &mut s) } == CUPTI_SUCCESS;
        (ok && !s.is_null()).then(|| {
            (
                cbid,
                // SAFETY: on success, a static C string.
                unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned(),
            )
        })
    });
    let hooks = HOOKS.get_or_init(|| table(names));
    if hooks.iter().all(Option::is_none) {
        return Err(format!(
            "{path} names none of the driver calls the agent watches"
        ));
    }

    // SAFETY: an optional symbol of CUPTI >= 13.0, of this type.
    let subscribe_v2 = unsafe { lib.get::<SubscribeV2>(c"cuptiSubscribe_v2") }.ok();
    let (subscriber, status, holder) = match subscribe_v2 {
        Some(v2) => named_subscriber(v2),
        None => {
            let mut subscriber: *mut c_void = std::ptr::null_mut();
            // SAFETY: out-pointer and a callback of CUPTI's type; no user data.
            let status = unsafe { subscribe(&mut subscriber, on_cupti, std::ptr::null_mut()) };
            (subscriber, status, None)
        }
    };
    if status != CUPTI_SUCCESS {
        let holder = holder.map_or_else(
            || {
                "another CUPTI client (Nsight Systems, the PyTorch profiler, \
                compute-sanitizer) may already hold it"
                    .to_string()
            },
            |h| format!("{h} holds it"),
        );
        return Err(format!(
            "CUPTI refused a subscriber ({}): {holder}, so the program's CUDA calls go unseen",
            says(status)
        ));
    }
    let ids = hooks
        .iter()
        .enumerate()
        .filter(|(_, h)| h.is_some())
        .map(|(i, _)| (DOMAIN_DRIVER_API, i as u32))
        .chain([
            (DOMAIN_RESOURCE, RESOURCE_CONTEXT_CREATED),
            (DOMAIN_RESOURCE, RESOURCE_CONTEXT_DESTROY_STARTING),
            (DOMAIN_RESOURCE, RESOURCE_MODULE_LOADED),
        ]);
    for (domain, cbid) in ids {
        // SAFETY: a live subscriber and an id CUPTI named.
        let status = unsafe { enable(1, subscriber, domain, cbid) };
        if status != CUPTI_SUCCESS {
            return Err(format!(
                "CUPTI would not enable callback {cbid} of domain {domain}: {}",
                says(status)
            ));
        }
    }
    let spans = std::env::var(SPANS_ENV).is_ok_and(|v| v == "1");
    if spans && let Err(e) = enable_spans(&lib) {
        return Err(format!(
            "device spans: {e} (the calls are still watched without --device-spans)"
        ));
    }
    crate::rival::arm(result_string, spans);
    arm_launches(hooks, enable, subscriber, spans);
    transport::on_tick(tick);
    Ok(())
}

/// Launches watched from now on, turned off and on through CUPTI's launch
/// callbacks ([`crate::launches`]); every one with device spans (each is
/// matched to the launch it came from) or `GPULAB_LAUNCHES=all`.
fn arm_launches(
    hooks: &[Option<Hook>],
    enable: EnableCallback,
    subscriber: *mut c_void,
    spans: bool,
) {
    let launch_ids = hooks
        .iter()
        .enumerate()
        .filter(|(_, h)| h.as_ref().is_some_and(|h| matches!(h.role, Launch { .. })))
        .map(|(i, _)| i as u32)
        .collect();
    let _ = SWITCH.set(LaunchSwitch {
        enable,
        subscriber: subscriber as usize,
        ids: launch_ids,
    });
    let every = std::env::var(LAUNCHES_ENV).is_ok_and(|v| v == "all");
    crate::launches::LAUNCHES.arm(switch_launches, spans || every);
}

/// What turns the launch callbacks on and off: CUPTI's call, the subscriber
/// (an address: CUPTI's handle, valid for the life of the process) and the
/// launch callback ids.
struct LaunchSwitch {
    enable: EnableCallback,
    subscriber: usize,
    ids: Vec<u32>,
}

static SWITCH: OnceLock<LaunchSwitch> = OnceLock::new();

/// Turns CUPTI's launch callbacks on or off; false if CUPTI refused one.
fn switch_launches(on: bool) -> bool {
    let Some(s) = SWITCH.get() else {
        return false;
    };
    s.ids.iter().fold(true, |all, &cbid| {
        // SAFETY: the live subscriber and a driver callback id CUPTI named.
        let status = unsafe {
            (s.enable)(
                u32::from(on),
                s.subscriber as *mut c_void,
                DOMAIN_DRIVER_API,
                cbid,
            )
        };
        all && status == CUPTI_SUCCESS
    })
}

/// The agent thread's regular look: libraries loaded since the last one may
/// bring another CUPTI client; CUPTI's finished activity records go out.
fn tick() {
    crate::rival::look();
    flush_spans();
    crate::launches::LAUNCHES.tick(now_ns());
}

/// `CUpti_SubscriberParams` (cupti_callbacks.h, CUDA 13.0), with the field
/// CUPTI 13.2 added at its end.
#[repr(C)]
struct SubscriberParams {
    struct_size: usize,
    name: *const c_char,
    old_name: *mut c_char,
    old_name_size: usize,
    allow_multiple: u8,
}

/// Subscribes under the name "gpulab watch", so a tool refused after it is told
/// who holds CUPTI, asking CUPTI >= 13.2 to let later subscribers in beside it;
/// if that is refused for another reason than a subscriber already there (an
/// older CUPTI may not take the field), it asks again without it. On a
/// refusal, also the name of the subscriber that holds CUPTI.
fn named_subscriber(v2: SubscribeV2) -> (*mut c_void, i32, Option<String>) {
    let mut old = [0 as c_char; 64];
    let mut status = CUPTI_SUCCESS;
    let mut subscriber: *mut c_void = std::ptr::null_mut();
    let full = size_of::<SubscriberParams>();
    let without_allow = std::mem::offset_of!(SubscriberParams, allow_multiple);
    for struct_size in [without_allow + 1, without_allow] {
        let mut params = SubscriberParams {
            struct_size,
            name: c"gpulab watch".as_ptr(),
            old_name: old.as_mut_ptr(),
            old_name_size: old.len(),
            allow_multiple: 1,
        };
        debug_assert!(struct_size <= full);
        // SAFETY: out-pointer, a callback of CUPTI's type, no user data, and
        // params whose `struct_size` says which fields are there.
        status = unsafe {
            v2(
                &mut subscriber,
                on_cupti,
                std::ptr::null_mut(),
                (&mut params as *mut SubscriberParams).cast(),
            )
        };
        // Held by another subscriber, or taken: asking without the field
        // would change nothing.
        if status == CUPTI_SUCCESS || status == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS {
            break;
        }
    }
    let holder = (old[0] != 0).then(|| {
        // SAFETY: CUPTI wrote a NUL-terminated name into `old` (64 bytes, zeroed).
        unsafe { CStr::from_ptr(old.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    });
    (subscriber, status, holder)
}

/// CUPTI's callback, on the program's thread inside the driver call.
unsafe extern "C" fn on_cupti(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    if data.is_null() {
        return;
    }
    match domain {
        DOMAIN_DRIVER_API => {
            let hook = HOOKS
                .get()
                .and_then(|h| h.get(cbid as usize))
                .and_then(Option::as_ref);
            if let Some(hook) = hook {
                // SAFETY: CUPTI passes a CUpti_CallbackData for this domain.
                let data = unsafe { &*data.cast::<CallbackData>() };
                let entry = data.site == API_ENTER;
                if entry {
                    ENTERED.set(cbid + 1);
                } else if ENTERED.replace(0) != cbid + 1 {
                    return;
                }
                let t0 = crate::cost::callback_begins(entry);
                // SAFETY: as above; the hook is this cbid's.
                unsafe { driver_call(hook, data) };
                crate::cost::callback_ends(t0, entry, matches!(hook.role, Launch { .. }));
            }
        }
        // SAFETY: CUPTI passes a CUpti_ResourceData for this domain.
        DOMAIN_RESOURCE => resource(cbid, unsafe { &*data.cast::<ResourceData>() }),
        _ => {}
    }
}

/// A watched call entered: what it names that the program gave up, what is
/// read before it, and its start.
///
/// # Safety
/// As [`driver_call`].
unsafe fn call_entered(hook: &Hook, data: &CallbackData) {
    MADE_CONTEXT.set(None);
    let params = data.params.cast::<usize>();
    FREEING.set(match hook.role {
        Free(kind) if !params.is_null() => {
            // SAFETY: parameter 0 of a freeing call is the handle.
            let handle = unsafe { *params };
            Some((handle, ledger::cuda_id_of(kind, handle)))
        }
        _ => None,
    });
    let (freeing, stream) = match hook.role {
        Free(kind) => (Some(kind), None),
        // SAFETY: the caller's contract: a launch's parameter block.
        Launch { stream_at } => (None, Some(unsafe { launch_stream(params, stream_at) })),
        _ => (None, None),
    };
    // SAFETY: the caller's contract: this function's parameter block.
    unsafe { crate::cuda_misuse::at_entry(hook.api, hook.names, freeing, stream, params) };
    // SAFETY: the caller's contract: this function's parameter block.
    if let Some(read) = unsafe { read_before(hook.api, params) } {
        transport::read(hook.api, ReadSide::Before, read);
    }
    // SAFETY: the caller's contract: this function's parameter block.
    let measure = unsafe { measured(hook.role, data.params.cast::<usize>()) };
    FIRST_USE.set(measure);
    FREE_BEFORE.set(if measure { device_free() } else { None });
    if !data.correlation_data.is_null() {
        // SAFETY: CUPTI's per-call slot.
        unsafe { *data.correlation_data = now_ns() };
    }
}

/// A watched call entered (keep its start) or returned (record it).
///
/// # Safety
/// `data` is CUPTI's for this call: its parameter block has the layout of the
/// hooked function's parameters, and at exit its out-parameters are written.
unsafe fn driver_call(hook: &Hook, data: &CallbackData) {
    if hook.role == Order {
        // SAFETY: the caller's contract.
        return unsafe { order_only(hook, data) };
    }
    if data.site == API_ENTER {
        // SAFETY: the caller's contract.
        return unsafe { call_entered(hook, data) };
    }
    let first = FIRST_USE.take();
    let status = if data.return_value.is_null() {
        0
    } else {
        // SAFETY: a driver call returns a CUresult, a C enum.
        unsafe { *data.return_value.cast::<i32>() }
    };
    match hook.role {
        Launch { .. } => crate::launches::LAUNCHES.launched(first, now_ns),
        // A module or library made, or a function's code loaded by a call:
        // functions a later launch may run for the first time.
        Make { kind: Program, .. } | Load { .. } if status == 0 && first => {
            crate::launches::LAUNCHES.code_loaded(now_ns());
        }
        _ => {}
    }
    // The device's memory the call took, read on each side of it.
    let before = FREE_BEFORE.take();
    if matches!(hook.role, Load { .. }) && before.is_none() {
        // Not this handle's first load: nothing to say of it.
        return;
    }
    let after = before.and_then(|_| relaxed(device_memory_now));
    let step = before
        .zip(after)
        .map(|(before, (free, _))| before as i64 - free as i64);
    let begin = if data.correlation_data.is_null() {
        now_ns()
    } else {
        // SAFETY: the slot the enter callback wrote.
        unsafe { *data.correlation_data }
    };
    let params = data.params.cast::<usize>();
    let done = status == 0 && !params.is_null();
    // Asked only of a call that succeeded.
    // SAFETY: the caller's contract: this function's parameter block.
    let object = if !done || unsafe { in_capture(hook.api, params) } {
        None
    } else {
        // SAFETY: the caller's contract; `role` matches this function.
        unsafe { apply(hook.api, hook.role, params, data.context) }
    };
    if hook.orders {
        // SAFETY: the caller's contract: this function's parameter block.
        unsafe { crate::cuda_order::at_return(hook.api, params, object, status) };
    }
    let object = object.or_else(|| MADE_CONTEXT.take());
    crate::cuda_misuse::at_return(status);
    let freed_unseen = FREED_UNSEEN.take();
    let name = (status != 0).then(|| error_name(status)).flatten();
    let refused = (status == CUDA_ERROR_OUT_OF_MEMORY).then(|| {
        Box::new(Refused {
            // SAFETY: the caller's contract; `role` matches this function.
            asked: unsafe { asked_bytes(hook.role, params) },
            free: device_free(),
            stack: crate::stack::capture(Buffer),
            stack_id: None,
        })
    });
    let pool = pool_due(hook.api, status)
        .then(|| relaxed(pool_memory))
        .flatten();
    let seq = transport::call_measured(
        hook.api,
        hook.driver,
        begin,
        Status::Cuda { code: status, name },
        object,
        step,
        freed_unseen,
        refused,
        pool.map(Box::new),
    );
    // SAFETY: the caller's contract: this function's parameter block.
    let made = (status == 0)
        .then(|| unsafe { read_after(hook.api, params) })
        .flatten();
    if let Some(read) = after.or(made) {
        transport::read(hook.api, ReadSide::After, read);
    }
    if let (Launch { stream_at }, Some(_), 0) = (hook.role, ACTIVITY.get(), status) {
        // SAFETY: the caller's contract: a launch's parameter block.
        let stream = unsafe { launch_stream(params, stream_at) };
        launched(data.correlation_id, seq, begin, stream);
    }
}

/// A call read for the streams' order only, at its return.
///
/// # Safety
/// As [`driver_call`].
unsafe fn order_only(hook: &Hook, data: &CallbackData) {
    if data.site != API_ENTER && !data.return_value.is_null() {
        // SAFETY: a driver call returns a CUresult; the block is this
        // function's.
        unsafe {
            let status = *data.return_value.cast::<i32>();
            crate::cuda_order::at_return(hook.api, data.params.cast(), None, status);
        }
    }
}

/// Whether the device's memory is read on each side of this call: calls that
/// make a module, library or stream (their making call says no size, and a
/// sampler reading rarely falls on each side of one: NCCL makes a hundred at
/// once), and the first launch or other first use ([`Role::Load`]) of each
/// function or library, which loads its code where the driver loads modules
/// lazily (the default since CUDA 12.2). Contexts are
/// not: before one exists there is nothing to ask, and the sampler measures
/// their hundreds of milliseconds well.
///
/// # Safety
/// `params` is null or the parameter block of a call with `role`'s layout.
unsafe fn measured(role: Role, params: *const usize) -> bool {
    /// Functions and libraries launched or loaded in the process so far.
    static LAUNCHED: Mutex<Option<HashSet<usize>>> = Mutex::new(None);
    thread_local! {
        /// Those this thread knows were: a launch takes the process's lock
        /// only the first time its thread launches a function.
        static KNOWN: std::cell::RefCell<HashSet<usize>> =
            std::cell::RefCell::new(HashSet::new());
    }
    let function = match role {
        Make { kind, .. } => return matches!(kind, Program | Stream),
        _ if params.is_null() => return false,
        // SAFETY: the function is parameter 0 of cuLaunchKernel and
        // cuLaunchCooperativeKernel, parameter 1 of cuLaunchKernelEx.
        Launch { stream_at } => unsafe {
            match stream_at {
                StreamAt::Param(_) => *params,
                StreamAt::Config(_) => *params.add(1),
            }
        },
        // SAFETY: the caller's contract: the handle is this parameter.
        Load { handle_at } => unsafe { *params.add(handle_at) },
        _ => return false,
    };
    // After the thread's locals are gone (a launch from a static destructor
    // at exit), the process's set alone answers.
    if KNOWN
        .try_with(|k| !k.borrow_mut().insert(function))
        .unwrap_or(false)
    {
        return false;
    }
    let mut seen = LAUNCHED.lock().unwrap_or_else(|e| e.into_inner());
    seen.get_or_insert_with(HashSet::new).insert(function)
}

/// How often at most the pool is read between a program's synchronisations.
/// Read at every allocation and free from it (`cuMemGetInfo` and six more
/// queries each time), a `cudaMallocAsync` + `cudaFreeAsync` pair of 256 B cost
/// 24 µs watched on the H200, against 1.1 µs bare.
const POOL_EVERY_NS: u64 = 1_000_000;
/// When the pool was last read, and whether a change since is still unread.
static POOL_READ_AT: AtomicU64 = AtomicU64::new(0);
static POOL_OWED: AtomicBool = AtomicBool::new(false);

/// Whether this call reads the pool ([`pool_memory`]): a synchronisation or a
/// trim at which it may have moved, always; an allocation or free from it, or
/// any later call while one is unread, once [`POOL_EVERY_NS`] has passed since
/// the last read. So the figures a call carries are never more than that
/// older than the pool, and a program's synchronisation reads it exactly.
fn pool_due(api: &str, status: i32) -> bool {
    let moved = pool_moved(api, status);
    if !moved && !POOL_OWED.load(Ordering::Relaxed) {
        return false;
    }
    let always = moved && pool_settles(api);
    let now = crate::clock::now_ns();
    if read_due(always, now, POOL_READ_AT.load(Ordering::Relaxed)) {
        POOL_READ_AT.store(now, Ordering::Relaxed);
        POOL_OWED.store(false, Ordering::Relaxed);
        true
    } else {
        POOL_OWED.store(true, Ordering::Relaxed);
        false
    }
}

/// Whether a read is due: always at a synchronisation or a trim, else once
/// [`POOL_EVERY_NS`] has passed since the last (`last_ns`).
fn read_due(always: bool, now_ns: u64, last_ns: u64) -> bool {
    always || now_ns.saturating_sub(last_ns) >= POOL_EVERY_NS
}

/// The calls after which the pool holds what it will hold: synchronisations
/// (where it gives memory above its threshold back) and trims.
fn pool_settles(api: &str) -> bool {
    synchronises(api) || matches!(api, "cuMemPoolTrimTo" | "cuDeviceGraphMemTrim")
}

/// The synchronisations at which a pool gives memory above its threshold back.
fn synchronises(api: &str) -> bool {
    matches!(
        api,
        "cuStreamSynchronize" | "cuCtxSynchronize" | "cuEventSynchronize"
    )
}

/// Whether the device's stream-ordered pool may have changed what it holds
/// in this call, once the program has used it (its first successful
/// `cuMemAllocAsync`): allocations and frees from it, a trim, and the
/// synchronisations at which it gives memory above its threshold back.
///
/// The same for the device's graph memory, once the program launched a graph
/// (its memory nodes allocate from it): at each launch, a trim and the
/// synchronisations.
fn pool_moved(api: &str, status: i32) -> bool {
    static POOLED: AtomicBool = AtomicBool::new(false);
    static GRAPHED: AtomicBool = AtomicBool::new(false);
    if status == 0 {
        match api {
            "cuMemAllocAsync" => POOLED.store(true, Ordering::Relaxed),
            "cuGraphLaunch" => GRAPHED.store(true, Ordering::Relaxed),
            _ => {}
        }
    }
    let syncs = synchronises(api);
    (POOLED.load(Ordering::Relaxed)
        && (syncs
            || matches!(
                api,
                "cuMemAllocAsync" | "cuMemFreeAsync" | "cuMemPoolTrimTo"
            )))
        || (GRAPHED.load(Ordering::Relaxed)
            && (syncs || matches!(api, "cuGraphLaunch" | "cuDeviceGraphMemTrim")))
}

/// The calling thread's device's current pool (the one `cuMemAllocAsync`
/// takes from) and its graph memory: what each holds from the device and
/// what of it is handed out, with the device's free memory; None without a
/// context or such calls.
fn pool_memory() -> Option<CudaMemory> {
    type CtxGetDevice = unsafe extern "C" fn(*mut i32) -> i32;
    type DeviceGetMemPool = unsafe extern "C" fn(*mut *mut c_void, i32) -> i32;
    type PoolGetAttribute = unsafe extern "C" fn(*mut c_void, i32, *mut c_void) -> i32;
    type MemGetInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> i32;
    type GraphMemAttribute = unsafe extern "C" fn(i32, i32, *mut c_void) -> i32;
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`, `CU_MEMPOOL_ATTR_USED_MEM_CURRENT` (cuda.h).
    const RESERVED: i32 = 5;
    const USED: i32 = 7;
    /// `CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT`, `CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT`.
    const GRAPH_USED: i32 = 0;
    const GRAPH_RESERVED: i32 = 2;
    type Calls = (
        CtxGetDevice,
        DeviceGetMemPool,
        PoolGetAttribute,
        MemGetInfo,
        GraphMemAttribute,
    );
    static CALLS: OnceLock<Option<Calls>> = OnceLock::new();
    let (device_of, pool_of, attribute, info, graph) = (*CALLS.get_or_init(|| {
        let syms = [
            driver_symbol(c"cuCtxGetDevice"),
            driver_symbol(c"cuDeviceGetMemPool"),
            driver_symbol(c"cuMemPoolGetAttribute"),
            driver_symbol(c"cuMemGetInfo_v2"),
            driver_symbol(c"cuDeviceGetGraphMemAttribute"),
        ];
        if syms.iter().any(|s| s.is_null()) {
            return None;
        }
        // SAFETY: the five functions' C types (cuda.h).
        unsafe {
            Some((
                std::mem::transmute_copy::<*mut c_void, CtxGetDevice>(&syms[0]),
                std::mem::transmute_copy::<*mut c_void, DeviceGetMemPool>(&syms[1]),
                std::mem::transmute_copy::<*mut c_void, PoolGetAttribute>(&syms[2]),
                std::mem::transmute_copy::<*mut c_void, MemGetInfo>(&syms[3]),
                std::mem::transmute_copy::<*mut c_void, GraphMemAttribute>(&syms[4]),
            ))
        }
    }))?;
    let (mut graph_reserved, mut graph_used) = (0u64, 0u64);
    let mut device = 0i32;
    let mut pool: *mut c_void = std::ptr::null_mut();
    let (mut reserved, mut used) = (0u64, 0u64);
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: out-pointers of the types each call writes; the pool is the
    // one the driver just named.
    let ok = unsafe {
        device_of(&mut device) == 0
            && pool_of(&mut pool, device) == 0
            && attribute(pool, RESERVED, (&raw mut reserved).cast()) == 0
            && attribute(pool, USED, (&raw mut used).cast()) == 0
            && info(&mut free, &mut total) == 0
    };
    // SAFETY: as above; the device the driver named.
    let graphs = unsafe {
        graph(device, GRAPH_RESERVED, (&raw mut graph_reserved).cast()) == 0
            && graph(device, GRAPH_USED, (&raw mut graph_used).cast()) == 0
    };
    ok.then_some(CudaMemory {
        pool_reserved: reserved,
        pool_used: used,
        free: free as u64,
        total: total as u64,
        custom_pool: None,
        graph_mem: graphs.then_some(PoolMemory {
            reserved: graph_reserved,
            used: graph_used,
        }),
    })
}

/// Whether a stream-ordered allocation or free was captured into a graph
/// rather than done: a `cuMemAllocAsync` on a capturing stream makes a graph
/// node, not memory (the graph's memory is a share of its own), so it makes
/// no object and its free frees none.
///
/// # Safety
/// `params` is null or the parameter block of the function named `api`.
unsafe fn in_capture(api: &str, params: *const usize) -> bool {
    type IsCapturing = unsafe extern "C" fn(usize, *mut i32) -> i32;
    // cuMemAllocAsync(dptr*, bytesize, hStream), cuMemFreeAsync(dptr, hStream).
    let at = match api {
        "cuMemAllocAsync" => 2,
        "cuMemFreeAsync" => 1,
        _ => return false,
    };
    if params.is_null() {
        return false;
    }
    static IS: OnceLock<Option<IsCapturing>> = OnceLock::new();
    let is = IS.get_or_init(|| {
        let sym = driver_symbol(c"cuStreamIsCapturing");
        // SAFETY: cuStreamIsCapturing's C type (cuda.h).
        (!sym.is_null())
            .then(|| unsafe { std::mem::transmute_copy::<*mut c_void, IsCapturing>(&sym) })
    });
    let Some(is) = is else { return false };
    // SAFETY: the stream is parameter `at` of these calls.
    let stream = unsafe { *params.add(at) };
    let mut state = 0i32;
    // SAFETY: a capture-safe query of the program's own stream; `state` is
    // writable. CU_STREAM_CAPTURE_STATUS_NONE is 0.
    (unsafe { is(stream, &mut state) }) == 0 && state != 0
}

/// Runs the agent's own driver reads with the calling thread's stream capture
/// mode relaxed, then puts the program's mode back. Inside a stream capture
/// in the default global mode a query such as `cuMemGetInfo` is a
/// "potentially unsafe" call: it invalidated the program's capture (seen on
/// the H100: `graph_keep.cu` exited 1 under watch, 0 bare). The relaxed mode
/// is what libraries that query during a capture set (cuda.h,
/// `cuThreadExchangeStreamCaptureMode`).
fn relaxed<T>(read: impl FnOnce() -> T) -> T {
    type Exchange = unsafe extern "C" fn(*mut i32) -> i32;
    /// `CU_STREAM_CAPTURE_MODE_RELAXED`.
    const RELAXED: i32 = 2;
    static EXCHANGE: OnceLock<Option<Exchange>> = OnceLock::new();
    let exchange = EXCHANGE.get_or_init(|| {
        let sym = driver_symbol(c"cuThreadExchangeStreamCaptureMode");
        // SAFETY: cuThreadExchangeStreamCaptureMode's C type (cuda.h).
        (!sym.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, Exchange>(&sym) })
    });
    let Some(exchange) = exchange else {
        // A driver without captures has nothing to protect.
        return read();
    };
    let mut mode = RELAXED;
    // SAFETY: a writable mode; it receives the program's own.
    let swapped = unsafe { exchange(&mut mode) } == 0;
    let out = read();
    if swapped {
        // SAFETY: as above: the program's mode goes back.
        unsafe { exchange(&mut mode) };
    }
    out
}

/// The device's free memory (`cuMemGetInfo` in the calling thread's context);
/// None without a context or where the driver has no such call. Read with
/// the thread's capture mode relaxed ([`relaxed`]).
fn device_free() -> Option<u64> {
    relaxed(device_memory_now).map(|(free, _)| free)
}

/// The device's free and total memory in the calling thread's context.
fn device_memory_now() -> Option<(u64, u64)> {
    type MemGetInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> i32;
    static GET: OnceLock<Option<MemGetInfo>> = OnceLock::new();
    let get = GET.get_or_init(|| {
        let sym = driver_symbol(c"cuMemGetInfo_v2");
        // SAFETY: cuMemGetInfo_v2's C type (cuda.h).
        (!sym.is_null())
            .then(|| unsafe { std::mem::transmute_copy::<*mut c_void, MemGetInfo>(&sym) })
    });
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: two writable out-pointers.
    (unsafe { (*get)?(&mut free, &mut total) } == 0).then_some((free as u64, total as u64))
}

/// [`device_memory_now`] in context `ctx`, made current for the read and
/// the thread's own current context put back after it.
fn device_memory_in(ctx: usize) -> Option<(u64, u64)> {
    type Push = unsafe extern "C" fn(usize) -> i32;
    type Pop = unsafe extern "C" fn(*mut usize) -> i32;
    static CALLS: OnceLock<Option<(Push, Pop)>> = OnceLock::new();
    let (push, pop) = (*CALLS.get_or_init(|| {
        let (push, pop) = (
            driver_symbol(c"cuCtxPushCurrent_v2"),
            driver_symbol(c"cuCtxPopCurrent_v2"),
        );
        // SAFETY: the two functions' C types (cuda.h).
        (!push.is_null() && !pop.is_null()).then(|| unsafe {
            (
                std::mem::transmute_copy::<*mut c_void, Push>(&push),
                std::mem::transmute_copy::<*mut c_void, Pop>(&pop),
            )
        })
    }))?;
    if ctx == 0 {
        return None;
    }
    // SAFETY: a context the driver just named for this call; pushed, it is
    // popped again before the program runs on.
    if unsafe { push(ctx) } != 0 {
        return None;
    }
    let read = relaxed(device_memory_now);
    let mut popped = 0usize;
    // SAFETY: a writable out-pointer; pops the context pushed above.
    unsafe { pop(&mut popped) };
    read
}

/// The device's memory right before a call that ends a context's life
/// (or may: a release of the primary context), read in that context: the
/// last moment the program's memory holds it, which no sample may fall on
/// before the call gives it back.
///
/// # Safety
/// `params` is null or the parameter block of the function named `api`.
unsafe fn read_before(api: &str, params: *const usize) -> Option<(u64, u64)> {
    if params.is_null() {
        return None;
    }
    match api {
        // SAFETY: cuCtxDestroy(ctx).
        "cuCtxDestroy" => device_memory_in(unsafe { *params }),
        "cuDevicePrimaryCtxReset" | "cuDevicePrimaryCtxRelease" => {
            // SAFETY: parameter 0 is the CUdevice, an int.
            let device = unsafe { *params.cast::<i32>() };
            (current_device() == Some(device))
                .then(|| relaxed(device_memory_now))
                .flatten()
        }
        _ => None,
    }
}

/// The device's memory right after a call made a context: what the context
/// took, read before the program's next call (a short program destroys it
/// milliseconds later, between two samples).
///
/// # Safety
/// `params` is null or the parameter block of the function named `api`,
/// which succeeded.
unsafe fn read_after(api: &str, params: *const usize) -> Option<(u64, u64)> {
    if params.is_null() {
        return None;
    }
    match api {
        // The new context is the thread's current one.
        "cuCtxCreate" => relaxed(device_memory_now),
        "cuDevicePrimaryCtxRetain" => {
            // SAFETY: cuDevicePrimaryCtxRetain(CUcontext *pctx, dev): the
            // context the call wrote through parameter 0, when not null.
            let out = unsafe { *params } as *const usize;
            // SAFETY: as above.
            (!out.is_null())
                .then(|| device_memory_in(unsafe { *out }))
                .flatten()
        }
        _ => None,
    }
}

/// The device of the calling thread's current context.
fn current_device() -> Option<i32> {
    type CtxGetDevice = unsafe extern "C" fn(*mut i32) -> i32;
    static GET: OnceLock<Option<CtxGetDevice>> = OnceLock::new();
    let get = GET.get_or_init(|| {
        let sym = driver_symbol(c"cuCtxGetDevice");
        // SAFETY: cuCtxGetDevice's C type (cuda.h).
        (!sym.is_null())
            .then(|| unsafe { std::mem::transmute_copy::<*mut c_void, CtxGetDevice>(&sym) })
    });
    let mut device = 0i32;
    // SAFETY: a writable out-pointer.
    (unsafe { (*get)?(&mut device) } == 0).then_some(device)
}

/// The stream a launch named (0: the default stream).
///
/// # Safety
/// `params` is null or the parameter block of a launch with this layout.
unsafe fn launch_stream(params: *const usize, at: StreamAt) -> usize {
    if params.is_null() {
        return 0;
    }
    let bytes = params.cast::<u8>();
    match at {
        // SAFETY: the stream handle is at this offset of the block.
        StreamAt::Param(off) => unsafe { bytes.add(off).cast::<usize>().read_unaligned() },
        StreamAt::Config(off) => {
            // SAFETY: parameter 0 is the launch config pointer.
            let config = unsafe { *params } as *const u8;
            if config.is_null() {
                0
            } else {
                // SAFETY: the config's stream handle is at this offset.
                unsafe { config.add(off).cast::<usize>().read_unaligned() }
            }
        }
    }
}

/// The bytes an allocating call asked for, from its parameters.
///
/// # Safety
/// `params` is null or the parameter block of a function with this role.
unsafe fn asked_bytes(role: Role, params: *const usize) -> Option<u64> {
    if params.is_null() {
        return None;
    }
    match role {
        Make {
            size: Size::At(n), ..
        } => {
            // SAFETY: parameter `n` is a size_t after pointer-sized ones.
            let bytes = unsafe { *params.add(n) };
            Some(bytes as u64)
        }
        Make {
            size: Size::Pitch, ..
        } => {
            // SAFETY: cuMemAllocPitch's (dptr*, pitch*, width, height, ...);
            // the pitch is not written when the call fails: width times height.
            let (width, height) = unsafe { (*params.add(2), *params.add(3)) };
            Some((width as u64).saturating_mul(height as u64))
        }
        _ => None,
    }
}

/// What a successful call did to the ledger.
///
/// # Safety
/// `params` points to the parameter block of a function with this role.
unsafe fn apply(api: &str, role: Role, params: *const usize, context: *mut c_void) -> Option<u64> {
    match role {
        Make { kind, size } => {
            // SAFETY: parameter 0 of a creating call is the out-pointer.
            let out = unsafe { *params } as *const usize;
            if out.is_null() {
                return None;
            }
            // SAFETY: the driver wrote the new handle there before returning.
            let handle = unsafe { *out };
            let bytes = match size {
                Size::None => 0,
                // SAFETY: parameter `n` is a size_t after pointer-sized ones.
                Size::At(n) => (unsafe { *params.add(n) }) as u64,
                Size::Pitch => {
                    // SAFETY: cuMemAllocPitch's (dptr*, pitch*, width, height, ...).
                    let (pitch, height) =
                        unsafe { (*params.add(1) as *const usize, *params.add(3)) };
                    if pitch.is_null() {
                        0
                    } else {
                        // SAFETY: the driver wrote the pitch.
                        (unsafe { *pitch } as u64).saturating_mul(height as u64)
                    }
                }
            };
            let refs = ledger::cuda_id_of(ObjKind::Context, context as usize)
                .into_iter()
                .collect();
            Some(
                if matches!(api, "cuMemAllocAsync" | "cuMemAllocFromPoolAsync") {
                    ledger::cuda_created_ordered(kind, handle, bytes, refs)
                } else {
                    ledger::cuda_created(kind, handle, bytes, refs)
                },
            )
        }
        Free(kind) => {
            // SAFETY: parameter 0 of a freeing call is the handle.
            let handle = unsafe { *params };
            // The object the handle named when the call entered; without an
            // enter (a test), the one it names now.
            let id = match FREEING.take() {
                Some((h, id)) if h == handle => id,
                _ => ledger::cuda_id_of(kind, handle),
            };
            // Kept as gone where a later call may name it as the program's:
            // a stream, an event, memory freed by its address.
            let remember = matches!(kind, Stream | Event)
                || (kind == Buffer && matches!(api, "cuMemFree" | "cuMemFreeAsync"));
            let released = ledger::cuda_released_as(kind, handle, id, remember);
            if released.is_none() && kind == Buffer && handle != 0 {
                FREED_UNSEEN.set(true);
            }
            released
        }
        Call | Launch { .. } | Load { .. } | Order => None,
    }
}

/// A context was made or is about to be destroyed.
fn resource(cbid: u32, data: &ResourceData) {
    let ctx = data.context as usize;
    match cbid {
        RESOURCE_CONTEXT_CREATED => {
            let id = ledger::cuda_created(ObjKind::Context, ctx, 0, Vec::new());
            MADE_CONTEXT.set(Some(id));
        }
        RESOURCE_CONTEXT_DESTROY_STARTING => {
            if let Some(id) = ledger::cuda_released(ObjKind::Context, ctx) {
                ledger::destroyed(id, ObjKind::Context, 0);
            }
        }
        // Where the driver loads lazily, inside the first launch of one of
        // the module's functions.
        RESOURCE_MODULE_LOADED => crate::launches::LAUNCHES.code_loaded(now_ns()),
        _ => {}
    }
}

/// CUPTI's activity API, when device spans are on.
struct Activity {
    next: GetNextRecord,
    flush: FlushAll,
    /// Added to CUPTI's timestamps to get CLOCK_MONOTONIC: 0 when CUPTI takes
    /// the agent's clock.
    offset: i64,
    /// The process that set CUPTI up. A child it forks without exec inherits
    /// the agent's `atexit` handler (and its span flushes) but not a CUDA of
    /// its own: the agent flushes nothing there (the program's children
    /// leave as they would bare; `children_forked_by_a_cuda_program_exit_as_
    /// they_do_bare` on the device).
    pid: libc::pid_t,
}

static ACTIVITY: OnceLock<Activity> = OnceLock::new();

/// CUPTI's activity API, in the process that set it up only.
fn activity() -> Option<&'static Activity> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    ACTIVITY.get().filter(|a| a.pid == pid)
}

/// A launch waiting for its kernel's activity record.
struct PendingLaunch {
    seq: u64,
    queued_ns: u64,
    stream: usize,
}

static LAUNCHES: Mutex<Option<HashMap<u32, PendingLaunch>>> = Mutex::new(None);

fn launched(correlation: u32, seq: u64, queued_ns: u64, stream: usize) {
    let mut guard = LAUNCHES.lock().unwrap_or_else(|e| e.into_inner());
    let pending = guard.get_or_insert_with(HashMap::new);
    if pending.len() >= MAX_PENDING_LAUNCHES {
        pending.clear();
    }
    pending.insert(
        correlation,
        PendingLaunch {
            seq,
            queued_ns,
            stream,
        },
    );
}

unsafe extern "C" fn agent_clock() -> u64 {
    now_ns()
}

/// Turns on kernel activity records. Called while subscribing, inside `cuInit`.
fn enable_spans(lib: &Library) -> Result<(), String> {
    // SAFETY: the CUPTI activity API's C types (cupti_activity.h).
    let (register, enable, next, flush) = unsafe {
        (
            lib.get::<RegisterCallbacks>(c"cuptiActivityRegisterCallbacks")?,
            lib.get::<ActivityEnable>(c"cuptiActivityEnable")?,
            lib.get::<GetNextRecord>(c"cuptiActivityGetNextRecord")?,
            lib.get::<FlushAll>(c"cuptiActivityFlushAll")?,
        )
    };
    // CUPTI's timestamps in the agent's clock if it takes one, else an offset.
    // SAFETY: as above; an optional symbol.
    let offset =
        match unsafe { lib.get::<RegisterTimestamp>(c"cuptiActivityRegisterTimestampCallback") } {
            // SAFETY: a function of the callback's type.
            Ok(register_clock) if unsafe { register_clock(agent_clock) } == CUPTI_SUCCESS => 0,
            _ => {
                // SAFETY: as above.
                let get = unsafe { lib.get::<GetTimestamp>(c"cuptiGetTimestamp")? };
                let mut t = 0u64;
                // SAFETY: `t` is a writable out-pointer.
                if unsafe { get(&mut t) } != CUPTI_SUCCESS {
                    return Err("cuptiGetTimestamp failed".into());
                }
                now_ns() as i64 - t as i64
            }
        };
    let _ = ACTIVITY.set(Activity {
        next,
        flush,
        offset,
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() },
    });
    // SAFETY: callbacks of CUPTI's types.
    if unsafe { register(buffer_requested, buffer_completed) } != CUPTI_SUCCESS {
        return Err("cuptiActivityRegisterCallbacks failed".into());
    }
    // SAFETY: plain enum arguments.
    if unsafe { enable(ACTIVITY_KIND_CONCURRENT_KERNEL) } != CUPTI_SUCCESS {
        return Err("cuptiActivityEnable(CONCURRENT_KERNEL) failed".into());
    }
    // Before the runtime's own exit handlers (registered earlier, run later),
    // while CUDA still works: the last spans go out.
    // SAFETY: registers a plain function.
    unsafe { libc::atexit(flush_at_exit) };
    Ok(())
}

fn buffer_layout() -> Layout {
    // 8-byte alignment is what CUPTI asks of activity buffers.
    Layout::from_size_align(ACTIVITY_BUFFER, 8).unwrap_or(Layout::new::<u64>())
}

unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let layout = buffer_layout();
    // SAFETY: a non-zero-sized layout; CUPTI's out-pointers.
    unsafe {
        let b = std::alloc::alloc(layout);
        *buffer = b;
        *size = if b.is_null() { 0 } else { layout.size() };
        *max = 0;
    }
}

unsafe extern "C" fn buffer_completed(
    _context: *mut c_void,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    if let Some(a) = ACTIVITY.get() {
        let mut record: *mut u8 = std::ptr::null_mut();
        // SAFETY: CUPTI walks the `valid` bytes of its own buffer.
        while unsafe { (a.next)(buffer, valid, &mut record) } == CUPTI_SUCCESS && !record.is_null()
        {
            // SAFETY: a record CUPTI just returned from this buffer.
            if let Some(span) = unsafe { kernel_span(record, a.offset) } {
                transport::span(span);
            }
        }
    }
    // SAFETY: allocated by `buffer_requested` with this layout.
    unsafe { std::alloc::dealloc(buffer, buffer_layout()) };
}

/// A kernel activity record as a device span of the launch it came from. The
/// kernel record's first fields have kept their offsets since
/// `CUpti_ActivityKernel4` (CUDA 13.0's is `CUpti_ActivityKernel10`).
///
/// # Safety
/// `record` points to a whole activity record.
unsafe fn kernel_span(record: *const u8, offset: i64) -> Option<DeviceSpan> {
    // SAFETY: every record starts with its kind; a kernel record has the fields
    // read below at these offsets (packed).
    let (kind, start, end, correlation, name) = unsafe {
        (
            record.cast::<u32>().read_unaligned(),
            record.add(16).cast::<u64>().read_unaligned(),
            record.add(24).cast::<u64>().read_unaligned(),
            record.add(92).cast::<u32>().read_unaligned(),
            record.add(104).cast::<*const c_char>().read_unaligned(),
        )
    };
    if kind != ACTIVITY_KIND_CONCURRENT_KERNEL && kind != ACTIVITY_KIND_KERNEL {
        return None;
    }
    if start == 0 || end < start {
        return None; // CUPTI could not time it
    }
    let launch = LAUNCHES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .and_then(|p| p.remove(&correlation))?;
    let name = if name.is_null() {
        "kernel".to_string()
    } else {
        // SAFETY: CUPTI's NUL-terminated kernel name, valid during the callback.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    };
    let (queue, queue_name) = match ledger::cuda_id_of(ObjKind::Stream, launch.stream) {
        // Named as the reports name objects: `#n`, the id within its process.
        Some(id) => (id, Some(format!("stream #{}", id & 0xffff_ffff))),
        // Id 0 within this process: the process still shows in the upper half.
        None => (
            u64::from(transport::pid().unwrap_or(0)) << 32,
            Some("default stream".to_string()),
        ),
    };
    let shift = |t: u64| (t as i64).saturating_add(offset).max(0) as u64;
    Some(DeviceSpan {
        queue,
        queue_name,
        name,
        call_seq: launch.seq,
        line: None,
        queued_ns: launch.queued_ns,
        begin_ns: shift(start),
        end_ns: shift(end),
    })
}

/// Asks CUPTI for the activity records it holds (the agent thread does, every
/// `SPAN_FLUSH_EVERY`, so spans appear while the program runs).
pub fn flush_spans() {
    if let Some(a) = activity() {
        // SAFETY: a plain flag argument.
        unsafe { (a.flush)(0) };
    }
}

extern "C" fn flush_at_exit() {
    if let Some(a) = activity() {
        // SAFETY: a plain flag argument; CUDA is still up in an atexit handler.
        unsafe { (a.flush)(ACTIVITY_FLAG_FLUSH_FORCED) };
    }
}

/// The driver's own name for a `CUresult` (`CUDA_ERROR_OUT_OF_MEMORY`): a
/// string the driver keeps for the life of the process.
fn error_name(code: i32) -> Option<&'static str> {
    static GET: OnceLock<Option<GetErrorName>> = OnceLock::new();
    let get = GET.get_or_init(|| {
        let sym = driver_symbol(c"cuGetErrorName");
        // SAFETY: cuGetErrorName's C type (cuda.h).
        (!sym.is_null())
            .then(|| unsafe { std::mem::transmute_copy::<*mut c_void, GetErrorName>(&sym) })
    });
    let mut s: *const c_char = std::ptr::null();
    // SAFETY: `s` is a writable out-pointer.
    if unsafe { (*get)?(code, &mut s) } != 0 || s.is_null() {
        return None;
    }
    // SAFETY: the driver returns a static, NUL-terminated C string.
    unsafe { CStr::from_ptr::<'static>(s) }.to_str().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synchronisation or a trim reads the pool at once; an allocation or a
    /// free, once a millisecond has passed since the last read.
    #[test]
    fn the_pool_is_read_at_every_settling_call_and_else_once_a_millisecond() {
        assert!(read_due(true, 10, 10));
        assert!(!read_due(false, 10 + POOL_EVERY_NS - 1, 10));
        assert!(read_due(false, 10 + POOL_EVERY_NS, 10));
        // A clock that went back reads nothing early.
        assert!(!read_due(false, 5, 10));
        for api in [
            "cuStreamSynchronize",
            "cuCtxSynchronize",
            "cuEventSynchronize",
            "cuMemPoolTrimTo",
            "cuDeviceGraphMemTrim",
        ] {
            assert!(pool_settles(api), "{api}");
        }
        for api in [
            "cuMemAllocAsync",
            "cuMemFreeAsync",
            "cuGraphLaunch",
            "cuLaunchKernel",
        ] {
            assert!(!pool_settles(api), "{api}");
        }
    }

    #[test]
    fn code_is_measured_at_each_handles_first_use_alone() {
        assert_eq!(
            hook_for("cuKernelSetAttribute"),
            Some(("cuKernelSetAttribute", Load { handle_at: 1 }))
        );
        assert_eq!(
            hook_for("cuModuleGetGlobal_v2"),
            Some(("cuModuleGetGlobal", Load { handle_at: 2 }))
        );
        // cuKernelSetAttribute(attrib, val, kernel, dev): two ints, then the
        // kernel, as CUPTI lays the parameters out.
        let kernel: usize = 0x5eed_0001;
        let block: [usize; 3] = [7 | (1 << 32), kernel, 0];
        let set = Load { handle_at: 1 };
        // SAFETY: a block of this layout.
        assert!(unsafe { measured(set, block.as_ptr()) }, "first use");
        // SAFETY: as above.
        assert!(!unsafe { measured(set, block.as_ptr()) }, "loaded already");
        // The same kernel's first launch loads nothing more: not read again.
        let mut launch = [0usize; 8];
        launch[0] = kernel;
        let at = Launch {
            stream_at: StreamAt::Param(40),
        };
        // SAFETY: a launch's block.
        assert!(!unsafe { measured(at, launch.as_ptr()) });
        // SAFETY: a null block is never read.
        assert!(!unsafe { measured(set, std::ptr::null()) });
    }

    #[test]
    fn a_refused_allocation_says_the_bytes_it_asked_for() {
        let alloc = Make {
            kind: Buffer,
            size: Size::At(1),
        };
        let block: [usize; 2] = [0, 8 << 30];
        // SAFETY: cuMemAlloc's block: (dptr*, bytesize).
        assert_eq!(unsafe { asked_bytes(alloc, block.as_ptr()) }, Some(8 << 30));
        let pitch = Make {
            kind: Buffer,
            size: Size::Pitch,
        };
        let block: [usize; 5] = [0, 0, 1000, 3, 4];
        // SAFETY: cuMemAllocPitch's block; the pitch pointer is not read.
        assert_eq!(unsafe { asked_bytes(pitch, block.as_ptr()) }, Some(3000));
        // SAFETY: a null block is never read.
        assert_eq!(unsafe { asked_bytes(alloc, std::ptr::null()) }, None);
        assert_eq!(
            // SAFETY: a stream's making call says no size.
            unsafe {
                asked_bytes(
                    Make {
                        kind: Stream,
                        size: Size::None,
                    },
                    block.as_ptr(),
                )
            },
            None
        );
    }

    #[test]
    fn names_match_by_exact_version_for_objects_and_any_version_for_the_timeline() {
        assert_eq!(
            hook_for("cuMemAlloc_v2"),
            Some((
                "cuMemAlloc",
                Make {
                    kind: Buffer,
                    size: Size::At(1)
                }
            ))
        );
        // Version 1 took 32-bit sizes: its parameters are not read.
        assert_eq!(hook_for("cuMemAlloc"), None);
        assert_eq!(
            hook_for("cuMemAllocAsync_ptsz"),
            Some((
                "cuMemAllocAsync",
                Make {
                    kind: Buffer,
                    size: Size::At(1)
                }
            ))
        );
        assert_eq!(
            hook_for("cuMemFreeAsync_ptsz"),
            Some(("cuMemFreeAsync", Free(Buffer)))
        );
        assert_eq!(
            hook_for("cuMemcpyHtoD_v2_ptds"),
            Some(("cuMemcpyHtoD", Call))
        );
        assert_eq!(
            hook_for("cuLaunchKernel_ptsz"),
            Some((
                "cuLaunchKernel",
                Launch {
                    stream_at: StreamAt::Param(40)
                }
            ))
        );
        assert_eq!(
            hook_for("cuDevicePrimaryCtxRelease_v2"),
            Some(("cuDevicePrimaryCtxRelease", Call))
        );
        assert_eq!(hook_for("cuMemGetInfo_v2"), None);
        assert_eq!(hook_for("cuEventGetDevice"), None);
        // Read for the streams' order only, any version.
        assert_eq!(
            hook_for("cuStreamBeginCapture_v2_ptsz"),
            Some(("cuStreamBeginCapture", Order))
        );
    }

    /// cuLaunchKernel's block: f, 7 unsigned ints, then hStream at byte 40;
    /// cuLaunchKernelEx's config: 7 unsigned ints, then hStream at byte 32.
    #[test]
    fn a_launch_names_its_stream_where_the_driver_puts_it() {
        #[repr(C)]
        struct LaunchKernel {
            f: usize,
            dims: [u32; 7],
            stream: usize,
        }
        #[repr(C)]
        struct Config {
            dims: [u32; 7],
            stream: usize,
        }
        let p = LaunchKernel {
            f: 1,
            dims: [0; 7],
            stream: 0xabc,
        };
        assert_eq!(std::mem::offset_of!(LaunchKernel, stream), 40);
        // SAFETY: a block of cuLaunchKernel's layout.
        let s = unsafe { launch_stream((&raw const p).cast(), StreamAt::Param(40)) };
        assert_eq!(s, 0xabc);
        let config = Config {
            dims: [0; 7],
            stream: 0xdef,
        };
        assert_eq!(std::mem::offset_of!(Config, stream), 32);
        let ex: [usize; 1] = [(&raw const config) as usize];
        // SAFETY: cuLaunchKernelEx's block: the config pointer first.
        let s = unsafe { launch_stream(ex.as_ptr(), StreamAt::Config(32)) };
        assert_eq!(s, 0xdef);
    }

    /// A kernel activity record (the prefix every version since Kernel4 shares)
    /// becomes a span of the launch with its correlation id, shifted to the
    /// agent's clock, on the default stream when the launch named none.
    #[test]
    fn a_kernel_record_becomes_the_span_of_its_launch() {
        let mut record = [0u8; 128];
        let name = c"_Z4spiny";
        record[..4].copy_from_slice(&ACTIVITY_KIND_CONCURRENT_KERNEL.to_ne_bytes());
        record[16..24].copy_from_slice(&1_000u64.to_ne_bytes());
        record[24..32].copy_from_slice(&3_000u64.to_ne_bytes());
        record[92..96].copy_from_slice(&77u32.to_ne_bytes());
        record[104..112].copy_from_slice(&(name.as_ptr() as usize).to_ne_bytes());
        // SAFETY: a whole record of the kernel layout.
        let none = unsafe { kernel_span(record.as_ptr(), 0) }.is_none();
        assert!(none, "no launch 77 yet");
        launched(77, 5, 900, 0);
        // SAFETY: as above.
        let span = unsafe { kernel_span(record.as_ptr(), 10) }.expect("a span");
        assert_eq!((span.call_seq, span.queued_ns), (5, 900));
        assert_eq!((span.begin_ns, span.end_ns), (1_010, 3_010));
        assert_eq!(span.name, "_Z4spiny");
        assert_eq!(span.queue_name.as_deref(), Some("default stream"));
        // SAFETY: as above.
        let none = unsafe { kernel_span(record.as_ptr(), 0) }.is_none();
        assert!(none, "one span per launch");
    }

    #[test]
    fn the_table_is_indexed_by_callback_id() {
        let t = table([(7, "cuMemFree_v2".to_string()), (3, "cuInit".to_string())]);
        assert_eq!(t.len(), 8);
        assert!(t[3].is_none());
        let h = t[7].as_ref().expect("hooked");
        assert_eq!(
            (h.api, h.driver, h.role),
            ("cuMemFree", "cuMemFree_v2", Free(Buffer))
        );
    }

    /// Drives the callback decoding with the blocks CUPTI would pass.
    #[test]
    fn an_allocation_and_its_free_reach_the_ledger_with_their_size() {
        #[repr(C)]
        struct AllocParams {
            dptr: *mut u64,
            bytesize: usize,
        }
        let mut dptr: u64 = 0x7f00_0000_1000;
        let alloc = AllocParams {
            dptr: &mut dptr,
            bytesize: 3 << 20,
        };
        let make = Make {
            kind: Buffer,
            size: Size::At(1),
        };
        // SAFETY: a parameter block of cuMemAlloc_v2's layout.
        let id = unsafe {
            apply(
                "cuMemAlloc",
                make,
                (&raw const alloc).cast(),
                std::ptr::null_mut(),
            )
        };
        let id = id.expect("created");
        assert_eq!(ledger::cuda_id_of(Buffer, 0x7f00_0000_1000), Some(id));

        let free: [usize; 1] = [0x7f00_0000_1000];
        // SAFETY: cuMemFree_v2's block: the device pointer.
        let freed = unsafe {
            apply(
                "cuMemFree",
                Free(Buffer),
                free.as_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(freed, Some(id));
        assert!(!FREED_UNSEEN.take(), "the agent saw it made");
        assert_eq!(ledger::cuda_id_of(Buffer, 0x7f00_0000_1000), None);
        // SAFETY: as above; the pointer is no longer the program's.
        let again = unsafe {
            apply(
                "cuMemFree",
                Free(Buffer),
                free.as_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(again, None, "a second free is not a second release");
        assert!(FREED_UNSEEN.take(), "a pointer no allocation it saw made");
        // The runtime's `cudaFree(0)` frees a null pointer, which is nothing.
        let null: [usize; 1] = [0];
        // SAFETY: cuMemFree_v2's block.
        let nothing = unsafe {
            apply(
                "cuMemFree",
                Free(Buffer),
                null.as_ptr(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!((nothing, FREED_UNSEEN.take()), (None, false));
    }

    #[test]
    fn a_pitched_allocation_counts_pitch_times_height() {
        let mut dptr: u64 = 0x9000;
        let mut pitch: usize = 512;
        let block: [usize; 5] = [
            (&raw mut dptr) as usize,
            (&raw mut pitch) as usize,
            300,
            10,
            4,
        ];
        let make = Make {
            kind: Buffer,
            size: Size::Pitch,
        };
        // SAFETY: cuMemAllocPitch_v2's layout.
        let id = unsafe { apply("cuMemAlloc", make, block.as_ptr(), std::ptr::null_mut()) };
        assert!(id.is_some());
        assert_eq!(ledger::cuda_released(Buffer, 0x9000), id);
    }

    #[test]
    fn the_enter_callback_keeps_the_start_for_the_exit() {
        let mut slot = 0u64;
        let data = CallbackData {
            site: API_ENTER,
            function_name: std::ptr::null(),
            params: std::ptr::null(),
            return_value: std::ptr::null(),
            symbol_name: std::ptr::null(),
            context: std::ptr::null_mut(),
            context_uid: 0,
            correlation_data: &mut slot,
            correlation_id: 1,
        };
        let hook = Hook {
            api: "cuCtxSynchronize",
            driver: "cuCtxSynchronize",
            role: Call,
            names: &[],
            orders: true,
        };
        let before = now_ns();
        // SAFETY: a well-formed enter block.
        unsafe { driver_call(&hook, &data) };
        assert!(slot >= before && slot <= now_ns());
    }

    #[test]
    fn a_context_made_inside_a_call_is_that_calls_object() {
        let ctx = ResourceData {
            context: 0x5151 as *mut c_void,
            handle: std::ptr::null_mut(),
            descriptor: std::ptr::null_mut(),
        };
        resource(RESOURCE_CONTEXT_CREATED, &ctx);
        let id = ledger::cuda_id_of(ObjKind::Context, 0x5151);
        assert!(id.is_some());
        assert_eq!(MADE_CONTEXT.take(), id);
        resource(RESOURCE_CONTEXT_DESTROY_STARTING, &ctx);
        assert_eq!(ledger::cuda_id_of(ObjKind::Context, 0x5151), None);
    }

    #[test]
    fn without_a_driver_an_error_has_no_driver_name() {
        // SAFETY: a lookup among the loaded libraries.
        if unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"cuGetErrorName".as_ptr()) }.is_null() {
            assert_eq!(error_name(2), None);
        }
    }
}
