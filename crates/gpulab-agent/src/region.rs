//! The memory gpulab shares with its agents, mapped into this process.
//!
//! `gpulab watch` names it in the program's environment as
//! `GPULAB_AGENT_RING=<dev>:<ino>:<nonce>:/proc/<gpulab's pid>/fd/<n>`, an
//! anonymous memory file of gpulab's. The agent opens that path on a thread of
//! its own that first takes a private copy of the descriptor table
//! (`unshare(CLONE_FILES)`): the descriptor exists only there, is closed once
//! the memory is mapped, and the copy ends with the thread. No descriptor of
//! the program is ever opened, taken, closed or written, whatever its other
//! threads do to theirs meanwhile; the mapping is the process's and outlives
//! the thread. A file that is not the one named, or memory without the
//! region's header and nonce, is refused and unmapped.

use std::ffi::CString;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;

use gpulab_events::ring::{Region, region_bytes, region_words};

/// The environment variable naming the memory.
pub const RING_ENV: &str = "GPULAB_AGENT_RING";

/// Where the memory is and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingId {
    pub dev: u64,
    pub ino: u64,
    pub nonce: u64,
    pub path: String,
}

impl RingId {
    /// Parses `<dev>:<ino>:<nonce, hex>:<path>`; None for anything else.
    pub fn parse(value: &str) -> Option<RingId> {
        let mut parts = value.trim().splitn(4, ':');
        let dev = parts.next()?.parse().ok()?;
        let ino = parts.next()?.parse().ok()?;
        let nonce = u64::from_str_radix(parts.next()?, 16).ok()?;
        let path = parts.next()?.to_string();
        path.starts_with('/').then_some(RingId {
            dev,
            ino,
            nonce,
            path,
        })
    }
}

/// The region once this image mapped it (a forked child has its parent's).
static MAPPED: OnceLock<Region<'static>> = OnceLock::new();

/// The region this image mapped, if it did.
pub fn mapped() -> Option<Region<'static>> {
    MAPPED.get().copied()
}

/// Maps the region `GPULAB_AGENT_RING` names, once per image.
pub fn map() -> Option<Region<'static>> {
    if let Some(region) = mapped() {
        return Some(region);
    }
    let id = RingId::parse(&std::env::var(RING_ENV).ok()?)?;
    let nonce = id.nonce;
    let addr = crate::quiet::spawn("gpulab-map", move || map_privately(&id))
        .ok()?
        .join()
        .ok()??;
    // SAFETY: `addr` is a live shared mapping of `region_bytes()` bytes, never
    // unmapped once the region is accepted; atomics may alias shared memory,
    // and every access through them is atomic.
    let words: &'static [AtomicU64] =
        unsafe { std::slice::from_raw_parts(addr as *const AtomicU64, region_words()) };
    let Some(region) = Region::open(words, nonce) else {
        // SAFETY: the mapping made above, not handed to anyone.
        unsafe { libc::munmap(addr as *mut libc::c_void, region_bytes()) };
        return None;
    };
    Some(*MAPPED.get_or_init(|| region))
}

/// On a thread of its own with a private descriptor table: opens the file,
/// checks it is the one named, maps it shared, closes it. The mapping's
/// address.
fn map_privately(id: &RingId) -> Option<usize> {
    // SAFETY: unshare with CLONE_FILES only gives this thread a copy of the
    // descriptor table; the copy's descriptors close when the thread ends,
    // and (Linux) a POSIX lock is released only by its own table's closes.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return None;
    }
    let path = CString::new(id.path.as_str()).ok()?;
    // SAFETY: a C string and plain flags.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `stat` is plain data that fstat fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor of this thread's own table.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0
        && st.st_mode & libc::S_IFMT == libc::S_IFREG
        && st.st_dev == id.dev
        && st.st_ino == id.ino
        && u64::try_from(st.st_size).is_ok_and(|s| s >= region_bytes() as u64);
    let addr = if ok {
        // SAFETY: a new shared mapping of a file this thread checked; no
        // address is asked for, so nothing existing is replaced.
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                region_bytes(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        }
    } else {
        libc::MAP_FAILED
    };
    // SAFETY: the descriptor this thread opened in its own table.
    unsafe { libc::close(fd) };
    (addr != libc::MAP_FAILED).then_some(addr as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_names_device_inode_nonce_and_a_path() {
        let id = RingId::parse("64:1234:ff:/proc/77/fd/5").expect("parses");
        assert_eq!(
            (id.dev, id.ino, id.nonce, id.path.as_str()),
            (64, 1234, 255, "/proc/77/fd/5")
        );
        for bad in [
            "",
            "6",
            "64:x:1:/p",
            "64:1:zz:/p",
            "64:1:1:relative",
            "64:1:1:",
        ] {
            assert_eq!(RingId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_file_that_is_not_the_named_one_is_never_mapped() {
        let name = CString::new("not-gpulab").expect("name");
        // SAFETY: memfd_create takes a C string and flags.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        let id = RingId {
            dev: 1,
            ino: 1,
            nonce: 0,
            path: format!("/proc/self/fd/{fd}"),
        };
        assert_eq!(map_privately(&id), None);
        // SAFETY: F_GETFD only reads the table: the test's descriptor is open.
        assert!(unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0);
        // SAFETY: the test's own descriptor.
        unsafe { libc::close(fd) };
    }
}
