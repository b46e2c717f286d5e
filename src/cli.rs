//! Command-line arguments. Parsing only: each command hands over to `commands`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Examples and exit statuses, under `--help`. A test in `commands` keeps the
/// statuses here equal to the ones the commands return.
pub const AFTER_HELP: &str = "\
Examples:
  gpulab list
  gpulab run cl-premature-release
  gpulab run cl-forgotten-events --all-variants
  gpulab run cl-finish --step
  gpulab doctor
  gpulab completions bash > ~/.local/share/bash-completion/completions/gpulab

Exit status:
    0  ok (also a run that ended on the error its lab looks for)
    1  run: a claim ended with a verdict named by --fail-on; watch: the report
       found what --fail-on names (a leak, an out-of-memory, a failed call, a misuse)
    2  bad input: unknown lab or variant, bad parameter, malformed or missing file,
       an output path that cannot be written (stdout full included)
    3  no device, platform or driver library to run on (`gpulab doctor` explains,
       and exits 3 itself when nothing here can run a lab)
    4  the run failed: a line failed that was not expected to, or the worker crashed
  124  run: a run passed its time limit (--time-limit) and was ended; the report
       names the call it was in
  126  watch: the command cannot be run (not executable, not a program)
  127  watch: the command was not found
  129  cancelled by SIGHUP     (128 + the signal, as shells and CI runners read it;
  130  cancelled by Ctrl-C      the partial run is still reported; watch: the
       (SIGINT)                 program was stopped by gpulab, and the report
                                says so)
  141  stdout was closed (`| head`): gpulab stopped writing, quietly
  143  cancelled by SIGTERM
  `gpulab watch` otherwise exits with the program's own status (128 + N for signal N),
  also when its report or recording could not be written (said on stderr).";

