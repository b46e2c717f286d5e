//! The hidden `gpulab worker`: runs one variant, events on stdout.

use gpulab::backend::BackendError;
use gpulab::engine::{EngineError, worker};

use super::{EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE};

pub fn worker() -> anyhow::Result<i32> {
    // Die with the parent: a worker nobody reads would hold device memory forever.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let stdin = std::io::BufReader::new(std::io::stdin());
    let stdout = std::io::stdout();
    Ok(match worker::serve(stdin, stdout.lock()) {
        Ok(_) => EXIT_OK,
        Err(EngineError::Backend(BackendError::Unavailable { .. })) => EXIT_UNAVAILABLE,
        Err(EngineError::UnsupportedBackend(_)) => EXIT_UNAVAILABLE,
        Err(EngineError::Lab(_)) => EXIT_USAGE,
        Err(_) => EXIT_ERROR,
    })
}
