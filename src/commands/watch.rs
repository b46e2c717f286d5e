//! `gpulab watch -- CMD`: run the program with the agent inside, pass its output
//! and exit status through, and print what it left alive.
//!
//! Every output is opened before the program starts (a path that cannot be
//! written costs no run); a failure while writing one later keeps the report
//! (on stderr, said so) and the program's exit status.

use std::fs::File;
use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};

use gpulab::output::{Body, json};
use gpulab::report::WatchReport;
use gpulab::report::watch::suppress::Suppressions;
use gpulab::run::Run;
use gpulab::source::{
    Keeper, LocalSource, Recorded, Recorder, RunHandle, RunSource, Session, SourceError, Workload,
    is_stdout,
};
use gpulab::trace::EndStatus;
use gpulab::tui;
use gpulab::watch::{self, Stdio, WatchError, WatchRequest};

use super::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_USAGE, fail, say};
use crate::cli::{Cli, WatchArgs, WatchFailOn};

/// Lines of the program's output shown after the dashboard, when its log was a
/// private temporary file.
const LOG_TAIL_LINES: usize = 20;

pub fn watch(cli: &Cli, args: &WatchArgs) -> anyhow::Result<i32> {
    check_args(args)?;
    let suppressions = read_suppressions(&args.suppressions)?;
    // A file the program would grow past `ulimit -f` must cost gpulab an
    // EFBIG, not its life (and the report). A handler, not SIG_IGN: an ignored
    // signal would be inherited by the program through exec.
    let _ = gpulab::signals::survive_file_size_limit();
    let recording = match &args.record {
        Some(p) => Some(
            Recorder::create(p)
                .map_err(|e| fail(EXIT_USAGE, format!("cannot create {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let create = |path: &Option<std::path::PathBuf>| match path {
        Some(p) if is_stdout(p) => Ok(None),
        Some(p) => File::create(p)
            .map(Some)
            .map_err(|e| fail(EXIT_USAGE, format!("cannot create {}: {e}", p.display()))),
        None => Ok(None),
    };
    let report_file = create(&args.output)?;
    let oom_file = create(&args.oom)?;
    let log = program_log(args)?;
    // The program's output stays its own: every report goes to `-o FILE` or
    // to stderr, never into the program's stdout.
    let stdio = match &log {
        Some(log) => Stdio::Log(log.file()?),
        None => Stdio::Inherit,
    };
    // Before the program starts: a signal in between would kill gpulab alone.
    // The dashboard has its own handler (it ends the dashboard, which stops
    // the program).
    let stop = std::sync::Arc::new(watch::Stopper::default());
    if !args.dashboard {
        let stop = stop.clone();
        let _ = gpulab::signals::on_termination_signal(move |signal| stop.stop(signal));
    }
    let req = WatchRequest {
        command: args.command.clone(),
        sample_hz: args.sample_hz,
        stdio,
        cupti: args.cupti.clone(),
        device_spans: args.device_spans,
        every_launch: args.launches == crate::cli::Launches::All,
        torch_history: args.torch_history,
        stacks: args.backtrace.into(),
        stop,
    };
    let mut keeper = Keeper::new(None);
    if let Some(r) = recording {
        keeper.record_to(r);
    }
    let source = LocalSource::new()?;
    let (run, recorded) = if args.dashboard {
        live(cli, args, &source, req, keeper)?
    } else {
        let handle = RunHandle::start(&source, Workload::Program(req)).map_err(start_failure)?;
        let mut session = Session::new(keeper);
        for batch in handle.events.iter() {
            for event in batch {
                session.apply(event);
            }
        }
        let (run, recorded) = session.finish();
        let problems = recorded.iter().filter_map(Recorded::problem).collect();
        (run, problems)
    };
    for problem in recorded {
        say(format_args!("gpulab: {problem}"));
    }
    if let Some(log) = log {
        log.finish();
    }
    let summary = WatchReport::from_run(&run);
    let report = super::report::render_watch(&summary, &args.format)?;
    match (oom_file, &args.oom) {
        (Some(file), Some(path)) => {
            let text = json(Body::OutOfMemory(summary.out_of_memory()))?;
            write_to(file, path, &text, "the out-of-memory record");
        }
        (None, Some(path)) if is_stdout(path) => {
            print_after_program(&json(Body::OutOfMemory(summary.out_of_memory()))?);
        }
        _ => {}
    }
    deliver(&report, report_file, args);
    let code = exit_code(&run);
    let found = gate(&summary, &args.fail_on, &suppressions);
    for f in &found.findings {
        say(format_args!("gpulab: --fail-on: {f}"));
    }
    for (rule, n) in &found.suppressed {
        say(format_args!(
            "gpulab: --suppressions: {rule} let {n} finding{} pass",
            if *n == 1 { "" } else { "s" }
        ));
    }
    // The program's own failure stands; a finding fails a clean exit.
    Ok(if code == 0 && !found.findings.is_empty() {
        i32::from(args.error_exitcode)
    } else {
        code
    })
}

/// The suppression files named, read before the program starts: a mistake in
/// one is the user's to fix before anything runs.
fn read_suppressions(paths: &[std::path::PathBuf]) -> anyhow::Result<Suppressions> {
    let mut all = Suppressions::default();
    for p in paths {
        let text = std::fs::read_to_string(p)
            .map_err(|e| fail(EXIT_USAGE, format!("cannot read {}: {e}", p.display())))?;
        let rules = Suppressions::parse(&p.display().to_string(), &text)
            .map_err(|e| fail(EXIT_USAGE, e))?;
        all.extend(rules);
    }
    Ok(all)
}

/// What the gate found, and what the suppressions let pass.
struct Gated {
    findings: Vec<String>,
    /// Each rule that suppressed something (`file:line`), with how many.
    suppressed: Vec<(String, u64)>,
}

impl Gated {
    fn suppressed_by(&mut self, rule: &str, n: u64) {
        match self.suppressed.iter_mut().find(|(r, _)| r == rule) {
            Some((_, c)) => *c += n,
            None => self.suppressed.push((rule.to_string(), n)),
        }
    }
}

/// What the report found of what `--fail-on` names, each said in a line, less
/// what `suppress` lets pass.
fn gate(r: &WatchReport, fail_on: &[WatchFailOn], suppress: &Suppressions) -> Gated {
    let mut gated = Gated {
        findings: Vec::new(),
        suppressed: Vec::new(),
    };
    if fail_on.contains(&WatchFailOn::Leak) {
        let mut leaked = Vec::new();
        for g in r
            .alive_at_exit
            .iter()
            .filter(|g| !g.kept_by_allocator && !g.kept_by_runtime)
        {
            match suppress.leak(g) {
                Some(rule) => gated.suppressed_by(rule, g.count),
                None => leaked.push(g),
            }
        }
        if !leaked.is_empty() {
            let what: Vec<String> = leaked
                .iter()
                .map(|g| {
                    // Where: the program's own Python line, or the native caller.
                    let at = g
                        .backtrace
                        .first()
                        .map(|f| format!(" at {}", f.describe()))
                        .unwrap_or_default();
                    format!(
                        "{} {} made by {}{at}",
                        g.count,
                        g.kind.counted(g.count),
                        g.created_by
                    )
                })
                .collect();
            gated.findings.push(format!(
                "leak: alive at exit, kept by no allocator: {}",
                what.join(", ")
            ));
        }
    }
    if fail_on.contains(&WatchFailOn::Oom) {
        if let Some(o) = &r.ran_out {
            gated.findings.push(format!(
                "oom: {} returned {} (pid {}, at {:.1} ms)",
                o.api, o.status, o.pid, o.t_ms
            ));
        } else if r.framework_refused.is_some() {
            gated
                .findings
                .push("oom: a framework refused an allocation (the report says which)".into());
        }
    }
    if fail_on.contains(&WatchFailOn::Error) && r.failed_calls > 0 {
        gated
            .findings
            .push(format!("error: {} calls failed", r.failed_calls));
    }
    if fail_on.contains(&WatchFailOn::Misuse) {
        let mut left = Vec::new();
        for m in &r.misuse {
            match suppress.misuse(m) {
                Some(rule) => gated.suppressed_by(rule, 1),
                None => left.push(m),
            }
        }
        // Past the rows the report keeps, no rule can be asked: they count.
        let unkept = r.misuse_count.saturating_sub(r.misuse.len() as u64);
        let n = left.len() as u64 + unkept;
        if n > 0 {
            let first = left
                .first()
                .map(|m| {
                    let at = m
                        .backtrace
                        .first()
                        .map(|f| format!(" at {}", f.describe()))
                        .unwrap_or_default();
                    format!("; the first: {}{at}", m.headline())
                })
                .unwrap_or_else(|| {
                    format!(
                        "; {unkept} past the report's first {}, which no rule can be asked of",
                        r.misuse.len()
                    )
                });
            gated.findings.push(format!(
                "misuse: {n} call{} misused an object{first}",
                if n == 1 { "" } else { "s" },
            ));
        }
    }
    gated
}

fn check_args(args: &WatchArgs) -> anyhow::Result<()> {
    if !(args.sample_hz > 0.0 && args.sample_hz <= 10_000.0) {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "--sample-hz {} is not a rate between 0 and 10000",
                args.sample_hz
            ),
        ));
    }
    if args.dashboard && !std::io::stdout().is_terminal() {
        return Err(fail(
            EXIT_USAGE,
            "--dashboard needs a terminal; without it `watch` prints its report",
        ));
    }
    Ok(())
}

fn machine_format(args: &WatchArgs) -> bool {
    args.format.json || args.format.jsonl || args.format.markdown
}

/// `text` (`what` it is) into the file made for it; when that fails, on
/// stderr, saying so.
fn write_to(mut file: File, path: &std::path::Path, text: &str, what: &str) {
    if let Err(e) = file.write_all(text.as_bytes()).and_then(|()| file.flush()) {
        say(format_args!(
            "gpulab: cannot write {what} to {}: {e}; here it is instead:",
            path.display()
        ));
        super::write_stderr(text);
    }
}

/// 127 for a command that is not there, 126 for one that cannot be run, as
/// `env`, `timeout` and shells say it; 2 for gpulab's own trouble.
fn start_failure(e: SourceError) -> anyhow::Error {
    let code = match &e {
        SourceError::Program(WatchError::Spawn { source, .. }) => match source.kind() {
            std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
            _ => EXIT_NOT_EXECUTABLE,
        },
        _ => EXIT_USAGE,
    };
    fail(code, e.to_string())
}

/// The report where it was asked for; when that cannot be written, on stderr,
/// saying so. Never fails: the program's exit status comes next.
/// `-o -`, `--oom -`: on stdout, asked for there; the program has ended, its
/// output is all there. A closed pipe costs the text, not the program's status.
fn print_after_program(text: &str) {
    if let Err(e) = super::write_stdout(text)
        && e.0.kind() != std::io::ErrorKind::BrokenPipe
    {
        say(format_args!("gpulab: {e}"));
    }
}

fn deliver(report: &str, file: Option<File>, args: &WatchArgs) {
    if let (Some(file), Some(path)) = (file, &args.output) {
        write_to(file, path, report, "the report");
        return;
    }
    if args.output.as_deref().is_some_and(is_stdout) {
        print_after_program(report);
        return;
    }
    if machine_format(args) {
        // JSON or Markdown on stderr, from its own line, whole.
        super::write_stderr(report);
    } else {
        // The program's own output went to stdout; the report goes beside it.
        super::write_stderr(&format!("\n{report}"));
    }
}

/// Where the program's output goes under `--dashboard`: the `--log` file, kept;
/// or a private file with no name (`O_TMPFILE`, or unlinked the moment it is
/// made), whose last lines are shown when the dashboard closes: whatever ends
/// gpulab, a SIGKILL too, it leaves nothing behind.
enum ProgramLog {
    Named(File, std::path::PathBuf),
    Private(File),
}

fn program_log(args: &WatchArgs) -> anyhow::Result<Option<ProgramLog>> {
    if !args.dashboard {
        return Ok(None);
    }
    Ok(Some(match &args.log {
        Some(path) => ProgramLog::Named(
            File::create(path)
                .map_err(|e| fail(EXIT_USAGE, format!("cannot create {}: {e}", path.display())))?,
            path.clone(),
        ),
        None => ProgramLog::Private(
            tempfile::tempfile()
                .map_err(|e| fail(EXIT_USAGE, format!("cannot create the program's log: {e}")))?,
        ),
    }))
}

impl ProgramLog {
    fn file(&self) -> anyhow::Result<File> {
        let file = match self {
            ProgramLog::Named(f, _) => f.try_clone(),
            ProgramLog::Private(f) => f.try_clone(),
        };
        file.map_err(|e| fail(EXIT_USAGE, format!("cannot open the program's log: {e}")))
    }

    fn finish(self) {
        match self {
            ProgramLog::Named(_, path) => {
                say(format_args!(
                    "gpulab: the program's output is in {}",
                    path.display()
                ));
            }
            ProgramLog::Private(f) => {
                let tail = tail(&f, LOG_TAIL_LINES);
                if !tail.is_empty() {
                    say(format_args!(
                        "gpulab: the program's last output (--log FILE keeps all of it):\n{tail}"
                    ));
                }
                // It has no name: closing it is its end.
            }
        }
    }
}

/// The last `lines` lines of `file`, read from its last 64 KiB.
fn tail(mut file: &File, lines: usize) -> String {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut text = Vec::new();
    if file
        .seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))
        .is_err()
        || file.read_to_end(&mut text).is_err()
    {
        return String::new();
    }
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    let shown = all[all.len().saturating_sub(lines)..].join("\n");
    gpulab::report::printable(&shown).into_owned()
}

