//! The agent library gpulab carries inside its own binary (built by `build.rs`
//! from `crates/gpulab-agent`), and the path a watched program loads it from.
//! A debug build in the workspace carries none: it reads the one cargo built
//! beside it when a watch starts (see `build.rs`).
//!
//! The bytes go into an anonymous memory file, loaded as
//! `/proc/<gpulab's pid>/fd/<n>`: nothing is written to disk, nothing is left
//! behind, and no other user can swap the library between writing and loading.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

/// An anonymous memory file named `name` (as `/proc/<pid>/fd/<n>` links to
/// it) holding `bytes`, closed on exec: the program opens it by path.
pub fn memory_file(name: &str, bytes: &[u8]) -> std::io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    // A memory file counts against `ulimit -f` like any file: a soft limit
    // below its size is lifted (to the hard one) for this write only, so the
    // program still starts under the user's limit.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Fsize);
    let lifted = rustix::process::Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    let lift = limit.current != limit.maximum
        && rustix::process::setrlimit(rustix::process::Resource::Fsize, lifted).is_ok();
    let written = file.write_all(bytes);
    if lift {
        let _ = rustix::process::setrlimit(rustix::process::Resource::Fsize, limit);
    }
    written?;
    Ok(file.into())
}

/// The built agent, an OpenCL loader layer.
#[cfg(not(agent_beside))]
static LIBRARY: &[u8] = include_bytes!(env!("GPULAB_AGENT_LIB"));

/// The agent's bytes: those carried inside gpulab, or, in a debug build, those
/// cargo built beside it.
fn library() -> std::io::Result<std::borrow::Cow<'static, [u8]>> {
    #[cfg(not(agent_beside))]
    return Ok(std::borrow::Cow::Borrowed(LIBRARY));
    // A debug build (or a test binary) carried to another machine, a GPU
    // host, reads the agent carried beside it from where this names.
    #[cfg(agent_beside)]
    {
        let path = std::env::var_os("GPULAB_AGENT_LIB")
            .map_or_else(|| env!("GPULAB_AGENT_LIB").into(), std::path::PathBuf::from);
        std::fs::read(&path)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "this debug build of gpulab reads its watch agent from {}, where cargo \
                     built it ({e}): run it from its build, name the agent's library in \
                     GPULAB_AGENT_LIB, or use a release build, which carries the agent inside",
                        path.display()
                    ),
                )
            })
    }
}

/// The agent, ready to be named in `OPENCL_LAYERS`. Keep it alive as long as a
/// watched process may still load it.
pub struct AgentLibrary {
    file: OwnedFd,
    size: usize,
}

impl AgentLibrary {
    pub fn new() -> std::io::Result<AgentLibrary> {
        let bytes = library()?;
        let file = memory_file("gpulab-agent.so", &bytes)?;
        Ok(AgentLibrary {
            file,
            size: bytes.len(),
        })
    }

    /// A path any process of this user can open while gpulab runs.
    pub fn path(&self) -> String {
        format!("/proc/{}/fd/{}", std::process::id(), self.file.as_raw_fd())
    }

    pub fn size_bytes(&self) -> usize {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_agent_is_a_shared_library_that_can_be_read_back_by_path() {
        let bytes = library().expect("the agent's bytes");
        assert_eq!(&bytes[..4], b"\x7fELF");
        let lib = AgentLibrary::new().expect("memfd");
        let back = std::fs::read(lib.path()).expect("read the agent back by its path");
        assert_eq!(back.len(), lib.size_bytes());
        assert_eq!(&back[..], &bytes[..]);
    }
}
