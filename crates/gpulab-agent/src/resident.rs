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
//! Harmless by construction: `/proc/self/statm` is opened, read and closed
//! on a short-lived thread of the agent's that blocks every signal and first
//! takes a private copy of the descriptor table (`unshare(CLONE_FILES)`), as
//! the shared memory is mapped ([`crate::region`]): no descriptor number of
//! the program's is ever taken, even for a moment (a program that closes
//! descriptor 0 and opens a file expecting it to be 0 finds it so whatever
//! the agent reads meanwhile), and the calling thread's `errno` is what it
//! was. Where it cannot be read (no `/proc`, no thread), nothing is said.

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
    let read = crate::quiet::spawn("gpulab-rss", privately)
        .ok()
        .and_then(|t| t.join().ok())
        .flatten();
    set_errno(saved);
    let (pages, page) = (read?, page_size()?);
    pages.checked_mul(page)
}

/// On a thread of the agent's with a descriptor table of its own: the
/// process's resident pages.
fn privately() -> Option<u64> {
    // SAFETY: unshare with CLONE_FILES only gives this thread a copy of the
    // descriptor table, closed when the thread ends.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return None;
    }
    let fd = open_statm().or_else(|| {
        // The program holds every number its limit allows: one is let go
        // in this thread's copy of the table alone (Linux ties POSIX locks
        // to the table that closes, and the program's own table still holds
        // the file), so the read never competes with it for one.
        let last = last_open()?;
        // SAFETY: a descriptor of this thread's own copy of the table.
        unsafe { libc::close(last) };
        open_statm()
    })?;
    let mut buf = [0u8; 128];
    // SAFETY: the descriptor just opened, and a buffer of its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: the descriptor just opened, in this thread's own table.
    unsafe { libc::close(fd) };
    let text = std::str::from_utf8(buf.get(..usize::try_from(n).ok()?)?).ok()?;
    parse(text)
}

/// `/proc/self/statm`, opened read-only and close-on-exec.
fn open_statm() -> Option<i32> {
    // SAFETY: a NUL-terminated path; the flags ask for nothing to be made.
    let fd = unsafe {
        libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    (fd >= 0).then_some(fd)
}

/// The highest descriptor open below the limit, when every number is taken.
fn last_open() -> Option<i32> {
    // SAFETY: plain data that getrlimit fills.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let top = i32::try_from(limit.rlim_cur.min(1 << 20)).ok()?;
    // SAFETY: F_GETFD only reads this thread's table.
    (0..top)
        .rev()
        .find(|fd| unsafe { libc::fcntl(*fd, libc::F_GETFD) } >= 0)
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

    /// The descriptor is opened in a table of the reading thread's own: in
    /// a child process whose every descriptor number is taken (its limit is
    /// its lowest free one), where any open in its table fails, the read
    /// still finds its memory, and the child's descriptors are as they were.
    #[test]
    fn a_read_takes_no_descriptor_of_the_callers_table() {
        // SAFETY: fork in a test; the child reads, then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let free = open_statm().unwrap_or(-1);
            // SAFETY: the descriptor just opened.
            unsafe { libc::close(free) };
            let limit = libc::rlimit {
                rlim_cur: u64::try_from(free).unwrap_or(0),
                rlim_max: u64::try_from(free).unwrap_or(0),
            };
            // SAFETY: plain data; only this child's limit changes.
            let limited = free > 0 && unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0;
            let full = open_statm().is_none();
            let before = last_open();
            let read = resident_bytes().is_some_and(|b| b > 0);
            let kept = last_open() == before;
            let code = match (limited && full, read, kept) {
                (false, ..) => 3,
                (true, true, true) => 0,
                (true, false, _) => 1,
                (true, true, false) => 2,
            };
            // SAFETY: ends the child without running the test harness's exit.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "{status}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "1: not read, 2: a descriptor of the child's went, 3: the table was not full"
        );
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
