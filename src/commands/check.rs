//! `gpulab check FILE...`: validate lab files, every mistake with its place.

use std::io::IsTerminal;
use std::path::PathBuf;

use gpulab::lab::{LabError, catalog};

use super::{EXIT_OK, EXIT_USAGE};

pub fn check(files: &[PathBuf]) -> anyhow::Result<i32> {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut bad = 0;
    for f in files {
        match catalog::load_file(f) {
            Ok(lab) => println!(
                "ok    {} ({}, {} variant(s), {} claim(s))",
                f.display(),
                lab.id,
                lab.variants.len(),
                lab.claims.len()
            ),
            Err(LabError::Invalid(d)) => {
                bad += 1;
                for mistake in std::iter::once(d.as_ref()).chain(&d.more) {
                    eprintln!("{}", mistake.render(color));
                }
            }
            Err(e) => {
                bad += 1;
                eprintln!("{}: {e}", f.display());
            }
        }
    }
    Ok(if bad == 0 { EXIT_OK } else { EXIT_USAGE })
}
