//! `gpulab replay FILE`: the dashboard on a recorded run, playing from the start.
//! Damaged lines are named on stderr and the rest plays. Without a terminal (a
//! pipe, CI) it prints the report of what it could read, as `gpulab report` does.

use std::path::Path;

use gpulab::report::Summary;
use gpulab::run::Run;
use gpulab::trace::read_recording;

use super::{EXIT_OK, EXIT_USAGE, dashboard, fail};
use crate::cli::{Cli, Format};

pub fn replay(cli: &Cli, file: &Path) -> anyhow::Result<i32> {
    // `-` is stdin (`gpulab run … --record - | gpulab replay -`): the dashboard
    // then reads its keys from the terminal itself.
    let from_stdin = file == Path::new("-");
    let input: Box<dyn std::io::BufRead> = if from_stdin {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| fail(EXIT_USAGE, format!("cannot open {}: {e}", file.display())))?;
        Box::new(std::io::BufReader::new(f))
    };
    let rec =
        read_recording(input).map_err(|e| fail(EXIT_USAGE, format!("{}: {e}", file.display())))?;
    for p in &rec.problems {
        errln!("gpulab: {}: skipped {p}", file.display());
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        outln!(
            "replayed {}: {} events{}",
            file.display(),
            rec.events.len(),
            match rec.problems.len() {
                0 => String::new(),
                n => format!(", {n} damaged line(s) skipped"),
            }
        );
        let run = Run::from_events(&rec.events);
        // A watched program's recording gets the report `gpulab watch` printed,
        // as `gpulab report` gives it; a lab's, the lab's.
        let report = if run.meta().is_some_and(|m| m.watch.is_some()) {
            super::report::watch_report(&run, &Format::default())?
        } else {
            super::report::render(&Summary::of(&run), Format::default())?
        };
        out!("{report}");
        return Ok(EXIT_OK);
    }
    let set = super::load_labs(&cli.labs);
    let mut app = dashboard::new_app(cli, &set);
    // The recordings beside it are listed too: `c` compares it with another
    // variant run on the same device before any other.
    if !from_stdin {
        for sibling in gpulab::tui::recordings::siblings(file) {
            app.add_recording(sibling);
        }
    }
    let problems: Vec<String> = rec.problems.iter().map(ToString::to_string).collect();
    app.play(file.to_path_buf(), rec.events, &problems);
    dashboard::open(app)
}
