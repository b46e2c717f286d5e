//! The memory `gpulab watch` shares with the agents in the watched program
//! ([`gpulab_events::ring`]): an anonymous memory file of gpulab's, mapped
//! here and by every process of the program that records, which opens it as
//! `/proc/<gpulab's pid>/fd/<n>` (the agent's `region`). Nothing is on disk;
//! the memory goes when gpulab and the last process that mapped it do.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::AtomicU64;

use gpulab_events::ring::{Region, region_bytes, region_words};

/// The variable naming the memory in the program's environment.
pub const RING_ENV: &str = "GPULAB_AGENT_RING";

/// The shared region, mapped.
pub struct SharedRegion {
    file: OwnedFd,
    addr: *mut libc::c_void,
    nonce: u64,
}

// SAFETY: the mapping is plain shared memory reached only through atomics.
unsafe impl Send for SharedRegion {}
// SAFETY: as above: every access is an atomic operation.
unsafe impl Sync for SharedRegion {}

impl SharedRegion {
    /// A new, formatted region.
    pub fn new() -> std::io::Result<SharedRegion> {
        let file = rustix::fs::memfd_create("gpulab-agents", rustix::fs::MemfdFlags::CLOEXEC)?;
        sized(&file, region_bytes() as u64)?;
        // SAFETY: a new shared mapping of the file just sized; no address is
        // asked for, so nothing existing is replaced.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                region_bytes(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let nonce = nonce();
        let shared = SharedRegion { file, addr, nonce };
        Region::format(shared.words(), nonce)
            .ok_or_else(|| std::io::Error::other("the shared region is smaller than its layout"))?;
        Ok(shared)
    }

    fn words(&self) -> &[AtomicU64] {
        // SAFETY: `addr` maps `region_bytes()` bytes for as long as `self`
        // lives; atomics may alias shared memory, and every access is atomic.
        unsafe { std::slice::from_raw_parts(self.addr as *const AtomicU64, region_words()) }
    }

    /// The region, as the reader sees it.
    pub fn region(&self) -> Region<'_> {
        Region::view(self.words(), self.nonce)
    }

    /// `<dev>:<ino>:<nonce>:/proc/<pid>/fd/<n>`, for [`RING_ENV`].
    pub fn env_value(&self) -> std::io::Result<String> {
        let st = rustix::fs::fstat(&self.file)?;
        Ok(format!(
            "{}:{}:{:x}:/proc/{}/fd/{}",
            st.st_dev,
            st.st_ino,
            self.nonce,
            std::process::id(),
            self.file.as_fd().as_raw_fd()
        ))
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made; no reference into it outlives `self`.
        unsafe { libc::munmap(self.addr, region_bytes()) };
    }
}

/// Sizes the file, lifting a soft `ulimit -f` below the size for this call
/// only (a memory file counts against it like any file).
fn sized(file: &OwnedFd, bytes: u64) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Fsize);
    let lift = limit.current != limit.maximum
        && setrlimit(
            Resource::Fsize,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        )
        .is_ok();
    let sized = rustix::fs::ftruncate(file, bytes);
    if lift {
        let _ = setrlimit(Resource::Fsize, limit);
    }
    Ok(sized?)
}

/// A value no program guesses by chance: what marks a record as published.
fn nonce() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one((std::process::id(), crate::clock::now_ns()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_opens_by_its_path_and_a_record_written_there_is_read_here() {
        let shared = SharedRegion::new().expect("region");
        let env = shared.env_value().expect("env");
        let path = env.splitn(4, ':').nth(3).expect("path");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .expect("opens by path");
        assert_eq!(file.metadata().expect("stat").len(), region_bytes() as u64);
        let seg = shared.region().claim(1, 0).expect("claims");
        assert!(seg.write(3, b"{}"));
        let mut pos = 0;
        let mut buf = Vec::new();
        assert_eq!(
            shared
                .region()
                .segment(seg.index())
                .map(|s| s.read(&mut pos, &mut buf)),
            Some(gpulab_events::ring::Next::Record(3))
        );
        assert_eq!(buf, b"{}");
    }
}