#[derive(Debug, Parser)]
#[command(
    name = "gpulab",
    version,
    about = "A terminal laboratory for GPU memory lifetime.",
    long_about = "A terminal laboratory for GPU memory lifetime: run real OpenCL/CUDA calls, watch memory live and die, and check each lab's claim on this device.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Extra folder of lab files (`*.toml`); may be given more than once. Also
    /// taken after the commands that read labs.
    #[arg(long, value_name = "DIR")]
    pub labs: Vec<PathBuf>,

    /// Device: index as `gpulab doctor` lists them (OpenCL devices, or CUDA ordinals for CUDA labs), part of its name,
    /// or its type as doctor prints it (`cpu`, `gpu`). Default: the first GPU, else the first device. Also taken after `run`.
    #[arg(long, value_name = "INDEX|NAME|TYPE")]
    pub device: Option<String>,

    /// Colour: `auto` colours a terminal unless NO_COLOR is set; `always` and
    /// `never` win over NO_COLOR. The dashboard and every command follow it.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    pub color: ColorWhen,

    /// The dashboard's palette: `light` for a light terminal background. `auto`
    /// reads the terminal's COLORFGBG where it sets one, else `dark`.
    #[arg(long, value_enum, default_value_t = ThemeWhen::Auto, value_name = "THEME")]
    pub theme: ThemeWhen,

    /// Open the dashboard on this lab (without a terminal: print the lab and how to run it).
    #[arg(long, value_name = "ID")]
    pub lab: Option<String>,

    /// Open the dashboard in class mode (`C` toggles it): before a run the
    /// lesson and what it expects are hidden, and each claim is predicted by
    /// its number; the run records the predictions, and its verdicts show
    /// beside them and the lesson.
    #[arg(long)]
    pub class: bool,

    /// Open the dashboard on a lesson, in class mode: its labs in order, a
    /// question before each run and a hint with the verdicts (`>` next step).
    /// A shipped lesson's id (`gpulab list` names them) or a lesson file's path.
    /// Without a terminal: print the lesson's plan.
    #[arg(long, value_name = "NAME|FILE", conflicts_with = "lab")]
    pub lesson: Option<String>,

    /// With --lab: the variant the dashboard starts on.
    #[arg(long, requires = "lab", value_name = "NAME")]
    pub variant: Option<String>,

    /// With --lab: set a parameter, `--param size_mib=64` (the dashboard edits them too).
    #[arg(long = "param", requires = "lab", value_name = "KEY=VALUE")]
    pub params: Vec<String>,

    #[command(subcommand)]
    pub command: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// List every lab: id, backend, title and claim.
    List {
        /// The labs (id, backend, title, claim, variants, …) as one JSON object
        /// (`schema_version`, `kind: "labs"`).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        labs: LabsArg,
    },
    /// Run a lab on the real device and report what it measured.
    Run(RunArgs),
    /// Validate lab and lesson files: each mistake at its line and column.
    ///
    /// Validate lab and lesson files and show each mistake with its line and
    /// column (a lesson's labs are looked up among the shipped ones, the
    /// user's and `--labs`).
    Check {
        /// Lab or lesson files (`-`: one read from stdin).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        labs: LabsArg,
    },
    /// Show OpenCL platforms, CUDA and NVML, and how to fix what is missing.
    Doctor {
        /// Every check (OpenCL, CUDA, NVML, …: its status and what was found) as
        /// one JSON object (`schema_version`, `kind: "doctor"`).
        #[arg(long)]
        json: bool,
    },
    /// Print the report of recorded runs (`--record FILE`).
    ///
    /// Print the report of a recorded run (`--record FILE`). Given several, of any
    /// labs and devices: grouped by lab and device, each group's variants side by
    /// side, the claims that compare them judged from that group's own numbers.
    Report {
        /// Recordings (`-`: one read from stdin).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        format: Format,
        #[command(flatten)]
        labs: LabsArg,
    },
    /// The driver card: every lab and variant on every device here, in one table.
    ///
    /// The driver card: every lab, every variant, on every device here (each
    /// OpenCL device, each CUDA device), one table of each claim's verdict and the
    /// numbers that decided it, with the runs' recordings beside it. `card merge`
    /// puts several cards (a fleet's, a course's) into one matrix.
    Card(CardArgs),
    /// Predict, then observe: a class's recordings of a lab in one table.
    ///
    /// Predict, then observe, as a class: each student's recording of a lab
    /// run (`gpulab run LAB --predict …`, or the dashboard's class mode) read
    /// together into one table, per lab, variant and claim: how many
    /// predicted each outcome, what each device showed, the share whose own
    /// run bore their prediction out, the most missed first. Copies of one
    /// run count once.
    Class(ClassArgs),
    /// Play a recorded run back in the dashboard (without a terminal: print its report).
    Replay {
        /// A recording (`gpulab run … --record FILE`, or the dashboard's
        /// history; `-`: read from stdin).
        file: PathBuf,
        #[command(flatten)]
        labs: LabsArg,
    },
    /// Run your own program with gpulab's agent inside it (`gpulab watch -- ./app`).
    ///
    /// Run your own program with gpulab's agent inside it: every OpenCL and CUDA
    /// object it creates and releases, the device memory it takes and who holds
    /// it, and what it left alive at exit (`gpulab watch -- ./app`).
    Watch(WatchArgs),
    /// Export a recorded run for other tools, a slide or a page to share.
    Export(ExportArgs),
    /// Print a completion script for SHELL on stdout.
    ///
    /// Print a completion script for SHELL on stdout, e.g.
    /// `gpulab completions bash > ~/.local/share/bash-completion/completions/gpulab`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print gpulab's man page (roff) on stdout: `gpulab man | man -l -`.
    Man,
    /// Runs one lab variant and streams events on stdout (started by gpulab itself;
    /// the request is the first line of stdin).
    #[command(hide = true)]
    Worker,
    /// Lists the OpenCL platforms LOADER gives and the library of each, a line
    /// each (started by `gpulab watch`, in the environment the program will have).
    #[command(hide = true, name = "opencl-platforms")]
    OpenclPlatforms { loader: PathBuf },
}

