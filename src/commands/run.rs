//! `gpulab run`: start workers through the run source, show progress (or step
//! line by line), record, and print the report.

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use gpulab::lab::{BackendKind, Lab, LabSet, Params, catalog};
use gpulab::output::{Body, Runs, json};
use gpulab::report::{self, Summary};
use gpulab::run::Run;
use gpulab::source::{
    Keeper, LocalSource, Recorded, Recorder, RunHandle, RunRequest, Session, Workload, is_stdout,
};
use gpulab::trace::{CallStatus, EndStatus, Estimate, Event, Predicted, Prediction, Verdict};

use super::{
    EXIT_ERROR, EXIT_OK, EXIT_TIMED_OUT, EXIT_UNAVAILABLE, EXIT_USAGE, EXIT_VERDICT, fail,
};
use crate::cli::{FailOn, Format, RunArgs};

/// Telemetry rate while a headless run is on.
pub(super) const SAMPLE_HZ: f64 = 1000.0;

pub fn run(dirs: &[PathBuf], device: Option<&str>, args: &RunArgs) -> anyhow::Result<i32> {
    let mut set = super::load_labs(dirs);
    gpulab::clock::phase("labs loaded");
    let id = super::lab_named(&mut set, &args.id)?;
    let (lab, params, variants) = chosen(&set, &id, args)?;
    let foretold = predictions(lab, &variants, &args.predict)?;
    one_stdout_recording(args, variants.len())?;
    check_backend(lab)?;

    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        // A second Ctrl-C while the first is handled is harmless; failing to install
        // the handler only costs the partial report.
        let _ = gpulab::signals::on_termination(move || cancel.store(true, Ordering::SeqCst));
    }
    let source = LocalSource::new()?;
    // Each variant's session, folded and recorded as its events came; finished
    // once every variant ran: a claim that compares variants is judged then,
    // and its verdict goes into the recordings too.
    let mut sessions: Vec<Session> = Vec::new();
    for (i, variant) in variants.iter().enumerate() {
        say_step(i, &variants, &lab.id);
        // Created before the run, so a path that cannot be written costs no run.
        let record = match &args.record {
            Some(r) => {
                let path = record_path(r, variant, variants.len() > 1);
                Some(Recorder::create(&path).map_err(|e| {
                    fail(EXIT_USAGE, format!("cannot create {}: {e}", path.display()))
                })?)
            }
            None => None,
        };
        let mut req = RunRequest::new(lab.clone(), variant, params.clone(), SAMPLE_HZ)
            .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
        req.device = device.map(str::to_string);
        req.budget_bytes = args.budget.map(gpulab::units::bytes_from_mib);
        req.unbounded = args.until_failure;
        req.step = args.step;
        req.time_limit = args.time_limit.for_run(lab, variant, &params);
        if args.step {
            errln!(
                "{}",
                report::printable(&gpulab::verdict::stepping_warning(lab, variant))
            );
        }
        let predicted = foretold.in_variant(lab, variant);
        let session = match run_variant(&source, req, args.step, record, &predicted, &cancel) {
            Ok(ran) => ran,
            Err(e) => {
                // The variants that ran keep their recordings.
                for unwritten in finish_recordings(sessions).1 {
                    errln!("gpulab: {unwritten}");
                }
                return Err(e);
            }
        };
        // Said once, by the error below, when it is the only variant.
        if let Some(error) = never_started(&session.run)
            && variants.len() > 1
        {
            // One variant that could not start fails itself (exit 4 below), not
            // the variants that ran: their results are still printed.
            errln!(
                "gpulab: {} [{variant}] did not start: {}",
                lab.id,
                report::printable(&error)
            );
        }
        sessions.push(session);
        if cancel.load(Ordering::SeqCst) {
            break;
        }
    }
    if sessions.len() > 1 {
        let judged = gpulab::verdict::judge_across(
            lab,
            &sessions.iter().map(|s| &s.run).collect::<Vec<_>>(),
        );
        for (i, verdict) in judged {
            if let Some(session) = sessions.get_mut(i) {
                session.apply(Event::Claim(verdict));
            }
        }
    }
    // Recordings that could not be written are said after the reports, which a
    // full disk must not cost.
    let (runs, record_errors) = finish_recordings(sessions);
    gpulab::clock::phase("recordings written");
    let summaries: Vec<Summary> = runs.iter().map(Summary::of).collect();

    if let Some(error) = runs.iter().map(never_started).collect::<Option<Vec<_>>>()
        && let Some(first) = error.first()
    {
        // Nothing started at all: a device or driver problem, not a lab's.
        return Err(fail(
            EXIT_UNAVAILABLE,
            format!(
                "{}\n`gpulab doctor` lists the devices this machine has and how to fix what is missing",
                report::printable(first)
            ),
        ));
    }

    let record_to_stdout = args.record.as_deref().is_some_and(is_stdout);
    print_reports(&summaries, args.format, record_to_stdout)?;
    gpulab::clock::phase("report printed");
    let code = exit_code(&runs, &args.fail_on);
    if !record_errors.is_empty() && code != gpulab::signals::cancelled_status() {
        // An output path that cannot be written is bad input (2), as documented;
        // the run it would have held is reported above all the same.
        return Err(fail(EXIT_USAGE, record_errors.join("\n")));
    }
    for e in &record_errors {
        errln!("gpulab: {e}");
    }
    Ok(code)
}

