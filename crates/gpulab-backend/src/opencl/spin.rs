//! The kernels of `labs/kernels/`: their sources, their arguments, the launch
//! shape, and the calibration that turns a timed kernel's (`spin`, `spin2`)
//! requested duration into loop iterations for this device.
//!
//! Calibration runs at `open` on a private context, queue, program and buffer,
//! all released before `open` returns, so the lab starts from a clean memory
//! baseline. It times the kernel at a few iteration counts with profiling and fits
//! `t = launch + iters / rate` by least squares.

use std::ffi::c_void;
use std::ptr;

use cl3::command_queue::{enqueue_nd_range_kernel, finish};
use cl3::context::{create_context, release_context};
use cl3::event::{release_event, wait_for_events};
use cl3::kernel::{create_kernel, release_kernel, set_kernel_arg, set_kernel_arg_svm_pointer};
use cl3::memory::{CL_MEM_COPY_HOST_PTR, CL_MEM_READ_WRITE, create_buffer, release_mem_object};
use cl3::program::{build_program, create_program_with_source, release_program};
use cl3::types::{
    cl_command_queue, cl_context, cl_device_id, cl_event, cl_int, cl_kernel, cl_mem, cl_program,
    cl_ulong,
};

use super::callbacks::{Stamps, read_stamps};
use super::{create_profiling_queue, release_queue};
use crate::DeviceKind;
use gpulab_host::clock::now_ns;

use gpulab_events::api::KernelSpec;

/// Each kernel's OpenCL C source, by name; each file defines that one kernel.
const SOURCES: &[(&str, &str)] = &[
    ("spin", include_str!("../../kernels/spin.cl")),
    ("spin2", include_str!("../../kernels/spin2.cl")),
    ("copy", include_str!("../../kernels/copy.cl")),
    ("pattern", include_str!("../../kernels/pattern.cl")),
];

/// The source of kernel `name` (`None` for a name `KERNELS` does not list).
pub fn source(name: &str) -> Option<&'static str> {
    SOURCES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// Bytes of the private buffer calibration touches (one page).
const CAL_BYTES: usize = 4096;
/// The spin kernel touches one word per page of this size.
const PAGE_BYTES: u64 = 4096;
/// The buffer whose touching is timed on a CPU device, per page.
const TOUCH_BYTES: usize = 64 << 20;

/// How many work-items a spin launch uses: one work-group's worth on a GPU (the
/// time is the loop, not the launch), a single work-item on a CPU device, where a
/// work-group runs its items one after another on one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub global: usize,
    pub local: usize,
}

impl Shape {
    /// The shape of a kernel whose time is its work (`copy`, `pattern`): on a GPU,
    /// 1,024 work-groups share the words; on a CPU device, as a spin.
    pub fn bulk(self) -> Shape {
        match self.global {
            1 => self,
            n => Shape {
                global: n * 1024,
                local: self.local,
            },
        }
    }

    pub fn for_device(kind: DeviceKind, max_work_group: usize) -> Shape {
        let n = match kind {
            DeviceKind::Cpu => 1,
            _ => max_work_group.clamp(1, 64),
        };
        Shape {
            global: n,
            local: n,
        }
    }
}

/// `t_ms = launch_ms + pages * page_ms + iters / iters_per_ms`, fitted at open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    pub shape: Shape,
    pub iters_per_ms: f64,
    pub launch_ms: f64,
    /// What touching one 4 KiB page of the lab's buffer adds (the kernel writes
    /// a word in each before it spins): measured on CPU devices, where one
    /// work-item touches them all (a 1 GiB buffer added ~100 ms to a 200 ms spin
    /// on PoCL); 0 on GPUs, where 64 work-items share the pages.
    pub page_ms: f64,
    /// Wall time calibration took, build included.
    pub took_ms: f64,
}

impl Calibration {
    pub fn iterations(&self, ms: f64) -> cl_ulong {
        self.iterations_over(ms, 0)
    }

