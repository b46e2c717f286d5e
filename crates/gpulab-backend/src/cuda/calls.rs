//! One script line, one driver call: the dispatch from `Api` to `cuda*` → `cu*`.
//! The only extra driver calls are the two events gpulab records around a kernel,
//! copy or memset to time it (named in the catalog's driver column).

use std::ffi::c_void;

use cudarc::driver::result::{self, stream::StreamKind};
use cudarc::driver::sys;

use super::load::GPULAB_BAD_OPERANDS;
use super::{CudaBackend, Entry, Pending, spin};
use crate::{DriverError, ObjId, Operand, Outcome};
use gpulab_events::ObjKind;
use gpulab_events::api::{Api, ClFlag, KernelSpec};
use gpulab_host::clock::now_ns;

pub(super) fn bad(what: &str) -> DriverError {
    DriverError {
        code: GPULAB_BAD_OPERANDS,
        name: format!("GPULAB_BAD_OPERANDS ({what})"),
    }
}

/// A status gpulab answers itself, before the driver is asked: the call would do
/// what no lab may do to a shared GPU, or to the worker's own memory.
pub const GPULAB_REFUSED: i64 = -90_003;

pub(super) fn refused(why: String) -> DriverError {
    DriverError {
        code: GPULAB_REFUSED,
        name: format!("GPULAB_REFUSED ({why})"),
    }
}

/// The device limit a call names (`cudaLimitMallocHeapSize`, …).
fn limit_at(ops: &[Operand], i: usize) -> Result<sys::CUlimit, DriverError> {
    match ops.get(i) {
        Some(Operand::Flag(ClFlag::LimitMallocHeapSize)) => {
            Ok(sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE)
        }
        Some(Operand::Flag(ClFlag::LimitStackSize)) => Ok(sys::CUlimit::CU_LIMIT_STACK_SIZE),
        Some(Operand::Flag(ClFlag::LimitPrintfFifoSize)) => {
            Ok(sys::CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE)
        }
        _ => Err(bad("expected a device limit")),
    }
}

pub(super) fn bytes_at(ops: &[Operand], i: usize) -> Result<u64, DriverError> {
    match ops.get(i) {
        Some(Operand::Bytes(b)) => Ok(*b),
        _ => Err(bad("expected a size")),
    }
}

pub(super) fn ms_at(ops: &[Operand], i: usize) -> Result<f64, DriverError> {
    match ops.get(i) {
        Some(Operand::Ms(ms)) => Ok(*ms),
        _ => Err(bad("expected a duration")),
    }
}

pub(super) fn size(bytes: u64) -> Result<usize, DriverError> {
    usize::try_from(bytes).map_err(|_| bad("size does not fit this host"))
}

impl CudaBackend {
    /// The raw handle of operand `i`, of `kind`. Released objects are passed as
    /// written (a double `cudaFree` must reach the driver, which answers it);
    /// an id gpulab never handed out is 0, the null handle.
    pub(super) fn raw(
        &self,
        ops: &[Operand],
        i: usize,
        kind: ObjKind,
    ) -> Result<(ObjId, u64), DriverError> {
        let Some(Operand::Obj(id)) = ops.get(i) else {
            return Err(bad("expected an object"));
        };
        match self.objects.get(id) {
            Some(e) if e.kind == kind => Ok((*id, e.raw)),
            Some(_) => Err(bad("object of another kind")),
            None => Ok((*id, 0)),
        }
    }

    pub(super) fn created(&mut self, kind: ObjKind, raw: u64, bytes: u64) -> Outcome {
        let id = self.next_id;
        self.next_id += 1;
        let device = self.devices.current;
        self.objects.insert(
            id,
            Entry {
                kind,
                raw,
                bytes,
                device,
            },
        );
        Outcome {
            created: Some(id),
            bytes,
            returned: None,
        }
    }

    pub(super) fn bytes_of(&self, id: ObjId) -> u64 {
        self.objects.get(&id).map_or(0, |e| e.bytes)
    }

    /// The device `id` was made on (the lab's own for an unknown id).
    pub(super) fn device_of(&self, id: ObjId) -> i32 {
        self.objects.get(&id).map_or(self.ordinal, |e| e.device)
    }

