//! `gpulab export FILE`: a recording for Perfetto (`--chrome`) or for a slide
//! (`--svg`, `--png`, optionally `--compare OTHER` side by side).

use std::path::Path;

use gpulab::export::{chrome, figure};
use gpulab::run::Run;

use super::{EXIT_OK, EXIT_USAGE, fail};

pub fn export(
    file: &Path,
    chrome_out: Option<&Path>,
    svg_out: Option<&Path>,
    png_out: Option<&Path>,
    compare: Option<&Path>,
) -> anyhow::Result<i32> {
    if chrome_out.is_none() && svg_out.is_none() && png_out.is_none() {
        return Err(fail(
            EXIT_USAGE,
            format!(
                "export needs an output: one of {}",
                OUTPUTS.map(|o| format!("--{o} OUT")).join(", ")
            ),
        ));
    }
    // A trace and a figure draw every call and span of the run, not a window.
    let run = super::report::load_into(file, Run::keeping_all())?;
    if let Some(out) = chrome_out {
        if compare.is_some() {
            return Err(fail(
                EXIT_USAGE,
                "--compare draws figures; a Chrome trace holds one run",
            ));
        }
        let mut text = Vec::new();
        chrome::write(&run, &mut text)?;
        write(out, &text)?;
    }
    if svg_out.is_some() || png_out.is_some() {
        let other = compare
            .map(|f| super::report::load_into(f, Run::keeping_all()))
            .transpose()?;
        let runs: Vec<_> = std::iter::once(&run).chain(other.as_ref()).collect();
        let svg = figure::svg(&runs)?;
        if let Some(out) = svg_out {
            write(out, svg.as_bytes())?;
        }
        if let Some(out) = png_out {
            write(out, &figure::png(&svg)?)?;
        }
    }
    Ok(EXIT_OK)
}

/// What `export` can write, as its options name them.
const OUTPUTS: [&str; 3] = ["chrome", "svg", "png"];

/// An output path that cannot be written is the caller's to fix (exit 2).
fn write(out: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(out, bytes)
        .map_err(|e| fail(EXIT_USAGE, format!("cannot write {}: {e}", out.display())))?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
