//! Callbacks the OpenCL implementation calls on its own threads: event completion
//! (profiling stamps for spans) and object destructors. Each one does the least it
//! can: read a few values, push one record, never panic, never block on the driver.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};

use cl3::event::{
    CL_PROFILING_COMMAND_END, CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_START,
    CL_PROFILING_COMMAND_SUBMIT, get_event_profiling_info,
};
use cl3::info_type::InfoType;
use cl3::types::{cl_context, cl_event, cl_int, cl_mem, cl_profiling_info, cl_uint};

use crate::ObjId;
use gpulab_host::clock::now_ns;

/// Profiling stamps of one command, on the device timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamps {
    pub queued: u64,
    pub submit: u64,
    pub start: u64,
    pub end: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// A command reached CL_COMPLETE (or an error status); `stamps` is `None` when
    /// the implementation had no profiling info for it.
    Completed {
        token: u64,
        status: cl_int,
        stamps: Option<Stamps>,
    },
    Destroyed {
        obj: ObjId,
        t_ns: u64,
    },
    /// The callback of a lab's `clSetEventCallback` ran at `t_ns`: the event
    /// reached `status`, and its `clReleaseMemObject` returned `released`.
    Released {
        seq: u64,
        t_ns: u64,
        status: cl_int,
        released: cl_int,
    },
}

/// Where callbacks leave what they saw; the backend drains it on its own thread.
#[derive(Debug, Default)]
pub struct Arrivals {
    arrivals: Mutex<Vec<Arrival>>,
}

impl Arrivals {
    fn lock(&self) -> MutexGuard<'_, Vec<Arrival>> {
        // A poisoned lock only means another callback panicked mid-push; the Vec
        // itself is still sound.
        self.arrivals.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push(&self, a: Arrival) {
        self.lock().push(a);
    }

    pub fn take(&self) -> Vec<Arrival> {
        std::mem::take(&mut *self.lock())
    }
}

/// `user_data` of an event callback: owned by the callback, which fires exactly
/// once per registration (on CL_COMPLETE or an error status).
pub struct EventCtx {
    pub sink: Arc<Arrivals>,
    pub token: u64,
}

/// `user_data` of a lab's `clSetEventCallback`: the buffer whose reference
/// the lab handed to the callback, and the call that did.
pub struct ReleaseCtx {
    pub sink: Arc<Arrivals>,
    pub seq: u64,
    pub mem: cl_mem,
}

/// A lab's `clSetEventCallback(ev, CL_COMPLETE, clReleaseMemObject, buf)`
/// target: releases the buffer, as a program's callback would, and says when.
pub extern "C" fn on_complete_release(_ev: cl_event, status: cl_int, user_data: *mut c_void) {
    if user_data.is_null() {
        return;
    }
    // SAFETY: user_data is the `Box<ReleaseCtx>` leaked for this one
    // registration; the implementation calls us once, so we own it now.
    let ctx = unsafe { Box::from_raw(user_data.cast::<ReleaseCtx>()) };
    let t_ns = now_ns();
    // SAFETY: the lab's reference to the buffer, handed to this callback by
    // the call that registered it (the ledger released it there).
    let released = match unsafe { cl3::memory::release_mem_object(ctx.mem) } {
        Ok(()) => 0,
        Err(code) => code,
    };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        ctx.sink.push(Arrival::Released {
            seq: ctx.seq,
            t_ns,
            status,
            released,
        });
    }));
}

/// `user_data` of a destructor callback (fires once, when the object is destroyed).
pub struct ObjCtx {
    pub sink: Arc<Arrivals>,
    pub obj: ObjId,
}

fn stamp(ev: cl_event, what: cl_profiling_info) -> Option<u64> {
    match get_event_profiling_info(ev, what) {
        Ok(InfoType::Ulong(v)) => Some(v),
        _ => None,
    }
}

