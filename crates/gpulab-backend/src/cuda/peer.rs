//! More than one device: `cudaSetDevice` makes another device's primary
//! context current (retained at its first use, as the runtime does, and never
//! released by gpulab: the worker's exit hands it back), peer access between
//! two devices' contexts, and a copy between their buffers. Each object
//! remembers the device that was current when it was made, so a peer copy
//! names each buffer's own context.

use std::collections::HashMap;

use cudarc::driver::result;
use cudarc::driver::sys;

use super::CudaBackend;
use crate::{DriverError, Operand, Outcome};
use gpulab_events::ObjKind;
use gpulab_events::api::Api;

/// The contexts of the devices a lab made current, by ordinal, and which one
/// is current now.
pub(super) struct Devices {
    pub(super) current: i32,
    contexts: HashMap<i32, sys::CUcontext>,
}

impl Devices {
    /// The lab's own device, current.
    pub(super) fn on(ordinal: i32) -> Devices {
        Devices {
            current: ordinal,
            contexts: HashMap::new(),
        }
    }
}

fn ordinal_at(ops: &[Operand], i: usize) -> Result<i32, DriverError> {
    match ops.get(i) {
        Some(Operand::Index(n)) => {
            i32::try_from(*n).map_err(|_| super::calls::bad("device number"))
        }
        _ => Err(super::calls::bad("expected a device number")),
    }
}

impl CudaBackend {
    /// The calls of this module; `None` for any other.
    pub(super) fn dispatch_peer(
        &mut self,
        api: Api,
        ops: &[Operand],
    ) -> Option<Result<Outcome, DriverError>> {
        Some(match api {
            Api::CudaSetDevice => self.set_device(ops),
            Api::CudaDeviceEnablePeerAccess => self.peer_access(ops, true),
            Api::CudaDeviceDisablePeerAccess => self.peer_access(ops, false),
            Api::CudaMemcpyPeer => self.memcpy_peer(ops),
            _ => return None,
        })
    }

    /// Device `ordinal`'s primary context: the lab's own device's, or one
    /// retained at its first use (by `cudaSetDevice`, or by naming the device
    /// as a peer, as the runtime initialises a peer's context: that call's
    /// host time then holds the context's making).
    fn context_of(&mut self, ordinal: i32) -> Result<sys::CUcontext, DriverError> {
        if ordinal == self.ordinal {
            return Ok(self.ctx);
        }
        if let Some(ctx) = self.devices.contexts.get(&ordinal) {
            return Ok(*ctx);
        }
        let dev = result::device::get(ordinal)?;
        // SAFETY: `dev` is a valid device; the primary context is shared with
        // any runtime-API code in the process, as a CUDA program would have it.
        let ctx = unsafe { result::primary_ctx::retain(dev) }?;
        self.devices.contexts.insert(ordinal, ctx);
        Ok(ctx)
    }

    fn set_device(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let ordinal = ordinal_at(ops, 0)?;
        let ctx = self.context_of(ordinal)?;
        // SAFETY: a context retained above (or at open).
        unsafe { result::ctx::set_current(ctx) }?;
        self.devices.current = ordinal;
        Ok(Outcome::default())
    }

    fn peer_access(&mut self, ops: &[Operand], enable: bool) -> Result<Outcome, DriverError> {
        let peer = self.context_of(ordinal_at(ops, 0)?)?;
        // SAFETY: `peer` is a retained primary context; the current context is
        // the lab's current device's.
        unsafe {
            if enable {
                sys::cuCtxEnablePeerAccess(peer, 0)
            } else {
                sys::cuCtxDisablePeerAccess(peer)
            }
        }
        .result()?;
        Ok(Outcome::default())
    }

    /// `cudaMemcpyPeer(dst, src)`: the smaller of the two sizes, each buffer
    /// in the context of the device it was made on.
    fn memcpy_peer(&mut self, ops: &[Operand]) -> Result<Outcome, DriverError> {
        let (dst_id, dst) = self.raw(ops, 0, ObjKind::Buffer)?;
        let (src_id, src) = self.raw(ops, 1, ObjKind::Buffer)?;
        let n = self.bytes_of(dst_id).min(self.bytes_of(src_id));
        let dst_ctx = self.context_of(self.device_of(dst_id))?;
        let src_ctx = self.context_of(self.device_of(src_id))?;
        let n = super::calls::size(n)?;
        // SAFETY: the lab's buffers (or null, which the driver rejects), each
        // with the context of the device it was made on.
        unsafe { sys::cuMemcpyPeer(dst, dst_ctx, src, src_ctx, n) }.result()?;
        Ok(Outcome::default())
    }
}