/// `--labs DIR` on the commands that read labs (not `check`, `doctor`, …).
#[derive(Debug, Args, Default, Clone)]
pub struct LabsArg {
    /// Extra folder of lab files (`*.toml`); may be given more than once.
    #[arg(long = "labs", value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

impl Cmd {
    /// The `--labs` folders and `--device` given after the command, taken out so
    /// that one place (`Cli::labs`, `Cli::device`) holds them whichever side of
    /// the command they were written on.
    pub fn take_scope(&mut self) -> (Vec<PathBuf>, Option<String>) {
        match self {
            Cmd::List { labs, .. }
            | Cmd::Report { labs, .. }
            | Cmd::Replay { labs, .. }
            | Cmd::Check { labs, .. } => (std::mem::take(&mut labs.dirs), None),
            Cmd::Export(a) => (std::mem::take(&mut a.labs.dirs), None),
            Cmd::Watch(a) => (std::mem::take(&mut a.labs.dirs), None),
            Cmd::Run(a) => (std::mem::take(&mut a.labs.dirs), a.device.take()),
            Cmd::Card(a) => (std::mem::take(&mut a.labs.dirs), None),
            _ => (Vec::new(), None),
        }
    }
}

/// `gpulab card`: this machine's card, or `card merge`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CardArgs {
    #[command(subcommand)]
    pub merge: Option<CardCmd>,
    /// Folder to write the card into: card.json, card.md, card.html, and the
    /// runs' recordings under recordings/ (created; an existing card there is
    /// replaced).
    #[arg(short, long, value_name = "DIR", default_value = "gpulab-card")]
    pub out: PathBuf,
    /// Make the card from the lab recordings under DIR (`gpulab run --record`, a
    /// card's recordings/, the shipped H100 recordings) instead of running labs:
    /// no device needed.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Only this lab (repeatable); every lab by default.
    #[arg(long = "lab", value_name = "ID")]
    pub only: Vec<String>,
    /// Print the card's JSON (`kind: "card"`) on stdout too.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub time_limit: TimeLimitArg,
    #[command(flatten)]
    pub labs: LabsArg,
}

#[derive(Debug, Args)]
pub struct ClassArgs {
    /// Recordings, or folders searched for them (`*.jsonl`, recursively).
    #[arg(required = true, value_name = "RECORDING|FOLDER")]
    pub paths: Vec<PathBuf>,
    /// Folder to write class.json, class.md and class.html (for the
    /// projector) into; without it the table goes to stdout.
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the table's JSON (`kind: "class"`) on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How long one run may take (`run`, `card`: each run).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct TimeLimitArg {
    /// End a run still going after SECONDS: its worker is ended (SIGTERM, then
    /// SIGKILL), the report names the call it was in and for how long, and the
    /// run is `timed_out` (`gpulab run` exits 124, as timeout(1) does; `card`
    /// goes on with the next run). Default, per run: 30 s, plus 0.1 s a call and
    /// six times the kernel times and sleeps its script asks for (the shipped
    /// labs at their defaults: 30 to 59 s). 0: no limit. A stepped run has none.
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub time_limit: Option<f64>,
}

impl TimeLimitArg {
    /// The limit for one run of `variant` with `params`.
    pub fn for_run(
        &self,
        lab: &gpulab::lab::Lab,
        variant: &str,
        params: &gpulab::lab::Params,
    ) -> Option<std::time::Duration> {
        match self.time_limit {
            Some(0.0) => None,
            Some(s) => Some(std::time::Duration::from_secs_f64(s)),
            None => lab
                .find_variant(variant)
                .ok()
                .map(|v| v.plan(params).time_limit()),
        }
    }
}

fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..1e9).contains(&s) => Ok(s),
        _ => Err(format!(
            "`{text}` is not a number of seconds (0 for no limit)"
        )),
    }
}

#[derive(Debug, Subcommand)]
pub enum CardCmd {
    /// Merge cards into one matrix, devices as columns, the claims whose verdicts
    /// differ between devices first: matrix.json, matrix.md and matrix.html.
    Merge {
        /// Cards: `card.json` files or the folders that hold them.
        #[arg(required = true, value_name = "CARD")]
        cards: Vec<PathBuf>,
        /// Folder to write the matrix into (created).
        #[arg(short, long, value_name = "DIR", default_value = "gpulab-matrix")]
        out: PathBuf,
        /// Print the matrix's JSON (`kind: "matrix"`) on stdout too.
        #[arg(long)]
        json: bool,
    },
}

