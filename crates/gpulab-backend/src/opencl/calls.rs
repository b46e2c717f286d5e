//! One script line, one raw cl3 call: the dispatch from `Api` to the driver, with
//! the few documented helpers (kernel arguments, destructor and event callbacks).

use std::ffi::{CString, c_void};
use std::ptr;

use cl3::command_queue::{
    enqueue_barrier_with_wait_list, enqueue_copy_buffer, enqueue_fill_buffer, enqueue_map_buffer,
    enqueue_marker_with_wait_list, enqueue_migrate_mem_object, enqueue_read_buffer,
    enqueue_svm_free, enqueue_unmap_mem_object, enqueue_write_buffer, finish, flush,
};
use cl3::context::{
    create_context, release_context, retain_context, set_context_destructor_callback,
};
use cl3::error_codes::{
    CL_INVALID_COMMAND_QUEUE, CL_INVALID_CONTEXT, CL_INVALID_EVENT, CL_INVALID_KERNEL,
    CL_INVALID_MEM_OBJECT, CL_INVALID_PROGRAM, CL_OUT_OF_HOST_MEMORY,
};
use cl3::event::{
    CL_COMPLETE, CL_EVENT_COMMAND_EXECUTION_STATUS, CL_EVENT_REFERENCE_COUNT, create_user_event,
    get_event_info, release_event, retain_event, set_event_callback, set_user_event_status,
    wait_for_events,
};
use cl3::info_type::InfoType;
use cl3::kernel::{create_kernel, release_kernel, retain_kernel};
use cl3::memory::{
    CL_BUFFER_CREATE_TYPE_REGION, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR,
    CL_MEM_COPY_HOST_PTR, CL_MEM_READ_WRITE, CL_MEM_USE_HOST_PTR, CL_MIGRATE_MEM_OBJECT_HOST,
    create_buffer, create_sub_buffer, release_mem_object, retain_mem_object,
    set_mem_object_destructor_callback, svm_alloc, svm_free,
};
use cl3::program::{
    CL_PROGRAM_BUILD_LOG, build_program, create_program_with_source, get_program_build_data,
    release_program, retain_program,
};
use cl3::types::{CL_BLOCKING, CL_NON_BLOCKING, cl_buffer_region, cl_event, cl_int};

use super::callbacks::{self, EventCtx, ObjCtx, wait_ptr};
use super::errors::{GPULAB_BAD_OPERANDS, GPULAB_HOST_ALLOC_FAILED, driver_error};
use super::{Entry, OpenClBackend, Pending, create_profiling_queue, release_queue, spin};
use crate::{DriverError, ObjId, Operand, Outcome};
use gpulab_events::ObjKind;
use gpulab_events::api::{Api, ClFlag, KernelSpec};
use gpulab_host::clock::now_ns;

/// Zeroed host memory from `calloc` (untouched pages stay uncommitted), so a huge
/// request fails as a status instead of aborting the worker.
pub struct HostBuf {
    ptr: *mut c_void,
}

impl HostBuf {
    /// The share of its first `len` bytes' words that hold the pattern.
    ///
    /// # Safety
    /// `len` must be at most the size it was made with.
    pub unsafe fn pattern_share(&self, len: usize) -> Option<f64> {
        // SAFETY: the caller keeps `len` within the allocation.
        unsafe { crate::pattern::share_of(self.ptr.cast::<u8>(), len) }
    }

    pub fn zeroed(len: usize) -> Result<HostBuf, DriverError> {
        // SAFETY: calloc with a nonzero size; a null result is handled below.
        let ptr = unsafe { libc::calloc(len.max(1), 1) };
        if ptr.is_null() {
            return Err(DriverError {
                code: i64::from(GPULAB_HOST_ALLOC_FAILED),
                name: format!("GPULAB_HOST_ALLOC_FAILED ({len} bytes of host memory)"),
            });
        }
        Ok(HostBuf { ptr })
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from calloc and is freed once; a HostBuf a command may
        // still use is `mem::forget`-ed instead of dropped.
        unsafe { libc::free(self.ptr) };
    }
}

fn bad(what: &str) -> DriverError {
    DriverError {
        code: i64::from(GPULAB_BAD_OPERANDS),
        name: format!("GPULAB_BAD_OPERANDS ({what})"),
    }
}