    /// Loop iterations for a spin of `ms` that first touches buffers of `bytes`
    /// in all.
    pub fn iterations_over(&self, ms: f64, bytes: u64) -> cl_ulong {
        if !ms.is_finite() || ms <= 0.0 {
            return 0;
        }
        let touch_ms = bytes.div_ceil(PAGE_BYTES) as f64 * self.page_ms;
        let it = ((ms - self.launch_ms - touch_ms).max(0.0) * self.iters_per_ms).round();
        if it >= u64::MAX as f64 {
            u64::MAX
        } else {
            it as u64
        }
    }
}

/// One timed kernel run of calibration: host stamps around the enqueue call and
/// the command's profiling stamps, so the clock map can learn from it too.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub iters: u64,
    pub h0: u64,
    pub h1: u64,
    pub stamps: Stamps,
}

impl Run {
    fn ms(&self) -> f64 {
        self.stamps.end.saturating_sub(self.stamps.start) as f64 / 1e6
    }
}

/// A kernel's buffer argument: a `cl_mem`, or a pointer of shared virtual
/// memory (`clSVMAlloc`), which C sets through another call.
#[derive(Debug, Clone, Copy)]
pub enum BufArg {
    Mem(cl_mem),
    Svm(*mut c_void),
}

/// Sets buffer argument `index` to `buf` with the call its kind takes.
pub fn set_buf_arg(k: cl_kernel, index: u32, buf: BufArg) -> Result<(), cl_int> {
    match buf {
        BufArg::Mem(mem) => set_buffer_arg(k, index, mem),
        // SAFETY: arguments below the kernel's buffer count are `__global uint *`;
        // `p` is an SVM pointer of the kernel's context (or freed, the lab's point:
        // the call takes the value, never reads through it).
        BufArg::Svm(p) => unsafe { set_kernel_arg_svm_pointer(k, index, p) },
    }
}

/// Sets buffer argument `index` (a kernel's buffers come first), the one
/// `clSetKernelArg` a script line may make itself.
pub fn set_buffer_arg(k: cl_kernel, index: u32, buf: cl_mem) -> Result<(), cl_int> {
    // SAFETY: arguments below the kernel's buffer count are `__global uint *` (a
    // cl_mem); the pointer is to a local of that size, read during the call only.
    unsafe {
        set_kernel_arg(
            k,
            index,
            size_of::<cl_mem>(),
            (&raw const buf).cast::<c_void>(),
        )
    }
}

/// Sets every argument of a launch in the layout all of `labs/kernels/*.cl`
/// share: the buffers, then the loop's iterations for a timed kernel, then each
/// buffer's size in 32-bit words. `bufs` are live buffers with their bytes.
pub fn set_args(
    k: cl_kernel,
    bufs: &[(BufArg, u64)],
    iters: Option<cl_ulong>,
) -> Result<(), cl_int> {
    let mut index = 0;
    for &(buf, _) in bufs {
        set_buf_arg(k, index, buf)?;
        index += 1;
    }
    let ulongs = iters
        .into_iter()
        .chain(bufs.iter().map(|&(_, bytes)| bytes / 4));
    for value in ulongs {
        // SAFETY: the arguments after the buffers are `ulong`; the pointer is to a
        // local of exactly that size, read during the call only.
        unsafe { set_kernel_arg(k, index, size_of::<cl_ulong>(), (&raw const value).cast()) }?;
        index += 1;
    }
    Ok(())
}

/// Enqueues one spin launch; returns the event (caller owns it) and host stamps.
/// `wait` is the launch's event wait list (empty for none).
pub fn enqueue(
    q: cl_command_queue,
    k: cl_kernel,
    shape: Shape,
    wait: &[cl_event],
) -> Result<(cl_event, u64, u64), cl_int> {
    let global = [shape.global];
    let local = [shape.local];
    let h0 = now_ns();
    let (n_wait, wait_ptr) = super::callbacks::wait_ptr(wait);
    // SAFETY: q and k are live handles; the size arrays and the wait list outlive
    // the call and the kernel's arguments were set by `set_args`.
    let ev = unsafe {
        enqueue_nd_range_kernel(
            q,
            k,
            1,
            ptr::null(),
            global.as_ptr(),
            local.as_ptr(),
            n_wait,
            wait_ptr,
        )
    }?;
    Ok((ev, h0, now_ns()))
}

