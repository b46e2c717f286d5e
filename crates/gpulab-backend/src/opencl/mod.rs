//! The OpenCL backend: one raw cl3 call per script line, lab objects as raw handles
//! in gpulab's table (never opencl3 wrappers, which release on drop), device spans
//! from profiling info mapped to host time, destructor callbacks as notices.
//!
//! gpulab never retains a lab object. Helpers a call needs beyond its one raw call
//! are named in the catalog's driver column (`clSetKernelArg`, destructor callbacks)
//! plus `clSetEventCallback` on each enqueue's event, which adds no reference.

mod callbacks;
mod calls;
pub mod errors;
mod info;
mod spin;
mod timing;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cl3::command_queue::{
    CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, CL_QUEUE_PROFILING_ENABLE, CL_QUEUE_PROPERTIES,
    create_command_queue, create_command_queue_with_properties, release_command_queue,
};
use cl3::event::release_event;
use cl3::types::{
    cl_command_queue, cl_context, cl_device_id, cl_event, cl_int, cl_queue_properties,
};

pub use spin::{Calibration, Shape};
pub use timing::ClockMap;

use self::callbacks::{Arrival, Arrivals};
use self::calls::HostBuf;
use super::discover::{self, parse_cl_version};
use super::{Backend, BackendError, DeviceInfo, DriverError, Notice, ObjId, Operand, Outcome};
use gpulab_events::ObjKind;
use gpulab_events::api::{Api, KernelSpec};

/// A lab object: its raw handle, the references the lab holds on it as gpulab
/// counted them (1 at creation, +1 per retain, −1 per release), and its bytes.
struct Entry {
    kind: ObjKind,
    handle: *mut c_void,
    refs: u64,
    bytes: u64,
    /// A buffer of shared virtual memory: `handle` is its pointer, which a
    /// kernel takes through `clSetKernelArgSVMPointer` and `clSVMFree` frees.
    svm: bool,
}

/// An enqueued command whose completion callback has not arrived yet.
struct Pending {
    seq: u64,
    queue: ObjId,
    name: &'static str,
    h0: u64,
    h1: u64,
    /// gpulab's own event, released as soon as its profiling info arrived.
    private: Option<cl_event>,
    /// Host memory the command reads or writes; freed once it completed.
    host: Option<HostBuf>,
}

pub struct OpenClBackend {
    info: DeviceInfo,
    device: cl_device_id,
    platform_version: (u32, u32),
    /// Each timed kernel's calibration, `spin`'s first.
    cals: Vec<(&'static str, Calibration)>,
    /// The launch shape of every kernel (a timed one's is its calibration's).
    shape: Shape,
    /// The kernel each lab kernel object runs (`clCreateKernel`'s name).
    kernels: HashMap<ObjId, &'static KernelSpec>,
    sink: Arc<Arrivals>,
    objects: HashMap<ObjId, Entry>,
    next_id: ObjId,
    next_token: u64,
    pending: HashMap<u64, Pending>,
    clock: ClockMap,
    ready: Vec<Notice>,
    last_build_log: Option<String>,
    pass_released: bool,
    /// Host memory of commands whose completion gpulab cannot observe; leaked on drop.
    orphans: Vec<HostBuf>,
    /// The host memory of the last blocking read and its size: `read_back`
    /// checks it, then lets it go.
    readback: Option<(HostBuf, usize)>,
    /// The host memory of each `CL_MEM_USE_HOST_PTR` buffer, freed when its
    /// destructor callback says the driver is done with it (leaked on drop).
    backing: HashMap<ObjId, HostBuf>,
    /// Open `clEnqueueMapBuffer` pointers per buffer, newest last.
    maps: HashMap<ObjId, Vec<*mut c_void>>,
    /// Which destructor callbacks this platform gets ([`Destructors::for_platform`]).
    destructors: Destructors,
}

/// The destructor callbacks gpulab registers on a platform: they add no
/// reference, but one driver deadlocks on a pair of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destructors {
    /// `clSetMemObjectDestructorCallback` on buffers and sub-buffers (OpenCL 1.1).
    pub buffers: bool,
    /// `clSetContextDestructorCallback` on contexts (OpenCL 3.0).
    pub contexts: bool,
}