fn invalid_code(kind: ObjKind) -> cl_int {
    match kind {
        ObjKind::Context => CL_INVALID_CONTEXT,
        ObjKind::Queue => CL_INVALID_COMMAND_QUEUE,
        ObjKind::Buffer => CL_INVALID_MEM_OBJECT,
        ObjKind::Program => CL_INVALID_PROGRAM,
        ObjKind::Kernel => CL_INVALID_KERNEL,
        ObjKind::Event => CL_INVALID_EVENT,
        ObjKind::Stream
        | ObjKind::HostBuffer
        | ObjKind::Pool
        | ObjKind::MemHandle
        | ObjKind::VaRange
        | ObjKind::Graph
        | ObjKind::GraphExec
        | ObjKind::Managed => cl3::error_codes::CL_INVALID_VALUE,
    }
}

pub fn event_refcount(ev: *mut c_void) -> Result<u32, DriverError> {
    match get_event_info(ev, CL_EVENT_REFERENCE_COUNT) {
        Ok(InfoType::Uint(n)) => Ok(n),
        Ok(_) => Err(bad("CL_EVENT_REFERENCE_COUNT is not a cl_uint")),
        Err(e) => Err(driver_error(e)),
    }
}

fn ok<T>(r: Result<T, cl_int>) -> Result<T, DriverError> {
    r.map_err(driver_error)
}

impl OpenClBackend {
    /// The handle of a lab object of `kind` the lab still holds a reference on.
    pub(super) fn live_handle(&self, id: ObjId, kind: ObjKind) -> Result<*mut c_void, DriverError> {
        let e = self.objects.get(&id).ok_or_else(|| bad("unknown object"))?;
        if e.kind != kind {
            return Err(bad("object of another kind"));
        }
        if e.refs == 0 && !self.pass_released {
            return Err(driver_error(invalid_code(kind)));
        }
        Ok(e.handle)
    }

    fn arg(
        &self,
        ops: &[Operand],
        i: usize,
        kind: ObjKind,
    ) -> Result<(ObjId, *mut c_void), DriverError> {
        match ops.get(i) {
            Some(Operand::Obj(id)) => Ok((*id, self.live_handle(*id, kind)?)),
            _ => Err(bad("expected an object")),
        }
    }

    fn insert(&mut self, kind: ObjKind, handle: *mut c_void, bytes: u64) -> ObjId {
        let id = self.next_id;
        self.next_id += 1;
        self.objects.insert(
            id,
            Entry {
                kind,
                handle,
                refs: 1,
                bytes,
                svm: false,
            },
        );
        id
    }

    fn created(&mut self, kind: ObjKind, handle: *mut c_void, bytes: u64) -> Outcome {
        Outcome {
            created: Some(self.insert(kind, handle, bytes)),
            bytes,
            returned: None,
        }
    }

