//! `gpulab completions SHELL` and `gpulab man`: what a shell and `man` need, made
//! from the same clap definition as the parser, so they never drift from it.

use std::io::Write;

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Command, CommandFactory};

use super::EXIT_OK;
use crate::cli::Cli;

pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    let mut script = Vec::new();
    let set = super::load_labs(&[]);
    let mut cmd = with_catalog(offered(&Cli::command()), set.labs());
    clap_complete::generate(shell, &mut cmd, "gpulab", &mut script);
    emit(&script)
}

/// The command line with the catalog's lab ids and variants as the values
/// the shell offers (the shipped labs and the user's own, as of generating the
/// script), each with its title. Only the script gets them: the parser still
/// takes any id and names the nearest when it is unknown.
fn with_catalog(cmd: Command, labs: &[gpulab::lab::Lab]) -> Command {
    let ids: Vec<PossibleValue> = labs
        .iter()
        .map(|l| PossibleValue::new(l.id.clone()).help(l.title.clone()))
        .collect();
    let mut variants: Vec<PossibleValue> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for l in labs {
        for v in &l.variants {
            if !seen.contains(&v.name.as_str()) {
                seen.push(&v.name);
                variants.push(PossibleValue::new(v.name.clone()).help(v.description.clone()));
            }
        }
    }
    let ids = PossibleValuesParser::new(ids);
    let variants = PossibleValuesParser::new(variants);
    cmd.mut_arg("lab", |a| a.value_parser(ids.clone()))
        .mut_arg("variant", |a| a.value_parser(variants.clone()))
        .mut_subcommand("run", |c| {
            c.mut_arg("id", |a| a.value_parser(ids.clone()))
                .mut_arg("variant", |a| a.value_parser(variants.clone()))
        })
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
