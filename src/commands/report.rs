//! `gpulab report FILE`: the report of a recorded run, exactly as `run` prints it.

use std::path::Path;

use anyhow::Context;

use gpulab::report::{self, Summary};
use gpulab::run::Run;
use gpulab::trace::read_recording;

use super::{EXIT_OK, EXIT_USAGE, fail};
use crate::cli::Format;

pub fn report(file: &Path, format: Format) -> anyhow::Result<i32> {
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let rec = read_recording(std::io::BufReader::new(f))
        .map_err(|e| fail(EXIT_USAGE, format!("{}: {e}", file.display())))?;
    // A damaged recording still shows what it holds; each skipped line is named.
    for p in &rec.problems {
        eprintln!("gpulab: {}: {p}", file.display());
    }
    let run = Run::from_events(&rec.events);
    print!("{}", render(&Summary::of(&run), format)?);
    Ok(EXIT_OK)
}

pub fn render(s: &Summary, format: Format) -> anyhow::Result<String> {
    Ok(if format.json {
        serde_json::to_string_pretty(s)? + "\n"
    } else if format.markdown {
        report::markdown(s)
    } else {
        report::text(s)
    })
}
