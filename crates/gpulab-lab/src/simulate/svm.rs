//! Shared virtual memory (`clSVMAlloc`): a pointer, not a `cl_mem`. It has no
//! reference count, so nothing retains or releases it: `clSVMFree` frees it at
//! once and `clEnqueueSVMFree` behind the queue's earlier commands. A kernel
//! takes it through `clSetKernelArgSVMPointer` (a launch's own arguments choose
//! the setter by the buffer). The calls of `cl_mem`s refuse it, and the SVM
//! calls refuse a `cl_mem`.

use super::{Res, Simulator};
use crate::api::{Api, ApiSpec, ArgKind, ObjKind};
use crate::mistake::{Mistake, Problem};
use crate::model::Arg;
use crate::raw::Sp;
use crate::script::{RawArg, RawStmt};

/// The calls that take an SVM pointer where a buffer goes.
fn takes_svm(api: Api) -> bool {
    matches!(
        api,
        Api::ClSVMFree
            | Api::ClEnqueueSVMFree
            | Api::ClSetKernelArgSVMPointer
            | Api::ClEnqueueNDRangeKernel
    )
}

/// The calls that take only an SVM pointer where a buffer goes.
fn only_svm(api: Api) -> bool {
    matches!(
        api,
        Api::ClSVMFree | Api::ClEnqueueSVMFree | Api::ClSetKernelArgSVMPointer
    )
}

/// What a C program writes instead of `call` on an SVM pointer.
pub(crate) fn svm_instead(call: Api) -> &'static str {
    match call {
        Api::ClReleaseMemObject => {
            "SVM has no reference count: free it with `clSVMFree(ctx, p)` (at once) or `clEnqueueSVMFree(q, p)` (behind the queue's work)"
        }
        Api::ClRetainMemObject => {
            "SVM has no reference count: keep it alive by not freeing it until its last user is done"
        }
        Api::ClSetKernelArg => "set it with `clSetKernelArgSVMPointer(k, i, p)`",
        _ => {
            "only a kernel (`clEnqueueNDRangeKernel`, `clSetKernelArgSVMPointer`), `clSVMFree` and `clEnqueueSVMFree` take it here"
        }
    }
}

impl Simulator<'_> {
    /// An SVM pointer goes only where C takes one, and a `cl_mem` only where
    /// C takes that.
    pub(super) fn svm_edges(
        &self,
        s: &RawStmt,
        spec: &ApiSpec,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        if s.expect_error || spec.backend != crate::api::BackendKind::OpenCl {
            return Ok(());
        }
        let sig = spec.args;
        for (i, (a, r)) in args.iter().zip(raw).enumerate() {
            let Arg::Handle(name) = a else { continue };
            let Some(h) = self.handles.get(name) else {
                continue;
            };
            if h.kind != ObjKind::Buffer {
                continue;
            }
            // A launch's buffers follow its kernel; every other position says.
            let buffer_slot = spec.api == Api::ClEnqueueNDRangeKernel
                || sig.get(i) == Some(&ArgKind::Obj(ObjKind::Buffer));
            if !buffer_slot {
                continue;
            }
            let svm = h.made_by == Api::ClSVMAlloc;
            if svm && !takes_svm(spec.api) {
                return Err(Problem::new(
                    r.span.clone(),
                    Mistake::SvmIsNotAMemObject {
                        name: name.clone(),
                        call: spec.name,
                        instead: svm_instead(spec.api),
                    },
                ));
            }
            if !svm && only_svm(spec.api) {
                return Err(Problem::new(
                    r.span.clone(),
                    Mistake::NotSvm {
                        name: name.clone(),
                        call: spec.name,
                        made_by: h.made_by.name(),
                    },
                ));
            }
        }
        Ok(())
    }
}