impl Destructors {
    /// NVIDIA's OpenCL (driver 580.159.04, H200) sometimes never returns from
    /// `clReleaseContext` when the context *and* its buffer carry destructor
    /// callbacks, even callbacks that only add to a counter: a plain C program
    /// making the lab cl-forgotten-events' calls (tests/watch/cl_context_churn.c,
    /// 20 iterations a run, four processes at once) hung in 5 of 52 runs with
    /// both, in 0 of 30 with the context's alone, 0 of 30 with the buffers'
    /// alone and 0 of 70 with neither; the hung thread waits on a condition
    /// variable inside libnvidia-opencl with no callback running. The buffers'
    /// callback serves five claims of four labs, the context's one, so on NVIDIA
    /// the context's goes.
    pub fn for_platform(platform_name: &str, version: (u32, u32)) -> Destructors {
        let nvidia = platform_name.contains("NVIDIA");
        Destructors {
            buffers: version >= (1, 1),
            contexts: version >= (3, 0) && !nvidia,
        }
    }

    pub fn kinds(self) -> Vec<ObjKind> {
        let mut kinds = Vec::new();
        if self.buffers {
            kinds.push(ObjKind::Buffer);
        }
        if self.contexts {
            kinds.push(ObjKind::Context);
        }
        kinds
    }
}

// SAFETY: OpenCL handles may be used from any thread (the API is thread-safe except
// clSetKernelArg on one kernel from two threads, and the backend is used by one
// thread at a time through `&mut self`). HostBufs are plain heap memory.
unsafe impl Send for OpenClBackend {}

/// True when tests must not skip for lack of a platform (`GPULAB_REQUIRE_OPENCL=1`).
pub fn tests_require_opencl() -> bool {
    std::env::var("GPULAB_REQUIRE_OPENCL").is_ok_and(|v| v == "1")
}

/// A queue with profiling on (and out-of-order execution when asked):
/// `clCreateCommandQueueWithProperties` from OpenCL 2.0, `clCreateCommandQueue`
/// before (a 1.2 ICD has no entry for the newer call).
pub(crate) fn create_profiling_queue(
    ctx: cl_context,
    device: cl_device_id,
    platform_version: (u32, u32),
    out_of_order: bool,
) -> Result<cl_command_queue, cl_int> {
    let props = if out_of_order {
        CL_QUEUE_PROFILING_ENABLE | CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE
    } else {
        CL_QUEUE_PROFILING_ENABLE
    };
    if platform_version >= (2, 0) {
        let props: [cl_queue_properties; 3] =
            [cl_queue_properties::from(CL_QUEUE_PROPERTIES), props, 0];
        // SAFETY: `device` belongs to `ctx`'s platform (the context was made for it)
        // and `props` is zero-terminated and outlives the call.
        unsafe { create_command_queue_with_properties(ctx, device, props.as_ptr()) }
    } else {
        // SAFETY: as above; this is the 1.2 entry point for the same request.
        #[allow(deprecated)]
        unsafe {
            create_command_queue(ctx, device, props)
        }
    }
}

/// # Safety
/// `q` must be a queue handle the caller holds a reference on.
pub(crate) unsafe fn release_queue(q: cl_command_queue) -> Result<(), cl_int> {
    // SAFETY: forwarded from the caller.
    unsafe { release_command_queue(q) }
}

impl OpenClBackend {
    /// Opens a device by index (as `discover::opencl_devices` lists them) or by a
    /// case-insensitive name substring; `None` picks the first GPU, else the first
    /// device. Calibrates the spin kernel on private objects released before return.
    pub fn open(selector: Option<&str>) -> Result<Self, BackendError> {
        Self::open_for(selector, &[])
    }

