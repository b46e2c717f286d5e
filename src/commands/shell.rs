//! `gpulab completions SHELL` and `gpulab man`: what a shell and `man` need, made
//! from the same clap definition as the parser, so they never drift from it.

use std::io::Write;

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::{Command, CommandFactory};
use clap_complete::engine::{ArgValueCandidates, ArgValueCompleter, CompletionCandidate};

use super::EXIT_OK;
use crate::cli::Cli;

/// The variable a shell sets when it asks gpulab for completions.
pub const COMPLETE_VAR: &str = "GPULAB_COMPLETE";

/// `gpulab completions SHELL`: the script that registers gpulab's completions
/// with SHELL. At each TAB the shell asks gpulab itself (with
/// [`COMPLETE_VAR`] set, which [`complete_if_asked`] answers), so the lab ids
/// offered are those installed now, the user's own and any `--labs DIR` on
/// the line among them, and `--variant` offers the variants of the lab the
/// line names.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    let shells = clap_complete::env::Shells::builtins();
    let Some(completer) = shells.completer(&shell.to_string()) else {
        return Err(super::fail(
            super::EXIT_USAGE,
            format!("completions: gpulab cannot complete for {shell}"),
        ));
    };
    let mut script = Vec::new();
    completer.write_registration(COMPLETE_VAR, "gpulab", "gpulab", "gpulab", &mut script)?;
    if shell == clap_complete::Shell::Zsh {
        // Autoloaded from `fpath` as `_gpulab`, the file's body runs at the
        // first TAB: it completes that TAB too, not only the next ones.
        script.extend_from_slice(
            b"if [ \"${funcstack[1]}\" = \"_gpulab\" ]; then\n    _clap_dynamic_completer_gpulab \"$@\"\nfi\n",
        );
    }
    emit(&script)
}

/// Answers a shell's request for completions and exits, when the process was
/// started for one ([`COMPLETE_VAR`] set to a shell's name); else returns.
/// Runs before anything is written to stdout.
pub fn complete_if_asked() {
    clap_complete::CompleteEnv::with_factory(completing)
        .var(COMPLETE_VAR)
        .bin("gpulab")
        .completer("gpulab")
        .complete();
}

/// The command line the shells complete: [`offered`], with the catalog's lab
/// ids (each with its title) and the variants of the lab the line names. Only
/// completion gets them: the parser still takes any id and names the nearest
/// when it is unknown.
fn completing() -> Command {
    let ids = ArgValueCandidates::new(lab_ids);
    let variants = ArgValueCompleter::new(variants_on_line);
    offered(&Cli::command())
        .mut_arg("lab", |a| a.add(ids.clone()))
        .mut_arg("variant", |a| a.add(variants.clone()))
        .mut_subcommand("run", |c| {
            c.mut_arg("id", |a| a.add(ids.clone()))
                .mut_arg("variant", |a| a.add(variants.clone()))
        })
}

/// Every lab id the line could name, with its title.
fn lab_ids() -> Vec<CompletionCandidate> {
    let (_, dirs) = named_on_line(&line_words());
    super::load_labs(&dirs)
        .labs()
        .iter()
        .map(|l| CompletionCandidate::new(l.id.clone()).help(Some(l.title.clone().into())))
        .collect()
}

/// The variants of the lab the line names (`--lab ID`, `run ID`, or a lab
/// file's path) that start with `current`, each with its description; all
/// the catalog's variant names when the line names no lab it knows.
fn variants_on_line(current: &OsStr) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    let (lab, dirs) = named_on_line(&line_words());
    let mut set = super::load_labs(&dirs);
    let id = lab.and_then(|named| super::lab_named(&mut set, &named).ok());
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for l in set
        .labs()
        .iter()
        .filter(|l| id.as_ref().is_none_or(|id| *id == l.id))
    {
        for v in &l.variants {
            if v.name.starts_with(current.as_ref()) && !seen.contains(&v.name) {
                seen.push(v.name.clone());
                out.push(
                    CompletionCandidate::new(v.name.clone())
                        .help(Some(v.description.clone().into())),
                );
            }
        }
    }
    out
}

