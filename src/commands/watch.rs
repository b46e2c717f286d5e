//! `gpulab watch -- CMD`: run the program with the agent inside, pass its output
//! and exit status through, and print what it left alive.

use std::io::Write;
use std::sync::atomic::Ordering;

use anyhow::Context;
use gpulab::run::Run;
use gpulab::trace::{self, Event};
use gpulab::watch::{self, WatchRequest};

use super::{EXIT_USAGE, fail};
use crate::cli::WatchArgs;

pub fn watch(args: &WatchArgs) -> anyhow::Result<i32> {
    if !(args.sample_hz > 0.0 && args.sample_hz <= 10_000.0) {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "--sample-hz {} is not a rate between 0 and 10000",
                args.sample_hz
            ),
        ));
    }
    let mut recorder = match &args.record {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => None,
    };
    let watching = watch::start(&WatchRequest {
        command: args.command.clone(),
        sample_hz: args.sample_hz,
    })
    .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    // Ctrl-C reaches the program too (same terminal); SIGTERM to gpulab alone is
    // passed on after a grace period. Either way the report still comes.
    let stop = watching.stop_switch();
    let _ = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst));

    let mut run = Run::default();
    let mut recorded: Vec<Event> = Vec::new();
    for event in watching.events.iter() {
        if recorder.is_some() {
            recorded.push(event.clone());
        }
        run.apply(&event);
    }
    if let Some(w) = &mut recorder {
        for event in trace::decimate::decimate(&recorded) {
            w.write_all(trace::to_line(event).as_bytes())?;
        }
        w.flush()?;
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
