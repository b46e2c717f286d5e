//! `gpulab export FILE`: a recording for Perfetto (`--chrome`), for a slide
//! (`--svg`, `--png`, optionally `--compare OTHER` stacked beneath) or as a page to
//! share (`--html`). `-` as OUT writes to stdout.

use std::io::Write;
use std::path::{Path, PathBuf};

use gpulab::export::{chrome, figure, html};
use gpulab::lab::LabSet;
use gpulab::run::Run;

use super::{EXIT_OK, EXIT_USAGE, fail};
use crate::cli::{ExportArgs, Format};

pub fn export(labs: &[PathBuf], args: &ExportArgs) -> anyhow::Result<i32> {
    let outputs = [&args.chrome, &args.svg, &args.png, &args.html];
    if outputs.iter().all(|o| o.is_none()) {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "export needs an output: one of {}",
                OUTPUTS.map(|o| format!("--{o} OUT")).join(", ")
            ),
        ));
    }
    if args.compare.is_some() && args.html.is_some() {
        return Err(fail(
            EXIT_USAGE,
            "--compare draws figures (--svg, --png) and traces (--chrome); a page holds one run",
        ));
    }
    // A trace, a figure and a page draw every call and span of the run, not a window.
    let run = super::report::load_into(&args.file, Run::keeping_all())?;
    let other = args
        .compare
        .as_deref()
        .map(|f| super::report::load_into(f, Run::keeping_all()))
        .transpose()?;
    let runs: Vec<_> = std::iter::once(&run).chain(other.as_ref()).collect();
    if let Some(out) = &args.chrome {
        let mut text = Vec::new();
        chrome::write_all(&runs, &mut text)?;
        write(out, &text)?;
    }
    if args.svg.is_some() || args.png.is_some() {
        let svg = figure::svg(&runs);
        if let Some(out) = &args.svg {
            write(out, svg.as_bytes())?;
        }
        if let Some(out) = &args.png {
            write(out, &figure::png(&svg)?)?;
        }
    }
    if let Some(out) = &args.html {
        let watched = run.meta.as_ref().is_some_and(|m| m.watch.is_some());
        let watch_report = if watched {
            Some(super::report::watch_report(&run, &Format::default())?)
        } else {
            None
        };
        // A recording holds the lab's script but not its teaching text: that comes
        // from the lab file of the same id, shipped or in --labs.
        let set = LabSet::load(labs);
        let lab = run.lab_id().and_then(|id| set.get(id).ok());
        if let (Some(id), None) = (run.lab_id(), lab) {
            eprintln!(
                "gpulab: no lab file for {}: the page has no teaching text",
                gpulab::report::printable(id)
            );
        }
        let page = html::page(
            &run,
            html::Extras {
                teaching: lab.map(|l| &l.teaching),
                watch_report: watch_report.as_deref(),
            },
        );
        write(out, page.as_bytes())?;
    }
    Ok(EXIT_OK)
}

/// What `export` can write, as its options name them.
const OUTPUTS: [&str; 4] = ["chrome", "svg", "png", "html"];

/// An output path that cannot be written is the caller's to fix (exit 2); `-` is
/// stdout.
fn write(out: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if out == Path::new("-") {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(bytes)?;
        stdout.flush()?;
        return Ok(());
    }
    std::fs::write(out, bytes)
        .map_err(|e| fail(EXIT_USAGE, format!("cannot write {}: {e}", out.display())))?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
