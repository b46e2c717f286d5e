//! The CUDA backend: cudarc's raw driver bindings (`driver::sys`), one driver call
//! per script line. Lab objects are raw handles in gpulab's table; cudarc's safe
//! types are not used for them because they free on drop (a `CudaSlice` with
//! `cuMemFreeAsync`), which would change the lesson. The primary context is
//! retained at open, as the runtime API does on its first call, and never released
//! by gpulab: the worker's exit hands everything back.
//!
//! Device spans come from a pair of gpulab's own CUDA events recorded around each
//! kernel, copy and memset, mapped to host time by `timing::EventClock`.

mod calls;
mod graph;
mod host;
pub mod load;
mod memory;
mod peer;
pub mod spin;
mod timing;

use std::collections::HashMap;

use cudarc::driver::result::{self, stream::StreamKind};
use cudarc::driver::sys;

use self::load::guard;
use self::spin::{Calibration, Module, PtxKey};
use self::timing::EventClock;
use super::{
    Backend, BackendError, DeviceInfo, DeviceKind, DriverError, Notice, ObjId, Operand, Outcome,
};
use gpulab_events::api::Api;
use gpulab_events::{BackendKind, ObjKind};
use gpulab_events::{CudaMemory, PoolMemory};

/// A lab object: its raw handle (device pointer, stream, event or host pointer as
/// an integer), its bytes, and whether the lab still holds it.
struct Entry {
    kind: ObjKind,
    raw: u64,
    bytes: u64,
    /// The device that was current when it was made (`cudaSetDevice`).
    device: i32,
}

/// Device work whose end event has not completed yet.
struct Pending {
    seq: u64,
    queue: ObjId,
    name: &'static str,
    /// What a timed kernel was asked to take, ms.
    asked_ms: Option<f64>,
    queued_ns: u64,
    begin: sys::CUevent,
    end: sys::CUevent,
}

/// The module of the kernels that call `malloc`.
enum HeapModule {
    Ptx(String),
    /// Not readied (the lab launches no such kernel), or NVRTC could not
    /// compile it: a launch of its kernel says why, no other lab is kept
    /// from running.
    Unavailable(String),
    Loaded(spin::Functions),
}

/// Dropping it frees nothing on purpose: lab objects are never freed behind the
/// script's back (a leak is the lesson), and the worker's exit hands all device
/// memory back.
pub struct CudaBackend {
    info: DeviceInfo,
    /// The device's ordinal, as memory locations name it.
    ordinal: i32,
    /// The device and its primary context, as graph calls name them.
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    pool: sys::CUmemoryPool,
    /// Every kernel's function but the heap's, loaded at open (`spin::load`).
    funcs: spin::Functions,
    /// The heap kernel's module: its PTX, read or compiled at open when the
    /// lab launches the kernel, until its first launch loads it
    /// (`spin::HEAP_SOURCE` says why then).
    heap: HeapModule,
    /// The lab's own pools (`cudaMemPoolCreate`) not yet destroyed, oldest first.
    pools: Vec<ObjId>,
    /// Host memory of each `cudaHostRegister`, kept until its unregister.
    registered: HashMap<ObjId, Box<[u8]>>,
    /// Host memory of each `malloc`, kept until its `free`.
    pageable: host::Pageable,
    /// Managed allocations not yet freed: the host may write these (`memset`).
    managed: std::collections::HashSet<ObjId>,
    /// The host memory the last call copied into synchronously, and how many
    /// bytes: `read_back` checks it.
    readback: Option<(u64, usize)>,
    /// Bytes mapped into each virtual address range (`cuMemMap`), until unmapped.
    mapped: HashMap<ObjId, u64>,
    /// Each graph's last node: the next node added to it depends on it.
    graph_tail: HashMap<ObjId, sys::CUgraphNode>,
    /// The run has made a graph: the device's graph memory is read after each line.
    graphs_made: bool,
    cal: Calibration,
    clock: EventClock,
    objects: HashMap<ObjId, Entry>,
    next_id: ObjId,
    pending: Vec<Pending>,
    ready: Vec<Notice>,
    /// A sticky error was seen: the context is gone, every call now fails.
    lost: Option<DriverError>,
    /// The cached spin calibration this run uses, until a timed kernel shows it
    /// no longer fits (then it is removed, and the next run calibrates anew).
    cal_file: Option<std::path::PathBuf>,
    /// The last `cuMemGetInfo` (free, total) and the device-wide used bytes the
    /// worker had read when it was taken.
    device_info: Option<(u64, u64, u64)>,
    /// The other devices the lab made current (`cudaSetDevice`), and which is.
    devices: peer::Devices,
}

