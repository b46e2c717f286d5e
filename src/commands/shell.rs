//! `gpulab completions SHELL` and `gpulab man`: what a shell and `man` need, made
//! from the same clap definition as the parser, so they never drift from it.

use std::io::Write;

use clap::{Command, CommandFactory};

use super::EXIT_OK;
use crate::cli::Cli;

pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut offered(&Cli::command()), "gpulab", &mut script);
    emit(&script)
}

pub fn man() -> anyhow::Result<i32> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    emit(&page)
}

/// The command line a shell offers: the hidden `worker` (gpulab starts it itself)
/// left out, since some generators (fish) would offer it beside the others.
fn offered(cli: &Command) -> Command {
    let mut cmd = Command::new("gpulab")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cli.get_arguments().cloned())
        .subcommands(cli.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    if let Some(about) = cli.get_about() {
        cmd = cmd.about(about.clone());
    }
    cmd
}

/// A closed pipe (`gpulab man | head`) is the reader being done, not a failure.
fn emit(bytes: &[u8]) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(EXIT_OK),
    }
}
