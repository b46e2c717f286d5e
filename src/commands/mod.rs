//! The commands behind the CLI: glue between arguments, the library and the
//! terminal. The only code besides `main.rs` that prints, and every print is
//! handled: stdout through [`out!`]/[`outln!`] (a failure ends the command, a
//! closed pipe quietly: `gpulab report big.jsonl | head -1`), stderr through
//! [`errln!`] (a failure there has nowhere to be said, so it is let
//! go). `print!` and friends panic on either.

/// `print!` that hands a failed write to stdout back to the command (`?`).
macro_rules! out {
    ($($t:tt)*) => {
        $crate::commands::write_stdout(&format!($($t)*))?
    };
}

/// `println!` as [`out!`].
macro_rules! outln {
    () => {
        $crate::commands::write_stdout("\n")?
    };
    ($($t:tt)*) => {
        $crate::commands::write_stdout(&format!("{}\n", format_args!($($t)*)))?
    };
}

/// `eprintln!` that never panics.
macro_rules! errln {
    ($($t:tt)*) => {
        $crate::commands::write_stderr(&format!("{}\n", format_args!($($t)*)))
    };
}

mod card;
mod check;
mod class;
mod dashboard;
mod doctor;
mod export;
mod list;
mod replay;
mod report;
mod run;
pub mod shell;
mod watch;
mod worker;

use crate::cli::{Cli, Cmd};

/// Exit statuses, documented in the README and under `--help` (`cli::AFTER_HELP`).
pub const EXIT_OK: i32 = 0;
/// `--fail-on` matched a verdict.
pub const EXIT_VERDICT: i32 = 1;
/// Bad input: unknown lab, bad parameter, malformed or missing file, an output
/// path that cannot be written.
pub const EXIT_USAGE: i32 = 2;
/// No device, platform or driver library to run on (`gpulab doctor` explains).
pub const EXIT_UNAVAILABLE: i32 = 3;
/// The run failed or the worker crashed.
pub const EXIT_ERROR: i32 = 4;
/// A run passed its time limit and was ended (`--time-limit`), as timeout(1)
/// exits.
pub const EXIT_TIMED_OUT: i32 = 124;
/// `watch`: the command could not be run (not executable, or no such format).
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// `watch`: the command was not found.
pub const EXIT_NOT_FOUND: i32 = 127;
// Cancelled by a signal: 128 + the signal (`gpulab::signals::cancelled_status`).
/// stdout was closed (`| head`): the command stops quietly, as a program
/// SIGPIPE ended would (128 + 13).
pub const EXIT_BROKEN_PIPE: i32 = 141;

/// A write to stdout that failed: a closed pipe is a quiet end
/// ([`EXIT_BROKEN_PIPE`]); anything else (a full disk) is said, exit 2.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to stdout: {0}")]
pub struct StdoutError(pub std::io::Error);

pub fn write_stdout(text: &str) -> Result<(), StdoutError> {
    write_stdout_bytes(text.as_bytes())
}

/// [`write_stdout`] of bytes (a PNG to `-`).
pub fn write_stdout_bytes(bytes: &[u8]) -> Result<(), StdoutError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(StdoutError)
}

/// Writes to stderr; a failure is let go (there is nowhere left to say it).
/// The labs a command can run: the shipped ones, then the user's own
/// (`$XDG_CONFIG_HOME/gpulab/labs`, else `~/.config/gpulab/labs`), then each
/// folder named with `--labs`.
pub fn load_labs(dirs: &[std::path::PathBuf]) -> gpulab::lab::LabSet {
    let user = gpulab::dirs::config().map(|d| d.join("labs"));
    gpulab::lab::LabSet::load_with(user.as_deref(), dirs)
}

