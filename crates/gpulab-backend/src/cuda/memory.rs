//! The calls that reach past `cudaMalloc`: synchronous copies on the legacy
//! default stream, streams with flags, pools of the lab's own, registered host
//! memory, managed memory, and the virtual memory API (`cuMem*`). One script
//! line, one driver call, as in `calls`; gpulab's only extras are named in the
//! catalog's driver column (the span events, the free-memory guard before a
//! managed allocation, the host memory a registration needs).

use std::ffi::c_void;

use cudarc::driver::result::{self, stream::StreamKind};
use cudarc::driver::sys;

use super::CudaBackend;
use super::calls::{bad, bytes_at, refused, size};
use crate::{DriverError, ObjId, Operand, Outcome};
use gpulab_events::ObjKind;
use gpulab_events::api::{Api, ClFlag};

impl CudaBackend {
    /// This device as a memory location (pools, allocations, access, prefetch).
    pub(super) fn location(&self) -> sys::CUmemLocation {
        sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.ordinal,
        }
    }

    /// The calls of this module; `None` for any other.
    pub(super) fn dispatch_memory(
        &mut self,
        seq: u64,
        api: Api,
        ops: &[Operand],
    ) -> Option<Result<Outcome, DriverError>> {
        Some(match api {
            Api::CudaMemcpy | Api::CudaMemcpyToDevice => self.memcpy(api, ops),
            Api::CudaStreamCreateWithFlags => self.stream_with_flags(ops),
            Api::CudaMemPoolCreate
            | Api::CudaMemPoolSetAttributeOf
            | Api::CudaMemPoolTrimToOf
            | Api::CudaMallocFromPoolAsync
            | Api::CudaMemPoolDestroy => self.pool_call(api, ops),
            Api::CudaHostRegister | Api::CudaHostUnregister => self.host_register(api, ops),
            Api::CudaMallocManaged => self.malloc_managed(ops),
            Api::CudaMemPrefetchAsync | Api::CudaMemPrefetchAsyncToHost => {
                self.prefetch(seq, api, ops)
            }
            Api::CudaMemAdvise => self.advise(ops),
            Api::HostMemset => self.host_memset(ops),
            Api::CuMemCreate
            | Api::CuMemAddressReserve
            | Api::CuMemMap
            | Api::CuMemSetAccess
            | Api::CudaMemsetAsyncRange
            | Api::CuMemUnmap
            | Api::CuMemRelease
            | Api::CuMemAddressFree => self.vmm(seq, api, ops),
            _ => return None,
        })
    }

    fn memcpy(&mut self, api: Api, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (host_at, dev_at) = match api {
            Api::CudaMemcpy => (0, 1),
            _ => (1, 0),
        };
        let (hid, h) = self.raw(ops, host_at, ObjKind::HostBuffer)?;
        let (bid, p) = self.raw(ops, dev_at, ObjKind::Buffer)?;
        let n = size(self.bytes_of(hid).min(self.bytes_of(bid)))?;
        // SAFETY: `h` is pinned host memory of at least `n` bytes, `p` a device
        // allocation of at least `n` bytes (or one the lab freed, which the driver
        // answers). The synchronous copy runs on the legacy default stream.
        unsafe {
            match api {
                Api::CudaMemcpy => sys::cuMemcpyDtoH_v2(h as usize as *mut c_void, p, n),
                _ => sys::cuMemcpyHtoD_v2(p, h as usize as *const c_void, n),
            }
        }
        .result()?;
        // What came back to the host, checked once the call is timed.
        if api == Api::CudaMemcpy {
            self.readback = Some((h, n));
        }
        Ok(Outcome::default())
    }

    fn stream_with_flags(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let kind = match ops.first() {
            Some(Operand::Flag(ClFlag::StreamNonBlocking)) => StreamKind::NonBlocking,
            Some(Operand::Flag(ClFlag::StreamDefault)) => StreamKind::Default,
            _ => return Err(bad("expected a stream flag")),
        };
        let s = result::stream::create(kind)?;
        Ok(self.created(ObjKind::Stream, s as usize as u64, 0))
    }

    fn pool_call(&mut self, api: Api, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let pool = |raw: u64| raw as usize as sys::CUmemoryPool;
        match api {
            Api::CudaMemPoolCreate => {
                // SAFETY: an all-zero CUmemPoolProps is the C idiom (`= {}`): no
                // export handle, no size limit; type and location are set below.
                let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
                props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
                props.location = self.location();
                let mut p = std::ptr::null_mut();
                // SAFETY: valid out-pointer and properties.
                unsafe { sys::cuMemPoolCreate(&mut p, &props) }.result()?;
                let out = self.created(ObjKind::Pool, p as usize as u64, 0);
                if let Some(id) = out.created {
                    self.pools.push(id);
                }
                Ok(out)
            }
            Api::CudaMemPoolSetAttributeOf => {
                let (_, p) = self.raw(ops, 0, ObjKind::Pool)?;
                let mut v = bytes_at(ops, 1)?;
                let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
                // SAFETY: RELEASE_THRESHOLD is a cuuint64_t read from `v`; `p` the lab's pool.
                unsafe { result::mem_pool::set_attribute(pool(p), attr, (&raw mut v).cast()) }?;
                Ok(Outcome::default())
            }
            Api::CudaMemPoolTrimToOf => {
                let (_, p) = self.raw(ops, 0, ObjKind::Pool)?;
                let keep = size(bytes_at(ops, 1)?)?;
                // SAFETY: the lab's pool.
                unsafe { result::mem_pool::trim_to(pool(p), keep) }?;
                Ok(Outcome::default())
            }
            Api::CudaMallocFromPoolAsync => {
                let bytes = bytes_at(ops, 0)?;
                let (_, p) = self.raw(ops, 1, ObjKind::Pool)?;
                let (_, s) = self.raw(ops, 2, ObjKind::Stream)?;
                let mut d = 0;
                // SAFETY: valid out-pointer; the lab's pool and stream.
                unsafe {
                    sys::cuMemAllocFromPoolAsync(&mut d, size(bytes)?, pool(p), s as usize as _)
                }
                .result()?;
                Ok(self.created(ObjKind::Buffer, d, bytes))
            }
            _ => {
                let (id, p) = self.raw(ops, 0, ObjKind::Pool)?;
                // SAFETY: the lab's pool; with allocations outstanding the driver
                // destroys it after the last is freed.
                unsafe { result::mem_pool::destroy(pool(p)) }?;
                self.pools.retain(|&x| x != id);
                Ok(Outcome::default())
            }
        }
    }

    fn host_register(&mut self, api: Api, ops: &[Operand]) -> Result<Outcome, DriverError> {
        if api == Api::CudaHostRegister {
            let bytes = bytes_at(ops, 0)?;
            // A size the host cannot give is the lab's answer, not an abort.
            let mut host = super::host::host_bytes("cudaHostRegister", bytes)?;
            let p = host.as_mut_ptr();
            // SAFETY: `host` is `bytes` bytes of this process's memory, kept in
            // `self.registered` (its heap block never moves) until unregistered.
            unsafe { sys::cuMemHostRegister_v2(p.cast(), host.len(), 0) }.result()?;
            let out = self.created(ObjKind::HostBuffer, p as usize as u64, bytes);
            if let Some(id) = out.created {
                self.registered.insert(id, host);
            }
            return Ok(out);
        }
        let (id, h) = self.raw(ops, 0, ObjKind::HostBuffer)?;
        // SAFETY: the pointer the lab registered (or not: the driver answers
        // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED).
        unsafe { sys::cuMemHostUnregister(h as usize as *mut c_void) }.result()?;
        self.registered.remove(&id);
        Ok(Outcome::default())
    }

    /// Refuses a size above the device's free memory: oversubscribed managed
    /// memory migrates pages back and forth and can stall every process on a
    /// shared GPU.
    fn malloc_managed(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let bytes = bytes_at(ops, 0)?;
        let (free, _) = result::mem_get_info()?;
        if bytes > free as u64 {
            return Err(refused(format!(
                "cudaMallocManaged of {:.1} MiB is more than the device's free memory, {:.1} MiB: managed memory beyond it can hang a shared GPU",
                gpulab_events::units::mib(bytes),
                gpulab_events::units::mib(free as u64)
            )));
        }
        let flags = sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL;
        // SAFETY: the backend's context is current; the memory is the lab's.
        let p = unsafe { result::malloc_managed(size(bytes)?, flags) }?;
        let out = self.created(ObjKind::Buffer, p, bytes);
        if let Some(id) = out.created {
            self.managed.insert(id);
        }
        Ok(out)
    }

    /// The host as a memory location (`cudaCpuDeviceId`).
    fn host_location() -> sys::CUmemLocation {
        sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
            id: 0,
        }
    }

    fn prefetch(&mut self, seq: u64, api: Api, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (bid, p) = self.raw(ops, 0, ObjKind::Buffer)?;
        let (loc, stream_at) = match api {
            Api::CudaMemPrefetchAsyncToHost => (Self::host_location(), 2),
            _ => (self.location(), 1),
        };
        let (qid, s) = self.raw(ops, stream_at, ObjKind::Stream)?;
        let n = size(self.bytes_of(bid))?;
        self.timed(
            seq,
            qid,
            s as usize as sys::CUstream,
            "prefetch",
            None,
            || {
                // SAFETY: `p` is the lab's managed allocation of `n` bytes (a freed one
                // is answered by the driver); `s` the lab's stream.
                unsafe { result::mem_prefetch_async(p, n, loc, s as usize as sys::CUstream) }?;
                Ok(())
            },
        )
    }

    /// `cudaMemAdvise(buf, advice, location)` over the whole buffer.
    fn advise(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        use sys::CUmem_advise as A;
        let (bid, p) = self.raw(ops, 0, ObjKind::Buffer)?;
        let advice = match ops.get(1) {
            Some(Operand::Flag(ClFlag::AdviseReadMostly)) => A::CU_MEM_ADVISE_SET_READ_MOSTLY,
            Some(Operand::Flag(ClFlag::AdvisePreferredLocation)) => {
                A::CU_MEM_ADVISE_SET_PREFERRED_LOCATION
            }
            Some(Operand::Flag(ClFlag::AdviseAccessedBy)) => A::CU_MEM_ADVISE_SET_ACCESSED_BY,
            _ => return Err(bad("expected an advice")),
        };
        let location = match ops.get(2) {
            Some(Operand::Flag(ClFlag::CpuDeviceId)) => Self::host_location(),
            Some(Operand::Index(n)) => sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: i32::try_from(*n).map_err(|_| bad("device number"))?,
            },
            _ => return Err(bad("expected a location")),
        };
        let n = size(self.bytes_of(bid))?;
        // SAFETY: the lab's allocation of `n` bytes (the driver answers one that
        // is not managed, or freed).
        unsafe { result::mem_advise(p, n, advice, location) }?;
        Ok(Outcome::default())
    }

    /// The host writes every byte of a managed buffer, as a C program's
    /// `memset` does: each page the device held faults back to the host.
    fn host_memset(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (bid, p) = self.raw(ops, 0, ObjKind::Buffer)?;
        if !self.managed.contains(&bid) {
            return Err(refused(
                "memset of device memory that is not managed: the host cannot write it".into(),
            ));
        }
        let n = size(self.bytes_of(bid))?;
        // SAFETY: `p` is a managed allocation of `n` bytes the lab holds (the
        // ledger's own check: a freed one is not in `managed`), addressable
        // from the host.
        unsafe { std::ptr::write_bytes(p as usize as *mut u8, 0, n) };
        Ok(Outcome::default())
    }

    fn vmm(&mut self, seq: u64, api: Api, ops: &[Operand]) -> Result<Outcome, DriverError> {
        match api {
            Api::CuMemCreate => {
                let bytes = bytes_at(ops, 0)?;
                // SAFETY: an all-zero CUmemAllocationProp is the C idiom (`= {}`).
                let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
                prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
                prop.location = self.location();
                let mut h = 0;
                // SAFETY: valid out-pointer and properties. A size that is not a
                // multiple of the granularity is the driver's to refuse.
                unsafe { sys::cuMemCreate(&mut h, size(bytes)?, &prop, 0) }.result()?;
                Ok(self.created(ObjKind::MemHandle, h, bytes))
            }
            Api::CuMemAddressReserve => {
                let bytes = bytes_at(ops, 0)?;
                let mut va = 0;
                // SAFETY: valid out-pointer; any address, default alignment.
                unsafe { sys::cuMemAddressReserve(&mut va, size(bytes)?, 0, 0, 0) }.result()?;
                let mut out = self.created(ObjKind::VaRange, va, bytes);
                // Addresses hold no device memory: the ledger counts none.
                out.bytes = 0;
                Ok(out)
            }
            Api::CuMemMap => {
                let (rid, va) = self.raw(ops, 0, ObjKind::VaRange)?;
                let (hid, h) = self.raw(ops, 1, ObjKind::MemHandle)?;
                let n = self.bytes_of(hid);
                // SAFETY: the lab's range and allocation; the driver checks that
                // the allocation fits the range.
                unsafe { sys::cuMemMap(va, size(n)?, 0, h, 0) }.result()?;
                self.mapped.insert(rid, n);
                Ok(Outcome::default())
            }
            Api::CuMemSetAccess => {
                let (rid, va) = self.raw(ops, 0, ObjKind::VaRange)?;
                let desc = sys::CUmemAccessDesc {
                    location: self.location(),
                    flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                };
                let n = size(self.mapped_bytes(rid))?;
                // SAFETY: one access descriptor for the mapped part of the lab's range.
                unsafe { sys::cuMemSetAccess(va, n, &desc, 1) }.result()?;
                Ok(Outcome::default())
            }
            Api::CudaMemsetAsyncRange => {
                let (rid, va) = self.raw(ops, 0, ObjKind::VaRange)?;
                let (qid, s) = self.raw(ops, 1, ObjKind::Stream)?;
                let n = size(self.mapped_bytes(rid))?;
                let stream = s as usize as sys::CUstream;
                self.timed(seq, qid, stream, "memset", None, || {
                    // SAFETY: `va` is the lab's range with `n` bytes mapped and
                    // accessible (or not, which the driver reports as a fault).
                    unsafe { result::memset_d8_async(va, 0, n, stream) }?;
                    Ok(())
                })
            }
            Api::CuMemUnmap => {
                let (rid, va) = self.raw(ops, 0, ObjKind::VaRange)?;
                let n = size(self.mapped_bytes(rid))?;
                // SAFETY: the mapped part of the lab's range.
                unsafe { sys::cuMemUnmap(va, n) }.result()?;
                self.mapped.remove(&rid);
                Ok(Outcome::default())
            }
            Api::CuMemRelease => {
                let (_, h) = self.raw(ops, 0, ObjKind::MemHandle)?;
                // SAFETY: the lab's allocation handle; a mapping keeps its memory.
                unsafe { sys::cuMemRelease(h) }.result()?;
                Ok(Outcome::default())
            }
            _ => {
                let (rid, va) = self.raw(ops, 0, ObjKind::VaRange)?;
                let n = size(self.bytes_of(rid))?;
                // SAFETY: the lab's whole reserved range.
                unsafe { sys::cuMemAddressFree(va, n) }.result()?;
                Ok(Outcome::default())
            }
        }
    }

    /// Bytes mapped into range `id`: its mapping's size, or the whole range when
    /// nothing is mapped (the driver then answers the lab's mistake).
    fn mapped_bytes(&self, id: ObjId) -> u64 {
        self.mapped
            .get(&id)
            .copied()
            .unwrap_or_else(|| self.bytes_of(id))
    }
}
