//! Native call stacks of the calls that create objects: by default the
//! calling frame alone, which names who made each object (the program, or
//! the library that called the driver for it), and the whole stack with
//! `gpulab watch --backtrace`. The program's thread only copies return addresses
//! (`backtrace(3)`); the agent thread names them once per distinct stack: which
//! file was mapped there, the address in that file's own address space, its
//! build id, and the dynamic symbol when there is one. The parent finishes the
//! naming from the file's full symbols and debug information.

use std::collections::HashMap;
use std::ffi::{CStr, c_int, c_void};
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
/// unwinding costs microseconds (libgcc reads each frame's unwind table), and
/// events and kernels are made at every launch by some programs.
pub fn capture(kind: ObjKind) -> Option<Captured> {
    let wanted = match depth() {
        Depth::Off => return None,
        Depth::Caller if matches!(kind, ObjKind::Event | ObjKind::Kernel) => return None,
        Depth::Caller => CAPTURED_FOR_CALLER,
        Depth::Full => CAPTURED,
    };
    let mut buf = [std::ptr::null_mut::<c_void>(); CAPTURED];
    // SAFETY: `buf` holds CAPTURED >= `wanted` pointers; backtrace writes at
    // most `wanted`.
    let n = unsafe { libc::backtrace(buf.as_mut_ptr(), wanted as c_int) };
    let n = usize::try_from(n).unwrap_or(0);
    Some(Captured {
        // Frame 0 is this function.
        native: buf[1.min(n)..n].iter().map(|p| *p as usize).collect(),
        python: crate::python::frames(depth() == Depth::Full).into(),
    })
}

/// What a creating call's thread took of its stacks: its native return
/// addresses, and its Python frames where the program is CPython (the
/// innermost of the program's own code alone, or all with `--backtrace`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Captured {
    pub native: Box<[usize]>,
    pub python: Box<[PyFrame]>,
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
        if depth() != Depth::Full {
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
                let is = self.module_of(*a).is_some_and(|m| between(&m.path));
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
        };
        let (id, frames) = stacks.intern(7, addrs.clone());
        assert_eq!(id >> 32, 7);
        let frames = frames.expect("a new stack is named");
        assert_eq!(frames.len(), 1);
        assert!(frames[0].module.contains("gpulab_agent"), "{:?}", frames[0]);
        let (again, none) = stacks.intern(7, addrs);
        assert_eq!((again, none), (id, None));
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