// SAFETY: CUDA driver handles may be used from any thread once the context is
// current there; the backend is used by one thread at a time (`&mut self`) and
// makes its context current on that thread in `open`, the only thread that calls it.
unsafe impl Send for CudaBackend {}

/// True when tests must not skip for lack of a CUDA device (`GPULAB_REQUIRE_CUDA=1`).
pub fn tests_require_cuda() -> bool {
    std::env::var("GPULAB_REQUIRE_CUDA").is_ok_and(|v| v == "1")
}

fn setup<E: Into<DriverError>>(what: &str) -> impl Fn(E) -> BackendError + '_ {
    move |e| BackendError::Setup(format!("CUDA {what}: {}", e.into()))
}

fn cstr(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// `Some(i)` for an index, else the first device whose name contains `sel`.
fn pick(sel: Option<&str>, names: &[String]) -> Result<usize, BackendError> {
    let Some(sel) = sel else { return Ok(0) };
    if let Ok(i) = sel.trim().parse::<usize>() {
        return if i < names.len() {
            Ok(i)
        } else {
            Err(BackendError::Unavailable {
                what: format!("CUDA device {i}"),
                why: format!("this machine has {} CUDA device(s)", names.len()),
            })
        };
    }
    let low = sel.to_ascii_lowercase();
    names
        .iter()
        .position(|n| n.to_ascii_lowercase().contains(&low))
        // Every CUDA device is a GPU, as `doctor` prints its type.
        .or_else(|| (low.trim() == "gpu").then_some(0))
        .ok_or_else(|| BackendError::Unavailable {
            what: format!("CUDA device `{sel}`"),
            why: format!("no CUDA device matches; found: {}", names.join(", ")),
        })
}

impl CudaBackend {
    /// Opens a device by index or name substring (`--device`), retains its primary
    /// context, loads the spin kernel and calibrates it. A missing driver is
    /// `BackendError::Unavailable` ("no CUDA driver"), never a panic.
    pub fn open(selector: Option<&str>) -> Result<Self, BackendError> {
        Self::open_for(selector, &[])
    }

    /// As `open`, and readies the module of each kernel of `kernels` that
    /// calls the device's `malloc` (the ones a lab's script launches): its PTX
    /// read or compiled now, so no script line hides a compile, and no lab
    /// that launches none pays for it.
    pub fn open_for(
        selector: Option<&str>,
        kernels: &[&'static gpulab_events::api::KernelSpec],
    ) -> Result<Self, BackendError> {
        gpulab_host::clock::phase("worker: backend opening");
        load::driver_present()?;
        gpulab_host::clock::phase("worker: libcuda loaded");
        let heap = kernels.iter().any(|k| k.device_heap);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Self::open_inner(selector, heap)
        }))
            .unwrap_or_else(|_| {
                Err(BackendError::Setup(
                    "CUDA: the driver library lacks a symbol gpulab needs (cudarc panicked); update the NVIDIA driver".into(),
                ))
            })
    }

    fn open_inner(selector: Option<&str>, heap: bool) -> Result<Self, BackendError> {
        let (index, dev, name) = Self::device(selector)?;
        let attr = |a: sys::CUdevice_attribute| {
            // SAFETY: `dev` is a valid device.
            unsafe { result::device::get_attribute(dev, a) }.unwrap_or(0)
        };
        use sys::CUdevice_attribute as A;
        let cc = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        );
        let sms = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).max(1) as u32;
        let clock_khz = f64::from(attr(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).max(1));
        let mut driver = 0;
        let mut bus = [0u8; 64];
        // SAFETY: valid out-pointers; `bus` holds 64 bytes. (The result layer has
        // neither call.)
        unsafe {
            let _ = sys::cuDriverGetVersion(&mut driver);
            let _ = sys::cuDeviceGetPCIBusId(bus.as_mut_ptr().cast(), 64, dev);
        }
        // SAFETY: `dev` is a valid device.
        let total = unsafe { result::device::total_mem(dev) }.unwrap_or(0);
        // SAFETY: `dev` is a valid device; the primary context is shared with any
        // runtime-API code in the process, as a CUDA program would have it.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(setup("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: `ctx` was just retained.
        unsafe { result::ctx::set_current(ctx) }.map_err(setup("cuCtxSetCurrent"))?;
        // SAFETY: `dev` is a valid device.
        let pool = unsafe { result::device::get_default_mem_pool(dev) }
            .map_err(setup("cuDeviceGetDefaultMemPool"))?;
        gpulab_host::clock::phase("worker: primary context");

        let key = PtxKey {
            device: name.clone(),
            cc,
            driver,
        };
        let funcs = Self::kernels(&key)?;
        let heap = match heap.then(|| spin::ptx(&key, Module::Heap)) {
            Some(Ok((ptx, _))) => HeapModule::Ptx(ptx),
            Some(Err(why)) => HeapModule::Unavailable(why),
            None => HeapModule::Unavailable(
                "the heap kernel's module was not readied: the lab's script launches no kernel that calls malloc".into(),
            ),
        };
        let cal = Calibration {
            clock_khz,
            factor: 1.0,
            sms,
        };
        let (cal, clock, cal_file) = Self::calibrated(&funcs, cal, &key)?;
        let info = DeviceInfo {
            name,
            vendor: "NVIDIA".into(),
            driver_version: format!("CUDA {}.{}", driver / 1000, (driver % 1000) / 10),
            platform: format!(
                "CUDA driver API (cudarc), device {index}, sm_{}{}",
                cc.0, cc.1
            ),
            kind: DeviceKind::Gpu,
            total_bytes: Some(total as u64),
            pci_bus_id: Some(cstr(&bus)).filter(|s| !s.is_empty()),
        };
        Ok(CudaBackend {
            info,
            ordinal: index as i32,
            dev,
            ctx,
            pool,
            funcs,
            heap,
            pools: Vec::new(),
            registered: HashMap::new(),
            pageable: HashMap::new(),
            readback: None,
            managed: std::collections::HashSet::new(),
            mapped: HashMap::new(),
            graph_tail: HashMap::new(),
            graphs_made: false,
            cal,
            clock,
            objects: HashMap::new(),
            next_id: 1,
            pending: Vec::new(),
            ready: Vec::new(),
            lost: None,
            cal_file,
            device_info: None,
            devices: peer::Devices::on(index as i32),
        })
    }

    /// `cuInit`, and the device `selector` picks: its index, handle and name.
    fn device(selector: Option<&str>) -> Result<(usize, sys::CUdevice, String), BackendError> {
        result::init().map_err(|e| BackendError::Unavailable {
            what: "no usable CUDA driver".into(),
            why: format!("cuInit returned {}", DriverError::from(e)),
        })?;
        gpulab_host::clock::phase("worker: cuInit");
        let count = result::device::get_count().map_err(setup("cuDeviceGetCount"))?;
        let mut names: Vec<String> = (0..count)
            .map(|i| {
                result::device::get(i)
                    .and_then(result::device::get_name)
                    .unwrap_or_default()
            })
            .collect();
        if names.is_empty() {
            return Err(BackendError::Unavailable {
                what: "no CUDA device".into(),
                why: "the driver loads but lists no device (check nvidia-smi and CUDA_VISIBLE_DEVICES)".into(),
            });
        }
        let index = pick(selector, &names)?;
        let dev = result::device::get(index as i32).map_err(setup("cuDeviceGet"))?;
        Ok((index, dev, names.swap_remove(index)))
    }

    /// The lab kernels, compiled (or read from the cache) for this device and
    /// loaded into the current context.
    fn kernels(key: &PtxKey) -> Result<spin::Functions, BackendError> {
        let (ptx, from_cache) = spin::ptx(key, Module::Lab).map_err(BackendError::Setup)?;
        gpulab_host::clock::phase("worker: kernels compiled or cached");
        let (_module, funcs) = match spin::load(&ptx, Module::Lab) {
            Ok(loaded) => loaded,
            // A cached PTX this driver refuses (written by a newer NVRTC than
            // the driver knows): compile it again, once.
            Err(_) if from_cache => {
                spin::forget_ptx(key, Module::Lab);
                let (ptx, _) = spin::ptx(key, Module::Lab).map_err(BackendError::Setup)?;
                spin::load(&ptx, Module::Lab).map_err(setup("cuModuleLoadData"))?
            }
            Err(e) => return Err(setup("cuModuleLoadData")(e)),
        };
        gpulab_host::clock::phase("worker: module loaded");
        Ok(funcs)
    }

    /// The function of kernel `name`; a heap kernel's module is loaded at its
    /// first launch (the load's time is that launch's, as a lazily loaded
    /// module's is a program's).
    fn function(&mut self, name: &str) -> Result<sys::CUfunction, DriverError> {
        let heap_kernel =
            gpulab_events::api::KernelSpec::lookup(name).is_some_and(|k| k.device_heap);
        if !heap_kernel {
            return self
                .funcs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, f)| *f)
                .ok_or_else(|| calls::bad("kernel not loaded"));
        }
        if let HeapModule::Ptx(ptx) = &self.heap {
            let (_module, funcs) = spin::load(ptx, Module::Heap)?;
            self.heap = HeapModule::Loaded(funcs);
        }
        match &self.heap {
            HeapModule::Loaded(funcs) => funcs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, f)| *f)
                .ok_or_else(|| calls::bad("kernel not loaded")),
            HeapModule::Unavailable(why) => Err(calls::bad(why)),
            HeapModule::Ptx(_) => Err(calls::bad("the heap module did not load")),
        }
    }

    /// The spin kernel's calibration (cached per device, or measured on a
    /// stream of gpulab's own), the event clock, and the cache file it came
    /// from or went to.
    fn calibrated(
        funcs: &spin::Functions,
        mut cal: Calibration,
        key: &PtxKey,
    ) -> Result<(Calibration, EventClock, Option<std::path::PathBuf>), BackendError> {
        let func = funcs
            .iter()
            .find(|(n, _)| *n == "spin")
            .map(|(_, f)| *f)
            .ok_or_else(|| BackendError::Setup("CUDA: the module has no spin kernel".into()))?;
        let private =
            result::stream::create(StreamKind::Default).map_err(setup("cuStreamCreate"))?;
        let clock = EventClock::new(private, 5).map_err(setup("event clock"))?;
        gpulab_host::clock::phase("worker: event clock");
        let cal_file = match spin::cached_factor(key, &cal) {
            Some((factor, path)) => {
                cal.factor = factor;
                Some(path)
            }
            None => {
                let (factor, steady) =
                    calibrate(func, private, &clock, cal).map_err(setup("calibration"))?;
                cal.factor = factor;
                // Only a calibration whose two timings agreed is worth keeping.
                steady.then(|| spin::store_factor(key, &cal)).flatten()
            }
        };
        gpulab_host::clock::phase("worker: spin calibrated");
        // SAFETY: gpulab's own stream, idle after calibration.
        let _ = unsafe { result::stream::destroy(private) };
        Ok((cal, clock, cal_file))
    }

    /// Turns completed span events into notices; forgets spans whose events failed
    /// (a faulted kernel's events never complete).
    fn collect(&mut self) {
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending) {
            // SAFETY: `p.end` is gpulab's own live event.
            let q = unsafe { result::event::query(p.end) };
            if q.is_err_and(|e| e.0 == sys::CUresult::CUDA_ERROR_NOT_READY) {
                keep.push(p);
                continue;
            }
            if q.is_ok()
                && let (Ok(b), Ok(e)) = (self.clock.to_host(p.begin), self.clock.to_host(p.end))
            {
                if let Some(asked) = p.asked_ms
                    && spin::calibration_is_off(asked, e.saturating_sub(b) as f64 / 1e6)
                    && let Some(file) = self.cal_file.take()
                {
                    let _ = std::fs::remove_file(file);
                }
                self.ready.push(Notice::Span {
                    call_seq: p.seq,
                    queue: p.queue,
                    name: p.name.to_string(),
                    queued_ns: p.queued_ns,
                    begin_ns: b,
                    end_ns: e.max(b),
                });
            }
            // SAFETY: both events are ours, and complete or failed: nothing waits on them.
            unsafe {
                let _ = result::event::destroy(p.begin);
                let _ = result::event::destroy(p.end);
            }
        }
        self.pending = keep;
    }
}