/// The lab `args` names, its parameters resolved, and the variants to run.
fn chosen<'a>(
    set: &'a LabSet,
    id: &str,
    args: &RunArgs,
) -> anyhow::Result<(&'a Lab, Params, Vec<String>)> {
    let lab = set.get(id).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    let params =
        catalog::resolve_params(lab, &args.params).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    let variants: Vec<String> = if args.all_variants {
        lab.variants.iter().map(|v| v.name.clone()).collect()
    } else {
        let name = match &args.variant {
            Some(v) => v.clone(),
            None => lab
                .variants
                .first()
                .map(|v| v.name.clone())
                .unwrap_or_default(),
        };
        lab.find_variant(&name)
            .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
        vec![name]
    };
    Ok((lab, params, variants))
}

/// What was predicted before a variant's run: its claims' outcomes, and the
/// ranges of values its claims read.
#[derive(Default)]
pub(super) struct Foretold {
    pub claims: Vec<(String, Predicted)>,
    pub estimates: Vec<(String, f64, f64)>,
}

impl Foretold {
    /// What was said of the claims that apply to `variant` and of the values
    /// they read.
    fn in_variant(&self, lab: &Lab, variant: &str) -> Foretold {
        Foretold {
            claims: self
                .claims
                .iter()
                .filter(|(claim, _)| {
                    lab.claims
                        .iter()
                        .any(|c| c.name == *claim && c.applies_to(variant))
                })
                .cloned()
                .collect(),
            estimates: self
                .estimates
                .iter()
                .filter(|(value, ..)| reads(lab, variant, value))
                .cloned()
                .collect(),
        }
    }
}

/// Whether a claim of `lab` that applies to `variant` reads `value`
/// (`host_ms(wait)`): a metric with its argument, as the claim's values
/// name it.
fn reads(lab: &Lab, variant: &str, value: &str) -> bool {
    values_read(lab, &[variant.to_string()])
        .iter()
        .any(|v| v == value)
}

