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
