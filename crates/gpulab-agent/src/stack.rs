//! Native call stacks of the calls that create objects: by default the
//! calling frame alone, which names who made each object (the program, or
//! the library that called the driver for it), and the whole stack with
//! `gpulab watch --backtrace`. The program's thread only copies return addresses
//! (`backtrace(3)`); the agent thread names them once per distinct stack: which
//! file was mapped there, the address in that file's own address space, its
//! build id, and the dynamic symbol when there is one. The parent finishes the
//! naming from the file's full symbols and debug information.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use gpulab_events::{Frame, ObjKind};

use crate::loaded::{Loaded, generation, loaded};
use crate::python::PyFrame;

/// How much of each creating call's stack is taken: `1` or `full`, the whole
/// stack (`gpulab watch --backtrace`); `off`, none; anything else or unset,
/// the calling frame alone, which names the library that made the object
/// (PyTorch's allocator, NCCL, the program's own code).
pub const BACKTRACE_ENV: &str = "GPULAB_BACKTRACE";
/// Return addresses taken per creation for the whole stack, before the
/// agent's and driver's own frames are left out.
const CAPTURED: usize = 48;
/// Return addresses taken for the calling frame alone: enough to pass the
/// agent's, CUPTI's and the driver's frames (about a dozen).
const CAPTURED_FOR_CALLER: usize = 24;
/// Frames kept per stack, from the program's call into the API outwards.
pub const KEPT: usize = 16;

/// Files whose frames sit between the program's call and the agent's hook: the
/// agent itself, CUPTI, the CUDA driver and runtime, OpenCL loaders and ICDs.
const BETWEEN: [&str; 7] = [
    "libcupti",
    "libcuda.so",
    "libcudart.so",
    "libOpenCL.so",
    "libnvidia-",
    "libpocl",
    "libgpulab_agent",
];

/// How much of a stack the agent takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    Off,
    /// The first frame outside the agent and the driver: the API's caller.
    Caller,
    Full,
}

pub fn depth() -> Depth {
    static DEPTH: OnceLock<Depth> = OnceLock::new();
    *DEPTH.get_or_init(|| match std::env::var(BACKTRACE_ENV).as_deref() {
        Ok("1" | "full") => Depth::Full,
        Ok("off") => Depth::Off,
        _ => Depth::Caller,
    })
}

/// The calling thread's return addresses, innermost first, as deep as
/// [`depth`] asks, for a call that made an object of `kind`. The calling
/// frame alone is taken only for kinds that hold memory or are made rarely:
/// unwinding costs a few hundred nanoseconds a frame (libgcc reads each
/// frame's unwind table), and events and kernels are made at every launch by
/// some programs. For the calling frame, the walk stops [`PAST_BETWEEN`]
/// frames past the agent's and the driver's ([`Walk`]): the rest of the
/// stack (an interpreter's, a framework's) is never unwound.
pub fn capture(kind: ObjKind) -> Option<Captured> {
    let native = match depth() {
        Depth::Off => return None,
        Depth::Caller if matches!(kind, ObjKind::Event | ObjKind::Kernel) => return None,
        Depth::Caller => walk(Walk::to_caller()),
        Depth::Full => walk(Walk::whole()),
    };
    Some(Captured {
        native,
        python: crate::python::frames(depth() == Depth::Full).into(),
        whole: false,
    })
}

/// The whole stack of a call found misusing an object ([`crate::transport::misused`]),
/// unless backtraces are off: misuse is rare, so its cost is nothing to the
/// program, and the calling frame alone may be a runtime linked into the
/// program (nvcc links `libcudart_static` into the executable) rather than
/// the line that made the mistake.
pub fn capture_misuse() -> Option<Captured> {
    if depth() == Depth::Off {
        return None;
    }
    Some(Captured {
        native: walk(Walk::whole()),
        python: crate::python::frames(true).into(),
        whole: true,
    })
}

/// Frames walked past the last one seen in the agent or the driver before a
/// walk for the calling frame stops: the caller is the first of them, and one
/// more lets a single frame of another file between two of the driver's (a
/// thunk, a libc call) not end the walk early.
const PAST_BETWEEN: usize = 2;

/// Where a walk up the stack stops, fed one return address at a time with
/// whether it lies in a file between the program and the agent.
#[derive(Debug)]
struct Walk {
    taken: Vec<usize>,
    most: usize,
    /// Stop this many frames past the last frame between (None: never early).
    past: Option<usize>,
    since_between: Option<usize>,
}

