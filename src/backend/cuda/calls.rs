//! One script line, one driver call: the dispatch from `Api` to `cuda*` → `cu*`.
//! The only extra driver calls are the two events gpulab records around a kernel,
//! copy or memset to time it (named in the catalog's driver column).

use std::ffi::c_void;

use cudarc::driver::sys;

use super::load::{GPULAB_BAD_OPERANDS, ck};
use super::{CudaBackend, Entry, Pending, spin};
use crate::backend::{DriverError, ObjId, Operand, Outcome};
use crate::clock::now_ns;
use crate::lab::{Api, ObjKind};

fn bad(what: &str) -> DriverError {
    DriverError {
        code: GPULAB_BAD_OPERANDS,
        name: format!("GPULAB_BAD_OPERANDS ({what})"),
    }
}

fn bytes_at(ops: &[Operand], i: usize) -> Result<u64, DriverError> {
    match ops.get(i) {
        Some(Operand::Bytes(b)) => Ok(*b),
        _ => Err(bad("expected a size")),
    }
}

fn ms_at(ops: &[Operand], i: usize) -> Result<f64, DriverError> {
    match ops.get(i) {
        Some(Operand::Ms(ms)) => Ok(*ms),
        _ => Err(bad("expected a duration")),
    }
}

fn size(bytes: u64) -> Result<usize, DriverError> {
    usize::try_from(bytes).map_err(|_| bad("size does not fit this host"))
}

impl CudaBackend {
    /// The raw handle of operand `i`, of `kind`. Released objects are passed as
    /// written (a double `cudaFree` must reach the driver, which answers it);
    /// an id gpulab never handed out is 0, the null handle.
    fn raw(&self, ops: &[Operand], i: usize, kind: ObjKind) -> Result<(ObjId, u64), DriverError> {
        let Some(Operand::Obj(id)) = ops.get(i) else {
            return Err(bad("expected an object"));
        };
        match self.objects.get(id) {
            Some(e) if e.kind == kind => Ok((*id, e.raw)),
            Some(_) => Err(bad("object of another kind")),
            None => Ok((*id, 0)),
        }
    }

    fn created(&mut self, kind: ObjKind, raw: u64, bytes: u64) -> Outcome {
        let id = self.next_id;
        self.next_id += 1;
        self.objects.insert(id, Entry { kind, raw, bytes });
        Outcome {
            created: Some(id),
            bytes,
        }
    }

    fn bytes_of(&self, id: ObjId) -> u64 {
        self.objects.get(&id).map_or(0, |e| e.bytes)
    }