/// The dashboard on the watched program, live, until the user quits; then the
/// program is stopped (if it still runs) and its stream followed to its end.
/// The run the dashboard folded (and recorded, through `keeper`) is handed
/// back for the report, with what went wrong with its recording.
fn live(
    cli: &Cli,
    args: &WatchArgs,
    source: &LocalSource,
    req: WatchRequest,
    keeper: Keeper,
) -> anyhow::Result<(Run, Vec<String>)> {
    let set = super::load_labs(&cli.labs);
    let mut app = super::dashboard::new_app(cli, &set);
    let (slot, epoch) = app.watch(&args.command.join(" "), keeper);
    let (tx, rx) = std::sync::mpsc::channel();
    // Started before the screen changes: a program that cannot start is said
    // plainly, with its exit status.
    let control = source
        .start(
            Workload::Program(req),
            tui::event_loop::run_sink(&tx, slot, epoch),
        )
        .map_err(start_failure)?;
    let mut controls: tui::event_loop::Controls = [None, None];
    controls[slot] = Some(control);
    let mut app = tui::terminal::open_with(app, source, (tx, rx), controls)?;
    let state = app
        .take_watched()
        .ok_or_else(|| fail(super::EXIT_ERROR, "the watch ended without its events"))?;
    Ok((state.run, state.recording_problems))
}

/// The program's own exit status; 128 + n for a signal, as a shell reports it.
fn exit_code(run: &Run) -> i32 {
    match run.end().map(|e| &e.status) {
        Some(EndStatus::Finished) => 0,
        Some(EndStatus::Exited { code }) => *code,
        Some(EndStatus::Cancelled) => gpulab::signals::cancelled_status(),
        Some(EndStatus::Crashed {
            signal: Some(sig), ..
        }) => 128 + sig,
        _ => super::EXIT_ERROR,
    }
}