/// `gpulab export FILE`: at least one output; `-` writes it to stdout.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A recording (`gpulab run … --record FILE`, or `gpulab watch --record
    /// FILE`; `-`: read from stdin, and held, since a page or figure reads it
    /// more than once).
    pub file: PathBuf,
    /// Where the lab's teaching text comes from for a page (`--html`).
    #[command(flatten)]
    pub labs: LabsArg,
    /// Write Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev) to OUT.
    /// One of --chrome, --svg, --png and --html is needed.
    #[arg(long, value_name = "OUT")]
    pub chrome: Option<PathBuf>,
    /// Write a figure (memory over time above the timeline) as SVG.
    #[arg(long, value_name = "OUT")]
    pub svg: Option<PathBuf>,
    /// Write the same figure as PNG.
    #[arg(long, value_name = "OUT")]
    pub png: Option<PathBuf>,
    /// Write one self-contained page (charts with each call's numbers on hover,
    /// the script, the verdicts and the lab's teaching text) that any browser opens
    /// offline.
    #[arg(long, value_name = "OUT")]
    pub html: Option<PathBuf>,
    /// A second recording beside the first: stacked beneath it on the same axes in a
    /// figure, a process of its own in a Chrome trace, a compare page of the two
    /// (facts and verdicts side by side, one zoom and scrub) with --html.
    #[arg(long, value_name = "OTHER")]
    pub compare: Option<PathBuf>,
}

#[derive(Debug, Args, Default, Clone, Copy)]
#[group(multiple = false)]
pub struct Format {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the report as Markdown.
    #[arg(long)]
    pub markdown: bool,
    /// Print JSON Lines: one compact object per line, of the shape --json
    /// prints, for each run (`run --all-variants`, `report` of many), or the
    /// one report (`watch`).
    #[arg(long)]
    pub jsonl: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Lab id, as `gpulab list` shows it.
    pub id: String,

    /// Variant to run (default: the lab's first).
    #[arg(long, conflicts_with = "all_variants")]
    pub variant: Option<String>,

    /// Run every variant, each in its own worker, and print them side by side.
    #[arg(long)]
    pub all_variants: bool,

    /// Set a parameter: `--param size_mib=64`.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,

    #[command(flatten)]
    pub format: Format,

    /// Write the run's event stream (JSON Lines) to FILE. With --all-variants, one
    /// file per variant: FILE with `--VARIANT` before the extension. `-`: to
    /// stdout, the report then to stderr (`--record - | gpulab report -`).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Exit with status 1 when a claim ends with this verdict (may repeat).
    #[arg(long, value_enum, value_name = "VERDICT")]
    pub fail_on: Vec<FailOn>,

    /// Memory budget in MiB above the baseline (default: half the free memory).
    #[arg(long, value_name = "MIB")]
    pub budget: Option<f64>,

    /// No memory budget: loops allocate until the driver says no, within their
    /// iteration counts (raise those with --param to go further). When a call
    /// fails for want of memory or resources, the report says what the run had
    /// measured then: memory in use of the total, and the objects the lab held.
    /// Reaching a failing call is the point of such a run: it is reported as the
    /// finding and the exit status is 0.
    #[arg(long, conflicts_with = "budget")]
    pub until_failure: bool,

    /// Run one line per Enter, to teach without the dashboard.
    #[arg(long, conflicts_with = "all_variants")]
    pub step: bool,

    /// Predict, then observe: what a claim will show, before the run
    /// (`--predict early=does_not_hold,late=holds`; `holds`, `does_not_hold`
    /// or `not_sure`), or the range a value a claim reads will fall in
    /// (`--predict 'host_ms(wait)=150..250'`, in the value's unit); may
    /// repeat. Each goes into the recording and the report beside what was
    /// measured, never into a verdict; `gpulab class` gathers a class's.
    #[arg(long, value_name = "CLAIM=OUTCOME|VALUE=LO..HI[,...]")]
    pub predict: Vec<String>,

    #[command(flatten)]
    pub time_limit: TimeLimitArg,

    #[command(flatten)]
    pub labs: LabsArg,