    /// As `open`, and calibrates each timed kernel of `kernels` too (the ones a
    /// lab's script launches), so no script line hides a calibration.
    pub fn open_for(
        selector: Option<&str>,
        kernels: &[&'static KernelSpec],
    ) -> Result<Self, BackendError> {
        let all = discover::enumerate()?;
        let found = discover::select(&all, selector)?;
        let platform_version = parse_cl_version(&found.dev.platform_version);
        let destructors = Destructors::for_platform(&found.dev.platform, platform_version);
        let info = info::device_info(&found.dev, found.device);
        let max_wg = opencl3::device::Device::new(found.device)
            .max_work_group_size()
            .unwrap_or(1);
        let shape = Shape::for_device(found.dev.kind, max_wg);
        let mut timed: Vec<&'static KernelSpec> = KernelSpec::lookup("spin").into_iter().collect();
        for k in kernels.iter().copied().filter(|k| k.timed) {
            if !timed.iter().any(|t| t.name == k.name) {
                timed.push(k);
            }
        }
        let mut clock = ClockMap::default();
        let mut cals = Vec::new();
        for k in timed {
            let (cal, runs) =
                spin::calibrate(found.device, platform_version, shape, k).map_err(|why| {
                    BackendError::Setup(format!(
                        "{} ({}): {} {why}",
                        info.name, info.platform, k.name
                    ))
                })?;
            for r in &runs {
                clock.observe(r.h0, r.h1, r.stamps.queued);
            }
            cals.push((k.name, cal));
        }
        Ok(OpenClBackend {
            info,
            device: found.device,
            platform_version,
            cals,
            shape,
            kernels: HashMap::new(),
            sink: Arc::new(Arrivals::default()),
            objects: HashMap::new(),
            next_id: 1,
            next_token: 1,
            pending: HashMap::new(),
            clock,
            ready: Vec::new(),
            last_build_log: None,
            pass_released: true,
            orphans: Vec::new(),
            readback: None,
            backing: HashMap::new(),
            maps: HashMap::new(),
            destructors,
        })
    }

    /// The log of the last `clBuildProgram`, failed or not (empty logs are `None`).
    pub fn last_build_log(&self) -> Option<&str> {
        self.last_build_log.as_deref()
    }

    /// The spin kernel's calibration.
    pub fn calibration(&self) -> Option<&Calibration> {
        self.calibration_of("spin")
    }

    /// The calibration of timed kernel `name`, when this backend made one.
    pub fn calibration_of(&self, name: &str) -> Option<&Calibration> {
        self.cals.iter().find(|(n, _)| *n == name).map(|(_, c)| c)
    }

    pub fn clock(&self) -> &ClockMap {
        &self.clock
    }

    /// `CL_EVENT_REFERENCE_COUNT` of a lab event (a debugging aid: the spec calls
    /// the value stale the moment it is returned).
    pub fn event_refcount(&self, obj: ObjId) -> Result<u32, DriverError> {
        calls::event_refcount(self.live_handle(obj, ObjKind::Event)?)
    }

    /// gpulab's own profiling events not yet released (their command is running).
    pub fn private_events_outstanding(&self) -> usize {
        self.pending
            .values()
            .filter(|p| p.private.is_some())
            .count()
    }

    /// A call naming an object the lab already released to zero references (an
    /// `# expect-error` double release, say) goes to the driver as written. The
    /// handle may point to freed memory and the ICD loader dereferences it first, so
    /// the worker may die of it: that crash stays in the worker and is reported with
    /// its signal, which is the honest answer. A made-up `CL_INVALID_MEM_OBJECT`
    /// would be gpulab's answer, not the driver's. Tests may turn this off.
    pub fn set_pass_released_handles(&mut self, pass: bool) {
        self.pass_released = pass;
    }

    /// Moves callback arrivals into notices; releases private events whose
    /// profiling info arrived and frees host memory of completed commands.
    fn collect(&mut self) {
        let arrivals = self.sink.take();
        for a in &arrivals {
            if let Arrival::Completed {
                token,
                stamps: Some(s),
                ..
            } = a
                && let Some(p) = self.pending.get(token)
            {
                self.clock.observe(p.h0, p.h1, s.queued);
            }
        }
        for a in arrivals {
            match a {
                Arrival::Destroyed { obj, t_ns } => {
                    // The spec lets the host memory of a USE_HOST_PTR buffer be reused
                    // once its destructor callback ran.
                    drop(self.backing.remove(&obj));
                    self.ready.push(Notice::Destroyed { obj, t_ns })
                }
                Arrival::Released {
                    seq,
                    t_ns,
                    status,
                    released,
                } => self.ready.push(Notice::Callback {
                    call_seq: seq,
                    t_ns,
                    what: format!(
                        "the event reached {}; the callback's clReleaseMemObject returned {}",
                        if status == 0 {
                            "CL_COMPLETE".to_string()
                        } else {
                            errors::name(status)
                        },
                        errors::name(released)
                    ),
                }),
                Arrival::Completed { token, stamps, .. } => {
                    let Some(p) = self.pending.remove(&token) else {
                        continue;
                    };
                    if let Some(ev) = p.private {
                        // SAFETY: gpulab's own event, released once, after its callback
                        // (the last use of it) has run.
                        let _ = unsafe { release_event(ev) };
                    }
                    drop(p.host);
                    let Some(s) = stamps else { continue };
                    let host = |d: u64| self.clock.to_host(d).unwrap_or(0);
                    self.ready.push(Notice::Span {
                        call_seq: p.seq,
                        queue: p.queue,
                        name: p.name.to_string(),
                        queued_ns: host(s.queued),
                        begin_ns: host(s.start),
                        end_ns: host(s.end.max(s.start)),
                    });
                }
            }
        }
    }
}

impl Backend for OpenClBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn read_back(&mut self) -> Option<f64> {
        let (host, size) = self.readback.take()?;
        // SAFETY: `size` is the size `host` was made with, for the read.
        unsafe { host.pattern_share(size) }
    }

