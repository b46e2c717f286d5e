//! The edges between objects that calls make or need, beyond a handle's own
//! count: which kernel a launch runs (and so which buffers it names), a
//! sub-buffer's parent, a buffer's open mappings, and the user events that hold
//! queues and events back. Each check names the mistake before anything runs.

use super::{Res, Simulator, UserStatus};
use crate::api::{Api, ApiSpec, ArgKind, KernelSpec, ObjKind};
use crate::mistake::{Mistake, Problem};
use crate::model::Arg;
use crate::raw::Sp;
use crate::script::{RawArg, RawStmt};

impl Simulator<'_> {
    /// The kernel a launch names just before its `KernelArgs` (at `at`): by name
    /// (`cudaLaunchKernel(s, copy, …)`) or through its kernel object
    /// (`clEnqueueNDRangeKernel(q, k, …)`); `None` when that argument is wrong.
    pub(super) fn launched_kernel(
        &self,
        spec: &ApiSpec,
        at: usize,
        args: &[Sp<RawArg>],
    ) -> Option<&'static KernelSpec> {
        let before = at.checked_sub(1)?;
        let RawArg::Word(w) = &args.get(before)?.value else {
            return None;
        };
        match spec.args.get(before)? {
            ArgKind::Kernel => KernelSpec::lookup(w),
            ArgKind::Obj(ObjKind::Kernel) => self
                .handles
                .get(w)
                .filter(|h| h.kind == ObjKind::Kernel)
                .and_then(|h| h.kernel),
            _ => None,
        }
    }

    /// A kernel that calls the device's `malloc` exists only where the API has
    /// a device heap (CUDA).
    pub(super) fn kernel_on_backend(&self, raw: &[Sp<RawArg>], args: &[Arg]) -> Res<()> {
        if self.backend != crate::api::BackendKind::OpenCl {
            return Ok(());
        }
        for (a, r) in args.iter().zip(raw) {
            if let Arg::Kernel(k) = a
                && let Some(spec) = KernelSpec::lookup(k).filter(|s| s.device_heap)
            {
                return Err(Problem::new(
                    r.span.clone(),
                    Mistake::KernelNeedsDeviceHeap { name: spec.name },
                ));
            }
        }
        Ok(())
    }

    /// `clCreateKernel(prog, name)` finds only the kernel its program's source
    /// defines (each file of `labs/kernels/` defines one).
    pub(super) fn kernel_of_program(
        &self,
        spec: &ApiSpec,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        let (Api::ClCreateKernel, [Arg::Handle(prog), Arg::Kernel(k)]) = (spec.api, args) else {
            return Ok(());
        };
        let Some(source) = self.handles.get(prog).and_then(|h| h.kernel) else {
            return Ok(());
        };
        if source.name == k {
            return Ok(());
        }
        let span = raw.get(1).map_or(0..0, |a| a.span.clone());
        Err(Problem::new(
            span,
            Mistake::KernelNotInProgram {
                kernel: k.clone(),
                program: prog.clone(),
                source: source.name,
            },
        ))
    }

    /// `clSetKernelArg(k, i, buf)` sets one of the kernel's buffer arguments:
    /// `i` below the number of buffers it takes.
    pub(super) fn kernel_arg_index(
        &self,
        spec: &ApiSpec,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        let (
            Api::ClSetKernelArg | Api::ClSetKernelArgSVMPointer,
            [Arg::Handle(k), Arg::Quantity(q), _],
        ) = (spec.api, args)
        else {
            return Ok(());
        };
        let Some(kernel) = self.handles.get(k).and_then(|h| h.kernel) else {
            return Ok(());
        };
        let index = q.resolve(&Default::default());
        if index < kernel.buffers as f64 {
            return Ok(());
        }
        let span = raw.get(1).map_or(0..0, |a| a.span.clone());
        Err(Problem::new(
            span,
            Mistake::KernelArgIndex {
                kernel: kernel.name,
                index: index as u32,
                buffers: kernel.buffers,
            },
        ))
    }

    /// The user event that holds back queue or event `name`, if any: itself when
    /// it is a user event not yet set.
    fn holder(&self, name: &str) -> Option<String> {
        match self.handles.get(name).and_then(|h| h.user) {
            Some(UserStatus::Unset) => Some(name.to_owned()),
            _ => self.held.get(name).cloned(),
        }
    }

    /// User events: only one is set, and once. A wait for work held back by a
    /// user event the script has not set would never return (the worker hangs),
    /// so it is a mistake: `clFinish`, `clWaitForEvents`, a blocking enqueue, or
    /// the last release of such a queue (PoCL finishes a queue on its release).
    pub(super) fn user_event_edges(
        &mut self,
        spec: &ApiSpec,
        line: u32,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        let span_of = |i: usize| raw.get(i).map_or(0..0, |a| a.span.clone());
        let forever = |i: usize, user_event: String| {
            Problem::new(
                span_of(i),
                Mistake::WaitsForever {
                    call: spec.name,
                    user_event,
                },
            )
        };
        let handle_at = |i: usize| match args.get(i) {
            Some(Arg::Handle(n)) => Some(n.clone()),
            _ => None,
        };
        match spec.api {
            Api::ClSetUserEventStatus => {
                let Some(ev) = handle_at(0) else {
                    return Ok(());
                };
                let Some(h) = self.handles.get_mut(&ev) else {
                    return Ok(());
                };
                match h.user {
                    None => Err(Problem::new(span_of(0), Mistake::NotUserEvent { name: ev })),
                    Some(UserStatus::SetAt(at)) => Err(Problem::new(
                        span_of(0),
                        Mistake::UserEventSetTwice { name: ev, line: at },
                    )),
                    Some(UserStatus::Unset) => {
                        h.user = Some(UserStatus::SetAt(line));
                        self.held.retain(|_, ue| *ue != ev);
                        Ok(())
                    }
                }
            }
            Api::ClFinish => match handle_at(0).and_then(|q| self.holder(&q)) {
                Some(ue) => Err(forever(0, ue)),
                None => Ok(()),
            },
            Api::ClReleaseCommandQueue => {
                let Some(q) = handle_at(0) else {
                    return Ok(());
                };
                let last = self.handles.get(&q).is_some_and(|h| h.refs == 1);
                match self.holder(&q) {
                    Some(ue) if last => Err(forever(0, ue)),
                    _ => Ok(()),
                }
            }
            Api::ClWaitForEvents => {
                for (i, a) in args.iter().enumerate() {
                    if let Arg::Handle(e) = a
                        && let Some(ue) = self.holder(e)
                    {
                        return Err(forever(i, ue));
                    }
                }
                Ok(())
            }
            _ if spec.args.contains(&ArgKind::WaitList) => {
                let Some(q) = handle_at(0) else {
                    return Ok(());
                };
                let waits = args.iter().find_map(|a| match a {
                    Arg::WaitList(evs) => Some(evs.clone()),
                    _ => None,
                });
                let (at, from_wait) = waits
                    .iter()
                    .flatten()
                    .find_map(|e| self.holder(e))
                    .map_or((0, None), |ue| (raw.len().saturating_sub(1), Some(ue)));
                let blocking = args.contains(&Arg::Bool(true));
                match (from_wait.or_else(|| self.holder(&q)), blocking) {
                    (Some(ue), true) => Err(forever(at, ue)),
                    (Some(ue), false) => {
                        self.held.insert(q, ue);
                        Ok(())
                    }
                    (None, _) => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// The event an enqueue on a held-back queue returns is held back too.
    pub(super) fn hold_bound(&mut self, spec: &ApiSpec, bind: Option<&Sp<String>>, args: &[Arg]) {
        let Some(b) = bind else { return };
        self.held.remove(&b.value);
        if !spec.args.contains(&ArgKind::WaitList) {
            return;
        }
        if let Some(Arg::Handle(q)) = args.first()
            && let Some(ue) = self.held.get(q).cloned()
        {
            self.held.insert(b.value.clone(), ue);
        }
    }

    /// The references between buffers that the call makes or needs: a sub-buffer
    /// names its parent, a mapping keeps its buffer (the unmap names it), so the
    /// lab's last release of a mapped buffer comes too early.
    pub(super) fn buffer_edges(
        &mut self,
        s: &RawStmt,
        spec: &ApiSpec,
        raw: &[Sp<RawArg>],
        args: &[Arg],
    ) -> Res<()> {
        let buffer_at = |i: usize| match args.get(i) {
            Some(Arg::Handle(name)) => raw.get(i).map(|a| (name.clone(), a.span.clone())),
            _ => None,
        };
        let at = match spec.api {
            Api::ClCreateSubBuffer | Api::ClReleaseMemObject => buffer_at(0),
            Api::ClEnqueueMapBuffer | Api::ClEnqueueUnmapMemObject => buffer_at(1),
            _ => None,
        };
        let Some((name, span)) = at else {
            return Ok(());
        };
        let Some(h) = self.handles.get_mut(&name) else {
            return Ok(());
        };
        match spec.api {
            Api::ClCreateSubBuffer => {
                if let Some(parent) = &h.parent
                    && !s.expect_error
                {
                    return Err(Problem::new(
                        span,
                        Mistake::SubBufferOfSubBuffer {
                            name,
                            parent: parent.clone(),
                        },
                    ));
                }
            }
            Api::ClEnqueueMapBuffer => h.maps.push(self.lines.line(s.span.start)),
            Api::ClEnqueueUnmapMemObject => {
                if h.maps.pop().is_none() && !s.expect_error {
                    return Err(Problem::new(span, Mistake::NotMapped { name }));
                }
            }
            _ => {
                if let (1, Some(&at)) = (h.refs, h.maps.first())
                    && !s.expect_error
                {
                    return Err(Problem::new(
                        span,
                        Mistake::ReleasedWhileMapped { name, line: at },
                    ));
                }
            }
        }
        Ok(())
    }
}