/// A lab named on the command line by its id, or by its file's path (one
/// ending in `.toml`, or naming a folder): the file is loaded into `set` and
/// its id comes back. An unknown id whose file sits in the working folder
/// says how to run it.
pub fn lab_named(set: &mut gpulab::lab::LabSet, named: &str) -> anyhow::Result<String> {
    let path = std::path::Path::new(named);
    if path.extension().is_some_and(|x| x == "toml") || path.components().count() > 1 {
        return set
            .add_file(path)
            .map_err(|e| fail(EXIT_USAGE, e.to_string()));
    }
    match set.get(named) {
        Ok(_) => Ok(named.to_string()),
        Err(e) => {
            let mut said = e.to_string();
            if matches!(e, gpulab::lab::LabError::UnknownLab { .. }) {
                let here = format!("{named}.toml");
                if std::path::Path::new(&here).is_file() {
                    said.push_str(&format!(
                        "; a lab file {here} is in this folder: `gpulab run ./{here}`, or \
                         `--labs .` to take every lab file here"
                    ));
                }
                for p in &set.problems {
                    said.push_str(&format!("\nskipped a lab file: {p}"));
                }
            }
            Err(fail(EXIT_USAGE, said))
        }
    }
}

pub fn write_stderr(text: &str) {
    // What gpulab says on stderr quotes files others made (a recording's bad
    // line, a card's version, a file name): nothing in it may act on the
    // terminal. gpulab's own progress line goes through `write_stderr_raw`.
    write_stderr_raw(&gpulab::report::printable(text));
}

/// [`write_stderr`] of text gpulab made whole, terminal controls and all (the
/// progress line that rewrites itself).
pub fn write_stderr_raw(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// [`write_stderr`] of one line.
pub fn say(line: std::fmt::Arguments) {
    write_stderr(&format!("{line}\n"));
}

/// An error that carries its exit status.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

pub fn fail(code: i32, message: impl Into<String>) -> anyhow::Error {
    Failure {
        code,
        message: message.into(),
    }
    .into()
}

pub fn dispatch(mut cli: Cli, icd_note: Option<String>) -> anyhow::Result<i32> {
    if let Some(cmd) = cli.command.as_mut() {
        let (labs, device) = cmd.take_scope();
        cli.labs.extend(labs);
        cli.device = device.or(cli.device);
    }
    // A folder the user named and that is not there is a mistake in the command
    // line, whatever the command: going on without its labs would run or list
    // something else than what was asked.
    if let Some(dir) = cli.labs.iter().find(|d| !d.is_dir()) {
        return Err(Failure {
            code: EXIT_USAGE,
            message: format!("--labs {}: no such folder", dir.display()),
        }
        .into());
    }
    match cli.command {
        Some(Cmd::List { json, .. }) => list::list(&cli.labs, json),
        Some(Cmd::Run(args)) => run::run(&cli.labs, cli.device.as_deref(), &args),
        Some(Cmd::Card(ref args)) => card::card(&cli.labs, args),
        Some(Cmd::Class(ref args)) => class::class(&cli.labs, args),
        Some(Cmd::Check { ref files, .. }) => check::check(&cli.labs, files, cli.color.into()),
        Some(Cmd::Doctor { json }) => doctor::doctor(json, icd_note),
        Some(Cmd::Report {
            ref files, format, ..
        }) => report::report(&cli.labs, files, format),
        Some(Cmd::Replay { ref file, .. }) => replay::replay(&cli, file),
        Some(Cmd::Export(ref args)) => export::export(&cli.labs, args),
        Some(Cmd::Watch(ref args)) => watch::watch(&cli, args),
        Some(Cmd::Completions { shell }) => shell::completions(shell),
        Some(Cmd::Man) => shell::man(),
        Some(Cmd::Worker) => worker::worker(),
        Some(Cmd::OpenclPlatforms { ref loader }) => worker::opencl_platforms(loader),
        None => {
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                dashboard::dashboard(&cli)
            } else {
                // CI logs and pipes keep the plain text overview.
                match &cli.lesson {
                    Some(name) => list::lesson_plan(&cli.labs, name),
                    None => list::overview(&cli.labs, cli.lab.as_deref()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_exit_status_the_commands_return() {
        let listed: Vec<i32> = crate::cli::AFTER_HELP
            .split_once("Exit status:")
            .map(|(_, statuses)| statuses)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(
            listed,
            [
                EXIT_OK,
                EXIT_VERDICT,
                EXIT_USAGE,
                EXIT_UNAVAILABLE,
                EXIT_ERROR,
                EXIT_TIMED_OUT,
                EXIT_NOT_EXECUTABLE,
                EXIT_NOT_FOUND,
                // Cancelled: 128 + SIGHUP, SIGINT; then 141; 128 + SIGTERM.
                128 + 1,
                128 + 2,
                EXIT_BROKEN_PIPE,
                128 + 15
            ]
        );
    }
}
