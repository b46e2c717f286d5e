//! gpulab's entry point: parse arguments, hand over to a command, map the outcome
//! to an exit status. Everything else lives in the library.

mod cli;
mod commands;

use clap::Parser;

fn main() {
    gpulab::clock::phase("process start");
    // A shell asking for completions is answered here, before anything else.
    commands::shell::complete_if_asked();
    let cli = cli::Cli::parse();
    // Before any OpenCL call and before any thread exists: make an installed but
    // unregistered NVIDIA OpenCL driver visible to the ICD loader, except where
    // gpulab asks a program's own loader what that program will see.
    let icd_note = if matches!(cli.command, Some(cli::Cmd::OpenclPlatforms { .. })) {
        None
    } else {
        gpulab::backend::discover::prepare_icd_environment()
    };
    gpulab::clock::phase("icd environment");
    let code = match commands::dispatch(cli, icd_note) {
        Ok(code) => code,
        Err(e) => match e.downcast_ref::<commands::StdoutError>() {
            // `gpulab report big.jsonl | head -1`: the reader has what it wanted.
            Some(out) if out.0.kind() == std::io::ErrorKind::BrokenPipe => {
                commands::EXIT_BROKEN_PIPE
            }
            Some(_) => {
                commands::say(format_args!("gpulab: {e:#}"));
                commands::EXIT_USAGE
            }
            None => {
                commands::say(format_args!("gpulab: {e:#}"));
                e.downcast_ref::<commands::Failure>()
                    .map(|f| f.code)
                    .unwrap_or(commands::EXIT_ERROR)
            }
        },
    };
    gpulab::clock::phase("exit");
    std::process::exit(code);
}