/// gpulab's own calibration objects; released on every exit path.
#[derive(Default)]
struct Private {
    ctx: Option<cl_context>,
    q: Option<cl_command_queue>,
    prog: Option<cl_program>,
    k: Option<cl_kernel>,
    buf: Option<cl_mem>,
}

impl Drop for Private {
    fn drop(&mut self) {
        // SAFETY: each handle was created by `calibrate` and is released once here;
        // release failures are ignored (nothing else holds these objects).
        unsafe {
            if let Some(q) = self.q {
                let _ = finish(q);
            }
            if let Some(k) = self.k.take() {
                let _ = release_kernel(k);
            }
            if let Some(p) = self.prog.take() {
                let _ = release_program(p);
            }
            if let Some(b) = self.buf.take() {
                let _ = release_mem_object(b);
            }
            if let Some(q) = self.q.take() {
                let _ = release_queue(q);
            }
            if let Some(c) = self.ctx.take() {
                let _ = release_context(c);
            }
        }
    }
}

fn timed(
    q: cl_command_queue,
    k: cl_kernel,
    buf: cl_mem,
    launch: Launch,
    iters: u64,
) -> Result<Run, String> {
    timed_bytes(q, k, buf, launch, iters, CAL_BYTES as u64)
}

/// One run of `iters` loop iterations that first touches `bytes` of `buf`, which
/// is passed for every buffer the kernel takes (`spin2` touches it twice).
fn timed_bytes(
    q: cl_command_queue,
    k: cl_kernel,
    buf: cl_mem,
    launch: Launch,
    iters: u64,
    bytes: u64,
) -> Result<Run, String> {
    let bufs = vec![(BufArg::Mem(buf), bytes); launch.buffers];
    set_args(k, &bufs, Some(iters)).map_err(|e| step("clSetKernelArg", e))?;
    let (ev, h0, h1) =
        enqueue(q, k, launch.shape, &[]).map_err(|e| step("clEnqueueNDRangeKernel", e))?;
    let waited = wait_for_events(&[ev]);
    let stamps = read_stamps(ev);
    // SAFETY: `ev` is calibration's own event, released once, after its info was read.
    let _ = unsafe { release_event(ev) };
    waited.map_err(|e| step("clWaitForEvents", e))?;
    let stamps = stamps.ok_or("calibration: no profiling info for the spin kernel")?;
    Ok(Run {
        iters,
        h0,
        h1,
        stamps,
    })
}

fn step(call: &str, code: cl_int) -> String {
    format!("calibration: {call} failed: {}", super::errors::name(code))
}

/// What calibration launches: the shape, and how many buffer arguments the
/// kernel takes (calibration passes its one buffer for each).
#[derive(Debug, Clone, Copy)]
struct Launch {
    shape: Shape,
    buffers: usize,
}

