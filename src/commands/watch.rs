//! `gpulab watch -- CMD`: run the program with the agent inside, pass its output
//! and exit status through, and print what it left alive.

use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;

use anyhow::Context;
use gpulab::lab::LabSet;
use gpulab::run::Run;
use gpulab::source::LocalSource;
use gpulab::trace::{self, Event};
use gpulab::tui::{self, app::Msg};
use gpulab::watch::{self, WatchRequest};

use super::{EXIT_USAGE, fail};
use crate::cli::{Cli, WatchArgs};

pub fn watch(cli: &Cli, args: &WatchArgs) -> anyhow::Result<i32> {
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
    let mut recorder = match &args.record {
        Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(
            |e| fail(EXIT_USAGE, format!("cannot create {}: {e}", p.display())),
        )?)),
        None => None,
    };
    // With the dashboard on the terminal, the program's output goes to a file.
    let log = args.dashboard.then(|| {
        args.log.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("gpulab-watch-{}.log", std::process::id()))
        })
    });
    let watching = watch::start(&WatchRequest {
        command: args.command.clone(),
        sample_hz: args.sample_hz,
        output: log.clone(),
        cupti: args.cupti.clone(),
        device_spans: args.device_spans,
        backtrace: args.backtrace,
    })
    .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    // Ctrl-C reaches the program too (same terminal); SIGTERM to gpulab alone is
    // passed on after a grace period. Either way the report still comes.
    let stop = watching.stop_switch();
    let events = if args.dashboard {
        live(cli, args, watching)?
    } else {
        let _ = gpulab::signals::on_termination(move || stop.store(true, Ordering::SeqCst));
        watching.events.iter().collect()
    };

    let mut run = Run::default();
    for event in &events {
        run.apply(event);
    }
    if let Some(w) = &mut recorder {
        for event in trace::decimate::decimate(&events) {
            w.write_all(trace::to_line(event).as_bytes())?;
        }
        w.flush()?;
    }
    if let Some(log) = &log {
        eprintln!("gpulab: the program's output is in {}", log.display());
    }

    let report = super::report::watch_report(&run, &args.format)?;
    if let Some(path) = &args.output {
        std::fs::write(path, &report)
            .with_context(|| format!("cannot write {}", path.display()))?;
    } else if args.format.json || args.format.markdown {
        print!("{report}");
    } else {
        // The program's own output went to stdout; the report goes beside it.
        eprint!("\n{report}");
    }
    Ok(exit_code(&run))
}

/// The dashboard on the watched program, live, until the user quits; then the
/// program is asked to stop (if it still runs) and every event it sent is
/// returned, for the report and the recording.
fn live(cli: &Cli, args: &WatchArgs, watching: watch::Watching) -> anyhow::Result<Vec<Event>> {
    let set = LabSet::load(&cli.labs);
    let mut app = super::dashboard::new_app(cli, &set);
    let (slot, epoch) = app.watch(&args.command.join(" "));
    let stop = watching.stop_switch();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let source = LocalSource::new()?;
    tui::terminal::open_fed(app, &source, move |tx| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            for event in watching.events.iter() {
                // The dashboard may be gone already: the events still count.
                let _ = tx.send(Msg::Run {
                    slot,
                    epoch,
                    events: vec![event.clone()],
                });
                all.push(event);
            }
            let _ = tx.send(Msg::Closed {
                slot,
                epoch,
                error: None,
            });
            let _ = done_tx.send(all);
        });
    })?;
    // Quitting the dashboard stops the program: SIGTERM after a grace period.
    stop.store(true, Ordering::SeqCst);
    eprintln!("gpulab: waiting for the program to end…");
    Ok(done_rx.recv().unwrap_or_default())
}

/// The program's own exit status; 128 + n for a signal, as a shell reports it.
fn exit_code(run: &Run) -> i32 {
    use gpulab::trace::EndStatus;
    match run.end.as_ref().map(|e| &e.status) {
        Some(EndStatus::Finished) => 0,
        Some(EndStatus::Exited { code }) => *code,
        Some(EndStatus::Crashed {
            signal: Some(sig), ..
        }) => 128 + sig,
        _ => super::EXIT_ERROR,
    }
}