/// Runs spin for 20 ms by the clock-rate estimate three times (the first warms
/// up) and returns requested / measured of the last, and whether the last two
/// agreed within 2% (a GPU shared with another program at that moment does not).
fn calibrate(
    func: sys::CUfunction,
    stream: sys::CUstream,
    clock: &EventClock,
    cal: Calibration,
) -> Result<(f64, bool), DriverError> {
    let target = 20.0;
    let mut factor = 1.0;
    let mut timings = Vec::with_capacity(3);
    for _ in 0..3 {
        let a = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        let b = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
        // SAFETY: our event, and gpulab's own stream of the current context.
        unsafe { result::event::record(a, stream) }?;
        // SAFETY: `func` was just loaded, `stream` is gpulab's own; no buffer (0 words).
        unsafe { spin::launch(func, stream, cal.sms, &[(0, 0)], Some(cal.cycles(target))) }?;
        // SAFETY: events and stream are live.
        unsafe {
            result::event::record(b, stream)?;
            result::event::synchronize(b)?;
        }
        let ms = (clock.to_host(b)? as f64 - clock.to_host(a)? as f64) / 1e6;
        // SAFETY: our events, complete.
        unsafe {
            let _ = result::event::destroy(a);
            let _ = result::event::destroy(b);
        }
        if ms > 0.5 {
            factor = target / ms;
        }
        timings.push(ms);
    }
    let steady = match timings.as_slice() {
        [_, a, b] => *b > 0.5 && ((a / b) - 1.0).abs() < 0.02,
        _ => false,
    };
    Ok((factor.clamp(0.05, 20.0), steady))
}