    /// Records a begin event, does `work` on `stream`, records an end event, and
    /// keeps both for `collect`. Without events (creation failed) the work still runs.
    fn timed(
        &mut self,
        seq: u64,
        queue: ObjId,
        stream: sys::CUstream,
        name: &'static str,
        work: impl FnOnce() -> Result<(), DriverError>,
    ) -> Result<Outcome, DriverError> {
        let queued_ns = now_ns();
        let (mut begin, mut end) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers; the context is current; `stream` is the lab's
        // live stream (or the one the driver will reject, and so report).
        let events = unsafe {
            sys::cuEventCreate(&mut begin, 0) == sys::CUresult::CUDA_SUCCESS
                && sys::cuEventCreate(&mut end, 0) == sys::CUresult::CUDA_SUCCESS
                && sys::cuEventRecord(begin, stream) == sys::CUresult::CUDA_SUCCESS
        };
        let r = work();
        // SAFETY: as above.
        let recorded = events
            && r.is_ok()
            && unsafe { sys::cuEventRecord(end, stream) } == sys::CUresult::CUDA_SUCCESS;
        if recorded {
            self.pending.push(Pending {
                seq,
                queue,
                name,
                queued_ns,
                begin,
                end,
            });
        } else {
            // SAFETY: our events (or null, which the driver rejects harmlessly).
            unsafe {
                let _ = sys::cuEventDestroy_v2(begin);
                let _ = sys::cuEventDestroy_v2(end);
            }
        }
        r.map(|()| Outcome::default())
    }

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
                let mut p = 0;
                // SAFETY: a valid out-pointer; the context is current.
                ck(unsafe { sys::cuMemAlloc_v2(&mut p, size(bytes)?) })?;
                Ok(self.created(K::Buffer, p, bytes))
            }
            Api::CudaFree => {
                let (_, p) = self.raw(ops, 0, K::Buffer)?;
                // SAFETY: `p` is the pointer the lab allocated (or already freed:
                // the driver checks device pointers and answers INVALID_VALUE).
                ck(unsafe { sys::cuMemFree_v2(p) }).map(|()| Outcome::default())
            }
            Api::CudaMallocAsync => {
                let bytes = bytes_at(ops, 0)?;
                let (_, s) = self.raw(ops, 1, K::Stream)?;
                let mut p = 0;
                // SAFETY: a valid out-pointer; `s` is the lab's stream.
                ck(unsafe { sys::cuMemAllocAsync(&mut p, size(bytes)?, stream(s)) })?;
                Ok(self.created(K::Buffer, p, bytes))
            }
            Api::CudaFreeAsync => {
                let (_, p) = self.raw(ops, 0, K::Buffer)?;
                let (_, s) = self.raw(ops, 1, K::Stream)?;
                // SAFETY: as for cudaFree; ordering against other streams is the lab's.
                ck(unsafe { sys::cuMemFreeAsync(p, stream(s)) }).map(|()| Outcome::default())
            }
            Api::CudaStreamCreate => {
                let mut s = std::ptr::null_mut();
                // SAFETY: a valid out-pointer.
                ck(unsafe { sys::cuStreamCreate(&mut s, 0) })?;
                Ok(self.created(K::Stream, s as usize as u64, 0))
            }
            Api::CudaStreamDestroy => {
                let (_, s) = self.raw(ops, 0, K::Stream)?;
                // SAFETY: the lab's stream; destroying twice is the lab's own mistake,
                // passed to the driver as written.
                ck(unsafe { sys::cuStreamDestroy_v2(stream(s)) }).map(|()| Outcome::default())
            }
            Api::CudaEventCreate => {
                let mut e = std::ptr::null_mut();
                // SAFETY: a valid out-pointer.
                ck(unsafe { sys::cuEventCreate(&mut e, 0) })?;
                Ok(self.created(K::Event, e as usize as u64, 0))
            }
            Api::CudaEventRecord => {
                let (_, e) = self.raw(ops, 0, K::Event)?;
                let (_, s) = self.raw(ops, 1, K::Stream)?;
                // SAFETY: the lab's event and stream.
                ck(unsafe { sys::cuEventRecord(event(e), stream(s)) }).map(|()| Outcome::default())
            }
            Api::CudaEventSynchronize => {
                let (_, e) = self.raw(ops, 0, K::Event)?;
                // SAFETY: the lab's event.
                ck(unsafe { sys::cuEventSynchronize(event(e)) }).map(|()| Outcome::default())
            }
            Api::CudaEventQuery => {
                let (_, e) = self.raw(ops, 0, K::Event)?;
                // SAFETY: the lab's event. CUDA_ERROR_NOT_READY is reported as the
                // driver's answer; it does not end the lab.
                ck(unsafe { sys::cuEventQuery(event(e)) }).map(|()| Outcome::default())
            }
            Api::CudaEventDestroy => {
                let (_, e) = self.raw(ops, 0, K::Event)?;
                // SAFETY: the lab's event.
                ck(unsafe { sys::cuEventDestroy_v2(event(e)) }).map(|()| Outcome::default())
            }
            Api::CudaStreamWaitEvent => {
                let (_, s) = self.raw(ops, 0, K::Stream)?;
                let (_, e) = self.raw(ops, 1, K::Event)?;
                // SAFETY: the lab's stream and event.
                ck(unsafe { sys::cuStreamWaitEvent(stream(s), event(e), 0) })
                    .map(|()| Outcome::default())
            }
            Api::CudaStreamSynchronize => {
                let (_, s) = self.raw(ops, 0, K::Stream)?;
                // SAFETY: the lab's stream.
                ck(unsafe { sys::cuStreamSynchronize(stream(s)) }).map(|()| Outcome::default())
            }
            Api::CudaDeviceSynchronize => {
                // SAFETY: the backend's context is current.
                ck(unsafe { sys::cuCtxSynchronize() }).map(|()| Outcome::default())
            }
            Api::CudaLaunchKernel => {
                let (qid, s) = self.raw(ops, 0, K::Stream)?;
                match ops.get(1) {
                    Some(Operand::Kernel(k)) if k == "spin" => {}
                    _ => return Err(bad("unknown kernel")),
                }
                let (bid, p) = self.raw(ops, 2, K::Buffer)?;
                let cycles = self.cal.cycles(ms_at(ops, 3)?);
                let words = self.bytes_of(bid) / 4;
                let (func, grid) = (self.func, self.cal.sms);
                self.timed(seq, qid, stream(s), "spin", || {
                    // SAFETY: `func` is the loaded spin function; `s` the lab's stream
                    // and `p` its buffer of `words` u32s (a freed one is the lab's point).
                    unsafe { spin::launch(func, stream(s), grid, p, words, cycles) }
                })
            }
            Api::CudaMemcpyAsync => {
                let (hid, h) = self.raw(ops, 0, K::HostBuffer)?;
                let (bid, p) = self.raw(ops, 1, K::Buffer)?;
                let (qid, s) = self.raw(ops, 2, K::Stream)?;
                let n = size(self.bytes_of(hid).min(self.bytes_of(bid)))?;
                self.timed(seq, qid, stream(s), "memcpy DtoH", || {
                    // SAFETY: `h` is pinned host memory of at least `n` bytes the lab
                    // holds, `p` a device allocation of at least `n` bytes.
                    ck(unsafe {
                        sys::cuMemcpyDtoHAsync_v2(h as usize as *mut c_void, p, n, stream(s))
                    })
                })
            }
            Api::CudaMemcpyAsyncToDevice => {
                let (bid, p) = self.raw(ops, 0, K::Buffer)?;
                let (hid, h) = self.raw(ops, 1, K::HostBuffer)?;
                let (qid, s) = self.raw(ops, 2, K::Stream)?;
                let n = size(self.bytes_of(hid).min(self.bytes_of(bid)))?;
                self.timed(seq, qid, stream(s), "memcpy HtoD", || {
                    // SAFETY: `p` is a device allocation of at least `n` bytes, `h`
                    // pinned host memory of at least `n` bytes the lab holds.
                    ck(unsafe {
                        sys::cuMemcpyHtoDAsync_v2(p, h as usize as *const c_void, n, stream(s))
                    })
                })
            }
            Api::CudaMemsetAsync => {
                let (bid, p) = self.raw(ops, 0, K::Buffer)?;
                let (qid, s) = self.raw(ops, 1, K::Stream)?;
                let n = size(self.bytes_of(bid))?;
                self.timed(seq, qid, stream(s), "memset", || {
                    // SAFETY: `p` is a device allocation of `n` bytes.
                    ck(unsafe { sys::cuMemsetD8Async(p, 0, n, stream(s)) })
                })
            }
            Api::CudaMallocHost => {
                let bytes = bytes_at(ops, 0)?;
                let mut h = std::ptr::null_mut();
                // SAFETY: a valid out-pointer.
                ck(unsafe { sys::cuMemAllocHost_v2(&mut h, size(bytes)?) })?;
                Ok(self.created(K::HostBuffer, h as usize as u64, bytes))
            }
            Api::CudaFreeHost => {
                let (_, h) = self.raw(ops, 0, K::HostBuffer)?;
                // SAFETY: the pinned allocation the lab made.
                ck(unsafe { sys::cuMemFreeHost(h as usize as *mut c_void) })
                    .map(|()| Outcome::default())
            }
            Api::CudaMemPoolSetAttribute => {
                let mut v = bytes_at(ops, 0)?;
                // SAFETY: RELEASE_THRESHOLD is a cuuint64_t read from `v`.
                ck(unsafe {
                    sys::cuMemPoolSetAttribute(
                        self.pool,
                        sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                        (&raw mut v).cast(),
                    )
                })
                .map(|()| Outcome::default())
            }
            Api::CudaMemPoolTrimTo => {
                let keep = size(bytes_at(ops, 0)?)?;
                // SAFETY: the device's default pool.
                ck(unsafe { sys::cuMemPoolTrimTo(self.pool, keep) }).map(|()| Outcome::default())
            }
            Api::CudaMemGetInfo => {
                let (mut free, mut total) = (0usize, 0usize);
                // SAFETY: valid out-pointers.
                ck(unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })
                    .map(|()| Outcome::default())
            }
            other => Err(bad(&format!("{} is not a CUDA call", other.name()))),
        }
    }
}