    /// Records a begin event, does `work` on `stream`, records an end event, and
    /// keeps both for `collect`. Without events (creation failed) the work still runs.
    pub(super) fn timed(
        &mut self,
        seq: u64,
        queue: ObjId,
        stream: sys::CUstream,
        name: &'static str,
        asked_ms: Option<f64>,
        work: impl FnOnce() -> Result<(), DriverError>,
    ) -> Result<Outcome, DriverError> {
        let queued_ns = now_ns();
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let begin = result::event::create(flags).unwrap_or(std::ptr::null_mut());
        let end = result::event::create(flags).unwrap_or(std::ptr::null_mut());
        // SAFETY: our events; `stream` is the lab's live stream (or the one the
        // driver will reject, and so report).
        let events = !begin.is_null()
            && !end.is_null()
            && unsafe { result::event::record(begin, stream) }.is_ok();
        let r = work();
        // SAFETY: as above.
        let recorded = events && r.is_ok() && unsafe { result::event::record(end, stream) }.is_ok();
        if recorded {
            self.pending.push(Pending {
                seq,
                queue,
                name,
                asked_ms,
                queued_ns,
                begin,
                end,
            });
        } else {
            // SAFETY: our events (or null, which the driver rejects harmlessly).
            unsafe {
                let _ = result::event::destroy(begin);
                let _ = result::event::destroy(end);
            }
        }
        r.map(|()| Outcome::default())
    }