    /// Device: index as `gpulab doctor` lists them (OpenCL devices, or CUDA
    /// ordinals for CUDA labs), part of its name, or its type as doctor prints
    /// it (`cpu`, `gpu`). Default: the first GPU, else the first device.
    #[arg(long, value_name = "INDEX|NAME|TYPE")]
    pub device: Option<String>,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub format: Format,

    #[command(flatten)]
    pub labs: LabsArg,

    /// Also write the event stream (JSON Lines) to FILE: `report`, `replay` and
    /// `export` read it. `-`: stdout, beside the program's own output there.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Write the report to FILE instead of the terminal, apart from the
    /// program's own output. Created before the program starts; if it cannot
    /// be written later, the report goes to stderr. Without it, every report
    /// (text, --json, --markdown) goes to stderr: the program's stdout stays
    /// its own (`watch --json -o r.json -- ./app && jq . r.json`). `-`: to
    /// stdout once the program has ended, after whatever the program wrote
    /// there (`watch --json -o - -- ./quiet-app | jq`).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// If the program runs out of device memory, keep that moment in FILE as
    /// JSON: the refused call with its size and stack, the free memory, who
    /// held the program's memory then and the other processes on the GPU, and
    /// a framework's own refusal (PyTorch's). Written when the program ends,
    /// with `null`s when nothing was refused; created before it starts.
    #[arg(long, value_name = "FILE")]
    pub oom: Option<PathBuf>,

    /// Memory readings per second while the program's calls come in; one
    /// reading at every batch of them, and 20 a second while none come.
    #[arg(long, default_value_t = 100.0, value_name = "HZ")]
    pub sample_hz: f64,

    /// Exit with status 1 when the report finds this, for a CI job to fail on
    /// (comma-separated or repeated): `leak` objects alive at exit that no
    /// allocator or runtime keeps, `oom` an allocation the driver or a
    /// framework refused, `error` a call that failed, `misuse` a call that
    /// named an object the program had released (a use after release or
    /// destroy, a second release or free, a retain too late) or a `cudaFree`
    /// of stream-ordered memory. A program that exited non-zero keeps its own
    /// status.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "WHAT")]
    pub fail_on: Vec<WatchFailOn>,

    /// The status --fail-on exits with when it finds something (valgrind's
    /// --error-exitcode), so a CI job can tell the program's own failure from
    /// gpulab's finding.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        value_parser = clap::value_parser!(u8).range(1..),
        requires = "fail_on"
    )]
    pub error_exitcode: u8,

    /// Rules for findings --fail-on lets pass (as valgrind's
    /// --suppressions): one a line, `leak` or `misuse` then `key=pattern`
    /// tests (kind, made_by, call, what, frame; `*` and `?` wildcards), e.g.
    /// `leak kind=event frame=*/third_party/*`. May be given more than once;
    /// the report still lists what they suppress.
    #[arg(long, value_name = "FILE", requires = "fail_on")]
    pub suppressions: Vec<PathBuf>,

    /// Watch it live in the dashboard (memory, objects, calls, the gap). The
    /// program's output goes to --log; the report comes when you quit.
    #[arg(long)]
    pub dashboard: bool,

    /// With --dashboard: where the program's stdout and stderr go, kept
    /// (default: a private temporary file, whose last lines are printed when
    /// the dashboard closes and which is then removed). Under --dashboard the
    /// program's stdin is /dev/null.
    #[arg(long, value_name = "FILE", requires = "dashboard")]
    pub log: Option<PathBuf>,

    /// CUDA: also show each kernel's run on the device (CUPTI activity records).
    /// CUPTI then instruments every module the program loads, which costs time
    /// at load.
    #[arg(long)]
    pub device_spans: bool,

    /// CUDA: which kernel launches to watch. `new` (the default): launches
    /// while they bring functions the program had not launched (where the
    /// driver loads their code), not once they repeat; the agent looks again
    /// every 250 ms and wherever code is loaded, and the report says how long
    /// launches went unwatched. `all`: every launch, counted on the timeline,
    /// at about 0.8 µs each on an H200 (CUPTI's callback alone is 0.57 µs).
    #[arg(long, value_enum, value_name = "WHICH", default_value = "new")]
    pub launches: Launches,

    /// PyTorch: turn on PyTorch's own memory history (its Python stack at
    /// every allocation) as the program initialises CUDA, so the report lists
    /// the tensors alive by the line of the program that allocated them: at
    /// the highest of the allocator's readings, with each line's growth, and
    /// at an out-of-memory refusal. It costs the program each allocation's
    /// stack (docs/benchmarks.md); without it, lines name what grew the cache.
    #[arg(long)]
    pub torch_history: bool,

    /// How much of the native call stack of the calls that create objects to
    /// take. `caller` (the default): the calling frame alone, which names who
    /// made each object (the program, or the library that called the driver:
    /// PyTorch's allocator, NCCL, cuBLAS, XLA), for objects that hold memory,
    /// contexts, modules, queues and streams (not events or kernels, made at
    /// every launch by some programs); `full` (`--backtrace` alone): the whole
    /// stack of every creating call, so each object alive at exit is named
    /// with the stack that made it (function and file:line where the program
    /// has symbols and debug information); `off`: none.
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        default_value = "caller",
        num_args = 0..=1,
        default_missing_value = "full",
        require_equals = true
    )]
    pub backtrace: Backtrace,

    /// The libcupti to watch CUDA calls with (default: the one `gpulab doctor`
    /// names: CUDA_HOME, the Python environment's nvidia-cuda-cupti wheel, or an
    /// installed toolkit).
    #[arg(long, value_name = "PATH")]
    pub cupti: Option<PathBuf>,

    /// The program to run and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backtrace {
    Off,
    Caller,
    Full,
}