impl Walk {
    fn to_caller() -> Walk {
        Walk {
            taken: Vec::with_capacity(CAPTURED_FOR_CALLER),
            most: CAPTURED_FOR_CALLER,
            past: Some(PAST_BETWEEN),
            since_between: None,
        }
    }

    fn whole() -> Walk {
        Walk {
            taken: Vec::with_capacity(CAPTURED),
            most: CAPTURED,
            past: None,
            since_between: None,
        }
    }

    /// Takes a return address; false once the walk is done.
    fn step(&mut self, ret: usize, is_between: bool) -> bool {
        self.taken.push(ret);
        if is_between {
            self.since_between = Some(0);
        } else if let Some(n) = self.since_between.as_mut() {
            *n += 1;
        }
        let far_enough = matches!((self.past, self.since_between), (Some(p), Some(n)) if n >= p);
        !far_enough && self.taken.len() < self.most
    }
}

#[repr(C)]
struct UnwindContext {
    _opaque: [u8; 0],
}

/// `_URC_NO_REASON`: go on; anything else returned by the trace function
/// ends the walk.
const URC_NO_REASON: c_int = 0;
const URC_NORMAL_STOP: c_int = 4;

type Trace = extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int;

// libgcc_s, which the Rust standard library links for its own unwinding.
unsafe extern "C" {
    fn _Unwind_Backtrace(trace: Trace, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(context: *mut UnwindContext) -> usize;
}

/// The return addresses of this thread's stack from the caller of `walk`
/// outwards, as far as `walk` goes.
#[inline(never)]
fn walk(mut walk: Walk) -> Box<[usize]> {
    /// The first frame the unwinder reports is `walk`'s own.
    struct Walking<'a> {
        walk: &'a mut Walk,
        skipped_own: bool,
    }
    extern "C" fn trace(context: *mut UnwindContext, arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `Walking` below, alive for the whole walk.
        let walking = unsafe { &mut *arg.cast::<Walking<'_>>() };
        // SAFETY: a context the unwinder handed this function.
        let ret = unsafe { _Unwind_GetIP(context) };
        if ret == 0 {
            return URC_NORMAL_STOP;
        }
        if !walking.skipped_own {
            walking.skipped_own = true;
            return URC_NO_REASON;
        }
        // A frame whose file cannot be told counts as the driver's: the
        // walk goes on past it.
        let is_between = walking.walk.past.is_some() && between_at(ret).unwrap_or(true);
        if walking.walk.step(ret, is_between) {
            URC_NO_REASON
        } else {
            URC_NORMAL_STOP
        }
    }
    let mut walking = Walking {
        walk: &mut walk,
        skipped_own: false,
    };
    // SAFETY: `trace` is of the unwinder's type and reads only `walking`.
    unsafe { _Unwind_Backtrace(trace, (&mut walking as *mut Walking<'_>).cast()) };
    walk.taken.into_boxed_slice()
}

/// glibc's `struct dl_find_object` (`<dlfcn.h>`, glibc 2.35).
#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut c_void,
    map_end: *mut c_void,
    link_map: *const c_void,
    eh_frame: *mut c_void,
    reserved: [u64; 7],
}

/// glibc's `_dl_find_object`: the loaded file holding an address, found
/// without the loader's lock (unwinders call it for each frame).
type FindObject = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> c_int;

/// `_dl_find_object` where this glibc has it (2.35 and newer), looked up once
/// as the agent starts: the program's threads never take the loader's lock
/// to tell a frame's file (a thread inside `dlopen` holds it while
/// constructors run, which may wait on a driver call of theirs).
static FIND_OBJECT: OnceLock<Option<FindObject>> = OnceLock::new();

/// Looks up what the walk needs of the loader; called as the agent starts.
pub fn prepare() {
    crate::static_runtime::prepare();
    FIND_OBJECT.get_or_init(|| {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
        // SAFETY: glibc's symbol of that name has this type.
        (!found.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, FindObject>(found) })
    });
}

/// Whether a return address lies in a file between the program's call and
/// the agent, kept per thread (a thread's creating calls pass the same few
/// dozen addresses of the agent, CUPTI and the driver). None where it cannot
/// be told without the loader's lock (an older glibc, the agent not started
/// yet) or the address lies in no loaded file: the walk then goes on.
fn between_at(ret: usize) -> Option<bool> {
    /// Addresses a thread keeps before it forgets them all (a library
    /// unloaded and another mapped in its place is forgotten too, in time).
    const KEPT_PER_THREAD: usize = 512;
    thread_local! {
        static KNOWN: std::cell::RefCell<HashMap<usize, bool>> =
            std::cell::RefCell::new(HashMap::new());
    }
    let find = (*FIND_OBJECT.get()?)?;
    let look = || -> Option<bool> {
        // SAFETY: plain data, filled by the call below.
        let mut found: DlFindObject = unsafe { std::mem::zeroed() };
        // SAFETY: any address may be asked about; `found` is the struct the
        // function fills.
        if unsafe { find(ret.saturating_sub(1) as *mut c_void, &mut found) } != 0
            || found.link_map.is_null()
        {
            return None;
        }
        // SAFETY: a live `struct link_map`, whose `l_name` (after `l_addr`)
        // is a NUL-terminated string the loader owns while the file is
        // loaded ("" for the program itself).
        let name = unsafe { *found.link_map.cast::<*const c_char>().add(1) };
        if name.is_null() {
            return Some(false);
        }
        // SAFETY: as above.
        let name = unsafe { CStr::from_ptr(name) };
        if name.is_empty() {
            // The program itself: the CUDA runtime nvcc linked into it is
            // between too.
            return Some(crate::static_runtime::holds(ret.saturating_sub(1)));
        }
        Some(between(&name.to_string_lossy()))
    };
    KNOWN
        .try_with(|known| {
            let Ok(mut known) = known.try_borrow_mut() else {
                return look();
            };
            if let Some(is) = known.get(&ret) {
                return Some(*is);
            }
            if known.len() >= KEPT_PER_THREAD {
                known.clear();
            }
            let is = look()?;
            known.insert(ret, is);
            Some(is)
        })
        .unwrap_or_else(|_| look())
}

/// What a creating call's thread took of its stacks: its native return
/// addresses, and its Python frames where the program is CPython (the
/// innermost of the program's own code alone, or all with `--backtrace`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Captured {
    pub native: Box<[usize]>,
    pub python: Box<[PyFrame]>,
    /// Kept whole whatever `--backtrace` asks ([`capture_misuse`]).
    pub whole: bool,
}

/// The agent thread's stacks: ids by return addresses, and the mapped files.
#[derive(Default)]
pub struct Stacks {
    ids: HashMap<Captured, u64>,
    modules: Vec<Loaded>,
    /// `dlpi_adds + dlpi_subs` when `modules` was read: a change means a
    /// library was loaded or unloaded since.
    generation: u64,
    /// Whether a return address lies in a file between the program's call
    /// and the agent ([`between`]), as far as looked up since `modules` was
    /// read: a program's creating calls pass the same few dozen addresses of
    /// the agent, CUPTI and the driver, and the lookup walks every module.
    between_at: HashMap<usize, bool>,
}

impl Stacks {
    /// The id of `addrs`, and its frames when it is new (they must be sent
    /// before anything names the id).
    ///
    /// Taken for the caller alone, stacks are told apart by that frame only,
    /// so each calling place is named once however deep its own callers go.
    /// Python frames come first, innermost first: where the program's own
    /// code was, then the native frames from its call into the API.
    pub fn intern(&mut self, pid: u32, mut taken: Captured) -> (u64, Option<Vec<Frame>>) {
        if depth() != Depth::Full && !taken.whole {
            taken.native = self
                .caller(&taken.native)
                .map(|a| vec![a].into())
                .unwrap_or_default();
        }
        if let Some(id) = self.ids.get(&taken) {
            return (*id, None);
        }
        let id = (u64::from(pid) << 32) | (self.ids.len() as u64 + 1);
        let mut frames: Vec<Frame> = taken.python.iter().map(python_frame).collect();
        frames.extend(self.frames(&taken.native));
        self.ids.insert(taken, id);
        (id, Some(frames))
    }

    fn refresh(&mut self) {
        if generation() != self.generation {
            self.modules = loaded();
            self.generation = generation();
            self.between_at.clear();
        }
    }

    /// The module mapped at a return address's call, if any.
    fn module_of(&self, ret: usize) -> Option<&Loaded> {
        let pc = ret.saturating_sub(1);
        self.modules.iter().find(|m| m.holds(pc))
    }

    /// The first return address past the agent's and the driver's frames.
    fn caller(&mut self, addrs: &[usize]) -> Option<usize> {
        self.refresh();
        let mut last_between = None;
        for (i, a) in addrs.iter().enumerate() {
            let known = self.between_at.get(a).copied();
            let is = known.unwrap_or_else(|| {
                let is = self.module_of(*a).is_some_and(|m| between(&m.path))
                    || crate::static_runtime::holds(a.saturating_sub(1));
                self.between_at.insert(*a, is);
                is
            });
            if is {
                last_between = Some(i);
            }
        }
        addrs.get(last_between.map_or(0, |i| i + 1)).copied()
    }

    fn frames(&mut self, addrs: &[usize]) -> Vec<Frame> {
        self.refresh();
        let named: Vec<Frame> = addrs.iter().map(|a| self.frame(*a)).collect();
        let first = named
            .iter()
            .rposition(|f| between(&f.module))
            .map_or(0, |i| i + 1);
        named.into_iter().skip(first).take(KEPT).collect()
    }

    /// A return address, named. The call is the instruction before it.
    fn frame(&self, ret: usize) -> Frame {
        let pc = ret.saturating_sub(1);
        let module = self.module_of(ret);
        Frame {
            module: module.map(|m| m.path.clone()).unwrap_or_default(),
            address: module.map_or(pc, |m| pc - m.bias) as u64,
            build_id: module.and_then(|m| m.build_id.clone()),
            function: dynamic_symbol(pc),
            location: None,
            python: false,
        }
    }
}

/// A Python frame as a stack's frame: its function and `file:line`.
fn python_frame(f: &PyFrame) -> Frame {
    Frame {
        module: String::new(),
        address: 0,
        build_id: None,
        function: Some(f.function.to_string()),
        location: Some(format!("{}:{}", f.file, f.line)),
        python: true,
    }
}

/// The agent and driver frames are those up to the last one in a file named
/// in [`BETWEEN`] (the memfd the agent is loaded from has no such name, so it is
/// told by its path under `/proc/*/fd/`).
fn between(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    BETWEEN.iter().any(|b| file.starts_with(b))
        || (path.starts_with("/proc/") && path.contains("/fd/"))
        || file.starts_with("memfd:")
}

fn dynamic_symbol(pc: usize) -> Option<String> {
    // SAFETY: Dl_info is plain data; dladdr fills it or returns 0.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: any address may be asked about.
    if unsafe { libc::dladdr(pc as *const c_void, &mut info) } == 0 || info.dli_sname.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated, owned by the loader.
    Some(
        unsafe { CStr::from_ptr(info.dli_sname) }
            .to_string_lossy()
            .into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_is_named_once_and_starts_at_the_callers_frame() {
        let mut stacks = Stacks::default();
        let here: fn() = a_stack_is_named_once_and_starts_at_the_callers_frame;
        let addrs = Captured {
            native: [here as usize + 4].into(),
            python: Box::default(),
            whole: false,
        };
        let (id, frames) = stacks.intern(7, addrs.clone());
        assert_eq!(id >> 32, 7);
        let frames = frames.expect("a new stack is named");
        assert_eq!(frames.len(), 1);
        assert!(frames[0].module.contains("gpulab_agent"), "{:?}", frames[0]);
        let (again, none) = stacks.intern(7, addrs);
        assert_eq!((again, none), (id, None));
    }

    /// The caller by the agent thread's rule: the first address past the
    /// last frame between.
    fn caller_of(labels: &[bool]) -> Option<usize> {
        let first = labels.iter().rposition(|b| *b).map_or(0, |i| i + 1);
        (first < labels.len()).then_some(first)
    }

    #[test]
    fn a_walk_for_the_caller_stops_past_the_driver_and_names_the_same_caller() {
        // Stacks as the hooks see them: the agent's frames, the driver's
        // (with now and then one frame of another file among them), the
        // program's own to any depth, and now and then a driver frame far out
        // (a callback the program runs from inside a driver call).
        let mut rng = fastrand::Rng::with_seed(29);
        for _ in 0..20_000 {
            let mut labels = vec![true; rng.usize(1..6)];
            for _ in 0..rng.usize(0..12) {
                labels.push(rng.u8(..10) != 0);
                if labels.len() >= 2 && !labels[labels.len() - 2] {
                    labels.push(true);
                }
            }
            labels.extend((0..rng.usize(0..40)).map(|_| false));
            if rng.u8(..8) == 0 && labels.len() > 4 {
                let at = rng.usize(labels.len() - 2..labels.len());
                labels[at] = true;
            }
            let mut walk = Walk::to_caller();
            for (i, b) in labels.iter().enumerate() {
                if !walk.step(i, *b) {
                    break;
                }
            }
            let taken = walk.taken.len();
            assert!(taken <= CAPTURED_FOR_CALLER, "{labels:?}");
            let last_between = labels[..taken].iter().rposition(|b| *b);
            if let Some(last) = last_between {
                assert!(
                    taken <= last + 1 + PAST_BETWEEN,
                    "walked too far: {labels:?}"
                );
            }
            // Where no driver frame lies past two of the program's, and the
            // stack fits, the walk's caller is the whole stack's.
            let far_driver = labels
                .windows(PAST_BETWEEN + 1)
                .any(|w| w[..PAST_BETWEEN].iter().all(|b| !b) && w[PAST_BETWEEN])
                && labels.iter().position(|b| *b).is_some();
            if !far_driver && caller_of(&labels).is_some_and(|c| c < CAPTURED_FOR_CALLER) {
                assert_eq!(
                    caller_of(&labels[..taken]),
                    caller_of(&labels),
                    "{labels:?}"
                );
            }
        }
    }

    #[test]
    fn a_walk_that_sees_no_driver_goes_as_deep_as_it_may() {
        let mut walk = Walk::to_caller();
        let mut n = 0;
        while walk.step(n, false) {
            n += 1;
        }
        assert_eq!(walk.taken.len(), CAPTURED_FOR_CALLER);
        let mut whole = Walk::whole();
        let mut n = 0;
        while whole.step(n, n < 3) {
            n += 1;
        }
        assert_eq!(whole.taken.len(), CAPTURED);
    }

    /// A frame's file is told by the loader's lock-free lookup where glibc
    /// has it: the test's own code and libc are not the driver's, and an
    /// address in no file cannot be told (the walk goes on past it).
    #[test]
    fn a_frames_file_is_told_without_the_loaders_lock_or_not_at_all() {
        prepare();
        let here = a_frames_file_is_told_without_the_loaders_lock_or_not_at_all as fn() as usize;
        let libc_fn = libc::getpid as *const () as usize;
        let has = FIND_OBJECT.get().copied().flatten().is_some();
        let want = |is: bool| if has { Some(is) } else { None };
        assert_eq!(between_at(here + 1), want(false));
        assert_eq!(between_at(libc_fn + 1), want(false));
        // Asked twice: the second answer is the thread's kept one.
        assert_eq!(between_at(here + 1), want(false));
        assert_eq!(between_at(0x10), None);
    }

    #[inline(never)]
    fn nested(depth: usize, out: &mut Vec<(Box<[usize]>, Vec<usize>)>) {
        if depth > 0 {
            nested(depth - 1, out);
            std::hint::black_box(&out);
            return;
        }
        let ours = walk(Walk::whole());
        let mut buf = [std::ptr::null_mut::<c_void>(); CAPTURED];
        // SAFETY: `buf` holds CAPTURED pointers.
        let n = unsafe { libc::backtrace(buf.as_mut_ptr(), CAPTURED as c_int) };
        let theirs = buf[..usize::try_from(n).unwrap_or(0)]
            .iter()
            .map(|p| *p as usize)
            .collect();
        out.push((ours, theirs));
    }

    #[test]
    fn the_walk_takes_the_return_addresses_glibcs_backtrace_takes() {
        let mut out = Vec::new();
        nested(6, &mut out);
        let (ours, theirs) = &out[0];
        // glibc's frame 0 is `nested` (which called it), as is ours: the
        // walk leaves out its own frame.
        assert!(ours.len() >= 8, "{ours:x?}");
        assert_eq!(
            &ours[1..8],
            &theirs[1..8],
            "ours {ours:x?}\ntheirs {theirs:x?}"
        );
    }

    #[test]
    fn agent_and_driver_frames_are_left_out() {
        for path in [
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "/opt/venv/lib/nvidia/cu13/lib/libcupti.so.13",
            "/proc/4242/fd/9",
            "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1",
        ] {
            assert!(between(path), "{path}");
        }
        for path in ["/home/u/app", "/usr/lib/libtorch_cuda.so", ""] {
            assert!(!between(path), "{path}");
        }
    }
}
