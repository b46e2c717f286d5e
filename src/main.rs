//! gpulab's entry point: parse arguments, hand over to a command, map the outcome
//! to an exit status. Everything else lives in the library.

mod cli;
mod commands;

use clap::Parser;

fn main() {
    gpulab::clock::phase("process start");
    // Before any OpenCL call and before any thread exists: make an installed but
    // unregistered NVIDIA OpenCL driver visible to the ICD loader.
    let icd_note = gpulab::backend::discover::prepare_icd_environment();
    gpulab::clock::phase("icd environment");
    let cli = cli::Cli::parse();
    let code = match commands::dispatch(cli, icd_note) {
        Ok(code) => code,
        Err(e) => {
            let code = e
                .downcast_ref::<commands::Failure>()
                .map(|f| f.code)
                .unwrap_or(commands::EXIT_ERROR);
            eprintln!("gpulab: {e:#}");
            code
        }
    };
    gpulab::clock::phase("exit");
    std::process::exit(code);
}
