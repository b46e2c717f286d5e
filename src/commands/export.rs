//! `gpulab export FILE`: a recording for Perfetto (`--chrome`), for a slide
//! (`--svg`, `--png`, optionally `--compare OTHER` stacked beneath) or as a page to
//! share (`--html`). `-` as OUT writes to stdout; `-` as FILE reads stdin.

use std::cell::Cell;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use gpulab::export::{chrome, figure, html};
use gpulab::lab::Lab;
use gpulab::trace::{Event, stream_recording};
use gpulab::verdict::LessonFill;

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
    // Every export streams the recordings, each read more than once, never
    // held whole.
    let set = super::load_labs(labs);
    let stdin = Path::new("-");
    if args.file == stdin && args.compare.as_deref() == Some(stdin) {
        return Err(fail(
            EXIT_USAGE,
            "only one of the two recordings can come from stdin (`-`)".to_string(),
        ));
    }
    let recordings: Vec<_> = std::iter::once(args.file.as_path())
        .chain(args.compare.as_deref())
        .map(|p| recording(p, set.labs()))
        .collect::<anyhow::Result<_>>()?;
    if let Some(out) = &args.chrome {
        chrome_trace(&recordings, out)?;
    }
    if args.svg.is_some() || args.png.is_some() {
        let svg = figure::svg(&recordings).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
        if let Some(out) = &args.svg {
            write(out, svg.as_bytes())?;
        }
        if let Some(out) = &args.png {
            write(out, &figure::png(&svg)?)?;
        }
    }
    if let (Some(out), Some(_)) = (&args.html, &args.compare) {
        // Two recordings on one page: the lab's teaching text once.
        let (a, b) = html::Page::read_pair(&recordings[0], &recordings[1])
            .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
        let lab = a.run().lab_id().and_then(|id| set.get(id).ok());
        let page = html::compare(
            &a,
            &b,
            html::Extras {
                teaching: lab.map(|l| &l.teaching),
                watch_report: None,
            },
        );
        write(out, page.as_bytes())?;
    } else if let Some(out) = &args.html {
        let page = html::Page::read(&recordings[0]).map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
        let run = page.run();
        let watched = run.meta().is_some_and(|m| m.watch.is_some());
        let watch_report = if watched {
            Some(super::report::watch_report(run, &Format::default())?)
        } else {
            None
        };
        // A recording holds the lab's script but not its teaching text: that comes
        // from the lab file of the same id, shipped or in --labs.
        let lab = run.lab_id().and_then(|id| set.get(id).ok());
        if let (Some(id), None) = (run.lab_id(), lab) {
            errln!(
                "gpulab: no lab file for {}: the page has no teaching text",
                gpulab::report::printable(id)
            );
        }
        let page = page.html(html::Extras {
            teaching: lab.map(|l| &l.teaching),
            watch_report: watch_report.as_deref(),
        });
        write(out, page.as_bytes())?;
    }
    Ok(EXIT_OK)
}

/// A recording file as an export reads it: a function that hands over its events
/// in order, from the start, each time it is called. A damaged line is named on
/// stderr once, by the first read. Claims recorded without the lesson's
/// expectation get it from `labs`. `-` is stdin, read once and held (a pipe
/// cannot be read from the start again; a file is streamed each time).
fn recording<'l>(
    path: &Path,
    labs: &'l [Lab],
) -> anyhow::Result<impl Fn(&mut dyn FnMut(Event)) -> std::io::Result<()> + 'l> {
    let path = path.to_path_buf();
    let held = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)
            .map_err(|e| fail(EXIT_USAGE, format!("cannot read stdin: {e}")))?;
        Some(std::rc::Rc::new(bytes))
    } else {
        None
    };
    let first = Cell::new(true);
    Ok(move |each: &mut dyn FnMut(Event)| -> std::io::Result<()> {
        let input: Box<dyn std::io::BufRead> = match &held {
            Some(bytes) => Box::new(std::io::Cursor::new(bytes.as_slice())),
            None => Box::new(BufReader::new(File::open(&path).map_err(|e| {
                std::io::Error::other(format!("cannot open {}: {e}", path.display()))
            })?)),
        };
        let mut lessons = LessonFill::new(labs);
        let problems = stream_recording(input, |mut e| {
            lessons.fill(&mut e);
            each(e);
        })
        .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        if first.replace(false) {
            for p in &problems {
                errln!(
                    "gpulab: {}: {}",
                    path.display(),
                    gpulab::report::printable(&p.to_string())
                );
            }
        }
        Ok(())
    })
}

/// The Chrome trace of the recordings (the second a `--compare`), streamed.
fn chrome_trace<R>(recordings: &[R], out: &Path) -> anyhow::Result<()>
where
    R: Fn(&mut dyn FnMut(Event)) -> std::io::Result<()>,
{
    let trace = chrome::Trace::outline(recordings.iter().collect())
        .map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    if out == Path::new("-") {
        // A closed pipe (`| head`) is a quiet end, 141, as for every output.
        trace
            .write(std::io::stdout().lock())
            .map_err(super::StdoutError)?;
        return Ok(());
    }
    // Whole or not at all: a full disk leaves no half trace under the name.
    gpulab::dirs::write_atomic_with(out, |f| trace.write(f))
        .map_err(|e| fail(EXIT_USAGE, format!("cannot write {}: {e}", out.display())))?;
    errln!("wrote {}", out.display());
    Ok(())
}

/// What `export` can write, as its options name them.
const OUTPUTS: [&str; 4] = ["chrome", "svg", "png", "html"];

/// An output path that cannot be written is the caller's to fix (exit 2); `-` is
/// stdout.
fn write(out: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if out == Path::new("-") {
        // A closed pipe (`| head`) is a quiet end, 141, as for every output.
        super::write_stdout_bytes(bytes)?;
        return Ok(());
    }
    gpulab::dirs::write_atomic_with(out, |f| std::io::Write::write_all(f, bytes))
        .map_err(|e| fail(EXIT_USAGE, format!("cannot write {}: {e}", out.display())))?;
    errln!("wrote {}", out.display());
    Ok(())
}
