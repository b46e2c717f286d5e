//! A second CUPTI client inside the watched program (the PyTorch profiler,
//! a tracing library): CUPTI before 13.2 has one subscriber per process, so
//! once the agent holds it, the program's own `cuptiSubscribe` is refused and
//! that profiler silently records no CUDA activity (on the H100, PyTorch's
//! profiler saw 0 kernels instead of 10 and only logged a warning). CUPTI tells
//! no subscriber about another, so the agent points the program's imports of
//! the calls that would clash at functions of its own ([`crate::got`]), which
//! call the real ones, and reports what CUPTI answered, naming the caller.
//!
//! The program's libraries are looked at when CUDA is first watched and again,
//! on the agent thread, whenever the process has loaded a library since.

use std::collections::HashSet;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::got;
use crate::transport::{self, Family};

const CUPTI_SUCCESS: i32 = 0;
const CUPTI_ERROR_UNKNOWN: i32 = 999;

type Callback = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
type Subscribe = unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void) -> i32;
type SubscribeV2 =
    unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void, *mut c_void) -> i32;
type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type BufferCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type RegisterCallbacks = unsafe extern "C" fn(BufferRequested, BufferCompleted) -> i32;
pub type ResultString = unsafe extern "C" fn(i32, *mut *const c_char) -> i32;

/// The calls watched, by the agent's function standing in for each.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Watched {
    Subscribe,
    SubscribeV2,
    Register,
}

impl Watched {
    const ALL: [Watched; 3] = [Watched::Subscribe, Watched::SubscribeV2, Watched::Register];

    fn name(self) -> &'static str {
        match self {
            Watched::Subscribe => "cuptiSubscribe",
            Watched::SubscribeV2 => "cuptiSubscribe_v2",
            Watched::Register => "cuptiActivityRegisterCallbacks",
        }
    }

    fn ours(self) -> usize {
        match self {
            Watched::Subscribe => their_subscribe as *const () as usize,
            Watched::SubscribeV2 => their_subscribe_v2 as *const () as usize,
            Watched::Register => their_register as *const () as usize,
        }
    }
}

/// Where each redirected file's calls must still go: (call, file, real
/// function). A process may hold two libcuptis (the program's and the agent's),
/// so the real function is the one the calling file was bound to.
static ROUTES: Mutex<Vec<(Watched, String, usize)>> = Mutex::new(Vec::new());
static RESULT_STRING: OnceLock<ResultString> = OnceLock::new();
/// Whether the agent collects activity records itself (`--device-spans`).
static SPANS: AtomicBool = AtomicBool::new(false);
/// The loader's count of loads and unloads at the last look.
static GENERATION: AtomicU64 = AtomicU64::new(u64::MAX);
/// Slots already pointed at the agent, and the loader's count of unloads when
/// they were: an address of an unloaded file may be another file's slot now.
static DONE: Mutex<Option<(u64, HashSet<usize>)>> = Mutex::new(None);
/// Whether the process was told that the agent cannot look here.
static UNSEEN_SAID: AtomicBool = AtomicBool::new(false);

/// Starts watching for other CUPTI clients: now, and on later looks.
/// `result_string` names CUPTI's answers; `spans` says whether the agent
/// collects activity records itself.
pub fn arm(result_string: ResultString, spans: bool) {
    SPANS.store(spans, Ordering::Relaxed);
    let _ = RESULT_STRING.set(result_string);
    look();
}

/// Points imports of the clashing calls in libraries loaded since the last
/// look at the agent's functions. Cheap when nothing was loaded.
pub fn look() {
    let now = crate::loaded::generation();
    if GENERATION.swap(now, Ordering::AcqRel) == now {
        return;
    }
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let unloads = crate::loaded::unloads();
    let (seen_at, done) = done.get_or_insert_with(|| (unloads, HashSet::new()));
    if *seen_at != unloads {
        *seen_at = unloads;
        done.clear();
    }
    let ours = crate::loaded::agent_path();
    let skip = |path: &str| {
        let file = path.rsplit('/').next().unwrap_or(path);
        path == ours || file.starts_with("libcupti") || file.starts_with("ld-linux")
    };
    let mut routes = ROUTES.lock().unwrap_or_else(|e| e.into_inner());
    for call in Watched::ALL {
        let Some(changed) = got::redirect(call.name(), call.ours(), skip, done) else {
            if !UNSEEN_SAID.swap(true, Ordering::Relaxed) {
                transport::rivals_unseen(format!(
                    "the agent finds a library's imports on x86_64 and aarch64 only, not on {}, \
                     so a CUPTI client of the program's own (a profiler such as torch.profiler) \
                     that CUPTI refuses while gpulab holds its subscriber goes unnamed",
                    std::env::consts::ARCH
                ));
            }
            return;
        };
        for r in changed {
            routes.push((call, r.path, r.real));
        }
    }
}