    #[expect(
        clippy::too_many_lines,
        reason = "a catalog: one arm per CUDA call a lab can make"
    )]
    pub(super) fn dispatch(
        &mut self,
        seq: u64,
        api: Api,
        ops: &[Operand],
    ) -> Result<Outcome, DriverError> {
        use ObjKind as K;
        let stream = |raw: u64| raw as usize as sys::CUstream;
        let event = |raw: u64| raw as usize as sys::CUevent;
        match api {
            Api::CudaMalloc => {
                let bytes = bytes_at(ops, 0)?;
                // SAFETY: the backend's context is current.
                let p = unsafe { result::malloc_sync(size(bytes)?) }?;
                Ok(self.created(K::Buffer, p, bytes))
            }
            Api::CudaFree => {
                let (id, p) = self.raw(ops, 0, K::Buffer)?;
                // SAFETY: `p` is the pointer the lab allocated (or already freed:
                // the driver checks device pointers and answers INVALID_VALUE).
                unsafe { result::free_sync(p) }?;
                self.managed.remove(&id);
                Ok(Outcome::default())
            }
            Api::CudaMallocAsync => {
                let bytes = bytes_at(ops, 0)?;
                let (_, s) = self.raw(ops, 1, K::Stream)?;
                // SAFETY: `s` is the lab's stream.
                let p = unsafe { result::malloc_async(stream(s), size(bytes)?) }?;
                Ok(self.created(K::Buffer, p, bytes))
            }
            Api::CudaFreeAsync => {
                let (_, p) = self.raw(ops, 0, K::Buffer)?;
                let (_, s) = self.raw(ops, 1, K::Stream)?;
                // SAFETY: as for cudaFree; ordering against other streams is the lab's.
                unsafe { result::free_async(p, stream(s)) }?;
                Ok(Outcome::default())
            }
            Api::CudaStreamCreate => {
                let s = result::stream::create(StreamKind::Default)?;
                Ok(self.created(K::Stream, s as usize as u64, 0))
            }
            Api::CudaStreamDestroy => {
                let (_, s) = self.raw(ops, 0, K::Stream)?;
                // SAFETY: the lab's stream; destroying twice is the lab's own mistake,
                // passed to the driver as written.
                unsafe { result::stream::destroy(stream(s)) }?;
                Ok(Outcome::default())
            }
            Api::CudaEventCreate => {
                let e = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
                Ok(self.created(K::Event, e as usize as u64, 0))
            }
            Api::CudaEventRecord => {
                let (_, e) = self.raw(ops, 0, K::Event)?;
                let (_, s) = self.raw(ops, 1, K::Stream)?;
                // SAFETY: the lab's event and stream.
                unsafe { result::event::record(event(e), stream(s)) }?;
                Ok(Outcome::default())
            }
            Api::CudaEventSynchronize => {
                let (_, e) = self.raw(ops, 0, K::Event)?;
                // SAFETY: the lab's event.
                unsafe { result::event::synchronize(event(e)) }?;
                Ok(Outcome::default())
            }
            Api::CudaEventQuery => {
                let (_, e) = self.raw(ops, 0, K::Event)?;
                // SAFETY: the lab's event. CUDA_ERROR_NOT_READY is reported as the
                // driver's answer; it does not end the lab.
                unsafe { result::event::query(event(e)) }?;
                Ok(Outcome::default())
            }
            Api::CudaEventDestroy => {
                let (_, e) = self.raw(ops, 0, K::Event)?;
                // SAFETY: the lab's event.
                unsafe { result::event::destroy(event(e)) }?;
                Ok(Outcome::default())
            }
            Api::CudaStreamWaitEvent => {
                let (_, s) = self.raw(ops, 0, K::Stream)?;
                let (_, e) = self.raw(ops, 1, K::Event)?;
                let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
                // SAFETY: the lab's stream and event.
                unsafe { result::stream::wait_event(stream(s), event(e), flags) }?;
                Ok(Outcome::default())
            }
            Api::CudaStreamSynchronize => {
                let (_, s) = self.raw(ops, 0, K::Stream)?;
                // SAFETY: the lab's stream.
                unsafe { result::stream::synchronize(stream(s)) }?;
                Ok(Outcome::default())
            }
            Api::CudaDeviceSynchronize => {
                result::ctx::synchronize()?;
                Ok(Outcome::default())
            }
            Api::CudaLaunchKernel => {
                let (qid, s) = self.raw(ops, 0, K::Stream)?;
                let spec = match ops.get(1) {
                    Some(Operand::Kernel(k)) => KernelSpec::lookup(k),
                    _ => None,
                };
                let spec = spec.ok_or_else(|| bad("unknown kernel"))?;
                let func = self.function(spec.name)?;
                let mut bufs = Vec::with_capacity(spec.buffers);
                for i in 0..spec.buffers {
                    let (bid, p) = self.raw(ops, 2 + i, K::Buffer)?;
                    bufs.push((p, self.bytes_of(bid)));
                }
                // A timed kernel has one block per SM (two can run side by side);
                // copy and pattern take as many blocks as keep the SMs busy.
                let (cycles, grid, asked_ms) = if spec.timed {
                    let ms = ms_at(ops, 2 + bufs.len())?;
                    (Some(self.cal.cycles(ms)), self.cal.sms, Some(ms))
                } else {
                    (None, self.cal.sms.saturating_mul(8), None)
                };
                self.timed(seq, qid, stream(s), spec.name, asked_ms, || {
                    // SAFETY: `func` is the loaded function of `spec`, whose
                    // signature is launch's layout for these buffers; `s` is the
                    // lab's stream and each buffer holds its bytes (a freed one is
                    // the lab's point).
                    unsafe { spin::launch(func, stream(s), grid, &bufs, cycles) }
                })
            }
            Api::CudaMemcpyAsync => {
                let (hid, h) = self.raw(ops, 0, K::HostBuffer)?;
                let (bid, p) = self.raw(ops, 1, K::Buffer)?;
                let (qid, s) = self.raw(ops, 2, K::Stream)?;
                let n = size(self.bytes_of(hid).min(self.bytes_of(bid)))?;
                self.timed(seq, qid, stream(s), "memcpy DtoH", None, || {
                    // SAFETY: `h` is host memory (pinned, or `malloc`'s) of at least `n`
                    // bytes the lab holds, `p` a device allocation of at least `n` bytes. (cudarc's
                    // result layer copies into a slice; the lab's memory is a raw
                    // pointer, and may already be freed, which is the lab's point.)
                    let dst = h as usize as *mut c_void;
                    // SAFETY: as said above: `h` host memory, `p` device memory, `n` bytes.
                    unsafe { sys::cuMemcpyDtoHAsync_v2(dst, p, n, stream(s)) }.result()?;
                    Ok(())
                })
            }
            Api::CudaMemcpyAsyncToDevice => {
                let (bid, p) = self.raw(ops, 0, K::Buffer)?;
                let (hid, h) = self.raw(ops, 1, K::HostBuffer)?;
                let (qid, s) = self.raw(ops, 2, K::Stream)?;
                let n = size(self.bytes_of(hid).min(self.bytes_of(bid)))?;
                self.timed(seq, qid, stream(s), "memcpy HtoD", None, || {
                    // SAFETY: `p` is a device allocation of at least `n` bytes, `h`
                    // host memory (pinned, or `malloc`'s) of at least `n` bytes the lab
                    // holds (raw, as for the copy to the host).
                    let src = h as usize as *const c_void;
                    // SAFETY: as said above: `p` device memory, `h` host memory, `n` bytes.
                    unsafe { sys::cuMemcpyHtoDAsync_v2(p, src, n, stream(s)) }.result()?;
                    Ok(())
                })
            }
            Api::CudaMemsetAsync => {
                let (bid, p) = self.raw(ops, 0, K::Buffer)?;
                let (qid, s) = self.raw(ops, 1, K::Stream)?;
                let n = size(self.bytes_of(bid))?;
                self.timed(seq, qid, stream(s), "memset", None, || {
                    // SAFETY: `p` is a device allocation of `n` bytes.
                    unsafe { result::memset_d8_async(p, 0, n, stream(s)) }?;
                    Ok(())
                })
            }
            Api::CudaMallocHost => {
                let bytes = bytes_at(ops, 0)?;
                let mut h = std::ptr::null_mut();
                // SAFETY: a valid out-pointer. `cudaMallocHost` is cuMemAllocHost; the
                // result layer's `malloc_host` calls cuMemHostAlloc, another call.
                unsafe { sys::cuMemAllocHost_v2(&mut h, size(bytes)?) }.result()?;
                Ok(self.created(K::HostBuffer, h as usize as u64, bytes))
            }
            Api::CudaFreeHost => {
                let (_, h) = self.raw(ops, 0, K::HostBuffer)?;
                // SAFETY: the pinned allocation the lab made.
                unsafe { result::free_host(h as usize as *mut c_void) }?;
                Ok(Outcome::default())
            }
            Api::CudaMemPoolSetAttribute => {
                let mut v = bytes_at(ops, 0)?;
                let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
                // SAFETY: RELEASE_THRESHOLD is a cuuint64_t read from `v`.
                unsafe { result::mem_pool::set_attribute(self.pool, attr, (&raw mut v).cast()) }?;
                Ok(Outcome::default())
            }
            Api::CudaMemPoolTrimTo => {
                let keep = size(bytes_at(ops, 0)?)?;
                // SAFETY: the device's default pool.
                unsafe { result::mem_pool::trim_to(self.pool, keep) }?;
                Ok(Outcome::default())
            }
            Api::CudaMemGetInfo => {
                let (free, _) = result::mem_get_info()?;
                Ok(Outcome {
                    returned: Some(free as f64 / (1024.0 * 1024.0)),
                    ..Outcome::default()
                })
            }
            Api::CudaEventElapsedTime => {
                let (_, a) = self.raw(ops, 0, K::Event)?;
                let (_, b) = self.raw(ops, 1, K::Event)?;
                let mut ms = 0f32;
                // SAFETY: a valid out-pointer; the lab's events (the driver
                // answers one without timing or not yet recorded).
                unsafe { sys::cuEventElapsedTime_v2(&mut ms, event(a), event(b)) }.result()?;
                Ok(Outcome {
                    returned: Some(f64::from(ms)),
                    ..Outcome::default()
                })
            }
            Api::CudaEventCreateWithFlags => {
                let mut flags = 0;
                let words: &[ClFlag] = match ops.first() {
                    Some(Operand::Flags(fs)) => fs,
                    Some(Operand::Flag(f)) => std::slice::from_ref(f),
                    _ => &[],
                };
                for f in words {
                    flags |= match f {
                        ClFlag::EventBlockingSync => {
                            sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32
                        }
                        ClFlag::EventDisableTiming => {
                            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
                        }
                        _ => 0,
                    };
                }
                let mut e = std::ptr::null_mut();
                // SAFETY: a valid out-pointer; the flags are cuEventCreate's own bits.
                unsafe { sys::cuEventCreate(&mut e, flags) }.result()?;
                Ok(self.created(K::Event, e as usize as u64, 0))
            }
            Api::CudaDeviceSetLimit => {
                let limit = limit_at(ops, 0)?;
                let bytes = size(bytes_at(ops, 1)?)?;
                // SAFETY: a limit the driver defines, set on the current context.
                unsafe { sys::cuCtxSetLimit(limit, bytes) }.result()?;
                Ok(Outcome::default())
            }
            Api::CudaDeviceGetLimit => {
                let limit = limit_at(ops, 0)?;
                let mut bytes = 0usize;
                // SAFETY: a valid out-pointer; a limit the driver defines.
                unsafe { sys::cuCtxGetLimit(&mut bytes, limit) }.result()?;
                Ok(Outcome {
                    returned: Some(bytes as f64 / (1024.0 * 1024.0)),
                    ..Outcome::default()
                })
            }
            other => self
                .dispatch_memory(seq, other, ops)
                .or_else(|| self.dispatch_graph(seq, other, ops))
                .or_else(|| self.dispatch_peer(other, ops))
                .or_else(|| self.dispatch_host(seq, other, ops))
                .unwrap_or_else(|| Err(bad(&format!("{} is not a CUDA call", other.name())))),
        }
    }
}
