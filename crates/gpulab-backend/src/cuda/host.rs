//! The host's side of a stream: the C library's pageable memory (`malloc`,
//! `free`), pinned memory with flags (`cudaHostAlloc`), the device's address of
//! mapped pinned memory (`cudaHostGetDevicePointer`), and host functions a
//! stream runs (`cudaLaunchHostFunc`, `cudaStreamAddCallback`).

use std::collections::HashMap;
use std::ffi::c_void;

use cudarc::driver::sys;

use super::CudaBackend;
use super::calls::{bad, bytes_at, ms_at, refused, size};
use crate::{DriverError, ObjId, Operand, Outcome};
use gpulab_events::ObjKind;
use gpulab_events::api::{Api, ClFlag};

/// `malloc`'d memory, kept until its `free`. Every page is written once at
/// the allocation, as a program fills its buffer before copying it: a copy
/// from it then measures the driver's staging, not the kernel's first touch.
pub(super) type Pageable = HashMap<ObjId, Box<[u8]>>;

/// The bytes of `n`, each written once; the host's own refusal is the lab's answer.
pub(super) fn host_bytes(call: &str, bytes: u64) -> Result<Box<[u8]>, DriverError> {
    let n = size(bytes)?;
    let mut host = Vec::new();
    host.try_reserve_exact(n).map_err(|_| {
        refused(format!(
            "{call} needs {:.1} MiB of host memory, and the host has not got it",
            gpulab_events::units::mib(bytes)
        ))
    })?;
    host.resize(n, 1u8);
    Ok(host.into_boxed_slice())
}

/// `cuMemHostAlloc`'s flags for `cudaHostAlloc`'s.
fn host_alloc_flags(ops: &[Operand]) -> Result<u32, DriverError> {
    let flags: &[ClFlag] = match ops.get(1) {
        None => &[],
        Some(Operand::Flags(fs)) => fs,
        Some(Operand::Flag(f)) => std::slice::from_ref(f),
        Some(_) => return Err(bad("expected cudaHostAlloc's flags")),
    };
    flags.iter().try_fold(0, |bits, f| {
        Ok(bits
            | match f {
                ClFlag::HostAllocDefault => 0,
                ClFlag::HostAllocPortable => sys::CU_MEMHOSTALLOC_PORTABLE,
                ClFlag::HostAllocMapped => sys::CU_MEMHOSTALLOC_DEVICEMAP,
                ClFlag::HostAllocWriteCombined => sys::CU_MEMHOSTALLOC_WRITECOMBINED,
                _ => return Err(bad("not a cudaHostAlloc flag")),
            })
    })
}

/// The host function: sleeps the milliseconds it was queued with. It runs on
/// the driver's thread and cannot panic (a duration outside an hour is none).
unsafe extern "C" fn sleep_fn(data: *mut c_void) {
    // SAFETY: `data` is the Box `host_func` made for this one call.
    let ms = *unsafe { Box::from_raw(data.cast::<f64>()) };
    if ms.is_finite() && ms > 0.0 && ms <= 3_600_000.0 {
        std::thread::sleep(std::time::Duration::from_micros((ms * 1000.0) as u64));
    }
}

/// `cuStreamAddCallback`'s form of the same function.
unsafe extern "C" fn sleep_callback(_: sys::CUstream, _: sys::CUresult, data: *mut c_void) {
    // SAFETY: as for `sleep_fn`, whose data this is.
    unsafe { sleep_fn(data) }
}

impl CudaBackend {
    /// The calls of this module; `None` for any other.
    pub(super) fn dispatch_host(
        &mut self,
        seq: u64,
        api: Api,
        ops: &[Operand],
    ) -> Option<Result<Outcome, DriverError>> {
        Some(match api {
            Api::Malloc => self.malloc(ops),
            Api::Free => self.free(ops),
            Api::CudaHostAlloc => self.host_alloc(ops),
            Api::CudaHostGetDevicePointer => self.host_device_pointer(ops),
            Api::CudaLaunchHostFunc | Api::CudaStreamAddCallback => self.host_func(seq, api, ops),
            _ => return None,
        })
    }

    /// Queues gpulab's sleeping function on the stream, between the span's
    /// two events: the span is the time the stream spent in it.
    fn host_func(&mut self, seq: u64, api: Api, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (qid, s) = self.raw(ops, 0, ObjKind::Stream)?;
        let ms = ms_at(ops, 2)?;
        let stream = s as usize as sys::CUstream;
        self.timed(seq, qid, stream, "host func", Some(ms), || {
            let data = Box::into_raw(Box::new(ms)).cast::<c_void>();
            // SAFETY: the lab's stream; `data` is a boxed f64 the function
            // takes back exactly once when it runs.
            let r = unsafe {
                match api {
                    Api::CudaLaunchHostFunc => sys::cuLaunchHostFunc(stream, Some(sleep_fn), data),
                    _ => sys::cuStreamAddCallback(stream, Some(sleep_callback), data, 0),
                }
            }
            .result();
            if r.is_err() {
                // SAFETY: refused, so the function will never run to take it back.
                drop(unsafe { Box::from_raw(data.cast::<f64>()) });
            }
            r.map_err(DriverError::from)
        })
    }

    fn malloc(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let bytes = bytes_at(ops, 0)?;
        let mut host = host_bytes("malloc", bytes)?;
        let p = host.as_mut_ptr();
        let out = self.created(ObjKind::HostBuffer, p as usize as u64, bytes);
        if let Some(id) = out.created {
            self.pageable.insert(id, host);
        }
        Ok(out)
    }

    /// Gives the memory back to the C library. A pointer `malloc` did not give
    /// (freed already, or the driver's) is refused, where C would abort the
    /// process or corrupt its heap.
    fn free(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let Some(Operand::Obj(id)) = ops.first() else {
            return Err(bad("expected an object"));
        };
        match self.pageable.remove(id) {
            Some(_) => Ok(Outcome::default()),
            None => Err(refused(
                "free of memory malloc did not give, or gave and took back: C would abort the process or corrupt its heap".into(),
            )),
        }
    }

    fn host_alloc(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let bytes = bytes_at(ops, 0)?;
        let flags = host_alloc_flags(ops)?;
        let mut h = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the flags are cuMemHostAlloc's own bits.
        unsafe { sys::cuMemHostAlloc(&mut h, size(bytes)?, flags) }.result()?;
        Ok(self.created(ObjKind::HostBuffer, h as usize as u64, bytes))
    }

    /// The device pointer is a buffer to the kernels and copies that take it,
    /// as large as its host memory, holding no device memory (`bytes` 0).
    fn host_device_pointer(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (hid, h) = self.raw(ops, 0, ObjKind::HostBuffer)?;
        let mut d = 0;
        // SAFETY: a valid out-pointer; `h` is the lab's host memory (the driver
        // answers for memory it does not know, such as `malloc`'s).
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, h as usize as *mut c_void, 0) }
            .result()?;
        let host_bytes = self.bytes_of(hid);
        let mut out = self.created(ObjKind::Buffer, d, host_bytes);
        out.bytes = 0;
        Ok(out)
    }
}
