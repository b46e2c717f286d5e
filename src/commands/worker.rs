//! The hidden `gpulab worker`: runs one variant, events on stdout.

use gpulab::backend::BackendError;
use gpulab::engine::{EngineError, worker};

use super::{EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE};

pub fn worker() -> anyhow::Result<i32> {
    if !worker::die_with_parent() {
        return Ok(EXIT_ERROR);
    }
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
