//! Native call stacks of the calls that create objects (`gpulab watch
//! --backtrace`). The program's thread only copies return addresses
//! (`backtrace(3)`); the agent thread names them once per distinct stack: which
//! file was mapped there, the address in that file's own address space, its
//! build id, and the dynamic symbol when there is one. The parent finishes the
//! naming from the file's full symbols and debug information.

use std::collections::HashMap;
use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;

use gpulab_events::Frame;

use crate::loaded::{Loaded, generation, loaded};

/// `1` turns capturing on.
pub const BACKTRACE_ENV: &str = "GPULAB_BACKTRACE";
/// Return addresses taken per creation, before the agent's and driver's own
/// frames are left out.
const CAPTURED: usize = 48;
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

pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(BACKTRACE_ENV).is_ok_and(|v| v == "1"))
}

/// The calling thread's return addresses, innermost first, when backtraces were
/// asked for.
pub fn capture() -> Option<Box<[usize]>> {
    if !enabled() {
        return None;
    }
    let mut buf = [std::ptr::null_mut::<c_void>(); CAPTURED];
    // SAFETY: `buf` holds CAPTURED pointers; backtrace writes at most that many.
    let n = unsafe { libc::backtrace(buf.as_mut_ptr(), CAPTURED as c_int) };
    let n = usize::try_from(n).unwrap_or(0);
    // Frame 0 is this function.
    Some(buf[1.min(n)..n].iter().map(|p| *p as usize).collect())
}

/// The agent thread's stacks: ids by return addresses, and the mapped files.
#[derive(Default)]
pub struct Stacks {
    ids: HashMap<Box<[usize]>, u64>,
    modules: Vec<Loaded>,
    /// `dlpi_adds + dlpi_subs` when `modules` was read: a change means a
    /// library was loaded or unloaded since.
    generation: u64,
}

impl Stacks {
    /// The id of `addrs`, and its frames when it is new (they must be sent
    /// before anything names the id).
    pub fn intern(&mut self, pid: u32, addrs: Box<[usize]>) -> (u64, Option<Vec<Frame>>) {
        if let Some(id) = self.ids.get(&addrs) {
            return (*id, None);
        }
        let id = (u64::from(pid) << 32) | (self.ids.len() as u64 + 1);
        let frames = self.frames(&addrs);
        self.ids.insert(addrs, id);
        (id, Some(frames))
    }

    fn frames(&mut self, addrs: &[usize]) -> Vec<Frame> {
        if generation() != self.generation {
            self.modules = loaded();
            self.generation = generation();
        }
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
        let module = self.modules.iter().find(|m| m.holds(pc));
        Frame {
            module: module.map(|m| m.path.clone()).unwrap_or_default(),
            address: module.map_or(pc, |m| pc - m.bias) as u64,
            build_id: module.and_then(|m| m.build_id.clone()),
            function: dynamic_symbol(pc),
            location: None,
        }
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
        let addrs: Box<[usize]> = [here as usize + 4].into();
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
