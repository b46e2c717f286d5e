//! The process's resident memory, read around the OpenCL calls that move it
//! by megabytes at once: a context (PoCL's runtime for it), a queue, a
//! program's build (PoCL's compiler runs in the process). On a CPU device
//! that memory is what the program's device objects take, and a reading
//! taken by gpulab's sampler lands between such calls only by luck: a PoCL
//! program of 45 ms made its context and queue in 1.2 ms, and on a loaded
//! host no sample fell on either side of them in a run of five (21.8% of its
//! memory named). Read in the calling thread, on each side, the step is the
//! call's.
//!
//! Harmless by construction: `/proc/self/statm` is opened read-only and
//! close-on-exec, read once and closed in the same call, and the thread's
//! `errno` is what it was. Where it cannot be read (no `/proc`, no
//! descriptor left), nothing is said.

use gpulab_events::ReadSide;

use crate::transport;

/// Records the process's resident memory on `side` of the call `api`.
pub fn read(api: &'static str, side: ReadSide) {
    read_beside(api, side, None);
}

/// [`read`], saying the bytes of buffers whose first use was among the
/// work the call waited for ([`gpulab_events::DeviceRead::first_touched_bytes`]).
pub fn read_beside(api: &'static str, side: ReadSide, first_touched: Option<u64>) {
    if let Some(bytes) = resident_bytes() {
        transport::read_resident(api, side, bytes, first_touched);
    }
}

/// The process's resident set, in bytes.
fn resident_bytes() -> Option<u64> {
    let saved = errno();
    let read = statm();
    set_errno(saved);
    let (pages, page) = (read?, page_size()?);
    pages.checked_mul(page)
}

/// `/proc/self/statm`'s second field: resident pages.
fn statm() -> Option<u64> {
    let mut buf = [0u8; 128];
    // SAFETY: a NUL-terminated path; the flags ask for nothing to be made.
    let fd = unsafe {
        libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: the descriptor just opened, and a buffer of its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: the descriptor just opened, closed once.
    unsafe { libc::close(fd) };
    let text = std::str::from_utf8(buf.get(..usize::try_from(n).ok()?)?).ok()?;
    parse(text)
}

fn parse(statm: &str) -> Option<u64> {
    statm.split_ascii_whitespace().nth(1)?.parse().ok()
}

fn page_size() -> Option<u64> {
    // SAFETY: a query without side effects.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()
}

fn errno() -> i32 {
    // SAFETY: the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

fn set_errno(value: i32) {
    // SAFETY: the calling thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statms_resident_field_is_the_second() {
        assert_eq!(parse("2451 1093 812 2 0 367 0\n"), Some(1093));
        assert_eq!(parse("2451"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("a b"), None);
    }

    /// A read of this process: some memory, and `errno` as it was.
    #[test]
    fn a_read_keeps_errno_and_finds_memory() {
        set_errno(42);
        let bytes = resident_bytes();
        assert_eq!(errno(), 42);
        assert!(bytes.is_some_and(|b| b > 0), "{bytes:?}");
    }
}
