//! The hidden commands gpulab starts itself: `gpulab worker` runs one variant,
//! events on stdout; `gpulab opencl-platforms` asks a watched program's own
//! OpenCL loader what it will give the program.

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

pub fn opencl_platforms(loader: &std::path::Path) -> anyhow::Result<i32> {
    use gpulab::machine::platforms;
    match platforms::list_through(loader) {
        Ok(list) => {
            std::io::Write::write_all(
                &mut std::io::stdout(),
                platforms::to_lines(&list).as_bytes(),
            )?;
            Ok(EXIT_OK)
        }
        Err(why) => {
            eprintln!("gpulab opencl-platforms: {why}");
            Ok(EXIT_UNAVAILABLE)
        }
    }
}
