//! The door gpulab's Python startup hook reports through
//! (`crates/gpulab-source/src/watch/python/sitecustomize.py`): what PyTorch, CuPy and JAX say of
//! their own device memory, taken as records like the hooks' and written
//! into gpulab's memory like theirs, on the same clock. The hook finds
//! these functions only in a process the driver has already loaded the agent
//! into; when the agent does not record (no memory of gpulab's), each says so
//! and the hook stops sending.

use std::ffi::{CStr, c_char};

use gpulab_events::{Framework, FrameworkSaid};

use crate::clock::now_ns;
use crate::queue::Record;
use crate::transport;

/// `u64::MAX` as a limit: the framework has none.
const NO_LIMIT: u64 = u64::MAX;
/// The most of a reason kept, in bytes.
const REASON_MAX: usize = 300;

/// The framework a C string names; None for a null pointer or another name.
///
/// # Safety
/// `name` is null or a NUL-terminated string that stays valid for the call.
unsafe fn framework(name: *const c_char) -> Option<Framework> {
    if name.is_null() {
        return None;
    }
    // SAFETY: not null, and NUL-terminated as the caller promises.
    let name = unsafe { CStr::from_ptr(name) };
    Framework::parse(name.to_str().ok()?)
}

/// Queues what `framework` said; 0 when the agent records it, -1 when not.
fn said(framework: Option<Framework>, device: u32, said: FrameworkSaid) -> i32 {
    said_with(framework, device, said, || None)
}

/// [`said`], with the calling thread's stack where `stack` takes one (only
/// once the agent records).
fn said_with(
    framework: Option<Framework>,
    device: u32,
    said: FrameworkSaid,
    stack: impl FnOnce() -> Option<crate::stack::Captured>,
) -> i32 {
    let Some(framework) = framework else {
        return -1;
    };
    if !transport::running() {
        return -1;
    }
    transport::send(Record::Framework {
        t_ns: now_ns(),
        framework,
        device,
        said,
        stack: stack(),
    });
    0
}

/// The framework's allocator on `device` holds `reserved` bytes from the
/// driver, of which the program's tensors or arrays use `allocated`; `limit`
/// is the most it will hold (`u64::MAX`: none).
///
/// # Safety
/// `framework` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpulab_framework_memory(
    framework: *const c_char,
    device: u32,
    allocated: u64,
    reserved: u64,
    limit: u64,
) -> i32 {
    // SAFETY: as this function's caller promises.
    let framework = unsafe { self::framework(framework) };
    said(
        framework,
        device,
        FrameworkSaid::Memory {
            allocated,
            reserved,
            limit: (limit != NO_LIMIT).then_some(limit),
        },
    )
}

/// The framework refused an allocation of `asked` bytes on `device`, which
/// had `free` bytes free of the `limit` it may use.
///
/// # Safety
/// `framework` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpulab_framework_refused(
    framework: *const c_char,
    device: u32,
    asked: u64,
    free: u64,
    limit: u64,
) -> i32 {
    // SAFETY: as this function's caller promises.
    let framework = unsafe { self::framework(framework) };
    let refused = FrameworkSaid::Refused {
        asked,
        free,
        limit,
        stack: None,
    };
    // The observer runs on the thread that asked: its stack names the line.
    said_with(framework, device, refused, || {
        crate::stack::capture(gpulab_events::ObjKind::Buffer)
    })
}

/// The hook cannot read `framework`: `reason` says why (kept to 300 bytes).
///
/// # Safety
/// Both are null or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpulab_framework_unreadable(
    framework: *const c_char,
    reason: *const c_char,
) -> i32 {
    // SAFETY: as this function's caller promises.
    let framework = unsafe { self::framework(framework) };
    let reason = if reason.is_null() {
        String::new()
    } else {
        // SAFETY: not null, and NUL-terminated as the caller promises.
        let bytes = unsafe { CStr::from_ptr(reason) }.to_bytes();
        String::from_utf8_lossy(&bytes[..bytes.len().min(REASON_MAX)]).into_owned()
    };
    said(framework, 0, FrameworkSaid::Unreadable { reason })
}

/// The calling thread is the hook's: its driver calls (a framework's figures
/// may cost one) are left out of the program's.
#[unsafe(no_mangle)]
pub extern "C" fn gpulab_framework_quiet() -> i32 {
    transport::quiet_thread();
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_frameworks_named_are_taken() {
        // SAFETY: literal C strings and a null pointer.
        unsafe {
            assert_eq!(framework(c"pytorch".as_ptr()), Some(Framework::Pytorch));
            assert_eq!(framework(c"torch".as_ptr()), None);
            assert_eq!(framework(std::ptr::null()), None);
        }
    }

    #[test]
    fn nothing_is_taken_where_the_agent_does_not_record() {
        // No memory of gpulab's in a test process: the hook is told to stop.
        // SAFETY: a literal C string.
        let r = unsafe { gpulab_framework_memory(c"pytorch".as_ptr(), 0, 1, 2, NO_LIMIT) };
        assert_eq!(r, -1);
    }

    #[test]
    fn a_quiet_thread_is_its_own() {
        let other = std::thread::spawn(|| {
            gpulab_framework_quiet();
            transport::quiet()
        });
        assert!(other.join().expect("thread"));
        assert!(!transport::quiet());
    }
}
