//! gpulab's pipe, found by identity, never by a descriptor number.
//!
//! `gpulab watch` keeps the read end of a pipe and names it in the program's
//! environment as `GPULAB_AGENT_PIPE=<dev>:<ino>:/proc/<gpulab's pid>/fd/<n>`.
//! Each process opens that path for itself (no descriptor is inherited, so a
//! program that closes or reuses descriptors, or a shell's `exec 6>file`, can
//! never make the agent write into the program's files) and writes only while
//! the descriptor it holds is still a FIFO with that device and inode: the check
//! runs before every write. Its own open file description is non-blocking, so
//! no write ever waits on a parent that stopped reading, and a dead parent is an
//! `EPIPE` (the agent's thread blocks `SIGPIPE`), after which the agent goes quiet.

use std::ffi::CString;

/// The environment variable naming the pipe.
pub const PIPE_ENV: &str = "GPULAB_AGENT_PIPE";

/// Where the pipe is and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipeId {
    pub dev: u64,
    pub ino: u64,
    pub path: String,
}

impl PipeId {
    /// Parses `<dev>:<ino>:<path>`; None for anything else.
    pub fn parse(value: &str) -> Option<PipeId> {
        let mut parts = value.trim().splitn(3, ':');
        let dev = parts.next()?.parse().ok()?;
        let ino = parts.next()?.parse().ok()?;
        let path = parts.next()?.to_string();
        path.starts_with('/').then_some(PipeId { dev, ino, path })
    }

    pub fn from_env() -> Option<PipeId> {
        PipeId::parse(&std::env::var(PIPE_ENV).ok()?)
    }
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrote {
    All,
    /// The pipe is full: nothing was written, try again later.
    Blocked,
    /// The parent is gone, or the descriptor is no longer gpulab's pipe.
    Gone,
}

/// An open write end of gpulab's pipe, checked to be it. The descriptor is
/// held by number, not owned: once it is no longer the pipe, the number is the
/// program's, and closing it would close the program's file.
pub struct Pipe {
    fd: i32,
    id: PipeId,
}

impl Drop for Pipe {
    fn drop(&mut self) {
        if self.is_ours() {
            // SAFETY: the descriptor is still the one `open` gave us.
            unsafe { libc::close(self.fd) };
        }
    }
}

impl Pipe {
    /// Opens the pipe `id` names, write-only and non-blocking; None unless what
    /// opened is that FIFO.
    pub fn open(id: &PipeId) -> Option<Pipe> {
        let path = CString::new(id.path.as_str()).ok()?;
        // SAFETY: a C string; the flags ask for nothing the caller must uphold.
        // O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead of
        // waiting for one.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY,
            )
        };
        if fd < 0 {
            return None;
        }
        let pipe = Pipe { fd, id: id.clone() };
        // Dropping a pipe that is not ours leaves the descriptor open: close it.
        if pipe.is_ours() {
            return Some(pipe);
        }
        std::mem::forget(pipe);
        // SAFETY: `open` returned this descriptor to us alone a moment ago.
        unsafe { libc::close(fd) };
        None
    }

    /// Is the descriptor still the FIFO gpulab named?
    fn is_ours(&self) -> bool {
        is_fifo(self.fd, self.id.dev, self.id.ino)
    }

    /// Writes `buf` (at most `PIPE_BUF` bytes: all of it or nothing) after
    /// checking the descriptor is still gpulab's pipe. A descriptor that is not
    /// (closed or reused by the program, as a process may close descriptors it
    /// does not know) is opened again from its path once.
    pub fn write(&mut self, buf: &[u8]) -> Wrote {
        if !self.is_ours() {
            match Pipe::open(&self.id) {
                // The old number is not ours to close (Drop checks), and the
                // program may use it.
                Some(again) => *self = again,
                None => return Wrote::Gone,
            }
        }
        loop {
            // SAFETY: a descriptor we own and a live slice.
            let n = unsafe { libc::write(self.fd, buf.as_ptr().cast(), buf.len()) };
            if n >= 0 {
                // A pipe takes a write of at most PIPE_BUF whole; a short count
                // cannot happen there, and anything else is not our pipe.
                return if n as usize == buf.len() {
                    Wrote::All
                } else {
                    Wrote::Gone
                };
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Wrote::Blocked,
                _ => return Wrote::Gone,
            }
        }
    }

    /// Waits up to `ms` milliseconds for room in the pipe.
    pub fn wait_writable(&self, ms: i32) {
        let mut fds = libc::pollfd {
            fd: self.fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut fds, 1, ms) };
    }
}