impl Backend for CudaBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn clock_error_ns(&self) -> Option<u64> {
        Some(self.clock.error_ns())
    }

    fn read_back(&mut self) -> Option<f64> {
        let (h, n) = self.readback.take()?;
        // SAFETY: the lab's host memory the call just returned from copying
        // `n` bytes into; no line has run since to free it.
        unsafe { crate::pattern::share_of(h as usize as *const u8, n) }
    }

    fn verify_pattern(&self, obj: ObjId) -> Option<f64> {
        let e = self.objects.get(&obj)?;
        if e.kind != ObjKind::HostBuffer {
            return None;
        }
        let bytes = usize::try_from(e.bytes).ok()?;
        // SAFETY: the host memory of a host buffer, `bytes` long, that the lab
        // still holds: the engine asks only of one its ledger has live.
        unsafe { crate::pattern::share_of(e.raw as usize as *const u8, bytes) }
    }

    fn call(
        &mut self,
        seq: u64,
        api: Api,
        operands: &[Operand],
        // A CUDA launch or copy hands back no event (a script records its own
        // with cudaEventRecord), so a bound result never asks for one.
        _want_event: bool,
    ) -> Result<Outcome, DriverError> {
        let r = guard(api.name(), || self.dispatch(seq, api, operands));
        if let Err(e) = &r
            && load::is_sticky(e.code)
            && self.lost.is_none()
        {
            self.lost = Some(e.clone());
        }
        r
    }

    fn drain(&mut self) -> Vec<Notice> {
        if self.lost.is_none() {
            self.collect();
        }
        std::mem::take(&mut self.ready)
    }

    fn settle(&mut self, timeout_ms: u64) {
        let deadline =
            gpulab_host::clock::now_ns().saturating_add(timeout_ms.saturating_mul(1_000_000));
        while self.lost.is_none()
            && !self.pending.is_empty()
            && gpulab_host::clock::now_ns() < deadline
        {
            self.collect();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn error_ends_run(&self, e: &DriverError) -> bool {
        load::is_sticky(e.code)
    }

    fn context_lost(&self) -> bool {
        self.lost.is_some()
    }

    fn cuda_memory(&mut self, device_used: Option<u64>) -> Option<CudaMemory> {
        if self.lost.is_some() {
            return None;
        }
        let (reserved, used) = pool_memory(self.pool)?;
        // The lab's own pool, when it has exactly one: claims name it as "the
        // custom pool" (`custom_pool_reserved_mib`).
        let custom_pool = match self.pools.as_slice() {
            [id] => self
                .objects
                .get(id)
                .and_then(|e| pool_memory(e.raw as usize as sys::CUmemoryPool))
                .map(|(reserved, used)| PoolMemory { reserved, used }),
            _ => None,
        };
        // The device's graph memory, once the run has made a graph; a driver
        // without the attribute call leaves it out rather than end the worker.
        let graph_mem = if self.graphs_made {
            load::guard("cuDeviceGetGraphMemAttribute", || Ok(self.graph_memory()))
                .ok()
                .flatten()
                .map(|(reserved, used)| PoolMemory { reserved, used })
        } else {
            None
        };
        // cuMemGetInfo costs ~7 µs (H100), as much as the rest of a line's
        // readings: read again only when the device-wide figure moved.
        let (free, total) = match (self.device_info, device_used) {
            (Some((used, free, total)), Some(now)) if used == now => (free, total),
            _ => {
                let (free, total) = result::mem_get_info().ok()?;
                let (free, total) = (free as u64, total as u64);
                self.device_info = device_used.map(|u| (u, free, total));
                (free, total)
            }
        };
        Some(CudaMemory {
            pool_reserved: reserved,
            pool_used: used,
            free,
            total,
            custom_pool,
            graph_mem,
        })
    }
}

/// A pool's reserved and used bytes (`CU_MEMPOOL_ATTR_*_MEM_CURRENT`).
fn pool_memory(pool: sys::CUmemoryPool) -> Option<(u64, u64)> {
    let attr = |a: sys::CUmemPool_attribute| {
        let mut v = 0u64;
        // SAFETY: these two attributes are cuuint64_t, written to `v`; `pool` is the
        // default pool or one of the lab's that is not destroyed.
        let r = unsafe { result::mem_pool::get_attribute(pool, a, (&raw mut v).cast()) };
        r.is_ok().then_some(v)
    };
    use sys::CUmemPool_attribute as P;
    Some((
        attr(P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
        attr(P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_selector_takes_an_index_or_a_name() {
        let names = vec![
            "NVIDIA H100 80GB HBM3".to_string(),
            "NVIDIA A10".to_string(),
        ];
        assert_eq!(pick(None, &names).ok(), Some(0));
        assert_eq!(pick(Some("1"), &names).ok(), Some(1));
        assert_eq!(pick(Some("a10"), &names).ok(), Some(1));
        assert!(pick(Some("2"), &names).is_err());
        assert!(pick(Some("mi300"), &names).is_err());
    }

    #[test]
    fn without_a_driver_open_says_so_and_does_not_panic() {
        if load::driver_present().is_ok() {
            return; // a machine with a GPU: the integration tests cover it
        }
        match CudaBackend::open(None) {
            Err(BackendError::Unavailable { what, .. }) => assert_eq!(what, "no CUDA driver"),
            Err(e) => panic!("expected Unavailable, got {e}"),
            Ok(_) => panic!("opened CUDA without a driver"),
        }
    }
}