/// The words of the line being completed: the shell passes them after `--`.
fn line_words() -> Vec<String> {
    std::env::args_os()
        .skip_while(|a| a != "--")
        .skip(2)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The lab a command line names (`--lab ID`, `--lab=ID`, or `run`'s first
/// operand) and the `--labs` folders it gives. The options that take a value
/// are clap's own list, so a value is never taken for the lab.
fn named_on_line(words: &[String]) -> (Option<String>, Vec<PathBuf>) {
    let cli = Cli::command();
    let takes_value = |long: &str| {
        cli.get_arguments()
            .chain(cli.get_subcommands().flat_map(Command::get_arguments))
            .any(|a| a.get_long() == Some(long) && a.get_action().takes_values())
    };
    let (mut lab, mut dirs, mut in_run) = (None, Vec::new(), false);
    let mut words = words.iter();
    while let Some(w) = words.next() {
        if let Some((flag, value)) = w.strip_prefix("--").and_then(|f| f.split_once('=')) {
            match flag {
                "lab" => lab = Some(value.to_string()),
                "labs" => dirs.push(PathBuf::from(value)),
                _ => {}
            }
        } else if let Some(flag) = w.strip_prefix("--") {
            let value = if takes_value(flag) {
                words.next()
            } else {
                None
            };
            match (flag, value) {
                ("lab", Some(v)) => lab = Some(v.clone()),
                ("labs", Some(v)) => dirs.push(PathBuf::from(v)),
                _ => {}
            }
        } else if w == "run" && lab.is_none() && !in_run {
            in_run = true;
        } else if in_run && lab.is_none() && !w.starts_with('-') && !w.is_empty() {
            lab = Some(w.clone());
        }
    }
    (lab, dirs)
}

/// One page, `gpulab(1)`: the options, then every subcommand with its own
/// synopsis and options (no `gpulab-run(1)` pages exist to point at), EXIT
/// STATUS as `--help` lays it out, ENVIRONMENT and FILES.
pub fn man() -> anyhow::Result<i32> {
    let cli = offered(&Cli::command());
    let man = clap_mangen::Man::new(cli.clone());
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    page.extend_from_slice(b".SH COMMANDS\n");
    for sub in cli.get_subcommands() {
        let name = format!("gpulab {}", sub.get_name());
        let sub = sub.clone().name(name.clone()).bin_name(name.clone());
        let man = clap_mangen::Man::new(sub);
        let _ = writeln!(page, ".SS \"{name}\"");
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        man.render_description_section(&mut part)?;
        man.render_options_section(&mut part)?;
        // Its sections are subsections of this one, and its synopsis names it.
        let part = String::from_utf8_lossy(&part)
            .lines()
            .map(|l| if l.starts_with(".SH") { ".PP" } else { l })
            .collect::<Vec<_>>()
            .join("\n");
        page.extend_from_slice(part.as_bytes());
        page.push(b'\n');
    }
    page.extend_from_slice(sections().as_bytes());
    man.render_version_section(&mut page)?;
    emit(&page)
}

/// EXAMPLES and EXIT STATUS laid out as `--help` has them (no refilling
/// mid-sentence), ENVIRONMENT and FILES.
fn sections() -> String {
    let (examples, status) = crate::cli::AFTER_HELP
        .split_once("Exit status:")
        .unwrap_or(("", ""));
    let examples = examples
        .trim()
        .strip_prefix("Examples:")
        .unwrap_or(examples);
    let mut out = String::from(".SH EXAMPLES\n.nf\n");
    for line in examples.lines().filter(|l| !l.trim().is_empty()) {
        out.push_str(&roff_text(line));
        out.push('\n');
    }
    out.push_str(".fi\n.SH \"EXIT STATUS\"\n.nf\n");
    for line in status.lines().filter(|l| !l.trim().is_empty()) {
        out.push_str(&roff_text(line));
        out.push('\n');
    }
    out.push_str(".fi\n.SH ENVIRONMENT\n");
    for (name, what) in ENVIRONMENT {
        out.push_str(&format!(".TP\n\\fB{name}\\fR\n{}\n", roff_text(what)));
    }
    out.push_str(".SH FILES\n");
    for (name, what) in FILES {
        out.push_str(&format!(
            ".TP\n\\fI{}\\fR\n{}\n",
            roff_text(name),
            roff_text(what)
        ));
    }
    out
}

/// Text as roff reads it: backslashes doubled, a leading `.` or `'` kept
/// from being read as a request.
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\\\");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "NO_COLOR",
        "No colour unless --color always (https://no-color.org).",
    ),
    (
        "COLORFGBG",
        "Read by --theme auto: a light background picks the light palette.",
    ),
    (
        "GPULAB_DATA_DIR",
        "Where the history of dashboard runs (runs/) and the recordings R makes (recordings/) go; else $XDG_DATA_HOME/gpulab, else ~/.local/share/gpulab.",
    ),
    ("XDG_DATA_HOME", "See GPULAB_DATA_DIR."),
    (
        "XDG_CONFIG_HOME",
        "The user's own labs are read from $XDG_CONFIG_HOME/gpulab/labs (else ~/.config/gpulab/labs).",
    ),
    (
        "XDG_CACHE_HOME",
        "CUDA kernels compiled by NVRTC are cached in $XDG_CACHE_HOME/gpulab/cuda (else ~/.cache/gpulab/cuda).",
    ),
    (
        "OCL_ICD_VENDORS",
        "The OpenCL ICD loader's folder of platforms; gpulab adds NVIDIA's OpenCL library for its own processes where it is installed but not registered.",
    ),
    (
        "RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID",
        "watch: the rank a process of a job reports, as the launcher set it.",
    ),
];

const FILES: &[(&str, &str)] = &[
    (
        "~/.config/gpulab/labs/*.toml",
        "The user's own labs, beside the shipped ones (and each --labs DIR).",
    ),
    (
        "~/.local/share/gpulab/runs/",
        "The dashboard's history: the newest 50 runs, at most 200 MiB.",
    ),
    (
        "~/.local/share/gpulab/recordings/",
        "Recordings made with R in the dashboard, never pruned.",
    ),
    (
        "~/.cache/gpulab/cuda/",
        "Compiled CUDA kernels, by device and driver.",
    ),
];

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

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_lab_a_line_names_is_found_past_the_options_that_take_values() {
        let cases = [
            ("--lab cl-finish --variant", Some("cl-finish"), 0),
            ("--lab=cl-finish --variant", Some("cl-finish"), 0),
            ("run cl-finish --variant", Some("cl-finish"), 0),
            (
                "run --param size_mib=64 cl-finish --variant",
                Some("cl-finish"),
                0,
            ),
            ("--labs mine run ./x.toml --variant", Some("./x.toml"), 1),
            ("run --labs=a --device 0 lab-x --variant", Some("lab-x"), 1),
            ("list --json", None, 0),
            ("run --variant", None, 0),
        ];
        for (line, lab, dirs) in cases {
            let (found, folders) = named_on_line(&words(line));
            assert_eq!(found.as_deref(), lab, "{line}");
            assert_eq!(folders.len(), dirs, "{line}");
        }
    }
}