/// Builds the timed kernel `kernel` on a private context and fits its speed on
/// `device`.
pub fn calibrate(
    device: cl_device_id,
    platform_version: (u32, u32),
    shape: Shape,
    kernel: &KernelSpec,
) -> Result<(Calibration, Vec<Run>), String> {
    let t0 = now_ns();
    let launch = Launch {
        shape,
        buffers: kernel.buffers,
    };
    let (Some(source), Ok(name)) = (source(kernel.name), std::ffi::CString::new(kernel.name))
    else {
        return Err(format!(
            "calibration: no source for kernel `{}`",
            kernel.name
        ));
    };
    let mut p = Private::default();
    let ctx = create_context(&[device], ptr::null(), None, ptr::null_mut())
        .map_err(|e| step("clCreateContext", e))?;
    p.ctx = Some(ctx);
    p.q = Some(
        create_profiling_queue(ctx, device, platform_version, false)
            .map_err(|e| step("clCreateCommandQueue", e))?,
    );
    let prog = create_program_with_source(ctx, &[source])
        .map_err(|e| step("clCreateProgramWithSource", e))?;
    p.prog = Some(prog);
    build_program(prog, &[device], c"", None, ptr::null_mut())
        .map_err(|e| step("clBuildProgram", e))?;
    p.k = Some(create_kernel(prog, &name).map_err(|e| step("clCreateKernel", e))?);
    // SAFETY: no host pointer is passed, so the flags need none.
    let buf = unsafe { create_buffer(ctx, CL_MEM_READ_WRITE, CAL_BYTES, ptr::null_mut()) }
        .map_err(|e| step("clCreateBuffer", e))?;
    p.buf = Some(buf);
    let (q, k) = match (p.q, p.k) {
        (Some(q), Some(k)) => (q, k),
        _ => return Err("calibration: setup incomplete".into()),
    };

    let mut runs = vec![timed(q, k, buf, launch, 1_000)?]; // warm-up (first-launch JIT)
    // A busy host only ever makes a run take longer (the kernel's threads lose
    // the CPU), so each point is the quickest of `REPEATS` runs, and a fit that
    // still makes no sense is measured again: under load a single run once timed
    // 100,000 iterations at 3.7 ms and 270,000 at 0.33 ms.
    let mut attempt = 0;
    let (launch_ms, ms_per_iter) = loop {
        attempt += 1;
        let points = fit_points(q, k, buf, launch, &mut runs)?;
        let (launch_ms, ms_per_iter) = fit(&points);
        if ms_per_iter.is_finite() && ms_per_iter > 0.0 {
            break (launch_ms, ms_per_iter);
        }
        if attempt >= ATTEMPTS {
            return Err(format!(
                "calibration: the spin kernel's time does not grow with its loop \
                 ({ATTEMPTS} tries; last points: {points:?})"
            ));
        }
    };
    let page_ms = if shape.global == 1 {
        touch_ms_per_page(ctx, q, k, launch, &mut runs)?
    } else {
        0.0
    };
    drop(p);
    let cal = Calibration {
        shape,
        iters_per_ms: 1.0 / ms_per_iter,
        launch_ms: launch_ms.max(0.0),
        page_ms,
        took_ms: (now_ns() - t0) as f64 / 1e6,
    };
    Ok((cal, runs))
}

/// What one page of a lab's buffer adds to a spin on a single work-item: a
/// spin of 0 iterations over `TOUCH_BYTES`, against the same over one page. The
/// buffer is written first, as a lab's (COPY_HOST_PTR) is, so its pages are
/// in memory; the quickest of `REPEATS` counts, as load only lengthens a run.
fn touch_ms_per_page(
    ctx: cl_context,
    q: cl_command_queue,
    k: cl_kernel,
    launch: Launch,
    runs: &mut Vec<Run>,
) -> Result<f64, String> {
    let host = vec![0u8; TOUCH_BYTES];
    // SAFETY: `host` holds TOUCH_BYTES bytes, copied at creation (COPY_HOST_PTR).
    let big = unsafe {
        create_buffer(
            ctx,
            CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
            TOUCH_BYTES,
            host.as_ptr().cast_mut().cast(),
        )
    }
    .map_err(|e| step("clCreateBuffer", e))?;
    let mut timed_over = |bytes: u64| -> Result<f64, String> {
        let mut best = f64::INFINITY;
        for _ in 0..REPEATS {
            let r = timed_bytes(q, k, big, launch, 0, bytes)?;
            runs.push(r);
            best = best.min(r.ms());
        }
        Ok(best)
    };
    let measured = timed_over(PAGE_BYTES).and_then(|one| {
        let all = timed_over(TOUCH_BYTES as u64)?;
        // Every buffer argument was the big buffer: each of its pages was touched
        // once per buffer the kernel takes.
        let pages = (TOUCH_BYTES as u64 / PAGE_BYTES) as f64;
        let touches = (pages - 1.0) * launch.buffers.max(1) as f64;
        Ok(((all - one) / touches).max(0.0))
    });
    // SAFETY: the buffer was created above and no command uses it any more.
    let _ = unsafe { release_mem_object(big) };
    measured
}