    fn clock_error_ns(&self) -> Option<u64> {
        self.clock.error_ns()
    }

    fn call(
        &mut self,
        seq: u64,
        api: Api,
        operands: &[Operand],
        want_event: bool,
    ) -> Result<Outcome, DriverError> {
        let out = self.dispatch(seq, api, operands, want_event);
        self.collect();
        out
    }

    fn drain(&mut self) -> Vec<Notice> {
        self.collect();
        std::mem::take(&mut self.ready)
    }

    fn destruction_watched(&self) -> Vec<ObjKind> {
        self.destructors.kinds()
    }

    fn notes(&self) -> Vec<String> {
        let d = self.destructors;
        if d.buffers && !d.contexts && self.platform_version >= (3, 0) {
            vec![format!(
                "contexts: gpulab does not ask {} to say when it destroys a context: with a \
                 context and a buffer destructor callback both registered, this driver's \
                 clReleaseContext sometimes never returns (measured without gpulab: 5 of \
                 52 runs of tests/watch/cl_context_churn.c on driver 580.159.04); claims \
                 on a context's destruction are inconclusive here",
                self.info.platform
            )]
        } else {
            Vec::new()
        }
    }

    fn settle(&mut self, timeout_ms: u64) {
        let deadline =
            gpulab_host::clock::now_ns().saturating_add(timeout_ms.saturating_mul(1_000_000));
        loop {
            self.collect();
            if self.pending.is_empty() || gpulab_host::clock::now_ns() >= deadline {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

impl Drop for OpenClBackend {
    fn drop(&mut self) {
        self.collect();
        for (_, p) in self.pending.drain() {
            if let Some(ev) = p.private {
                // SAFETY: gpulab's own event; its callback (if still to come) gets the
                // event from the implementation, not from this reference.
                let _ = unsafe { release_event(ev) };
            }
            // The command may still be running and reading or writing this memory.
            std::mem::forget(p.host);
        }
        std::mem::forget(std::mem::take(&mut self.orphans));
        // A buffer that was never destroyed may still point into its host memory.
        for (_, b) in self.backing.drain() {
            std::mem::forget(b);
        }
        // Lab objects are never released here: a leak the script made is the lesson,
        // and the worker's exit hands the memory back.
    }
}

#[cfg(test)]
mod destructors {
    use super::*;

    /// NVIDIA's OpenCL keeps the buffers' callbacks and loses the contexts'
    /// (the pair deadlocks its clReleaseContext); other platforms keep both
    /// where their version has them.
    #[test]
    fn nvidia_gets_no_context_destructor_callback() {
        let nvidia = Destructors::for_platform("NVIDIA CUDA", (3, 0));
        assert_eq!(nvidia.kinds(), vec![ObjKind::Buffer]);
        let pocl = Destructors::for_platform("Portable Computing Language", (3, 0));
        assert_eq!(pocl.kinds(), vec![ObjKind::Buffer, ObjKind::Context]);
        let old = Destructors::for_platform("Portable Computing Language", (1, 2));
        assert_eq!(old.kinds(), vec![ObjKind::Buffer]);
        assert!(Destructors::for_platform("any", (1, 0)).kinds().is_empty());
    }
}
