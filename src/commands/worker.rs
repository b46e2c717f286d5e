//! The hidden `gpulab worker`: runs one variant, events on stdout.

use gpulab::backend::BackendError;
use gpulab::engine::EngineError;
use gpulab::engine::worker::{self, WorkerRequest};

use super::{EXIT_ERROR, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::cli::WorkerArgs;

pub fn worker(device: Option<String>, args: WorkerArgs) -> anyhow::Result<i32> {
    // Die with the parent: a worker nobody reads would hold device memory forever.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let req = WorkerRequest {
        lab: args.lab,
        variant: args.variant,
        params: args.params,
        device,
        budget_bytes: args.budget_bytes,
        unbounded: args.until_failure,
        step: args.step,
    };
    let stdout = std::io::stdout();
    Ok(match worker::run(&req, stdout.lock()) {
        Ok(_) => EXIT_OK,
        Err(EngineError::Backend(BackendError::Unavailable { .. })) => EXIT_UNAVAILABLE,
        Err(EngineError::UnsupportedBackend(_)) => EXIT_UNAVAILABLE,
        Err(EngineError::Lab(_)) => EXIT_USAGE,
        Err(_) => EXIT_ERROR,
    })
}