/// Runs per calibration point; the quickest counts.
const REPEATS: usize = 2;
/// Whole calibrations tried before giving up.
const ATTEMPTS: usize = 3;

/// The quickest of `REPEATS` runs of `iters` (every run kept in `runs`).
fn quickest(
    q: cl_command_queue,
    k: cl_kernel,
    buf: cl_mem,
    launch: Launch,
    iters: u64,
    runs: &mut Vec<Run>,
) -> Result<Run, String> {
    let mut best: Option<Run> = None;
    for _ in 0..REPEATS {
        let r = timed(q, k, buf, launch, iters)?;
        runs.push(r);
        if best.is_none_or(|b| r.ms() < b.ms()) {
            best = Some(r);
        }
    }
    best.ok_or_else(|| "calibration: no run".to_string())
}

/// A probe long enough to time (>= 2 ms), then points near 10 and 40 ms.
fn fit_points(
    q: cl_command_queue,
    k: cl_kernel,
    buf: cl_mem,
    launch: Launch,
    runs: &mut Vec<Run>,
) -> Result<Vec<Run>, String> {
    let mut iters: u64 = 100_000;
    let probe = loop {
        let r = quickest(q, k, buf, launch, iters, runs)?;
        if r.ms() >= 2.0 || iters >= 1 << 40 {
            break r;
        }
        iters = iters.saturating_mul(if r.ms() < 0.2 { 10 } else { 4 });
    };
    let rate = probe.iters as f64 / probe.ms().max(1e-3);
    let mut points = vec![probe];
    for target_ms in [10.0, 40.0] {
        points.push(quickest(
            q,
            k,
            buf,
            launch,
            (rate * target_ms) as u64,
            runs,
        )?);
    }
    Ok(points)
}

/// Least squares `ms = a + b * iters`; returns `(a, b)`.
fn fit(points: &[Run]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(sx, sy), r| (sx + r.iters as f64, sy + r.ms()));
    let (mx, my) = (sx / n, sy / n);
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(sxy, sxx), r| {
        let dx = r.iters as f64 - mx;
        (sxy + dx * (r.ms() - my), sxx + dx * dx)
    });
    let b = if sxx > 0.0 {
        sxy / sxx
    } else {
        my / mx.max(1.0)
    };
    (my - b * mx, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_map_to_iterations() {
        let c = Calibration {
            shape: Shape {
                global: 1,
                local: 1,
            },
            iters_per_ms: 1000.0,
            launch_ms: 0.5,
            page_ms: 0.001,
            took_ms: 0.0,
        };
        assert_eq!(c.iterations(10.5), 10_000);
        assert_eq!(c.iterations(0.1), 0);
        assert_eq!(c.iterations(f64::NAN), 0);
        // 1,000 pages of 4 KiB at 1 us each take 1 ms of the 10.5 requested.
        assert_eq!(c.iterations_over(10.5, 1000 * 4096), 9_000);
        // A partial page is a page touched.
        assert_eq!(c.iterations_over(10.5, 999 * 4096 + 1), 9_000);
        // A buffer that takes longer to touch than the spin asked: no loop.
        assert_eq!(c.iterations_over(10.5, 100_000 * 4096), 0);
        assert_eq!(Shape::for_device(DeviceKind::Gpu, 1024).global, 64);
        assert_eq!(Shape::for_device(DeviceKind::Cpu, 4096).global, 1);
    }
}