impl From<Backtrace> for gpulab::watch::Stacks {
    fn from(b: Backtrace) -> Self {
        match b {
            Backtrace::Off => Self::Off,
            Backtrace::Caller => Self::Caller,
            Backtrace::Full => Self::Full,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Launches {
    New,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

impl From<ColorWhen> for gpulab::color::Choice {
    fn from(c: ColorWhen) -> Self {
        match c {
            ColorWhen::Auto => Self::Auto,
            ColorWhen::Always => Self::Always,
            ColorWhen::Never => Self::Never,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThemeWhen {
    Auto,
    Dark,
    Light,
}

impl ThemeWhen {
    /// Whether the dashboard draws for a light background.
    pub fn light(self) -> bool {
        match self {
            ThemeWhen::Dark => false,
            ThemeWhen::Light => true,
            ThemeWhen::Auto => {
                gpulab::tui::Theme::light_background(std::env::var("COLORFGBG").ok().as_deref())
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// A claim's verdict, spelled as the JSON and the text spell it
    /// (`does-not-hold` is still taken).
    #[value(name = "does_not_hold", alias = "does-not-hold")]
    DoesNotHold,
    Inconclusive,
}

/// What `watch --fail-on` fails a pipeline on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WatchFailOn {
    /// Objects alive at exit that no allocator or runtime keeps.
    Leak,
    /// An allocation the driver or a framework refused.
    Oom,
    /// A call that failed.
    Error,
    /// A call that named an object the program had already released (a use
    /// after release, a second release, a retain too late), or a `cudaFree`
    /// of stream-ordered memory.
    Misuse,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `--help` says what every flag does (`list --json` and `doctor --json`
    /// said nothing).
    #[test]
    fn every_flag_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if a.is_positional() || matches!(id, "help" | "version") || a.is_hide_set() {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} --{id}"));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "gpulab", &mut missing);
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn watch_takes_the_program_after_the_double_dash() {
        let cli = Cli::try_parse_from(["gpulab", "watch", "--json", "--", "./app", "--flag", "x"])
            .expect("parses");
        let Some(Cmd::Watch(w)) = cli.command else {
            panic!("not watch")
        };
        assert_eq!(w.command, ["./app", "--flag", "x"]);
        assert!(w.format.json);
        assert!(
            Cli::try_parse_from(["gpulab", "watch"]).is_err(),
            "a program is required"
        );
    }

    #[test]
    fn variant_and_all_variants_exclude_each_other() {
        let r = Cli::try_parse_from(["gpulab", "run", "x", "--variant", "a", "--all-variants"]);
        assert!(r.is_err());
    }
}