/// Is `fd` open on the FIFO with this device and inode?
pub fn is_fifo(fd: i32, dev: u64, ino: u64) -> bool {
    // SAFETY: `stat` is plain data that fstat fills or leaves alone.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat only reads the descriptor table; a closed fd is EBADF.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return false;
    }
    st.st_mode & libc::S_IFMT == libc::S_IFIFO && st.st_dev == dev && st.st_ino == ino
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    fn pipe_id(fd: i32) -> PipeId {
        // SAFETY: as in `is_fifo`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a descriptor the test owns.
        assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
        PipeId {
            dev: st.st_dev,
            ino: st.st_ino,
            path: format!("/proc/self/fd/{fd}"),
        }
    }

    #[test]
    fn the_variable_names_device_inode_and_a_path() {
        let id = PipeId::parse("64:1234:/proc/77/fd/5").expect("parses");
        assert_eq!(
            (id.dev, id.ino, id.path.as_str()),
            (64, 1234, "/proc/77/fd/5")
        );
        for bad in ["", "6", "64:x:/p", "64:1:relative", "64:1:"] {
            assert_eq!(PipeId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn it_opens_the_named_pipe_and_writes_through_its_own_descriptor() {
        let (mut r, w) = std::io::pipe().expect("pipe");
        let id = pipe_id(r.as_raw_fd());
        let mut pipe = Pipe::open(&id).expect("opens gpulab's pipe");
        assert_eq!(pipe.write(b"line\n"), Wrote::All);
        drop(w);
        drop(pipe);
        let mut got = String::new();
        r.read_to_string(&mut got).expect("read");
        assert_eq!(got, "line\n");
    }

    #[test]
    fn a_file_at_the_path_or_another_pipe_is_refused() {
        let file = tempfile_in_proc();
        let (r, _w) = std::io::pipe().expect("pipe");
        let real = pipe_id(r.as_raw_fd());
        // Same path, another identity: a regular file where the pipe was named.
        let wrong = PipeId {
            path: format!("/proc/self/fd/{}", file.as_raw_fd()),
            ..real.clone()
        };
        assert!(Pipe::open(&wrong).is_none());
        // Another pipe with the right path shape but not gpulab's inode.
        let (r2, _w2) = std::io::pipe().expect("pipe");
        let other = PipeId {
            path: format!("/proc/self/fd/{}", r2.as_raw_fd()),
            ..real
        };
        assert!(Pipe::open(&other).is_none());
    }

    #[test]
    fn a_full_pipe_blocks_nothing_and_a_closed_one_is_gone() {
        let (r, w) = std::io::pipe().expect("pipe");
        let mut pipe = Pipe::open(&pipe_id(r.as_raw_fd())).expect("opens");
        let chunk = [b'x'; 4096];
        let mut wrote = 0;
        loop {
            match pipe.write(&chunk) {
                Wrote::All => wrote += 1,
                Wrote::Blocked => break,
                Wrote::Gone => panic!("gone while the reader is open"),
            }
            assert!(wrote < 100_000, "a pipe never filled");
        }
        drop(r);
        drop(w);
        // SIGPIPE must not kill the test process: block it on this thread, as
        // the agent's thread does.
        block_sigpipe();
        assert_eq!(pipe.write(b"x\n"), Wrote::Gone);
    }

    #[test]
    fn a_descriptor_the_program_reused_is_never_written() {
        let (mut r, _w) = std::io::pipe().expect("pipe");
        let id = pipe_id(r.as_raw_fd());
        let mut pipe = Pipe::open(&id).expect("opens");
        let file = tempfile_in_proc();
        // The program closes "our" descriptor and its next open gets the number.
        // SAFETY: both descriptors belong to this test.
        unsafe { libc::dup2(file.as_raw_fd(), pipe.fd) };
        let reused = pipe.fd;
        assert_eq!(pipe.write(b"a\n"), Wrote::All, "opened again from its path");
        let mut file_bytes = String::new();
        let mut f = std::fs::File::from(file.try_clone().expect("dup"));
        use std::io::Seek;
        f.rewind().expect("rewind");
        f.read_to_string(&mut file_bytes).expect("read");
        assert_eq!(file_bytes, "", "nothing went into the program's file");
        assert_ne!(pipe.fd, reused);
        drop(pipe);
        // SAFETY: F_GETFD only inspects the descriptor table.
        let open = unsafe { libc::fcntl(reused, libc::F_GETFD) } >= 0;
        assert!(open, "the program's descriptor was left open");
        // SAFETY: the test's own duplicate.
        unsafe { libc::close(reused) };
        // SAFETY: a descriptor this test owns.
        unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let mut buf = [0u8; 8];
        assert_eq!(r.read(&mut buf).expect("read"), 2);
    }

    fn tempfile_in_proc() -> OwnedFd {
        let name = CString::new("gpulab-agent-test").expect("name");
        // SAFETY: memfd_create takes a C string and flags.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: just created.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    fn block_sigpipe() {
        // SAFETY: sigset_t is plain data, filled by sigemptyset.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
    }
}