/// Reads the four profiling stamps of a completed command (never retains `ev`).
pub fn read_stamps(ev: cl_event) -> Option<Stamps> {
    timed(Stamps {
        queued: stamp(ev, CL_PROFILING_COMMAND_QUEUED)?,
        submit: stamp(ev, CL_PROFILING_COMMAND_SUBMIT)?,
        start: stamp(ev, CL_PROFILING_COMMAND_START)?,
        end: stamp(ev, CL_PROFILING_COMMAND_END)?,
    })
}

/// The stamps, if the driver really timed the command. NVIDIA's OpenCL answers
/// markers and barriers with 0 for every counter (measured on the H100): such a
/// command has no device time, and a span at device time 0 would sit days
/// before the run.
fn timed(s: Stamps) -> Option<Stamps> {
    (s.queued > 0 && s.start > 0 && s.end >= s.start).then_some(s)
}

/// A wait list as the C calls take it: a count and a pointer, null when empty
/// (the spec requires null for a count of 0).
pub(super) fn wait_ptr(wait: &[cl_event]) -> (cl_uint, *const cl_event) {
    if wait.is_empty() {
        (0, ptr::null())
    } else {
        // A script names a handful of events; cl_uint holds any list it can write.
        (
            cl_uint::try_from(wait.len()).unwrap_or(cl_uint::MAX),
            wait.as_ptr(),
        )
    }
}

/// `clSetEventCallback(ev, CL_COMPLETE, …)` target.
pub extern "C" fn on_event_complete(ev: cl_event, status: cl_int, user_data: *mut c_void) {
    if user_data.is_null() {
        return;
    }
    // SAFETY: user_data is the `Box<EventCtx>` leaked by `register_event` for this
    // one registration; the implementation calls us once, so we own it now.
    let ctx = unsafe { Box::from_raw(user_data.cast::<EventCtx>()) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let stamps = if status >= 0 { read_stamps(ev) } else { None };
        ctx.sink.push(Arrival::Completed {
            token: ctx.token,
            status,
            stamps,
        });
    }));
}

fn destroyed(user_data: *mut c_void) {
    if user_data.is_null() {
        return;
    }
    let t_ns = now_ns();
    // SAFETY: user_data is the `Box<ObjCtx>` leaked when the destructor callback was
    // registered; destructor callbacks fire once, so we own it now.
    let ctx = unsafe { Box::from_raw(user_data.cast::<ObjCtx>()) };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        ctx.sink.push(Arrival::Destroyed { obj: ctx.obj, t_ns });
    }));
}

/// `clSetMemObjectDestructorCallback` target.
pub extern "C" fn on_mem_destroyed(_mem: cl_mem, user_data: *mut c_void) {
    destroyed(user_data);
}

/// `clSetContextDestructorCallback` target (OpenCL 3.0).
pub unsafe extern "C" fn on_context_destroyed(_ctx: cl_context, user_data: *mut c_void) {
    destroyed(user_data);
}

/// Leaks a context for a callback registration; hand the pointer to the driver.
pub fn leak<T>(ctx: T) -> *mut c_void {
    Box::into_raw(Box::new(ctx)).cast()
}

/// Takes back a context whose registration failed (the callback will never fire).
///
/// # Safety
/// `p` must come from `leak::<T>` and the driver must not have accepted it.
pub unsafe fn reclaim<T>(p: *mut c_void) {
    // SAFETY: the caller guarantees `p` is an unclaimed `Box<T>` from `leak`.
    drop(unsafe { Box::from_raw(p.cast::<T>()) });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_the_driver_did_not_time_have_no_stamps() {
        let s = |queued, start, end| Stamps {
            queued,
            submit: queued,
            start,
            end,
        };
        assert_eq!(timed(s(0, 0, 0)), None, "NVIDIA's markers and barriers");
        assert_eq!(timed(s(10, 5, 4)), None, "ends before it starts");
        assert!(
            timed(s(10, 20, 20)).is_some(),
            "an empty command is still timed"
        );
        assert!(timed(s(10, 20, 30)).is_some());
    }
}