/// The real function for `call` from the file that called the agent's
/// stand-in; any file's route for it when the caller is not known.
fn route(call: Watched, caller: &str) -> Option<usize> {
    let routes = ROUTES.lock().unwrap_or_else(|e| e.into_inner());
    let of_call = || routes.iter().filter(|(c, ..)| *c == call);
    of_call()
        .find(|(_, file, _)| file == caller)
        .or_else(|| of_call().next())
        .map(|(.., real)| *real)
}

unsafe extern "C" fn their_subscribe(
    subscriber: *mut *mut c_void,
    callback: Callback,
    user: *mut c_void,
) -> i32 {
    let caller = caller();
    let Some(real) = route(Watched::Subscribe, &caller) else {
        return CUPTI_ERROR_UNKNOWN;
    };
    // SAFETY: the function this caller's slot held (a cuptiSubscribe), called
    // with the caller's own arguments.
    let status = unsafe {
        let real: Subscribe = std::mem::transmute(real);
        real(subscriber, callback, user)
    };
    refused("cuptiSubscribe", &caller, status);
    status
}

unsafe extern "C" fn their_subscribe_v2(
    subscriber: *mut *mut c_void,
    callback: Callback,
    user: *mut c_void,
    params: *mut c_void,
) -> i32 {
    let caller = caller();
    let Some(real) = route(Watched::SubscribeV2, &caller) else {
        return CUPTI_ERROR_UNKNOWN;
    };
    // SAFETY: as in `their_subscribe`, for cuptiSubscribe_v2.
    let status = unsafe {
        let real: SubscribeV2 = std::mem::transmute(real);
        real(subscriber, callback, user, params)
    };
    refused("cuptiSubscribe_v2", &caller, status);
    status
}

unsafe extern "C" fn their_register(requested: BufferRequested, completed: BufferCompleted) -> i32 {
    let caller = caller();
    let Some(real) = route(Watched::Register, &caller) else {
        return CUPTI_ERROR_UNKNOWN;
    };
    // SAFETY: as in `their_subscribe`, for cuptiActivityRegisterCallbacks.
    let status = unsafe {
        let real: RegisterCallbacks = std::mem::transmute(real);
        real(requested, completed)
    };
    if status == CUPTI_SUCCESS && SPANS.load(Ordering::Relaxed) {
        conflict(format!(
            "{} registered its own CUPTI activity buffers, which replace the agent's: \
             the device spans of --device-spans end here",
            file_name(&caller)
        ));
    }
    status
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn refused(call: &str, caller: &str, status: i32) {
    if status == CUPTI_SUCCESS {
        return; // CUPTI took it beside the agent's (it allows several subscribers)
    }
    conflict(format!(
        "{} called {call} and CUPTI refused it ({}): gpulab's agent holds the \
         process's CUPTI subscriber, so that CUPTI client (a profiler such as \
         torch.profiler, say) records no CUDA activity while gpulab watches; \
         profile without `gpulab watch`",
        file_name(caller),
        result_name(status)
    ));
}

fn conflict(reason: String) {
    transport::conflict(Family::Cuda, reason);
}

fn result_name(status: i32) -> String {
    let mut s: *const c_char = std::ptr::null();
    let named = RESULT_STRING.get().is_some_and(|f| {
        // SAFETY: `s` is a writable out-pointer.
        unsafe { f(status, &mut s) == CUPTI_SUCCESS && !s.is_null() }
    });
    if named {
        // SAFETY: CUPTI returns a static C string.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    } else {
        format!("CUPTI error {status}")
    }
}

/// The file that called the agent's stand-in, as the loader names it.
#[inline(never)]
fn caller() -> String {
    let mut frames = [std::ptr::null_mut::<c_void>(); 3];
    // SAFETY: `frames` holds 3 pointers.
    let n = unsafe { libc::backtrace(frames.as_mut_ptr(), 3 as c_int) };
    // Frame 0 is here, 1 the agent's function, 2 its caller.
    if n < 3 {
        return "the program".into();
    }
    // SAFETY: Dl_info is plain data; dladdr fills it or returns 0.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: any address may be asked about.
    if unsafe { libc::dladdr(frames[2], &mut info) } == 0 || info.dli_fname.is_null() {
        return "the program".into();
    }
    // SAFETY: a NUL-terminated string owned by the loader.
    unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned()
}