    fn refs(&mut self, id: ObjId, delta: i64) {
        if let Some(e) = self.objects.get_mut(&id) {
            e.refs = e.refs.saturating_add_signed(delta);
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "a catalog: one arm per OpenCL call a lab can make"
    )]
    pub(super) fn dispatch(
        &mut self,
        seq: u64,
        api: Api,
        ops: &[Operand],
        want_event: bool,
    ) -> Result<Outcome, DriverError> {
        use ObjKind as K;
        match api {
            Api::ClCreateContext => {
                let ctx = ok(create_context(
                    &[self.device],
                    ptr::null(),
                    None,
                    ptr::null_mut(),
                ))?;
                let out = self.created(K::Context, ctx, 0);
                if self.destructors.contexts
                    && let Some(id) = out.created
                {
                    let data = callbacks::leak(ObjCtx {
                        sink: self.sink.clone(),
                        obj: id,
                    });
                    if set_context_destructor_callback(
                        ctx,
                        Some(callbacks::on_context_destroyed),
                        data,
                    )
                    .is_err()
                    {
                        // SAFETY: the driver refused the registration; `data` is ours.
                        unsafe { callbacks::reclaim::<ObjCtx>(data) };
                    }
                }
                Ok(out)
            }
            Api::ClCreateCommandQueue => {
                let (_, ctx) = self.arg(ops, 0, K::Context)?;
                let out_of_order = matches!(ops.get(1), Some(Operand::Flag(ClFlag::OutOfOrder)));
                let q = ok(create_profiling_queue(
                    ctx,
                    self.device,
                    self.platform_version,
                    out_of_order,
                ))?;
                Ok(self.created(K::Queue, q, 0))
            }
            Api::ClCreateBuffer => {
                let (_, ctx) = self.arg(ops, 0, K::Context)?;
                let Some(&Operand::Bytes(bytes)) = ops.get(1) else {
                    return Err(bad("expected a size"));
                };
                let flag = match ops.get(2) {
                    Some(Operand::Flag(f)) => *f,
                    _ => ClFlag::CopyHostPtr,
                };
                let size =
                    usize::try_from(bytes).map_err(|_| driver_error(CL_OUT_OF_HOST_MEMORY))?;
                // Copying from zeroed host memory makes the implementation commit the
                // allocation now, so memory telemetry sees it at this line. With
                // USE_HOST_PTR the buffer *is* that host memory, kept until destroyed.
                let (flags, host) = match flag {
                    _ if size == 0 => (CL_MEM_READ_WRITE, None),
                    ClFlag::UseHostPtr => (
                        CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                        Some(HostBuf::zeroed(size)?),
                    ),
                    ClFlag::AllocHostPtr => (CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, None),
                    _ => (
                        CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                        Some(HostBuf::zeroed(size)?),
                    ),
                };
                let host_ptr = host.as_ref().map_or(ptr::null_mut(), |h| h.ptr);
                // SAFETY: host_ptr points to `size` readable bytes; with COPY_HOST_PTR
                // they live until the call returns (the copy happens inside it), with
                // USE_HOST_PTR until the buffer's destructor callback (`backing`).
                let mem = ok(unsafe { create_buffer(ctx, flags, size, host_ptr) })?;
                let out = self.created(K::Buffer, mem, bytes);
                if let Some(id) = out.created {
                    self.watch_destroy(mem, id);
                    if flags & CL_MEM_USE_HOST_PTR != 0
                        && let Some(h) = host
                    {
                        self.backing.insert(id, h);
                    }
                }
                Ok(out)
            }
            Api::ClCreateSubBuffer => {
                let (_, parent) = self.arg(ops, 0, K::Buffer)?;
                let (Some(&Operand::Bytes(origin)), Some(&Operand::Bytes(bytes))) =
                    (ops.get(1), ops.get(2))
                else {
                    return Err(bad("expected an origin and a size"));
                };
                let too_big = |_| driver_error(CL_OUT_OF_HOST_MEMORY);
                let region = cl_buffer_region {
                    origin: usize::try_from(origin).map_err(too_big)?,
                    size: usize::try_from(bytes).map_err(too_big)?,
                };
                // SAFETY: `parent` is a live buffer; `region` outlives the call, which
                // reads it only during the call. Flags 0: inherited from the parent.
                let mem = ok(unsafe {
                    create_sub_buffer(
                        parent,
                        0,
                        CL_BUFFER_CREATE_TYPE_REGION,
                        (&raw const region).cast::<c_void>(),
                    )
                })?;
                // The region is the parent's memory: the ledger counts no new bytes,
                // the table keeps the region's size for the commands that use it.
                let id = self.insert(K::Buffer, mem, bytes);
                self.watch_destroy(mem, id);
                Ok(Outcome {
                    created: Some(id),
                    bytes: 0,
                    returned: None,
                })
            }
            Api::ClCreateProgramWithSource => {
                let (_, ctx) = self.arg(ops, 0, K::Context)?;
                let source = match ops.get(1) {
                    Some(Operand::Kernel(k)) => spin::source(k),
                    _ => None,
                };
                let source = source.ok_or_else(|| bad("unknown kernel source"))?;
                let p = ok(create_program_with_source(ctx, &[source]))?;
                Ok(self.created(K::Program, p, 0))
            }
            Api::ClBuildProgram => {
                let (_, p) = self.arg(ops, 0, K::Program)?;
                let r = build_program(p, &[self.device], c"", None, ptr::null_mut());
                self.last_build_log = get_program_build_data(p, self.device, CL_PROGRAM_BUILD_LOG)
                    .ok()
                    .map(|b| {
                        String::from_utf8_lossy(&b)
                            .trim_end_matches('\0')
                            .trim()
                            .to_string()
                    })
                    .filter(|s| !s.is_empty());
                ok(r).map(|()| Outcome::default())
            }
            Api::ClCreateKernel => {
                let (_, p) = self.arg(ops, 0, K::Program)?;
                let spec = match ops.get(1) {
                    Some(Operand::Kernel(k)) => KernelSpec::lookup(k),
                    _ => None,
                };
                let spec = spec.ok_or_else(|| bad("unknown kernel"))?;
                let name = CString::new(spec.name).map_err(|_| bad("kernel name"))?;
                let k = ok(create_kernel(p, &name))?;
                let out = self.created(K::Kernel, k, 0);
                if let Some(id) = out.created {
                    self.kernels.insert(id, spec);
                }
                Ok(out)
            }
            Api::ClEnqueueNDRangeKernel => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let (kid, k) = self.arg(ops, 1, K::Kernel)?;
                let spec = *self
                    .kernels
                    .get(&kid)
                    .ok_or_else(|| bad("unknown kernel"))?;
                let mut bufs = Vec::with_capacity(spec.buffers);
                for i in 0..spec.buffers {
                    let (bid, buf) = self.arg(ops, 2 + i, K::Buffer)?;
                    let e = self.objects.get(&bid);
                    let arg = match e.is_some_and(|e| e.svm) {
                        true => spin::BufArg::Svm(buf),
                        false => spin::BufArg::Mem(buf),
                    };
                    bufs.push((arg, e.map_or(0, |e| e.bytes)));
                }
                let (iters, shape) = if spec.timed {
                    let Some(&Operand::Ms(ms)) = ops.get(2 + bufs.len()) else {
                        return Err(bad("expected a duration"));
                    };
                    let cal = self
                        .calibration_of(spec.name)
                        .ok_or_else(|| bad("the kernel was not calibrated when the run started"))?;
                    let bytes = bufs.iter().map(|(_, b)| b).sum();
                    (Some(cal.iterations_over(ms, bytes)), cal.shape)
                } else {
                    (None, self.shape.bulk())
                };
                let wait = self.wait_list(ops)?;
                ok(spin::set_args(k, &bufs, iters))?;
                let (ev, h0, h1) = ok(spin::enqueue(q, k, shape, &wait))?;
                Ok(self.track(seq, qid, spec.name, ev, h0, h1, None, want_event, false))
            }
            Api::ClEnqueueReadBuffer | Api::ClEnqueueWriteBuffer => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let (bid, buf) = self.arg(ops, 1, K::Buffer)?;
                let Some(&Operand::Bool(blocking)) = ops.get(2) else {
                    return Err(bad("expected CL_TRUE/CL_FALSE"));
                };
                let bytes = self.objects.get(&bid).map_or(0, |e| e.bytes);
                let size =
                    usize::try_from(bytes).map_err(|_| driver_error(CL_OUT_OF_HOST_MEMORY))?;
                let host = HostBuf::zeroed(size)?;
                let flag = if blocking {
                    CL_BLOCKING
                } else {
                    CL_NON_BLOCKING
                };
                let read = api == Api::ClEnqueueReadBuffer;
                let wait = self.wait_list(ops)?;
                let (nw, w) = wait_ptr(&wait);
                let h0 = now_ns();
                // SAFETY: `host` holds `size` bytes and is kept (in `pending`, or leaked)
                // until the command completed; `buf` is a live buffer of `size` bytes;
                // the wait list holds live events and outlives the call.
                let ev = ok(unsafe {
                    if read {
                        enqueue_read_buffer(q, buf, flag, 0, size, host.ptr, nw, w)
                    } else {
                        enqueue_write_buffer(q, buf, flag, 0, size, host.ptr, nw, w)
                    }
                })?;
                let h1 = now_ns();
                let name = if read { "read" } else { "write" };
                // A blocking read has landed: its data is kept for `read_back`
                // to check once the call is timed (the command needs it no more).
                let host = if read && blocking {
                    self.readback = Some((host, size));
                    None
                } else {
                    Some(host)
                };
                Ok(self.track(seq, qid, name, ev, h0, h1, host, want_event, blocking))
            }
            Api::ClEnqueueCopyBuffer => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let (sid, src) = self.arg(ops, 1, K::Buffer)?;
                let (did, dst) = self.arg(ops, 2, K::Buffer)?;
                // The whole of the smaller buffer: a script names no offsets.
                let size = self.size_of(sid)?.min(self.size_of(did)?);
                let wait = self.wait_list(ops)?;
                let (nw, w) = wait_ptr(&wait);
                let h0 = now_ns();
                // SAFETY: live buffers of at least `size` bytes; the wait list holds
                // live events and outlives the call.
                let ev = ok(unsafe { enqueue_copy_buffer(q, src, dst, 0, 0, size, nw, w) })?;
                let h1 = now_ns();
                Ok(self.track(seq, qid, "copy", ev, h0, h1, None, want_event, false))
            }
            Api::ClEnqueueFillBuffer => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let (bid, buf) = self.arg(ops, 1, K::Buffer)?;
                let size = self.size_of(bid)?;
                let wait = self.wait_list(ops)?;
                let (nw, w) = wait_ptr(&wait);
                let pattern = 0u8;
                let h0 = now_ns();
                // SAFETY: the one-byte pattern is copied during the call (the spec lets
                // it be freed on return); `buf` is live; the wait list outlives the call.
                let ev = ok(unsafe {
                    enqueue_fill_buffer(
                        q,
                        buf,
                        (&raw const pattern).cast::<c_void>(),
                        1,
                        0,
                        size,
                        nw,
                        w,
                    )
                })?;
                let h1 = now_ns();
                Ok(self.track(seq, qid, "fill", ev, h0, h1, None, want_event, false))
            }
            Api::ClEnqueueMapBuffer => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let (bid, buf) = self.arg(ops, 1, K::Buffer)?;
                let Some(&Operand::Bool(blocking)) = ops.get(2) else {
                    return Err(bad("expected CL_TRUE/CL_FALSE"));
                };
                let size = self.size_of(bid)?;
                let wait = self.wait_list(ops)?;
                let (nw, w) = wait_ptr(&wait);
                let flag = if blocking {
                    CL_BLOCKING
                } else {
                    CL_NON_BLOCKING
                };
                let mut mapped: *mut c_void = ptr::null_mut();
                let h0 = now_ns();
                // SAFETY: `buf` is a live buffer of `size` bytes; `mapped` receives the
                // pointer; the wait list outlives the call.
                let ev = ok(unsafe {
                    enqueue_map_buffer(
                        q,
                        buf,
                        flag,
                        CL_MAP_READ | CL_MAP_WRITE,
                        0,
                        size,
                        &mut mapped,
                        nw,
                        w,
                    )
                })?;
                let h1 = now_ns();
                self.maps.entry(bid).or_default().push(mapped);
                Ok(self.track(seq, qid, "map", ev, h0, h1, None, want_event, blocking))
            }
            Api::ClEnqueueUnmapMemObject => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let (bid, buf) = self.arg(ops, 1, K::Buffer)?;
                // The newest open mapping; none (an `# expect-error` line) goes to the
                // driver as a null pointer, and the driver answers.
                let mapped = self
                    .maps
                    .get(&bid)
                    .and_then(|m| m.last().copied())
                    .unwrap_or(ptr::null_mut());
                let wait = self.wait_list(ops)?;
                let (nw, w) = wait_ptr(&wait);
                let h0 = now_ns();
                // SAFETY: `buf` is live and `mapped` came from its map (or is null,
                // which the driver refuses); the wait list outlives the call.
                let ev = ok(unsafe { enqueue_unmap_mem_object(q, buf, mapped, nw, w) })?;
                let h1 = now_ns();
                if let Some(m) = self.maps.get_mut(&bid) {
                    m.pop();
                }
                Ok(self.track(seq, qid, "unmap", ev, h0, h1, None, want_event, false))
            }
            Api::ClEnqueueBarrierWithWaitList | Api::ClEnqueueMarkerWithWaitList => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let wait = self.wait_list(ops)?;
                let (nw, w) = wait_ptr(&wait);
                let barrier = api == Api::ClEnqueueBarrierWithWaitList;
                let h0 = now_ns();
                // SAFETY: `q` is live; the wait list holds live events and outlives the call.
                let ev = ok(unsafe {
                    if barrier {
                        enqueue_barrier_with_wait_list(q, nw, w)
                    } else {
                        enqueue_marker_with_wait_list(q, nw, w)
                    }
                })?;
                let h1 = now_ns();
                let name = if barrier { "barrier" } else { "marker" };
                Ok(self.track(seq, qid, name, ev, h0, h1, None, want_event, false))
            }
            Api::ClSetKernelArg => {
                let (_, k) = self.arg(ops, 0, K::Kernel)?;
                let Some(&Operand::Index(index)) = ops.get(1) else {
                    return Err(bad("expected an argument index"));
                };
                let (_, buf) = self.arg(ops, 2, K::Buffer)?;
                ok(spin::set_buffer_arg(k, index, buf)).map(|()| Outcome::default())
            }
            Api::ClCreateUserEvent => {
                let (_, ctx) = self.arg(ops, 0, K::Context)?;
                let ev = ok(create_user_event(ctx))?;
                Ok(self.created(K::Event, ev, 0))
            }
            Api::ClSetUserEventStatus => {
                let (_, ev) = self.arg(ops, 0, K::Event)?;
                ok(set_user_event_status(ev, CL_COMPLETE)).map(|()| Outcome::default())
            }
            Api::ClSetEventCallback => self.release_on_complete(seq, ops),
            Api::ClSVMAlloc
            | Api::ClSVMFree
            | Api::ClEnqueueSVMFree
            | Api::ClSetKernelArgSVMPointer
            | Api::ClEnqueueMigrateMemObjects
            | Api::ClEnqueueMigrateMemObjectsToHost => self.dispatch_svm(seq, api, ops, want_event),
            Api::ClGetEventInfo => {
                let (_, ev) = self.arg(ops, 0, K::Event)?;
                let status = match get_event_info(ev, CL_EVENT_COMMAND_EXECUTION_STATUS) {
                    Ok(InfoType::Int(s)) => s,
                    Ok(_) => return Err(bad("CL_EVENT_COMMAND_EXECUTION_STATUS is not a cl_int")),
                    Err(code) => return Err(driver_error(code)),
                };
                Ok(Outcome {
                    returned: Some(if status == CL_COMPLETE { 1.0 } else { 0.0 }),
                    ..Outcome::default()
                })
            }
            Api::ClFinish => ok(finish(self.arg(ops, 0, K::Queue)?.1)).map(|()| Outcome::default()),
            Api::ClFlush => ok(flush(self.arg(ops, 0, K::Queue)?.1)).map(|()| Outcome::default()),
            Api::ClWaitForEvents => {
                let ids = match ops.first() {
                    Some(Operand::Objs(ids)) => ids.clone(),
                    Some(Operand::Obj(id)) => vec![*id],
                    _ => return Err(bad("expected events")),
                };
                let evs = ids
                    .iter()
                    .map(|&id| self.live_handle(id, K::Event))
                    .collect::<Result<Vec<cl_event>, _>>()?;
                ok(wait_for_events(&evs)).map(|()| Outcome::default())
            }
            Api::ClRetainContext => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Context, 1, |h| unsafe { retain_context(h) })
            }
            // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
            Api::ClRetainCommandQueue => self.lifetime(ops, K::Queue, 1, |h| unsafe {
                cl3::command_queue::retain_command_queue(h)
            }),
            Api::ClRetainMemObject => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Buffer, 1, |h| unsafe { retain_mem_object(h) })
            }
            Api::ClRetainProgram => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Program, 1, |h| unsafe { retain_program(h) })
            }
            Api::ClRetainKernel => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Kernel, 1, |h| unsafe { retain_kernel(h) })
            }
            // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
            Api::ClRetainEvent => self.lifetime(ops, K::Event, 1, |h| unsafe { retain_event(h) }),
            Api::ClReleaseContext => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Context, -1, |h| unsafe { release_context(h) })
            }
            Api::ClReleaseCommandQueue => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Queue, -1, |h| unsafe { release_queue(h) })
            }
            Api::ClReleaseMemObject => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Buffer, -1, |h| unsafe { release_mem_object(h) })
            }
            Api::ClReleaseProgram => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Program, -1, |h| unsafe { release_program(h) })
            }
            Api::ClReleaseKernel => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Kernel, -1, |h| unsafe { release_kernel(h) })
            }
            Api::ClReleaseEvent => {
                // SAFETY: a live handle of this kind the lab holds (`lifetime` checks).
                self.lifetime(ops, K::Event, -1, |h| unsafe { release_event(h) })
            }
            // Validation keeps CUDA calls out of OpenCL labs; this answers anything else.
            other => Err(bad(&format!("{} is not an OpenCL call", other.name()))),
        }
    }

    /// OpenCL 2.x memory: shared virtual memory and migrations.
    fn dispatch_svm(
        &mut self,
        seq: u64,
        api: Api,
        ops: &[Operand],
        want_event: bool,
    ) -> Result<Outcome, DriverError> {
        use ObjKind as K;
        match api {
            Api::ClSVMAlloc => {
                let (_, ctx) = self.arg(ops, 0, K::Context)?;
                let Some(&Operand::Bytes(bytes)) = ops.get(1) else {
                    return Err(bad("expected a size"));
                };
                let size =
                    usize::try_from(bytes).map_err(|_| driver_error(CL_OUT_OF_HOST_MEMORY))?;
                // SAFETY: `ctx` is a live context; READ_WRITE is a valid SVM flag.
                let p = ok(unsafe { svm_alloc(ctx, CL_MEM_READ_WRITE, size, 0) })?;
                let out = self.created(K::Buffer, p, bytes);
                if let Some(e) = out.created.and_then(|id| self.objects.get_mut(&id)) {
                    e.svm = true;
                }
                Ok(out)
            }
            Api::ClSVMFree => {
                let (_, ctx) = self.arg(ops, 0, K::Context)?;
                let (bid, p) = self.svm_arg(ops, 1)?;
                // SAFETY: `p` came from clSVMAlloc on a context of this platform;
                // freeing what a kernel still uses is the lab's point (the spec
                // makes it the program's duty to wait first).
                ok(unsafe { svm_free(ctx, p) })?;
                self.refs(bid, -1);
                Ok(Outcome::default())
            }
            Api::ClEnqueueSVMFree => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let (bid, p) = self.svm_arg(ops, 1)?;
                let wait = self.wait_list(ops)?;
                let (n_wait, wait_ptr) = callbacks::wait_ptr(&wait);
                let pointers = [p.cast_const()];
                let h0 = now_ns();
                // SAFETY: `q` is a live queue, `pointers` one SVM pointer of its
                // context that outlives the call (the implementation copies the
                // list), no callback: the implementation frees it.
                let ev = ok(unsafe {
                    enqueue_svm_free(
                        q,
                        1,
                        pointers.as_ptr(),
                        None,
                        ptr::null_mut(),
                        n_wait,
                        wait_ptr,
                    )
                })?;
                let h1 = now_ns();
                self.refs(bid, -1);
                Ok(self.track(seq, qid, "svm free", ev, h0, h1, None, false, false))
            }
            Api::ClSetKernelArgSVMPointer => {
                let (_, k) = self.arg(ops, 0, K::Kernel)?;
                let Some(&Operand::Index(index)) = ops.get(1) else {
                    return Err(bad("expected an argument index"));
                };
                let (_, p) = self.svm_arg(ops, 2)?;
                ok(spin::set_buf_arg(k, index, spin::BufArg::Svm(p))).map(|()| Outcome::default())
            }
            _ => {
                let (qid, q) = self.arg(ops, 0, K::Queue)?;
                let (_, mem) = self.arg(ops, 1, K::Buffer)?;
                let flags = match api {
                    Api::ClEnqueueMigrateMemObjectsToHost => CL_MIGRATE_MEM_OBJECT_HOST,
                    _ => 0,
                };
                let wait = self.wait_list(ops)?;
                let (n_wait, wait_ptr) = callbacks::wait_ptr(&wait);
                let mems = [mem];
                let h0 = now_ns();
                // SAFETY: `q` a live queue, `mems` one live buffer of its context,
                // read during the call only; the flags are the spec's.
                let ev = ok(unsafe {
                    enqueue_migrate_mem_object(q, 1, mems.as_ptr(), flags, n_wait, wait_ptr)
                })?;
                let h1 = now_ns();
                Ok(self.track(seq, qid, "migrate", ev, h0, h1, None, want_event, false))
            }
        }
    }

    /// Argument `i`, a buffer of shared virtual memory.
    fn svm_arg(&self, ops: &[Operand], i: usize) -> Result<(ObjId, *mut c_void), DriverError> {
        let (id, p) = self.arg(ops, i, ObjKind::Buffer)?;
        match self.objects.get(&id) {
            Some(e) if e.svm => Ok((id, p)),
            _ => Err(bad("a cl_mem where an SVM pointer goes")),
        }
    }

    /// The bytes of a buffer in the table (a sub-buffer: its region's).
    fn size_of(&self, id: ObjId) -> Result<usize, DriverError> {
        let bytes = self.objects.get(&id).map_or(0, |e| e.bytes);
        usize::try_from(bytes).map_err(|_| driver_error(CL_OUT_OF_HOST_MEMORY))
    }

    /// The handles of an enqueue's `wait [...]` events (empty without one).
    fn wait_list(&self, ops: &[Operand]) -> Result<Vec<cl_event>, DriverError> {
        match ops.iter().find_map(|o| match o {
            Operand::Wait(ids) => Some(ids),
            _ => None,
        }) {
            Some(ids) => ids
                .iter()
                .map(|&id| self.live_handle(id, ObjKind::Event))
                .collect(),
            None => Ok(Vec::new()),
        }
    }

    /// Registers the destructor callback that tells when the driver destroyed a
    /// buffer (adds no reference).
    fn watch_destroy(&mut self, mem: *mut c_void, id: ObjId) {
        if !self.destructors.buffers {
            return;
        }
        let data = callbacks::leak(ObjCtx {
            sink: self.sink.clone(),
            obj: id,
        });
        // SAFETY: `data` is a leaked ObjCtx the callback takes ownership of.
        let r =
            unsafe { set_mem_object_destructor_callback(mem, callbacks::on_mem_destroyed, data) };
        if r.is_err() {
            // SAFETY: the driver refused the registration; `data` is ours.
            unsafe { callbacks::reclaim::<ObjCtx>(data) };
        }
    }

    /// One retain or release on the lab's behalf. The closures are `unsafe` calls
    /// whose one precondition (a handle of the right kind the lab holds a
    /// reference on) `arg` checked just before.
    /// `clSetEventCallback(ev, CL_COMPLETE, clReleaseMemObject, buf)`: the lab
    /// hands its reference to `buf` to a callback that releases it when the
    /// event completes (`callbacks::on_complete_release`).
    fn release_on_complete(&mut self, seq: u64, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (_, ev) = self.arg(ops, 0, ObjKind::Event)?;
        let (bid, mem) = self.arg(ops, 3, ObjKind::Buffer)?;
        let data = callbacks::leak(callbacks::ReleaseCtx {
            sink: self.sink.clone(),
            seq,
            mem,
        });
        match set_event_callback(ev, CL_COMPLETE, callbacks::on_complete_release, data) {
            Ok(()) => {
                self.refs(bid, -1);
                Ok(Outcome::default())
            }
            Err(code) => {
                // SAFETY: `data` came from `leak`, and the driver refused it.
                unsafe { callbacks::reclaim::<callbacks::ReleaseCtx>(data) };
                Err(driver_error(code))
            }
        }
    }

    fn lifetime(
        &mut self,
        ops: &[Operand],
        kind: ObjKind,
        delta: i64,
        call: impl FnOnce(*mut c_void) -> Result<(), cl_int>,
    ) -> Result<Outcome, DriverError> {
        let (id, h) = self.arg(ops, 0, kind)?;
        ok(call(h))?;
        self.refs(id, delta);
        Ok(Outcome::default())
    }

    /// Registers the completion callback of an enqueue's event and, when the lab
    /// binds it, enters the event in the table (refcount exactly 1: gpulab adds none).
    #[allow(clippy::too_many_arguments)]
    fn track(
        &mut self,
        seq: u64,
        queue: ObjId,
        name: &'static str,
        ev: cl_event,
        h0: u64,
        h1: u64,
        host: Option<HostBuf>,
        want_event: bool,
        blocking: bool,
    ) -> Outcome {
        let token = self.next_token;
        self.next_token += 1;
        let data = callbacks::leak(EventCtx {
            sink: self.sink.clone(),
            token,
        });
        let private = (!want_event).then_some(ev);
        let registered =
            set_event_callback(ev, CL_COMPLETE, callbacks::on_event_complete, data).is_ok();
        if registered {
            self.pending.insert(
                token,
                Pending {
                    seq,
                    queue,
                    name,
                    h0,
                    h1,
                    private,
                    host,
                },
            );
        } else {
            // SAFETY: the driver refused the registration; `data` is ours.
            unsafe { callbacks::reclaim::<EventCtx>(data) };
            if let Some(ev) = private {
                // SAFETY: gpulab's own event; without a callback there is nothing to read.
                let _ = unsafe { release_event(ev) };
            }
            match host {
                Some(h) if !blocking => self.orphans.push(h),
                h => drop(h),
            }
        }
        if want_event {
            self.created(ObjKind::Event, ev, 0)
        } else {
            Outcome::default()
        }
    }
}
