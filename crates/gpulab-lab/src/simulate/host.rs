//! Host memory: each kind goes back the way it came (`free` for `malloc`,
//! `cudaFreeHost` for `cudaMallocHost` and `cudaHostAlloc`, `cudaHostUnregister`
//! for `cudaHostRegister`), and a device pointer of pinned memory
//! (`cudaHostGetDevicePointer`) is the host memory's, not an allocation.

use super::{Res, Simulator};
use crate::api::{Api, ApiSpec, Effect, ObjKind};
use crate::mistake::{Mistake, Problem};
use crate::model::{Arg, StmtKind};
use crate::raw::Sp;
use crate::script::{RawArg, RawStmt};

/// The call that gives back host memory `made` by this call.
pub(crate) fn release_of_host(made: Api) -> Api {
    made.freed_by().unwrap_or(Api::CudaFreeHost)
}

impl Simulator<'_> {
    /// Host memory is released by the call that pairs with the one that made
    /// it; another is the driver's error (or the process's crash, for
    /// `cudaFreeHost` of memory the C library gave, or `free` of the driver's).
    pub(super) fn host_release(
        &self,
        s: &RawStmt,
        spec: &ApiSpec,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        if !matches!(
            spec.api,
            Api::CudaFreeHost | Api::CudaHostUnregister | Api::Free
        ) || s.expect_error
        {
            return Ok(());
        }
        let (Some(Arg::Handle(name)), Some(a)) = (args.first(), raw.first()) else {
            return Ok(());
        };
        match self.handles.get(name) {
            Some(h) if release_of_host(h.made_by) != spec.api => Err(Problem::new(
                a.span.clone(),
                Mistake::WrongHostRelease {
                    name: name.clone(),
                    made_by: h.made_by.name(),
                    release: release_of_host(h.made_by).name(),
                },
            )),
            _ => Ok(()),
        }
    }

    /// A device pointer exists for pinned memory only, and it is not freed on
    /// its own: its host memory's free takes it.
    pub(super) fn host_pointer(
        &self,
        s: &RawStmt,
        spec: &ApiSpec,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        let (Some(Arg::Handle(name)), Some(a)) = (args.first(), raw.first()) else {
            return Ok(());
        };
        let Some(h) = self.handles.get(name) else {
            return Ok(());
        };
        if s.expect_error {
            return Ok(());
        }
        let mistake = match (spec.api, spec.effect, &h.view_of) {
            (Api::HostMemset, ..) if h.made_by != Api::CudaMallocManaged => {
                Mistake::HostTouchOfDeviceMemory {
                    name: name.clone(),
                    made_by: h.made_by.name(),
                }
            }
            (Api::CudaHostGetDevicePointer, ..) if h.made_by == Api::Malloc => {
                Mistake::PageableHasNoDevicePointer { name: name.clone() }
            }
            (_, Effect::Release(ObjKind::Buffer), Some(host)) => {
                let release = self
                    .handles
                    .get(host)
                    .map_or(Api::CudaFreeHost, |h| release_of_host(h.made_by));
                Mistake::FreeOfDevicePointer {
                    name: name.clone(),
                    host: host.clone(),
                    release: release.name(),
                }
            }
            _ => return Ok(()),
        };
        Err(Problem::new(a.span.clone(), mistake))
    }

    /// `verify h`: a host buffer the lab holds, read as the program checks
    /// its data.
    pub(super) fn verify(&self, s: &RawStmt, line: u32, handle: &Sp<String>) -> Res<StmtKind> {
        let name = &handle.value;
        let span = handle.span.clone();
        let Some(h) = self.handles.get(name) else {
            return Err(Problem::new(
                span,
                Mistake::UndefinedHandle {
                    name: name.clone(),
                    suggestion: self.nearest_handle(name),
                },
            ));
        };
        if h.kind != ObjKind::HostBuffer {
            return Err(Problem::new(
                span,
                Mistake::WrongKind {
                    name: name.clone(),
                    is: h.kind,
                    call: "verify",
                    expected: "a host buffer handle (`cudaMallocHost`, `cudaHostAlloc`, `malloc`, `cudaHostRegister`)".into(),
                    goes_back: None,
                },
            ));
        }
        if !s.expect_error {
            super::alive(h, name, span, line, false)?;
        }
        Ok(StmtKind::Verify {
            handle: name.clone(),
        })
    }

    /// The device pointers into host memory `host` die with it, on `line`.
    pub(super) fn views_die_with(&mut self, host: &str, line: u32) {
        for h in self.handles.values_mut() {
            if h.view_of.as_deref() == Some(host) && h.refs > 0 {
                h.refs = 0;
                h.released_at = Some(line);
            }
        }
    }
}