/// The values (metrics with their argument) the claims of `lab` read in
/// `variants`, sorted, each once.
fn values_read(lab: &Lab, variants: &[String]) -> Vec<String> {
    let mut out: Vec<String> = lab
        .claims
        .iter()
        .filter(|c| variants.iter().any(|v| c.applies_to(v)))
        .flat_map(|c| std::iter::once(&c.expr).chain(&c.requires))
        .flat_map(|e| e.metrics())
        .filter(|(_, arg)| !arg.is_empty())
        .map(|(name, arg)| format!("{name}({arg})"))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `VALUE=LO..HI` of `--predict`: a range of a value a claim reads, in that
/// value's own unit.
fn estimate(
    lab: &Lab,
    variants: &[String],
    pair: &str,
    value: &str,
    range: &str,
) -> anyhow::Result<(String, f64, f64)> {
    let bad = |why: String| fail(EXIT_USAGE, format!("--predict {pair}: {why}"));
    if !variants.iter().any(|v| reads(lab, v, value)) {
        return Err(bad(format!(
            "no claim of {} reads `{value}` in {}; the values they read: {}",
            lab.id,
            variants.join(", "),
            values_read(lab, variants).join(", ")
        )));
    }
    let number = |s: &str| s.trim().parse::<f64>().ok().filter(|n| n.is_finite());
    let Some((lo, hi)) = range
        .split_once("..")
        .and_then(|(lo, hi)| Some((number(lo)?, number(hi)?)))
    else {
        return Err(bad(format!(
            "`{range}` is not a range: write LO..HI, two numbers in the value's unit (`150..250`)"
        )));
    };
    if lo > hi {
        return Err(bad(format!("the range {lo}..{hi} runs backwards")));
    }
    Ok((value.to_string(), lo, hi))
}

/// `--predict CLAIM=OUTCOME[,...]`, each claim one of the lab's that applies
/// to a variant run, and `VALUE=LO..HI`, a range of a value one of them
/// reads; the latest word for a claim or a value stands.
fn predictions(lab: &Lab, variants: &[String], said: &[String]) -> anyhow::Result<Foretold> {
    let mut out: Vec<(String, Predicted)> = Vec::new();
    let mut estimates: Vec<(String, f64, f64)> = Vec::new();
    for pair in said
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|p| !p.trim().is_empty())
    {
        if let Some((value, range)) = pair.split_once('=').filter(|(v, _)| v.contains('(')) {
            let made = estimate(lab, variants, pair, value.trim(), range)?;
            estimates.retain(|(v, ..)| *v != made.0);
            estimates.push(made);
            continue;
        }
        let Some((claim, outcome)) = pair.split_once('=') else {
            return Err(fail(
                EXIT_USAGE,
                format!(
                    "--predict {pair}: write CLAIM=OUTCOME (`holds`, `does_not_hold` or `not_sure`)"
                ),
            ));
        };
        let (claim, outcome) = (claim.trim(), outcome.trim());
        let words = outcome.replace(['-', ' '], "_");
        let Some(p) = Predicted::parse(&words) else {
            return Err(fail(
                EXIT_USAGE,
                format!(
                    "--predict {pair}: `{outcome}` is not an outcome: `holds`, `does_not_hold` or `not_sure`"
                ),
            ));
        };
        let applies = lab
            .claims
            .iter()
            .any(|c| c.name == claim && variants.iter().any(|v| c.applies_to(v)));
        if !applies {
            let names: Vec<&str> = lab
                .claims
                .iter()
                .filter(|c| variants.iter().any(|v| c.applies_to(v)))
                .map(|c| c.name.as_str())
                .collect();
            return Err(fail(
                EXIT_USAGE,
                format!(
                    "--predict {pair}: {} has no claim `{claim}` in {}; its claims there: {}",
                    lab.id,
                    variants.join(", "),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
        out.retain(|(c, _)| c != claim);
        out.push((claim.to_string(), p));
    }
    Ok(Foretold {
        claims: out,
        estimates,
    })
}

/// The reports of the runs, as asked: JSON always lists them; text and
/// Markdown show two or more side by side first.
/// `--record -` holds one run: several variants' recordings need files.
fn one_stdout_recording(args: &RunArgs, variants: usize) -> anyhow::Result<()> {
    if variants > 1 && args.record.as_deref().is_some_and(is_stdout) {
        return Err(fail(
            EXIT_USAGE,
            "--all-variants writes a recording per variant: --record FILE, not stdout",
        ));
    }
    Ok(())
}

/// The reports, to stdout; to stderr when stdout carries the recording
/// (`--record -`).
fn print_reports(summaries: &[Summary], format: Format, to_stderr: bool) -> anyhow::Result<()> {
    let mut text = String::new();
    if format.json {
        // Always the list of runs, one variant or all, however many ran before a
        // Ctrl-C.
        text.push_str(&json(Body::Run(Runs { runs: summaries }))?);
    } else if format.jsonl {
        for s in summaries {
            text.push_str(&super::report::render(s, format)?);
        }
    } else if summaries.len() > 1 {
        if !format.markdown {
            text.push_str(&format!(
                "{}\n\n",
                report::printable(&report::side_by_side(summaries))
            ));
        }
        for s in summaries {
            text.push_str(&super::report::render(s, format)?);
            text.push('\n');
        }
    } else if let Some(s) = summaries.first() {
        text.push_str(&super::report::render(s, format)?);
    }
    if to_stderr {
        super::write_stderr(&text);
    } else {
        out!("{text}");
    }
    Ok(())
}

/// Refuses early, with exit 3, a CUDA lab on a machine without the CUDA driver
/// library. Only the library's presence is checked here (libloading, no cuInit):
/// whether a device exists is the worker's to find out, as the parent never
/// initialises a GPU API (NVIDIA's OpenCL then failed to appear in the worker on
/// the H100 machine).
fn check_backend(lab: &Lab) -> anyhow::Result<()> {
    match lab.backend {
        BackendKind::OpenCl => Ok(()),
        BackendKind::Cuda => gpulab::backend::cuda::load::driver_present().map_err(|e| {
            fail(
                EXIT_UNAVAILABLE,
                format!(
                    "{}: {e}\n`gpulab doctor` shows what CUDA support this machine has",
                    lab.id
                ),
            )
        }),
    }
}

/// A worker that failed before its first event found no device to run on (the
/// parent validated the lab and its parameters already).
fn never_started(run: &Run) -> Option<String> {
    match (&run.meta(), run.end().map(|e| &e.status)) {
        (None, Some(EndStatus::Failed { error, .. })) => Some(error.clone()),
        (None, Some(EndStatus::Crashed { detail, .. })) => Some(detail.clone()),
        _ => None,
    }
}

fn record_path(base: &Path, variant: &str, several: bool) -> PathBuf {
    if !several {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    let ext = base
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    base.with_file_name(format!("{stem}--{variant}{ext}"))
}

/// `gpulab: [2/3] cl-event-wait [finish]`: which of several variants runs
/// now, as cargo counts its steps.
fn say_step(i: usize, variants: &[String], lab: &str) {
    if variants.len() > 1 {
        errln!(
            "gpulab: [{}/{}] {lab} [{}]",
            i + 1,
            variants.len(),
            variants[i]
        );
    }
}

/// Runs one variant to its end, folded and (with `record`) recorded as its
/// events come.
pub(super) fn run_variant(
    source: &LocalSource,
    req: RunRequest,
    step: bool,
    record: Option<Recorder>,
    predicted: &Foretold,
    cancel: &AtomicBool,
) -> anyhow::Result<Session> {
    let (lab, variant) = (req.lab.id.clone(), req.variant_name().to_string());
    let mut keeper = Keeper::new(Some(req.lab.clone()));
    if let Some(r) = record {
        keeper.record_to(r);
    }
    gpulab::clock::phase("worker start");
    let mut handle = RunHandle::start(source, Workload::Lab(Box::new(req)))?;
    let stepper = step.then(spawn_stepper);
    let progress = std::io::stderr().is_terminal() && !step;
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let mut session = Session::new(keeper);
    loop {
        if cancel.load(Ordering::SeqCst) {
            handle.cancel();
        }
        if let Some(rx) = &stepper {
            while let Ok(cmd) = rx.try_recv() {
                match cmd {
                    StepKey::Next => handle.step(),
                    StepKey::Continue => handle.run_to_end(),
                    StepKey::Quit => handle.cancel(),
                }
            }
        }
        match handle.events.recv_timeout(Duration::from_millis(100)) {
            Ok(batch) => {
                for event in batch {
                    if step {
                        show_step(&session.run, &event);
                    }
                    // The predictions were made before the run: they follow
                    // its header, before its first line.
                    let mut after = Prediction::after(&event, &predicted.claims);
                    after.extend(Estimate::after(&event, &predicted.estimates));
                    session.apply(event);
                    for e in after {
                        session.apply(e);
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if progress
            && started.elapsed() > Duration::from_secs(1)
            && last_progress.elapsed() > Duration::from_millis(250)
        {
            last_progress = Instant::now();
            let line = session
                .run
                .calls()
                .last()
                .and_then(|c| c.line)
                .map(|l| format!("line {l}"))
                .unwrap_or_default();
            super::write_stderr_raw(&format!(
                "\r\x1b[2K{} [{}] running · {line} · {:.1} s",
                gpulab::report::printable(&lab),
                gpulab::report::printable(&variant),
                started.elapsed().as_secs_f64()
            ));
        }
    }
    gpulab::clock::phase("run ended");
    // The lab's claims, judged on this session's fold.
    session.close();
    if progress && started.elapsed() > Duration::from_secs(1) {
        super::write_stderr_raw("\r\x1b[2K");
    }
    Ok(session)
}

/// Finishes each session and its `--record` file; says each file that could
/// not be written, and with several (`--all-variants`, whose file names gpulab
/// made from the one given) each that was.
fn finish_recordings(sessions: Vec<Session>) -> (Vec<Run>, Vec<String>) {
    let several = sessions.iter().filter(|s| s.records()).count() > 1;
    let mut unwritten = Vec::new();
    let mut runs = Vec::new();
    for session in sessions {
        let (run, recorded) = session.finish();
        for recorded in recorded {
            match &recorded {
                Recorded::Whole(path) if several => {
                    errln!("gpulab: recorded {}", path.display());
                }
                Recorded::Removed(_) => {
                    if let Some(problem) = recorded.problem() {
                        errln!("gpulab: {problem}");
                    }
                }
                Recorded::Partial { .. } => {
                    if let Some(problem) = recorded.problem() {
                        unwritten.push(format!(
                            "{problem}; the run's report is printed all the same"
                        ));
                    }
                }
                Recorded::Whole(_) => {}
            }
        }
        runs.push(run);
    }
    (runs, unwritten)
}

enum StepKey {
    Next,
    Continue,
    Quit,
}

fn spawn_stepper() -> std::sync::mpsc::Receiver<StepKey> {
    let (tx, rx) = std::sync::mpsc::channel();
    errln!("step mode: Enter runs the next line · c + Enter runs to the end · q + Enter stops");
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let key = match line.trim() {
                "c" => StepKey::Continue,
                "q" => StepKey::Quit,
                _ => StepKey::Next,
            };
            if tx.send(key).is_err() {
                return;
            }
        }
        // Nobody can press Enter any more: a paused run would wait forever.
        if tx.send(StepKey::Continue).is_ok() {
            errln!("step mode: stdin closed, running the rest of the lab without stepping");
        }
    });
    rx
}

/// In step mode: each call as it happens, then what comes next (the lab file's
/// text made `printable`).
fn show_step(run: &Run, event: &Event) {
    let show = |t: &str| report::printable(t).into_owned();
    let script = run
        .meta()
        .as_ref()
        .and_then(|m| m.lab.as_ref())
        .map(|l| l.script.clone())
        .unwrap_or_default();
    match event {
        Event::Meta(m) => {
            if let Some(first) = m.lab.as_ref().and_then(|l| l.script.first()) {
                errln!("next  {:>4}  {}", first.0, show(&first.1));
            }
        }
        Event::Call(c) => {
            let result = match &c.status {
                CallStatus::Ok | CallStatus::Directive => "ok".to_string(),
                CallStatus::Error { name, .. } => name.clone(),
            };
            let mem = match (c.mem_before, c.mem_after) {
                (Some(b), Some(a)) => format!("{:+.1} MiB", (a as f64 - b as f64) / 1048576.0),
                _ => String::new(),
            };
            errln!(
                "done  {:>4}  {:<48} {:<10} {:>9.3} ms  {mem}",
                c.line.unwrap_or(0),
                show(
                    script
                        .iter()
                        .find(|(l, _)| Some(*l) == c.line)
                        .map(|(_, t)| t.as_str())
                        .unwrap_or(&c.api)
                ),
                result,
                (c.end_ns - c.begin_ns) as f64 / 1e6
            );
            if let Some(pos) = script.iter().position(|(l, _)| Some(*l) == c.line)
                && let Some((l, t)) = script.get(pos + 1)
            {
                errln!("next  {l:>4}  {}", show(t));
            }
        }
        Event::Note(n) => errln!("note  {}", show(&n.text)),
        _ => {}
    }
}

/// The exit status of `gpulab run`: 128 + the signal when cancelled, 4 when a run failed
/// (unless its failure is the lab's finding), else 1 when `--fail-on` matched a
/// verdict, else 0.
fn exit_code(runs: &[Run], fail_on: &[FailOn]) -> i32 {
    let mut code = EXIT_OK;
    for run in runs {
        match run.end().map(|e| &e.status) {
            Some(EndStatus::Cancelled) => return gpulab::signals::cancelled_status(),
            Some(EndStatus::TimedOut { .. }) => code = EXIT_TIMED_OUT,
            // The failure the lab (or --until-failure) went looking for: a
            // finding, which the report states, not a run that broke down.
            Some(EndStatus::Failed { .. }) if run.finding().is_some_and(|f| f.explains_end()) => {}
            Some(
                EndStatus::Failed { .. } | EndStatus::Crashed { .. } | EndStatus::Exited { .. },
            )
            | None => code = code.max(EXIT_ERROR),
            Some(EndStatus::Finished) => {}
        }
    }
    if code != EXIT_OK {
        return code;
    }
    let hit = runs.iter().flat_map(|r| r.claims().iter()).any(|c| {
        fail_on.iter().any(|f| {
            matches!(
                (f, c.verdict),
                (FailOn::DoesNotHold, Verdict::DoesNotHold)
                    | (FailOn::Inconclusive, Verdict::Inconclusive)
            )
        })
    });
    if hit { EXIT_VERDICT } else { EXIT_OK }
}
