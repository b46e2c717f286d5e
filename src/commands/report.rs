//! `gpulab report FILE`: the report of a recorded run, exactly as `run` prints it.

use std::path::Path;

use gpulab::report::{self, Summary};
use gpulab::run::Run;
use gpulab::trace::stream_recording;
use gpulab::watch::report::WatchReport;

use super::{EXIT_OK, EXIT_USAGE, fail};
use crate::cli::Format;

pub fn report(file: &Path, format: Format) -> anyhow::Result<i32> {
    let run = load(file)?;
    if run.meta.as_ref().is_some_and(|m| m.watch.is_some()) {
        // A watched program, not a lab: the same report `gpulab watch` printed.
        print!("{}", watch_report(&run, &format)?);
    } else {
        print!("{}", render(&Summary::of(&run), format)?);
    }
    Ok(EXIT_OK)
}

/// A recording as a Run, folded as it is read (the events are not kept beside
/// it, and the Run keeps its bounded window of them). A damaged recording still
/// shows what it holds; each skipped line is named on stderr.
pub fn load(file: &Path) -> anyhow::Result<Run> {
    load_into(file, Run::default())
}

/// A recording folded into `run` (`Run::keeping_all` for what draws every call).
pub fn load_into(file: &Path, mut run: Run) -> anyhow::Result<Run> {
    let f = std::fs::File::open(file)
        .map_err(|e| fail(EXIT_USAGE, format!("cannot open {}: {e}", file.display())))?;
    let problems = stream_recording(std::io::BufReader::new(f), |e| run.apply(&e))
        .map_err(|e| fail(EXIT_USAGE, format!("{}: {e}", file.display())))?;
    for p in &problems {
        eprintln!(
            "gpulab: {}: {}",
            file.display(),
            report::printable(&p.to_string())
        );
    }
    Ok(run)
}

pub fn watch_report(run: &Run, format: &Format) -> anyhow::Result<String> {
    let r = WatchReport::from_run(run);
    Ok(if format.json {
        serde_json::to_string_pretty(&r)? + "\n"
    } else if format.markdown {
        report::printable(&r.markdown()).into_owned()
    } else {
        report::printable(&r.text()).into_owned()
    })
}

/// A lab run's report. Text and Markdown go to a terminal: every string in them
/// that came from a recording or a lab file is made `printable` (JSON escapes
/// control characters itself).
pub fn render(s: &Summary, format: Format) -> anyhow::Result<String> {
    Ok(if format.json {
        serde_json::to_string_pretty(s)? + "\n"
    } else if format.markdown {
        report::printable(&report::markdown(s)).into_owned()
    } else {
        report::printable(&report::text(s)).into_owned()
    })
}
