//! `gpulab check FILE...`: validate lab files, every mistake with its place.

use std::io::IsTerminal;
use std::path::PathBuf;

use gpulab::lab::{LabError, catalog};

use super::{EXIT_OK, EXIT_USAGE};

pub fn check(files: &[PathBuf], color: gpulab::color::Choice) -> anyhow::Result<i32> {
    // Mistakes go to stderr: its being a terminal is what `auto` asks about.
    let color = gpulab::color::for_stream(color, std::io::stderr().is_terminal());
    let mut bad = 0;
    for f in files {
        match catalog::load_file(f) {
            Ok(lab) => outln!(
                "ok    {} ({}, {} variant(s), {} claim(s))",
                f.display(),
                lab.id,
                lab.variants.len(),
                lab.claims.len()
            ),
            Err(LabError::Invalid(d)) => {
                bad += 1;
                for mistake in std::iter::once(d.as_ref()).chain(&d.more) {
                    let drawn = gpulab::color::printable_styled(&mistake.render(color));
                    super::write_stderr_raw(&format!("{drawn}\n"));
                }
            }
            Err(e) => {
                bad += 1;
                errln!("{}: {e}", f.display());
            }
        }
    }
    Ok(if bad == 0 { EXIT_OK } else { EXIT_USAGE })
}
